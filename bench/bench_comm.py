"""Benchmarks of the comm engine (issue targets: 100,000 priced queries < 1 s; a 4-rank gloo
benchmark over 1 KiB - 4 MiB < 60 s on 2 cores).

Run: PYTHONPATH=src python bench/bench_comm.py [--no-live]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def vectorised(n: int = 100_000) -> float:
    from scalemodel.analytic.collectives import COLLECTIVES, make_fabric, price_many

    fab = make_fabric("nvlink4", "ndr-400")
    rng = np.random.default_rng(0)
    colls = rng.choice([c for c in COLLECTIVES if c != "send-recv"], n).astype(object)
    ranks = rng.choice([2, 4, 8, 16, 64, 256, 1024], n)
    sizes = 2.0 ** rng.integers(10, 34, n) * 1024  # multiples of any group's shard size
    t0 = time.perf_counter()
    out = price_many(colls, sizes, ranks, None, fabric=fab, algorithm="auto")
    dt = time.perf_counter() - t0
    assert np.isfinite(out.time_s).all()
    return dt


def one_worked() -> float:
    from scalemodel.analytic.collectives import collective_cost, make_fabric, make_group

    fab = make_fabric("nvlink4", "ndr-400")
    g = make_group(64, fab, 8)
    t0 = time.perf_counter()
    for _ in range(20):
        collective_cost("all-reduce", 2.0**30, g, fab)
    return (time.perf_counter() - t0) / 20


def live() -> tuple[float, int]:
    from scalemodel.live.comm_bench import run_bench

    t0 = time.perf_counter()
    out = run_bench(4, timeout_s=120)
    assert out["ok"], [r.error for r in out["launch"].ranks]
    return time.perf_counter() - t0, len(out["launch"].ranks[0].value["rows"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-live", action="store_true")
    a = ap.parse_args()
    vectorised(1000)  # warm-up (imports, TOML parsing)
    dt = vectorised()
    print(f"price_many, 100,000 mixed queries, auto algorithm+protocol: {dt:.3f} s "
          f"(target < 1 s)")
    print(f"collective_cost with derivation and alternatives, 64 ranks: "
          f"{one_worked() * 1e3:.1f} ms per query")
    if not a.no_live:
        t, rows = live()
        print(f"comm bench, 4 gloo ranks, 7 collectives x 1 KiB-4 MiB ({rows} cells) + ring check: "
              f"{t:.1f} s wall (target < 60 s)")


if __name__ == "__main__":
    main()
