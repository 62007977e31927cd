"""Each GPU's burst GEMM ceiling (gpus.toml gemm_burst_efficiency) against its source.

Source: Stas Bekman, ml-engineering, compute/accelerator/README.md at commit 744d01e (2026-08-22),
"Maximum Achievable Matmul FLOPS comparison table", BF16 and FP8 (float8_e4m3fn) rows: mamf-finder,
a mean of 100 iterations after 50 warm-up per shape, the best of a search over shapes, on one
accelerator (short runs: a burst rate). Transcribed below as (MAMF TFLOP/s, best shape M x N x K).
Peaks are the datasheets' dense bf16 figures (gpus.toml flop_per_s.bf16): A100 SXM 624 sparse / 2;
H100 SXM 1,979 sparse / 2 = 989.4; HGX B200 4.5 PF sparse / 2; GB200 NVL72 360 PF sparse / 72 / 2;
HGX B300 36 PF sparse / 8 / 2; MI300X 1,307.4 dense (the table divides by 1,300: 51.4%).
Derivation: gemm_burst_efficiency = MAMF / dense bf16 peak, read as the shape-free ceiling (the
table's best shape taken as one the library tiles without loss: a max over shapes).
"""

import numpy as np
import pytest

from scalemodel.analytic.step.gemm import anchor_ceiling, gemm_ceiling, gemm_efficiency
from scalemodel.specs import get_gpu

# gpu id: (table row, MAMF bf16 TFLOP/s, best shape, datasheet dense bf16 TFLOP/s)
BF16_ROWS = {
    "a100-sxm-80gb": ("NVIDIA A100 SXM", 271.2, (1024, 10240, 5120), 312.0),
    "h100-sxm": ("NVIDIA H100 SXM", 794.5, (2048, 2048, 13312), 989.4),
    "gh200": ("NVIDIA GH200 SXM", 828.6, (1024, 15360, 4096), 989.4),
    "b200": ("NVIDIA B200 SXM", 1745.0, (1792, 16128, 3072), 2250.0),
    "gb200": ("NVIDIA GB200 SXM", 1822.0, (4096, 9728, 2048), 2500.0),
    "b300": ("NVIDIA B300 SXM", 1769.0, (12288, 18432, 1024), 2250.0),
    "mi300x": ("AMD MI300X", 668.4, (10240, 15360, 8192), 1307.4),
}
# gpu id: (MAMF fp8 TFLOP/s, datasheet dense fp8 TFLOP/s), the same table's FP8 rows
FP8_ROWS = {"h100-sxm": (1402.6, 1978.9), "b200": (3432.5, 4500.0),
            "gb200": (3615.6, 5000.0), "b300": (3353.3, 4500.0)}


def _full_waves(g, k=8192.0):
    """A shape that fills whole waves of 128 x 128 tiles at a 64-multiple K: no shape loss."""
    return np.float64(g.sm_count * 128), np.float64(128 * 8), np.float64(k)


def test_each_listed_gpu_takes_its_own_mamf_row():
    for gid, (_row, mamf, _shape, peak) in BF16_ROWS.items():
        g = get_gpu(gid)
        assert g.peak_flop_per_s("bf16") / 1e12 == pytest.approx(peak)
        assert g.gemm_burst_efficiency == pytest.approx(mamf / peak, abs=5e-4), gid
        assert gemm_ceiling(g) == g.gemm_burst_efficiency
        assert "744d01e" in g.source_of("gemm_burst_efficiency")
    # MI300X: 668.4 / 1307.4 = 0.511, against 0.803 on H100 SXM: 0.64 of it
    assert get_gpu("mi300x").gemm_burst_efficiency == pytest.approx(0.511, abs=5e-4)


def test_parts_without_a_row_inherit_a_sibling_or_keep_the_anchor():
    h100 = get_gpu("h100-sxm").gemm_burst_efficiency
    # the H100 row's note says 'H200 is the same'; H800, H100 PCIe (same GH100 die) and the
    # 500 W Grand Teton H100 (extends h100-sxm) take it as an assumption
    for gid in ("h200", "h800", "h100-pcie", "h100-sxm-hbm2e-500w"):
        g = get_gpu(gid)
        assert g.gemm_burst_efficiency == h100, gid
        assert "744d01e" in g.source_of("gemm_burst_efficiency")
    # GB300 extends b300 (the same Blackwell Ultra die) and has no row
    assert get_gpu("gb300").gemm_burst_efficiency == get_gpu("b300").gemm_burst_efficiency
    # L40S has no row: planner.toml [gemm]'s anchor, 0.79 at 8192^3 on an H200, over that
    # shape's wave factor on 132 SMs (64 x 64 = 4096 tiles in 32 waves: 4096 / 4224)
    l40s = get_gpu("l40s")
    assert l40s.gemm_burst_efficiency == 0.0
    assert gemm_ceiling(l40s) == anchor_ceiling() == pytest.approx(0.79 * 4224 / 4096)


def test_h200_anchor_is_consistent_with_the_mamf_row():
    # The workplace anchor: 8192^3 bf16 torch.matmul on one H200 ran at 769-798 TFLOP/s. At the
    # MAMF ceiling (0.803) the model prices that shape at 0.803 x 4096 / 4224 (wave factor on
    # 132 SMs; K = 8192 is where the per-tile cost is normalised) = 0.7787 of 989.4 = 770.4
    # TFLOP/s in a burst: inside the measured range, at its low end (the anchor's midpoint 0.79)
    g = get_gpu("h200")
    n = np.float64(8192)
    burst = float(gemm_efficiency(n, n, n, g)) / g.sustained_fraction
    assert burst == pytest.approx(794.5 / 989.4 * 4096 / 4224, rel=1e-3)
    assert 769.0 < burst * 989.4 < 798.0


def test_the_best_shape_is_not_priced_above_its_measured_maximum():
    # The tile model (128 x 128 x 64 tiles in waves, Hopper's per-tile cost) at each row's own
    # best shape keeps 0.87-0.99 of the ceiling: never above the measured maximum. The largest
    # gaps are the Blackwell rows with short K (B300 K = 1024: 0.876; GB200 K = 2048), where the
    # borrowed Hopper per-tile cost (kernels.toml [gemm.blackwell] borrows hopper) is charged.
    for gid, (_row, mamf, (m, n, k), peak) in BF16_ROWS.items():
        g = get_gpu(gid)
        burst = float(gemm_efficiency(np.float64(m), np.float64(n), np.float64(k), g))
        burst /= g.sustained_fraction
        assert 0.87 < burst / (mamf / peak) <= 1.0, gid


def test_fp8_ceiling_is_the_same_tables_fp8_row_not_counted_twice():
    # fp8_gemm_ratio is (fp8 MAMF / fp8 peak) / (bf16 MAMF / bf16 peak) from the same table and
    # torch per part, so the bf16 burst ceiling times it gives back the fp8 row: e.g. H100
    # 0.803 x 0.882 = 0.7082 against 1402.6 / 1978.9 = 0.7088. A full-wave, 8192-deep GEMM
    # carries no shape loss; the sustained share is taken off to compare burst with burst.
    for gid, (mamf8, peak8) in FP8_ROWS.items():
        g = get_gpu(gid)
        e8 = float(gemm_efficiency(*_full_waves(g), g, "fp8")) / g.sustained_fraction
        assert e8 == pytest.approx(mamf8 / peak8, abs=1.5e-3), gid
