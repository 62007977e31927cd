"""The out-of-sample serving rows (validation/serving_published.csv), one check per source: each
row's figure and settings as read from its source, the lengths derived by hand from the
source's own numbers, and the row priced (or skipped with why). No error bound is asserted:
these rows score the planner, nothing was set from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import published_serving_rows
from scalemodel.analytic.serving.validate import summary, validate_published

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "validation" / "serving_published.csv"

# MLPerf Inference mean input length of the Llama 2 70B set: tok_input_length summed over the
# 24,576 samples of open_orca_gpt4_tokenized_llama.sampled_24576 (5,463,976, as recorded in
# FlashLab-MBZUAI/HBFSim's calibration protocol, source mlperf-openorca-lengths)
OPENORCA_ISL = round(5_463_976 / 24_576)  # 222


def _rows() -> dict[str, dict[str, str]]:
    return published_serving_rows()


@pytest.fixture(scope="module")
def priced():
    rows, skipped = validate_published(CSV.read_text(), ROOT)
    return {r.id: r for r in rows}, dict(skipped)


# (row, Tokens per second, Samples per second, samples_per_query) from each mlperf_log_summary.txt;
# (tp, replicas, gpu_batch_size) from configs/llama2-70b/Offline/__init__.py of that round
MLPERF = {
    "mlperf41-llama2-70b-offline-h100-sxm-x8": (24524.9, 84.4792, 200640, 2, 4, 896),
    "mlperf41-llama2-70b-offline-h200-x8": (31302.7, 107.477, 274560, 1, 8, 806),
    "mlperf40-llama2-70b-offline-h100-sxm-x2": (5539.47, 18.9752, 24576, 2, 1, 896),
}


@pytest.mark.parametrize("rid", sorted(MLPERF))
def test_mlperf_rows_read_and_priced(priced, rid):
    tps, sps, n, tp, dp, bs = MLPERF[rid]
    row = _rows()[rid]
    assert float(row["measured"]) == pytest.approx(tps)
    assert int(row["osl"]) == round(tps / sps)  # generated tokens per sample, ~290
    assert int(row["isl"]) == OPENORCA_ISL
    assert (int(row["tp"]), int(row["dp"]), int(row["max_batch"]), int(row["requests"])) == (
        tp, dp, bs, n)
    assert float(row["kv_fraction"]) == pytest.approx(0.90)  # kvcache_free_gpu_mem_frac
    r = priced[0][rid]
    assert r.predicted > 0 and r.error == pytest.approx(r.predicted / tps - 1)
    assert r.dp == dp and r.max_batch == bs


# MLPerf v4.1 Server (Poisson at target_qps): percentiles of first token latency and time to output
# token in ns, Completed tokens / samples per second, from each Server mlperf_log_summary.txt; the
# requests issued: mlperf_log_detail.txt generated_query_count (8 and 10 x the 24,576 samples)
SERVER = {
    "mlperf41-llama2-70b-server-h100-sxm-x8": (75, 21605.79, 74.42, 196608, {
        "ttft-p50": 272954995, "ttft-p99": 461278089, "tpot-p50": 156419276,
        "tpot-p99": 175354317}),
    "mlperf41-llama2-70b-server-h200-x8": (101, 29228.22, 100.35, 245760, {
        "ttft-p50": 180758928, "ttft-p99": 452744202, "tpot-p50": 124285539,
        "tpot-p99": 146040006}),
}


@pytest.mark.parametrize("base", sorted(SERVER))
def test_mlperf_server_latency_rows_read_and_priced(priced, base):
    qps, tps, sps, issued, lat = SERVER[base]
    assert issued % 24576 == 0
    for name, ns in lat.items():
        rid = f"{base}-{name}"
        row = _rows()[rid]
        assert float(row["measured"]) == pytest.approx(ns * 1e-9)
        assert row["metric"] == name.replace("-", "_") + "_s"
        assert (row["stream"], float(row["rate"]), int(row["requests"])) == ("rate", qps,
                                                                             issued)
        assert row["engine"] == "trtllm-mlperf-v41"  # NVIDIA's harness, not trtllm-bench
        assert int(row["osl"]) == round(tps / sps) and int(row["isl"]) == OPENORCA_ISL
        r = priced[0][rid]
        assert r.predicted > 0 and r.error == pytest.approx(r.predicted / r.measured - 1)


# Little's law on each Server summary's own figures (Mean latency, Mean Time to Output Token, in ns;
# replicas = 8 GPUs / tp): requests in flight per replica = completed QPS x mean latency /
# replicas, and each in-flight request gains a token per engine step of about the mean TPOT, so
# the replica's generated tokens/s = in flight / TPOT must give back the summary's Completed
# tokens per second. By hand, H100 (TP2 x 4): 74.42 x 44.955 s / 4 = 836 in flight, 836 / 0.15496 s
# x 4 = 21,590 tokens/s (summary: 21,605.79); H200 (TP1 x 8): 100.35 x 35.855 s / 8 = 450,
# 450 / 0.12326 s x 8 = 29,200 (summary: 29,228.22). The runs sat at ~836 and ~450 sequences a
# step: the batch the priced latency rows have to reproduce (docs/serving.md, MLPerf Server)
LITTLE = {"mlperf41-llama2-70b-server-h100-sxm-x8": (44954547225, 154960329, 4),
          "mlperf41-llama2-70b-server-h200-x8": (35854894885, 123263268, 8)}


@pytest.mark.parametrize("base", sorted(SERVER))
def test_mlperf_server_result_row_and_littles_law(priced, base):
    qps, tps, sps, issued, _ = SERVER[base]
    mean_ns, tpot_ns, replicas = LITTLE[base]
    in_flight = sps * mean_ns * 1e-9 / replicas
    assert in_flight == pytest.approx(836 if replicas == 4 else 450, rel=0.01)
    assert in_flight / (tpot_ns * 1e-9) * replicas == pytest.approx(tps, rel=0.01)
    row = _rows()[f"{base}-qps"]
    # MLPerf Server's result: Completed samples per second, valid within mlperf.conf's
    # llama2-70b.Server.ttft_latency = 2000 ms and tpot_latency = 200 ms at the 99th percentile
    assert (row["metric"], float(row["measured"])) == ("slo_requests_per_s", sps)
    assert (float(row["slo_ttft_p99_s"]), float(row["slo_tpot_p99_s"])) == (2.0, 0.2)
    assert (row["stream"], float(row["rate"]), int(row["requests"])) == ("rate", qps, issued)
    r = priced[0][f"{base}-qps"]
    assert r.predicted > 0 and r.error == pytest.approx(r.predicted / sps - 1)


def test_mlperf_fp4_priced_and_unstated_lengths_skipped_with_why(priced):
    skipped = priced[1]
    # B200 preview, Offline: Tokens per second 11,264.4, Samples per second 41.1075,
    # samples_per_query 100,320 (its mlperf_log_summary.txt); NVFP4 (--precision fp4) prices it
    row = _rows()["mlperf41-llama2-70b-offline-b200-x1"]
    assert float(row["measured"]) == pytest.approx(11264.4)
    assert int(row["osl"]) == round(11264.4 / 41.1075) and int(row["isl"]) == OPENORCA_ISL
    assert (row["precision"], int(row["requests"])) == ("fp4", 100320)
    r = priced[0]["mlperf41-llama2-70b-offline-b200-x1"]
    assert r.precision == "fp4" and r.predicted > 0
    assert "not stated" in skipped["mlperf41-mixtral-8x7b-offline-h100-sxm-x8"]
    assert int(_rows()["mlperf41-mixtral-8x7b-offline-h100-sxm-x8"]["osl"]) == round(
        52415.9 / 359.173)


# MLPerf Inference v5.1 (mlcommons/inference_results_v5.1 at 965182b) and v5.0 (the fork
# ntuhpc/mlperf_inference_results_v5.0 at cf35411) Offline: (Tokens per second, Samples per second,
# requests) from each mlperf_log_summary.txt (v5.1: mlperf_log_detail.txt generated_samples_per_query;
# v5.0: samples_per_query), and (tp, pp, replicas, gpu_batch_size, max_num_tokens, KV fraction or
# None, precision) from the round's config: v5.1 configs/B200-SXM-180GBx8/Offline/llama2-70b.py and
# AMD's offline_mi300x.yaml; v5.0 configs/llama2-70b/Offline/__init__.py (mlcommons commit 6069beb)
MLPERF5 = {
    "mlperf51-llama2-70b-offline-b200-x8": (101527, 371.423, 1007616, 1, 1, 8, 2048, 3584, 0.95,
                                            "fp4", "trtllm-mlperf-v51"),
    "mlperf51-llama2-70b-offline-mi300x-x8": (27803.9, 92.1544, 245760, 1, 1, 8, 1792, 40960, 0.98,
                                              "fp8", "vllm-rocm-mlperf-v51"),
    "mlperf50-llama2-70b-offline-h100-sxm-x8": (31306.8, 107.256, 290400, 1, 2, 4, 1024, 1024,
                                                0.95, "fp8", "trtllm-mlperf-v51"),
    "mlperf50-llama2-70b-offline-h200-x8": (34988.2, 120.008, 304128, 1, 1, 8, 2048, 1536, None,
                                            "fp8", "trtllm-mlperf-v51"),
    "mlperf50-llama2-70b-offline-b200-x8": (98858, 363.895, 992640, 1, 1, 8, 2048, 3584, 0.95,
                                            "fp4", "trtllm-mlperf-v51"),
}


@pytest.mark.parametrize("rid", sorted(MLPERF5))
def test_mlperf5_offline_rows_read_and_priced(priced, rid):
    tps, sps, n, tp, pp, dp, bs, tok, kv, prec, eng = MLPERF5[rid]
    row = _rows()[rid]
    assert float(row["measured"]) == pytest.approx(tps)
    assert int(row["osl"]) == round(tps / sps) and int(row["isl"]) == OPENORCA_ISL
    assert (int(row["tp"]), int(row["pp"]), int(row["dp"]), int(row["requests"])) == (tp, pp, dp,
                                                                                     n)
    assert (int(row["max_batch"]), int(row["max_num_tokens"])) == (bs, tok)
    assert (float(row["kv_fraction"]) if row["kv_fraction"] else None) == kv
    assert (row["precision"], row["engine"], row["stream"]) == (prec, eng, "max-load")
    r = priced[0][rid]
    # the run's max_num_tokens reaches the simulation as its token budget, its batch limit too
    assert (r.token_budget, r.max_batch, r.dp, r.pp) == (tok, bs, dp, pp)
    assert r.predicted > 0 and r.error == pytest.approx(r.predicted / tps - 1)


def test_mlperf51_405b_row_skipped_for_unstated_input_lengths(priced):
    # B200 x 8, Llama 3.1 405B Offline: Tokens per second 1624.11, Samples per second 2.49245;
    # llama3_1-405b.py: TP 2 PP 2 (two replicas), gpu_batch_size 128, runtime max_num_tokens 1536
    rid = "mlperf51-llama3.1-405b-offline-b200-x8"
    row = _rows()[rid]
    assert int(row["osl"]) == round(1624.11 / 2.49245) and row["isl"] == ""
    assert (int(row["tp"]), int(row["pp"]), int(row["dp"]), int(row["max_batch"]),
            int(row["max_num_tokens"])) == (2, 2, 2, 128, 1536)
    assert "not stated" in priced[1][rid]


def test_mlperf51_harness_profiles_as_read_from_the_submissions():
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.analytic.serving.iteration import precision

    nv = get_serving_engine("trtllm-mlperf-v51")
    # configs/B200-SXM-180GBx8/Offline/llama2-70b.py: tokens_per_block 32, max_num_tokens 3584,
    # enable_chunked_context True, kvcache_free_gpu_mem_frac 0.95, batch_scheduler_policy max_util
    assert (nv.block_size, nv.chunked_prefill, nv.kv_fraction, nv.reserve) == (
        32, True, 0.95, "on_demand")
    assert int(nv.profile.get("token_budget_default")) == 3584
    amd = get_serving_engine("vllm-rocm-mlperf-v51")
    # offline_mi300x.yaml: block_size 32, enable_chunked_prefill False, max_num_seqs 1792;
    # harness_llm/common/config.yaml kv_cache_dtype fp8 under an FP8 (Quark W8A8) checkpoint
    assert (amd.block_size, amd.chunked_prefill, amd.max_num_seqs) == (32, False, 1792)
    assert amd.default_kv_dtype(precision("fp8")) == "fp8"


# TensorRT-LLM release/0.5.0 performance.md, High Throughput, H100 GPUs (FP8):
# (model, batch, TP, input, output) -> Throughput (out tok/s)
TRTLLM050 = {
    ("7b", 64, 1, 128, 128): 9193, ("7b", 64, 1, 128, 2048): 5367,
    ("7b", 64, 1, 2048, 128): 2058, ("7b", 32, 1, 2048, 2048): 2230,
    ("70b", 64, 4, 128, 128): 3317, ("70b", 64, 4, 128, 2048): 2616,
    ("70b", 64, 4, 2048, 128): 843, ("70b", 64, 4, 2048, 2048): 1583,
}


@pytest.mark.parametrize("key", sorted(TRTLLM050))
def test_trtllm050_table_read_and_priced(priced, key):
    size, bs, tp, i, o = key
    rid = f"trtllm050-llama-{size}-h100-sxm-tp{tp}-bs{bs}-{i}-{o}"
    row = _rows()[rid]
    assert float(row["measured"]) == TRTLLM050[key]
    # one static batch: every request of the batch at once, the batch the table names
    assert (int(row["requests"]), int(row["max_batch"]), row["stream"]) == (bs, bs, "max-load")
    r = priced[0][rid]
    assert (r.isl, r.osl, r.tp) == (i, o, tp) and r.predicted > 0


# TensorRT-LLM blogs/H200launch.md (v0.5.0), H200 FP8 Max throughput:
# (model, batch, TP, input, output) -> Throughput (out tok/s/GPU)
H200LAUNCH = {
    ("13b", 1024, 1, 128, 128): 11819, ("13b", 128, 1, 128, 2048): 4750,
    ("13b", 64, 1, 2048, 128): 1349, ("70b", 512, 1, 128, 128): 3014,
    ("70b", 512, 2, 128, 2048): 1654, ("70b", 64, 1, 2048, 128): 341,
    ("70b", 32, 1, 2048, 128): 303,
}


@pytest.mark.parametrize("key", sorted(H200LAUNCH))
def test_h200_launch_table_read_and_priced_per_gpu(priced, key):
    size, bs, tp, i, o = key
    rid = f"trtllm050-h200-llama-{size}-tp{tp}-bs{bs}-{i}-{o}"
    row = _rows()[rid]
    assert float(row["measured"]) == H200LAUNCH[key]
    assert row["metric"] == "output_tokens_per_s_per_gpu"  # the table's tok/s/GPU
    r = priced[0][rid]
    assert (r.isl, r.osl, r.tp, r.max_batch) == (i, o, tp, bs) and r.predicted > 0


# TensorRT-LLM blogs/Falcon180B-H200.md (v0.7a), Llama-70B on 1 x H200: (batch, input, output) ->
# out tok/s/GPU, batches from the footnote "BS: (in order) 960, 960, 192, 560, 96, 640"
V07A = {(960, 128, 128): 3803, (192, 128, 2048): 2941, (96, 128, 4096): 1946}


def test_v07a_rows_read_priced_and_the_over_context_row_skipped(priced):
    for (bs, i, o), t in V07A.items():
        rid = f"trtllm07a-h200-llama-70b-tp1-bs{bs}-{i}-{o}"
        assert float(_rows()[rid]["measured"]) == t
        if i + o > 4096:  # Llama 2's context: the loader reports it instead of pricing it
            assert "context" in priced[1][rid]
        else:
            assert priced[0][rid].max_batch == bs


# SGLang benchmark_vllm_060/README.md, offline results: (request throughput, output token
# throughput) per engine and model
SGLANG = {
    "sglang030-bench-sglang-8b-a100-sxm-80gb-tp1-sharegpt": (22.03, 4281.51),
    "sglang030-bench-vllm-v0-8b-a100-sxm-80gb-tp1-sharegpt": (21.27, 4132.37),
    "sglang030-bench-sglang-70b-h100-sxm-tp4-sharegpt": (19.84, 3856.01),
    "sglang030-bench-vllm-v0-70b-h100-sxm-tp4-sharegpt": (19.04, 3700.64),
}


@pytest.mark.parametrize("rid", sorted(SGLANG))
def test_sglang_post_rows_read_and_skipped_for_unstated_input_lengths(priced, rid):
    rps, tok = SGLANG[rid]
    row = _rows()[rid]
    assert float(row["measured"]) == tok
    assert int(row["osl"]) == round(tok / rps)  # ~194 output tokens per ShareGPT request
    assert row["isl"] == "" and "not stated" in priced[1][rid]


# vLLM's v0.6.0 performance post (blog 2024-09-05, source vllm-blog-v060-perf-update): request
# throughput at QPS inf, 500 prompts, bars without printed values. Each value is read off
# assets/figures/perf-v060/overall_throughput.png (1783 x 862 px) as (zero row - bar's top row) /
# (pixels per req/s), the scale from the panel's highest gridline: (zero row, (gridline row, its
# tick value), vLLM bar top, SGLang bar top), rows counted from the image's top
V060_PANELS = {
    ("8b", 1, "sharegpt"): (381, (118, 30), 57, 88),
    ("8b", 1, "decode-heavy"): (381, (68, 30), 57, 64),
    ("8b", 1, "prefill-heavy"): (381, (113, 60), 117, 73),
    ("70b", 4, "sharegpt"): (816, (536, 15), 493, 525),
    ("70b", 4, "decode-heavy"): (816, (501, 15), 493, 518),
    ("70b", 4, "prefill-heavy"): (816, (530, 25), 527, 516),
}
# the post's Dataset paragraph: ShareGPT averages 202 input / 179 output tokens; the sonnet sets
# roughly 462 input and 16 (prefill-heavy) or 256 (decode-heavy) output tokens on average
V060_LENGTHS = {"sharegpt": (202, 179), "decode-heavy": (462, 256), "prefill-heavy": (462, 16)}


def _v060_panel(priced, panels, key, part):
    """(engine, its profile, CSV row, priced result) of the vLLM and SGLang bars of one panel of
    the v0.6.0 post, once the row is checked against the chart: measured = (zero row - bar top)
    / (pixels per unit, from one gridline), the dataset's mean lengths, and priced."""
    size, tp, ds = key
    zero, (grid_row, grid_value), top_vllm, top_sglang = panels[key]
    per_unit = (zero - grid_row) / grid_value
    for eng, top, profile in (("vllm", top_vllm, "vllm-0.6.0-multistep"),
                              ("sglang", top_sglang, "sglang-0.3.0")):
        rid = f"vllm060-blog-{eng}-llama3-{size}-{part}-tp{tp}-{ds}"
        row = _rows()[rid]
        assert float(row["measured"]) == pytest.approx((zero - top) / per_unit, abs=0.01)
        assert (int(row["isl"]), int(row["osl"])) == V060_LENGTHS[ds]
        r = priced[0][rid]
        assert r.predicted > 0 and r.error == pytest.approx(r.predicted / r.measured - 1)
        # ShareGPT lengths drawn from the bundled first-round table, scaled to the post's means
        # (specs/data/traces/sharegpt-vllm-sosp23); the sonnet sets at their fixed means
        assert r.length_dist == ("sharegpt" if ds == "sharegpt" else "fixed")
        yield eng, profile, row, r


@pytest.mark.parametrize("key", sorted(V060_PANELS))
def test_vllm_v060_post_rows_read_off_the_chart_and_priced(priced, key):
    size, tp, ds = key
    for eng, profile, row, r in _v060_panel(priced, V060_PANELS, key, "h100"):
        assert (int(row["requests"]), row["stream"], row["metric"]) == (500, "max-load",
                                                                         "requests_per_s")
        # vLLM 0.6.0 on its multi-step profile (the post's --num-scheduler-steps 10, over the V0
        # profile), SGLang 0.3.0 on sglang-0.3.0 (no overlap scheduler, measured host time);
        # Llama 3's 8,192-token context (the V0 budget rule depends on it; Llama 3.1's 131,072 would switch
        # chunked prefill on)
        assert row["engine"] == profile and int(row["tp"]) == tp
        assert row["model"] == f"llama-3-{size}"
        if eng == "vllm":
            # vLLM 0.6.0's EngineArgs.max_num_seqs 256, and SchedulerConfig's
            # max_num_batched_tokens = max(max_model_len, 2048) = 8,192 without chunked prefill
            # (off at an 8,192-token context), as read in the 0.6.0 wheel (vllm-v060-wheel)
            assert (r.max_batch, r.token_budget) == (256, max(8192, 2048))
            assert "vllm-v060-wheel" in row["engine_version"]


# the appendix figures for A100 (assets/figures/perf-v060/A100_8B.png and A100_70B.png, 3726 x
# 2525 px, the Throughput panels of the right column): (zero row = the x axis spine's centre,
# (highest gridline row, its tick value), vLLM bar top, SGLang bar top)
V060_A100 = {
    ("8b", 1, "sharegpt"): (674.5, (113.5, 20), 142, 173),
    ("8b", 1, "decode-heavy"): (1522.5, (1002.5, 15), 1012, 1019),
    ("8b", 1, "prefill-heavy"): (2369.5, (1845.5, 30), 1872, 1840),
    ("70b", 4, "sharegpt"): (674.5, (149.5, 8), 114, 135),
    ("70b", 4, "decode-heavy"): (1522.5, (1036.5, 6), 975, 991),
    ("70b", 4, "prefill-heavy"): (2369.5, (1896.5, 10), 1830, 1814),
}


@pytest.mark.parametrize("key", sorted(V060_A100))
def test_vllm_v060_post_a100_rows_read_off_the_appendix_and_priced(priced, key):
    size, tp, ds = key
    for _, profile, row, _ in _v060_panel(priced, V060_A100, key, "a100"):
        assert f"A100_{size.upper()}.png" in row["location"]
        assert (row["engine"], row["gpu"], int(row["tp"])) == (profile, "a100-sxm-80gb", tp)



# the same post's headline figures (caption: ShareGPT, 500 prompts, TPOT measured at 32 QPS): the
# vLLM 0.6.0 TPOT bar, mean over the requests, read as (zero row - bar top) / (pixels per ms) with
# the scale from one gridline: (image, zero row, (gridline row, its value in ms), bar top)
V060_TPOT = {
    ("8b", 1): ("llama8B_comparison.png", 366, (269.5, 20), 301),
    ("70b", 4): ("llama70B_comparison.png", 367, (250.5, 50), 225),
}


@pytest.mark.parametrize("key", sorted(V060_TPOT))
def test_vllm_v060_post_tpot_at_32_qps_read_and_priced_as_a_mean(priced, key):
    size, tp = key
    img, zero, (grid_row, grid_ms), top = V060_TPOT[key]
    rid = f"vllm060-blog-vllm-llama3-{size}-h100-tp{tp}-sharegpt-qps32-tpot-mean"
    row = _rows()[rid]
    ms = (zero - top) / ((zero - grid_row) / grid_ms)
    assert float(row["measured"]) * 1e3 == pytest.approx(ms, abs=0.02)
    assert img in row["location"]
    assert (row["stream"], float(row["rate"]), int(row["requests"])) == ("rate", 32, 500)
    assert row["metric"] == "tpot_mean_s" and (int(row["isl"]), int(row["osl"])) == (202, 179)
    assert row["length_basis"].startswith("dist:sharegpt ")
    r = priced[0][rid]
    assert r.predicted > 0 and r.error == pytest.approx(r.predicted / r.measured - 1)
    assert r.length_dist == "sharegpt"


def test_mean_latencies_of_identical_requests_equal_their_median():
    """One request alone: every statistic of its TTFT and TPOT is the same number, so the means
    the benchmark reports equal the percentiles already priced."""
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.analytic.serving.iteration import ServeLayout, precision
    from scalemodel.analytic.serving.service import evaluate
    from scalemodel.analytic.serving.streams import Stream
    from scalemodel.specs import get_gpu, get_model

    eng, prec = get_serving_engine("vllm-v0"), precision("bf16")
    r = evaluate(get_model("llama-3-8b"), get_gpu("h100-sxm"), ServeLayout(1, 1), prec,
                 eng.default_kv_dtype(prec), eng, Stream("rate", 1, rate_per_s=1.0), 202, 179)
    assert r.ttft_mean_s == pytest.approx(r.ttft_p50_s) and r.ttft_mean_s > 0
    assert r.tpot_mean_s == pytest.approx(r.tpot_p50_s) and r.tpot_mean_s > 0


def test_by_source_mean_and_max(priced):
    rows = list(priced[0].values())
    s = summary(rows)
    for g in s["by_source"]:
        errs = [abs(r.error) for r in rows if r.source == g["source"]]
        assert g["rows"] == len(errs)
        assert g["max_abs_error"] == pytest.approx(max(errs))
        assert g["mean_abs_error"] == pytest.approx(sum(errs) / len(errs))
    assert {g["source"] for g in s["by_source"]} == {
        "mlperf-inference-v41-nvidia", "mlperf-inference-v40-nvidia", "trtllm-performance-v050",
        "trtllm-h200-launch-v050", "trtllm-falcon180b-h200-v07a", "trtllm-perf-overview-v020",
        "trtllm-perf-overview-v10", "trtllm-perf-overview-dev-03e27c7d",
        "trtllm-perf-overview-v12", "trtllm-perf-overview-v019", "vllm-blog-v060-perf-update",
        "mlperf-inference-v51-nvidia", "mlperf-inference-v51-amd", "mlperf-inference-v50-nvidia",
        "trtllm-tech-blog1-dsr1-b200", "trtllm-issue-5929-dsr1-fp4-b200",
        "lmsys-large-scale-ep-2025-05"}


# TensorRT-LLM issue 5929 (2025-07-10, v0.21.0rc2, trtllm-serve under LLMPerf, 8 x B200):
# DeepSeek-R1 FP4 at batch size 1, output 600, column "ITL p50 TP=8, EP=4": 0.00661 s at input
# 1600 and 0.00697 s at input 8192. Read as TPOT p50 of one request in flight at TP 8 EP 4.
ISSUE5929 = {"1600": 0.00661, "8192": 0.00697}


@pytest.mark.parametrize("isl", sorted(ISSUE5929))
def test_issue5929_batch1_rows_read_as_published(isl):
    row = _rows()[f"trtllm-issue5929-dsr1-fp4-b200-tp8ep4-isl{isl}"]
    assert row["source"] == "trtllm-issue-5929-dsr1-fp4-b200"
    assert (int(row["tp"]), int(row["ep"]), row["precision"]) == (8, 4, "fp4")
    assert (int(row["isl"]), int(row["osl"]), int(row["concurrency"])) == (int(isl), 600, 1)
    assert row["metric"] == "tpot_p50_s"
    assert float(row["measured"]) == ISSUE5929[isl]
    assert "spec:" not in row["length_basis"]   # the issue states no MTP


# the LMSYS large-scale-EP post (2025-05-05), section "Performance Analysis of Prefill and Decode
# Phases": prefill on 4 nodes (4 x 8 x H100, EP32) at 57,674 / 54,543 / 50,302 tokens per second
# per node for 1K / 2K / 4K prompts; 16,384 tokens per device (its profile section)
LMSYS_PREFILL = {"1k": (1024, 57674), "2k": (2048, 54543), "4k": (4096, 50302)}


@pytest.mark.parametrize("lab", sorted(LMSYS_PREFILL))
def test_lmsys_wide_ep_prefill_rows_read_and_priced(priced, lab):
    rid = f"lmsys-sglang-dsv3-h100-prefill-ep32-{lab}"
    isl, per_node = LMSYS_PREFILL[lab]
    row = _rows()[rid]
    assert (int(row["tp"]), int(row["ep"]), row["attention_dp"]) == (32, 32, "1")
    assert (int(row["isl"]), int(row["osl"]), int(row["max_num_tokens"])) == (isl, 1, 16384)
    assert row["engine"] == "sglang-0.4.6-deepep" and row["metric"] == "total_tokens_per_s"
    assert float(row["measured"]) == 4 * per_node  # 4 nodes
    r = priced[0][rid]
    assert r.attention_dp and r.predicted > 0


def test_every_source_key_is_in_sources_serving():
    import tomllib

    keys = tomllib.loads((ROOT / "src" / "scalemodel" / "specs" / "data" /
                          "sources_serving.toml").read_text())
    assert {r["source"] for r in _rows().values()} <= set(keys)
