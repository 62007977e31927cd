"""Benchmark of the engine KV accounting (issue 17, item 2): one engine_kv_budget call with its
derivation, the validation of validation/serving_kv.csv, and `kv --framework` from the shell.

Run: python bench/bench_engine_kv.py   (figures recorded in docs/benchmarks.md)
CPU time (time.process_time) is reported beside wall time: the machine is shared.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))

from scalemodel.analytic.serving_kv_validation import validate_kv_rows  # noqa: E402
from scalemodel.analytic.serving_memory import engine_kv_budget  # noqa: E402
from scalemodel.specs import get_gpu, get_model  # noqa: E402
from scalemodel.specs.frameworks import engine_ids  # noqa: E402


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    """(best wall s, best CPU s) of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def sweep() -> int:
    g = get_gpu("h100-sxm")
    n = 0
    for mid in ("llama-3-8b", "llama-3-70b", "mixtral-8x7b", "qwen3-30b-a3b", "qwen2.5-72b"):
        m = get_model(mid)
        for eid in engine_ids():
            for tp in (1, 2, 4, 8):
                engine_kv_budget(m, g, tp=tp, engine_id=eid, max_model_len=8192)
                n += 1
    return n


def main() -> None:
    n = sweep()  # warm the caches (profiles, models)
    w, c = timed(sweep)
    print(f"engine_kv_budget with derivation: {n} calls in {w:.3f} s wall / {c:.3f} s CPU "
          f"({1e3 * c / n:.2f} ms CPU per call)")
    text = (ROOT / "validation" / "serving_kv.csv").read_text()
    w, c = timed(lambda: validate_kv_rows(text))
    _, s = validate_kv_rows(text)
    print(f"validate_kv_rows, {s['row_count']} rows: {w:.3f} s wall / {c:.3f} s CPU; "
          f"{s['within_3pct']} of {s['capacity_rows']} capacities within 3%, "
          f"{s['start_matches']} of {s['start_rows']} starts right")
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "scalemodel", "kv", "--model", "llama-3-8b",
                        "--gpu", "h100-sxm", "--framework", "vllm-v1", "--context", "8k",
                        "--json"], check=True, stdout=subprocess.DEVNULL,
                       env={"PYTHONPATH": str(SRC), "PATH": ""})
        times.append(time.perf_counter() - t0)
    print(f"scalemodel kv --framework vllm-v1 --json (median of 7): {statistics.median(times):.3f} s")


if __name__ == "__main__":
    main()
