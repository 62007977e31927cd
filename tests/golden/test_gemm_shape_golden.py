"""The GEMM model's per-tile fixed cost (kernels.toml [gemm.hopper] k_overhead) against measured
H100 bf16 matmul rates by shape.

Source: OpenXLA's measured sm_90 table, xla/service/gpu/model/matmul_interpolator_data.h
(kDefaultMatmulPTable, tensorflow/tensorflow third_party/xla at commit 372d578b), the
bf16xbf16->bf16 FLOP/s of batch x M x N x K products; transcribed below in TFLOP/s. Those are
short profiling runs, so they are compared with the model's burst rate (its sustained fraction
taken off), the basis of the 8192^3 anchor.
"""

import numpy as np
import pytest

from scalemodel.analytic.step.gemm import _shape_factor, gemm_ceiling, gemm_time, tiles
from scalemodel.specs import get_gpu
from scalemodel.specs.kernels import gemm_entry

# (batch, M, N, K, measured TFLOP/s): the launches with at least 512 output tiles of 128 x 128
# (about 4 waves on 132 SMs) and K >= 1024, where launch latency is a small share
XLA_SM90 = [
    (1, 4096, 4096, 4096, 783.33), (2, 4096, 4096, 4096, 807.67), (4, 4096, 4096, 4096, 793.13),
    (1, 4096, 4096, 2048, 738.74), (2, 4096, 4096, 2048, 763.01), (4, 4096, 4096, 2048, 764.58),
    (1, 4096, 2048, 4096, 758.43), (2, 4096, 2048, 4096, 783.19), (4, 4096, 2048, 4096, 808.70),
    (2, 4096, 4096, 1024, 692.97), (2, 4096, 2048, 1024, 680.88), (4, 2048, 4096, 1024, 688.63),
    (2, 2048, 2048, 2048, 717.74), (4, 2048, 2048, 2048, 725.75), (2, 2048, 2048, 4096, 756.70),
    (4, 2048, 4096, 4096, 801.94), (2, 2048, 4096, 2048, 729.08), (4, 4096, 2048, 2048, 759.30),
    (4, 4096, 1024, 2048, 720.52),
]


def _burst(g, b, m, n, k):
    t = float(gemm_time(np.float64(m), np.float64(n), np.float64(k), g,
                        g.peak_flop_per_s("bf16"), 2.0, np.float64(b)))
    return b * 2.0 * m * n * k / t / g.sustained_fraction / 1e12


def test_k_overhead_derived_from_the_xla_k_sweep():
    # 4 x 4096 x 4096 in one launch (1024 x 4 tiles = 31 waves, as the 8192^3 anchor): with a
    # tile's time proportional to K + k0, e(4096) / e(2048) = 2 (2048 + k0) / (4096 + k0)
    r = 793.13 / 764.58
    k0 = 4096 * (r - 1) / (2 - r)
    assert k0 == pytest.approx(159, abs=1)
    assert gemm_entry("hopper").data["k_overhead"] == pytest.approx(k0, rel=0.02)
    # the same k0 then gives the shallow rows of that sweep: 619.86 TF at K 512, 503.87 at 256
    for k, tf in ((512, 619.86), (256, 503.87)):
        pred = 793.13 * (k / (k + k0)) / (4096 / (4096 + k0))
        assert pred == pytest.approx(tf, rel=0.025)


def test_h100_gemm_model_tracks_the_xla_table():
    g = get_gpu("h100-sxm")
    ratios = [_burst(g, *row[:4]) / row[4] for row in XLA_SM90]
    # The model's H100 ceiling is the MAMF table's H100 SXM row (794.5 of 989.4 TF, 0.803,
    # gpus.toml gemm_burst_efficiency); XLA's table, another burst benchmark of the same part,
    # tops that "maximum" (808.7 TF at 4 x 4096 x 2048 x 4096, 0.817): the two sources disagree
    # by 1.8%, and the model sits 2.4% under XLA's rows on average (it met them within 1% at
    # the earlier 8192^3 anchor ceiling, 0.815)
    assert all(0.93 < x < 1.03 for x in ratios), ratios
    assert -0.03 < np.mean(ratios) - 1.0 < -0.015
    # without the per-tile cost (tile padding and waves alone) the K = 1024 rows come out
    # 11-13% fast at the MAMF ceiling: the shape effect the term adds
    ceil = gemm_ceiling(g)
    peak = g.peak_flop_per_s("bf16") / 1e12
    for b, m, n, k, tf in XLA_SM90:
        if k == 1024:
            old = ceil * float(_shape_factor(m, n, k, g.sm_count, b, tiles(g.arch))) * peak
            assert old / tf > 1.10


def test_k_overhead_is_one_at_the_anchor_and_absent_on_ampere():
    # the ceiling is measured at K = 8192: the term is normalised to 1 there, and an
    # architecture without a measured k_overhead keeps tile padding and waves alone
    h = get_gpu("h100-sxm")
    sf = _shape_factor(np.float64(132 * 128), np.float64(128 * 8), np.float64(8192), h.sm_count,
                       k0=160.0)
    assert float(sf) == pytest.approx(1.0)
    assert "k_overhead" not in gemm_entry("ampere").data
