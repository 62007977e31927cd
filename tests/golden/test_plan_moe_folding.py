"""MoE parallel folding: experts with their own tensor parallelism (etp 1 or the tp), the EP group
drawn from the tp x dp x cp ranks. Expected values are derived in each test from the layout."""

import json

import pytest

from scalemodel.analytic.memory import static_model
from scalemodel.analytic.planner import (
    collective_time,
    evaluate_one,
    gemm_time,
    make_cluster,
    make_job,
    search,
)
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.specs.sources import load_toml

HBM_EFF = load_toml("planner.toml")["gemm"]["hbm_efficiency"]  # memory-bound kernels reach

# Mixtral 8x7B on 16 H200 (two nodes; 141 GB so that both layouts fit), TP2 DP8 EP4, ZeRO 1: valid with the experts split like the dense
# MLP (ep 4 divides dp x cp = 8) and folded (ep 4 divides tp x dp x cp = 16)
MIX = {"tp": 2, "pp": 1, "dp": 8, "cp": 1, "ep": 4, "zero": 1, "vpp": 1, "micro_batch": 1,
       "recompute": "none"}


def _mix(etp):
    m = get_model("mixtral-8x7b")
    job = make_job(m, seq_len=4096, global_batch_seqs=32)
    cl = make_cluster("h200", 16)
    return m, job, cl, evaluate_one(job, cl, dict(MIX, etp=etp)).values


def test_folded_experts_hold_twice_the_weights():
    # Expert weights per GPU: all experts / (etp x ep). Mixtral: 32 layers x 8 experts x
    # 3 x 4096 x 14336 = 45.1e9 parameters; etp 2 -> / 8, etp 1 -> / 4; 16-bit weights (ZeRO 1
    # leaves them whole), one pipeline stage, so the weight bytes differ by
    # 2 B x 45.1e9 x (1/4 - 1/8). The optimizer states do not: folded, each expert shard is
    # shared by tp x dp / (etp x ep) = 4 ranks instead of 2, which ZeRO 1 divides them over.
    m, _, _, split = _mix(2)
    *_, folded = _mix(1)
    experts = 32 * 8 * 3 * 4096 * 14336
    assert static_model(m).sum_exp == experts
    assert folded.mem_params - split.mem_params == pytest.approx(2 * experts * (1 / 4 - 1 / 8))
    assert folded.mem_optimizer == pytest.approx(split.mem_optimizer)


def test_folded_experts_change_the_gemm_shapes_not_the_flops():
    # A micro-batch of 4,096 tokens on each rank, top-2 of 8 experts, EP4 -> 2 local experts.
    # Split (etp 2): an expert sees 4096 x 2 / 2 = 4,096 tokens (the TP group's tokens, gathered)
    # and holds half its width, 14336 / 2. Folded (etp 1): 4096 x 2 x 1 / (2 x 2) = 2,048 tokens
    # (its own sequence-parallel half) at the full width. Same FLOPs, different GEMMs: the step's
    # compute differs by exactly the two expert MLPs' GEMM times, for 32 layers x 4 micro-batches.
    m, job, cl, split = _mix(2)
    *_, folded = _mix(1)
    g, peak = cl.gpu, cl.gpu.peak_flop_per_s("bf16")

    def mlp(tokens, width):
        t = 0.0
        for M, N, K in ((tokens, 2 * width, m.hidden), (tokens, m.hidden, width)):
            t += float(gemm_time(M, N, K, g, peak, 2.0))  # forward
            t += float(gemm_time(M, K, N, g, peak, 2.0) + gemm_time(K, N, M, g, peak, 2.0))
        return 2 * t  # two local experts

    # and the sort of the received copies by expert (layers.permute_time): R = 2048 tokens x
    # top-2 x etp copies, read and write 2 B x 4096 each, twice forward and twice backward:
    # folded (etp 1) moves 4 x 2 x 4096 x 4096 x (1 - 2) B per direction fewer than split
    sort = 2 * 4 * 2 * 4096 * 4096 * (1 - 2) / (g.hbm_bytes_per_s * HBM_EFF)
    expected = 4 * 32 * (mlp(2048.0, 14336.0) - mlp(4096.0, 7168.0) + sort)
    assert folded.compute_s - split.compute_s == pytest.approx(expected, rel=1e-9)
    assert folded.hw_flops == pytest.approx(split.hw_flops, rel=1e-12)


def test_folded_ep_group_stays_in_the_node():
    # TP2 EP8 on two 8-GPU nodes: split, the EP group strides over the data-parallel ranks (two
    # apart), so its 8 members span 16 GPUs and the all-to-all crosses the network; folded, the
    # group is 8 consecutive ranks, one node
    m = get_model("mixtral-8x7b")
    job = make_job(m, seq_len=4096, global_batch_seqs=32)
    cl = make_cluster("h200", 16)
    lay = dict(MIX, ep=8)
    split = evaluate_one(job, cl, dict(lay, etp=2)).values
    folded = evaluate_one(job, cl, dict(lay, etp=1)).values
    assert not split.ep_intra and folded.ep_intra


def test_expert_gradients_move_over_the_expert_group():
    # ZeRO 1, 16 GPUs, TP2 DP8 EP4: the dense shard reduce-scatters over dp = 8 ranks, the expert
    # shard over tp dp / (etp ep) ranks: 2 when split, 4 when folded. Bytes per GPU per step
    # (fp32 gradients, reduce-scatter, then the 16-bit parameter all-gather):
    # (G - 1) / G x (4 + 2) B x local parameters, for each group.
    from scalemodel.analytic.params import count_params

    m = get_model("mixtral-8x7b")
    pc = count_params(m)
    experts = 32 * 8 * 3 * 4096 * 14336
    dense = pc.total - experts
    for etp, eg in ((2, 2), (1, 4)):
        *_, v = _mix(etp)
        dense_local = (dense - sum(lp.replicated for lp in pc.layers) - pc.final_norm) / 2 \
            + sum(lp.replicated for lp in pc.layers) + pc.final_norm
        exp_local = experts / (etp * 4)
        want = 7 / 8 * 6 * dense_local + (eg - 1) / eg * 6 * exp_local
        assert v.dp_bytes == pytest.approx(want, rel=1e-9), etp


def test_folded_experts_skip_the_expert_tp_gather():
    # With experts split over the 2 TP ranks, the tokens an EP rank received are all-gathered
    # over those 2 ranks before the expert MLP (and reduce-scattered after): the gathered size is
    # 2 B x 4096 tokens x top-2 x 4096, in each direction, forward and backward (4 per layer).
    # Folded (etp 1) there is no such gather; the all-to-all bytes are the same.
    m, job, cl, split = _mix(2)
    *_, folded = _mix(1)
    gather = collective_time("all_gather", 2 * 4096 * 2 * m.hidden, 2, 2, cl)
    micro_batches = 32 // 8
    assert split.ep_s - folded.ep_s == pytest.approx(
        micro_batches * m.n_layers * 4 * gather, rel=1e-9)
    assert split.ep_bytes == pytest.approx(folded.ep_bytes)


def test_ep_wider_than_dp_needs_folding():
    # Qwen3-235B on 256 GPUs, TP2 PP8 EP32 (Megatron-Bridge's DGX-H100 recipe): dp = 16, so EP32
    # exists only when the experts are unsplit and the EP group spans the TP ranks (32 = 2 x 16)
    m = get_model("qwen3-235b-a22b")
    job = make_job(m, seq_len=4096, global_batch_seqs=8192, precision="fp8")
    cl = make_cluster("h100-sxm", 256)
    lay = {"tp": 2, "pp": 8, "cp": 1, "ep": 32, "vpp": 4, "micro_batch": 1}
    res = search(job, cl, lay, top=3)
    assert {r.layout["etp"] for r in res.rows} == {1}
    with pytest.raises(BadInput, match="ep must divide"):
        search(job, cl, dict(lay, etp=2), top=0)


def test_folding_needs_expert_parallelism():
    job = make_job(get_model("mixtral-8x7b"), seq_len=4096, global_batch_seqs=32)
    with pytest.raises(BadInput, match="ep > 1"):
        search(job, make_cluster("h200", 16), dict(MIX, ep=1, etp=1), top=0)


def test_dense_models_have_no_expert_layout():
    job = make_job(get_model("llama-3-8b"), seq_len=4096, global_batch_seqs=64)
    cl = make_cluster("h100-sxm", 8)
    assert search(job, cl, {"tp": 2}, top=0).best.layout["etp"] == 2
    with pytest.raises(BadInput, match="etp must be its tp"):
        search(job, cl, {"tp": 2, "etp": 1}, top=0)


def test_cli_etp_and_megatron_export(capsys, tmp_path):
    argv = ["plan", "train", "--model", "qwen3-235b-a22b", "--gpus", "256", "--seq-len", "4096",
            "--global-batch", "8192", "--precision", "fp8", "--layout",
            "tp=2,pp=8,vpp=4,ep=32,micro_batch=1,zero=1,recompute=none"]
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["best"]["etp"] == 1 and d["best"]["ep"] == 32
    assert main(argv + ["--export", "megatron"]) == 0
    out = capsys.readouterr().out
    assert "--expert-tensor-parallel-size 1" in out
    assert "--expert-model-parallel-size 32" in out
    # etp that is neither 1 nor the tp: one line, exit 2
    rc = main(["plan", "train", "--model", "mixtral-8x7b", "--gpus", "16", "--seq-len", "4096",
               "--global-batch", "32", "--layout", "tp=4,ep=4,etp=2"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "etp must be 1 or the tp" in err
