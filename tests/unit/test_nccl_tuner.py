"""NCCL's tuning model (analytic/nccl_tuner.py) against numbers worked by hand from NCCL 2.21.5's
source (tag v2.21.5-1, commit ab2b89c4: src/graph/tuning.cc, search.cc, topo.h); every expected
value is derived in the comment beside it."""

import numpy as np
import pytest

from scalemodel.analytic import nccl_tuner as nt
from scalemodel.analytic.collectives import (
    collective_cost,
    make_fabric,
    make_group,
    price_best,
)

GiB = 2.0**30
H100 = make_fabric("nvlink4", "ndr-400")


def test_graphs_follow_the_search_arithmetic():
    # HGX H100: 18 NVLinks x 20.6 = 370.8 GB/s. sm90 speeds: 60 -> 6 channels (360), 50 -> 7
    # (350), 40 -> 9 (360, a tie: the faster speed stays). 60 >= 50, so the channels double:
    # 12 x 30 GB/s.
    assert nt.ring_graph(370.8, True, 0, 0.0) == nt.Graph(12, 30.0)
    # DGX A100: 12 x 20.0 = 240; speed 40 -> 6 channels = 240, doubled (40 >= 25): 12 x 20.
    assert nt.ring_graph(240.0, False, 0, 0.0) == nt.Graph(12, 20.0)
    # (nccl#1197, NCCL 2.19.4 on an H100 NVSwitch system, logs rings of 12 x 30 GB/s.)
    # HGX H100 + 8 NDR NICs (50 GB/s each) behind PCIe 5.0 (48): speed 48, one channel per NIC,
    # each GPU forwards 7 of the 8 over NVLink (7 x 48 = 336 <= 370.8): 8 x 48 = 384; no speed
    # down to 0.49 x 48 beats it; 48 < 50 with 8 > 4 channels, so no doubling.
    assert nt.ring_graph(370.8, True, 8, 50.0, 8, 48.0) == nt.Graph(8, 48.0)
    # HGX A100 + 4 HDR NICs (25 GB/s) behind PCIe 4.0 (24): 24 -> 4 channels (96); 12 -> 8
    # (96, a tie: the faster speed stays): 4 x 24.
    assert nt.ring_graph(240.0, False, 4, 25.0, 8, 24.0) == nt.Graph(4, 24.0)
    # NVLS on one node pulls from every GPU: 8 channels at the fastest speed with 8 x s <= 370.8
    assert nt.nvls_graph(370.8, 8, 0, 0.0) == nt.Graph(8, 40.0)


def test_model_times_worked_by_hand():
    S = 4 * GiB
    # ring Simple, 8 GPUs: 8.4 + 14 x 3.4 = 56 us; bus 360 GB/s x 8/14 -> algbw 205.71 GB/s
    ring = nt.model_time_s("all-reduce", "ring", "simple", S, 8, 8, H100)
    assert float(ring) == pytest.approx((56.0 + S / (1e3 * 360 * 8 / 14)) * 1e-6, rel=1e-9)
    # NVLS: 25 us, 8 x 40 GB/s x 5/6 = 266.7 GB/s algbw
    nvls = nt.model_time_s("all-reduce", "in-switch", "simple", S, 8, 8, H100)
    assert float(nvls) == pytest.approx((25.0 + S / (1e3 * 320 * 5 / 6)) * 1e-6, rel=1e-9)
    # tree LL128 at 1 MiB on one node: bus min(0.92 x 360, 12 x 38.7) = 331.2, x 7/9, cap
    # 12 x 36.7 = 440.4 -> 257.6; tree correction at log2(2^20 / 64) = 14 is 0.6; x 1/2
    t = nt.model_time_s("all-reduce", "tree", "ll128", 2.0**20, 8, 8, H100)
    bw = 331.2 * 7 / 9 * 0.6 * 0.5
    assert float(t) == pytest.approx((14.0 + 2 * 7 * 1.25 + 2.0**20 / (1e3 * bw)) * 1e-6,
                                     rel=1e-9)


def test_two_nodes_of_four_hdr_nics_pick_the_ring():
    # ring: bus 4 x 24 = 96 GB/s, x 16/30 = 51.2 GB/s algbw; tree: min(0.92 x 96, 4 x 23.6) =
    # 88.3 x 1/2 = 44.2 GB/s: at 4 GiB NCCL's model prefers the ring (as nccl-tests#100 ran)
    fab = make_fabric("nvlink3", "hdr-200", nics_per_gpu=0.5)
    ring = nt.model_time_s("all-reduce", "ring", "simple", 4 * GiB, 16, 8, fab)
    tree = nt.model_time_s("all-reduce", "tree", "simple", 4 * GiB, 16, 8, fab)
    assert float(ring) < float(tree)
    c = collective_cost("all-reduce", 4 * GiB, make_group(16, fab, 8), fab)
    assert (c.algorithm, c.protocol) == ("ring", "simple")


def test_multi_node_nvls_needs_collnet_and_nvls_tree_needs_nvswitch():
    g = make_group(32, H100, 8)
    off = collective_cost("all-reduce", 4 * GiB, g, H100)
    assert all(a["algorithm"] != "in-switch" or a["time_s"] is None for a in off.alternatives)
    on = make_fabric("nvlink4", "ndr-400", collnet=True)
    c = price_best("all-reduce", 4 * GiB, 32, 8, fabric=on, algorithms=("in-switch",))
    assert np.isfinite(c.time_s)
    a100 = make_fabric("nvlink3", "hdr-200")
    c = price_best("all-reduce", 4 * GiB, 16, 8, fabric=a100, algorithms=("nvls-tree",))
    assert not bool(c.applicable)


def test_small_sizes_use_ll_and_p2p_follows_the_threshold():
    c = price_best("all-reduce", np.array([1024.0, 4 * GiB]), 8, 8, fabric=H100)
    assert list(c.protocol) == ["ll", "simple"]
    # NCCL_P2P_LL_THRESHOLD = 16384 bytes per peer message
    a = price_best("all-to-all", np.array([8 * 16384.0, 8 * 16386.0]), 8, 8, fabric=H100)
    assert list(a.protocol) == ["ll", "simple"]


def test_vectorised_choice_equals_the_single_query_choice():
    sizes = [2.0**k for k in range(8, 34, 3)]
    for n, p in ((8, 8), (16, 8), (64, 8), (8, 1)):
        v = price_best("all-reduce", np.array(sizes), n, p, fabric=H100)
        g = make_group(n, H100, p)
        for i, S in enumerate(sizes):
            one = collective_cost("all-reduce", S, g, H100)
            assert (one.algorithm, one.protocol) == (v.algorithm[i], v.protocol[i])
            assert one.time_s == pytest.approx(float(v.time_s[i]), rel=1e-12)
