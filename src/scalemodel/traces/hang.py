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


def _index(ts: TraceSet) -> dict[str, dict[int, dict[int, CollRecord]]]:
    by: dict[str, dict[int, dict[int, CollRecord]]] = {}
    for r, v in ts.ranks.items():
        for rec in v.records:
            by.setdefault(rec.group, {}).setdefault(r, {})[rec.seq] = rec
    return by


def _first_event(g: str, members: tuple[int, ...], recs: dict[int, dict[int, CollRecord]],
                 ranks: dict[int, RankView]) -> _Event | None:
    have = [r for r in members if r in ranks]
    if not have:
        return None
    front = {r: max(recs.get(r, {}), default=0) for r in have}
    low = {r: min(recs.get(r, {}), default=0) for r in have}
    start = max([low[r] for r in have if recs.get(r)] or [1])
    top = max(front.values())
    for s in range(start, top + 1):
        present = {r: recs[r][s] for r in have if s in recs.get(r, {})}
        absent = [r for r in have if front[r] < s]  # ranks with no file say nothing per seq
        gaps = [r for r in have if s not in recs.get(r, {}) and front[r] >= s]
        if not present:
            continue
        t = min(x.t_enter for x in present.values())
        if len({x.fingerprint() for x in present.values()}) > 1:
            return _Event(g, s, t, "mismatch", present, absent)
        if absent:
            return _Event(g, s, t, "missing", present, sorted(absent))
        if gaps:  # a hole inside a rank's record (ring buffer overwrite): not evidence
            continue
    return None


def _lists(x: Any) -> Any:
    return [_lists(v) for v in x] if isinstance(x, tuple | list) else x


def _fmt_fp(rec: CollRecord) -> str:
    return f"{rec.op} sizes={_lists(rec.sizes)} dtypes={_lists(rec.dtypes)}"


def analyse_hang(ts: TraceSet, world_size: int | None = None) -> HangResult:
    """Triage a hang; ``world_size`` overrides what the files say (needed when a gloo dump's
    pg_config lists no ranks and the highest rank left no file)."""
    idx = _index(ts)
    world = world_size or ts.world_size or (max(ts.ranks) + 1)
    if world_size:
        for g, lab in ts.group_labels.items():
            if "default_pg" in lab or g == "world":
                ts.group_members[g] = tuple(range(world))
    files_missing = [r for r in range(world) if r not in ts.ranks]
    events = []
    for g, members in ts.group_members.items():
        e = _first_event(g, members, idx.get(g, {}), ts.ranks)
        if e is not None:
            events.append(e)
    per_rank = _per_rank(ts, idx)
    inp = ts.summary()
    inp["ranks_without_file"] = files_missing
    ev: list[str] = []
    if files_missing:
        ev.append(f"no trace or dump from rank(s) {files_missing} of {world}")
    if not world_size and ts.notes and any("world size unknown" in n for n in ts.notes):
        ev.append("the dumps do not say the world size; a missing highest rank cannot be seen "
                  "(pass --world-size)")
    if not events:
        return _no_divergence(ts, idx, files_missing, ev, per_rank, inp)
    events.sort(key=lambda e: (e.t, e.kind != "mismatch"))
    e = events[0]
    label = ts.group_labels.get(e.group, e.group)
    members = ts.group_members[e.group]
    if e.kind == "mismatch":
        return _mismatch(e, label, members, ev, per_rank, inp)
    return _missing(e, events, ts, idx, label, members, ev, per_rank, inp)


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


def _missing(e: _Event, events: list[_Event], ts: TraceSet, idx: dict, label: str,
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
            last = max(v.records, key=lambda x: x.t_enter, default=None)
            ev.append(f"rank {r}: wrote a Flight Recorder dump (so the process was alive); its "
                      f"last collective in this group is #{_front(idx, e.group, r)}"
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
            ev.append(f"rank {r}: its trace stops at collective #{_front(idx, e.group, r)}; no "
                      "heartbeats recorded, so dead and stuck look the same")
    if dead:
        verdict, culprits = "dead-rank", dead
    elif alive:
        verdict, culprits = "stuck-outside-collective", alive
    else:
        verdict, culprits = "missing-rank", unknown
    return HangResult(verdict, tuple(sorted(culprits)), e.group, e.seq, op, tuple(ev), per_rank,
                      inp, label)


def _front(idx: dict, g: str, r: int) -> int:
    return max(idx.get(g, {}).get(r, {}), default=0)


def _no_divergence(ts: TraceSet, idx: dict, files_missing: list[int], ev: list[str],
                   per_rank: tuple, inp: dict) -> HangResult:
    if files_missing:
        last = max((x for v in ts.ranks.values() for x in v.records), key=lambda x: x.t_enter,
                   default=None)
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
    pending = {r: [x for x in v.records if x.completed is False] for r, v in ts.ranks.items()}
    if all(pending.values()) and pending:
        g_s = Counter((x.group, x.seq) for xs in pending.values() for x in xs[:1])
        (g, s), n = g_s.most_common(1)[0]
        op = next(x.op for xs in pending.values() for x in xs if (x.group, x.seq) == (g, s))
        ev.append(f"all {n} ranks entered collective #{s} ({op}) of group "
                  f"{ts.group_labels.get(g, g)} with matching arguments and none completed: the "
                  "transport (network, NCCL) is stuck, not the program")
        return HangResult("stalled-collective", (), g, s, op, tuple(ev), per_rank, inp,
                          ts.group_labels.get(g, g))
    n = sum(len(v.records) for v in ts.ranks.values())
    ev.append(f"{len(ts.ranks)} ranks recorded {n} collectives; every group's members agree on "
              "every sequence number they share")
    if ts.fmt == "flight-recorder":
        ev.append("gloo Flight Recorder dumps carry no completion state: a collective that all "
                  "ranks entered but that never finished would look the same")
    return HangResult("healthy", (), None, None, None, tuple(ev), per_rank, inp)


def _per_rank(ts: TraceSet, idx: dict) -> tuple[dict[str, Any], ...]:
    out = []
    for r in sorted(ts.ranks):
        v = ts.ranks[r]
        last = max(v.records, key=lambda x: x.t_enter, default=None)
        out.append({"rank": r, "format": v.fmt, "records": len(v.records),
                    "frontier": {g: _front(idx, g, r) for g in idx if r in idx[g]},
                    "last_op": last.op if last else None,
                    "last_group": last.group if last else None,
                    "last_seq": last.seq if last else None,
                    "last_completed": last.completed if last else None,
                    "finished": v.finished, "error": v.error[-200:] if v.error else ""})
    return tuple(out)
