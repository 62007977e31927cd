"""Bounds on what a web request may ask for, so no request can start an hour-long computation.

Every numeric argument is bounded: by name where the engine's cost grows with it, otherwise by
a generic cap. Strings are bounded in length, and a value that names a file must lie inside the
directory the server was started with (``scalemodel serve --data-dir DIR``); without one, no
user path is accepted. Each computation also runs under a wall-clock limit (``--timeout``), in
whichever server thread runs it. The numeric bounds come from the one table the CLI also uses
(``specs/data/bounds.toml``): ``web_max`` per argument, ``web_cost`` per command.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..specs.bounds import arg_bound, table
from .forms import Field, FieldError

# dest -> (min, max) for arguments whose cost grows with their value: the web_max of the one
# bounds table the CLI also uses (specs/data/bounds.toml, [arg.*])
LIMITS: dict[str, tuple[float, float]] = {
    dest: arg_bound(dest, web=True) for dest in table()["arg"] if dest not in ("int", "float")}
# per command (and per question for ``answer``): arguments whose memory grows with their value,
# so a request fails with a clear message instead of allocating gigabytes before the time limit
COSTS: dict[str, dict[str, tuple[float, float]]] = {
    cmd: {dest: (lo, hi) for dest, (lo, hi) in args.items()}
    for cmd, args in table()["web_cost"].items()}
GENERIC_INT = arg_bound("int", web=True)[1]
GENERIC_FLOAT = arg_bound("float", web=True)[1]
MAX_STRING = 500
FILE_SUFFIXES = (".json", ".toml", ".csv", ".jsonl", ".txt", ".svg", ".png", ".pdf", ".log")
DEFAULT_TIMEOUT_S = 20.0


def check_strings(fields: list[Field], values: dict[str, str], data_dir: Path | None) -> None:
    for f in fields:
        v = values.get(f.dest)
        if v is None:
            continue
        if len(v) > MAX_STRING:
            raise FieldError(f"{f.label}: at most {MAX_STRING} characters", f.dest)
        if "\x00" in v:
            raise FieldError(f"{f.label}: control characters are not allowed", f.dest)
        if looks_like_path(v):
            values[f.dest] = check_path(f, v, data_dir)


def looks_like_path(v: str) -> bool:
    s = v.strip()
    if not s:
        return False
    if any(c.isspace() for c in s):
        return _exists(s)
    return "/" in s or "\\" in s or s.lower().endswith(FILE_SUFFIXES) or _exists(s)


def _exists(s: str) -> bool:
    try:
        return os.path.exists(s)
    except (OSError, ValueError):
        return False


def check_path(f: Field, v: str, data_dir: Path | None) -> str:
    """The absolute path of a file inside the allowed directory (relative paths are taken
    relative to it), or FieldError."""
    if data_dir is None:
        raise FieldError(f"{f.label}: file paths are not accepted here; use a bundled id, or start "
                         "the server with --data-dir DIR to allow files under DIR", f.dest)
    root = data_dir.resolve()
    p = Path(v)
    target = (p if p.is_absolute() else root / p).resolve()
    if target != root and root not in target.parents:
        raise FieldError(f"{f.label}: {v!r} is outside the allowed directory", f.dest)
    return str(target)


def check_bounds(fields: list[Field], ns: argparse.Namespace) -> None:
    """Bound every numeric value the parser produced."""
    for f in fields:
        v = getattr(ns, f.dest, None)
        if isinstance(v, bool) or v is None:
            continue
        vals = v if isinstance(v, list | tuple) else [v]
        for x in vals:
            if not isinstance(x, int | float):
                continue
            if isinstance(x, float) and not math.isfinite(x):
                raise FieldError(f"{f.label}: must be a finite number", f.dest)
            lo, hi = LIMITS.get(f.dest, (-GENERIC_INT, GENERIC_INT) if isinstance(x, int)
                                else (-GENERIC_FLOAT, GENERIC_FLOAT))
            if not lo <= x <= hi:
                raise FieldError(f"{f.label}: must be between {lo:g} and {hi:g} in the web app, "
                                 f"got {x:g}", f.dest)


def check_costs(path: str, ns: argparse.Namespace, fields: list[Field]) -> None:
    """Bound the arguments listed in ``COSTS`` for this command (``answer``: for this question)."""
    name = f"answer:{getattr(ns, 'id', '')}" if path.startswith("answer/") else path
    labels = {f.dest: f.label for f in fields}
    for dest, (lo, hi) in COSTS.get(name, {}).items():
        v = getattr(ns, dest, None)
        if isinstance(v, int | float) and not isinstance(v, bool) and not lo <= v <= hi:
            raise FieldError(f"{labels.get(dest, dest)}: must be between {lo:g} and {hi:g} in "
                             f"the web app, got {v:g}", dest)


class TimedOut(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the computation after ``seconds``: in the main thread with SIGALRM, in a
    server thread (waitress runs each request in one of its threads) by raising
    :class:`TimedOut` in that thread (``PyThreadState_SetAsyncExc``). Either way the exception
    arrives between two Python bytecodes, so a single long C call (one numpy product) finishes
    first; the engines' loops are Python, so the limit holds to a fraction of a second."""
    if seconds <= 0:
        yield
        return
    msg = f"the computation took longer than the {seconds:g} s limit of the web app"
    if threading.current_thread() is threading.main_thread():
        def on_alarm(signum: int, frame: Any) -> None:
            raise TimedOut(msg)

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        return
    with _thread_deadline(seconds):
        try:
            yield
        except TimedOut:
            raise TimedOut(msg) from None


@contextmanager
def _thread_deadline(seconds: float) -> Iterator[None]:
    import ctypes

    tid = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(tid, ctypes.py_object(TimedOut))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        timer.cancel()
        if state["fired"]:  # fired as the block ended: take back an exception not yet raised
            ctypes.pythonapi.PyThreadState_SetAsyncExc(tid, None)


def bounded(fn: Callable[[], Any], seconds: float) -> Any:
    with time_limit(seconds):
        return fn()
