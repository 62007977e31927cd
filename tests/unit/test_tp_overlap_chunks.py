"""TP overlap at the GEMM shapes Transformer Engine's userbuffers launches (analytic/step/comm.py
tp_chunks). Source: Transformer Engine d0067d0d, common/comm_gemm_overlap/comm_gemm_overlap.cpp:
split_overlap_ag runs one GEMM per T / tp token rows (tp launches), split_overlap_rs one per
quarter of the output columns (num_splits 4, module/base.py defaults). The expected ratios are
derived by hand below from the shape model's first principles (kernels.toml [gemm.hopper]: 128 x
128 output tiles, 64-deep K steps; H100 SXM: 132 SMs): a compute-bound GEMM's time is its FLOPs
over (ceiling x wave fill x padding), so splitting it into chunks changes only the wave fill."""

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.step.comm import tp_chunks
from scalemodel.analytic.step.gemm import gemm_time
from scalemodel.specs import get_gpu

T, H, FFN = 4096.0, 8192.0, 28672.0  # Llama 3 70B, one 4096-token micro-batch
QKV_N = 8192.0 + 2 * 1024.0  # 64 query heads + 2 x 8 kv heads of 128


def _cand(tp: float, kv_lora_rank: int = 0, fp8_rate: float = 1.0) -> SimpleNamespace:
    gpu = get_gpu("h100-sxm")
    return SimpleNamespace(
        ms=SimpleNamespace(attn_in_n=QKV_N, attn_out_k=H, ffn=FFN, up_k=2), T=T, h=H,
        tp=np.float64(tp), peak=gpu.peak_flop_per_s("bf16"), e_mm=2.0,
        job=SimpleNamespace(precision="bf16"), gpu=gpu,
        m=SimpleNamespace(kv_lora_rank=kv_lora_rank), fp8_rate=fp8_rate,
        fp8_rate_at=lambda K: fp8_rate)


def _unsplit(c: SimpleNamespace) -> SimpleNamespace:
    """The layer's GEMMs at their full shapes, as layers.py hands them to the overlap."""
    def t(M, N, K):
        return gemm_time(M, N, K, c.gpu, c.peak, 2.0, rate=c.fp8_rate)
    tp = float(c.tp)
    shapes = [(T, QKV_N / tp, H), (T, H, H / tp), (T, 2 * FFN / tp, H), (T, H, FFN / tp)]
    fwd = tuple(t(*s) for s in shapes)
    bwd = tuple(t(M, K, N) + t(K, N, M) for M, N, K in shapes)
    return SimpleNamespace(tp_gemm_f=fwd, tp_gemm_b=bwd)


def test_qkv_ring_chunks_at_tp8_fill_a_third_of_the_sms():
    # TP8 QKV: N = 10240 / 8 = 1280. Unsplit M 4096: 32 x 10 = 320 tiles in 3 waves of 132,
    # fill 320 / 396. Eight launches of M 512: 4 x 10 = 40 tiles, one wave, fill 40 / 132.
    # Same FLOPs, so the chunks take (320 / 396) / (40 / 132) = 8 / 3 of the unsplit time.
    c = _cand(8)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=False)
    assert float(ch.fwd[0] / lc.tp_gemm_f[0]) == pytest.approx(8 / 3, rel=1e-9)


def test_chunks_take_the_fp8_recipes_rate_like_the_unsplit_gemms():
    # a block-scaled recipe slows every fp8 GEMM by the same rate (0.8126 on Hopper, kernels.toml
    # [fp8_gemm.hopper]): compute-bound, chunks and unsplit GEMM both divide by it, so the TP8
    # QKV ratio stays 8 / 3 and no chunked launch comes out faster than its unsplit GEMM
    c = _cand(8, fp8_rate=0.8126)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=False)
    assert float(ch.fwd[0] / lc.tp_gemm_f[0]) == pytest.approx(8 / 3, rel=1e-9)
    assert float(ch.extra_f) > 0


def test_qkv_ring_chunks_at_tp4():
    # TP4 QKV: N 2560. Unsplit: 32 x 20 = 640 tiles, 5 waves (660), fill 640 / 660. Four
    # launches of M 1024: 8 x 20 = 160 tiles, 2 waves (264), fill 160 / 264. Ratio 1.6.
    c = _cand(4)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=False)
    assert float(ch.fwd[0] / lc.tp_gemm_f[0]) == pytest.approx((640 / 660) / (160 / 264))


def test_pipeline_column_chunks_keep_full_waves():
    # TP8 output projection (K = 1024): unsplit N 8192, 32 x 64 = 2048 tiles in 16 waves (2112);
    # four launches of N 2048: 32 x 16 = 512 tiles in 4 waves (528). Both fill 0.9697: no cost.
    c = _cand(8)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=False)
    assert float(ch.fwd[1]) == pytest.approx(float(lc.tp_gemm_f[1]), rel=1e-9)


def test_dgrad_ring_chunks_and_the_extra_compute():
    # TP8 MLP-out dgrad: (T x h) @ (h x ffn / 8): M 4096, N 3584, K 8192. Unsplit 32 x 28 = 896
    # tiles, 7 waves (924), fill 896 / 924; eight launches of M 512: 4 x 28 = 112 tiles, one
    # wave, fill 112 / 132. The chunks take (896 / 924) / (112 / 132) = 8 / 7 of the time.
    ratio = 8 / 7
    c = _cand(8)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=False)
    full = gemm_time(T, FFN / 8, H, c.gpu, c.peak, 2.0)
    assert float(ch.dgrad[1] / full) == pytest.approx(ratio, rel=1e-9)
    # the backward extra is what the two ring-exchange dgrads add over their unsplit GEMMs
    full_proj = gemm_time(T, H / 8, H, c.gpu, c.peak, 2.0)
    assert float(ch.extra_b) == pytest.approx(
        float(ch.dgrad[0] - full_proj + ch.dgrad[1] - full), rel=1e-12)
    assert float(ch.extra_f) > 0.0


def test_no_chunks_without_tp_and_for_experts_and_mla():
    # TP1: nothing is gathered, nothing is split
    c = _cand(1)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=False)
    assert float(ch.extra_f) == 0.0 and float(ch.extra_b) == 0.0
    # an MoE layer's expert GEMMs are not TE linears: the MLP pair keeps its unsplit times
    c = _cand(8)
    lc = _unsplit(c)
    ch = tp_chunks(c, lc, moe=True)
    assert ch.fwd[2] is lc.tp_gemm_f[2] and ch.fwd[3] is lc.tp_gemm_f[3]
    assert float(ch.extra_mlp_f) == 0.0
    # an MLA block's projections are other linears: the QKV slot keeps its unsplit time
    ch = tp_chunks(_cand(8, kv_lora_rank=512), lc, moe=False)
    assert ch.fwd[0] is lc.tp_gemm_f[0]
