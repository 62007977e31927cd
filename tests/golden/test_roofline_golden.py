"""Roofline numbers against datasheet arithmetic."""

import pytest

from scalemodel.analytic import roofline as rl
from scalemodel.specs import get_gpu, get_model


def test_h100_ridge():
    # issue #2: ~295 FLOP/byte = 989 TFLOP/s bf16 dense / 3.35 TB/s (H100 SXM datasheet)
    r = dict((k, ridge) for k, _, ridge in rl.ridge_points(get_gpu("h100-sxm")))
    assert r["bf16"] == pytest.approx(989.4e12 / 3.35e12)
    assert round(r["bf16"]) == 295
    assert r["fp8"] == pytest.approx(2 * r["bf16"], rel=1e-3)


def test_a100_ridge():
    # A100 datasheet: 312 TFLOP/s bf16 dense, 2.039 TB/s (80 GB SXM)
    r = dict((k, ridge) for k, _, ridge in rl.ridge_points(get_gpu("a100-sxm-80gb")))
    assert r["bf16"] == pytest.approx(312e12 / 2.039e12)


def test_gemm_counts():
    p = rl.gemm(get_gpu("h100-sxm"), 4096, 4096, 4096)
    assert p.flops == 2 * 4096**3
    assert p.bytes == 2 * 3 * 4096**2
    assert p.bound == "compute"
    assert p.arithmetic_intensity == pytest.approx(4096 / 3)


def test_batch1_decode_reads_the_weights():
    """Batch-1 decode with no context: bytes = matmul weights x 2 B; time = bytes / bandwidth."""
    g, m = get_gpu("h100-sxm"), get_model("llama-2-7b")
    p = rl.decode_step(g, m, batch=1, context=1)
    mm_weights = 6_738_415_616 - 32000 * 4096  # all parameters but the input embedding table
    kv = 524_288  # one cached token
    assert p.bytes == mm_weights * 2 + kv
    assert p.bound == "memory"
    assert p.time_s == pytest.approx(p.bytes / 3.35e12)


def test_decode_crossover_near_ridge_without_kv():
    # 2 FLOP per weight per sequence against 2 bytes per weight: intensity ~ B, so the crossover
    # batch is the first B above the ridge (295.3) once the tiny KV term is included
    p = rl.decode_step(get_gpu("h100-sxm"), get_model("llama-3-70b"), batch=1, context=1)
    assert p.crossover_batch in (296, 297)


def test_long_context_gqa_decode_never_compute_bound_on_h100():
    # per token at large batch: FLOPs ~ 2 P_mm / B + 4 C H d L ; bytes ~ C x 327,680; for C = 4096
    # the limit is ~112 FLOP/B < 295, so no batch reaches the ridge
    p = rl.decode_step(get_gpu("h100-sxm"), get_model("llama-3-70b"), batch=1, context=4096)
    assert p.crossover_batch is None
    assert p.extra["intensity_limit_large_batch"] < p.ridge_flop_per_byte


def test_gqa_decode_attention_intensity():
    # one query token against C cached tokens: F = 4 C a d; Q ~ 2 C h_kv d e (K and V), so
    # I -> 4 a / (2 h_kv e) = 4 x 64 / (2 x 8 x 2) = 8 FLOP/B for Llama-3-70B in bf16
    p = rl.attention(get_gpu("h100-sxm"), batch=1, q_len=1, kv_len=8192, heads=64, kv_heads=8,
                     head_dim=128)
    assert p.flops == 4 * 8192 * 64 * 128
    assert p.arithmetic_intensity == pytest.approx(8, rel=0.01)


def test_unfused_prefill_moves_the_score_matrix():
    g = get_gpu("h100-sxm")
    kw = dict(batch=1, q_len=4096, kv_len=4096, heads=32, kv_heads=32, head_dim=128)
    fused, unfused = rl.attention(g, **kw), rl.attention(g, fused=False, **kw)
    # an unfused kernel materialises all 32 x 4096^2 scores (the causal mask is applied after),
    # writing and reading S and P: 4 passes x 2 bytes; a fused causal kernel skips half the blocks
    assert unfused.bytes - fused.bytes == 4 * 2 * 32 * 4096 * 4096
    assert fused.flops == 4 * 4096 * 4096 * 32 * 128 * 0.5
    assert unfused.flops == 4 * 4096 * 4096 * 32 * 128
