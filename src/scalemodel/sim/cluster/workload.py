"""A seeded generator of large-training-job workloads for the scheduler simulator.

Sizes are powers of two from 1 to ``max_gpus`` with P(2^k) proportional to (2^k)^-a (heavy
tailed: with a = 1 each size class demands the same number of GPUs); run times are log-normal;
arrivals are Poisson with the rate that makes the demanded GPU-seconds a chosen fraction of the
cluster's capacity (the offered load). Defaults live in ``specs/data/scheduler.toml``.
"""

from __future__ import annotations

import math
import random

from ...errors import BadInput
from ...traces.jobs import JobSpec, Workload, contract_defaults

# the source key (sources_scheduler.toml) of every figure of the generator
SOURCE = "assumption-synthetic"


def synthetic_defaults() -> dict[str, float]:
    from ...specs.sources import load_toml

    return {k: float(v["value"]) for k, v in load_toml("scheduler.toml")["synthetic"].items()}


def generate(n_jobs: int, capacity_gpus: int, *, seed: int = 0,
             size_mix: dict[int, float] | None = None, mix_name: str = "",
             **overrides: float) -> Workload:
    """``n_jobs`` jobs for a cluster of ``capacity_gpus`` GPUs (sizes never exceed it).

    ``size_mix`` ({GPUs: weight}) replaces the power-of-two heavy tail (e.g. a real trace's
    job-size mix). The arrival rate is derived from the drawn jobs: lambda = load x C /
    mean(g x d), so the GPU-seconds demanded per second of the arrival window are ``load`` x C
    in expectation (the sizes and durations are drawn before the arrival times)."""
    if n_jobs < 1:
        raise BadInput(f"--jobs must be at least 1, got {n_jobs}")
    p = synthetic_defaults() | {k: float(v) for k, v in overrides.items() if v is not None}
    c = contract_defaults()
    if not 0 < p["offered_load"] <= 10:
        raise BadInput(f"--load must be in (0, 10], got {p['offered_load']}")
    rng = random.Random(seed)
    if size_mix:
        sizes = sorted(g for g, w in size_mix.items() if w > 0)
        if not sizes or sizes[0] < 1:
            raise BadInput("size mix: needs a positive weight on a size of 1 GPU or more")
        big = [g for g in sizes if g > capacity_gpus]
        if big:
            raise BadInput(f"size mix: jobs of {big[0]} GPUs do not fit {capacity_gpus} GPUs")
        weights = [size_mix[g] for g in sizes]
    else:
        max_g = max(1, min(int(p["max_gpus"]), capacity_gpus))
        sizes = [2**k for k in range(int(math.log2(max_g)) + 1)]
        weights = [s ** -p["size_exponent"] for s in sizes]
    mu, sigma = math.log(p["duration_median_s"]), p["duration_sigma"]
    gs = rng.choices(sizes, weights, k=n_jobs)
    ds = [min(p["max_duration_s"], max(p["min_duration_s"], rng.lognormvariate(mu, sigma)))
          for _ in gs]
    demand = sum(g * d for g, d in zip(gs, ds, strict=True)) / n_jobs  # GPU-s per job
    rate = p["offered_load"] * capacity_gpus / demand  # jobs per second
    teams = [f"team-{i}" for i in range(int(p["teams"]))]
    t = 0.0
    jobs = []
    for i, (g, d) in enumerate(zip(gs, ds, strict=True)):
        t += rng.expovariate(rate)
        jobs.append(JobSpec(
            id=f"job-{i:06d}", submit_s=round(t, 3), gpus=g, duration_s=round(d, 3),
            priority=1 if rng.random() < p["high_priority_fraction"] else 0,
            team=rng.choice(teams), checkpoint_interval_s=c["checkpoint_interval_s"],
            checkpoint_cost_s=c["checkpoint_cost_s"], restore_s=c["restore_s"],
            grace_s=c["grace_s"]))
    kind = f"synthetic, {mix_name} sizes" if mix_name else "synthetic"
    return Workload(f"{kind} (seed {seed}, {n_jobs} jobs, load {p['offered_load']:g})",
                    tuple(jobs), source=SOURCE)
