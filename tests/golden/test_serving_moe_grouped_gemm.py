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
    # one token reaches 2 of 8 experts: 2 up and 2 down GEMMs
    assert np.isclose(with_k.moe[1] - without.moe[1], 2 * 8 * (2 / 8) * t0, rtol=1e-9)
    # an empty batch launches nothing; dense layers do not change
    assert with_k.moe[0] == without.moe[0]
    assert np.array_equal(with_k.dense, without.dense)
