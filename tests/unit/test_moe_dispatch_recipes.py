"""MoE dispatch as the framework's recipe runs it: the dispatcher and EP overlap each NeMo /
Megatron-Bridge release's performance recipe sets per model and GPU (frameworks.toml
moe_recipes), DeepEP-class deduplication (one copy per node, then one per GPU), and the network
stage's rate against DeepEP's published normal-kernel bandwidths. Expected values are derived in
each test from the source named there."""

from math import comb
from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.step.comm import collective_time, dedup_buffers
from scalemodel.analytic.step.config import ep_dispatch
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import _parse, job_settings


def _job(fid: str, model: str, gpu: str, **kw):
    s = job_settings(fid, gpu, model=model, **kw)[1]
    return SimpleNamespace(framework_id=s["framework_id"], model=get_model(model)), s


def test_recipe_sets_dispatcher_and_overlap():
    # Megatron-Bridge v0.4.2 (26.04.01) DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2:
    # moe_flex_dispatcher_backend "deepep", moe_a2a_overlap True
    job, s = _job("nemo-26.04", "deepseek-v3", "b200")
    assert s["ep_overlap"] is True
    assert ep_dispatch(job, "b200") == "per_destination"
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2: no flex backend (alltoall), overlap True
    job, s = _job("nemo-26.04", "qwen3-235b-a22b", "h100-sxm")
    assert s["ep_overlap"] is True
    assert ep_dispatch(job, "h100-sxm") == "per_expert"
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1: hybridep, moe_a2a_overlap False
    job, s = _job("nemo-26.04", "qwen3-30b-a3b", "h100-sxm")
    assert s["ep_overlap"] is False
    assert ep_dispatch(job, "h100-sxm") == "per_destination"
    # v0.2.1 (25.11): the Qwen3-30B-A3B H100 config sets no backend (the provider's alltoall)
    # and moe_a2a_overlap True
    job, s = _job("nemo-25.11", "qwen3-30b-a3b", "h100-sxm")
    assert (s["ep_overlap"], ep_dispatch(job, "h100-sxm")) == (True, "per_expert")
    # v0.3.0 (26.02), scripts/performance/configs/qwen/qwen3_workload_base_configs.py lines
    # 421-429: QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 sets moe_flex_dispatcher_backend
    # "deepep" and moe_a2a_overlap True (PP2 VP12); lines 397-405: the B200 FP8 presets set no
    # backend (the provider's alltoall) and no overlap, with TE graphs of moe_router +
    # moe_preprocess
    job, s = _job("nemo-26.02", "qwen3-30b-a3b", "h100-sxm")
    assert (s["ep_overlap"], ep_dispatch(job, "h100-sxm")) == (True, "per_destination")
    job, s = _job("nemo-26.02", "qwen3-30b-a3b", "b200")
    assert (s["ep_overlap"], ep_dispatch(job, "b200")) == (False, "per_expert")


def test_a_flag_overrides_the_recipe_and_other_pairs_keep_the_profile():
    _, s = _job("nemo-26.04", "deepseek-v3", "b200", ep_overlap=False)
    assert s["ep_overlap"] is False
    # no recipe recorded for this pair: the profile's own fields (Megatron-Core defaults)
    job, s = _job("nemo-26.04", "deepseek-v3", "a100-sxm-80gb")
    assert s["ep_overlap"] is False
    assert ep_dispatch(job, "a100-sxm-80gb") == "per_expert"
    # DeepSeek's own framework: per destination by its profile field (no recipe table)
    job, _ = _job("deepseek-hai-llm", "deepseek-v3", "h800")
    assert ep_dispatch(job, "h800") == "per_destination"


def test_an_unknown_dispatcher_is_refused():
    raw = {"profiles": {"x": {
        "kind": "training", "name": "x", "version": "1", "source": "megatron-bridge-perf",
        "moe_recipes": [{"model": "deepseek-v3", "gpu": "b200", "dispatcher": "nccl"}],
        "moe_recipes_source": "megatron-bridge-perf-configs-v0-4-2"}}}
    with pytest.raises(BadInput, match="moe_recipes must be"):
        _parse(raw, "test.toml")


def test_dedup_buffers_two_nodes():
    # Qwen3-30B-A3B (128 experts, top-8, hidden 2048), EP16 over 2 nodes of 8, 4096 tokens of
    # 16-bit rows per rank. A node holds 64 experts; a token misses it with probability
    # C(64, 8) / C(128, 8), so it reaches 2 (1 - C(64,8)/C(128,8)) nodes; it reaches each of
    # the 16 GPUs (8 experts each) unless all 8 picks avoid it: 16 (1 - C(120,8)/C(128,8)).
    m = SimpleNamespace(n_experts=128, top_k=8, expert_groups=0, groups_per_token=0)
    c = SimpleNamespace(m=m, e_a=2.0, T=4096.0, sp_div=1.0, h=2048.0, ep=np.float64(16.0))
    rdma, n_nodes, nvl = dedup_buffers(c, np.float64(8.0))
    t_bytes = 2.0 * 4096 * 2048
    nodes = 2 * (1 - comb(64, 8) / comb(128, 8))
    gpus = 16 * (1 - comb(120, 8) / comb(128, 8))
    assert float(n_nodes) == 2.0
    assert np.isclose(float(rdma), t_bytes * nodes)
    assert np.isclose(float(nvl), t_bytes * gpus)
    # what crosses the network per token: nodes x 1/2 = 0.997 copies, where the all-to-all
    # dispatcher sends every one of the 8 routed copies and half of them leave the node (4)
    assert np.isclose(nodes / 2, 0.99690, atol=1e-5)


def _deepseek_nodes(ep: float) -> float:
    m = get_model("deepseek-v3")
    c = SimpleNamespace(m=m, e_a=2.0, T=4096.0, sp_div=1.0, h=float(m.hidden),
                        ep=np.float64(ep))
    rdma, n_nodes, _ = dedup_buffers(c, np.float64(8.0))
    assert float(n_nodes) == ep / 8
    return float(rdma) / (2.0 * 4096 * m.hidden)


def test_node_limited_routing_caps_the_nodes():
    # DeepSeek-V3: 256 experts in 8 groups, top-4 groups per token (report Sec. 3.2.2, config
    # n_group 8, topk_group 4). EP64 over 8 nodes: a node holds one group, so a token reaches
    # the 4 nodes of its 4 groups (uniform routing over all 256 experts would reach
    # 8 (1 - C(224, 8) / C(256, 8)) = 5.3)
    assert 8 * (1 - comb(224, 8) / comb(256, 8)) > 4.0
    assert np.isclose(_deepseek_nodes(64.0), 4.0)
    # EP32 over 4 nodes, two groups a node: the token's 4 groups miss a node with probability
    # C(6, 4) / C(8, 4) = 15 / 70, so it reaches 4 (1 - 15/70) = 3.14 nodes (uniform routing
    # over the experts: 4 (1 - C(192, 8) / C(256, 8)) = 3.6)
    assert np.isclose(_deepseek_nodes(32.0), 4 * (1 - comb(6, 4) / comb(8, 4)))
    assert 4 * (1 - comb(192, 8) / comb(256, 8)) > 3.5


@pytest.mark.parametrize("nodes,dispatch,combine", [(2, 43e9, 43e9), (4, 58e9, 57e9),
                                                     (8, 51e9, 50e9)])
def test_network_stage_at_deepep_bandwidth(nodes, dispatch, combine):
    # DeepEP V1 docs/legacy.md (source deepep-v1-normal-kernels): normal kernels on H800 with CX7
    # IB 400 Gb/s (50 GB/s a NIC), 4096 tokens of hidden 7168 per rank, top-4 groups, top-8
    # experts: RDMA bandwidth 43 / 58 / 51 GB/s dispatch, 43 / 57 / 50 combine at EP16 / 32 / 64.
    # Those GB/s count every node a token reaches, its own included (tests/test_internode.py:
    # num_rdma_token_sent = distinct topk_idx // experts-per-node, source
    # deepep-test-internode-rdma-bytes), so the call lasts counted bytes / rate. The wire alone
    # (the collectives engine's all-to-all over one rank per node, which sends the (n - 1) / n of
    # the buffer that leaves the node, at the rings' NIC share: collective_time("all_to_all_wire"),
    # as network_stage_time reads it, not NCCL's own all-to-all share) is faster than that at
    # every size, 2.2x at 2 nodes, so the kernel's rate sets the stage (step/comm.py
    # network_stage_time).
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.step.comm import kernel_rate

    cl = make_cluster("h800", 8 * nodes, gpus_per_node=8, inter="ndr-400")
    # nodes a token reaches in the test's routing (top-min(nodes, 4) nodes, then 8 of the 256
    # experts inside them): 2 (1 - C(128,8)/C(256,8)), 4 (1 - C(192,8)/C(256,8)), 4 (1 - C(96,8)/C(128,8))
    reach = {2: 2 * (1 - comb(128, 8) / comb(256, 8)), 4: 4 * (1 - comb(192, 8) / comb(256, 8)),
             8: 4 * (1 - comb(96, 8) / comb(128, 8))}[nodes]
    buf = 4096 * 7168 * 2.0 * reach
    wire = float(collective_time("all_to_all_wire", buf, float(nodes), 1.0, cl))
    assert wire < buf / dispatch
    if nodes == 2:
        assert buf / dispatch / wire > 2.0
    # the rate the stage is priced at: the published one over the 50 GB/s NIC it was measured on
    assert float(kernel_rate("deepep", "dispatch", nodes)) == pytest.approx(dispatch / 50e9)
    assert float(kernel_rate("deepep", "combine", nodes)) == pytest.approx(combine / 50e9)
    # between measured node counts: interpolated in log nodes; beyond them: held
    assert float(kernel_rate("deepep", "dispatch", 16.0)) == pytest.approx(51e9 / 50e9)
    mid = (43e9 + 58e9) / 2 / 50e9  # 2.83 nodes is halfway between 2 and 4 in log nodes
    assert float(kernel_rate("deepep", "dispatch", 2 ** 1.5)) == pytest.approx(mid)


def _qwen30b_ep_candidate(fid: str, gpu: str, gpus: int, global_batch_seqs: int, precision: str):
    """The one candidate layout (analytic/step/candidates.py) of Qwen3-30B-A3B at 4096 tokens on
    ``gpus`` GPUs with EP = DP = gpus (TP, PP, CP 1, ZeRO-1, 64 micro-batches of one sequence,
    no recompute) under ``fid``'s recipe, and its cluster."""
    from scalemodel.analytic.planner import make_cluster, make_job
    from scalemodel.analytic.step.candidates import candidates

    m = get_model("qwen3-30b-a3b")
    _, s = job_settings(fid, gpu, model=m.id)
    job = make_job(m, seq_len=4096, global_batch_seqs=global_batch_seqs, precision=precision,
                   **s)
    cl = make_cluster(gpu, gpus)
    cols = {"tp": [1], "pp": [1], "dp": [gpus], "cp": [1], "ep": [gpus], "etp": [1],
            "zero": [1], "vpp": [1], "micro_batch": [1], "microbatches": [64], "rc": [0]}
    return candidates(job, cl, cols), cl


def test_hybrid_ep_dispatch_of_the_two_node_qwen3_row():
    # Hybrid-EP README, H100 table (source hybrid-ep-readme-h100-bandwidth): 16 ranks (2 nodes),
    # 16 SMs, torch API: BF16 dispatch 54.47 GB/s, combine 53.35 GB/s of counted RDMA bytes
    # (own node included, source deepep-test-internode-rdma-bytes). Qwen3-30B-A3B on 16 H100,
    # EP16, NeMo 26.06's Hybrid-EP recipe: a rank's 4096 tokens of 2 x 2048 bytes reach
    # 2 (1 - C(64,8)/C(128,8)) nodes, so one dispatch lasts 4096 x 4096 x 1.994 / 54.47e9 s
    # (0.61 ms) and one combine the same bytes at 53.35 GB/s, where the wire alone (the RDMA
    # under the kernel, collective_time("all_to_all_wire") at the rings' NIC share) would take
    # about half as long; the NVLink stage (6.6 GPUs a token) is shorter than either.
    from scalemodel.analytic.step.comm import _dedup_dispatch

    c, cl = _qwen30b_ep_candidate("nemo-26.06", "h100-sxm", 16, 1024, "fp8")
    counted = 4096 * 2.0 * 2048 * 2 * (1 - comb(64, 8) / comb(128, 8))
    want = 0.5 * (counted / 54.47e9 + counted / 53.35e9)
    assert float(_dedup_dispatch(c, np.float64(8.0))[0]) == pytest.approx(want, rel=1e-9)
    wire = float(collective_time("all_to_all_wire", counted, 2.0, 1.0, cl))
    assert wire < 0.6 * want


def test_nvlink_stage_at_the_kernels_measured_rate():
    # Hybrid-EP README, GB200 table (source hybrid-ep-readme-gb200-bandwidth): 8 ranks of one
    # NVL72 domain, 32 SMs (the perf scripts' moe_hybridep_num_sms), torch API: BF16 dispatch
    # 545.71 GB/s, combine 568.94 GB/s of received rows (own rank's copy included, tests/
    # test_hybrid_ep.py). Qwen3-30B-A3B on 8 GB200, EP8, NeMo 26.02's Hybrid-EP recipe: a rank
    # receives 4096 x 8 (1 - C(112,8)/C(128,8)) rows of 2 x 2048 bytes (16 experts a GPU); one
    # dispatch lasts those bytes / 545.71e9 s, one combine / 568.94e9 s, where the collectives
    # engine's NVLink wire under the kernel (all_to_all_wire, the ring efficiency; NCCL's own
    # all-to-all reads 0.711 of the line rate, docs/comm.md "All-to-all inside a node") alone
    # is about 1.5x faster. No network stage in one domain.
    from scalemodel.analytic.step.comm import _dedup_dispatch, kernel_rate

    c, cl = _qwen30b_ep_candidate("nemo-26.02", "gb200", 8, 512, "bf16")
    rows = 4096 * 8 * (1 - comb(112, 8) / comb(128, 8))
    buf = rows * 2.0 * 2048
    want = 0.5 * (buf / 545.71e9 + buf / 568.94e9)
    assert float(_dedup_dispatch(c, np.float64(8.0))[0]) == pytest.approx(want, rel=1e-9)
    wire = float(collective_time("all_to_all_wire", buf, 8.0, 8.0, cl))
    assert 1.3 < want / wire < 1.7
    # the fraction of the 900 GB/s NVLink 5 per direction, by the ranks of the domain: held
    # beyond the 36 measured (479.02 / 900 for the dispatch)
    assert float(kernel_rate("hybridep", "dispatch", 64.0, "nvlink")) == pytest.approx(
        479.02e9 / 900e9)
    # DeepEP, intranode EP8 on H800 (source deepep-v1-normal-kernels): 153 / 158 GB/s of the
    # H800's 200 GB/s per direction, the one measured size
    assert float(kernel_rate("deepep", "dispatch", 8.0, "nvlink")) == pytest.approx(153 / 200)
    assert float(kernel_rate("deepep", "combine", 4.0, "nvlink")) == pytest.approx(158 / 200)


def test_combined_1f1b_passes_without_a_partner():
    from scalemodel.analytic.step.comm import ep_alone_share

    # combined_1f1b_schedule_for_no_pipelining's docstring, 4 micro-batches: phase 0 the first
    # forward alone, phases 1-3 paired, phase 4 the last backward alone -> 1 of 4 each way
    assert float(ep_alone_share(1.0, 4.0)) == 0.25
    # interleaved PP8 VP4, 128 micro-batches: stage r warms up (8 - r - 1) 2 + 3 x 8 + 1 chunks;
    # over the 8 stages that averages 7 + 24 + 1 = 32 of 128 x 4 = 512 chunk steps = 1 / 16
    warm = np.mean([(8 - r - 1) * 2 + 3 * 8 + 1 for r in range(8)])
    assert warm == 32.0
    assert np.isclose(float(ep_alone_share(8.0, 128.0)), warm / 512)
    # fewer micro-batches than stages: nothing pairs
    assert float(ep_alone_share(8.0, 4.0)) == 1.0


def test_ep_bytes_of_a_two_node_hybrid_ep_step():
    # Qwen3-30B-A3B on 16 H100 (2 nodes of 8), EP16, no recompute, NeMo 26.06's recipe
    # (Megatron-Bridge v0.5.0: Hybrid-EP): per step each rank runs 1024 / 16 = 64 micro-batches
    # of 4096 tokens through 48 MoE layers, 4 all-to-alls each (dispatch and combine, forward and
    # backward). A token of 2 x 2048 bytes reaches 2 (1 - C(64,8)/C(128,8)) nodes, half of them
    # remote: that many bytes leave over InfiniBand. The all-to-all dispatcher would send its 8
    # rows, 8 x 15/16 of them to other ranks.
    from scalemodel.analytic.planner import make_cluster, make_job, search

    m = get_model("qwen3-30b-a3b")
    _, s = job_settings("nemo-26.06", "h100-sxm", model=m.id)
    job = make_job(m, seq_len=4096, global_batch_seqs=1024, precision="fp8", **s)
    lay = {"tp": 1, "pp": 1, "dp": 16, "cp": 1, "ep": 16, "etp": 1, "zero": 1, "vpp": 1,
           "micro_batch": 1, "recompute": "none"}
    v = search(job, make_cluster("h100-sxm", 16), lay, top=0).best.values
    nodes = 2 * (1 - comb(64, 8) / comb(128, 8))
    want = 64 * 48 * 4 * (2.0 * 4096 * 2048) * nodes / 2
    assert np.isclose(float(v.ep_bytes), want, rtol=1e-9)
    assert want / (64 * 48 * 4 * 2.0 * 4096 * 2048 * 8 * 15 / 16) < 0.14


@pytest.mark.parametrize("groups,m,n,k,tflops", [(4, 8192, 4096, 7168, 1297),
                                                  (4, 8192, 7168, 2048, 1099),
                                                  (8, 4096, 4096, 7168, 1288),
                                                  (8, 4096, 7168, 2048, 1093)])
def test_fp8_expert_gemms_against_deepgemm(groups, m, n, k, tflops):
    # DeepGEMM README (source deepgemm-readme-2025-02): fp8 grouped GEMMs, contiguous layout, on
    # H800 at DeepSeek-V3's expert shapes. The planner prices each expert's GEMM at its shape plus
    # the per-launch cost of kernels.toml [grouped_gemm] (gemm.expert_mlp); DeepGEMM runs 1.1-1.2x
    # its CUTLASS baseline, so the planner, which prices a Transformer Engine / cuBLAS-class
    # kernel, may sit down to 1 / 1.2 of it and should not sit above it (at the H800's own burst
    # ceiling, the H100 MAMF row's 0.803, the 8 x 4096 x 4096 x 7168 row is at 0.848 of it).
    from scalemodel.analytic.step.gemm import gemm_time, grouped_overhead
    from scalemodel.specs import get_gpu

    g = get_gpu("h800")
    t = groups * (float(gemm_time(float(m), float(n), float(k), g, g.peak_flop_per_s("fp8"), 1.0,
                                  dtype_name="fp8")) + grouped_overhead("hopper"))
    rate = groups * 2.0 * m * n * k / t
    assert tflops * 1e12 / 1.2 < rate < tflops * 1e12 * 1.02
