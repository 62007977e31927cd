"""plan serve and validate --serving: the JSON keys issue 17 fixes, SLA search, disaggregation,
and one-line bad input with exit code 2."""

from __future__ import annotations

import pytest

from conftest import cli_json
from conftest import run_cli as run

BEST_KEYS = {"tp", "pp", "ep", "dp", "disaggregated", "max_batch", "attention_dp"}
TOP_KEYS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s",
            "requests_per_s", "kv_capacity_tokens", "max_concurrency", "memory_per_gpu_bytes")




def serve_json(capsys, *argv):
    return cli_json(capsys, "plan", "serve", *argv)


def test_plan_serve_json_keys(capsys):
    d = serve_json(capsys, "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "2",
                   "--isl", "512", "--osl", "256", "--requests", "300", "--precision", "fp8",
                   "--gpu-hour-price", "2.5")
    assert set(d["best"]) == BEST_KEYS
    for k in TOP_KEYS:
        assert d[k] > 0
    for k in ("ttft_s", "tpot_s"):
        assert set(d[k]) == {"p50", "p99"} and d[k]["p99"] >= d[k]["p50"] > 0
    b = d["best"]
    assert b["tp"] * b["pp"] * b["dp"] == 2
    assert d["output_tokens_per_s_per_gpu"] == pytest.approx(d["output_tokens_per_s"] / 2)
    # fixed lengths: total = output x (isl + osl) / osl
    assert d["total_tokens_per_s"] == pytest.approx(d["output_tokens_per_s"] * 768 / 256)
    # cost per million output tokens = N P / (3600 X) 1e6
    assert d["cost_per_million_output_tokens"] == pytest.approx(
        2 * 2.5 / (3600 * d["output_tokens_per_s"]) * 1e6)
    assert set(d["bounds"]) == {"prefill", "decode"}
    assert "vllm-v1" in d["kv_dtype_note"] and d["kv_dtype"] == "bf16"  # vLLM's "auto"


def test_fixed_layout_and_engine(capsys):
    d = serve_json(capsys, "--model", "llama-3-8b", "--gpus", "2", "--layout", "tp=1,dp=2",
                   "--framework", "trtllm-0.17", "--precision", "fp8", "--isl", "128",
                   "--osl", "128", "--requests", "500")
    assert (d["best"]["tp"], d["best"]["dp"]) == (1, 2)
    assert d["kv_dtype"] == "fp8"  # TensorRT-LLM's FP8 quantization sets an FP8 KV cache
    assert d["engine"]["id"] == "trtllm-0.17"


def test_sla_search_gives_fewest_gpus(capsys):
    d = serve_json(capsys, "--model", "llama-3-8b", "--gpus", "8", "--rate", "4",
                   "--requests", "300", "--isl", "512", "--osl", "128", "--ttft-ms", "2000",
                   "--tpot-ms", "60")
    assert d["sla"]["met"] and d["tpot_s"]["p99"] <= 0.060 and d["ttft_s"]["p99"] <= 2.0
    assert d["gpus"] <= 8


def test_disaggregated_pools(capsys):
    d = serve_json(capsys, "--model", "llama-3-8b", "--gpus", "4", "--rate", "8",
                   "--requests", "200", "--isl", "1024", "--osl", "128", "--tpot-ms", "40",
                   "--ttft-ms", "3000", "--disaggregated", "--precision", "fp8")
    dis = [s for s in d["simulated"] if s["best"]["disaggregated"]]
    assert dis, "a disaggregated split was planned"
    s = dis[0]
    assert s["prefill_pool"]["gpus"] + s["decode_pool"]["gpus"] == s["gpus"]
    # KV of a 1024-token prompt (131,072 B per token in bf16 for Llama-3-8B) over one 400G NIC
    assert s["kv_transfer_s"] == pytest.approx(1024 * 131072 / 50e9, rel=0.05)


@pytest.mark.parametrize("argv, needle", [
    (["--framework", "nope"], "--framework"),
    (["--isl", "8000", "--osl", "1000"], "context"),
    (["--model", "llama-3-405b", "--gpus", "1", "--precision", "bf16"], "fits"),
    (["--ttft-ms", "100"], "--rate"),
    (["--layout", "tp=3"], "tp"),
    (["--layout", "tp=2,adp=1"], "dense"),
    (["--model", "qwen3-30b-a3b", "--layout", "tp=4,ep=2,adp=1"], "ep must equal tp"),
    (["--model", "qwen3-30b-a3b", "--layout", "tp=4,adp=1"], "no attention data parallelism"),
    (["--model", "qwen3-30b-a3b", "--layout", "tp=4,adp=1", "--framework", "sglang"],
     "was not read"),
    (["--model", "deepseek-v3", "--gpu", "h100-sxm", "--layout", "tp=72,ep=72,adp=1",
      "--framework", "sglang-0.4.6-deepep"], "do not split evenly"),
    (["--gpu", "h100-sxm", "--precision", "fp4", "--requests", "50"], "fp4 tensor-core path"),
    (["--rate", "500", "--tpot-ms", "1", "--gpus", "2", "--requests", "100"], "closest"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, "plan", "serve", "--model", "llama-3-8b", *argv)
    assert rc == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and needle in line, line


def test_validate_serving_json(capsys, tmp_path):
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "validation" / "serving_runs.csv"
    lines = src.read_text().splitlines()
    head = [ln for ln in lines if not ln.startswith("#")][0]
    pick = [ln for ln in lines if ln.startswith("trtllm017-l31-8b-h200-tp1-128-2048,")
            or ln.startswith("trtllm017-l31-8b-l40s-tp1-128-128,")]
    pick = [ln.replace(",l40s,L40S,", ",no-such-gpu,L40S,") for ln in pick]  # an unbundled GPU
    f = tmp_path / "validation" / "rows.csv"
    f.parent.mkdir()
    f.write_text("\n".join([head, *pick]) + "\n")
    (tmp_path / "validation" / "models").mkdir()
    (tmp_path / "validation" / "models" / "llama-3.1-8b.json").write_text(
        (src.parent / "models" / "llama-3.1-8b.json").read_text())
    d = cli_json(capsys, "validate", "--serving", "--file", str(f))
    assert d["row_count"] == 1 and len(d["skipped"]) == 1
    r = d["rows"][0]
    assert r["measured"] == pytest.approx(25398.86) and r["engine"] == "trtllm-0.17"
    assert d["mape"] == pytest.approx(abs(r["error"]))
