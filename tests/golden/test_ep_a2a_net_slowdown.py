"""The compute slowdown beside an all-to-all dispatcher's traffic over the NICs (issue 16,
session 17).

Megatron-Core's alltoall token dispatcher exchanges tokens with torch's all_to_all_single and
split sizes, which torch runs as one NCCL group of a send and a receive to every rank
(torch/csrc/cuda/nccl.cpp all2all_single_unequal_split). NCCL turns that group into one p2p
kernel whose grid is the set of channels holding work, one block of 640 threads per channel
(v2.21.5-1 enqueue.cc finishPlan lines 565-583 and the launch line 1355; v2.27.7-1 enqueue.cc
lines 1539-1541, grid = countOneBits(plan->channelMask)). Which channels an operation uses:

* v2.21.5-1 src/include/channel.h ncclChannelComputeBase (lines 15-33): on several nodes the
  channel base of a send or receive is node distance + local-rank distance / 8
  (NCCL_MAX_WORK_ELEMENTS_P2P / 2 = 8), the channel p2pChannels[base] + part, with
  p2pChannels[c] the bit-mirror of c; v2.27.7-1 ncclP2pChannelBaseForRound (line 19) gives
  base = node distance x divUp(8, 8) + local distance / 8 and ncclP2pChannelForPart (device.h
  line 269) base + reverse-bits(part); v2.28.3-1 and v2.29.3-1 reverse the base's bits and add
  the part.
* src/graph/paths.cc ncclTopoGetNchannels (v2.21.5-1 lines 712-729): a network peer gets 2
  channels per NIC (one 400 Gb/s NIC per H100 on a DGX), halved while 2 x nRanks exceeds 4 x
  p2pnChannels; ncclTopoComputeP2pChannels takes the minimum over the peers as
  p2pnChannelsPerPeer, so an operation spans at most 2 channels (parts).

With 8 ranks a node every peer at one node distance shares one base, so an all-to-all over n
nodes holds at most 2 n blocks. The helper below replays those two mappings; the planner's
constant (2 blocks per node) is checked against it, and the H100's 132 SMs turn it into the
share of the compute beside the hidden all-to-all that is lost, in place of the planner's
generic sigma (Lee et al. 2025: 18.9%).
"""

from pathlib import Path

import pytest

from scalemodel.analytic.planner import search
from scalemodel.analytic.step.comm import collective_time, ep_a2a_net_sm_share
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.step.imbalance import rank_violation
from scalemodel.analytic.validate import read_rows, row_problem
from scalemodel.specs import get_gpu
from scalemodel.specs.sources import all_sources

PARTS = 2  # channels an operation with a network peer spans (paths.cc, 2 per NIC, one NIC)
LOCAL = 8  # ranks a node (DGX H100)


def _mirror(c: int, n: int) -> int:
    """v2.21.5-1 src/graph/topo.h mirrorBits (line 240; reverseBits in bitops.h from v2.27): c's
    bits reversed over log2(n) bits."""
    bits = n.bit_length() - 1
    return int(format(c, f"0{bits}b")[::-1], 2) if bits else 0


def _channels_v2_21(nodes: int, p2p_channels: int) -> set[int]:
    """Channels one rank's all-to-all uses, v2.21.5-1: base = node distance + local distance / 8,
    channel = (p2pChannels[base % n] + part) % n."""
    out = set()
    for node_delta in range(nodes):
        for local_delta in range(LOCAL):
            base = node_delta + local_delta // (16 // 2)
            for part in range(PARTS):
                out.add((_mirror(base % p2p_channels, p2p_channels) + part) % p2p_channels)
    return out


def _channels_v2_27(nodes: int, p2p_channels: int) -> set[int]:
    """The same at v2.27.7-1: base = node distance x divUp(8, 8) + local distance / 8, channel =
    (base + reverse-bits(part)) & (n - 1)."""
    out = set()
    for node_delta in range(nodes):
        for local_delta in range(LOCAL):
            base = node_delta * 1 + local_delta // 8
            for part in range(PARTS):
                out.add((base + _mirror(part, p2p_channels)) & (p2p_channels - 1))
    return out


def _channels_v2_28(nodes: int, p2p_channels: int) -> set[int]:
    """The same at v2.28.3-1 / v2.29.3-1: base = reverse-bits(node distance + local distance /
    8), channel = (base + part) & (n - 1) (device.h ncclP2pChannelForPart)."""
    out = set()
    for node_delta in range(nodes):
        for local_delta in range(LOCAL):
            base = _mirror(node_delta + local_delta // 8, p2p_channels)
            for part in range(PARTS):
                out.add((base + part) & (p2p_channels - 1))
    return out


@pytest.mark.parametrize("p2p_channels", [16, 32])
def test_nccl_grid_is_two_blocks_a_node(p2p_channels):
    for nodes in (2, 4):
        assert len(_channels_v2_21(nodes, p2p_channels)) == PARTS * nodes
        assert len(_channels_v2_27(nodes, p2p_channels)) == PARTS * nodes
        assert len(_channels_v2_28(nodes, p2p_channels)) == PARTS * nodes
    ov = constants()["overlap"]
    assert ov["ep_a2a_net_ctas_per_node"] == PARTS
    assert ov["ep_a2a_net_ctas_per_node_source"] in all_sources()
    # EP32 over four DGX H100 nodes: 8 blocks of the H100's 132 SMs (gpus.toml)
    assert ep_a2a_net_sm_share(get_gpu("h100-sxm"), 4.0) == pytest.approx(8 / 132)
    assert ep_a2a_net_sm_share(get_gpu("h100-sxm"), 2.0) == pytest.approx(4 / 132)


def _row(file: str, rid: str, layout: dict | None = None):
    text = (Path(__file__).parents[2] / "validation" / file).read_text()
    rows = [r for r in read_rows(text) if r["id"] == rid]
    p = row_problem(rows[0])
    return p, search(p.job, p.cluster, layout if layout is not None else p.stated,
                     top=0).best.values


def test_qwen3_235b_ep32_over_four_nodes():
    # nemo-qwen3-235b-a22b-h100 (26.04.01): TP2 PP8 VP4 EP32 (ETP1), MBS 1, GBS 8192 on 256
    # H100, the alltoall dispatcher with the A2A overlap. EP32 is 32 consecutive ranks: 4 nodes.
    # Per micro-batch and MoE layer the dispatch and the combine each way move 2,048 tokens (T /
    # tp) x top-8 copies x 4,096 x 2 B x (1 + v) a rank; m = 8192 / 16 = 512 micro-batches.
    # The recipe accounts for the embedding and the loss in the pipeline split
    # (megatron-bridge-qwen3-235b-pipeline-split): (94 + 2) / (8 x 4) = 3 layers a chunk, one
    # fewer in the first, so the first stage holds 2 + 3 + 3 + 3 = 11 layers.
    p, v = _row("training_runs.csv", "nemo-qwen3-235b-a22b-h100")
    m, layers = 512, 11
    s = 2048 * 8 * 4096 * 2 * (1 + rank_violation(128, 8, 32, 32 * 2048))
    a2a = collective_time("all_to_all", s, 32.0, 8.0, p.cluster)
    raw = m * layers * 4 * a2a
    # hidden = raw - exposed; the metadata exchange (an all-gather of 128 x 8 B counts) adds
    # well under 1% to the raw time
    assert float(v.ep_net_hidden_s) == pytest.approx(raw - float(v.ep_s), rel=0.01)
    assert float(v.ep_net_slow_s) == pytest.approx(8 / 132 * float(v.ep_net_hidden_s),
                                                   rel=1e-9)
    assert float(v.ep_net_slow_s) < constants()["overlap"]["compute_slowdown"] \
        * float(v.ep_net_hidden_s) / 3


def test_ep_inside_one_node_keeps_sigma():
    # the free search's pick for that row, EP8: the all-to-all stays on NVLink, whose p2p
    # channel count NCCL's topology search sets (not read): sigma stays
    _, v = _row("training_runs.csv", "nemo-qwen3-235b-a22b-h100",
                {"tp": 2, "pp": 8, "dp": 16, "cp": 1, "ep": 8, "etp": 1, "zero": 1, "vpp": 3,
                 "micro_batch": 1, "recompute": "none"})
    assert float(v.ep_net_hidden_s) == 0.0
    assert float(v.ep_net_slow_s) == 0.0


def test_deepep_dispatch_untouched():
    # nemo-deepseek-v3-b200-2604 runs DeepEP (flex dispatcher, its own kernels and SM budget,
    # frameworks.toml ep_comm_sms): not an NCCL all-to-all
    _, v = _row("published_runs_2026.csv", "nemo-deepseek-v3-b200-2604")
    assert float(v.ep_net_hidden_s) == 0.0


def test_gpu_without_sm_count_keeps_sigma():
    import dataclasses

    g = dataclasses.replace(get_gpu("h100-sxm"), sm_count=None)
    assert ep_a2a_net_sm_share(g, 4.0) == constants()["overlap"]["compute_slowdown"]
