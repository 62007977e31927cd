"""The serving iteration model's limits, each derived here from the model's config and the GPU
datasheet, and trtllm-bench's batch tuning restated from its source."""

from __future__ import annotations

import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.iteration import ServeLayout, build, check_layout, precision
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model


def _it(model, gpu, prec, kv, tp=1, pp=1, ep=1):
    m, g = get_model(model), get_gpu(gpu)
    return build(m, g, ServeLayout(tp, pp, ep), precision(prec), kv, max_tokens=8192,
                 max_seqs=1024, attention_kind="flash", overhead_s=0.0,
                 cluster=make_cluster(g, tp * pp))


def test_decode_attention_reads_the_kv_at_hbm_speed():
    # Llama-3-8B: 32 layers x 8 KV heads x 128 dims x K and V x 2 bytes = 131,072 B per token;
    # H100 SXM 3.35 TB/s at the planner's 0.8 HBM efficiency (planner.toml [gemm])
    it = _it("llama-3-8b", "h100-sxm", "bf16", "bf16")
    assert it.dec_s_per_ctx_token == pytest.approx(32 * 2 * 8 * 128 * 2 / (3.35e12 * 0.8))
    assert it.dec_bound == "memory (KV read)"
    # TP 8 holds one KV head per rank: an eighth of the bytes
    it8 = _it("llama-3-8b", "h100-sxm", "bf16", "bf16", tp=8)
    assert it8.dec_s_per_ctx_token == pytest.approx(it.dec_s_per_ctx_token / 8)


def test_one_token_decode_reads_every_weight_once():
    # one decode token: every linear weight crosses HBM once; Llama-3-8B has 8.03e9 parameters
    # of which the 128,256 x 4096 input embedding is looked up, not read whole:
    # (8.030e9 - 0.525e9) x 2 B / (3.35e12 x 0.8) = 5.60 ms, plus small elementwise kernels
    it = _it("llama-3-8b", "h100-sxm", "bf16", "bf16")
    weights_s = (8_030_261_248 - 128_256 * 4096) * 2 / (3.35e12 * 0.8)
    assert it.dense_part(1, 1) == pytest.approx(weights_s, rel=0.03)
    # fp8 W8A8 reads one byte per weight; int4 weight-only 0.5 + 2/128 (serving.toml)
    it8 = _it("llama-3-8b", "h100-sxm", "fp8", "fp8")
    head_s = 128_256 * 4096 * 2 / (3.35e12 * 0.8)  # the output head stays 16-bit
    assert it8.dense_part(1, 1) == pytest.approx((weights_s - head_s) / 2 + head_s, rel=0.03)


def test_pipeline_stages_add_their_sends():
    it1 = _it("llama-3-70b", "h100-sxm", "fp8", "fp8", tp=2)
    it2 = _it("llama-3-70b", "h100-sxm", "fp8", "fp8", tp=2, pp=2)
    # pp = 2 runs 2 micro-batches of T / 2 through 2 stages: at T = 2 the same weights are read
    # twice (once per micro-batch) on half the layers each: about the one-stage time
    assert it2.dense_part(2, 2) > it1.dense_part(1, 1)
    assert it2.tables.p2p[1] > 0 and it1.tables.p2p[1] == 0


def test_moe_touches_only_routed_experts_at_small_batch():
    # Mixtral 8x7B, top-2 of 8: one token reads 2 of the 8 experts, so one decode token costs
    # far less than reading all 46.7e9 parameters
    it = _it("mixtral-8x7b", "h100-sxm", "bf16", "bf16")
    all_weights_s = 46.7e9 * 2 / (3.35e12 * 0.8)
    assert it.dense_part(1, 1) < 0.45 * all_weights_s


@pytest.mark.parametrize("lay, needle", [
    (ServeLayout(tp=3), "attention heads"),
    (ServeLayout(tp=2, ep=2), "dense"),
])
def test_bad_layouts(lay, needle):
    with pytest.raises(BadInput, match=needle):
        check_layout(get_model("llama-3-8b"), lay)


def test_trtllm_bench_tuning_restated():
    # tuning.py: per-token KV 2 x 32 layers x max(1, 8) heads x 128 x 1 B (fp8) = 65,536 B;
    # engine 8.03e9 params x 1 B; KV requests = (85.52e9 - 8.03e9) x 0.95 / (65,536 x 256)
    # = 4388 -> min(4096) -> 256 x ceil(4096 / 256) = 4096 sequences; tokens min(4096 x 2,
    # 32768) = 8192 -> 1024 x ceil(8192 / 1024) = 8192
    from scalemodel.analytic.serving.engine import trtllm_bench_limits

    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    assert trtllm_bench_limits(m, g, ServeLayout(), precision("fp8"), 1.0, 128, 128) == (4096,
                                                                                          8192)
    # 2048 / 128: 77.49e9 x 0.95 / (65,536 x 2176) = 516 requests -> 128 x ceil(516 / 128)
    # = 640; tokens 516 x (1 + 16) = 8773 -> 1024 x ceil(8773 / 1024) = 9216
    assert trtllm_bench_limits(m, g, ServeLayout(), precision("fp8"), 1.0, 2048, 128) == (640,
                                                                                           9216)
