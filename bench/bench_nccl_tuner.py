"""CPU time of the collectives engine's automatic choice on planner-sized query arrays.

price_best is what step/comm.py collective_time calls for every TP, DP, PP, CP and EP term of a
layout grid; since the NCCL tuning model picks the pair, each call also evaluates NCCL's model
for every candidate. Run: PYTHONPATH=src python bench/bench_nccl_tuner.py [--json]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main() -> dict:
    from scalemodel.analytic.collectives import make_fabric, price_best

    fab = make_fabric("nvlink4", "ndr-400")
    rng = np.random.default_rng(0)
    q = 4096  # unique (size, ranks, placement) queries, about what a large layout grid dedups to
    S = 2.0 ** rng.integers(10, 34, q) * 16
    n = 2.0 ** rng.integers(1, 11, q)
    p = np.minimum(n, 2.0 ** rng.integers(0, 4, q))
    out = {}
    for coll in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"):
        nn = np.full(q, 2.0) if coll == "send-recv" else n
        pp = np.minimum(p, nn)
        price_best(coll, S[:8], nn[:8], pp[:8], fabric=fab)  # warm caches
        reps = 5
        t0 = time.process_time()
        for _ in range(reps):
            price_best(coll, S, nn, pp, fabric=fab)
        out[coll] = (time.process_time() - t0) / reps
    return {"queries": q, "cpu_s_per_call": out}


if __name__ == "__main__":
    r = main()
    if "--json" in sys.argv:
        print(json.dumps(r, indent=1))
    else:
        for k, v in r["cpu_s_per_call"].items():
            print(f"{k:15s} {v * 1e3:8.2f} ms CPU for {r['queries']} queries")
