"""Which attention and expert-GEMM kernels the TensorRT-LLM profiles price on Blackwell (B200).

Sources: TensorRT-LLM cpp/tensorrt_llm/kernels/fmhaDispatcher.cpp at stored commit 06875c2e
(source key trtllm-fmha-dispatcher-sm100): the dispatcher runs the TRTLLM-GEN context FMHA
kernels when the SM version is 100. No B200 rate of that kernel is recorded, so the profiles
price it with the measured sm100 member of the same class, cuDNN 9.10.2's fused attention
(cudnn-frontend SDPA benchmark f937055, kernels.toml [attention.fa3.blackwell]): 1,358.6
TFLOP/s forward causal at 16k against flash-attn 2.7.3's 428.6 in the same table. MoE:
llm_args.py MoeConfig.backend defaults to CUTLASS (trtllm-moe-backend-default); CutlassMoeFCRunner
builds its TMA warp-specialized grouped GEMM for sm100 (isValidBlackwellMOESpecialisation); no B200
grouped-GEMM rate is recorded, so [grouped_gemm.blackwell] borrows the H100 entry (the CUTLASS
SM90 kernel at 160.5 TFLOP/s, 128 experts x 512 rows, N 1536, K 2048, grouped-gemm-sm90-bench).
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("profile", ["trtllm-1.0", "trtllm-0.20", "trtllm-1.0-bench",
                                     "trtllm-mlperf-v51"])
def test_blackwell_context_attention_is_the_measured_sm100_class(profile):
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.specs import get_gpu

    eng = get_serving_engine(profile)
    assert eng.attention_kind(get_gpu("b200")) == "flash3"
    assert eng.attention_kind(get_gpu("h200")) == "flash3"
    assert eng.sources["attention"] == "trtllm-fmha-dispatcher-sm100"


@pytest.mark.parametrize("profile", ["trtllm-0.17", "trtllm-mlperf-v41", "trtllm-0.5"])
def test_builds_not_read_for_the_sm100_dispatch_keep_the_fa2_class(profile):
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.specs import get_gpu

    eng = get_serving_engine(profile)
    assert eng.attention_kind(get_gpu("b200")) == "flash"


def test_fa3_blackwell_curve_is_the_cudnn_measurement():
    from scalemodel.specs.kernels import kernels

    e = kernels()["attention"]["fa3"]["blackwell"]
    c = e["curves"][0]
    i = c["lengths"].index(16384)
    # cudnn-frontend f937055, B200, pyt_cudnn backend, 16k: 1,358.6 fwd causal, 1,074.5 bwd
    assert c["fwd_causal_tflops"][i] == 1358.6 and c["bwd_causal_tflops"][i] == 1074.5
    assert e["clocks"] == "burst"


@pytest.mark.parametrize("profile", ["trtllm-0.20", "trtllm-1.0-bench"])
def test_blackwell_moe_gemm_takes_the_borrowed_cutlass_entry(profile):
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.analytic.step.gemm import grouped_overhead, grouped_overhead_at
    from scalemodel.specs import get_gpu

    eng = get_serving_engine(profile)
    k = eng.moe_gemm_kernel(get_gpu("b200"))
    assert k == "cutlass_sm90"
    # the borrowed H100 cost: 2 x 512 x 1536 x 2048 / 160.5e12 = 20.07 us per expert GEMM less
    # the shape model's price of one expert on H100 (same as Hopper's)
    assert np.isclose(2 * 512 * 1536 * 2048 / 160.5e12, 20.07e-6, rtol=1e-3)
    assert grouped_overhead("blackwell", k) == grouped_overhead("hopper", k) > 0
    # the borrowing entry states the Hopper kernel family's rows rule (SGLang PR 5680, CUTLASS
    # SM90 grouped FP8 MoE on H200: no fixed cost per expert at 1-2 rows, in proportion to rows
    # up to the 512-row anchor): rows / 512 of the cost below 512, the whole cost at and above
    t0 = grouped_overhead("hopper", k)
    got = grouped_overhead_at("blackwell", k, np.array([1.0, 64.0, 512.0, 4096.0]))
    assert np.allclose(got, t0 * np.array([1 / 512, 64 / 512, 1.0, 1.0]))


def test_ampere_borrowing_states_no_rows_rule_and_keeps_the_full_cost():
    from scalemodel.analytic.step.gemm import grouped_overhead, grouped_overhead_at

    t0 = grouped_overhead("ampere", "cutlass_sm80")
    assert np.allclose(grouped_overhead_at("ampere", "cutlass_sm80", np.array([1.0, 64.0])), t0)
