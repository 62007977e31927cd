"""Benchmark of the serving planner (issue 17): simulation speed, SLA search speed, validation.

    PYTHONPATH=src python bench/bench_serve.py [--validate] [--slo] [--whole-validation]

Prints (1) one max-load simulation of 3,000 requests (Llama-3.1-8B-class on one H100, FP8,
TensorRT-LLM 0.17's engine, ISL/OSL 128/2048 and 1000/1000; target < 1 s), (2) the SLA search
for llama-3-70b on up to 64 H100 at 20 requests/s, TTFT p99 2 s, TPOT p99 50 ms (target < 2 s),
each as the best of 3 wall times and its CPU time, and with --validate (3) the whole
validation/serving_runs.csv: mean / max absolute error and seconds per row; with --slo (4) the
two MLPerf Server completed-rate rows of validation/serving_published.csv (``slo_rate``'s
bisection, each a 49,152- or 30,720-request simulation per step), CPU seconds each; with
--whole-validation (5) the whole ``validate --serving`` (the v0.17 table, ``published`` and
``kv``) in this process, CPU seconds (the web app answers it within its 120 s limit or with its
declared 503).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalemodel.analytic.serving.engine import get_serving_engine  # noqa: E402
from scalemodel.analytic.serving.iteration import ServeLayout, precision  # noqa: E402
from scalemodel.analytic.serving.search import search  # noqa: E402
from scalemodel.analytic.serving.service import evaluate  # noqa: E402
from scalemodel.analytic.serving.streams import Stream  # noqa: E402
from scalemodel.specs import get_gpu, get_model  # noqa: E402


def _best_of(fn, n: int = 3) -> tuple[float, float, object]:
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu, out


def bench_simulation() -> list[dict]:
    m = get_model(str(ROOT / "validation" / "models" / "llama-3.1-8b.json"))
    g, e, p = get_gpu("h100-sxm"), get_serving_engine("trtllm-0.17"), precision("fp8")
    out = []
    for isl, osl in ((128, 2048), (1000, 1000)):
        def one(isl: int = isl, osl: int = osl) -> object:
            return evaluate(m, g, ServeLayout(), p, "fp8", e, Stream("max-load", 3000), isl, osl)

        one()  # warm caches (TOML, model shapes)
        wall, cpu, r = _best_of(one)
        out.append({"isl": isl, "osl": osl, "wall_s": wall, "cpu_s": cpu,
                    "iterations": r.extra["iterations"],
                    "output_tokens_per_s": r.output_tokens_per_s})
    return out


def bench_sla_search() -> dict:
    m, g, e = get_model("llama-3-70b"), get_gpu("h100-sxm"), get_serving_engine("vllm-v1")

    def one() -> object:
        return search(m, g, e, Stream("rate", 2000, rate_per_s=20.0), 1000, 200, n_gpus=64,
                      domain=8, fixed={}, precs=None, kv_dtype=None, max_batch=None,
                      token_budget=None, ttft_s=2.0, tpot_s=0.05)

    one()
    wall, cpu, r = _best_of(one)
    b = r.best
    return {"wall_s": wall, "cpu_s": cpu, "screened": len(r.screened),
            "simulated": len(r.simulated), "gpus": b.gpus, "layout": b.layout.to_dict(),
            "precision": b.precision, "max_batch": b.max_batch, "met": r.meets_sla}


def _forget_priced_files() -> None:
    """The serving validation remembers what it priced in this process (validate._RESULTS): a
    timing starts from nothing remembered, or it would time a lookup."""
    from scalemodel.analytic.serving import validate

    validate._RESULTS.clear()


def bench_validation() -> dict:
    from scalemodel.analytic.serving.validate import summary, validate_serving

    p = ROOT / "validation" / "serving_runs.csv"
    _forget_priced_files()
    t, c = time.perf_counter(), time.process_time()
    rows, skipped = validate_serving(p.read_text(), ROOT)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    s = summary(rows)
    return {"rows": len(rows), "skipped": len(skipped), "mape": s["mape"],
            "max_ape": s["max_ape"], "wall_s": wall, "cpu_s_per_row": cpu / max(1, len(rows))}


SLO_ROWS = ("mlperf41-llama2-70b-server-h100-sxm-x8-qps", "mlperf41-llama2-70b-server-h200-x8-qps")


def bench_slo_rows() -> list[dict]:
    from scalemodel.analytic.serving.validate import validate_published

    text = (ROOT / "validation" / "serving_published.csv").read_text()
    out = []
    for rid in SLO_ROWS:
        _forget_priced_files()
        c = time.process_time()
        rows, skipped = validate_published(text, ROOT, {rid})
        out.append({"id": rid, "cpu_s": time.process_time() - c,
                    "predicted": rows[0].predicted if rows else float("nan"),
                    "skipped": len(skipped)})
    return out


def bench_whole_validation() -> dict:
    import contextlib
    import io

    from scalemodel.cli import main as cli_main

    _forget_priced_files()
    c, t = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        cli_main(["validate", "--serving", "--json"])
    return {"cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - t}


def main() -> None:
    for r in bench_simulation():
        print(f"max-load simulation, 3000 requests, ISL/OSL {r['isl']}/{r['osl']}: "
              f"{r['wall_s']:.3f} s wall, {r['cpu_s']:.3f} s CPU, {r['iterations']:,} "
              f"iterations, {r['output_tokens_per_s']:,.0f} output tokens/s")
    s = bench_sla_search()
    print(f"SLA search llama-3-70b, up to 64 x h100-sxm, 20 req/s, TTFT 2 s, TPOT 50 ms: "
          f"{s['wall_s']:.3f} s wall, {s['cpu_s']:.3f} s CPU; {s['screened']} screened, "
          f"{s['simulated']} simulated; best {s['gpus']} GPUs {s['layout']} {s['precision']} "
          f"max_batch {s['max_batch']} (met: {s['met']})")
    if "--validate" in sys.argv:
        v = bench_validation()
        print(f"validation/serving_runs.csv: {v['rows']} rows ({v['skipped']} skipped), mean "
              f"|error| {100 * v['mape']:.1f}%, max {100 * v['max_ape']:.1f}%, "
              f"{v['cpu_s_per_row']:.3f} s CPU per row")
    if "--slo" in sys.argv:
        for r in bench_slo_rows():
            print(f"MLPerf Server row {r['id']}: {r['cpu_s']:.1f} s CPU, predicted "
                  f"{r['predicted']:.2f} requests/s")
    if "--whole-validation" in sys.argv:
        w = bench_whole_validation()
        print(f"validate --serving --json (v0.17 table, published, kv): {w['cpu_s']:.1f} s CPU, "
              f"{w['wall_s']:.1f} s wall")


if __name__ == "__main__":
    main()
