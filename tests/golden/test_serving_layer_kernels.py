"""The kernel-boundary term of a decode step (analytic/serving/iteration.py ``layer_launch_s``;
frameworks.toml ``layer_kernels`` of trtllm-1.0; planner.toml [host] ``gpu_kernel_min_s``).

Derivation (no model output is copied here):

* The per-kernel idle time: Hazy Research, 'Look Ma, No Bubbles!' (2025-05-27): on an H100
  each kernel launch costs about 1.3 us of GPU time in which no useful work is done, CUDA
  graphs included (PyTorch issue 161104: 1.1-1.3 us per call of a 1,024-element add replayed
  from one graph). Source ``hazy-no-bubbles-2025``; the same constant step/host.py reads.
* The kernel count: TensorRT-LLM tech blog 1 (blog1_...B200_GPUs.md at 01c4ece9), 'Everything
  in One Diagram', a MoE layer of a decoding iteration, with its 'Multi-streams' section. On
  the main stream outside the two fused one-shot all-reduces (modules 9 and 13):
  Fuse_A GEMM (1), the Q/K RMSNorm (2, one on the critical path), UQ_QR GEMM (3), UK bmm (4),
  genAttention (6), UV bmm (7), WO GEMM (8): 7; concat KV + RoPE (5) overlaps a GEMM on a
  second stream. Router GEMM and top-k (10): 2; the CUTLASS expert path (12): FC1, activation,
  FC2 (FC1 + activation fuse only under moe_backend=TRTLLM): 3; the shared expert (11) is on a
  second stream. An MoE layer: 7 + 2 + 3 = 12 kernels. A dense layer (GatedMLP.forward at
  stored commit 01503f55: gate_up_proj, swiglu, down_proj): 7 + 3 = 10.
* DeepSeek-V3 / R1: 61 decoder layers, the first 3 dense (first_k_dense_replace = 3), 58 MoE.
  Per decode step: 3 x 10 + 58 x 12 = 726 kernels x 1.3 us = 943.8 us.
"""

import numpy as np
import pytest

from conftest import sourced_field, user_profile_refusal
from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import ServeLayout, build, layer_launch_s, precision
from scalemodel.specs import get_gpu, get_model

BUBBLE_S = 1.3e-6  # hazy-no-bubbles-2025
MOE_LAYER_KERNELS = 7 + 2 + 3  # blog 1 modules 1-4, 6-8; 10 (two); 12 (three)
DENSE_LAYER_KERNELS = 7 + 3  # modules 1-4, 6-8; GatedMLP gate_up, swiglu, down
COUNTS = {"modeling": "deepseekv3", "attention": 7, "moe_ffn": 5, "dense_ffn": 3}


def test_trtllm_10_counts_the_blog_modules():
    eng = get_serving_engine("trtllm-1.0")
    assert eng.layer_kernels == COUNTS
    assert eng.sources["layer_kernels"] == "trtllm-blog1-moe-layer-modules"
    # the TensorRT-engine profiles were not counted, and say so
    assert get_serving_engine("trtllm-0.17").layer_kernels == {"modeling": "unread"}
    assert get_serving_engine("vllm-v1").layer_kernels == {}


def test_per_layer_seconds_by_hand():
    m = get_model("deepseek-v3")
    dense, moe = layer_launch_s(m, ServeLayout(8, 1, ep=4), COUNTS)
    assert dense == pytest.approx(DENSE_LAYER_KERNELS * BUBBLE_S, rel=1e-12)
    assert moe == pytest.approx(MOE_LAYER_KERNELS * BUBBLE_S, rel=1e-12)


def test_not_applied_where_not_counted():
    ds = get_model("deepseek-v3")
    # attention DP runs another exchange (no all-reduce): its kernels were not counted
    assert layer_launch_s(ds, ServeLayout(8, 1, ep=8, attention_dp=True), COUNTS) == (0.0, 0.0)
    # a model without MLA does not run the DeepSeek-V3 modeling file
    assert layer_launch_s(get_model("llama-3-8b"), ServeLayout(1), COUNTS) == (0.0, 0.0)
    assert layer_launch_s(ds, ServeLayout(8, 1, ep=4), {"modeling": "unread"}) == (0.0, 0.0)
    assert layer_launch_s(ds, ServeLayout(8, 1, ep=4), None) == (0.0, 0.0)


def test_decode_step_adds_726_kernel_boundaries():
    m, gpu = get_model("deepseek-v3"), get_gpu("b200")
    assert (m.n_layers - m.n_moe_layers, m.n_moe_layers) == (3, 58)
    lay = ServeLayout(8, 1, ep=4)
    kw = dict(max_tokens=16, max_seqs=1, attention_kind="flash3", overhead_s=0.0,
              cluster=make_cluster(gpu, 8))
    base = build(m, gpu, lay, precision("fp4"), "fp8", **kw)
    with_k = build(m, gpu, lay, precision("fp4"), "fp8", layer_kernels=COUNTS, **kw)
    added = with_k.dense_part(1, 1) - base.dense_part(1, 1)
    assert added == pytest.approx((3 * DENSE_LAYER_KERNELS + 58 * MOE_LAYER_KERNELS) * BUBBLE_S,
                                  rel=1e-9)
    assert added == pytest.approx(943.8e-6, rel=1e-9)
    # the same through the vectorised path
    v = (with_k.dense_part_v(np.array([1]), np.array([1]))
         - base.dense_part_v(np.array([1]), np.array([1])))
    assert float(v[0]) == pytest.approx(943.8e-6, rel=1e-9)


def test_mtp_draft_pass_pays_one_moe_layer_of_kernels():
    from scalemodel.analytic.serving.speculative import Speculation

    m, gpu = get_model("deepseek-v3"), get_gpu("b200")
    lay = ServeLayout(8, 1, ep=4)
    spec = Speculation(k=1, alpha=0.9, drafter="mtp")
    kw = dict(max_tokens=16, max_seqs=1, attention_kind="flash3", overhead_s=0.0,
              cluster=make_cluster(gpu, 8), spec=spec)
    base = build(m, gpu, lay, precision("fp4"), "fp8", **kw)
    with_k = build(m, gpu, lay, precision("fp4"), "fp8", layer_kernels=COUNTS, **kw)
    assert float(with_k.draft_pass[1] - base.draft_pass[1]) == pytest.approx(
        MOE_LAYER_KERNELS * BUBBLE_S, rel=1e-9)


def test_bad_layer_kernels_in_a_user_profile(tmp_path):
    msg = user_profile_refusal(tmp_path, sourced_field("layer_kernels",
                                                       '{ modeling = "llama", attention = 3 }'))
    assert "layer_kernels" in msg and "deepseekv3" in msg


def test_counts_must_be_whole(tmp_path):
    user_profile_refusal(tmp_path, sourced_field(
        "layer_kernels", '{ modeling = "deepseekv3", attention = 7.5, moe_ffn = 5, dense_ffn = 3 }'))
