"""GPU lab benchmark: occupancy throughput, analyzer speed, and (with a GPU) the whole lab.

Run: PYTHONPATH=src python bench/bench_gpulab.py
Prints: seconds for 1,000,000 occupancy configurations (target < 1 s), seconds per access
analysis of each built-in kernel, and, where CuPy and a CUDA GPU exist, the transposes vs copy,
divergence probes, pointer-chase latencies and copy bandwidth.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402

from scalemodel.analytic.occupancy import occupancy_arrays, sm_limits  # noqa: E402
from scalemodel.sim import simt  # noqa: E402


def bench_occupancy(n: int = 1_000_000) -> None:
    rng = np.random.default_rng(0)
    t, r, s = rng.integers(1, 1025, n), rng.integers(0, 256, n), rng.integers(0, 230_000, n)
    for cc in ("8.0", "9.0", "12.0"):
        lim = sm_limits(cc)
        best = min(_timed(lambda lim=lim: occupancy_arrays(lim, t, r, s)) for _ in range(3))
        print(f"occupancy cc {cc:>4}: {n:,} configurations in {best:.3f} s "
              f"({n / best / 1e6:.1f} M/s; target < 1 s)")


def bench_access() -> None:
    for name in simt.kernel_names():
        dt = _timed(lambda name=name: simt.analyze(simt.get_kernel(name), 4))
        print(f"access analysis {name:<20} {dt:.3f} s")


def bench_gpu() -> None:
    from scalemodel.live.cuda_bench import gpu_available, run_lab

    ok, why = gpu_available()
    if not ok:
        print(f"GPU lab skipped: {why}")
        return
    res = run_lab()
    print(f"device: {res['device']}")
    for k, v in res["transpose"].items():
        print(f"  {k:<20} {v['bytes_per_s'] / 1e9:8.1f} GB/s  {v['fraction_of_copy']:.2f} of copy")
    for k, v in res["divergence"].items():
        print(f"  {k:<20} {v['time_s'] * 1e3:8.3f} ms  {v['relative_to_uniform']:.2f}x uniform")
    for k, v in res["latency"].items():
        print(f"  latency {k:<12} {v['cycles']:8.1f} cycles  {v['seconds'] * 1e9:7.1f} ns")
    print(f"  copy bandwidth {res['copy_bandwidth']['bytes_per_s'] / 1e9:.1f} GB/s")


def _timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    bench_occupancy()
    bench_access()
    bench_gpu()
