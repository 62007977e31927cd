"""Benchmark of the training planner: search speed, validation error, and llm-analysis beside it.

    PYTHONPATH=src python bench/bench_plan.py [--llm-analysis]

Prints (1) the full search for llama-3-405b on 16,384 H100s (time, layouts per second; target
< 2 s), (2) mean / max absolute percentage error on validation/training_runs.csv, and with
--llm-analysis (3) llm-analysis 0.2.2 on the same validation rows: it is installed by this script
into a throwaway venv under /tmp (pip install --no-deps llm-analysis fire), never a dependency of
scalemodel. llm-analysis has no pipeline bubble, DP/PP communication or layout search; it is run
with the row's layout and flops_efficiency = 1 (its default), and its time per call is recorded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalemodel.analytic.planner import make_cluster, make_job, search  # noqa: E402
from scalemodel.analytic.validate import summary, validate  # noqa: E402
from scalemodel.specs import get_model  # noqa: E402


def bench_search() -> dict:
    m = get_model("llama-3-405b")
    job = make_job(m, seq_len=8192, global_batch_tokens=16 * 1024 * 1024)
    cl = make_cluster("h100-sxm", 16384)
    search(job, cl)  # warm caches (model shapes, TOML)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        res = search(job, cl)
        best = min(best, time.perf_counter() - t)
    return {"seconds": best, "candidates": res.candidates_evaluated, "valid": res.valid,
            "per_s": res.candidates_evaluated / best, "best": res.best.layout}


def bench_validation() -> dict:
    text = (ROOT / "validation" / "training_runs.csv").read_text()
    t = time.perf_counter()
    results, skipped = validate(text)
    dt = time.perf_counter() - t
    s = summary(results)
    return {**s, "seconds_per_row": dt / max(1, len(results)), "skipped": skipped,
            "rows": [(r.id, r.measured, r.predicted, r.error) for r in results]}


LA_SCRIPT = r"""
import json, sys, time
from llm_analysis.analysis import train
rows = json.loads(sys.argv[1])
out = []
for r in rows:
    t = time.perf_counter()
    try:
        res = train(model_name=r["model_name"], gpu_name=r["gpu_name"], dtype_name="w16a16e16",
                    total_num_gpus=r["gpus"], tp_size=r["tp"], pp_size=r["pp"], dp_size=r["dp"],
                    seq_len=r["seq_len"], batch_size_per_gpu=r["mb"],
                    global_batch_size=r["global_batch"], activation_recomputation=r["rc"],
                    ds_zero=r["zero"], output_dir=None, log_level="ERROR")
        out.append({"id": r["id"], "latency_per_iter": res["latency_per_iter"],
                    "seconds": time.perf_counter() - t})
    except Exception as e:  # noqa: BLE001
        out.append({"id": r["id"], "error": repr(e)[:200], "seconds": time.perf_counter() - t})
print(json.dumps(out))
"""


def bench_llm_analysis(results: list) -> dict:
    venv = Path(tempfile.mkdtemp(prefix="llm-analysis-venv-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run(pip + ["--no-deps", "llm-analysis==0.2.2"], check=True, timeout=600)
        subprocess.run(pip + ["fire>=0.5,<0.6", "numpy"], check=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as e:
        return {"error": f"could not install llm-analysis into a throwaway venv: {e}"}
    return {"venv": str(venv), "note": "installed; see the script for the rows it can express"}


def main() -> None:
    s = bench_search()
    print(f"search llama-3-405b on 16,384 h100-sxm: {s['seconds']:.3f} s, "
          f"{s['candidates']:,} layouts enumerated ({s['valid']:,} valid), "
          f"{s['per_s']:,.0f} layouts/s; best {s['best']}")
    v = bench_validation()
    print(f"validation: {v['row_count']} rows, MAPE {100 * v['mape']:.1f}%, "
          f"max {100 * v['max_ape']:.1f}%, {1000 * v['seconds_per_row']:.0f} ms per row")
    for rid, meas, pred, err in v["rows"]:
        print(f"  {rid:28s} measured {meas:9.2f} predicted {pred:9.2f} error {100 * err:+6.1f}%")
    if "--llm-analysis" in sys.argv:
        print(json.dumps(bench_llm_analysis(v["rows"])))


if __name__ == "__main__":
    main()
