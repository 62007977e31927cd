"""PCIe hosts: where a ring's hops go on a GPU server without NVLink, priced with NCCL's rules.

Expected values are derived here from NCCL v2.21.5-1 (commit ab2b89c4):
- src/graph/paths.cc ncclTopoCheckP2p: P2P level PATH_PXB on Intel CPUs, PATH_SYS otherwise;
  GPU pairs past it go through the CPU (addInterStep, SHM transport).
- src/graph/topo.h INTEL_P2P_OVERHEAD(bw) = bw * 6 / 5, charged by search.cc followPath on the
  PCIe links of a PATH_PHB GPU hop through an Intel CPU (not on PATH_SYS hops).
"""

import numpy as np
import pytest

from scalemodel.analytic import collectives as C
from scalemodel.analytic.collectives import (
    collective_cost,
    make_fabric,
    make_group,
    pcie_ring_factor,
    price,
)
from scalemodel.errors import BadInput


def test_two_gpus_under_one_switch_run_peer_to_peer_at_the_x16_rate():
    # ring 0 -> 1 -> 0: both hops PATH_PIX under the switch, no CPU on the way
    assert pcie_ring_factor("intel-2s-2psw", 2, "pcie4") == 1.0


def test_intel_hops_between_switches_cost_six_fifths_of_the_pcie_link():
    # 4 GPUs, 2 per switch: 0->1 P2P, 1->2 PHB (x 6/5 on GPU 1's link up and GPU 2's down),
    # 2->3 P2P, 3->0 PHB. Busiest GPU link: 6/5 of the ring rate -> 5/6 of x16.
    assert pcie_ring_factor("intel-2s-2psw", 4, "pcie4") == pytest.approx(5 / 6)
    # 8 GPUs over two sockets: 3->4 and 7->0 are PATH_SYS (no 6/5 in followPath), 1->2 and
    # 5->6 are PHB: still 5/6; the Gen5 switch uplink (64 GB/s) carries one hop each way
    assert pcie_ring_factor("intel-2s-2psw", 8, "pcie4") == pytest.approx(5 / 6)


def test_amd_hosts_keep_the_x16_rate():
    # AMD: P2P allowed up to PATH_SYS and no TLP charge, so only the GPU's own link limits
    for p in (2, 4, 8):
        assert pcie_ring_factor("amd-2s-2psw", p, "pcie4") == 1.0


def test_no_peer_access_sends_every_hop_through_the_cpu():
    # GeForce (no P2P), one GPU per root port: every same-socket hop is PHB -> 5/6 even at 2
    assert pcie_ring_factor("intel-2s-rootport-nop2p", 2, "pcie5") == pytest.approx(5 / 6)


def test_a_shared_switch_uplink_divides_by_the_hops_it_carries(monkeypatch):
    # 4 GPUs without peer access behind one switch with a PCIe 4.0 x16 uplink, Intel CPU:
    # all 4 hops go up and down the uplink at 6/5 each -> uplink load 4 x 6/5 = 4.8 ring rates;
    # GPU links are PCIe 4.0 too: factor = (1 / 4.8) / 1 = 0.2083 (NCCL's search in the same
    # terms: 24 GB/s / 4.8 = 5 GB/s per channel)
    hosts = dict(C._consts()["pcie_hosts"])
    hosts["t-1sw"] = {"gpus_per_switch": 4, "gpus_per_socket": 4, "uplink": "pcie4",
                      "cpu_vendor": "intel", "peer_access": False,
                      "source": "scalemodel-pcie-host-assumption"}
    monkeypatch.setitem(C._consts(), "pcie_hosts", hosts)
    pcie_ring_factor.cache_clear()
    try:
        assert pcie_ring_factor("t-1sw", 4, "pcie4") == pytest.approx(1 / 4.8)
    finally:
        pcie_ring_factor.cache_clear()


def test_the_host_scales_only_pcie_node_tiers():
    S = 256 * 2**20
    plain = make_fabric("pcie4", None, gpus_per_node=8)
    host = make_fabric("pcie4", None, gpus_per_node=8, pcie_host="intel-2s-2psw")
    a = price("all-reduce", "ring", S, 8, fabric=plain)
    b = price("all-reduce", "ring", S, 8, fabric=host)
    # bandwidth-bound: the transfer time grows by 6/5
    assert float(b.transfer_s) == pytest.approx(float(a.transfer_s) * 6 / 5)
    # on NVLink the host is ignored: nothing moves
    nv = make_fabric("nvlink4", None, gpus_per_node=8)
    nvh = make_fabric("nvlink4", None, gpus_per_node=8, pcie_host="intel-2s-2psw")
    assert float(price("all-reduce", "ring", S, 8, fabric=nv).time_s) == \
        float(price("all-reduce", "ring", S, 8, fabric=nvh).time_s)


def test_vectorised_rows_read_the_factor_per_ranks_per_node():
    host = make_fabric("pcie4", None, gpus_per_node=8, pcie_host="intel-2s-2psw")
    c = price("all-reduce", "ring", np.array([1e9, 1e9]), np.array([2, 4]), fabric=host)
    t2, t4 = (float(x) for x in c.transfer_s)
    # ring transfer = 2 (n-1)/n S / Bi: n = 2 at the full rate, n = 4 at 5/6 of it
    assert t4 / t2 == pytest.approx((2 * 3 / 4) / (2 * 1 / 2) * 6 / 5)


def test_worked_derivation_shows_the_host_share():
    host = make_fabric("pcie4", None, gpus_per_node=8, pcie_host="intel-2s-2psw")
    r = collective_cost("all-reduce", 64 * 2**20, make_group(4, host), host, algorithm="ring")
    assert "h_i" in r.derivation.env
    assert r.derivation.env["h_i"] == pytest.approx(5 / 6)


def test_unknown_host_is_one_clear_error():
    with pytest.raises(BadInput, match="--pcie-host: unknown PCIe host 'nope'"):
        make_fabric("pcie4", None, pcie_host="nope")


def test_l40s_cluster_reads_its_host_and_cli_exit_2(cli):
    from scalemodel.analytic.planner import make_cluster

    assert make_cluster("l40s", 8).fabric.pcie_host == "intel-2s-2psw"
    assert make_cluster("h100-sxm", 8).fabric.pcie_host is None
    rc, _out, err = cli("comm", "cost", "--intra", "pcie4", "--pcie-host", "nope", "--ranks", "4")
    assert rc == 2 and "--pcie-host" in err and len(err.strip().splitlines()) == 1
