"""The grouped expert-GEMM cost a serving engine's MoE layers pay beyond each expert's shape.

Sources: tgale96/grouped_gemm pull request 37 (source key grouped-gemm-sm90-bench): on H100,
128 experts x 512 routed rows, N 1536, K 2048, the CUTLASS SM90 cooperative grouped kernel ran
at 160.5 TFLOP/s, the CUTLASS SM80 grouped kernel at 116.9, one cuBLAS GEMM per expert at
129.5. TensorRT-LLM's MoE plugin runs its expert GEMMs as the TMA warp-specialized grouped
GEMM on Hopper (moe_gemm_tma_ws_launcher.inl, Ptr-Array cooperative schedule) and the CUTLASS
2.x MoeFCGemm grouped kernel on Ampere (source key trtllm-moe-gemm-kernels); with only TP
given its Mapping splits every expert over the TP ranks (moe_tp_size = tp, moe_ep_size = 1).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.errors import BadInput


def _one_expert_model_s() -> float:
    from scalemodel.analytic.step.gemm import gemm_time
    from scalemodel.specs import get_gpu

    g = get_gpu("h100-sxm")
    return float(gemm_time(512.0, 1536.0, 2048.0, g, g.peak_flop_per_s("bf16"), 2.0))


@pytest.mark.parametrize("kernel,tflops", [("cutlass_sm90", 160.5), ("cutlass_sm80", 116.9),
                                           ("cublas", 129.5)])
def test_per_expert_cost_is_the_measured_time_less_the_shape_price(kernel, tflops):
    from scalemodel.analytic.step.gemm import grouped_overhead

    # 2 x 512 x 1536 x 2048 FLOPs per expert at the benchmark's rate for that kernel:
    # 20.07 us (CUTLASS SM90), 27.55 us (CUTLASS SM80), 24.87 us (cuBLAS) per expert GEMM
    per_expert = 2 * 512 * 1536 * 2048 / (tflops * 1e12)
    want = {"cutlass_sm90": 20.07e-6, "cutlass_sm80": 27.55e-6, "cublas": 24.87e-6}[kernel]
    assert np.isclose(per_expert, want, rtol=1e-3)
    assert np.isclose(grouped_overhead("hopper", kernel), per_expert - _one_expert_model_s())
    # the faster kernel leaves less beyond the shape model
    assert grouped_overhead("hopper", "cutlass_sm90") < grouped_overhead("hopper", "cublas")


def test_unknown_kernel_is_one_line_of_bad_input():
    from scalemodel.analytic.step.gemm import grouped_overhead

    with pytest.raises(BadInput) as e:
        grouped_overhead("hopper", "triton")
    assert "\n" not in str(e.value) and "cutlass_sm90" in str(e.value)


def test_trtllm_017_runs_the_cutlass_grouped_kernels():
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.specs import get_gpu

    eng = get_serving_engine("trtllm-0.17")
    assert eng.moe_gemm_kernel(get_gpu("h200")) == "cutlass_sm90"
    assert eng.moe_gemm_kernel(get_gpu("a100-sxm-80gb")) == "cutlass_sm80"
    assert eng.sources["moe_gemm"] == "trtllm-moe-gemm-kernels"
    # engines whose profile names no grouped kernel pay no per-expert cost
    assert get_serving_engine("vllm-v1").moe_gemm_kernel(get_gpu("h200")) is None


def _tables(kernel):
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.specs import get_gpu, get_model

    m, g = get_model("mixtral-8x7b"), get_gpu("h200")
    it = build(m, g, ServeLayout(tp=8), precision("fp8"), "fp8", max_tokens=4096, max_seqs=8,
               attention_kind="flash3", overhead_s=0.0, cluster=make_cluster(g, 8),
               moe_gemm_kernel=kernel)
    return m, it.tables


def test_mixtral_tp8_moe_layer_pays_sixteen_expert_gemm_launches():
    from scalemodel.analytic.step.gemm import grouped_overhead

    m, with_k = _tables("cutlass_sm90")
    _, without = _tables(None)
    # Mixtral 8x7B at TP 8 (moe_tp = 8, ep = 1): every rank holds a 1/8 slice of all 8 experts;
    # at 4,096 tokens and top-2 of 8, every expert is reached (1 - (6/8)^4096 = 1), so a layer
    # runs 8 up and 8 down expert GEMMs, each charged the kernel's per-expert cost
    t0 = grouped_overhead("hopper", "cutlass_sm90")
    assert m.n_experts == 8 and m.top_k == 2
    assert np.isclose(with_k.moe[4096] - without.moe[4096], 2 * 8 * t0, rtol=1e-9)
    # one token reaches 2 of 8 experts: 2 up and 2 down GEMMs of 1 row each, charged 1/512 of
    # the cost (in proportion to the rows below the measured 512 rows per expert, SGLang PR 5680)
    assert np.isclose(with_k.moe[1] - without.moe[1], 2 * 8 * (2 / 8) * t0 / 512, rtol=1e-9)
    # an empty batch launches nothing; dense layers do not change
    assert with_k.moe[0] == without.moe[0]
    assert np.array_equal(with_k.dense, without.dense)


# SGLang PR 5680 (source key sglang-pr-5680-cutlass-moe-h200): the CUTLASS SM90 grouped FP8 MoE
# (per-tensor scales) on an H200 at Qwen2-57B-A14B's TP 8 shape, 64 experts, top 8, w1 per expert
# 896 x 2560 and w2 2560 x 448 in FP8, CUDA graphs, each figure the time of 25 calls (us; vLLM's
# benchmark_cutlass_moe.py num_runs = 25, which SGLang's copy is taken to keep)
_SGL_5680_CUTLASS_GRAPHS_US = {8: 3638.5, 16: 3824.5, 64: 4235.3, 256: 5420.5}


def test_sglang_5680_h200_no_fixed_cost_per_expert_at_a_few_rows():
    per_call = {m: t / 25 * 1e-6 for m, t in _SGL_5680_CUTLASS_GRAPHS_US.items()}
    E, k = 64, 8
    distinct = {m: E * (1 - (1 - k / E) ** m) for m in per_call}  # uniform random top-8
    assert np.isclose(distinct[8], 42.01, atol=0.01) and np.isclose(distinct[16], 56.44, atol=0.01)
    # 8 -> 16 tokens: 14.43 more experts reached, at 1 to 2 rows each
    d_e = distinct[16] - distinct[8]
    per_added_expert = (per_call[16] - per_call[8]) / d_e
    assert np.isclose(per_added_expert, 0.514e-6, rtol=0.01)
    # one expert's FP8 weights, 896 x 2560 + 2560 x 448 bytes, read at H200's 4.8 TB/s datasheet
    weights_s = (896 * 2560 + 2560 * 448) / 4.8e12
    assert np.isclose(weights_s, 0.717e-6, rtol=0.01)
    # an added expert costs no more than reading its weights: no fixed cost per expert GEMM here,
    # where a 7.1 us charge on each of its 2 GEMMs would have added 205 us a call
    assert per_added_expert < weights_s
    assert np.isclose(d_e * 2 * 7.11e-6, 205e-6, rtol=0.01)
    # all 64 experts reached from 64 tokens on; 8 -> 32 rows per expert adds 47.4 us a call,
    # 0.0154 us per row per expert GEMM, against 7.11 us / 512 rows = 0.0139 us at 512 rows
    assert distinct[64] > 63.9
    per_row = (per_call[256] - per_call[64]) / (E * (32 - 8) * 2)
    assert np.isclose(per_row, 0.0154e-6, rtol=0.01)
    assert 0.8 < per_row / (7.11e-6 / 512) < 1.2


def test_per_expert_cost_in_proportion_to_rows_up_to_the_measured_512():
    from scalemodel.analytic.step.gemm import grouped_overhead, grouped_overhead_at

    t0 = grouped_overhead("hopper", "cutlass_sm90")
    got = grouped_overhead_at("hopper", "cutlass_sm90", np.array([0.0, 5.0, 256.0, 512.0, 4096.0]))
    assert np.allclose(got, [0.0, t0 * 5 / 512, t0 / 2, t0, t0], rtol=1e-12)
    # an architecture that borrows the Hopper cost has no small-row measurement of its own: the
    # full cost at any rows, as before
    assert np.isclose(grouped_overhead_at("ampere", "cutlass_sm80", 128.0),
                      grouped_overhead("ampere", "cutlass_sm80"))
