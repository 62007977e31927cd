"""Scenarios for the scheduler simulator: load a workload, run policies, export the results.

This is the glue the CLI and the question bank share: it builds the workload (the Alibaba
trace, a user CSV or the synthetic generator), runs one policy or all of them, and turns a
result into a derivation (the accounting identity), a Chrome trace, or usage records that
``scalemodel bill`` can price.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ...derive import Derivation
from ...errors import BadInput
from ...specs.sources import cite, load_toml
from ...traces.jobs import Workload, read_jobs_csv
from .core import SimResult, simulate
from .policies import NAMES, get_policy
from .workload import generate


def topology_defaults() -> dict[str, float]:
    t = load_toml("scheduler.toml")["topology"]
    return {k: float(v["value"]) for k, v in t.items()}


@dataclass(frozen=True)
class ClusterConfig:
    """A simulated cluster; rack size and spread penalty default to scheduler.toml [topology]."""

    nodes: int = 128
    gpus_per_node: int = 8
    nodes_per_rack: int = field(
        default_factory=lambda: int(topology_defaults()["nodes_per_rack"]))
    spread_penalty: float = field(default_factory=lambda: topology_defaults()["spread_penalty"])
    backfill_depth: int = 100
    borrowing: bool = True
    quotas: tuple[tuple[str, int], ...] = ()

    @property
    def capacity(self) -> int:
        return self.nodes * self.gpus_per_node


def load_workload(trace: str, capacity: int, *, jobs: int = 10000, seed: int = 0,
                  load: float | None = None, time_scale: float = 1.0,
                  contract: dict[str, float] | None = None) -> Workload:
    """``trace`` is ``alibaba-v2023``, ``synthetic``, ``alibaba-mix`` (synthetic jobs with the
    Alibaba trace's job-size mix) or a CSV path (our format or openb)."""
    from ...traces.alibaba_gpu import is_openb, read_openb

    if time_scale <= 0:
        raise BadInput(f"--time-scale must be positive, got {time_scale}")
    if trace == "alibaba-v2023":
        return read_openb(None, contract, time_scale)
    if trace == "synthetic":
        return generate(jobs, capacity, seed=seed, offered_load=load)
    if trace == "alibaba-mix":
        return generate(jobs, capacity, seed=seed, offered_load=load,
                        size_mix=trace_size_mix(), mix_name="Alibaba v2023")
    p = Path(trace)
    if not p.is_file():
        raise BadInput(f"--trace must be alibaba-v2023, synthetic or a CSV file; "
                       f"{trace!r} is none of these")
    if is_openb(p):
        return read_openb(p, contract, time_scale)
    return read_jobs_csv(p, contract)


def trace_size_mix(path: str | Path | None = None) -> dict[int, float]:
    """Share of jobs by GPU count in an openb pod list (default: the bundled v2023 trace; a pod
    asking for part of a GPU counts as 1 GPU, as the replay does). Bundled: 1 GPU 98.8%, 2
    0.24%, 4 0.24%, 8 0.71% of 6,203 replayable pods (by GPU-time 87% / 0.9% / 0.2% / 11.7%)."""
    from ...traces.alibaba_gpu import read_openb

    wl = read_openb(path)
    counts: dict[int, int] = {}
    for j in wl.jobs:
        counts[j.gpus] = counts.get(j.gpus, 0) + 1
    n = sum(counts.values())
    if not n:
        raise BadInput("size mix: the trace has no replayable GPU pod")
    return {g: c / n for g, c in sorted(counts.items())}


def no_wait_utilization(wl: Workload, capacity: int) -> float:
    """Utilisation of the arrival window if every job started on arrival and ran its duration
    (no queueing, no placement limits): sum of g x (the part of [submit, submit + d] inside
    the window) over capacity x window. A scheduler can only delay work, so its utilisation
    over the window is at most this (preemption re-runs aside); the gap to the offered load
    is the window's edges: the cluster starts empty and late arrivals run past its end."""
    t0 = min(j.submit_s for j in wl.jobs)
    t1 = max(j.submit_s for j in wl.jobs)
    if t1 <= t0:
        return 0.0
    inside = sum(j.gpus * (min(j.submit_s + j.duration_s, t1) - j.submit_s) for j in wl.jobs)
    return inside / (capacity * (t1 - t0))


def run_policy(wl: Workload, policy: str, cfg: ClusterConfig, *, record: bool = False,
               check: bool = False) -> SimResult:
    return simulate(wl, get_policy(policy), nodes=cfg.nodes, gpus_per_node=cfg.gpus_per_node,
                    nodes_per_rack=cfg.nodes_per_rack, spread_penalty=cfg.spread_penalty,
                    quotas=dict(cfg.quotas) or None, borrowing=cfg.borrowing,
                    backfill_depth=cfg.backfill_depth, record=record, check=check)


def compare(wl: Workload, cfg: ClusterConfig,
            policies: tuple[str, ...] = NAMES) -> list[SimResult]:
    return [run_policy(wl, p, cfg) for p in policies]


COMPARE_COLUMNS = ("policy", "offered load", "utilization (arrivals)", "fragmentation (arrivals)",
                   "utilization (drain)", "drain (days)", "utilization (makespan)",
                   "JCT p50 (s)", "JCT p99 (s)", "queue delay mean (s)", "preemptions",
                   "lost GPU-hours", "spread jobs", "completed")


def compare_rows(results: list[SimResult]) -> tuple[tuple[Any, ...], ...]:
    """One row per result. Utilisation and fragmentation are read over the arrival window
    (first to last submit), where the offered load applies; the drain after the last arrival
    is reported apart, and the makespan figure (which includes the drain) last."""
    return tuple((r.policy, f"{r.offered_load:.1%}", f"{r.utilization_arrivals:.1%}",
                  f"{r.fragmentation_arrivals:.1%}", f"{r.utilization_drain:.1%}",
                  round(r.drain_s / 86400, 1), f"{r.utilization:.1%}",
                  round(r.jct_p50_s), round(r.jct_p99_s), round(r.queue_delay_mean_s),
                  r.preemptions, round(r.lost_gpu_hours, 1), r.spread_jobs, r.jobs_completed)
                 for r in results)


def accounting(r: SimResult) -> Derivation:
    """The GPU-time identity of one run, recomputed step by step from the engine's totals."""
    d = Derivation(f"GPU time of the {r.policy} run")
    d.given("GPUs in the cluster", "C", r.capacity_gpus, "GPU")
    d.given("makespan (first submit to last finish)", "T", r.makespan_s, "s")
    d.calc("capacity", "A_cap", "C * T", "GPU*s", check=r.capacity_gpu_s)
    d.given("useful GPU time (work kept)", "A_use", r.useful_gpu_s, "GPU*s")
    d.given("lost to preemption (rework + restores + saves)", "A_lost", r.lost_gpu_s, "GPU*s")
    d.given("spread overhead (gangs over racks)", "A_spread", r.spread_overhead_gpu_s, "GPU*s")
    d.calc("allocated", "A_alloc", "A_use + A_lost + A_spread", "GPU*s",
           check=r.allocated_gpu_s, rel_tol=1e-6)
    d.calc("idle", "A_idle", "A_cap - A_alloc", "GPU*s", check=r.idle_gpu_s, rel_tol=1e-6)
    d.calc("utilisation (allocated)", "U", "A_alloc / A_cap", "1", check=r.utilization,
           rel_tol=1e-6)
    d.calc("useful utilisation", "U_use", "A_use / A_cap", "1", check=r.useful_utilization,
           rel_tol=1e-6)
    d.calc("lost GPU-hours", "H_lost", "A_lost / 3600", "GPU*h", check=r.lost_gpu_hours,
           rel_tol=1e-6)
    return d


def contract_sources() -> list[str]:
    c = load_toml("scheduler.toml")["checkpoint_contract"]
    return [f"{k} = {v['value']:g} ({cite(v['source'])})" for k, v in c.items()]


def write_chrome_trace(r: SimResult, path: str | Path, gpus_per_node: int) -> Path:
    """Each run of a job as a complete event; pid = first node's rack, tid = first node."""
    if not r.segments:
        raise BadInput("--chrome-trace: this run recorded no segments")
    p = Path(path)
    if not p.parent.exists():
        raise BadInput(f"--chrome-trace: folder {str(p.parent)!r} does not exist")
    evs = [{"name": jid, "ph": "X", "ts": start * 1e6, "dur": (end - start) * 1e6,
            "pid": 0, "tid": node, "cat": state, "args": {"gpus": gpus, "end": state}}
           for jid, start, end, node, gpus, state in r.segments]
    with open(p, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": evs, "displayTimeUnit": "ms",
                   "otherData": {"policy": r.policy, "workload": r.workload,
                                 "gpus_per_node": gpus_per_node}}, f)
    return p


def write_usage(r: SimResult, wl: Workload, path: str | Path, sku: str,
                epoch: str = "2026-11-01T00:00:00+00:00") -> Path:
    """Usage records (one per run of a job) for ``scalemodel bill``: account = team."""
    if not r.segments:
        raise BadInput("--usage-out: this run recorded no segments")
    base = datetime.fromisoformat(epoch).astimezone(UTC)
    team = {j.id: j.team for j in wl.jobs}
    p = Path(path)
    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(("id", "account", "sku", "start", "end", "quantity", "count", "attributes"))
        for k, (jid, start, end, _node, gpus, state) in enumerate(r.segments):
            s = base + timedelta(seconds=round(start, 3))
            e = base + timedelta(seconds=round(end, 3))
            w.writerow((f"{jid}#{k}", team.get(jid, "default"), sku,
                        s.isoformat().replace("+00:00", "Z"), e.isoformat().replace("+00:00", "Z"),
                        "", gpus, json.dumps({"end": state, "policy": r.policy})))
    return p

