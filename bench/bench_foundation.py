"""Benchmarks for the foundation (issue #2): CLI start-up, vectorised memory/KV, paged-KV sim.

Run: python bench/bench_foundation.py   (figures recorded in docs/benchmarks.md)
Targets: --help < 0.25 s; kv --model llama-3-70b < 0.5 s; 1,000,000 memory and KV rows < 1 s
each; 100,000 simulated requests < 5 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from scalemodel.analytic.kv import capacity_rows, kv_bytes_per_token  # noqa: E402
from scalemodel.analytic.memory import static_model, training_bytes  # noqa: E402
from scalemodel.sim.paged_kv import compare, synthetic_workload  # noqa: E402
from scalemodel.specs import get_model  # noqa: E402


def cli_seconds(args: list[str], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "scalemodel", *args], check=True,
                       stdout=subprocess.DEVNULL, env={"PYTHONPATH": str(SRC), "PATH": ""})
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def best_of(fn, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    n = 1_000_000
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    print(f"cli: python -m scalemodel --help       {cli_seconds(['--help']):.3f} s (median of 7)")
    import shutil

    exe = shutil.which("scalemodel")
    if exe:
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            subprocess.run([exe, "--help"], check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        print(f"cli: {exe} --help  {statistics.median(times):.3f} s (console script, median of 7)")
    print(f"cli: scalemodel kv --model llama-3-70b {cli_seconds(['kv', '--model', 'llama-3-70b']):.3f} s")

    # memory: 1M layouts of five models (200k each)
    models = ["llama-2-7b", "llama-3-70b", "mixtral-8x7b", "deepseek-v3", "gpt3-175b"]
    sms = [static_model(get_model(m)) for m in models]
    k = n // len(models)
    cols = dict(tp=rng.choice([1, 2, 4, 8], k), pp=rng.choice([1, 2, 4, 8, 16], k),
                dp=rng.integers(1, 1025, k), zero=rng.integers(0, 4, k), rc=rng.integers(0, 3, k),
                micro_batch=rng.integers(1, 9, k), seq_len=rng.choice([2048, 4096, 8192], k))

    def mem() -> None:
        for sm in sms:
            training_bytes(sm, **cols)

    print(f"memory: {n:,} (model, layout) rows       {best_of(mem):.3f} s (best of 5)")

    # KV: 1M (model dims, dtype, TP, context, GPU) rows
    L = rng.integers(16, 128, n)
    kvh = rng.choice([1, 4, 8, 16, 32, 64], n)
    hd = rng.choice([64, 128, 256], n)
    e = rng.choice([0.5, 1.0, 2.0], n)
    tp = rng.choice([1, 2, 4, 8], n)
    ctx = rng.choice([2048, 8192, 32768, 131072], n)
    w = rng.uniform(1e9, 80e9, n)

    def kv() -> None:
        per = kv_bytes_per_token(L, np.maximum(1, kvh // tp), hd, e)
        capacity_rows(per, w / tp, np.full(n, 85.5e9), np.full(n, 0.9), np.full(n, 2e9), ctx)

    print(f"kv: {n:,} rows                          {best_of(kv):.3f} s (best of 5)")

    wl = synthetic_workload(100_000, prompt_mean=512, output_mean=256, max_len=4096, seed=1)
    t0 = time.perf_counter()
    r = compare(wl, capacity_tokens=200_000, max_len=4096)
    dt = time.perf_counter() - t0
    print(f"paged-kv sim: 100,000 requests, both allocators {dt:.2f} s "
          f"(waste contiguous {r.contiguous.waste_fraction:.1%}, paged {r.paged.waste_fraction:.2%}, "
          f"concurrency x{r.concurrency_gain:.2f})")


if __name__ == "__main__":
    main()
