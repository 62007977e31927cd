"""NVIDIA's MLPerf Inference v4.1 Llama 2 70B harness as an engine profile (trtllm-mlperf-v41),
read from mlcommons/inference_results_v4.1 at commit a2f5d66d17e8f75c02fd74dfe810ecca6a046696,
closed/NVIDIA (source mlperf-v41-nvidia-harness)."""

from __future__ import annotations

from dataclasses import replace

from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.specs import get_gpu, get_model


def _h100_tp2_server():
    # configs/llama2-70b/Server/__init__.py H100_SXM_80GB_TP2x1: tensor_parallelism 2,
    # gpu_batch_size 1024, use_fp8, kvcache_free_gpu_mem_frac 0.90
    eng = get_serving_engine("trtllm-mlperf-v41")
    prec = precision("fp8")
    es = setup(eng, get_model("llama-2-70b"), get_gpu("h100-sxm"), ServeLayout(2), prec,
               eng.default_kv_dtype(prec), 222, 290, max_batch=1024)
    return eng, es


def test_harness_scheduler_settings_are_the_harness_code():
    eng, es = _h100_tp2_server()
    assert eng.kv_fraction == 0.90  # the configs' kvcache_free_gpu_mem_frac (flag default 0.95)
    # code/harness/harness_llm/main_llm.cc: DEFINE_string(trtllm_batch_sched_policy, "max_util")
    # -> kMAX_UTILIZATION; code/llama2-70b/tensorrt/harness.py passes no policy flag: KV blocks
    # are taken as sequences grow, not reserved for the whole output
    assert eng.reserve == "on_demand"
    # llm_core.cc: SchedulerConfig(policy) only, TrtGptModelOptionalParams' enableChunkedContext
    # left at its default (false): a prompt enters whole
    assert es.chunked_prefill is False and eng.chunked_prefill is False
    # configs/llama2-70b/__init__.py GPUBaseConfig.max_num_tokens = 4096 -> builder.py
    # trtllm-build --max_num_tokens; the engine is the harness's own build, not trtllm-bench's
    # dataset tuning (which would pick 2,048 here)
    assert eng.batch_rule == "profile"
    assert es.token_budget == 4096
    assert es.max_batch == 1024
    # trtllm-0.17 tunes the same row to a 2,048-token budget with chunked context
    tuned = setup(replace(get_serving_engine("trtllm-0.17"), kv_fraction=0.90),
                  get_model("llama-2-70b"), get_gpu("h100-sxm"), ServeLayout(2),
                  precision("fp8"), "fp8", 222, 290, max_batch=1024)
    assert (tuned.token_budget, tuned.chunked_prefill) == (2048, True)


def test_no_evict_with_the_harness_output_cap_could_not_hold_the_measured_batch():
    # Why the policy matters for this row, as a derivation. main_llm.cc: max new tokens per
    # request = engine max_seq_len - max_input_len = 2048 - 1024 (builder.py) = 1024 (llm_core.cc
    # sets it on every request); GUARANTEED_NO_EVICT would reserve 222 + 1024 tokens a request.
    # The H100 Server log (results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Server/
    # performance/run_1/mlperf_log_summary.txt): 74.42 completed samples/s over 4 replicas, mean
    # latency 44.95 s -> Little's law 74.42 / 4 x 44.95 = 836 requests in flight per replica.
    _, es = _h100_tp2_server()
    pool = es.kv.blocks * es.kv.block_size
    in_flight = 74.42 / 4 * 44.955
    assert 830 < in_flight < 840
    block = es.kv.block_size
    no_evict_cap = pool // (-(-(222 + 1024) // block) * block)
    assert no_evict_cap < in_flight  # no-evict at the harness's cap could not have run it
    # taking blocks as they fill (MAX_UTILIZATION) holds it: the mean sequence in flight at fixed
    # lengths carries 222 + 290 / 2 tokens
    assert in_flight * (222 + 290 / 2) < pool
