"""The normalised view of per-rank collective records that the hang and slowdown analysers read.

Both input formats (PyTorch Flight Recorder dumps and scalemodel's own JSONL trace) are read into
these records; what a format cannot say (completion on gloo FR dumps, durations) stays ``None``.

At scale (16,384 dumps of a few dozen entries each) one Python object per record costs more
than the analysis itself, so Flight Recorder records are held column-wise in :class:`Columns`
(one numpy array per field, one row per record) and :attr:`RankView.records` builds the record
objects only when something asks for them. The analysers read the columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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


_DONE = {None: -1, False: 0, True: 1}
_DONE_BACK = {-1: None, 0: False, 1: True}


class Columns:
    """Every collective record of a set of ranks as parallel arrays, one row per record.

    Rows come rank by rank in the order of ``order`` (rank ``order[i]`` owns rows
    ``starts[i]:starts[i + 1]``) and keep each rank's record order. ``group`` indexes
    ``groups`` (process-group keys), ``fp`` indexes ``fps``, the distinct (op, sizes, dtypes)
    fingerprints: two records have equal fingerprints exactly when their ``fp`` are equal.
    ``t_exit`` is NaN where unknown; ``done`` is 1 completed, 0 not completed, -1 unknown.
    """

    def __init__(self, order: list[int], lens: np.ndarray, group: np.ndarray, seq: np.ndarray,
                 fp: np.ndarray, t_enter: np.ndarray, t_exit: np.ndarray, done: np.ndarray,
                 groups: list[str], fps: list[tuple]):
        self.order = list(order)
        self.lens = np.asarray(lens, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.lens))).astype(np.int64)
        self.pos = np.repeat(np.arange(len(self.order), dtype=np.int64), self.lens)
        self.rank = np.asarray(self.order, dtype=np.int64)[self.pos]
        self.group, self.seq, self.fp = group, seq, fp
        self.t_enter, self.t_exit, self.done = t_enter, t_exit, done
        self.groups, self.fps = groups, fps
        self.position = {r: i for i, r in enumerate(self.order)}
        self.objs: list[CollRecord] | None = None  # the record objects, where they exist

    def __len__(self) -> int:
        return len(self.seq)

    def group_ranks(self) -> dict[int, tuple[int, ...]]:
        """group index -> the ranks with records in it (sorted), groups in order of first
        appearance."""
        if not len(self.seq):
            return {}
        n = len(self.order)
        key = np.unique(self.group.astype(np.int64) * n + self.pos)
        g, p = key // n, key % n
        ranks = np.asarray(self.order, dtype=np.int64)[p]
        cut = np.flatnonzero(np.diff(g)) + 1
        by = {int(gs[0]): tuple(sorted(rs.tolist()))
              for gs, rs in zip(np.split(g, cut), np.split(ranks, cut), strict=True)}
        return {gi: by[gi] for gi in self.group_order()}

    def group_order(self) -> list[int]:
        """The group indices that have rows, in order of their first row."""
        u, first = np.unique(self.group, return_index=True)
        return u[np.argsort(first, kind="stable")].tolist()

    def record(self, i: int) -> CollRecord:
        if self.objs is not None:
            return self.objs[i]
        op, sizes, dtypes = self.fps[int(self.fp[i])]
        tx = float(self.t_exit[i])
        return CollRecord(group=self.groups[int(self.group[i])], seq=int(self.seq[i]), op=op,
                          sizes=sizes, dtypes=dtypes, t_enter=float(self.t_enter[i]),
                          t_exit=None if math.isnan(tx) else tx,
                          completed=_DONE_BACK[int(self.done[i])])

    def records(self, lo: int, hi: int) -> list[CollRecord]:
        return self.records_at(range(lo, hi))

    def records_at(self, rows: Any) -> list[CollRecord]:
        """The records of ``rows`` (row indices), built in one pass."""
        idx = np.asarray(rows, dtype=np.int64)
        if self.objs is not None:
            return [self.objs[i] for i in idx.tolist()]
        fps, groups = self.fps, self.groups
        tx = self.t_exit[idx]
        return [CollRecord(group=groups[g], seq=s, op=fps[f][0], sizes=fps[f][1],
                           dtypes=fps[f][2], t_enter=t, t_exit=None if x != x else x,
                           completed=_DONE_BACK[d])
                for g, s, f, t, x, d in zip(self.group[idx].tolist(), self.seq[idx].tolist(),
                                            self.fp[idx].tolist(), self.t_enter[idx].tolist(),
                                            tx.tolist(), self.done[idx].tolist(), strict=True)]

    @classmethod
    def from_views(cls, ranks: dict[int, RankView]) -> Columns:
        """Columns of views that hold their records as objects (scalemodel traces)."""
        gid: dict[str, int] = {}
        fid: dict[tuple, int] = {}
        g, s, f, t0, t1, dn, lens = [], [], [], [], [], [], []
        objs: list[CollRecord] = []
        for v in ranks.values():
            recs = v.records
            lens.append(len(recs))
            objs.extend(recs)
            for x in recs:
                g.append(gid.setdefault(x.group, len(gid)))
                fpr = x.fingerprint()
                try:
                    f.append(fid.setdefault(fpr, len(fid)))
                except TypeError:  # unhashable sizes (a dict in a hostile file): keyed by text
                    f.append(fid.setdefault((fpr[0], repr(fpr[1]), repr(fpr[2])), len(fid)))
                s.append(x.seq)
                t0.append(x.t_enter)
                t1.append(math.nan if x.t_exit is None else x.t_exit)
                dn.append(_DONE.get(x.completed, -1))
        cols = cls(list(ranks), np.array(lens, dtype=np.int64), np.array(g, dtype=np.int32),
                   np.array(s, dtype=np.int64), np.array(f, dtype=np.int32),
                   np.array(t0, dtype=np.float64), np.array(t1, dtype=np.float64),
                   np.array(dn, dtype=np.int8), list(gid), list(fid))
        cols.objs = objs
        return cols


@dataclass
class RankView:
    rank: int
    path: str
    fmt: str  # "fr-pickle", "fr-json", "scalemodel-trace"
    last_alive: float | None = None  # last heartbeat seen (own trace)
    finished: bool = False  # the rank wrote its end marker
    error: str = ""  # an error the rank recorded before exiting
    node: str = ""
    compute: list[tuple[int, float, float]] = field(default_factory=list)  # (step, t0, t1)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # the records live either here as objects or as rows lo:hi of a Columns (Flight Recorder)
    _recs: list[CollRecord] | None = field(default=None, repr=False)
    _rows: tuple[Columns, int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def records(self) -> list[CollRecord]:
        """The rank's collective records, in the order its file lists them."""
        if self._recs is None:
            self._recs = self._rows[0].records(self._rows[1], self._rows[2]) if self._rows \
                else []
        return self._recs

    def bind_rows(self, cols: Columns, lo: int, hi: int) -> None:
        self._rows, self._recs = (cols, lo, hi), None


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
    cols: Columns | None = field(default=None, repr=False)

    def columns(self) -> Columns:
        """The records of ``ranks`` column-wise (built from the views if the loader did not)."""
        if self.cols is None or self.cols.order != list(self.ranks):
            self.cols = Columns.from_views(self.ranks)
        return self.cols

    def summary(self) -> dict[str, Any]:
        return {"format": self.fmt, "ranks_read": sorted(self.ranks),
                "world_size": self.world_size, "files_read": len(self.read),
                "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
                "notes": list(self.notes)}
