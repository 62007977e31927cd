"""NCCL's all-to-all across nodes: its share of the NIC rate, and NVIDIA's published 32-GPU bars.

Sources:
- nccl#1138 (NVIDIA/nccl issue, 2024-01): alltoall_perf -b 4G on 2 nodes of 8 A100, 4 x 200 Gb/s
  RoCE NICs per node, stock NCCL 2.18.6: busbw 19.83 GB/s (NIC counters ~183 Gb/s). Derivation
  of the constant, written here: algbw = busbw x n / (n - 1) = 19.83 x 16 / 15 = 21.15 GB/s; a
  GPU sends (n - p) / n = 8 / 16 of its buffer off the node and 2 GPUs share a NIC, so a NIC
  carries 2 x 0.5 x 21.15 = 21.15 GB/s of payload: 21.15 / 25 = 0.846 of its line rate. The
  rings keep 0.96 (NCCL maintainer, nccl-tests#119: ~24 GB/s per 200 Gb/s NIC).
- NVIDIA GTC 2025 session S72583, slide 13 (stas00/ml-engineering
  network/images/all-to-all-bw-2025.png at 744d01e1), "NCCL Tests Alltoall Bus Bandwidth in GB/s,
  32 GPUs": 8x 200Gb RDMA (DGX A100) 24, 8x 400Gb RDMA (DGX H100) 48. Four nodes of 8 GPUs:
  a GPU sends 24 / 32 of its buffer over its NIC and busbw = algbw x 31 / 32, so the model reads
  busbw = 31 / 24 x NIC rate x 0.846: 27.3 GB/s on HDR, 54.6 on NDR, +13.8% over the bars. The
  bars equal one NIC at 0.96 (25 x 0.96 = 24, 50 x 0.96 = 48), the limit of the maintainer's
  N / (N - 1) x the NIC rate (nccl-tests#130) for many nodes; nccl#1138's 2-node run reads 1.65x
  one NIC's share per GPU, so the one-NIC reading cannot hold at small node counts.
"""

import json

import pytest

from conftest import run_cli as _cli
from scalemodel.analytic.collectives import alltoall_efficiency, make_fabric, price_best
from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.step.comm import collective_time

GIB4 = 4.0 * 2**30


def test_nic_share_is_the_one_derived_from_nccl_1138():
    n, p, busbw, gpus_per_nic, nic_gbps = 16, 8, 19.83, 2, 25.0
    algbw = busbw * n / (n - 1)
    nic_payload = gpus_per_nic * (n - p) / n * algbw
    derived = nic_payload / nic_gbps
    eff, src = alltoall_efficiency("scale-out")
    assert derived == pytest.approx(0.846, abs=5e-4)
    assert eff == pytest.approx(derived, abs=5e-4)
    assert "1138" in src


def test_engine_reads_nccl_1138_back_with_the_maintainers_byte_count():
    # the same system through the engine: 2 nodes x 8 A100 (NVLink3), 4 x 200 Gb/s RoCE, i.e.
    # half a NIC per GPU; the NVLink share (7 / 16 of the bytes at 213 GB/s) is hidden
    fab = make_fabric("nvlink3", "roce-200", gpus_per_node=8, nics_per_gpu=0.5)
    c = price_best("all-to-all", GIB4, 16, 8, fabric=fab)
    assert float(c.busbw_bytes_per_s) / 1e9 == pytest.approx(19.83, rel=0.01)
    # one NIC's share per GPU at the ring figure would read 12.5 x 0.96 = 12 GB/s, 40% low
    assert float(c.busbw_bytes_per_s) / 1e9 > 1.6 * 12.0


@pytest.mark.parametrize("inter, nic_gbps, slide_busbw", [
    ("hdr-200", 25.0, 24.0),   # 4x DGX A100, 8x 200 Gb/s
    ("ndr-400", 50.0, 48.0),   # 4x DGX H100, 8x 400 Gb/s
])
def test_the_slides_four_node_bars(inter, nic_gbps, slide_busbw):
    intra = "nvlink3" if inter == "hdr-200" else "nvlink4"
    fab = make_fabric(intra, inter, gpus_per_node=8)
    c = price_best("all-to-all", GIB4, 32, 8, fabric=fab)
    expect = 31 / 24 * nic_gbps * 0.846
    got = float(c.busbw_bytes_per_s) / 1e9
    assert got == pytest.approx(expect, rel=0.005)
    assert abs(got / slide_busbw - 1) <= 0.15   # the rows' tolerance (validation/nccl_tests.csv)
    assert slide_busbw == pytest.approx(nic_gbps * 0.96)  # the bar is one NIC at the ring figure


def test_step_model_reads_the_same_price_and_rings_and_the_wire_keep_096():
    cl = make_cluster("h100-sxm", 32)
    S = 268435456.0
    engine = float(price_best("all-to-all", S, 32, 8, fabric=cl.fabric).time_s)
    assert float(collective_time("all_to_all", S, 32, 8, cl)) == pytest.approx(engine, rel=1e-12)
    nccl = price_best("all-to-all", S, 32, 8, fabric=cl.fabric)
    wire = price_best("all-to-all", S, 32, 8, fabric=cl.fabric, nccl_p2p=False)
    # same bytes over the NIC; transfer terms in the ratio of the NIC shares 0.96 / 0.846
    assert float(nccl.transfer_s) / float(wire.transfer_s) == pytest.approx(0.96 / 0.846, rel=1e-6)
    assert float(collective_time("all_to_all_wire", S, 32, 8, cl)) == pytest.approx(
        float(wire.time_s), rel=1e-12)
    # a ring across the same nodes keeps 0.96 of the NIC: the same price as with 0.96 forced
    forced = make_fabric("nvlink4", "ndr-400", gpus_per_node=8, efficiency_inter=0.96)
    for coll in ("all-gather", "reduce-scatter", "all-reduce"):
        a = price_best(coll, GIB4, 32, 8, fabric=cl.fabric)
        b = price_best(coll, GIB4, 32, 8, fabric=forced)
        assert float(a.time_s) == pytest.approx(float(b.time_s), rel=1e-12), coll


def test_user_efficiency_inter_wins(capsys):
    rc, out, _ = _cli(capsys, "comm", "cost", "--collective", "all-to-all", "--intra", "nvlink4",
                      "--inter", "ndr-400", "--nodes", "4", "--gpus-per-node", "8",
                      "--bytes", "4GiB", "--efficiency-inter", "0.96", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["efficiency_inter"] == 0.96
    # 31 / 24 x 50 GB/s x 0.96 = 62.0 GB/s, the figure before this constant
    assert d["busbw_bytes_per_s"] / 1e9 == pytest.approx(62.0, rel=0.005)
