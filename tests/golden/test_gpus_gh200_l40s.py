"""The GH200 480GB and L40S entries of gpus.toml against their datasheets (NVIDIA GH200 Grace
Hopper Superchip datasheet, NVIDIA L40S datasheet), the CUDA C++ Programming Guide's cc 8.9 column
and public nvidia-smi memory totals; every expected figure is the document's, or a derivation
written here."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.specs import get_gpu

MIB = 1024 * 1024


def test_gh200_is_the_h100_die_with_96_gb_hbm3_at_4_tb_s():
    g, h = get_gpu("gh200"), get_gpu("h100-sxm")
    # GH200 datasheet: 96 GB HBM3 at 4 TB/s; nvidia-smi 'NVIDIA GH200 480GB' total 97871MiB
    assert g.hbm_bytes_per_s == 4.0e12
    assert g.hbm_bytes == 97871 * MIB
    assert "97871MiB" in g.source_of("hbm_bytes")
    # module power programmable 450-1000 W (CPU, GPU and memory together): the top is recorded
    assert g.tdp_w == 1000
    # the datasheet's tensor peaks are H100 SXM's: sparse FP8 3,958 / BF16 1,979 TF, halved
    assert g.peak_flop_per_s("fp8") == pytest.approx(3958e12 / 2, rel=1e-3)
    assert g.peak_flop_per_s("bf16") == pytest.approx(1979e12 / 2, rel=1e-3)
    # the whitepaper: a full GH100 of 132 SMs, cc 9.0 (the same per-SM limits)
    assert (g.sm_count, g.arch, g.compute_capability) == (132, "hopper", "9.0")
    assert dict(g.sm) == dict(h.sm)
    # no GH200 GEMM measurement: the H100 SXM ratios are inherited, cited as the H100's
    assert g.sustained_gemm_ratio == h.sustained_gemm_ratio
    assert g.source_of("sustained_gemm_ratio") == h.source_of("sustained_gemm_ratio")
    assert "lower bound" in g.notes and "NVLink-C2C is not a GPU-GPU link" in g.notes


def test_l40s_datasheet_figures_dense():
    g = get_gpu("l40s")
    # L40S datasheet: 48 GB GDDR6 at 864 GB/s, 350 W; nvidia-smi total 46068MiB (ECC on)
    assert g.hbm_bytes_per_s == 864e9 and g.tdp_w == 350
    assert g.hbm_bytes == 46068 * MIB
    # dense | sparse pairs of the datasheet: FP8 733 | 1,466, BF16/FP16 362.05 | 733,
    # TF32 183 | 366; FP32 91.6
    assert g.peak_flop_per_s("fp8") == 733e12 == 1466e12 / 2
    assert g.peak_flop_per_s("bf16") == g.peak_flop_per_s("fp16") == 362.05e12
    assert g.peak_flop_per_s("tf32") == 183e12 == 366e12 / 2
    assert g.peak_flop_per_s("fp32") == 91.6e12
    assert (g.arch, g.compute_capability, g.vendor) == ("ada", "8.9", "nvidia")


def test_l40s_sm_count_and_clock_follow_from_the_datasheet_lines():
    g = get_gpu("l40s")
    # 142 RT cores (one per SM) and 568 Tensor cores (four per SM); 18,176 CUDA cores = 142 x 128
    assert g.sm_count == 142 == 568 // 4 == 18176 // 128
    # 91.6 TF FP32 = 18,176 cores x 2 FLOP (FMA) x clock -> 2.52 GHz
    assert g.boost_clock_hz == pytest.approx(91.6e12 / (18176 * 2), rel=1e-3)
    # FP8 733 TF = 142 SMs x 2,048 dense FP8 FLOP per clock x 2.52 GHz
    assert g.peak_flop_per_s("fp8") == pytest.approx(142 * 2048 * g.boost_clock_hz, rel=1e-3)


def test_l40s_per_sm_limits_are_cc_8_9():
    g = get_gpu("l40s")
    # CUDA C++ Programming Guide, compute capability 8.9 column
    assert g.sm["max_threads_per_sm"] == 1536 and g.sm["max_warps_per_sm"] == 48
    assert g.sm["max_blocks_per_sm"] == 24
    assert g.sm["regs_per_sm"] == 64 * 1024 and g.sm["max_regs_per_thread"] == 255
    assert g.sm["smem_per_sm_bytes"] == 100 * 1024
    assert g.sm["max_smem_per_block_bytes"] == 99 * 1024
    # Ada tuning guide: 128 KB of combined L1 and shared memory per SM
    assert g.sm["l1_smem_per_sm_bytes"] == 128 * 1024


def test_l40s_occupancy_reads_its_limits(cli):
    # 256 threads x 64 registers, 32 KiB of shared memory per block on cc 8.9:
    # registers 64 x 256 = 16,384 per block -> 65,536 / 16,384 = 4 blocks; shared memory
    # (32,768 + 1,024 reserved) -> floor(102,400 / 33,792) = 3 blocks; warps 48 / 8 = 6 blocks
    rc, out, err = cli("gpu", "occupancy", "--gpu", "l40s", "--threads", "256", "--regs", "64",
                       "--smem", "32768")
    assert rc == 0, err
    assert "cc 8.9" in out and "shared_memory" in out
    line = next(ln for ln in out.splitlines() if "resident blocks per SM" in ln)
    assert line.split()[-2] == "3"


def test_l40s_tp_all_reduce_runs_over_its_pcie_4_link():
    # no NVLink: the node tier of the collectives is the GPU's PCIe Gen4 x16 (datasheet: 64 GB/s
    # bidirectional = 32 GB/s per direction), not PCIe 5.0
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.step.comm import collective_time

    cl = make_cluster("l40s", 8)
    assert cl.intra is None and get_gpu("l40s").scale_up_bytes_per_s == 0
    assert cl.fabric.intra.id == "pcie4"
    assert cl.fabric.intra.bytes_per_s_per_direction == 32e9
    # a ring all-reduce moves 2 (n - 1) / n of the buffer through each GPU's link: at 64 MB
    # over 8 GPUs no faster than the line rate allows
    S = 64e6
    t = float(collective_time("all_reduce", np.array([S]), 8.0, 8.0, cl)[0])
    assert t >= 2 * 7 / 8 * S / 32e9
