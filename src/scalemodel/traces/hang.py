"""Hang triage: find where the ranks' collective sequences part, and who is at fault.

For every process group, each member's records are keyed by sequence number. Walking the
sequence numbers upwards, the first point where the members disagree is a *divergence*:

* some members recorded the collective and others did not (their last one is earlier);
* all recorded it, but with different operations, sizes or dtypes.

The earliest divergence over all groups (by the time the first rank reached it) is the hang.
Ranks at fault are decided by majority vote among the members: the minority fingerprint is the
culprit of a mismatch; the ranks that did not arrive are the culprits of a missing collective,
unless they are the majority (then the few who arrived called a collective the rest never
did). A rank that did not arrive is then classified by what else the traces say:

* it has no file at all, recorded an error, or its heartbeats stopped before the others got
  stuck: **dead-rank**;
* its latest collective is in another group where the roles are reversed (the others did not
  arrive there): **order-mismatch**;
* it is alive (heartbeats later, or it wrote a Flight Recorder dump) and not inside any
  collective: **stuck-outside-collective**;
* nothing tells dead from alive: **missing-rank**.

No completion state is needed (gloo's Flight Recorder has none); where a format gives it, a
collective that every member entered but none completed is reported as **stalled-collective**.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .model import CollRecord, RankView, TraceSet

VERDICTS = ("healthy", "dead-rank", "missing-rank", "stuck-outside-collective", "op-mismatch",
            "size-mismatch", "dtype-mismatch", "order-mismatch", "extra-collective",
            "stalled-collective")


ALIVE_MARGIN_S = 1.0  # heartbeats this long after the others got stuck mean "alive"


@dataclass(frozen=True)
class HangResult:
    verdict: str
    ranks: tuple[int, ...]
    group: str | None
    seq: int | None
    op: str | None
    evidence: tuple[str, ...]
    per_rank: tuple[dict[str, Any], ...] = ()
    input: dict[str, Any] = field(default_factory=dict)
    group_label: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "ranks": list(self.ranks), "group": self.group,
                "group_label": self.group_label, "seq": self.seq, "op": self.op,
                "evidence": list(self.evidence), "per_rank": list(self.per_rank),
                "input": self.input}


@dataclass
class _Event:
    group: str
    seq: int
    t: float
    kind: str  # "mismatch" | "missing"
    present: dict[int, CollRecord]
    absent: list[int]


class _Index:
    """Per (group, rank) fronts and per-rank facts, computed once over the columns."""

    def __init__(self, ts: TraceSet):
        self.cols = c = ts.columns()
        self.gid = {g: i for i, g in enumerate(c.groups)}
        n = max(len(c.order), 1)
        key = c.group.astype(np.int64) * n + c.pos
        self.by_gp = o = np.argsort(key, kind="stable")  # rows by group, then rank position
        ks = key[o]
        b = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if len(ks) else np.zeros(0, int)
        seg = ks[b]
        self.seg_g, self.seg_p = seg // n, seg % n
        self.seg_lo = b
        self.seg_front = np.maximum.reduceat(c.seq[o], b) if len(b) else np.zeros(0, int)
        self.front_of = dict(zip(seg.tolist(), self.seg_front.tolist(), strict=True))
        self.n = n
        # each rank's latest record by entry time (the first of equal times)
        lt = np.lexsort((-c.t_enter, c.pos)) if len(c) else np.zeros(0, int)
        self.last_row = [int(lt[c.starts[i]]) if c.lens[i] else -1 for i in range(len(c.order))]

    def rows_of_group(self, gi: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.seg_g, [gi, gi + 1])
        if lo == hi:
            return np.zeros(0, dtype=np.int64)
        end = self.seg_lo[hi] if hi < len(self.seg_lo) else len(self.by_gp)
        return self.by_gp[self.seg_lo[lo]:end]

    def front(self, g: str, r: int) -> int:
        gi, p = self.gid.get(g), self.cols.position.get(r)
        return 0 if gi is None or p is None else self.front_of.get(gi * self.n + p, 0)

    def last(self, r: int) -> CollRecord | None:
        i = self.last_row[self.cols.position[r]]
        return self.cols.record(i) if i >= 0 else None

    def frontiers(self) -> list[dict[str, int]]:
        """Per rank position: group -> highest sequence number, groups in order of first
        appearance."""
        out: list[dict[str, int]] = [{} for _ in self.cols.order]
        rank_of = {gi: k for k, gi in enumerate(self.cols.group_order())}
        order = np.lexsort((self.seg_p, [rank_of[g] for g in self.seg_g.tolist()])) \
            if len(self.seg_g) else []
        names = self.cols.groups
        sg, sp, sf = self.seg_g.tolist(), self.seg_p.tolist(), self.seg_front.tolist()
        for k in np.asarray(order, dtype=np.int64).tolist():
            out[sp[k]][names[sg[k]]] = sf[k]
        return out


def _first_event(g: str, members: tuple[int, ...], ix: _Index,
                 ranks: dict[int, RankView]) -> _Event | None:
    have = [r for r in members if r in ranks]
    gi = ix.gid.get(g)
    if not have or gi is None:
        return None
    c = ix.cols
    pos_of = c.position
    have_pos = np.array([pos_of[r] for r in have], dtype=np.int64)
    rows = ix.rows_of_group(gi)
    rows = rows[np.isin(c.pos[rows], have_pos)]  # ranks with no file say nothing per seq
    if not len(rows):
        return None
    # one record per (rank, seq): the last one the file lists (rows keep file order)
    pp, ss = c.pos[rows], c.seq[rows]
    k = np.lexsort((ss, pp))
    rows, pp, ss = rows[k], pp[k], ss[k]
    keep = np.r_[(pp[1:] != pp[:-1]) | (ss[1:] != ss[:-1]), True]
    rows, pp, ss = rows[keep], pp[keep], ss[keep]
    pb = np.flatnonzero(np.r_[True, pp[1:] != pp[:-1]])
    front_of = dict(zip(pp[pb].tolist(), np.maximum.reduceat(ss, pb).tolist(), strict=True))
    start = int(np.minimum.reduceat(ss, pb).max())  # below it some rank's buffer has no record
    front = {r: front_of.get(pos_of[r], 0) for r in have}
    fronts = np.sort(np.array([front[r] for r in have], dtype=np.int64))
    m = ss >= start
    rows, ss = rows[m], ss[m]
    k = np.argsort(ss, kind="stable")
    rows, ss = rows[k], ss[k]
    b = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    u = ss[b]
    fp = c.fp[rows]
    split = (np.minimum.reduceat(fp, b) != np.maximum.reduceat(fp, b))
    short = np.searchsorted(fronts, u, side="left") > 0  # some member's last seq is below
    hit = np.flatnonzero(split | short)
    if not len(hit):
        return None  # (holes inside a rank's record, a ring buffer overwrite, are no evidence)
    i = int(hit[0])
    s = int(u[i])
    at = rows[b[i]:(b[i + 1] if i + 1 < len(b) else len(rows))]
    row_of = dict(zip(c.pos[at].tolist(), at.tolist(), strict=True))
    there = [r for r in have if pos_of[r] in row_of]
    present = dict(zip(there, c.records_at([row_of[pos_of[r]] for r in there]), strict=True))
    t = min(x.t_enter for x in present.values())
    absent = [r for r in have if front[r] < s]
    if split[i]:
        return _Event(g, s, t, "mismatch", present, absent)
    return _Event(g, s, t, "missing", present, sorted(absent))


def _lists(x: Any) -> Any:
    return [_lists(v) for v in x] if isinstance(x, tuple | list) else x


def _fmt_fp(rec: CollRecord) -> str:
    return f"{rec.op} sizes={_lists(rec.sizes)} dtypes={_lists(rec.dtypes)}"


def analyse_hang(ts: TraceSet, world_size: int | None = None) -> HangResult:
    """Triage a hang; ``world_size`` overrides what the files say (needed when a gloo dump's
    pg_config lists no ranks and the highest rank left no file)."""
    ix = _Index(ts)
    world = world_size or ts.world_size or (max(ts.ranks) + 1)
    if world_size:
        for g, lab in ts.group_labels.items():
            if "default_pg" in lab or g == "world":
                ts.group_members[g] = tuple(range(world))
    files_missing = [r for r in range(world) if r not in ts.ranks]
    events = []
    for g, members in ts.group_members.items():
        e = _first_event(g, members, ix, ts.ranks)
        if e is not None:
            events.append(e)
    per_rank = _per_rank(ts, ix)
    inp = ts.summary()
    inp["ranks_without_file"] = files_missing
    ev: list[str] = []
    if files_missing:
        ev.append(f"no trace or dump from rank(s) {files_missing} of {world}")
    if not world_size and ts.notes and any("world size unknown" in n for n in ts.notes):
        ev.append("the dumps do not say the world size; a missing highest rank cannot be seen "
                  "(pass --world-size)")
    if not events:
        return _no_divergence(ts, ix, files_missing, ev, per_rank, inp)
    events.sort(key=lambda e: (e.t, e.kind != "mismatch"))
    e = events[0]
    label = ts.group_labels.get(e.group, e.group)
    members = ts.group_members[e.group]
    if e.kind == "mismatch":
        return _mismatch(e, label, members, ev, per_rank, inp)
    return _missing(e, events, ts, ix, label, members, ev, per_rank, inp)


def _mismatch(e: _Event, label: str, members: tuple[int, ...], ev: list[str],
              per_rank: tuple, inp: dict) -> HangResult:
    fps = Counter(x.fingerprint() for x in e.present.values())
    (maj, n_maj), *rest = fps.most_common()
    tie = bool(rest) and rest[0][1] == n_maj
    culprits = sorted(r for r, x in e.present.items() if x.fingerprint() != maj)
    ref = next(x for x in e.present.values() if x.fingerprint() == maj)
    bad = e.present[culprits[0]]
    if bad.op != ref.op:
        verdict = "op-mismatch"
    elif bad.sizes != ref.sizes:
        verdict = "size-mismatch"
    else:
        verdict = "dtype-mismatch"
    ev.append(f"group {label}, collective #{e.seq}: {n_maj} of {len(e.present)} ranks called "
              f"{_fmt_fp(ref)}")
    for r in culprits:
        ev.append(f"rank {r} called {_fmt_fp(e.present[r])} instead")
    if tie:
        ev.append("the vote is tied: the fingerprints are equally common, so either side may "
                  "be at fault; all ranks of the other side are listed")
    if e.absent:
        ev.append(f"ranks {e.absent} did not reach collective #{e.seq} at all")
    ev.append("culprits decided by majority vote over the group's members, not by which rank "
              "was read first")
    return HangResult(verdict, tuple(culprits), e.group, e.seq, ref.op, tuple(ev), per_rank,
                      inp, label)


def _missing(e: _Event, events: list[_Event], ts: TraceSet, ix: _Index, label: str,
             members: tuple[int, ...], ev: list[str], per_rank: tuple, inp: dict) -> HangResult:
    present, absent = sorted(e.present), e.absent
    op = next(iter(e.present.values())).op
    t_stuck = e.t
    ev.append(f"group {label}, collective #{e.seq} ({op}): ranks {present} entered it, ranks "
              f"{absent} never did")
    # order mismatch: an absent rank's latest collective is one in another group that the
    # present ranks have not entered
    order_hits: dict[int, _Event] = {}
    for other in events:
        if other is e or other.kind != "missing":
            continue
        if set(other.present) & set(absent) and set(other.absent) & set(present):
            for r in set(other.present) & set(absent):
                order_hits[r] = other
    minority_present = len(present) < len(absent)
    if order_hits:
        other = next(iter(order_hits.values()))
        olab = ts.group_labels.get(other.group, other.group)
        oop = next(iter(other.present.values())).op
        side_a, side_b = set(present), set(other.present)
        culprits = sorted(side_a if len(side_a) < len(side_b) else side_b)
        ev.append(f"ranks {sorted(side_b)} are waiting in group {olab}, collective "
                  f"#{other.seq} ({oop}), which ranks {sorted(side_a)} have not entered: the two "
                  "sides called the groups' collectives in different orders")
        ev.append(f"majority vote: {len(side_a)} rank(s) went to {label} first, {len(side_b)} "
                  f"to {olab} first; the smaller side is at fault")
        return HangResult("order-mismatch", tuple(culprits), e.group, e.seq, op, tuple(ev),
                          per_rank, inp, label)
    if minority_present:
        ev.append(f"only {len(present)} of {len(members)} members called it: by majority vote "
                  "the ranks that called it issued a collective the others never did")
        return HangResult("extra-collective", tuple(present), e.group, e.seq, op, tuple(ev),
                          per_rank, inp, label)
    dead, alive, unknown = [], [], []
    for r in absent:
        v = ts.ranks.get(r)
        if v is None:
            dead.append(r)
            ev.append(f"rank {r}: no file at all (the process died before writing one, or the "
                      "file was not collected)")
        elif v.error:
            dead.append(r)
            ev.append(f"rank {r}: recorded an error and stopped: {v.error.splitlines()[-1][:160]}")
        elif v.fmt.startswith("fr-"):
            alive.append(r)
            last = ix.last(r)
            ev.append(f"rank {r}: wrote a Flight Recorder dump (so the process was alive); its "
                      f"last collective in this group is #{ix.front(e.group, r)}"
                      + (f", its last overall {last.op} #{last.seq}" if last else ""))
        elif v.last_alive is not None and v.last_alive > t_stuck + ALIVE_MARGIN_S:
            alive.append(r)
            ev.append(f"rank {r}: heartbeats continue {v.last_alive - t_stuck:.1f} s after the "
                      f"others entered #{e.seq}; no collective pending: busy outside collectives")
        elif v.last_alive is not None:
            dead.append(r)
            ev.append(f"rank {r}: heartbeats stop {t_stuck - v.last_alive:.1f} s before the "
                      "others got stuck and the trace ends without its end marker: the process "
                      "died")
        else:
            unknown.append(r)
            ev.append(f"rank {r}: its trace stops at collective #{ix.front(e.group, r)}; no "
                      "heartbeats recorded, so dead and stuck look the same")
    if dead:
        verdict, culprits = "dead-rank", dead
    elif alive:
        verdict, culprits = "stuck-outside-collective", alive
    else:
        verdict, culprits = "missing-rank", unknown
    return HangResult(verdict, tuple(sorted(culprits)), e.group, e.seq, op, tuple(ev), per_rank,
                      inp, label)


def _no_divergence(ts: TraceSet, ix: _Index, files_missing: list[int], ev: list[str],
                   per_rank: tuple, inp: dict) -> HangResult:
    c = ix.cols
    if files_missing:
        last = c.record(int(np.argmax(c.t_enter))) if len(c) else None
        if last is not None:
            ev.append(f"the {len(ts.ranks)} ranks that left files agree on every collective; "
                      f"the latest they entered is #{last.seq} ({last.op}) of group "
                      f"{ts.group_labels.get(last.group, last.group)}, where they waited for "
                      f"rank(s) {files_missing}")
        errs = [f"rank {r}: {v.error.splitlines()[-1][:160]}" for r, v in ts.ranks.items()
                if v.error]
        ev.extend(errs[:4])
        return HangResult("dead-rank", tuple(files_missing), last.group if last else None,
                          last.seq if last else None, last.op if last else None, tuple(ev),
                          per_rank, inp, ts.group_labels.get(last.group, "") if last else "")
    pend = np.flatnonzero(c.done == 0)  # entered, known not completed
    first_pos, first_at = np.unique(c.pos[pend], return_index=True)
    if len(c.order) and len(first_pos) == len(c.order):  # every rank has one pending
        firsts = pend[first_at]  # each rank's first pending record, ranks in order
        g_s = Counter(zip(c.group[firsts].tolist(), c.seq[firsts].tolist(), strict=True))
        (gi, s), n = g_s.most_common(1)[0]
        j = pend[np.flatnonzero((c.group[pend] == gi) & (c.seq[pend] == s))[0]]
        g, op = c.groups[gi], c.fps[int(c.fp[j])][0]
        ev.append(f"all {n} ranks entered collective #{s} ({op}) of group "
                  f"{ts.group_labels.get(g, g)} with matching arguments and none completed: the "
                  "transport (network, NCCL) is stuck, not the program")
        return HangResult("stalled-collective", (), g, s, op, tuple(ev), per_rank, inp,
                          ts.group_labels.get(g, g))
    n = len(c)
    ev.append(f"{len(ts.ranks)} ranks recorded {n} collectives; every group's members agree on "
              "every sequence number they share")
    if ts.fmt == "flight-recorder" and bool((c.done < 0).any()):
        ev.append("gloo Flight Recorder dumps carry no completion state: a collective that all "
                  "ranks entered but that never finished would look the same")
    elif bool((c.done == 0).any()):
        ev.append(f"{int((c.done == 0).sum())} collectives were entered and not completed, but "
                  "not on every rank at once: in flight when the dumps were taken")
    return HangResult("healthy", (), None, None, None, tuple(ev), per_rank, inp)


def _per_rank(ts: TraceSet, ix: _Index) -> tuple[dict[str, Any], ...]:
    c = ix.cols
    fronts = ix.frontiers()
    order = sorted(ts.ranks)
    rows = [ix.last_row[c.position[r]] for r in order]
    lasts = iter(c.records_at([i for i in rows if i >= 0]))
    out = []
    for r, i_last in zip(order, rows, strict=True):
        v = ts.ranks[r]
        i = c.position[r]
        last = next(lasts) if i_last >= 0 else None
        out.append({"rank": r, "format": v.fmt, "records": int(c.lens[i]),
                    "frontier": fronts[i],
                    "last_op": last.op if last else None,
                    "last_group": last.group if last else None,
                    "last_seq": last.seq if last else None,
                    "last_completed": last.completed if last else None,
                    "finished": v.finished, "error": v.error[-200:] if v.error else ""})
    return tuple(out)
