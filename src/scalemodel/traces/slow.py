"""Slowdown triage: straggler vs fabric vs lost overlap, with robust per-rank and per-node scores.

From scalemodel traces each rank gives, per step: compute time, collective duration (issue to
completion) and the time it sat blocked on communication (exposed communication). The steps are
split where the median step time jumps (an L1 change point) into a reference window and a
recent window, or the reference is another run (``baseline``). Then:

* **straggler**: in the recent window one or a few ranks' compute is above the others' by a
  margin that is both real and material (:func:`slow_mask`): a modified z-score above 3.5
  (Iglewicz and Hoaglin) where the spread is the larger of the ranks' MAD and the standard
  error of each rank's median from its own step-to-step noise, and at least 5% slower than the
  median rank; NVRx's score below 0.75 marks it severe. Everyone else's blocked time rises
  because they wait for it.
* **compute**: every rank's compute grew (a fleet-wide slowdown, not a single rank).
* **lost-overlap**: compute unchanged, the exposed (blocked) communication grew and the
  communication time hidden behind compute fell by more than the collectives grew. The step's
  growth is the added collective time plus the time that stopped hiding; a slower fabric keeps
  the hidden time (the compute it hides behind is unchanged), so the larger part names the cause.
* **fabric**: compute unchanged, collective durations up on (nearly) all ranks together.
* **healthy**: step time within 5% of the reference and no outlier rank.

Flight Recorder dumps of gloo have no durations; there only arrival lateness (how long after
the median rank a rank enters each collective) is scored, which finds stragglers but cannot
tell fabric from lost overlap. Per-worker step-time tables (CSV with worker/rank, iteration
and a duration column, e.g. Alibaba PAI's mini-batch times) get NVRx-style relative scores
(fastest worker's median / this worker's median) and an onset per slow worker.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput
from .model import TraceSet


def _thresholds() -> dict[str, float]:
    """The verdict thresholds, with their sources, from reliability.toml [triage]."""
    from ..specs.sources import load_toml

    return {k: float(v["value"]) for k, v in load_toml("reliability.toml")["triage"].items()}


_T = _thresholds()
Z_MAX = _T["robust_z_max"]
SCORE_MIN = _T["straggler_score_min"]  # NVRx: reference / current below this is a straggler
MAD_K = _T["mad_to_sigma"]
STEP_JUMP = _T["step_jump"]  # a step-time change smaller than this is noise
NOISE_MAX = _T["noise_max"]  # unexplained changes below this are called healthy
GREW = _T["grew_ratio"]
MOST = _T["most_ranks"]
HIDDEN_DROP = _T["hidden_drop"]
LATE_SHARE = _T["late_share_of_gap"]
SLOW_MIN = _T["slow_min"]  # a slowdown below this share of the median is not worth a flag
SE_MEDIAN = _T["median_se_factor"]


def slow_mask(med: np.ndarray, within_mad: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flag, z) per worker for per-worker medians ``med`` of ``n`` steps each.

    The rule: z = (m - median(m)) / s with s the larger of 1.4826 x MAD over the workers and
    the standard error of one worker's median, 1.2533 x 1.4826 x MAD_within / sqrt(n) (its own
    step-to-step noise); a worker is flagged when z > 3.5 (Iglewicz-Hoaglin) and its median is
    at least SLOW_MIN (5%) above the median worker. So a worker 10% slow stands out when the
    fleet is tight and its steps are steady, and run-to-run noise does not."""
    centre = float(np.median(med))
    spread = float(np.median(np.abs(med - centre))) * MAD_K
    se = SE_MEDIAN * MAD_K * within_mad / np.sqrt(np.maximum(n, 1))
    s = np.maximum(np.maximum(spread, se), 1e-12 * max(abs(centre), 1.0))
    z = (med - centre) / s
    return (z > Z_MAX) & (med >= (1 + SLOW_MIN) * centre), z


@dataclass(frozen=True)
class SlowResult:
    verdict: str
    ranks: tuple[int, ...]
    scores: dict[str, Any]
    evidence: tuple[str, ...]
    windows: dict[str, Any] = field(default_factory=dict)
    per_rank: tuple[dict[str, Any], ...] = ()
    input: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "ranks": list(self.ranks), "scores": self.scores,
                "evidence": list(self.evidence), "windows": self.windows,
                "per_rank": list(self.per_rank), "input": self.input}


def robust_z(x: np.ndarray, floor_frac: float = 0.05) -> np.ndarray:
    """(x - median) / (1.4826 MAD), the MAD floored at ``floor_frac`` of |median|."""
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med))) * MAD_K
    mad = max(mad, floor_frac * abs(med), 1e-12)
    return (x - med) / mad


def change_point(series: np.ndarray, min_seg: int = 2) -> int | None:
    """Index k splitting ``series`` into [0, k) and [k, n) with the least L1 deviation from the
    two segment medians, or None if it is too short."""
    n = len(series)
    if n < 2 * min_seg:
        return None
    best, arg = np.inf, None
    for k in range(min_seg, n - min_seg + 1):
        a, b = series[:k], series[k:]
        cost = np.abs(a - np.median(a)).sum() + np.abs(b - np.median(b)).sum()
        if cost < best:
            best, arg = cost, k
    return arg


def _step_table(ts: TraceSet) -> dict[int, dict[int, dict[str, float]]]:
    """rank -> step -> {compute, comm, blocked, step}."""
    out: dict[int, dict[int, dict[str, float]]] = {}
    for r, v in ts.ranks.items():
        t = defaultdict(lambda: {"compute": 0.0, "comm": 0.0, "blocked": 0.0, "step": 0.0})
        for s, a, b in v.compute:
            t[s]["compute"] += b - a
        for s, a, b in v.steps:
            t[s]["step"] = b - a
        for x in v.records:
            if x.step is None or x.t_exit is None:
                continue
            t[x.step]["comm"] += x.t_exit - x.t_enter
            t[x.step]["blocked"] += x.blocked_s or 0.0
        out[r] = {s: d for s, d in t.items() if d["step"] > 0}
    return out


def analyse_slow(ts: TraceSet, baseline: TraceSet | None = None, skip_first: int = 1) -> SlowResult:
    if ts.fmt == "flight-recorder":
        return _fr_arrivals(ts)
    tab = _step_table(ts)
    ranks = sorted(r for r in tab if tab[r])
    if not ranks:
        raise BadInput("DIR: the traces hold no completed steps (step/compute events) to time")
    steps = sorted(set.intersection(*(set(tab[r]) for r in ranks)))[skip_first:]
    if len(steps) < 2:
        raise BadInput(f"DIR: only {len(steps)} steps common to all ranks; need at least 2")
    ev: list[str] = []
    med_step = np.array([np.median([tab[r][s]["step"] for r in ranks]) for s in steps])
    if baseline is not None:
        btab = _step_table(baseline)
        bsteps = sorted(set.intersection(*(set(btab[r]) for r in btab if btab[r])))[skip_first:]
        ref = {r: [btab[r][s] for s in bsteps if s in btab.get(r, {})] for r in ranks}
        cur = {r: [tab[r][s] for s in steps] for r in ranks}
        windows = {"reference": f"baseline run, {len(bsteps)} steps", "recent": f"steps "
                   f"{steps[0]}-{steps[-1]}"}
    else:
        k = change_point(med_step)
        ratio = (np.median(med_step[k:]) / np.median(med_step[:k])) if k else 1.0
        if k is None or ratio < STEP_JUMP:
            ref_steps, cur_steps = steps, steps
            windows = {"reference": "none (no step-time jump found)", "recent": f"steps "
                       f"{steps[0]}-{steps[-1]}"}
        else:
            ref_steps, cur_steps = steps[:k], steps[k:]
            windows = {"reference": f"steps {ref_steps[0]}-{ref_steps[-1]}",
                       "recent": f"steps {cur_steps[0]}-{cur_steps[-1]}",
                       "change_at_step": cur_steps[0]}
            ev.append(f"median step time jumps {ratio:.2f}x at step {cur_steps[0]} "
                      f"({np.median(med_step[:k]) * 1e3:.1f} ms -> "
                      f"{np.median(med_step[k:]) * 1e3:.1f} ms)")
        ref = {r: [tab[r][s] for s in ref_steps] for r in ranks}
        cur = {r: [tab[r][s] for s in cur_steps] for r in ranks}

    def med(d: dict[int, list], key: str) -> np.ndarray:
        return np.array([np.median([x[key] for x in d[r]]) if d[r] else np.nan for r in ranks])

    c_ref, c_cur = med(ref, "compute"), med(cur, "compute")
    m_ref, m_cur = med(ref, "comm"), med(cur, "comm")
    b_ref, b_cur = med(ref, "blocked"), med(cur, "blocked")
    s_ref, s_cur = med(ref, "step"), med(cur, "step")
    c_mad = np.array([np.median(np.abs(np.array([x["compute"] for x in cur[r]]) - c_cur[i]))
                      if cur[r] else 0.0 for i, r in enumerate(ranks)])
    n_cur = np.array([len(cur[r]) for r in ranks])
    flag, z = slow_mask(c_cur, c_mad, n_cur)
    score = float(np.median(c_cur)) / np.maximum(c_cur, 1e-12)  # NVRx-style: 1 = typical
    nodes = [ts.ranks[r].node or f"rank{r}" for r in ranks]
    per_rank = tuple({"rank": r, "node": nodes[i], "compute_s": float(c_cur[i]),
                      "compute_ref_s": float(c_ref[i]), "comm_s": float(m_cur[i]),
                      "comm_ref_s": float(m_ref[i]), "blocked_s": float(b_cur[i]),
                      "blocked_ref_s": float(b_ref[i]), "step_s": float(s_cur[i]),
                      "step_ref_s": float(s_ref[i]), "compute_z": float(z[i]),
                      "score": float(score[i])} for i, r in enumerate(ranks))
    node_z: dict[str, float] = {}
    for nd in dict.fromkeys(nodes):
        node_z[nd] = float(max(z[i] for i in range(len(ranks)) if nodes[i] == nd))
    scores = {"per_rank": {str(r): float(z[i]) for i, r in enumerate(ranks)},
              "per_node": node_z, "relative_score": {str(r): float(score[i])
                                                     for i, r in enumerate(ranks)}}
    step_ratio = float(np.median(s_cur) / np.median(s_ref))
    comp_ratio = c_cur / np.maximum(c_ref, 1e-12)
    comm_ratio = m_cur / np.maximum(m_ref, 1e-12)
    hid_ref = 1 - b_ref.sum() / max(m_ref.sum(), 1e-12)
    hid_cur = 1 - b_cur.sum() / max(m_cur.sum(), 1e-12)
    ev.append(f"step {np.median(s_ref) * 1e3:.1f} -> {np.median(s_cur) * 1e3:.1f} ms "
              f"({step_ratio:.2f}x); compute {np.median(c_ref) * 1e3:.1f} -> "
              f"{np.median(c_cur) * 1e3:.1f} ms; collective time {np.median(m_ref) * 1e3:.1f} -> "
              f"{np.median(m_cur) * 1e3:.1f} ms; exposed (blocked) {np.median(b_ref) * 1e3:.1f} "
              f"-> {np.median(b_cur) * 1e3:.1f} ms; communication hidden behind compute "
              f"{hid_ref:.0%} -> {hid_cur:.0%}")
    stragglers = [r for i, r in enumerate(ranks) if flag[i]]
    wins = dict(windows)
    if stragglers:
        others = [i for i, r in enumerate(ranks) if r not in stragglers]
        for r in stragglers:
            i = ranks.index(r)
            ev.append(f"rank {r} ({nodes[i]}): compute {c_cur[i] * 1e3:.1f} ms vs median "
                      f"{np.median(c_cur) * 1e3:.1f} ms ({1 / score[i] - 1:+.0%}, z {z[i]:.1f} "
                      f"> {Z_MAX:g}; NVRx score {score[i]:.2f}"
                      + (f" < {SCORE_MIN}: severe)" if score[i] < SCORE_MIN else ")"))
        if others:
            ev.append(f"the other ranks wait for it: blocked in collectives "
                      f"{np.median(b_cur[others]) * 1e3:.1f} ms per step vs "
                      f"{np.median(b_cur[[ranks.index(r) for r in stragglers]]) * 1e3:.1f} ms "
                      "on the straggler (busy in the collective, not working)")
        return SlowResult("straggler", tuple(stragglers), scores, tuple(ev), wins, per_rank,
                          ts.summary())
    if step_ratio < STEP_JUMP:
        ev.append(f"no rank stands out and the step time is within {STEP_JUMP - 1:.0%} of the "
                  "reference")
        return SlowResult("healthy", (), scores, tuple(ev), wins, per_rank, ts.summary())
    frac = lambda a: float(np.mean(a > GREW))  # noqa: E731
    if frac(comp_ratio) >= MOST:
        ev.append(f"compute grew on {frac(comp_ratio):.0%} of ranks: the whole job computes "
                  "slower (clocks, thermals, a code or data change)")
        return SlowResult("compute", tuple(ranks), scores, tuple(ev), wins, per_rank,
                          ts.summary())
    # Compute unchanged, the step grew by the exposed communication, which splits into the added
    # collective time and the time that no longer hides behind compute. A slower fabric keeps the
    # hidden time (the compute window it runs behind is the same); lost overlap removes it. So
    # whichever of the two is larger names the cause: a collective span that also grew a little
    # (synchronous collectives wait for the last rank to arrive) does not make it a fabric fault.
    lost_s = float(np.median(m_ref - b_ref) - np.median(m_cur - b_cur))
    grew_s = float(np.median(m_cur - m_ref))
    if np.median(b_cur) > GREW * np.median(b_ref) + 1e-4 and hid_cur < hid_ref - HIDDEN_DROP \
            and lost_s > max(grew_s, 0.0):
        ev.append(f"communication hidden behind compute fell by {lost_s * 1e3:.1f} ms per step, "
                  f"more than the collectives grew ({grew_s * 1e3:+.1f} ms): communication that "
                  "used to run behind compute is exposed (lost overlap)")
        return SlowResult("lost-overlap", (), scores, tuple(ev), wins, per_rank, ts.summary())
    if frac(comm_ratio) >= MOST:
        ev.append(f"collective time up {np.median(comm_ratio):.2f}x on {frac(comm_ratio):.0%} "
                  "of ranks together while compute is unchanged: the fabric (links, switches, "
                  "congestion) got slower")
        return SlowResult("fabric", (), scores, tuple(ev), wins, per_rank, ts.summary())
    if np.median(b_cur) > GREW * np.median(b_ref) + 1e-4 and hid_cur < hid_ref - HIDDEN_DROP:
        ev.append("collectives take no longer, but ranks now sit blocked on them: "
                  "communication that used to run behind compute is exposed (lost overlap)")
        return SlowResult("lost-overlap", (), scores, tuple(ev), wins, per_rank, ts.summary())
    if step_ratio < NOISE_MAX:
        ev.append(f"the step time moved {step_ratio:.2f}x with no compute, collective or "
                  f"exposure signal: within run-to-run noise (< {NOISE_MAX}x)")
        return SlowResult("healthy", (), scores, tuple(ev), wins, per_rank, ts.summary())
    ev.append("the step time grew but neither compute, collective time nor exposure explains it")
    return SlowResult("undecided", (), scores, tuple(ev), wins, per_rank, ts.summary())


def _fr_arrivals(ts: TraceSet) -> SlowResult:
    c = ts.columns()
    ranks = sorted(ts.ranks)
    # one arrival per (group, seq, rank): the last record the rank's file lists
    k = np.lexsort((c.pos, c.seq, c.group))
    g, s, p = c.group[k], c.seq[k], c.pos[k]
    keep = np.r_[(g[1:] != g[:-1]) | (s[1:] != s[:-1]) | (p[1:] != p[:-1]), True] \
        if len(k) else np.zeros(0, dtype=bool)
    k, g, s, p = k[keep], g[keep], s[keep], p[keep]
    b = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (s[1:] != s[:-1])]) if len(k) \
        else np.zeros(0, dtype=np.int64)
    n_in = np.diff(np.r_[b, len(k)])
    full = np.flatnonzero(n_in == len(ranks))  # collectives every rank recorded
    if len(full) < 2:
        raise BadInput("DIR: fewer than 2 collectives recorded by every rank; nothing to compare")
    col = np.empty(len(c.order), dtype=np.int64)  # rank position -> column in sorted ranks
    col[[c.position[r] for r in ranks]] = np.arange(len(ranks))
    arrive = np.empty((len(full), len(ranks)))
    for i, j in enumerate(b[full].tolist()):
        arrive[i, col[p[j:j + len(ranks)]]] = c.t_enter[k[j:j + len(ranks)]]
    mid = np.median(arrive, axis=1)
    late = arrive - mid[:, None]
    med_late = np.median(late, axis=0)
    starts = sorted(mid.tolist())
    gap = float(np.median(np.diff(starts))) if len(starts) > 1 else 0.0
    z = (med_late - np.median(med_late)) / max(
        MAD_K * float(np.median(np.abs(med_late - np.median(med_late)))), 0.05 * gap, 1e-4)
    bad = [r for i, r in enumerate(ranks) if z[i] > Z_MAX and med_late[i] > LATE_SHARE * gap]
    scores = {"per_rank": {str(r): float(z[i]) for i, r in enumerate(ranks)}, "per_node": {}}
    ev = [f"{len(full)} collectives recorded by all {len(ranks)} ranks; Flight Recorder on this "
          "backend has no durations, so only arrival lateness is scored",
          f"median time between collectives {gap * 1e3:.1f} ms"]
    for r in bad:
        i = ranks.index(r)
        ev.append(f"rank {r} enters collectives {med_late[i] * 1e3:.1f} ms after the median rank "
                  f"(robust z {z[i]:.1f})")
    ev.append("fabric problems and lost overlap need durations (NCCL with "
              "TORCH_NCCL_ENABLE_TIMING=1, or scalemodel traces)")
    per = tuple({"rank": r, "median_lateness_s": float(med_late[i]), "z": float(z[i])}
                for i, r in enumerate(ranks))
    return SlowResult("straggler" if bad else "undecided", tuple(bad), scores, tuple(ev), {}, per,
                      ts.summary())


# --- per-worker step-time tables (CSV) -----------------------------------------------------------

_WORKER = ("worker", "rank", "worker_id", "node")
_STEP = ("time", "step", "iteration", "iter")
_DUR = ("batch_time_norm", "batch_time", "step_time", "step_time_s", "iteration_time",
        "duration", "duration_s", "time_s")


_HOST = ("host", "hostname", "node_name", "machine")
_PLACED: dict[str, dict[str, str]] = {}  # path -> worker -> where it ran (host/GPU column)


def _worker_key(name: str) -> tuple[int, Any]:
    try:
        return (0, float(name))
    except ValueError:
        return (1, name)


def read_step_csv(path: Path) -> tuple[dict[str, dict[int, float]], list[str], dict[str, Any]]:
    """worker name -> step -> duration; problems; which columns were used (a host or GPU column
    is kept as where each worker ran)."""
    try:
        with open(path, newline="") as f:
            rd = csv.DictReader(f)
            cols = [c.strip() for c in (rd.fieldnames or [])]
            low = {c.lower(): c for c in cols}
            wc = next((low[c] for c in _WORKER if c in low), None)
            dc = next((low[c] for c in _DUR if c in low), None)
            sc = next((low[c] for c in _STEP if c in low and low[c] != dc), None)
            if not (wc and sc and dc):
                raise BadInput(f"{path}: need a worker column ({'/'.join(_WORKER)}), a step "
                               f"column ({'/'.join(_STEP)}) and a duration column "
                               f"({'/'.join(_DUR)}); found {cols}")
            data: dict[str, dict[int, float]] = defaultdict(dict)
            hc = next((low[c] for c in _HOST if c in low and low[c] not in (wc, sc, dc)), None)
            bad = 0
            for row in rd:
                try:
                    x = float(row[dc])
                    if not x > 0:
                        raise ValueError
                    name = str(row[wc]).strip()
                    if not name:
                        raise ValueError
                    data[name][int(float(row[sc]))] = x
                    if hc and row.get(hc):
                        _PLACED.setdefault(str(path), {})[name] = str(row[hc]).strip()
                except (TypeError, ValueError, KeyError):
                    bad += 1
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise BadInput(f"{path}: cannot read as CSV ({e})") from None
    probs = [f"{bad} rows without a positive number skipped"] if bad else []
    return dict(data), probs, {"worker": wc, "step": sc, "duration": dc, "placed_on": hc}


def analyse_step_table(path: str | Path, window: int = 0) -> SlowResult:
    p = Path(path)
    data, probs, cols = read_step_csv(p)
    placed = _PLACED.pop(str(p), {})
    workers = sorted(data, key=_worker_key)
    if len(workers) < 2:
        raise BadInput(f"{p}: need at least 2 workers, found {len(workers)}")
    med = np.array([statistics.median(data[w].values()) for w in workers])
    ref = float(med.min())
    score = ref / med  # NVRx relative score: fastest worker's median / this worker's median
    within = np.array([statistics.median(abs(v - med[i]) for v in data[w].values())
                       for i, w in enumerate(workers)])
    flag, z = slow_mask(med, within, np.array([len(data[w]) for w in workers]))
    steps = sorted(set().union(*(set(d) for d in data.values())))
    win = window or max(5, len(steps) // 20)
    onsets: dict[str, Any] = {}
    indiv: dict[str, float] = {}
    for w in workers:
        s = [data[w][t] for t in steps if t in data[w]]
        wm = [float(np.median(s[i:i + win])) for i in range(0, max(1, len(s) - win + 1), win)]
        best = min(wm)
        indiv[str(w)] = best / max(wm)
        slow_w = [i for i, m in enumerate(wm) if best / m < SCORE_MIN]
        onsets[str(w)] = (steps[slow_w[0] * win] if slow_w else None)
    stragglers = [w for i, w in enumerate(workers) if flag[i] or score[i] < SCORE_MIN]
    episodic = [w for w in workers if w not in stragglers and indiv[str(w)] < SCORE_MIN]
    ev = [f"{len(workers)} workers, {len(steps)} iterations; columns {cols}; reference = the "
          f"fastest worker's median {ref:g}"] + probs
    for i, w in enumerate(workers):
        if w in stragglers:
            ev.append(f"worker {w}: median {med[i]:g}, {med[i] / np.median(med) - 1:+.1%} on the "
                      f"median worker (z {z[i]:.1f}), {1 / score[i]:.2f}x the fastest (score "
                      f"{score[i]:.2f}) over the whole run")
    for w in episodic:
        ev.append(f"worker {w}: slower than {SCORE_MIN} of its own best window from iteration "
                  f"{onsets[str(w)]} (individual score {indiv[str(w)]:.2f}): a straggler episode")
    if len(stragglers) > len(workers) / 2:
        ev.append("more than half the workers are 'slow' against the fastest: look for two "
                  "hardware classes or a placement split rather than single stragglers")
    verdict = "straggler" if stragglers or episodic else "healthy"
    ev.append("a step-time table alone cannot separate fabric from lost overlap (no "
              "compute/communication split)")
    scores = {"per_rank": {str(w): float(z[i]) for i, w in enumerate(workers)}, "per_node": {},
              "relative_score": {str(w): float(score[i]) for i, w in enumerate(workers)},
              "individual_score": indiv}
    per = tuple({"worker": w, "rank": i, "placed_on": placed.get(w), "median": float(med[i]),
                 "slowdown": float(med[i] / np.median(med) - 1), "z": float(z[i]),
                 "flagged": w in stragglers or w in episodic, "score": float(score[i]),
                 "individual_score": indiv[str(w)], "onset": onsets[str(w)]}
                for i, w in enumerate(workers))
    return SlowResult(verdict, tuple(sorted(stragglers + episodic, key=_worker_key)), scores,
                      tuple(ev),
                      {"window_iterations": win}, per,
                      {"format": "step-time-csv", "path": str(p), "columns": cols})
