"""scalemodel's lightweight per-rank collective trace: a writer a training loop can use.

One JSON object per line, flushed as it is written, so a rank that dies or hangs leaves
everything up to that moment on disk. No torch import: wrap your own calls.

    from scalemodel.traces.recorder import CollectiveRecorder
    rec = CollectiveRecorder("traces/", rank, world_size, run_id="job-42")
    with rec.step(i):
        with rec.compute(i):
            loss = model(batch); loss.backward()
        with rec.collective("all_reduce", group="dp", sizes=[[g.numel()]], dtype="float32"):
            dist.all_reduce(g, group=dp_group)
    rec.close()

For an asynchronous collective: ``h = rec.issue(op, group, sizes, dtype)`` right before the
call with ``async_op=True``, then ``with rec.wait(h): work.wait()``. ``rec.heartbeat()`` from a
side thread marks the process alive (tells a rank stuck outside collectives from a dead one).

Events: ``header`` (format, version, run_id, rank, world_size, node), ``enter`` / ``exit``
(group, seq, op, sizes, dtype, t, step, blocked_s on exit), ``compute`` and ``step`` (t0, t1),
``heartbeat`` (t), ``error`` (message), ``end``. Times are ``time.time()`` seconds.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FORMAT = "scalemodel-collective-trace"
VERSION = 1


class CollectiveRecorder:
    def __init__(self, out_dir: str | Path, rank: int, world_size: int, *, run_id: str = "",
                 node: str | None = None) -> None:
        self.rank = rank
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        self.path = d / f"rank_{rank}.trace.jsonl"
        self._f = open(self.path, "w", buffering=1)  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._seq: dict[str, int] = {}
        self._step: int | None = None
        self._write({"ev": "header", "format": FORMAT, "version": VERSION, "run_id": run_id,
                     "rank": rank, "world_size": world_size,
                     "node": node or os.environ.get("SCALEMODEL_NODE") or socket.gethostname(),
                     "pid": os.getpid(), "t": time.time()})

    def _write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, separators=(",", ":"))
        with self._lock:
            if not self._f.closed:
                self._f.write(line + "\n")
                self._f.flush()

    def declare_groups(self, groups: dict[str, list[int]]) -> None:
        """Name each process group's member ranks (lets the analyser see who never arrived)."""
        self._write({"ev": "groups", "groups": {k: list(v) for k, v in groups.items()}})

    # --- collectives ---
    def issue(self, op: str, group: str = "world", sizes: Any = (), dtype: str = "") -> dict:
        seq = self._seq.get(group, 0) + 1
        self._seq[group] = seq
        h = {"group": group, "seq": seq, "op": op, "t": time.time()}
        self._write({"ev": "enter", "group": group, "seq": seq, "op": op,
                     "sizes": [list(s) for s in sizes], "dtype": dtype, "t": h["t"],
                     "step": self._step})
        return h

    def done(self, h: dict, blocked_s: float) -> None:
        self._write({"ev": "exit", "group": h["group"], "seq": h["seq"], "t": time.time(),
                     "blocked_s": blocked_s})

    @contextmanager
    def collective(self, op: str, group: str = "world", sizes: Any = (),
                   dtype: str = "") -> Iterator[dict]:
        h = self.issue(op, group, sizes, dtype)
        yield h
        self.done(h, time.time() - h["t"])

    @contextmanager
    def wait(self, h: dict) -> Iterator[None]:
        t0 = time.time()
        yield
        self.done(h, time.time() - t0)

    # --- phases ---
    @contextmanager
    def compute(self, step: int | None = None) -> Iterator[None]:
        t0 = time.time()
        yield
        self._write({"ev": "compute", "step": step if step is not None else self._step,
                     "t0": t0, "t1": time.time()})

    @contextmanager
    def step(self, i: int) -> Iterator[None]:
        self._step, t0 = i, time.time()
        yield
        self._write({"ev": "step", "step": i, "t0": t0, "t1": time.time()})

    def heartbeat(self) -> None:
        self._write({"ev": "heartbeat", "t": time.time()})

    def error(self, message: str) -> None:
        self._write({"ev": "error", "message": message[-500:], "t": time.time()})

    def close(self) -> None:
        self._write({"ev": "end", "t": time.time()})
        with self._lock:
            self._f.close()
