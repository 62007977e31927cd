"""Golden tests for the MoE engines, each naming its source."""

import numpy as np
import pytest

from scalemodel.analytic.moe_placement import eplb_rebalance, place, zipf_loads
from scalemodel.analytic.moe_serving import alltoall_time_s, serving_fabric
from scalemodel.specs import get_gpu

# deepseek-ai/EPLB README, "Interface and Example": 2 layers x 12 experts, 16 slots, 4 groups,
# 2 nodes, 8 GPUs; printed phy2log of the hierarchical policy.
README_W = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
            [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
README_PHY2LOG = [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
                  [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]


def test_eplb_readme_example_reproduced_exactly():
    got = eplb_rebalance(np.array(README_W), 16, 4, 2, 8)
    assert got.tolist() == README_PHY2LOG


def test_ours_not_worse_than_eplb_on_readme_example():
    r = place(np.array(README_W, dtype=float), slots=16, gpus=8, nodes=2, groups=4,
              keep_groups=True)
    assert r.imbalance_after <= r.eplb_hierarchical + 1e-12


# ../shared/reference/moe_serving.md, EPLB measured on Zipf loads (16 layers, 256 experts,
# 8192 tokens x top-8). Our loads are re-sampled with the same recipe but another RNG, so the
# tolerance covers sampling noise (a few percent).
@pytest.mark.parametrize("s,before,after,bound", [(1.0, 23.894, 2.054, 1.959),
                                                  (1.2, 36.814, 2.485, 2.435)])
def test_ep144_zipf_matches_eplb_measurements(s, before, after, bound):
    w = zipf_loads(16, 256, s, seed=0)
    r = place(w, slots=288, gpus=144, nodes=18, groups=8)
    assert r.imbalance_before == pytest.approx(before, rel=0.04)
    assert r.eplb_global == pytest.approx(after, rel=0.03)
    assert r.lower_bound == pytest.approx(bound, rel=0.03)
    assert r.imbalance_after <= r.eplb_global + 1e-12


def test_ep32_global_reaches_bound_and_hierarchical_is_matched():
    # reference table: s=1, EP32, 9 slots/GPU: global 1.009 vs bound 1.000; hierarchical 1.361
    w = zipf_loads(16, 256, 1.0, seed=0)
    r = place(w, slots=288, gpus=32, nodes=4, groups=8)
    assert r.eplb_global == pytest.approx(1.009, abs=0.02)
    assert r.imbalance_after <= 1.02 * r.lower_bound  # within 2% where reachable
    g = place(w, slots=288, gpus=32, nodes=4, groups=8, keep_groups=True)
    assert g.eplb_hierarchical == pytest.approx(1.361, rel=0.08)
    assert g.imbalance_after <= g.eplb_hierarchical + 1e-12


# DeepEP legacy low-latency kernels (docs/legacy.md), H800 + CX7 400 Gb/s, 128 tokens per rank,
# hidden 7168, top-8, FP8 dispatch (with one FP32 scale per 128 channels) / BF16 combine.
# Priced by the collectives engine (direct all-to-all, NVLink to peers in the node, the NIC to the
# rest). EP8 (one node) is left out: there the kernel's fixed cost (77 us measured, ~45 us
# predicted) dominates and the NCCL latency table does not describe it.
DEEPEP_LL = [(16, 118e-6, 195e-6), (32, 155e-6, 273e-6), (64, 173e-6, 314e-6),
             (128, 192e-6, 369e-6), (256, 194e-6, 360e-6)]


@pytest.mark.parametrize("ep,dispatch,combine", DEEPEP_LL)
def test_alltoall_engine_near_deepep_low_latency(ep, dispatch, combine):
    gpu = get_gpu("h800")
    fab = serving_fabric(gpu, 8)
    copies = 128 * 8  # a rank sends and receives 128 tokens x top-8 copies
    d = float(alltoall_time_s(copies, 7168 * (1 + 4 / 128), ep, fab, mode="per-expert"))
    c = float(alltoall_time_s(copies, 7168 * 2.0, ep, fab, mode="per-expert"))
    assert d == pytest.approx(dispatch, rel=0.2)
    assert c == pytest.approx(combine, rel=0.2)


def test_node_limited_dispatch_sends_fewer_nic_bytes():
    # DeepSeek-V3 (V3 report sec. 3.2.2): a token reaches at most topk_group = 4 nodes; with the
    # groups kept on their nodes (EPLB's hierarchical policy) a token's 8 copies cross the
    # network at most 3 times (its own node is one of the 4); without the limit about 8 x 3/4.
    from scalemodel.analytic.moe_serving import layout_fanout

    gpus, remote, _ = layout_fanout(256, 8, 8, 4, 32, 32, "groups-on-node", 8, 0.6)
    assert remote <= 3.0 + 1e-9 and remote < 8 * 3 / 4
    assert gpus <= 8
    _, remote_free, _ = layout_fanout(256, 8, 0, 0, 32, 32, "global", 8, 0.6)
    assert remote < remote_free <= 3.0 + 1e-9  # 4 nodes: at most the 3 others


# The same table with the kernels' measured rate as a floor (moe serve's decode exchange, via
# step/comm.py low_latency_stage_time and collectives.toml [ep_dispatch_lowlatency.deepep]): by
# hand, 1,024 copies x 7,392 B (FP8 + scales) at the tabled dispatch GB/s and 1,024 x 14,336 B
# at the tabled combine GB/s, e.g. EP8: 7,569,408 B / 98 GB/s = 77.2 us, 14,680,064 B / 127 GB/s
# = 115.6 us. moe serve counts no 16-byte per-row header (DeepEP's test does), so it sits within
# 2.5% of the tabled latencies at every EP, EP8 included.
DEEPEP_LL_RATES = {8: (98e9, 77e-6, 127e9, 114e-6), 16: (63e9, 118e-6, 74e9, 195e-6),
                   32: (48e9, 155e-6, 53e9, 273e-6), 64: (43e9, 173e-6, 46e9, 314e-6),
                   128: (39e9, 192e-6, 39e9, 369e-6), 256: (39e9, 194e-6, 40e9, 360e-6)}


@pytest.mark.parametrize("ep", sorted(DEEPEP_LL_RATES))
def test_alltoall_with_kernel_floor_matches_deepep_low_latency(ep):
    d_rate, d_us, c_rate, c_us = DEEPEP_LL_RATES[ep]
    fab = serving_fabric(get_gpu("h800"), 8)
    row_d, row_c = 7168 * (1 + 4 / 128), 7168 * 2.0
    both = alltoall_time_s(np.stack([np.array(1024.0), np.array(1024.0)]), 1.0, ep, fab,
                           bytes_per_copy_each=np.array([row_d, row_c]),
                           calls=("dispatch", "combine"))
    assert float(both[0]) == pytest.approx(max(1024 * row_d / d_rate, float(alltoall_time_s(
        1024.0, row_d, ep, fab))), rel=1e-9)
    assert float(both[0]) == pytest.approx(d_us, rel=0.025)
    assert float(both[1]) == pytest.approx(c_us, rel=0.025)


# moe serve's node-limited (prefill) exchange is floored by the same measured rates as the step
# model's and plan serve's (step/comm.py kernel_network_floor / kernel_nvlink_floor). DeepEP V1's
# normal kernels (docs/legacy.md, H800 + ConnectX-7 400 Gb/s): internode EP16 = 2 nodes,
# 43 GB/s RDMA dispatch and combine, counted with the own node's copy (test_internode.py);
# intranode EP8 153 GB/s dispatch, 158 GB/s combine on NVLink. By hand, 2 nodes: 2,000 counted
# rows x 7,392 B / 43 GB/s = 343.8 us dispatch, 2,000 x 14,336 B / 43 GB/s = 666.8 us combine;
# the wire (1,000 rows that leave the node at ~50 GB/s, ~150 us) and the NVLink stage (100 rows)
# are shorter, so the floor is the time.
def test_node_limited_exchange_floored_by_deepep_normal_kernels():
    fab = serving_fabric(get_gpu("h800"), 8)
    rows = np.array([1000.0, 1000.0])
    t = alltoall_time_s(np.array([100.0, 100.0]), 1.0, 16, fab, mode="node-limited",
                        bytes_per_copy_each=np.array([7392.0, 14336.0]), nic_copies=rows,
                        nic_copies_counted=2 * rows, calls=("dispatch", "combine"))
    assert t[0] == pytest.approx(2000 * 7392 / 43e9, rel=1e-9)
    assert t[1] == pytest.approx(2000 * 14336 / 43e9, rel=1e-9)
    wire = alltoall_time_s(np.array([100.0, 100.0]), 1.0, 16, fab, mode="node-limited",
                           bytes_per_copy_each=np.array([7392.0, 14336.0]), nic_copies=rows)
    assert np.all(wire < t)


def test_one_node_normal_kernels_no_faster_than_deepep_nvlink_rate():
    # EP8 on one H800 node, 4,096 tokens x 6.5 GPUs per token received (as in DeepEP's test):
    # no faster than 153 GB/s (dispatch) and 158 GB/s (combine) over the received rows
    fab = serving_fabric(get_gpu("h800"), 8)
    vol = np.array([4096 * 6.5, 4096 * 6.5])
    b = np.array([7392.0, 14336.0])
    t = alltoall_time_s(vol, 1.0, 8, fab, mode="node-limited", bytes_per_copy_each=b,
                        calls=("dispatch", "combine"))
    assert t[0] >= vol[0] * b[0] / 153e9 * (1 - 1e-9)
    assert t[1] >= vol[1] * b[1] / 158e9 * (1 - 1e-9)
