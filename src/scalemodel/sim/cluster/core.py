"""The event loop of the GPU cluster scheduler simulator.

A tiny discrete-event engine: the heap holds ``(time, seq, kind, job, run_id)``; each handler
(arrival, finish, release after a grace period) returns the new events it causes, and after
all events of one instant the policy's scheduling pass runs once and returns more. Stale events
(a finish of a run that was preempted) carry an old ``run_id`` and are ignored.

Accounting (GPU-seconds, exact by construction):
``capacity = useful + lost + spread_overhead + idle``, where ``allocated = useful + lost +
spread_overhead``. *Useful* is work that survived, at the compact-placement speed; *lost* is
work since the last checkpoint thrown away at a preemption, restores, and saves made in a grace
period; *spread overhead* is the extra time of gangs spread over racks.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import BadInput
from ...traces.jobs import JobSpec, Reject, Workload
from .cluster import STRATEGIES, Cluster, FgdContext
from .policies import PolicySpec

ARRIVE, RELEASE, FINISH = 0, 1, 2
WAITING, RUNNING, DONE = 0, 1, 2
SIZE_CLASSES = ((1, 1), (2, 8), (9, 64), (65, 512), (513, 1 << 40))


class _Job:
    __slots__ = ("spec", "i", "gpus", "key", "work_left", "state", "placement", "run_start",
                 "run_restore", "speed", "run_id", "first_start", "finish", "preemptions",
                 "needs_restore", "borrowed", "victim", "est_end", "hold_until", "lost_gpu_s")

    def __init__(self, spec: JobSpec, i: int, by_priority: bool) -> None:
        self.spec, self.i, self.gpus = spec, i, spec.gpus
        self.key = (-spec.priority, spec.submit_s, i) if by_priority else (spec.submit_s, i)
        self.work_left = spec.duration_s
        self.state = WAITING
        self.placement: list[tuple[int, int]] = []
        self.run_start = self.run_restore = 0.0
        self.speed = 1.0
        self.run_id = 0
        self.first_start: float | None = None
        self.finish: float | None = None
        self.preemptions = 0
        self.needs_restore = self.borrowed = self.victim = False
        self.est_end = self.hold_until = 0.0
        self.lost_gpu_s = 0.0


class _Queue:
    """Waiting jobs in key order, with lazy deletion (started jobs are skipped, then compacted)."""

    def __init__(self) -> None:
        self.items: list[_Job] = []
        self.head = 0
        self.alive = 0

    def push(self, j: _Job) -> None:
        it = self.items
        if not it or it[-1].key <= j.key:
            it.append(j)
        else:
            bisect.insort(it, j, lo=self.head, key=lambda x: x.key)
        self.alive += 1

    def removed(self) -> None:
        self.alive -= 1
        dead = len(self.items) - self.head - self.alive
        if dead > 256 and 4 * dead > self.alive:
            self.items = [j for j in self.items[self.head:] if j.state == WAITING]
            self.head = 0

    def __iter__(self) -> Iterable[_Job]:
        return iter(self.window(len(self.items)))

    def window(self, k: int) -> list[_Job]:
        """The first ``k`` waiting jobs, in order; dead entries met on the way are dropped."""
        it = self.items
        i, n = self.head, len(it)
        out: list[_Job] = []
        left = k
        while i < n and left:
            j = it[i]
            if j.state == WAITING:
                out.append(j)
                left -= 1
            i += 1
        if i - self.head > len(out) + 16:  # compact the scanned prefix (a C-level move)
            it[self.head:i] = out
        return out

    def first(self) -> _Job | None:
        it = self.items
        i, n = self.head, len(it)
        while i < n and it[i].state != WAITING:
            i += 1
        self.head = i
        return it[i] if i < n else None


@dataclass(frozen=True)
class SizeStats:
    size_class: str
    jobs: int
    queue_delay_mean_s: float
    queue_delay_p50_s: float
    queue_delay_p99_s: float
    jct_mean_s: float
    jct_p50_s: float
    jct_p99_s: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SimResult:
    policy: str
    workload: str
    nodes: int
    gpus_per_node: int
    capacity_gpus: int
    jobs_in: int
    jobs_completed: int
    jobs_unfinished: int
    utilization: float
    useful_utilization: float
    jct_mean_s: float
    jct_p50_s: float
    jct_p99_s: float
    queue_delay_mean_s: float
    queue_delay_p50_s: float
    queue_delay_p99_s: float
    makespan_s: float
    fragmentation_mean: float
    preemptions: int
    lost_gpu_hours: float
    capacity_gpu_s: float
    allocated_gpu_s: float
    useful_gpu_s: float
    lost_gpu_s: float
    spread_overhead_gpu_s: float
    idle_gpu_s: float
    spread_jobs: int
    by_size: tuple[SizeStats, ...]
    teams: tuple[dict[str, Any], ...]
    quota_fairness_jain: float
    events: int
    rejects: tuple[Reject, ...] = ()
    notes: tuple[str, ...] = ()
    # over the arrival window (first to last submit) and the drain after it (last submit to
    # the last finish): utilisation is allocated GPU-seconds over C x the window's length
    arrival_window_s: float = 0.0
    offered_load: float = 0.0
    utilization_arrivals: float = 0.0
    fragmentation_arrivals: float = 0.0
    drain_s: float = 0.0
    utilization_drain: float = 0.0
    fragmentation_drain: float = 0.0
    series: tuple[tuple[float, int, int], ...] = field(default=(), repr=False)
    segments: tuple[tuple[str, float, float, int, int, str], ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k not in ("series", "segments", "by_size", "rejects", "teams")}
        d["by_size"] = [s.to_dict() for s in self.by_size]
        d["teams"] = [dict(t) for t in self.teams]
        d["rejects"] = [r.to_dict() for r in self.rejects]
        return d


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def percentile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on a sorted list."""
    if not sorted_xs:
        return 0.0
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


class Simulator:
    def __init__(self, workload: Workload, policy: PolicySpec, *, nodes: int,
                 gpus_per_node: int, nodes_per_rack: int, spread_penalty: float,
                 quotas: dict[str, int] | None = None, borrowing: bool = True,
                 backfill_depth: int = 100, record: bool = False, check: bool = False) -> None:
        if nodes < 1 or gpus_per_node < 1 or nodes_per_rack < 1:
            raise BadInput("--nodes, --gpus-per-node and --nodes-per-rack must be at least 1")
        if spread_penalty < 0:
            raise BadInput(f"--spread-penalty must be 0 or more, got {spread_penalty}")
        self.wl, self.policy = workload, policy
        self.cl = Cluster(nodes, gpus_per_node, nodes_per_rack)
        self.place = STRATEGIES[policy.placement]
        self.penalty = spread_penalty
        self.depth = backfill_depth
        self.record, self.check = record, check
        by_prio = policy.order == "priority"
        self.jobs = [_Job(s, i, by_prio) for i, s in enumerate(workload.jobs)]
        self.ctx = (FgdContext(gpus_per_node, [s.gpus for s in workload.jobs])
                    if policy.placement == "fgd" else None)
        teams = sorted({s.team for s in workload.jobs})
        self.quota = dict(quotas) if quotas else {}
        if policy.quota and not quotas:
            share, extra = divmod(self.cl.capacity, max(len(teams), 1))
            self.quota = {t: share + (1 if k < extra else 0) for k, t in enumerate(teams)}
        self.quota_total = sum(self.quota.values())
        self.borrowing = borrowing
        self.use = dict.fromkeys(teams, 0)
        self.team_gpu_s = dict.fromkeys(teams, 0.0)
        self.queue = _Queue()
        self.running: dict[int, _Job] = {}
        self.by_prio: dict[int, dict[int, _Job]] = {}
        self.borrowed_running: dict[int, _Job] = {}
        self.ends: list[tuple[float, int]] = []
        self.prio_gpus: dict[int, int] = {}
        self.alloc = 0
        self.useful = self.lost = self.spread = 0.0
        self.n_preempt = 0
        self.n_spread = 0
        self.freed = True
        self.arrived: list[_Job] = []
        self.last_head = -1
        self.reserved: _Job | None = None
        self.rejects: list[Reject] = list(workload.rejects)
        self.series: list[tuple[float, int, int]] = []
        self.segments: list[tuple[str, float, float, int, int, str]] = []
        self._seq = 0

    # --- events -----------------------------------------------------------------------------
    def _ev(self, t: float, kind: int, j: _Job) -> tuple[float, int, int, _Job, int]:
        self._seq += 1
        return (t, self._seq, kind, j, j.run_id)

    def on_arrive(self, t: float, j: _Job) -> list[Any]:
        cap = self.cl.capacity
        reason = ""
        if j.gpus > cap:
            reason = f"needs {j.gpus} GPUs, the cluster has {cap}"
        elif (self.policy.quota and not self.borrowing
              and j.gpus > self.quota.get(j.spec.team, 0)):
            reason = (f"needs {j.gpus} GPUs, team {j.spec.team!r} has a quota of "
                      f"{self.quota.get(j.spec.team, 0)} and borrowing is off")
        if reason:
            j.state = DONE
            self.rejects.append(Reject(0, j.spec.id, "unschedulable: " + reason))
            return []
        self.queue.push(j)
        self.arrived.append(j)
        return []

    def on_finish(self, t: float, j: _Job) -> list[Any]:
        g = j.gpus
        work = j.work_left
        self.useful += g * work
        self.spread += g * work * (1 / j.speed - 1)
        self.lost += g * j.run_restore
        j.lost_gpu_s += g * j.run_restore
        j.work_left = 0.0
        self._stop(t, j)
        j.state = DONE
        j.finish = t
        return []

    def on_release(self, t: float, j: _Job) -> list[Any]:
        """End of a grace period (or an immediate preemption): account, free, requeue."""
        s = j.spec
        g = j.gpus
        elapsed = t - j.run_start
        saved_by_grace = s.grace_s > 0 and s.grace_s >= s.checkpoint_cost_s
        if saved_by_grace:
            work = max(0.0, elapsed - s.checkpoint_cost_s - j.run_restore) * j.speed
            saved = min(work, j.work_left)
        else:
            work = min(max(0.0, elapsed - j.run_restore) * j.speed, j.work_left)
            iv = s.checkpoint_interval_s
            saved = math.floor(work / iv) * iv if iv > 0 else 0.0
        self.useful += g * saved
        self.spread += g * saved * (1 / j.speed - 1)
        lost = g * elapsed - g * saved / j.speed
        self.lost += lost
        j.lost_gpu_s += lost
        j.work_left -= saved
        self._stop(t, j)
        j.state = WAITING
        j.victim = False
        j.needs_restore = True
        j.preemptions += 1
        self.n_preempt += 1
        self.queue.push(j)
        return []

    # --- start / stop -----------------------------------------------------------------------
    def _start(self, t: float, j: _Job, pl: list[tuple[int, int]], borrowed: bool,
               out: list[Any]) -> None:
        self.cl.take(pl)
        j.state = RUNNING
        self.queue.removed()
        j.placement = pl
        j.borrowed = borrowed
        j.run_start = t
        j.run_restore = j.spec.restore_s if j.needs_restore else 0.0
        spread = len(pl) > 1 and self.cl.racks(pl) > 1
        j.speed = 1 / (1 + self.penalty) if spread else 1.0
        self.n_spread += spread
        j.run_id += 1
        if j.first_start is None:
            j.first_start = t
        j.est_end = t + j.run_restore + j.work_left / j.speed
        bisect.insort(self.ends, (j.est_end, j.i))
        self.running[j.i] = j
        self.by_prio.setdefault(j.spec.priority, {})[j.i] = j
        if borrowed:
            self.borrowed_running[j.i] = j
        self.alloc += j.gpus
        self.use[j.spec.team] += j.gpus
        p = j.spec.priority
        self.prio_gpus[p] = self.prio_gpus.get(p, 0) + j.gpus
        out.append(self._ev(j.est_end, FINISH, j))

    def _stop(self, t: float, j: _Job) -> None:
        self.cl.give(j.placement)
        k = bisect.bisect_left(self.ends, (j.est_end, j.i))
        del self.ends[k]
        del self.running[j.i]
        del self.by_prio[j.spec.priority][j.i]
        self.borrowed_running.pop(j.i, None)
        self.alloc -= j.gpus
        self.use[j.spec.team] -= j.gpus
        self.prio_gpus[j.spec.priority] -= j.gpus
        self.team_gpu_s[j.spec.team] += j.gpus * (t - j.run_start)
        if self.record:
            self.segments.append((j.spec.id, j.run_start, t, j.placement[0][0], j.gpus,
                                  "done" if j.work_left <= 0 else "preempted"))
        j.run_id += 1  # any pending finish/release of this run is now stale
        self.freed = True

    # --- the scheduling pass ----------------------------------------------------------------
    def _admit(self, j: _Job) -> tuple[bool, bool]:
        if not self.policy.quota:
            return True, False
        team = j.spec.team
        if self.use[team] + j.gpus <= self.quota.get(team, 0):
            return True, False
        if self.borrowing and self.alloc + j.gpus <= self.quota_total:
            return True, True
        return False, False

    def _try(self, t: float, j: _Job, out: list[Any]) -> bool:
        if j.gpus > self.cl.free_total:
            return False
        ok, borrowed = self._admit(j)
        if not ok:
            return False
        pl = self.place(self.cl, j.gpus, self.ctx)
        if pl is None:
            return False
        self._start(t, j, pl, borrowed, out)
        return True

    def schedule(self, t: float) -> list[Any]:
        out: list[Any] = []
        mode = self.policy.queue
        q = self.queue
        if self.reserved is not None:  # a preemptor whose victims were released: it goes first
            r = self.reserved
            if r.state != WAITING or self._try(t, r, out) or r.hold_until < t:
                self.reserved = None
        if mode == "besteffort":
            cands = q.window(self.depth) if (self.freed or not self.arrived) else self.arrived
            for j in cands:
                if self.cl.free_total == 0:
                    break
                if j.state == WAITING:
                    self._try(t, j, out)
        else:
            self._heads(t, out)
            if mode == "easy":
                self._backfill(t, out)
        if self.policy.preemption or self.policy.quota:
            self._maybe_preempt(t, out)
        self.freed = False
        self.arrived = []
        return out

    def _heads(self, t: float, out: list[Any]) -> None:
        while True:
            j = self.queue.first()
            if j is None or not self._try(t, j, out):
                return

    def _backfill(self, t: float, out: list[Any]) -> None:
        head = self.queue.first()
        if head is None or self.cl.free_total == 0:
            return
        changed = self.freed or head.i != self.last_head
        self.last_head = head.i
        if not changed and not self.arrived:
            return
        shadow, extra = -1.0, 0  # the head's reservation, computed when first needed
        cands = self.queue.window(self.depth + 1) if changed else self.arrived
        cl = self.cl
        for j in cands:
            if cl.free_total == 0:
                break
            if j is head or j.state != WAITING or j.gpus > cl.free_total:
                continue
            if shadow < 0:
                shadow, extra = self._reservation(head)
            runtime = (j.spec.restore_s if j.needs_restore else 0.0) + j.work_left
            ends_in_time = t + runtime <= shadow
            if (ends_in_time or j.gpus <= extra) and self._try(t, j, out) and not ends_in_time:
                extra -= j.gpus

    def _reservation(self, head: _Job) -> tuple[float, int]:
        """When enough GPUs will be free (by count) for the head, and how many it leaves over."""
        avail = self.cl.free_total
        need = head.gpus
        if avail >= need:  # blocked by placement (fragmentation): wait for the next end
            return (self.ends[0][0] if self.ends else math.inf), 0
        jobs = self.jobs
        end = math.inf
        for k, (end, i) in enumerate(self.ends):
            avail += jobs[i].gpus
            if avail >= need:
                return end, avail - need
            if k == 255:
                # a bounded walk: reserving at the 256th end is earlier than the true
                # reservation, so fewer jobs backfill and the head is never delayed
                return end, 0
        return math.inf, 0

    def _maybe_preempt(self, t: float, out: list[Any]) -> None:
        head = None
        if self.policy.quota:
            # the first waiting job that is within its team's nominal quota may reclaim
            for j in self.queue.window(16):
                if self.use[j.spec.team] + j.gpus <= self.quota.get(j.spec.team, 0):
                    head = j
                    break
        else:
            head = self.queue.first()
        if head is None or head.hold_until > t:
            return
        p = head.spec.priority
        if self.policy.quota:
            cands = [v for v in self.borrowed_running.values()
                     if not v.victim and v.spec.team != head.spec.team]
            if not cands:
                return
            cands.sort(key=lambda v: -v.run_start)
        else:
            lower = sum(g for q, g in self.prio_gpus.items() if q < p)
            if self.cl.free_total + lower < head.gpus:
                return
            cands = self._victims_by_priority(t, p)
        extra: dict[int, int] = {}
        chosen = []
        for v in cands:
            chosen.append(v)
            for n, g in v.placement:
                extra[n] = extra.get(n, 0) + g
            if self.cl.fits_with(head.gpus, extra):
                break
        else:
            return
        hold = t
        for v in chosen:
            v.victim = True
            if v.spec.grace_s > 0:
                rel = t + v.spec.grace_s
                hold = max(hold, rel)
                if rel < v.est_end:  # it may still finish inside its grace period
                    out.append(self._ev(rel, RELEASE, v))
            else:
                self.on_release(t, v)
        head.hold_until = hold
        if hold > t:
            self.reserved = head
        else:  # GPUs are free now: start the preemptor first, then let others follow
            self._try(t, head, out)
            self._heads(t, out)
            if self.policy.queue == "easy":
                self._backfill(t, out)

    def _victims_by_priority(self, t: float, p: int) -> Iterable[_Job]:
        """Running jobs below priority ``p``: lowest priority first, then least work lost."""
        for q in sorted(k for k in self.by_prio if k < p):
            group = [v for v in self.by_prio[q].values() if not v.victim]
            # a bounded search, like production preemptors: batches of 256 in start order,
            # each taken least-loss first
            for b in range(0, len(group), 256):
                batch = group[b:b + 256]
                batch.sort(key=lambda v: self._loss_if_preempted(t, v))
                yield from batch

    def _loss_if_preempted(self, t: float, v: _Job) -> float:
        work = max(0.0, t - v.run_start - v.run_restore) * v.speed
        iv = v.spec.checkpoint_interval_s
        return v.gpus * (work - (math.floor(work / iv) * iv if iv > 0 else 0.0))

    # --- invariants (tests) -----------------------------------------------------------------
    def _check(self) -> None:
        cl = self.cl
        assert 0 <= cl.free_total <= cl.capacity
        assert all(0 <= f <= cl.gpn for f in cl.free)
        assert sum(cl.free) == cl.free_total == cl.capacity - self.alloc
        for j in self.running.values():
            assert sum(g for _, g in j.placement) == j.gpus, "a gang runs partly"
        if self.policy.quota:
            for team in self.use:
                own = sum(j.gpus for j in self.running.values()
                          if j.spec.team == team and not j.borrowed)
                assert own <= self.quota.get(team, 0), f"team {team} over quota unborrowed"

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> SimResult:
        heap = [self._ev(j.spec.submit_s, ARRIVE, j) for j in self.jobs]
        heapq.heapify(heap)
        handlers = {ARRIVE: self.on_arrive, RELEASE: self.on_release, FINISH: self.on_finish}
        t0 = heap[0][0] if heap else 0.0
        t_arr = max((j.spec.submit_s for j in self.jobs), default=t0)
        last_t, area_frag, events = t0, 0.0, 0
        frag_now = alloc_now = 0
        win = [0.0, 0.0, 0.0, 0.0]  # allocated and fragmented GPU-s: arrivals, drain
        cap = self.cl.capacity
        while heap:
            t = heap[0][0]
            area_frag += frag_now * (t - last_t)
            cut = min(max(t_arr, last_t), t)  # [last_t, cut] in the arrival window, rest drain
            win[0] += alloc_now * (cut - last_t)
            win[1] += frag_now * (cut - last_t)
            win[2] += alloc_now * (t - cut)
            win[3] += frag_now * (t - cut)
            last_t = t
            while heap and heap[0][0] == t:
                _, _, kind, j, rid = heapq.heappop(heap)
                events += 1
                if kind != ARRIVE and rid != j.run_id:
                    continue  # stale
                for ev in handlers[kind](t, j):
                    heapq.heappush(heap, ev)
            for ev in self.schedule(t):
                heapq.heappush(heap, ev)
            head = self.queue.first()
            frag_now = self.cl.unusable_for(head.gpus) if head is not None else 0
            alloc_now = self.alloc
            if self.record:
                self.series.append((t, self.alloc, frag_now))
            if self.check:
                self._check()
        res = self._result(t0, last_t, area_frag, events, cap)
        arr, drain = max(t_arr - t0, 0.0), max(last_t - t_arr, 0.0)
        demand = sum(j.spec.gpus * j.spec.duration_s for j in self.jobs)
        return replace(
            res, arrival_window_s=arr, drain_s=drain,
            offered_load=demand / (cap * arr) if arr > 0 else 0.0,
            utilization_arrivals=win[0] / (cap * arr) if arr > 0 else 0.0,
            fragmentation_arrivals=win[1] / (cap * arr) if arr > 0 else 0.0,
            utilization_drain=win[2] / (cap * drain) if drain > 0 else 0.0,
            fragmentation_drain=win[3] / (cap * drain) if drain > 0 else 0.0)

    def _result(self, t0: float, t_end: float, area_frag: float, events: int,
                cap: int) -> SimResult:
        span = max(t_end - t0, 0.0)
        capacity_gpu_s = cap * span
        allocated = self.useful + self.lost + self.spread
        done = [j for j in self.jobs if j.finish is not None]
        unfinished = [j for j in self.jobs if j.finish is None and j.state != DONE]
        for j in unfinished:
            self.rejects.append(Reject(0, j.spec.id, "never finished (still waiting at the end)"))

        def stats(js: list[_Job]) -> tuple[float, float, float, float, float, float]:
            qd = sorted(j.first_start - j.spec.submit_s for j in js)  # type: ignore[operator]
            jc = sorted(j.finish - j.spec.submit_s for j in js)  # type: ignore[operator]
            return (_mean(qd), percentile(qd, 0.5), percentile(qd, 0.99), _mean(jc),
                    percentile(jc, 0.5), percentile(jc, 0.99))

        by_size = []
        for lo, hi in SIZE_CLASSES:
            js = [j for j in done if lo <= j.gpus <= hi]
            if js:
                label = str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 1 << 40 else f"{lo}+")
                by_size.append(SizeStats(label, len(js), *stats(js)))
        qd_mean, qd50, qd99, jct_mean, jct50, jct99 = stats(done)
        teams = []
        shares = []
        for team, gs in sorted(self.team_gpu_s.items()):
            demand = sum(j.spec.gpus * j.spec.duration_s for j in self.jobs if j.spec.team == team)
            qd = [j.first_start - j.spec.submit_s for j in done if j.spec.team == team]
            nominal = self.quota.get(team) if self.quota else None
            entitled = (nominal / self.quota_total if nominal is not None and self.quota_total
                        else 1 / len(self.team_gpu_s))
            use_share = gs / allocated if allocated else 0.0
            shares.append(use_share / entitled if entitled else 0.0)
            teams.append({"team": team, "nominal_gpus": nominal, "allocated_gpu_s": gs,
                          "allocated_share": use_share, "demand_gpu_s": demand,
                          "queue_delay_mean_s": sum(qd) / len(qd) if qd else 0.0,
                          "preemptions": sum(j.preemptions for j in self.jobs
                                             if j.spec.team == team)})
        jain = (sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares))
                if shares and any(shares) else 1.0)
        return SimResult(
            policy=self.policy.name, workload=self.wl.name, nodes=self.cl.nodes,
            gpus_per_node=self.cl.gpn, capacity_gpus=cap, jobs_in=len(self.jobs),
            jobs_completed=len(done), jobs_unfinished=len(unfinished),
            utilization=allocated / capacity_gpu_s if capacity_gpu_s else 0.0,
            useful_utilization=self.useful / capacity_gpu_s if capacity_gpu_s else 0.0,
            jct_mean_s=jct_mean, jct_p50_s=jct50, jct_p99_s=jct99,
            queue_delay_mean_s=qd_mean, queue_delay_p50_s=qd50, queue_delay_p99_s=qd99,
            makespan_s=span,
            fragmentation_mean=area_frag / capacity_gpu_s if capacity_gpu_s else 0.0,
            preemptions=self.n_preempt, lost_gpu_hours=self.lost / 3600,
            capacity_gpu_s=capacity_gpu_s, allocated_gpu_s=allocated, useful_gpu_s=self.useful,
            lost_gpu_s=self.lost, spread_overhead_gpu_s=self.spread,
            idle_gpu_s=capacity_gpu_s - allocated, spread_jobs=self.n_spread,
            by_size=tuple(by_size), teams=tuple(teams), quota_fairness_jain=jain,
            events=events, rejects=tuple(self.rejects), notes=self.wl.notes,
            series=tuple(self.series), segments=tuple(self.segments))


def simulate(workload: Workload, policy: PolicySpec, **kw: Any) -> SimResult:
    return Simulator(workload, policy, **kw).run()
