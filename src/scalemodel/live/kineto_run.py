"""A small gloo training loop profiled with torch.profiler, one Kineto trace per rank.

It writes what a user's job writes (``export_chrome_trace`` of a profile with one
``prof.step()`` per step) with real gloo all-reduces. Compute is a ``record_function("compute")``
region holding a few real matmuls and a wait standing for device work: on a shared CPU, gloo's
own threads would otherwise compete with CPU matmuls and no overlap could be real. An injected
fault from ``fault_step`` on:

* ``straggler``: the fault rank's compute takes ``slow_factor`` times as long;
* ``slow-link``: every rank moves ``link_factor`` times the bytes per step over the same
  loopback, which is what a link ``link_factor`` times slower does to the same payload (this
  machine has no slower link to switch to). Gloo reduces on the CPU, so a collective running
  beside the matmuls would slow them too; this scenario therefore runs its all-reduce after
  the compute in every step (no overlap to lose), and its compute stays unchanged;
* ``lost-overlap``: the all-reduce that ran behind the second half of the compute (async, then
  wait) becomes synchronous before it, so the same communication is exposed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCENARIOS = ("healthy", "straggler", "slow-link", "lost-overlap")


def train(rank: int, world: int, *, scenario: str, out: str, steps: int = 10, fault_step: int = 5,
          fault_rank: int = -1, compute_s: float = 0.04, numel: int = 1 << 20,
          slow_factor: float = 4.0, link_factor: int = 8, gz: bool = False) -> dict[str, Any]:
    import time

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(rank)
    fault_rank = fault_rank if fault_rank >= 0 else world - 1
    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    name = outp / f"rank{rank}.trace.json{'.gz' if gz else ''}"
    a = torch.randn(192, 192) / 14

    def compute(seconds: float) -> None:
        nonlocal a
        t_end = time.perf_counter() + seconds
        with record_function("compute"):
            for _ in range(4):
                a = torch.tanh(a @ a)
            time.sleep(max(t_end - time.perf_counter(), 0.0))

    bufs = {numel: torch.ones(numel), numel * link_factor: torch.ones(numel * link_factor)}

    def ready(p: Any) -> None:
        p.export_chrome_trace(str(name))

    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=steps), on_trace_ready=ready) as prof:
        for step in range(steps + 1):  # the first step is the profiler's warm-up
            faulty = step - 1 >= fault_step
            c = compute_s * (slow_factor if faulty and rank == fault_rank and
                             scenario == "straggler" else 1)
            size = numel * (link_factor if faulty and scenario == "slow-link" else 1)
            g = bufs[size]  # allocated before profiling: no fill ops inside the steps
            if scenario == "slow-link" or (faulty and scenario == "lost-overlap"):
                dist.all_reduce(g)
                compute(c)
            else:
                compute(c / 2)
                work = dist.all_reduce(g, async_op=True)
                compute(c / 2)
                work.wait()
            prof.step()
    return {"rank": rank, "trace": str(name)}


def run_profiled(scenario: str, ranks: int, out: str | Path, **kw: Any) -> Any:
    from ..errors import BadInput
    from .launcher import launch

    if scenario not in SCENARIOS:
        raise BadInput(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    return launch("scalemodel.live.kineto_run:train", ranks,
                  kwargs={"scenario": scenario, "out": str(out), **kw}, timeout_s=180.0,
                  fail_fast=True)
