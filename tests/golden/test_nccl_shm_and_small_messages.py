"""The SHM transport's host-memory bound and NCCL's own small-message times, worked by hand.

SHM: NCCL 2.21.5 (tag v2.21.5-1, commit ab2b89c4) src/transport/shm.cc runs the SHM transport
"direct" by default (SHM_USE_CUDA_MEMCPY 0, line 41): the sending GPU's kernel stores every byte
into a host buffer that the receiving rank opened (SHM_LOCALITY = SHM_RECV_SIDE, line 45) and the
receiving GPU's kernel loads it back, so each byte of an SHM hop is 2 bytes of host-memory
traffic. The nccl#1639 host is 2 x Xeon Platinum 8480+ with 16 DIMMs: 8 DDR5 channels a socket
(ServeTheHome's 8480+ diagram), one DIMM per channel, so 4800 MT/s (Dell InfoHub on Sapphire
Rapids), 8 bytes a transfer: 8 x 4800e6 x 8 = 307.2e9 B/s a socket, peak.

Small messages: NCCL's predicted time of a call is latency + bytes / algorithm bandwidth
(tuning.cc ncclTopoGetAlgoTime); the latencies below are worked from tuning.cc's tables at
v2.21.5-1: baseLat (lines 56-59), hwLat NVLink / PCI / NET rows (lines 65-78), getNetOverhead
(1 us on Intel), and the per-algorithm sums of ncclTopoTuneModel (lines 225-256). The published
rows of these sizes are in validation/nccl_tests.csv; whether they fit is
test_nccl_tests_rows.py's business: this file pins what NCCL's own model says.
"""

import math

import pytest

from scalemodel.analytic.collectives import pcie_ring_factor, shm_memory_rate
from scalemodel.analytic.nccl_validate import load_rows, predict_row
from scalemodel.specs.gpu import get_link

ROWS = {r["id"]: r for r in load_rows()}
HOST = "intel-2s-rootport-nop2p"
SOCKET_PEAK = 8 * 4800e6 * 8  # 307.2e9 B/s


@pytest.mark.parametrize("ranks, shm_hops_on_busiest_socket", [
    # 8 GPUs, 4 a socket, no peer access: every hop is SHM. Socket 0 receives the hops into
    # GPUs 0 (from 7, across the sockets), 1, 2 and 3: 4 hops x 2 bytes a byte -> 38.4 GB/s.
    (8, 4),
    # 4 GPUs packed on socket 0: the ring 0-1-2-3-0 puts all 4 receptions there: 38.4 GB/s.
    (4, 4),
    # 2 GPUs: 2 receptions on socket 0: 76.8 GB/s.
    (2, 2),
])
def test_shm_bound_by_hand(ranks, shm_hops_on_busiest_socket):
    expected = SOCKET_PEAK / (2 * shm_hops_on_busiest_socket)
    assert shm_memory_rate(HOST, ranks) == pytest.approx(expected, rel=1e-12)


def test_hosts_without_shm_or_without_a_memory_figure_get_no_bound():
    # AMD with peer access: NCCL 2.21.5 keeps P2P up to PATH_SYS (paths.cc), no hop uses SHM.
    assert math.isinf(shm_memory_rate("amd-2s-2psw", 8))
    # the L40S default host states no memory figure, so its SHM hops are not bounded by it
    assert math.isinf(shm_memory_rate("intel-2s-2psw", 8))


@pytest.mark.parametrize("rid, ranks", [("rtx5090-8-1639", 8), ("rtx5090-4-1639", 4)])
def test_rtx5090_rows_read_the_memory_bound(rid, ranks):
    # PCIe side: x16 Gen5 line rate x 0.78 (host-link efficiency) x 5/6 (Intel's 6/5 TLP charge
    # on PHB hops); memory side 38.4 GB/s; ring Simple keeps f_proto = 1, and at 8 GiB the
    # latency is < 0.1% of the time, so busbw is the smaller of the two.
    pcie = get_link("pcie5").bytes_per_s_per_direction * 0.78 * pcie_ring_factor(HOST, ranks, "pcie5")
    assert pcie > 38.4e9  # the memory bound is the binding one for both rows
    r = predict_row(ROWS[rid])
    assert r.algorithm == "ring" and r.predicted == pytest.approx(38.4, rel=2e-3)


@pytest.mark.parametrize("rid, nccl_latency_us", [
    # H800 x4, ring forced, 1 KiB: ring LL = baseLat 6.6 + nsteps 2 x (4 - 1) = 6 x hwLat
    # NVLink ring LL 0.6 = 10.2 us
    ("h800-4-ring-1984", 6.6 + 6 * 0.6),
    # H100 x2, 256 B: ring LL = 6.6 + 2 x 0.6 = 7.8 us. The run asked NVLSTree, but NCCL turns
    # NVLS off at <= 2 GPUs (transport/nvls.cc ncclNvlsInit) and ncclTopoGetAlgoTime then uses
    # the ring's backup bandwidth (ringbdw): ring, LL the cheapest protocol at 256 B
    ("h100-2-graph-1259", 6.6 + 2 * 0.6),
    # DGX A100, ring forced, 8 B: 2 GPUs 6.6 + 2 x 0.6 = 7.8 us; 8 GPUs 6.6 + 14 x 0.6 = 15.0 us
    # (nccl-tests#123 measured 10 and 33.7 us with one channel: about 2 us a step)
    ("a100-ring1ch-2-123", 6.6 + 2 * 0.6),
    ("a100-ring1ch-8-123", 6.6 + 14 * 0.6),
    # 2 nodes x 4, reduce-scatter 256 B, ring LL: nsteps = 7, nInterSteps = nNodes - 1 = 1; the
    # intra hops pay max(hwLat 0.6, net overhead 1.0 on Intel) = 1.0; the net hop 2.7:
    # 6.6 + 6 x 1.0 + 1 x 2.7 = 15.3 us
    ("ib-2n4-rs-128", 6.6 + 6 * 1.0 + 2.7),
    # 8 x RTX 4090 on PCIe, tree forced, 8 B: tree LL = baseLat 6.8 + 2 x ((8 - 1) x hwLat PCI
    # tree LL 1.0 + log2(1) x 5.0) = 20.8 us (SHM hops are typed PCI: tuning.cc has no SHM row)
    ("rtx4090-8-tree-1530", 6.8 + 2 * (7 * 1.0)),
    # 2 H20 nodes, NVLSTree forced, 1 KiB: baseLat 0 + hwLat NVLink NVLSTree 25 + 2 x log2(2) x
    # hwLat NET NVLSTree 14 = 53 us
    ("h20-2n-nvlstree-1244", 25.0 + 2 * 14.0),
])
def test_small_message_rows_are_nccls_own_latency(rid, nccl_latency_us):
    # the bytes term at these sizes is below 0.1 us (1 KiB at tens of GB/s): the prediction is
    # NCCL's latency to within 1%
    r = predict_row(ROWS[rid])
    assert r.predicted == pytest.approx(nccl_latency_us, rel=0.01)


def test_every_host_memory_reference_names_an_entry():
    from scalemodel.specs.sources import load_toml

    c = load_toml("collectives.toml")
    for hid, h in c["pcie_hosts"].items():
        if "host_memory" in h:
            assert h["host_memory"] in c["host_memory"], hid
    # the nccl#1639 host names the 8480+ figure: 8 channels x 4800 MT/s x 8 B
    hm = c["host_memory"][c["pcie_hosts"][HOST]["host_memory"]]
    assert hm["bytes_per_s_per_socket"] == pytest.approx(SOCKET_PEAK)
