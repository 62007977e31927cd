"""The compute slowdown beside a p2p ring-attention exchange over the NICs (issue 16, session 16).

Transformer Engine's AttnFuncWithCP (v1.4 attention.py lines 428-471 and 532; the same
flash_attn_p2p_communicate at v1.13 and v2.2) sends each step's K/V to the next CP rank and
receives the previous rank's with torch.distributed isend / irecv (batch_isend_irecv at cp = 2),
beside the step's attention call on another stream. NCCL runs those as point-to-point kernels:

* src/graph/paths.cc ncclTopoGetNchannels: a peer across the network gets
  NCCL_NCHANNELS_PER_NET_PEER channels, default 2 (v2.18.6-1; v2.19.4-1 line 669); from
  v2.20.5-1 (lines 712-729, unchanged at v2.21.5-1 and v2.25.1-1) 2 per NIC, halved with scale,
  never fewer than the NICs the bandwidth needs (1 on a DGX H100: one 400 Gb/s NIC per GPU).
* src/enqueue.cc scheduleP2pTasksToPlan spreads an operation over at most p2pnChannelsPerPeer
  channels, and the launch grid is the plan's channel count (v2.20.5-1 line 1319), one block of
  NCCL_MAX_NTHREADS = 640 threads per channel.

So one ring step's send and receive hold at most 2 x 2 = 4 blocks; taken as 4 whole SMs of the
H100's 132, compute beside them runs 4 / 132 = 3.03% slower, where the planner's generic
sigma (Lee et al. 2025, 18.9%, measured beside the collectives of 4-GPU training runs) charged
six times as much.
The NeMo 24.03 launcher (tag 24.03.01, launcher_scripts/conf/config.yaml env_vars) sets no
NCCL channel variable, so the defaults apply.
"""

import pytest

from scalemodel.analytic.planner import make_cluster, make_job, search
from scalemodel.analytic.step.comm import collective_time, cp_p2p_net_sm_share
from scalemodel.analytic.step.config import constants
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.frameworks import job_settings
from scalemodel.specs.sources import all_sources

NET_PEER_CHANNELS = 2  # NCCL_NCHANNELS_PER_NET_PEER default (paths.cc, v2.19.4-1 line 669)
OPS_PER_STEP = 2  # the send to the next rank and the receive from the previous one


def test_constant_is_nccls_block_count():
    ov = constants()["overlap"]
    assert ov["cp_p2p_net_ctas"] == NET_PEER_CHANNELS * OPS_PER_STEP
    assert ov["cp_p2p_net_ctas_source"] in all_sources()
    # H100 SXM: 132 SMs (gpus.toml, NVIDIA H100 whitepaper)
    assert cp_p2p_net_sm_share(get_gpu("h100-sxm")) == pytest.approx(4 / 132)
    assert ov["compute_slowdown"] / 6 > 4 / 132


def _nemo_7b(seq: int, gbs: int, gpus: int, lay: dict):
    _, s = job_settings("nemo-24.03", "h100-sxm")
    job = make_job(get_model("llama-2-7b"), seq_len=seq, global_batch_seqs=gbs,
                   precision="fp8", **s)
    cl = make_cluster("h100-sxm", gpus, inter="ndr-400")
    full = {"pp": 1, "ep": 1, "vpp": 1, "recompute": "none", **lay}
    return job, cl, search(job, cl, full, top=0).best.values


def test_1m_row_ring_over_the_nics():
    # nemo-cp-llama2-7b-h100-1024k: TP8 x CP32 on 1,024 H100, one CP rank per node, so every
    # ring hop crosses the NICs. One step moves K and V of 32,768 tokens: 2 B x 32,768 x
    # (4,096 + 4,096) / TP8 = 64 MiB; forward cp - 1 = 31 transfers, backward 31 of K/V and 31
    # of dK/dV, none exposed (each shorter than its call), 32 layers, one micro-batch. ZeRO-1:
    # NeMo 1.x's distributed Adam (frameworks.toml nemo-24.03 parallelisms; until 2026-12-07
    # the search's tie-break reported ZeRO-2 here, which that profile no longer offers)
    job, cl, v = _nemo_7b(1048576, 4, 1024, {"tp": 8, "dp": 4, "cp": 32, "zero": 1,
                                             "micro_batch": 1})
    kv = 2 * 32768 * 8192 / 8
    assert kv == 64 * 2**20
    t_step = collective_time("send_recv", kv, 2.0, 1.0, cl)
    assert float(v.cp_s) == 0.0
    assert float(v.cp_net_hidden_s) == pytest.approx(32 * 3 * 31 * t_step, rel=1e-9)
    # the rest of the hidden communication (TP, DP) keeps sigma
    sigma = constants()["overlap"]["compute_slowdown"]
    rest = (float(v.tp_raw_s) - float(v.tp_s)) + (float(v.dp_raw_s) - float(v.dp_s))
    assert float(v.overlap_s) == pytest.approx(sigma * rest + 4 / 132 * float(v.cp_net_hidden_s),
                                               rel=1e-6)


def test_nvlink_ring_keeps_sigma():
    # nemo-cp-llama2-7b-h100-32k: TP2 x CP2 inside one node, the ring on NVLink: a p2p channel
    # count for an NVLink peer depends on NCCL's topology search (not read), so sigma stays
    _, _, v = _nemo_7b(32768, 128, 32, {"tp": 2, "dp": 8, "cp": 2, "zero": 1,
                                        "micro_batch": 1})
    assert float(v.cp_net_hidden_s) == 0.0


def test_torch_all_gather_exchange_untouched():
    # torchtitan's context_parallel gathers K/V with an all-gather collective: not a p2p ring
    _, s = job_settings("torchtitan-2024-12", "h100-sxm-hbm2e-500w")
    job = make_job(get_model("llama-3-8b"), seq_len=131072, global_batch_seqs=2,
                   precision="fp8", **s)
    lay = {"tp": 1, "pp": 1, "dp": 2, "cp": 4, "ep": 1, "zero": 3, "vpp": 1,
           "micro_batch": 1, "recompute": "full"}
    v = search(job, make_cluster("h100-sxm-hbm2e-500w", 8), lay, top=0).best.values
    assert float(v.cp_net_hidden_s) == 0.0


def test_gpu_without_sm_count_keeps_sigma():
    import dataclasses

    g = dataclasses.replace(get_gpu("h100-sxm"), sm_count=None)
    assert cp_p2p_net_sm_share(g) == constants()["overlap"]["compute_slowdown"]
