"""Bounds on what a web request may ask for, so no request can start an hour-long computation.

Every numeric argument is bounded: by name where the engine's cost grows with it, otherwise by
a generic cap. Strings are bounded in length, and a value that names a file must lie inside the
directory the server was started with (``scalemodel serve --data-dir DIR``); without one, no
user path is accepted. Each computation also runs under a wall-clock limit (``--timeout``).
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

from .forms import Field, FieldError

# dest -> (min, max) for arguments whose cost grows with their value
LIMITS: dict[str, tuple[float, float]] = {
    "requests": (1, 50_000),
    "count": (1, 20),
    "gpus": (1, 131_072),
    "context": (1, 2**21),
    "seq_len": (1, 2**21),
    "pool": (1, 2**24),
    "batch": (1, 65_536),
    "micro_batch": (1, 65_536),
    "microbatches": (1, 65_536),
    "tp": (1, 1024),
    "pp": (1, 1024),
    "dp": (1, 131_072),
    "cp": (1, 1024),
    "ep": (1, 1024),
    "vpp": (1, 64),
    "prompt_mean": (1, 2**20),
    "output_mean": (1, 2**20),
    "block": (1, 4096),
    "days": (1e-3, 3650),
}
# per command (and per question for ``answer``): arguments whose memory grows with their value,
# so a request fails with a clear message instead of allocating gigabytes before the time limit
COSTS: dict[str, dict[str, tuple[float, float]]] = {
    "moe/route": {"tokens": (1, 32_768), "experts": (1, 1024), "clusters": (1, 1024),
                  "steps": (1, 20_000)},
    "moe/serve": {"draws": (1, 4096)},
    "gpu/access": {"n": (1, 8192)},
    "reliability/checkpoint": {"trials": (0, 5000)},
    "cluster/simulate": {"jobs": (1, 200_000)},
    "cluster/compare": {"jobs": (1, 200_000)},
    "answer:moe-routing": {"tokens": (1, 32_768)},
    "answer:coalescing-transpose": {"n": (1, 8192)},
}
GENERIC_INT = 10**9
GENERIC_FLOAT = 1e30
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
    """Interrupt the computation after ``seconds`` (main thread only; elsewhere the bounds on
    inputs are the only limit, and the single-threaded server always runs here)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimedOut(f"the computation took longer than the {seconds:g} s limit of the web app")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def bounded(fn: Callable[[], Any], seconds: float) -> Any:
    with time_limit(seconds):
        return fn()
