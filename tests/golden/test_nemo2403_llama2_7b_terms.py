"""The NeMo 24.03 Llama 2 7B 16K row (TP2 DP8, 16 x H100, fp8) term by term (issue 16, session 15).

Two things are checked here, each from its source, not from the rows:

1. The tensor-parallel overlap the profile keeps (userbuffers on) is the one the release's own
   recipes set at TP > 1. Source ``nemo-launcher-24-03-01-recipes``: NVIDIA NeMo-Framework-Launcher
   tag 24.03.01 (commit 5c7e280a, 2024-04-19), launcher_scripts/conf/training/
   nemotron/nemotron_8b.yaml (hidden 4096, tensor_model_parallel_size 2, sequence_parallel true,
   ub_tp_comm_overlap true), gpt3/20b.yaml (TP2, both True), llama/llama2_70b.yaml (TP4, both
   true); llama/llama2_7b.yaml is TP1 with both off.

2. The fp8 GEMM rate the step model gives the four per-rank Linear shapes (M = 16,384 tokens,
   hidden 4096 over TP2), derived by hand from the GPU's measured constants (gpus.toml h100-sxm,
   their sources in the evidence table): burst ceiling 0.803 (ml-engineering MAMF, bf16
   794.5 / 989), sustained share 0.848 (MSMF / MAMF on the H200 die), fp8 / bf16 efficiency 0.882
   (MAMF fp8 1402.6 / 1979 over bf16 0.803; mamf-finder.py calls torch._scaled_mm without
   use_fast_accum, whose default is False, i.e. the split-accumulator path TE 1.4 takes for dgrad
   and wgrad, module/base.py lines 41-43 at v1.4), 128 x 128 output tiles in waves over 132 SMs,
   and the per-tile cost of 160 K elements (kernels.toml [gemm.hopper] k_overhead, XLA's sm_90
   table) relative to the 8192-deep anchor. docs/planner.md "The 16K row term by term" uses
   these figures.
"""

import math

import numpy as np
import pytest

from scalemodel.analytic.step.gemm import gemm_time
from scalemodel.specs import get_gpu
from scalemodel.specs.frameworks import get_framework

FP8_PEAK = 1979e12  # H100 SXM dense fp8 (datasheet)


def _hand_rate(M: int, N: int, K: int) -> float:
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    wave = tiles / (math.ceil(tiles / 132) * 132)
    kp = math.ceil(K / 64) * 64
    k_cost = (kp / (kp + 160)) * ((8192 + 160) / 8192)
    return 0.803 * 0.848 * 0.882 * wave * (K / kp) * k_cost * FP8_PEAK


@pytest.mark.parametrize("name,N,K", [("qkv", 6144, 4096), ("proj", 4096, 2048),
                                      ("fc1", 11008, 4096), ("fc2", 4096, 5504)])
def test_fp8_forward_gemm_rate_at_tp2_shapes(name, N, K):
    g = get_gpu("h100-sxm")
    M = 16384
    t = float(gemm_time(np.float64(M), np.float64(N), np.float64(K), g, FP8_PEAK, 1.0,
                        1.0, "fp8"))
    assert 2.0 * M * N * K / t == pytest.approx(_hand_rate(M, N, K), rel=1e-3)


def test_qkv_rate_by_hand():
    # 128 x 48 = 6,144 tiles in 47 waves of 132: 0.99033; K 4096: 4096/4256 x 8352/8192 = 0.98120
    assert _hand_rate(16384, 6144, 4096) / 1e12 == pytest.approx(1154.9, abs=0.5)


def test_nemo_2403_tp_overlap_read_from_the_release_recipes():
    fw = get_framework("nemo-24.03")
    assert fw.values["tp_overlap"] is True
    assert fw.sources["tp_overlap"] == "nemo-launcher-24-03-01-recipes"
