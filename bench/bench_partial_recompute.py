"""Partial recompute (issue 16): what the recompute keys cost the search and one layout.

Prints the CPU time (time.process_time) of (1) the full search of deepseek-v3 on 2,048 h800
(63M tokens, seq 4096), which now enumerates the framework profile's partial policies, (2) one
layout priced with each recompute policy, and (3) memory_report with its derivation for the
partial policies. Run: PYTHONPATH=src python bench/bench_partial_recompute.py
"""

from __future__ import annotations

import time

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.memory import memory_report
from scalemodel.analytic.planner import evaluate_layout, make_cluster, make_job, search
from scalemodel.specs import get_model


def cpu(f, n: int = 1) -> float:
    t = time.process_time()
    for _ in range(n):
        f()
    return (time.process_time() - t) / n


def main() -> None:
    m = get_model("deepseek-v3")
    job = make_job(m, seq_len=4096, global_batch_tokens=63 * 1024 * 1024)
    cl = make_cluster("h800", 2048)
    res = search(job, cl, top=5)
    t = cpu(lambda: search(job, cl, top=5), 2)
    print(f"search deepseek-v3 on 2,048 h800: {t:.3f} s CPU, {res.candidates_evaluated:,} "
          f"layouts, best {res.best.layout.as_text()}")
    job2 = make_job(m, seq_len=4096, global_batch_seqs=8192, precision="fp8")
    cl2 = make_cluster("h100-sxm", 1024)
    base = TrainLayout(tp=2, pp=8, dp=64, ep=64, etp=1, vpp=4, zero=2)
    for kw in (dict(recompute="none"), dict(recompute="selective"),
               dict(recompute="selective", recompute_modules=("mlp", "mla_up_proj")),
               dict(recompute="full", recompute_layers=1), dict(recompute="full")):
        lay = base.with_(**kw)
        v = evaluate_layout(job2, cl2, lay).values
        t = cpu(lambda lay=lay: evaluate_layout(job2, cl2, lay), 5)
        t2 = cpu(lambda lay=lay: memory_report(m, lay, seq_len=4096, attention="flash3"), 5)
        print(f"{lay.recompute_text():38s} step {float(v.step_time_s):7.2f} s  "
              f"{float(v.memory_per_gpu_bytes) / 1e9:6.1f} GB  evaluate {1000 * t:.1f} ms  "
              f"memory_report {1000 * t2:.1f} ms CPU")


if __name__ == "__main__":
    main()
