"""MoE benchmarks: router simulation speed, placement speed and quality vs EPLB.

Run: PYTHONPATH=src python bench/bench_moe.py
Targets (issue 4): >= 1,000,000 token-routing decisions per second of wall time; placement of
61 layers x 256 experts onto 320 GPUs in under 2 s.
"""

from __future__ import annotations

import time

from scalemodel.analytic.moe_placement import place, zipf_loads
from scalemodel.sim.moe_routing import RouterConfig, simulate


def main() -> None:
    for bal in ("none", "aux", "zloss", "bias"):
        cfg = RouterConfig(experts=64, top_k=2, balance=bal, steps=500, tokens_per_step=4096)
        t, c = time.perf_counter(), time.process_time()
        r = simulate(cfg)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        print(f"route balance={bal}: {r.routing_decisions:,} token routings in {dt:.2f} s wall "
              f"({dc:.2f} s CPU) = {r.routing_decisions / dt:,.0f}/s wall, "
              f"{r.routing_decisions / dc:,.0f}/s CPU; final max/mean {r.max_over_mean_load:.2f}, "
              f"entropy {r.load_entropy:.3f}/{r.load_entropy_max:.3f} nat")
    w = zipf_loads(61, 256, 1.0, seed=0)
    for slots, gpus, nodes, keep in ((320, 320, 40, False), (288, 144, 18, False),
                                     (288, 32, 4, True), (288, 32, 4, False)):
        t = time.perf_counter()
        r = place(w, slots=slots, gpus=gpus, nodes=nodes, groups=8, keep_groups=keep)
        dt = time.perf_counter() - t
        print(f"place 61x256 -> {slots} slots / {gpus} GPUs / {nodes} nodes keep_groups={keep}: "
              f"{dt:.2f} s; before {r.imbalance_before:.3f}, ours {r.imbalance_after:.3f}, "
              f"EPLB hier {r.eplb_hierarchical or float('nan'):.3f}, "
              f"EPLB global {r.eplb_global or float('nan'):.3f}, bound {r.lower_bound:.3f}")
    from scalemodel.analytic.moe_serving import plan
    from scalemodel.specs import get_gpu, get_model

    t, c = time.perf_counter(), time.process_time()
    p = plan(get_model("deepseek-v3"), get_gpu("h800"), tpot_s=0.05, ttft_s=2.0)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    print(f"serve deepseek-v3 on h800 (full search, 1-40 nodes): {dt:.2f} s wall ({dc:.2f} s CPU); "
          f"prefill EP{p.prefill.ep} {p.prefill.tokens_per_s_per_gpu:,.0f} tok/s/GPU, "
          f"decode EP{p.decode.ep} {p.decode.tokens_per_s_per_gpu:,.0f} tok/s/GPU")


if __name__ == "__main__":
    main()
