"""TensorRT-LLM's v0.20 max-throughput table (trtllm-bench on the PyTorch backend) as out-of-sample
rows of validation/serving_published.csv, and the trtllm-0.20 engine profile that prices them.

Sources: the table, docs/source/performance/perf-overview.md with the v0.20 data (source key
trtllm-perf-overview-v020), and trtllm-bench's PyTorch-path settings,
tensorrt_llm/bench/benchmark/utils/general.py get_settings with build/tuning.py
calc_engine_setting / finetune_setting (source keys trtllm-bench-pytorch-settings,
trtllm-bench-tuning). No error bound is asserted: nothing was set from these rows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from conftest import published_serving_rows
from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.validate import validate_published
from scalemodel.specs import get_gpu, get_model

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "validation" / "serving_published.csv"


def _rows() -> dict[str, dict[str, str]]:
    return published_serving_rows("trtllm-perf-overview-v020")


# cells read off the page (Total Output Throughput, tokens/sec): (model, gpu, tp, isl, osl)
CELLS = {
    ("l31-8b", "h100-sxm", 1, 128, 128): 27688.36,
    ("l31-8b", "h200", 1, 20000, 2000): 1696.66,
    ("l33-70b", "h100-sxm", 1, 128, 2048): 756.42,
    ("l33-70b", "h200", 8, 2048, 2048): 10412.85,
    ("l31-405b", "h100-sxm", 8, 20000, 2000): 372.12,
    ("maverick", "h200", 8, 128, 2048): 27543.87,
    ("l33-70b", "b200", 4, 5000, 500): 3686.84,
    ("l31-405b", "b200", 8, 1024, 2048): 7464.03,
}
# the page's $num_requests per length pair
REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (20000, 2000): 1000, (2048, 2048): 1500,
            (5000, 500): 1500}


def test_table_size_and_cells():
    rows = _rows()
    # non-blank cells counted on the page: 8B 10 + 10, 70B FP8 H200 39 and H100 34, 405B FP8
    # 8 + 6, Maverick 8 + 5, 70B FP4 on B200 40, 405B FP4 on B200 20
    assert len(rows) == 20 + 39 + 34 + 8 + 6 + 8 + 5 + 40 + 20
    for (m, g, tp, i, o), v in CELLS.items():
        r = rows[f"trtllm020-{m}-{g}-tp{tp}-{i}-{o}"]
        assert float(r["measured"]) == pytest.approx(v)
        assert (int(r["isl"]), int(r["osl"]), int(r["tp"]), r["stream"]) == (i, o, tp,
                                                                            "max-load")
        assert r["precision"] == ("fp4" if g == "b200" else "fp8")
        if (i, o) in REQUESTS:
            assert int(r["requests"]) == REQUESTS[(i, o)]
    # 1024/2048 has no num_requests entry on the page: the row says what it took
    r = rows["trtllm020-l31-8b-h200-tp1-1024-2048"]
    assert int(r["requests"]) == 1500 and "no 1024/2048 row" in r["notes"]


def test_unchunked_budget_floor_derived_by_hand():
    """Llama 3.1 8B FP8 on one H100, ISL 20,000 / OSL 2,000, as trtllm-bench's PyTorch path
    sizes it: calc_engine_setting's KV requests, finetune_setting's rounding, then
    max_num_tokens = max(tuned, max ISL + max batch) because chunked prefill is off."""
    m = get_model(str(ROOT / "validation" / "models" / "llama-3.1-8b.json"))
    gpu = get_gpu("h100-sxm")
    params = 8_030_261_248  # Llama 3.1 8B parameter count (Meta's model card: 8.03B)
    kv_per_token = 2 * 32 * 8 * 128 * 1.0  # 2 L h_kv d_h bytes, FP8 KV (the quant maps KV to FP8)
    reqs = (gpu.hbm_bytes - params * 1.0) * 0.95 / (kv_per_token * 22_000)
    assert 50 < reqs < 53  # about 51 requests of 22,000 tokens
    bs = max(64, 32 * math.ceil(reqs / 32))  # below 256: multiples of 32, at least 64
    tok = max(2048, 256 * math.ceil(min(reqs * (1 + 20_000 / 2_000), 32768) / 256))
    assert (bs, tok) == (64, 2048)
    eng = get_serving_engine("trtllm-0.20")
    es = setup(eng, m, gpu, ServeLayout(1, 1), precision("fp8"), "fp8", 20_000, 2_000)
    assert (es.max_batch, es.chunked_prefill) == (bs, False)
    assert es.token_budget == max(tok, 20_000 + bs) == 20_064
    # the TensorRT path of v0.17 chunks its prefill and keeps the tuned budget
    es17 = setup(get_serving_engine("trtllm-0.17"), m, gpu, ServeLayout(1, 1),
                 precision("fp8"), "fp8", 20_000, 2_000)
    assert es17.token_budget == tok and es17.chunked_prefill


def test_profile_fields_are_what_the_sources_state():
    eng = get_serving_engine("trtllm-0.20")
    assert eng.batch_rule == "trtllm-bench" and not eng.chunked_prefill
    assert eng.kv_fraction == pytest.approx(0.95)  # the page's --kv_cache_free_gpu_mem_fraction
    assert eng.unchunked_budget_floor == "max_isl_plus_batch"
    assert eng.default_kv_dtype(precision("fp8")) == "fp8"
    assert eng.moe_gemm.get("hopper") == "cutlass_sm90"
    assert eng.sources["unchunked_budget_floor"] == "trtllm-bench-pytorch-settings"


def test_rows_priced_or_skipped_with_why():
    priced, skipped = validate_published(CSV.read_text(), ROOT, set(_rows()))
    got = {r.id for r in priced} | {rid for rid, _ in skipped}
    assert got == set(_rows())
    for r in priced:
        assert r.engine == "trtllm-0.20" and r.predicted > 0
    for rid, why in skipped:  # only the B200 FP4 cells, until an FP4 precision is priced
        assert "-b200-" in rid and "fp4" in why
