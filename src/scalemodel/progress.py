"""Progress on stderr for commands that run longer than about two seconds.

``activity(label)`` is a context manager the CLI wraps around every command: nothing is shown
for the first ``delay_s`` (most commands finish well before), then a line with the label and
the elapsed time is kept up to date on stderr until the command ends, and erased. It is
silent when stderr is not a terminal or the output is ``--json``, so pipes, files, CI logs and
machine-readable output never see it. rich (a status spinner) or tqdm (a bar without a total)
is used when installed, imported only once the delay has passed; otherwise a plain
carriage-return line. Nothing here touches stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

DELAY_S = 2.0  # SCALEMODEL_PROGRESS_DELAY_S overrides it (the tests set 0)
TICK_S = 0.25


def enabled(stream: IO[str] | None = None, json_output: bool = False) -> bool:
    """Whether progress may be shown: a terminal on stderr and human output."""
    s = sys.stderr if stream is None else stream
    if json_output:
        return False
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


class _Plain:
    def __init__(self, stream: IO[str], label: str) -> None:
        self.stream, self.label, self.width = stream, label, 0

    def show(self, elapsed: float) -> None:
        text = f"{self.label} ... {elapsed:.0f} s"
        self.width = max(self.width, len(text))
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


class _Rich:
    def __init__(self, stream: IO[str], label: str) -> None:
        from rich.console import Console

        self.label = label
        self.status = Console(file=stream, stderr=True).status(label)
        self.status.start()

    def show(self, elapsed: float) -> None:
        self.status.update(f"{self.label} ... {elapsed:.0f} s")

    def close(self) -> None:
        self.status.stop()


class _Tqdm:
    def __init__(self, stream: IO[str], label: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=None, desc=label, file=stream, leave=False,
                        bar_format="{desc} ... {elapsed}")

    def show(self, elapsed: float) -> None:
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def _display(stream: IO[str], label: str, prefer: str | None) -> Any:
    order = [prefer] if prefer else ["rich", "tqdm"]
    for name in order:
        try:
            return {"rich": _Rich, "tqdm": _Tqdm, "plain": _Plain}[name](stream, label)
        except ImportError:
            continue
    return _Plain(stream, label)


@contextlib.contextmanager
def activity(label: str, *, stream: IO[str] | None = None, json_output: bool = False,
             delay_s: float | None = None, prefer: str | None = None) -> Iterator[None]:
    """Show ``label`` and the elapsed time on stderr while the block runs past ``delay_s``."""
    s = sys.stderr if stream is None else stream
    if delay_s is None:
        try:
            delay_s = max(float(os.environ.get("SCALEMODEL_PROGRESS_DELAY_S", DELAY_S)), 0.0)
        except ValueError:
            delay_s = DELAY_S
    if not enabled(s, json_output):
        yield
        return
    stop = threading.Event()
    t0 = time.monotonic()
    shown: list[Any] = []

    def loop() -> None:
        if stop.wait(delay_s):
            return
        d = _display(s, label, prefer)
        shown.append(d)
        while True:
            d.show(time.monotonic() - t0)
            if stop.wait(TICK_S):
                return

    th = threading.Thread(target=loop, name="scalemodel-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        for d in shown:
            d.close()
