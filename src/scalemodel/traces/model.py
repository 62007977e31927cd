"""The normalised view of per-rank collective records that the hang and slowdown analysers read.

Both input formats (PyTorch Flight Recorder dumps and scalemodel's own JSONL trace) are read into
these records; what a format cannot say (completion on gloo FR dumps, durations) stays ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CollRecord:
    group: str  # process-group key, stable across ranks
    seq: int  # collective sequence number inside the group
    op: str  # all_reduce, all_gather, broadcast, ...
    sizes: tuple  # input sizes (nested tuples)
    dtypes: tuple
    t_enter: float  # seconds (epoch or monotonic: only differences between ranks are used)
    t_exit: float | None = None  # when the collective finished on this rank, None if unknown
    completed: bool | None = None  # None: the format does not say
    blocked_s: float | None = None  # time this rank waited on it (own trace)
    step: int | None = None

    def fingerprint(self) -> tuple:
        return (self.op, self.sizes, self.dtypes)


@dataclass
class RankView:
    rank: int
    path: str
    fmt: str  # "fr-pickle", "fr-json", "scalemodel-trace"
    records: list[CollRecord] = field(default_factory=list)
    last_alive: float | None = None  # last heartbeat seen (own trace)
    finished: bool = False  # the rank wrote its end marker
    error: str = ""  # an error the rank recorded before exiting
    node: str = ""
    compute: list[tuple[int, float, float]] = field(default_factory=list)  # (step, t0, t1)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class TraceSet:
    """Everything read from one directory: ranks, group members and what was skipped."""

    fmt: str
    ranks: dict[int, RankView]
    world_size: int | None
    group_members: dict[str, tuple[int, ...]]
    group_labels: dict[str, str]
    read: list[str]
    skipped: list[tuple[str, str]]  # (path, reason)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"format": self.fmt, "ranks_read": sorted(self.ranks),
                "world_size": self.world_size, "files_read": len(self.read),
                "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
                "notes": list(self.notes)}
