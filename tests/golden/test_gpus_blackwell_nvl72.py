"""The GB200, B300 and GB300 entries of gpus.toml against their vendor tables: NVIDIA's GB200 NVL72
and GB300 NVL72 product-page specification tables (rack totals over 72 GPUs), NVIDIA's HGX B300
table (8 GPUs), public nvidia-smi memory totals and power caps, and CUDA-reported SM counts. Every
expected figure is the document's, or a derivation written here."""

from __future__ import annotations

import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.specs import get_gpu

MIB = 1024 * 1024


def test_gb200_is_the_nvl72_rack_table_over_72():
    g = get_gpu("gb200")
    # GB200 NVL72 (with sparsity, rack): FP4 1,440 PF, FP8 720 PF, BF16 360 PF, TF32 180 PF;
    # dense per GPU = rack / 72 / 2
    assert g.peak_flop_per_s("fp4") == pytest.approx(1440e15 / 72 / 2)
    assert g.peak_flop_per_s("fp8") == pytest.approx(720e15 / 72 / 2)
    assert g.peak_flop_per_s("bf16") == pytest.approx(360e15 / 72 / 2)
    assert g.peak_flop_per_s("tf32") == pytest.approx(180e15 / 72 / 2)
    # FP32 5,760 TF and FP64 2,880 TF per rack
    assert g.peak_flop_per_s("fp32") == pytest.approx(5760e12 / 72)
    assert g.peak_flop_per_s("fp64") == pytest.approx(2880e12 / 72)
    # 576 TB/s of HBM3e per rack; nvidia-smi 'NVIDIA GB200': 189471MiB, 1200 W cap
    assert g.hbm_bytes_per_s == pytest.approx(576e12 / 72)
    assert g.hbm_bytes == 189471 * MIB and g.tdp_w == 1200
    assert "189471MiB" in g.source_of("hbm_bytes")
    # CUDA reports 152 SMs at 2,062 MHz; 152 x 8,192 dense bf16 FLOP/clk x ~2.01 GHz = 2.5 PF
    assert g.sm_count == 152
    assert g.peak_flop_per_s("bf16") / (152 * 8192) == pytest.approx(2.008e9, rel=1e-3)
    # the B200's die: cc 10.0, its per-SM limits, its measured ratios borrowed (named as B200's)
    b = get_gpu("b200")
    assert (g.arch, g.compute_capability) == ("blackwell", "10.0")
    assert dict(g.sm) == dict(b.sm)
    assert g.sustained_gemm_ratio == b.sustained_gemm_ratio == 0.815
    assert g.source_of("sustained_gemm_ratio") == b.source_of("sustained_gemm_ratio")
    assert "assumption" in g.notes


def test_b300_is_the_hgx_b300_table_over_8():
    g = get_gpu("b300")
    # HGX B300 (8 GPUs, with sparsity): FP8 72 PF, BF16 36 PF, TF32 18 PF; FP32 600 TF, FP64 10 TF
    assert g.peak_flop_per_s("fp8") == pytest.approx(72e15 / 8 / 2)
    assert g.peak_flop_per_s("bf16") == pytest.approx(36e15 / 8 / 2)
    assert g.peak_flop_per_s("tf32") == pytest.approx(18e15 / 8 / 2)
    assert g.peak_flop_per_s("fp32") == pytest.approx(600e12 / 8)
    assert g.peak_flop_per_s("fp64") == pytest.approx(10e12 / 8)
    # dense FP4 14 PF (Verda's per-GPU table; NVIDIA aiconfigurator b300_sxm)
    assert g.peak_flop_per_s("fp4") == pytest.approx(14e15)
    # nvidia-smi 'NVIDIA B300 SXM6 AC': 275040MiB, 1100 W; torch: cc (10, 3); CUDA: 148 SMs
    assert g.hbm_bytes == 275040 * MIB and g.tdp_w == 1100
    assert (g.compute_capability, g.sm_count) == ("10.3", 148)
    # one ConnectX-8 800 Gb/s per GPU (1.6 TB/s per 8-GPU board); an 8-GPU NVLink board
    # (the board's 1.6 TB/s counts both directions: 8 x 800 Gb/s / 8 bits x 2 = 1.6e12 B/s)
    from scalemodel.specs import get_link

    assert g.interconnect["scale_out_link"] == "xdr-800"
    assert 8 * get_link("xdr-800").bytes_per_s_per_direction * 2 == pytest.approx(1.6e12)
    assert make_cluster("b300", 64).nvlink_domain == 8
    # no FP4 GEMM measurement on Blackwell Ultra: not borrowed (the FP4 path changed)
    assert g.fp4_gemm_ratio == 0.0 and g.gemm_dtype_factor("fp4") == 1.0


def test_gb300_is_the_nvl72_rack_table_over_72():
    g = get_gpu("gb300")
    # GB300 NVL72: FP4 1,080 PF dense (1,440 sparse); FP8 720 PF, BF16 360 PF (with sparsity)
    assert g.peak_flop_per_s("fp4") == pytest.approx(1080e15 / 72)
    assert g.peak_flop_per_s("fp8") == pytest.approx(720e15 / 72 / 2)
    assert g.peak_flop_per_s("bf16") == pytest.approx(360e15 / 72 / 2)
    # FP64 100 TF per rack; 576 TB/s HBM3e; nvidia-smi 'NVIDIA GB300' 284208MiB, 1400 W
    assert g.peak_flop_per_s("fp64") == pytest.approx(100e12 / 72, rel=1e-3)
    assert g.hbm_bytes_per_s == pytest.approx(576e12 / 72)
    assert g.hbm_bytes == 284208 * MIB and g.tdp_w == 1400
    # 72 ConnectX-8 SuperNICs per rack: one 800 Gb/s NIC per GPU
    assert g.interconnect["scale_out_link"] == "xdr-800"
    assert g.interconnect["nics_per_gpu"] == 1
    assert g.compute_capability == "10.3"


@pytest.mark.parametrize("gid", ["gb200", "gb300"])
def test_nvl72_parts_default_to_a_72_gpu_nvlink_domain(gid):
    # NVL72: 72 GPUs in one NVLink domain; a stated --nvlink-domain still wins
    assert make_cluster(gid, 256).nvlink_domain == 72
    assert make_cluster(gid, 256, gpus_per_node=4).nvlink_domain == 72
    assert make_cluster(gid, 256, nvlink_domain=36).nvlink_domain == 36
    assert make_cluster(gid, 256).intra.id == "nvlink5"


def test_specs_gpus_lists_the_new_parts(cli):
    rc, out, err = cli("specs", "gpus")
    assert rc == 0, err
    for gid in ("gb200", "b300", "gb300"):
        assert gid in out


def test_gb200_and_b300_fp8_ratio_is_their_own_mamf_rows():
    # ml-engineering compute/accelerator/README.md at 744d01e (2026-08-22), MAMF comparison table,
    # each pair run with one torch: GB200 bf16 1822.0 TFLOP/s, fp8 3615.6 (2.10.0.dev20250916+cu130);
    # B300 bf16 1769.0, fp8 3353.3 (2.9.1+cu130). Dense peaks (NVIDIA tables, as above): GB200 bf16
    # 2500, fp8 5000; B300 bf16 2250, fp8 4500. Ratio = (fp8 MAMF / fp8 peak) / (bf16 MAMF / bf16 peak).
    gb200, b300, gb300 = get_gpu("gb200"), get_gpu("b300"), get_gpu("gb300")
    assert gb200.peak_flop_per_s("bf16") == 2500e12 and gb200.peak_flop_per_s("fp8") == 5000e12
    assert b300.peak_flop_per_s("bf16") == 2250e12 and b300.peak_flop_per_s("fp8") == 4500e12
    assert gb200.gemm_dtype_factor("fp8") == pytest.approx((3615.6 / 5000) / (1822.0 / 2500),
                                                           abs=5e-4)  # 0.992
    assert b300.gemm_dtype_factor("fp8") == pytest.approx((3353.3 / 4500) / (1769.0 / 2250),
                                                          abs=5e-4)  # 0.948
    for g in (gb200, b300):
        assert "744d01e" in g.source_of("fp8_gemm_ratio")
    # the table has no GB300 row: it takes B300's (same die) through extends, said in its notes
    assert gb300.fp8_gemm_ratio == b300.fp8_gemm_ratio
    assert "no GB300 row" in " ".join(gb300.notes.split())
    # no part of the table has a sustained (MSMF) figure for these three: B200's 0.815 stays borrowed
    for g in (gb200, b300, gb300):
        assert g.sustained_gemm_ratio == get_gpu("b200").sustained_gemm_ratio == 0.815
