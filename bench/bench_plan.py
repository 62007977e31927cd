"""Benchmark of the training planner: search speed, validation error, and llm-analysis beside it.

    PYTHONPATH=src python bench/bench_plan.py [--llm-analysis]

Prints (1) the full search for llama-3-405b on 16,384 H100s (time, layouts per second; target
< 2 s), (2) mean / max absolute percentage error on validation/training_runs.csv, and with
--llm-analysis (3) llm-analysis 0.2.2 on the same validation rows: it is installed by this script
into a throwaway venv under /tmp (pip install --no-deps llm-analysis==0.2.2, then fire 0.5), never a
dependency of scalemodel, and the venv is deleted afterwards. Each row it can express is run with
the layout scalemodel uses for that row (published keys, the rest as our search chose them) and
flops_efficiency = 1 (its default); its step time is turned into the source's metric with the
same FLOP convention as ours. Rows it cannot express are listed with the reason.
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
    best = cpu = float("inf")
    for _ in range(3):
        t, c = time.perf_counter(), time.process_time()
        res = search(job, cl)
        best = min(best, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    # CPU seconds beside the wall clock: on a shared machine the wall clock carries the load
    return {"seconds": best, "cpu_seconds": cpu, "candidates": res.candidates_evaluated,
            "valid": res.valid, "per_s": res.candidates_evaluated / best,
            "best": res.best.layout}


def bench_validation() -> dict:
    text = (ROOT / "validation" / "training_runs.csv").read_text()
    t = time.perf_counter()
    results, skipped = validate(text)
    dt = time.perf_counter() - t
    s = summary(results)
    return {**s, "seconds_per_row": dt / max(1, len(results)), "skipped": skipped,
            "rows": [(r.id, r.measured, r.predicted, r.error) for r in results]}


LA_SCRIPT = r"""
import json, logging, sys, time
from llm_analysis.analysis import train
jobs = json.loads(open(sys.argv[1]).read())
out = []
for r in jobs:
    t = time.perf_counter()
    try:
        res = train(model_name=r["model_json"], gpu_name=r["gpu_name"], dtype_name=r["dtype"],
                    log_level="ERROR", total_num_gpus=r["gpus"], tp_size=r["tp"],
                    pp_size=r["pp"], dp_size=r["dp"], ep_size=r["ep"], seq_len=r["seq_len"],
                    batch_size_per_gpu=r["mb"], global_batch_size=r["global_batch"],
                    activation_recomputation=r["rc"], ds_zero=r["zero"],
                    flash_attn=r["flash"], mlp_gated_linear_units=r["gated"],
                    num_gpus_per_node=r["gpus_per_node"], output_dir=None)
        out.append({"id": r["id"], "latency_per_iter": res["latency_per_iter"],
                    "seconds": time.perf_counter() - t})
    except Exception as e:  # noqa: BLE001
        out.append({"id": r["id"], "error": repr(e)[:200], "seconds": time.perf_counter() - t})
print(json.dumps(out))
"""
# our GPU ids -> llm-analysis's bundled GPU configs (it has no H800, H200, B200 or MI300X)
LA_GPUS = {"a100-sxm-80gb": "a100-sxm-80gb", "a100-sxm-40gb": "a100-sxm-40gb",
           "h100-sxm": "h100-sxm-80gb", "h100-pcie": "h100-pcie-80gb"}
LA_RC = {"none": 0, "selective": 1, "full": 2}


def _la_jobs(tmp: Path) -> tuple[list[dict], list[tuple[str, str]], dict]:
    """One llm-analysis call per validation row it can express, with our layout for that row
    (so both tools price the same layout); rows it cannot express are listed with the reason."""
    import csv

    from scalemodel.analytic.validate import predict_row, row_model

    text = (ROOT / "validation" / "training_runs.csv").read_text()
    jobs, skipped, meta = [], [], {}
    for row in csv.DictReader(text.splitlines()):
        rid = row["id"]
        m = row_model(row)
        res = predict_row(row)
        lay = res.layout
        why = []
        if row["gpu"].strip() not in LA_GPUS:
            why.append(f"no {row['gpu'].strip()} GPU config")
        if lay["cp"] > 1:
            why.append("no context parallelism")
        if m.kv_lora_rank or m.n_shared_experts or m.first_dense_layers:
            why.append("no MLA attention, shared experts or leading dense layers")
        if row["precision"].strip() == "fp8":
            why.append("no fp8 training precision (its w8a8 prices int8 peak and quantized "
                       "weights, not fp8 GEMMs with bf16 master weights)")
        if m.ffn % m.hidden:
            why.append(f"its ModelConfig needs the MLP width ({m.ffn}) to be a whole multiple "
                       f"of the hidden size ({m.hidden})")
        if why:
            skipped.append((rid, "; ".join(why)))
            continue
        cfg = {"name": rid, "num_layers": m.n_layers, "n_head": m.n_heads,
               "hidden_dim": m.hidden, "vocab_size": m.vocab, "max_seq_len": int(row["seq_len"]),
               "num_key_value_heads": m.n_kv_heads, "ffn_embed_dim": m.ffn,
               "model_type": "llama" if m.gated_mlp else "gpt",
               "moe_num_experts": max(1, m.n_experts), "moe_top_k": max(1, m.top_k)}
        path = tmp / f"{rid}.json"
        path.write_text(json.dumps(cfg))
        jobs.append({"id": rid, "model_json": str(path), "gpu_name": LA_GPUS[row["gpu"].strip()],
                     "dtype": "w16a16e16", "gpus": res.gpus, "tp": lay["tp"], "pp": lay["pp"],
                     "dp": lay["dp"], "ep": lay["ep"], "seq_len": int(row["seq_len"]),
                     "mb": lay["micro_batch"], "global_batch": int(row["global_batch_seqs"]),
                     "rc": LA_RC[lay["recompute"]], "zero": lay["zero"],
                     "flash": row.get("attention", "flash").strip() != "unfused",
                     "gated": bool(m.gated_mlp), "gpus_per_node": int(row["gpus_per_node"] or 8)})
        meta[rid] = (row, m, res)
    return jobs, skipped, meta


def bench_llm_analysis() -> dict:
    """Install llm-analysis into a throwaway venv, run it on the rows it can express, and
    turn its step time into each source's metric with the same FLOP convention as ours."""
    import shutil

    from scalemodel.analytic.validate import convention_flops_per_token

    tmp = Path(tempfile.mkdtemp(prefix="llm-analysis-bench-"))
    venv = tmp / "venv"
    try:
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                   "--disable-pip-version-check"]
            subprocess.run(pip + ["--no-deps", "llm-analysis==0.2.2"], check=True, timeout=600)
            subprocess.run(pip + ["fire>=0.5,<0.6"], check=True, timeout=600)
        except (subprocess.SubprocessError, OSError) as e:
            return {"error": f"could not install llm-analysis into a throwaway venv: {e}"}
        jobs, skipped, meta = _la_jobs(tmp)
        (tmp / "jobs.json").write_text(json.dumps(jobs))
        (tmp / "run.py").write_text(LA_SCRIPT)
        p = subprocess.run([str(venv / "bin" / "python"), str(tmp / "run.py"),
                            str(tmp / "jobs.json")], capture_output=True, text=True, timeout=600)
        if p.returncode:
            return {"error": f"llm-analysis run failed: {p.stderr.strip()[-300:]}"}
        out = json.loads(p.stdout.strip().splitlines()[-1])
        rows = []
        for o in out:
            row, m, res = meta[o["id"]]
            if "error" in o:
                skipped.append((o["id"], o["error"]))
                continue
            step = o["latency_per_iter"]
            gpus, seq = res.gpus, int(row["seq_len"])
            tokens = seq * int(row["global_batch_seqs"])
            conv = row["convention"].strip()
            if conv == "tokens":
                pred = tokens / step / gpus
            else:
                pb = float(row["params_b"]) if (row.get("params_b") or "").strip() else None
                fl = convention_flops_per_token(conv, m, seq, pb) * tokens / step / gpus
                pred = fl / 1e12 if res.metric == "tflops_per_gpu" else \
                    100 * fl / res_peak(res.gpu, row)
            rows.append({"id": o["id"], "measured": res.measured, "llm_analysis": pred,
                         "llm_analysis_error": pred / res.measured - 1, "scalemodel": res.predicted,
                         "scalemodel_error": res.error, "llm_analysis_s": o["seconds"]})
        errs = [abs(r["llm_analysis_error"]) for r in rows]
        ours = [abs(r["scalemodel_error"]) for r in rows]
        return {"rows": rows, "skipped": skipped,
                "llm_analysis_mape": sum(errs) / len(errs) if errs else float("nan"),
                "llm_analysis_max": max(errs) if errs else float("nan"),
                "scalemodel_mape_same_rows": sum(ours) / len(ours) if ours else float("nan"),
                "scalemodel_max_same_rows": max(ours) if ours else float("nan"),
                "llm_analysis_s_per_eval": (sum(r["llm_analysis_s"] for r in rows) / len(rows)
                                            if rows else float("nan"))}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def res_peak(gpu: str, row: dict) -> float:
    from scalemodel.specs import get_gpu

    return get_gpu(gpu).peak_flop_per_s((row.get("precision") or "bf16").strip())


def main() -> None:
    s = bench_search()
    print(f"search llama-3-405b on 16,384 h100-sxm: {s['seconds']:.3f} s "
          f"({s['cpu_seconds']:.3f} s CPU), "
          f"{s['candidates']:,} layouts enumerated ({s['valid']:,} valid), "
          f"{s['per_s']:,.0f} layouts/s; best {s['best']}")
    v = bench_validation()
    print(f"validation: {v['row_count']} rows, MAPE {100 * v['mape']:.1f}%, "
          f"max {100 * v['max_ape']:.1f}%, {1000 * v['seconds_per_row']:.0f} ms per row")
    for rid, meas, pred, err in v["rows"]:
        print(f"  {rid:28s} measured {meas:9.2f} predicted {pred:9.2f} error {100 * err:+6.1f}%")
    if "--llm-analysis" in sys.argv:
        la = bench_llm_analysis()
        if "error" in la:
            print(la["error"])
            return
        print(f"llm-analysis 0.2.2 (flops_efficiency = 1, its default) on "
              f"{len(la['rows'])} rows: MAPE {100 * la['llm_analysis_mape']:.1f}%, max "
              f"{100 * la['llm_analysis_max']:.1f}%, {1000 * la['llm_analysis_s_per_eval']:.1f} "
              f"ms per evaluation; scalemodel on the same rows: MAPE "
              f"{100 * la['scalemodel_mape_same_rows']:.1f}%, max "
              f"{100 * la['scalemodel_max_same_rows']:.1f}%")
        for r in la["rows"]:
            print(f"  {r['id']:28s} measured {r['measured']:9.2f} llm-analysis "
                  f"{r['llm_analysis']:9.2f} ({100 * r['llm_analysis_error']:+6.1f}%) scalemodel "
                  f"{r['scalemodel']:9.2f} ({100 * r['scalemodel_error']:+6.1f}%)")
        for rid, why in la["skipped"]:
            print(f"  {rid:28s} not run: {why}")


if __name__ == "__main__":
    main()
