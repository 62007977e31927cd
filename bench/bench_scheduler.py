"""Benchmark: replay N synthetic jobs on a cluster under each policy (target: 100,000 jobs on
1,024 nodes in under 10 s per policy on 2 cores).

    PYTHONPATH=src python bench/bench_scheduler.py [--jobs 100000] [--nodes 1024] [--policy P]

Prints wall and CPU seconds per policy, the events processed and the headline metrics, and the
Alibaba v2023 replay for comparison.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalemodel.sim.cluster.policies import NAMES  # noqa: E402
from scalemodel.sim.cluster.run import ClusterConfig, load_workload, run_policy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--policy", action="append", choices=NAMES)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cfg = ClusterConfig(nodes=a.nodes)
    wl = load_workload("synthetic", cfg.capacity, jobs=a.jobs, seed=a.seed)
    print(f"{wl.name} on {a.nodes} nodes x 8 GPUs")
    print(f"{'policy':14s} {'wall s':>7s} {'cpu s':>7s} {'events':>8s} {'offer':>6s} "
          f"{'U arr':>6s} {'F arr':>6s} {'drain d':>7s} {'U mksp':>6s} {'preempt':>8s}")
    for p in a.policy or NAMES:
        t, c = time.perf_counter(), time.process_time()
        r = run_policy(wl, p, cfg)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        # utilisation / fragmentation over the arrival window; the drain after it apart
        print(f"{p:14s} {wall:7.2f} {cpu:7.2f} {r.events:8d} {r.offered_load:6.3f} "
              f"{r.utilization_arrivals:6.3f} {r.fragmentation_arrivals:6.3f} "
              f"{r.drain_s / 86400:7.1f} {r.utilization:6.3f} {r.preemptions:8d}")


if __name__ == "__main__":
    main()
