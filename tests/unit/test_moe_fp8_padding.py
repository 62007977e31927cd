"""fp8 quantisation padding around the grouped expert GEMMs (analytic/step/layers.py
fp8_padding_bytes; frameworks.toml moe_fp8_padding).

Source (``megatron-core-tegroupedmlp-fp8-padding``): Megatron-Core TEGroupedMLP.forward at the
commits Megatron-Bridge v0.2.1 / v0.3.0 / v0.4.2 / v0.5.0 pin (0d8e0714, b0cc2706, 2edffadb,
d0b3b775) pads the permuted hidden states with TE's Fp8Padding before fc1 and unpads fc2's
output with Fp8Unpadding when fp8 is on; TE v2.8-v2.12 fp8_padding.py returns the input when
every split is already a multiple of the alignment and otherwise copies the whole tensor with
fused_multi_row_padding (the backward copies back); Hybrid-EP's dispatch pads itself under fp8
(_HybridEPManager.dispatch pad_multiple), so there the two calls are no-ops. The expected bytes
are derived in each test from those code paths."""

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster, make_job, search
from scalemodel.analytic.step.layers import fp8_padding_bytes, permute_time
from scalemodel.specs import get_model
from scalemodel.specs.evidence import evidence_of
from scalemodel.specs.frameworks import get_framework, job_settings

_LAYOUT = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 8, "etp": 1, "zero": 1, "vpp": 1,
           "micro_batch": 1, "recompute": "none"}


def _cands(fid: str, gpu: str, precision: str = "fp8"):
    m = get_model("qwen3-30b-a3b")
    _, s = job_settings(fid, gpu, model=m.id)
    job = make_job(m, seq_len=4096, global_batch_seqs=512, precision=precision, **s)
    cl = make_cluster(gpu, 8)
    return SimpleNamespace(job=job, gpu=cl.gpu, m=m, fp8=precision == "fp8", T=4096.0,
                           sp_div=1.0, etp=1.0, h=2048.0, e_a=2.0, hbm=1e12), job, cl


def test_padding_bytes_from_the_code_path():
    # Qwen3-30B-A3B, one 4096-token micro-batch, TP1 (sp_div 1), etp 1, top_k 8: a rank
    # dispatches t = 4096 tokens, C = 8 t = 32,768 copies, its experts receive R = C etp =
    # 32,768 rows of h = 2048 16-bit values (4 KiB a row).
    # forward: Fp8Padding reads R h and writes R h (2 x 2 x 2048 x 32768 = 268,435,456 B),
    #          Fp8Unpadding of fc2's output the same: 536,870,912 B in all (2^29)
    # backward: the unpad's backward pads the output gradient, the pad's backward unpads the
    #          input gradient: 536,870,912 B again
    c, _, _ = _cands("nemo-25.11", "b200")  # 25.11 B200 recipe: the all-to-all dispatcher
    f, b = fp8_padding_bytes(c)
    assert float(f) == 2 ** 29 and float(b) == 2 ** 29
    # inside permute_time (16 local experts at EP8), over 1e12 B/s: the permutation's own
    # 838,860,800 B (tests/unit/test_issue16_pricing.py) plus the padding
    pf, pb = permute_time(c, 16.0)
    assert np.isclose(float(pf), (838_860_800 + 2 ** 29) / 1e12)
    assert np.isclose(float(pb), (838_860_800 + 134_217_728 + 2 ** 29) / 1e12)


def test_no_padding_where_the_code_does_not_pad():
    # bf16: TEGroupedMLP builds no Fp8Padding
    c, _, _ = _cands("nemo-25.11", "b200", "bf16")
    assert fp8_padding_bytes(c) == (0.0, 0.0)
    # Hybrid-EP (26.04 B200 recipe): the dispatch pads to the fp8 alignment, TE sees aligned
    # counts and returns the input unchanged
    c, _, _ = _cands("nemo-26.04", "b200")
    assert fp8_padding_bytes(c) == (0.0, 0.0)
    # DeepEP (26.02 H100 recipe) pads the routing map only under moe_router_padding_for_fp8
    c, _, _ = _cands("nemo-26.02", "h100-sxm")
    assert float(fp8_padding_bytes(c)[0]) == 2 ** 29
    # a framework whose MoE is not Megatron's TEGroupedMLP: no field, not priced
    c, _, _ = _cands("torchtitan", "h100-sxm")
    assert fp8_padding_bytes(c) == (0.0, 0.0)


def test_profile_field_and_its_evidence():
    f = get_framework("megatron-core")
    assert f.values["moe_fp8_padding"] == "grouped_mlp"
    assert get_framework("nemo-25.11").values["moe_fp8_padding"] == "grouped_mlp"  # inherited
    assert f.sources["moe_fp8_padding"] == "megatron-core-tegroupedmlp-fp8-padding"
    assert evidence_of(f.sources["moe_fp8_padding"]) == "framework source"


def test_the_term_reaches_the_step():
    # the 25.11 B200 row's layout: 48 MoE layers x 64 micro-batches, forward + backward
    # 2 x 2^29 B each at the planner's HBM rate (B200 7.7 TB/s x hbm_efficiency): the step grows
    # by 48 x 64 x 2^30 / hbm (no recompute, no overlap of memory-bound kernels)
    from scalemodel.analytic.step.config import constants

    m = get_model("qwen3-30b-a3b")
    _, s = job_settings("nemo-25.11", "b200", model=m.id)
    job = make_job(m, seq_len=4096, global_batch_seqs=512, precision="fp8", **s)
    cl = make_cluster("b200", 8)
    with_pad = float(search(job, cl, _LAYOUT, top=0).best.values.step_time_s)
    hbm = cl.gpu.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    expected = 48 * 64 * 2 ** 30 / hbm
    import scalemodel.analytic.step.layers as layers

    orig = layers.fp8_padding_bytes
    try:
        layers.fp8_padding_bytes = lambda c: (0.0, 0.0)
        without = float(search(job, cl, _LAYOUT, top=0).best.values.step_time_s)
    finally:
        layers.fp8_padding_bytes = orig
    assert with_pad - without == pytest.approx(expected, rel=0.02)


def test_gpu_side_of_the_bf16_profile_is_priced():
    # Where the small-expert misses are not (docs/planner.md "Small-expert MoE: which component
    # is mispriced", "The per-destination dispatch at its kernels' measured rate"). Megatron-
    # Bridge's matched Nsight profile (source megatron-bridge-skill-moe-comm-overlap:
    # skills/nemo-mbridge-perf-moe-comm-overlap/card.yaml at 067f987d): Qwen3-30B-A3B, 16 H100,
    # BF16, seq 4096, TP1 PP1 EP16 (ETP1, DP16), MBS 1, GBS 1024, Hybrid-EP, EP overlap off: the
    # union of GPU-active time on rank 0 is 22,820.667 ms of a 24,713.8 ms step.
    # The planner prices the dispatch and combine at Hybrid-EP's torch-API rate (README H100
    # table, 16 ranks, 16 SMs: 54.47 / 53.35 GB/s of counted bytes), which holds the GPU idle
    # inside each call (device sync, flag update: the kernel-only rate is 71.71 / 62.95 GB/s).
    # That idle, over 64 micro-batches x 48 layers x 2 calls of each kind (forward and
    # backward) of 4096 x 4096 x 2 (1 - C(64,8)/C(128,8)) counted bytes, is most of the step's
    # 1.89 s of GPU idle; the rest of what the planner prices on the GPU (GEMMs with the
    # grouped-GEMM launch cost, attention, memory-bound kernels, permutation, the all-to-alls
    # at the kernel rate, the metadata gather) is the GPU-active union to within 5%.
    from math import comb

    m = get_model("qwen3-30b-a3b")
    _, s = job_settings("nemo-26.06", "h100-sxm", model=m.id)
    job = make_job(m, seq_len=4096, global_batch_seqs=1024, precision="bf16", **s)
    cl = make_cluster("h100-sxm", 16)
    lay = {"tp": 1, "pp": 1, "dp": 16, "cp": 1, "ep": 16, "etp": 1, "zero": 1, "vpp": 1,
           "micro_batch": 1, "recompute": "none"}
    v = search(job, cl, lay, top=0).best.values
    counted = 4096 * 4096 * 2 * (1 - comb(64, 8) / comb(128, 8))
    calls = 64 * 48 * 2
    idle = calls * counted * ((1 / 54.47e9 - 1 / 71.71e9) + (1 / 53.35e9 - 1 / 62.95e9))
    assert 0.5 * (24.7138 - 22.820667) < idle < 24.7138 - 22.820667
    gpu_s = float(v.compute_s) + float(v.ep_s)
    assert gpu_s - idle == pytest.approx(22.820667, rel=0.05)
    assert float(v.host_s) == 0.0
    assert float(v.step_time_s) == pytest.approx(24.7138, rel=0.05)
