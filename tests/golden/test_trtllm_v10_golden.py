"""TensorRT-LLM's perf-overview editions after v0.20 as out-of-sample rows of
validation/serving_published.csv, and the trtllm-1.0-bench profile that prices them.

Sources: the v1.0 edition of docs/source/performance/perf-overview.md (source key
trtllm-perf-overview-v10, read in the index's stored copy that calls its RTX 6000 tables 'NEW for
v1.0'), the later edition at docs/source/developer-guide/perf-overview.md, NVIDIA commit 03e27c7d
(trtllm-perf-overview-dev-03e27c7d), and trtllm-bench's PyTorch-path settings
(tensorrt_llm/bench/benchmark/utils/general.py get_settings, trtllm-bench-pytorch-settings). No
error bound is asserted: nothing was set from these rows."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from conftest import published_serving_rows
from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.validate import validate_published
from scalemodel.specs import get_gpu, get_model

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "validation" / "serving_published.csv"
DATA = ROOT / "src" / "scalemodel" / "specs" / "data"
V10, DEV = "trtllm-perf-overview-v10", "trtllm-perf-overview-dev-03e27c7d"


def _rows(source: str) -> dict[str, dict[str, str]]:
    return published_serving_rows(source)


# cells read off the v1.0 page (Total Output Throughput, tokens/sec): (model, gpu, tp, isl, osl)
V10_CELLS = {
    ("l33-70b", "b200", 1, 128, 2048): 9922,
    ("l33-70b", "h200", 1, 20000, 2000): 283,
    ("l33-70b", "h100-sxm", 2, 2048, 128): 762,
    ("qwen3-30b", "b200", 1, 1000, 1000): 25828,
    ("l31-405b", "b200", 4, 5000, 500): 1048,
    ("l31-405b", "h200", 8, 128, 4096): 4741,
    ("l31-405b", "h100-sxm", 8, 20000, 2000): 345,
    ("l31-8b", "h200", 1, 2048, 2048): 12194,
    ("l31-8b", "h100-sxm", 1, 1000, 2000): 13899,
}
# the v1.0 page's $num_requests per length pair
V10_REQUESTS = {(128, 2048): 3000, (128, 4096): 1500, (500, 2000): 3000, (1000, 1000): 3000,
                (1000, 2000): 1500, (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500,
                (20000, 2000): 1000}
# cells of the developer-guide edition (output tokens per second per GPU)
DEV_CELLS = {
    ("l33-70b", "b200", 1, 32768, 1024): 274,
    ("l33-70b", "h200", 2, 1024, 8192): 2009,
    ("l33-70b", "h100-sxm", 2, 8192, 1024): 398,
    ("qwen3-30b", "b200", 1, 1024, 32768): 4494,
}
DEV_REQUESTS = {(1024, 1024): 3000, (8192, 1024): 1500, (1024, 8192): 1500,
                (32768, 1024): 1000, (1024, 32768): 1000}


def test_v10_table_size_and_cells():
    rows = _rows(V10)
    # non-blank cells on H100 / H200 / B200 of the models priced: Llama 3.3 70B 3 x 9,
    # Qwen3-30B-A3B 9 (B200 only), Llama 3.1 405B 3 x 9, Llama 3.1 8B 2 x 9
    assert len(rows) == 27 + 9 + 27 + 18
    for (m, g, tp, i, o), v in V10_CELLS.items():
        r = rows[f"trtllm10-{m}-{g}-tp{tp}-{i}-{o}"]
        assert float(r["measured"]) == pytest.approx(v)
        assert (int(r["isl"]), int(r["osl"]), int(r["tp"]), r["stream"]) == (i, o, tp,
                                                                            "max-load")
        assert r["precision"] == ("fp4" if g == "b200" else "fp8")
        assert r["metric"] == "output_tokens_per_s" and r["engine"] == "trtllm-1.0-bench"
    for r in rows.values():
        assert int(r["requests"]) == V10_REQUESTS[(int(r["isl"]), int(r["osl"]))]


# the DEPn cells of the developer-guide edition (attention data parallel, experts over n):
# (model, gpu, n, isl, osl) -> output tokens per second per GPU
DEP_CELLS = {
    ("dsr1", "h200", 8, 1024, 1024): 1620,
    ("dsr1", "h200", 8, 1024, 32768): 438,
    ("maverick", "b200", 4, 32768, 1024): 859,
    ("maverick", "h200", 8, 8192, 1024): 1276,
    ("qwen3-235b", "b200", 4, 1024, 32768): 1255,
    ("qwen3-235b", "h200", 4, 32768, 1024): 134,
    ("qwen3-235b", "h100", 8, 1024, 8192): 873,
}


def test_dev_table_size_and_cells():
    rows = _rows(DEV)
    dep = {k: r for k, r in rows.items() if "-dep" in k}
    rows = {k: r for k, r in rows.items() if k not in dep}
    # Llama 3.3 70B: B200 TP1 5, H200 TP2 5, H100 TP2 2 cells; Qwen3-30B-A3B B200 TP1 6
    assert len(rows) == 5 + 5 + 2 + 6
    # DEPn: DeepSeek R1 0528 H200 DEP8 4 (its B200 FP4 column is left out: no NVFP4 config),
    # Maverick B200 DEP4 6 and H200 DEP8 5, Qwen3-235B-A22B B200 DEP4 6, H200 DEP4 5, H100 DEP8 3
    assert len(dep) == 4 + 6 + 5 + 6 + 5 + 3
    for (m, g, n, i, o), v in DEP_CELLS.items():
        r = dep[f"trtllmdev-{m}-{g}-dep{n}-{i}-{o}"]
        assert float(r["measured"]) == pytest.approx(v)
        assert (int(r["tp"]), int(r["ep"]), r["attention_dp"]) == (n, n, "1")
        assert int(r["requests"]) == DEV_REQUESTS[(i, o)]
    for (m, g, tp, i, o), v in DEV_CELLS.items():
        r = rows[f"trtllmdev-{m}-{g}-tp{tp}-{i}-{o}"]
        assert float(r["measured"]) == pytest.approx(v)
        assert r["metric"] == "output_tokens_per_s_per_gpu"
        assert int(r["requests"]) == DEV_REQUESTS[(i, o)]
    # 1000/1000 has no num_requests entry on that page: the rows say what they took
    r = rows["trtllmdev-l33-70b-b200-tp1-1000-1000"]
    assert int(r["requests"]) == 3000 and "no 1000/1000 row" in r["notes"]


def test_sources_and_profile_are_known():
    keys = tomllib.loads((DATA / "sources_serving.toml").read_text())
    assert {V10, DEV} <= set(keys)
    assert "03e27c7d" in keys[DEV]["url"]
    eng = get_serving_engine("trtllm-1.0-bench")
    assert eng.version == "1.0"
    assert eng.sources["kv_fraction"] == V10
    assert eng.sources["chunked_prefill"] == "trtllm-bench-pytorch-settings"
    # the 1.0 page's trtllm-bench path is v0.20's: the same tuning and floor
    assert eng.batch_rule == "trtllm-bench" and not eng.chunked_prefill
    assert eng.unchunked_budget_floor == "max_isl_plus_batch"


def test_kv_fraction_derived_by_hand():
    """The 1.0 page's --kv_cache_free_gpu_mem_fraction 0.95 in the PyTorch backend's pool rule
    (kv_pool fraction_of_free_after_profile): KV = 0.95 x (memory - weights - the profiling
    pass's activations - memory outside torch - CUDA graphs), per GPU. Llama 3.3 70B FP8 on two
    H100s at 8,192 / 1,024, a cell of the later edition."""
    eng = get_serving_engine("trtllm-1.0-bench")
    assert eng.kv_fraction == pytest.approx(0.95)
    m = get_model(str(ROOT / "validation" / "models" / "llama-3.1-70b.json"))
    es = setup(eng, m, get_gpu("h100-sxm"), ServeLayout(2, 1), precision("fp8"), "fp8",
               8192, 1024)
    kv = es.kv
    free = (kv.total_bytes - kv.weights_bytes - kv.profile_activation_bytes
            - kv.non_torch_bytes - kv.cuda_graph_bytes)
    assert kv.kv_budget_bytes == pytest.approx(0.95 * free, rel=1e-6)
    # the KV per token per GPU: 2 (K, V) x 80 layers x 8 KV heads / 2 ranks x 128 x 1 byte (FP8)
    assert kv.bytes_per_token == pytest.approx(2 * 80 * 4 * 128 * 1.0)


def test_unchunked_floor_on_a_32k_prompt():
    """No chunked prefill (get_settings' default, not set by the page's llm_options.yml): a
    32,768-token prompt must fit one iteration, so max_num_tokens = 32,768 + max batch."""
    priced, _ = validate_published(CSV.read_text(), ROOT,
                                   {"trtllmdev-l33-70b-b200-tp1-32768-1024"})
    (r,) = priced
    assert r.token_budget == 32768 + r.max_batch


def test_rows_priced():
    ids = {k for k in set(_rows(V10)) | set(_rows(DEV)) if "-dep" not in k}
    priced, skipped = validate_published(CSV.read_text(), ROOT, ids)
    assert not skipped and {r.id for r in priced} == ids
    for r in priced:
        assert r.engine == "trtllm-1.0-bench" and r.predicted > 0


def test_dep_row_priced_with_attention_dp():
    # one DEPn row read through the CSV's attention_dp column: priced (not skipped) on one
    # attention-DP rank of the DEP4 replica, the deployment's figure per GPU
    rid = "trtllmdev-qwen3-235b-h200-dep4-32768-1024"
    priced, skipped = validate_published(CSV.read_text(), ROOT, {rid})
    assert not skipped
    (r,) = priced
    assert (r.tp, r.dp, r.engine) == (4, 1, "trtllm-1.0-bench") and r.predicted > 0
