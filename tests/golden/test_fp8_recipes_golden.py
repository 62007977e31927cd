"""fp8 scaling recipes: the block-scaled GEMM rates and the cast bytes, derived by hand from the
Transformer Engine GEMM profiling guide.

Source: NVIDIA TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst at commit
1609c890e (PR #2863, 2026-06-01), with benchmarks/gemm/benchmark_gemm.py at the same commit
(source key te-gemm-profiling-1609c890e). Each benchmark call is a te.Linear(K, N) forward on an
(M x K) input; the 12 shapes are the Fprop / Dgrad / Wgrad GEMMs of one layer of the guide's 5B
config (hidden 4096, intermediate 16384, M = 31 x 512 = 15,872). Per-layer totals (ms):

  H200 NVL, autocast (inputs quantized every call), "Worked Example: 5B Model on H200":
      BF16 32.014   FP8 Current 20.285   FP8 Delayed 18.978   FP8 Block 22.882
  H200 NVL, pre-quantized (GEMM only; Block not run, Hopper's cuBLAS has no 2D-by-2D block GEMM):
      BF16 31.968   FP8 Current 16.785   (FP8 Delayed 19.099: still autocast, per the guide)
  B300 SXM6 AC, pre-quantized, "Autocast vs Pre-quantized":
      BF16 13.102   FP8 Current 6.812    FP8 Delayed 8.123 (autocast)   MXFP8 7.161

Derivation (each step is one assertion below):
1. Delayed and current scaling run the same per-tensor-scaled kernel, so the per-tensor GEMM
   alone is FP8 Current pre-quantized, 16.785 ms. A recipe's cast time is its autocast total
   less that: delayed 18.978 - 16.785 = 2.193 ms, current 20.285 - 16.785 = 3.500 ms.
2. Measured current / delayed cast ratio 3.500 / 2.193 = 1.596. The model's byte counts
   (planner.toml [nongemm]): delayed read 2 + write 1 + 1 (copy and transpose) = 4 B per element,
   current adds the amax read pass: 6 B, ratio 1.5, 6% under the measurement.
3. Elements quantized per layer: input M x K plus weight K x N of each of the 12 calls,
   1,495.3 M + 987.8 M = 2,483.0 M. At the H200's 4.8 TB/s (H200 datasheet), 2.193 ms moves
   4.24 B per element at full bandwidth: 4 B at 94% of HBM, so the 4-byte count holds.
4. Block scaling casts at delayed scaling's rate plus its scales: 4.0625 / 4 x 2.193 = 2.227 ms;
   the block GEMM alone is 22.882 - 2.227 = 20.655 ms, so it runs at 16.785 / 20.655 = 0.8126 of
   the per-tensor fp8 GEMM's rate on Hopper. (Weighting the 128 x 128 weight blocks at 4 B
   instead, (1,495.3 x 4.0625 + 987.8 x 4) / 2,483.0 = 4.0376 B, gives 0.8121: the same to 0.1%.)
5. MXFP8 on Blackwell, both pre-quantized: 6.812 / 7.161 = 0.9513 of the per-tensor rate.
"""

import pytest

from scalemodel.analytic.step.config import cast_bytes
from scalemodel.analytic.step.gemm import fp8_scaling_rate
from scalemodel.errors import BadInput
from scalemodel.specs.kernels import kernels

# the guide's per-layer totals (ms), transcribed from the tables quoted in the docstring
H200_AUTOCAST = {"bf16": 32.014, "current": 20.285, "delayed": 18.978, "blockwise": 22.882}
H200_PREQUANT = {"bf16": 31.968, "current": 16.785}
B300_PREQUANT = {"bf16": 13.102, "current": 6.812, "mxfp8": 7.161}
H200_HBM_BYTES_PER_S = 4.8e12  # H200 datasheet (H200 NVL and SXM alike)


def _elements_per_layer() -> tuple[int, int]:
    """(input, weight) elements quantized per layer: benchmark_gemm.py compute_gemm_shapes."""
    M, H, F = 31 * 512, 4096, 16384
    fprop = [(M, H, 3 * H), (M, H, H), (M, H, F), (M, F, H)]
    dgrad = [(M, 3 * H, H), (M, H, H), (M, F, H), (M, H, F)]
    wgrad = [(H, M, 3 * H), (H, M, H), (H, M, F), (F, M, H)]
    calls = fprop + dgrad + wgrad
    return sum(m * k for m, k, _ in calls), sum(k * n for _, k, n in calls)


def test_kernels_toml_holds_the_guides_figures():
    hop, bw = kernels()["fp8_gemm"]["hopper"], kernels()["fp8_gemm"]["blackwell"]
    assert hop["per_tensor_ms"] == H200_PREQUANT["current"]
    assert hop["delayed_autocast_ms"] == H200_AUTOCAST["delayed"]
    assert hop["blockwise_autocast_ms"] == H200_AUTOCAST["blockwise"]
    assert bw["per_tensor_ms"] == B300_PREQUANT["current"]
    assert bw["mxfp8_ms"] == B300_PREQUANT["mxfp8"]
    assert hop["source"] == bw["source"] == "te-gemm-profiling-1609c890e"


def test_cast_ratio_current_over_delayed():
    # step 1-2: measured 1.596, the model's 6 / 4 = 1.5
    cast_delayed = H200_AUTOCAST["delayed"] - H200_PREQUANT["current"]
    cast_current = H200_AUTOCAST["current"] - H200_PREQUANT["current"]
    assert cast_delayed == pytest.approx(2.193, abs=1e-9)
    assert cast_current == pytest.approx(3.500, abs=1e-9)
    measured = cast_current / cast_delayed
    assert measured == pytest.approx(1.596, abs=5e-4)
    model = cast_bytes("current")[0] / cast_bytes("delayed")[0]
    assert model == 1.5
    assert abs(model / measured - 1) < 0.065  # the model is 6% under the measurement


def test_delayed_cast_bytes_fit_the_h200_bandwidth():
    # step 3: 2,483 M elements in 2.193 ms is 4 B per element at 94% of 4.8 TB/s
    x, w = _elements_per_layer()
    assert x == 1_495_269_376 and w == 987_758_592
    t = (H200_AUTOCAST["delayed"] - H200_PREQUANT["current"]) * 1e-3
    at_full_bw = t * H200_HBM_BYTES_PER_S / (x + w)
    assert at_full_bw == pytest.approx(4.24, abs=0.005)
    share = cast_bytes("delayed")[0] * (x + w) / (t * H200_HBM_BYTES_PER_S)
    assert 0.9 < share < 1.0


def test_blockwise_rate_on_hopper():
    # step 4: 16.785 / (22.882 - 2.193 x 4.0625 / 4) = 0.8126
    cast = (H200_AUTOCAST["delayed"] - H200_PREQUANT["current"]) * 4.0625 / 4
    gemm_alone = H200_AUTOCAST["blockwise"] - cast
    assert gemm_alone == pytest.approx(20.655, abs=5e-4)
    by_hand = H200_PREQUANT["current"] / gemm_alone
    assert by_hand == pytest.approx(0.8126, abs=5e-5)
    assert round(by_hand, 2) == 0.81
    assert cast_bytes("blockwise")[0] == 4.0625
    assert fp8_scaling_rate("hopper", "blockwise") == pytest.approx(by_hand, rel=1e-9)
    # the weights' 128 x 128 blocks at 4 B instead: the rate moves by less than 0.1%
    x, w = _elements_per_layer()
    weighted = (x * 4.0625 + w * 4.0) / (x + w)
    alt = H200_PREQUANT["current"] / (H200_AUTOCAST["blockwise"]
                                      - (H200_AUTOCAST["delayed"] - H200_PREQUANT["current"])
                                      * weighted / 4)
    assert abs(alt / by_hand - 1) < 1e-3


def test_mxfp8_rate_on_blackwell():
    # step 5: 6.812 / 7.161 = 0.9513
    by_hand = B300_PREQUANT["current"] / B300_PREQUANT["mxfp8"]
    assert by_hand == pytest.approx(0.9513, abs=5e-5)
    assert round(by_hand, 2) == 0.95
    assert fp8_scaling_rate("blackwell", "mxfp8") == pytest.approx(by_hand, rel=1e-9)


def test_per_tensor_recipes_take_the_per_tensor_kernel():
    for arch in ("hopper", "blackwell", "ampere"):
        assert fp8_scaling_rate(arch, "delayed") == fp8_scaling_rate(arch, "current") == 1.0


@pytest.mark.parametrize("arch,scaling", [("hopper", "mxfp8"), ("blackwell", "blockwise"),
                                          ("ampere", "blockwise")])
def test_unmeasured_recipe_refused(arch, scaling):
    # MXFP8 needs Blackwell's tensor cores; the block GEMM is measured on Hopper only
    with pytest.raises(BadInput, match="no measured"):
        fp8_scaling_rate(arch, scaling)
