"""Benchmarks for memory that follows the kernels (issue 15 item 3, issue 16 memory feasibility).

Run: python bench/bench_memory_kernels.py   (figures recorded in docs/benchmarks.md)
Measures CPU time (time.process_time), not wall time: the machine may be shared.
- the vectorised memory model over 1,000,000 layouts with fused and with eager kernels (target
  < 1 s each, as the foundation's memory rows);
- the single-layout memory report with its derivation (what `memory` adds over the step model);
- the live saved-tensor measurement of the 9 torch variants (tests/live, target < 10 s).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalemodel.analytic.layout import TrainLayout  # noqa: E402
from scalemodel.analytic.memory import (  # noqa: E402
    communicators,
    memory_report,
    static_model,
    training_bytes,
    usable_memory,
)
from scalemodel.specs import get_model  # noqa: E402
from scalemodel.specs.saved_tensors import kernel_saves  # noqa: E402


def cpu_best(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def vectorised(kernels: str, n: int = 1_000_000) -> float:
    m = get_model("llama-3-70b")
    sm = static_model(m, kernel_saves(kernels, "flash"))
    rng = np.random.default_rng(0)
    cols = dict(tp=rng.choice([1, 2, 4, 8], n), pp=rng.choice([1, 2, 4, 8], n),
                dp=rng.choice([1, 8, 64], n), zero=rng.integers(0, 4, n),
                rc=rng.integers(0, 3, n), micro_batch=rng.choice([1, 2], n))

    def go() -> None:
        res = training_bytes(sm, sp=True, seq_len=8192, **cols)
        cap = usable_memory(85.5e9, communicators(cols["tp"], cols["pp"], cols["dp"]))
        int(np.count_nonzero(res["total"] <= cap))

    return cpu_best(go)


def one_report() -> float:
    m = get_model("llama-3-70b")
    lay = TrainLayout(tp=8, pp=4, dp=4, zero=1, recompute="full")
    return cpu_best(lambda: memory_report(m, lay, seq_len=8192, attention="flash",
                                          kernels="eager"), repeat=20)


def live_measurement() -> float:
    sys.path.insert(0, str(ROOT / "tests" / "live"))
    import test_memory_saved_tensors as t
    import torch

    torch.set_num_threads(1)
    t0 = time.process_time()
    for name in t.VARIANTS:
        t.measure(t._cfg(name), False)
    for name in t.RECOMPUTED:
        t.measure(t._cfg(name), True)
    return time.process_time() - t0


def main() -> None:
    for k in ("fused", "eager"):
        print(f"training_bytes + usable_memory, 1,000,000 layouts, {k}: {vectorised(k):.3f} s CPU")
    print(f"memory_report (one layout with derivation): {one_report() * 1e3:.2f} ms CPU")
    try:
        print(f"saved-tensor measurement, 9 variants + 4 recomputed: {live_measurement():.2f} s CPU")
    except ImportError:
        print("saved-tensor measurement: torch not installed, skipped")


if __name__ == "__main__":
    main()
