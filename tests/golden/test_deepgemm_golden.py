"""DeepSeek's own fp8 block GEMMs (DeepGEMM) as the deepseek-hai-llm profile prices them.

Sources: deepseek-ai/DeepGEMM README at a6d97a1 (2025-02-25), 'Performance' (H800, NVCC 12.8):
normal GEMM M 4096, N 7168, K 16384 at 1358 TFLOPS, ... K 512 (N 32768) at 590 TFLOPS;
deepseek-ai/open-infra-index README at be36f16: DeepGEMM 'powering V3/R1 training and
inference'. The rate is the measured TFLOP/s over the planner's own per-tensor fp8 GEMM model at
the same shape on the H800 at its burst rate (derivation below)."""

import numpy as np
import pytest

from scalemodel.analytic.planner import gemm_ceiling
from scalemodel.analytic.step.gemm import block_gemm_rate, block_gemm_rates
from scalemodel.specs import get_gpu


def test_deepgemm_rate_at_k16384_by_hand():
    # M 4096 x N 7168 x K 16384 on the H800 (132 SMs, 128 x 128 x 64 tiles): 32 x 56 = 1792
    # output tiles in ceil(1792 / 132) = 14 waves, 1792 / (14 x 132) = 0.96970 of the SM slots
    # busy, no padding (every size a multiple of its tile). The per-tensor fp8 model's burst
    # rate: 1978.9 TF x eta_0 x 0.96970 x k_fp8 0.882 (gpus.toml fp8_gemm_ratio), eta_0 the H800's
    # burst ceiling (gpus.toml gemm_burst_efficiency: the H100 SXM's MAMF row, 794.5 of 989.4
    # TF = 0.803, the same die); compute-bound
    # (214 MB of 1-byte operands and output against 0.70 ms of MMA at 1.38 PF/s). The per-tile
    # fixed cost (kernels.toml [gemm.hopper] k_overhead 160, relative to the 8192-deep anchor):
    # 16384 / (16384 + 160) x (8192 + 160) / 8192.
    g = get_gpu("h800")
    assert g.sm_count == 132
    kf = 16384 / (16384 + 160) * (8192 + 160) / 8192
    assert gemm_ceiling(g) == pytest.approx(794.5 / 989.4, abs=5e-4)
    model_tf = g.peak_flop_per_s("fp8") / 1e12 * gemm_ceiling(g) * 1792 / (14 * 132) * 0.882 * kf
    by_hand = 1358 / model_tf
    ks, rs = block_gemm_rates("deepgemm", "hopper")
    assert ks == (512.0, 1536.0, 2048.0, 7168.0, 16384.0)
    assert rs[-1] == pytest.approx(by_hand, rel=1e-4)
    assert 0.95 < by_hand < 1.0


def test_deepgemm_rate_falls_with_k_and_interpolates_in_log_k():
    # measured: the short-K GEMMs (K 512: kv_b of MLA's shapes, 590 TFLOPS) reach far less of the
    # model's rate than K 7168 / 16384 (the fixed work per output tile: the promotion of the
    # fp32 accumulators and the epilogue, over fewer K steps); the per-tensor model already
    # carries the bf16/fp8 tile's own fixed cost (k_overhead), the rate the rest
    ks, rs = block_gemm_rates("deepgemm", "hopper")
    assert list(rs) == sorted(rs)
    assert rs[0] < 0.6 and rs[-2] > 0.9
    mid = float(block_gemm_rate("deepgemm", "hopper", np.sqrt(2048 * 7168)))
    assert mid == pytest.approx((rs[2] + rs[3]) / 2, rel=1e-9)
    assert float(block_gemm_rate("deepgemm", "hopper", 100.0)) == rs[0]  # held at the ends
