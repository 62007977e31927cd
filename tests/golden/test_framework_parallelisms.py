"""Golden checks of what each framework profile lets the planner search (frameworks.toml
``parallelisms``) and of the pipeline send/recv overlap it prices (``pp_p2p_overlap``). Each
expectation names the framework source it comes from (sources_frameworks.toml)."""

import json
import re

import numpy as np
import pytest

from conftest import sourced_field, user_profile_refusal
from scalemodel.analytic.planner import (
    evaluate_one,
    layout_grid,
    make_cluster,
    make_job,
    search,
)
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import framework_ids, get_framework


def _job(model="llama-3-8b", fw=None, seq=2048, batch=256, **kw):
    return make_job(get_model(model), seq_len=seq, global_batch_seqs=batch, framework_id=fw,
                    **kw)


def _grid(fw, model="llama-3-8b", n=64, seq=2048, batch=256):
    return layout_grid(_job(model, fw, seq, batch), make_cluster("a100-sxm-80gb", n)).cols


def test_megatron_2021_grid_has_no_zero_no_sp_cp_ep():
    # Megatron-LM at 3d718bfc (2021-08-31), megatron/arguments.py: tensor, pipeline and
    # virtual-pipeline sizes, no distributed optimizer, no sequence / context / expert parallelism
    c = _grid("megatron-lm-2021")
    assert set(np.unique(c["zero"]).tolist()) == {0}
    assert set(np.unique(c["cp"]).tolist()) == {1}
    assert set(np.unique(c["ep"]).tolist()) == {1}
    assert c["tp"].max() > 1 and c["pp"].max() > 1 and c["vpp"].max() > 1


def test_megatron_2021_search_never_returns_zero():
    # the best and every reported row of a free search keep ZeRO 0
    j = _job("llama-3-8b", "megatron-lm-2021")
    res = search(j, make_cluster("a100-sxm-80gb", 32), top=5)
    assert all(r.layout["zero"] == 0 for r in [*res.rows, *res.pareto])


def test_llm_foundry_is_fsdp_only():
    # llm-foundry v0.4.0: Composer FSDP (FULL_SHARD / SHARD_GRAD_OP / NO_SHARD), tensor
    # parallelism only from 2024-09 (PR #1521), no pipeline parallelism
    c = _grid("llm-foundry", model="llama-3-70b")
    assert set(np.unique(c["tp"]).tolist()) == {1}
    assert set(np.unique(c["pp"]).tolist()) == {1}
    assert set(np.unique(c["cp"]).tolist()) == {1}
    assert set(np.unique(c["zero"]).tolist()) == {0, 2, 3}  # NO_SHARD, SHARD_GRAD_OP, FULL_SHARD
    res = search(_job("llama-3-70b", "llm-foundry"), make_cluster("a100-sxm-80gb", 64), top=5)
    assert all(r.layout["tp"] == 1 and r.layout["pp"] == 1 for r in res.rows)


def test_torchtitan_2025_has_no_zero1_and_no_ep():
    # torchtitan at 6b11290c (2025-06-27) config_manager.py Parallelism: DDP or FSDP2 (reshard
    # after forward or not), no optimizer-only sharding, no expert-parallel degree
    c = _grid("torchtitan", model="mixtral-8x7b")
    assert set(np.unique(c["ep"]).tolist()) == {1}
    assert _grid("megatron-core", model="mixtral-8x7b")["ep"].max() == 8
    c = _grid("torchtitan")
    assert 1 not in set(np.unique(c["zero"]).tolist())
    assert {2, 3} <= set(np.unique(c["zero"]).tolist())
    assert c["cp"].max() > 1 and c["tp"].max() > 1 and c["vpp"].max() > 1


def test_hai_llm_has_no_cp_no_virtual_stages_and_zero1_only():
    # DeepSeek LLM Sec. 3.3 (HAI-LLM: DP, TP, SP, 1F1B PP) and the V3 report Sec. 3.2 (DualPipe,
    # EP, ZeRO-1): no context parallelism, interleaving or ZeRO-2/3 is described
    c = _grid("deepseek-hai-llm")
    assert set(np.unique(c["cp"]).tolist()) == {1}
    assert set(np.unique(c["vpp"]).tolist()) == {1}
    assert set(np.unique(c["zero"]).tolist()) == {0, 1}


def test_megatron_core_offers_the_whole_grid():
    # core_r0.8.0 arguments (TP, SP, PP, VPP, CP, EP, distributed optimizer) and Megatron-FSDP's
    # sharding strategies from core_v0.12.0: nothing is cut from the grid
    assert _grid("megatron-core")["tp"].size == _grid(None)["tp"].size


def test_sequence_parallel_field_agrees_with_parallelisms():
    # one fact, two records: the pricing reads sequence_parallel, the grid reads parallelisms
    for fid in framework_ids():
        fw = get_framework(fid)
        par = fw.values.get("parallelisms")
        if fw.kind != "training" or par is None or "tp" not in par:
            continue
        assert ("sp" in par) == bool(fw.values.get("sequence_parallel", True)), fid


@pytest.mark.parametrize("fw, layout, needle", [
    ("megatron-lm-2021", "zero=1", "ZeRO-1"),
    ("megatron-lm-2021", "cp=2", "context parallelism"),
    ("llm-foundry", "tp=8", "tensor parallelism"),
    ("llm-foundry", "pp=2", "pipeline parallelism"),
    ("torchtitan", "zero=1", "ZeRO-1"),
    ("deepseek-hai-llm", "cp=2", "context parallelism"),
    # recompute_options: selective recompute came with Korthikanti et al. 2022 (after the SC21
    # code); llm-foundry's activation_checkpointing is per block, on or off
    ("megatron-lm-2021", "recompute=selective", "offers recompute none, full only"),
    ("llm-foundry", "recompute=selective", "offers recompute none, full only"),
])
def test_explicit_layout_the_profile_cannot_run_is_one_line_exit_2(capsys, fw, layout, needle):
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "64", "--seq-len", "2048",
               "--global-batch", "256", "--framework", fw, "--layout", layout])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and fw in err and len(err.splitlines()) == 1


def test_explicit_layouts_file_is_checked_too():
    j = _job("llama-3-8b", "megatron-lm-2021")
    with pytest.raises(BadInput, match="ZeRO-1"):
        evaluate_one(j, make_cluster("a100-sxm-80gb", 64),
                     {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero": 1, "vpp": 1,
                      "micro_batch": 1, "recompute": "full"})
    from scalemodel.analytic.layout import TrainLayout
    from scalemodel.analytic.planner import evaluate_layouts

    with pytest.raises(BadInput, match="ZeRO-1"):
        evaluate_layouts(j, make_cluster("a100-sxm-80gb", 64),
                         [TrainLayout(tp=1, pp=1, dp=64, cp=1, ep=1, zero=1, vpp=1,
                                      micro_batch=1, recompute="full")])
    with pytest.raises(BadInput, match="recompute=selective"):
        evaluate_layouts(j, make_cluster("a100-sxm-80gb", 64),
                         [TrainLayout(tp=1, pp=1, dp=64, cp=1, ep=1, zero=0, vpp=1,
                                      micro_batch=1, recompute="selective")])


# --- pipeline send/recv overlap ------------------------------------------------------------------

LAY = {"tp": 8, "pp": 8, "dp": 1, "cp": 1, "ep": 1, "zero": 0, "micro_batch": 1,
       "recompute": "full"}


def _pp(fw, vpp, n=64, batch=64, **lay):
    j = _job("llama-3-70b", fw, seq=4096, batch=batch)
    return evaluate_one(j, make_cluster("h100-sxm", n), dict(LAY, vpp=vpp, **lay)).values


def test_interleaved_p2p_leaves_warmup_and_flush_exposed():
    # Megatron-Core (core_v0.15.0 schedules.py; training/arguments.py overlap_p2p_comm on, warm-up
    # / flush overlap off): with v virtual stages the exposed crossings per direction are the
    # first stage's warm-up chunks min(v m, 2 (p - 1) + (v - 1) p) and the p - 1 of the fill, of
    # the v m + p - 1 the 2021 code leaves exposed (batch_isend_irecv + synchronize).
    p, v, m = 8, 2, 64  # batch 64 over dp 1 at micro-batch 1
    old = _pp("megatron-lm-2021", v).pp_s
    new = _pp("megatron-core", v).pp_s
    warm = min(v * m, 2 * (p - 1) + (v - 1) * p)
    # the message sent is the same size in both (the 2021 scatter-gather split by tp, SP's
    # shard); the 2021 receiver then all-gathers the tp chunks over NVLink (pp_recv_gather,
    # p2p_communication.py at 6985e589), which SP does not need
    send, gather = _send_and_gather()
    assert new / old == pytest.approx((warm + p - 1) / (v * m + p - 1) * send / (send + gather),
                                      rel=1e-9)


def _send_and_gather():
    from scalemodel.analytic.step.comm import collective_time

    cl = make_cluster("h100-sxm", 64)
    msg = 2.0 * 4096 * 8192  # 16-bit s x h of Llama 3 70B, micro-batch 1
    return (float(collective_time("send_recv", msg / 8, 2.0, 1.0, cl)),
            float(collective_time("all_gather", msg, 8.0, 8.0, cl)))


def test_no_virtual_stages_no_overlap_in_megatron_core():
    # --no-overlap-p2p-communication is forced when no virtual pipeline is given (batched P2P):
    # every crossing exposed in both; the 2021 one also all-gathers what it received
    a, b = _pp("megatron-core", 1), _pp("megatron-lm-2021", 1)
    send, gather = _send_and_gather()
    assert a.pp_s / b.pp_s == pytest.approx(send / (send + gather), rel=1e-9) and a.pp_s > 0


def test_deepspeed_pipeline_engine_pays_two_transfers_per_crossing():
    # DeepSpeed at 0457bb1c, runtime/pipe/schedule.py TrainSchedule.steps: a forward step runs
    # RecvActivation then SendGrad, a backward step SendActivation then RecvGrad, and
    # runtime/pipe/p2p.py send / recv are blocking dist.send / dist.recv (async_op must be
    # False): where Megatron-LM's 1F1B posts a step's send and receive in one batch_isend_irecv
    # (one transfer time), the PipelineEngine pays two in a row. The same layout and split (80
    # layers, 10 a stage: megatron-lm-2021 splits evenly only, DeepSpeed as balanced as it can)
    # and every other field of megatron-lm-2021: the P2P term doubles, the compute does not move.
    ds, mg = (_pp("megatron-deepspeed-2021", 1, stages=(10,) * 8),
              _pp("megatron-lm-2021", 1, stages=(10,) * 8))
    assert ds.pp_s == pytest.approx(2 * mg.pp_s, rel=1e-12) and mg.pp_s > 0
    assert ds.pp_raw_s == pytest.approx(2 * mg.pp_raw_s, rel=1e-12)
    assert ds.compute_s == mg.compute_s and ds.bubble_s == mg.bubble_s


def test_dualpipe_hides_the_pipeline_p2p():
    # DeepSeek-V3 report Sec. 3.2.1: DualPipe hides both the all-to-all and the PP communication
    lay = {"tp": 1, "pp": 8, "dp": 8, "cp": 1, "ep": 1, "zero": 1, "vpp": 1, "micro_batch": 1,
           "recompute": "full"}
    j = _job("llama-3-8b", "deepseek-hai-llm", seq=4096, batch=64)
    assert evaluate_one(j, make_cluster("h100-sxm", 64), lay).values.pp_s == 0.0


def test_plan_train_json_respects_the_profile(capsys):
    rc = main(["plan", "train", "--model", "llama-3-70b", "--gpus", "64", "--seq-len", "2048",
               "--global-batch", "256", "--framework", "llm-foundry", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert all(r["tp"] == 1 and r["pp"] == 1 and r["zero"] in (0, 2, 3) for r in d["top"])


def test_deepspeed_2024_has_no_tp_and_no_virtual_stages():
    # DeepSpeed v0.16.0: pipeline engine with TrainSchedule (1F1B only), Ulysses, MoE, ZeRO 1-3;
    # tensor-parallel training (AutoTP) first in v0.16.4
    c = _grid("deepspeed")
    assert set(np.unique(c["tp"]).tolist()) == {1}
    assert set(np.unique(c["vpp"]).tolist()) == {1}
    assert c["pp"].max() > 1 and c["cp"].max() > 1
    assert set(np.unique(c["zero"]).tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("field, value, needle", [
    ("parallelisms", '["tp", "zero4"]', "a list of tp, sp, pp"),
    ("pp_p2p_overlap", '"sometimes"', "none, interleaved, all"),
    ("pipeline_split", '"odd"', "even .* any, edge_chunks .* or edge_chunks_even"),
    ("pp_p2p_calls", "3", "1 or 2"),
    ("ddp_bucket_bytes", "3", "0, 2 or 4"),
    ("cp_gather_overlap", '"no"', "true or false"),
    ("cp_compiled_overlap", '"no"', "true or false"),
    ("cp_merge_bytes_compiled", "{ fwd_out = 10 }", "fwd_out, fwd_kv, bwd_q, bwd_kv"),
    ("unsharded_step_grad_bytes", "-4", "bytes per parameter >= 0"),
    ("grad_buffer_bytes", "3", "2, 4 or 6"),
    ("grad_buffer_bytes", "1", "2, 4 or 6"),  # no fp8 main_grad buffer in any profile read
    ("activation_offload_recipes",
     '[{ model = "llama-3-70b", gpu = "gb200", precision = "current", layers = 0 }]',
     "layers = a whole number of at least 1"),
    ("activation_offload_recipes",
     '[{ model = "llama-3-70b", gpu = "gb200", precision = "fp9", layers = 40 }]',
     r"precision = bf16 \| "),  # the message's literal '|', escaped (a bare '|' matched anything)
])
def test_profile_field_bad_value_is_one_line(tmp_path, field, value, needle):
    msg = user_profile_refusal(tmp_path, sourced_field(field, value, "deepspeed-config"),
                               kind="training", source="deepspeed-config", profile="x")
    assert re.search(needle, msg)


# --- memory --fit keeps to the profile as the planner's grid does ---------------------------------

def test_memory_fit_keeps_to_what_the_profile_offers(capsys):
    # llm-foundry (v0.4.0): FSDP only, so no TP / PP; Megatron-LM of 2021: no ZeRO, no
    # selective recompute and no sequence parallelism (Korthikanti et al. 2022 came later)
    for fw, check in (("llm-foundry", lambda lay: lay["tp"] == 1 and lay["pp"] == 1),
                      ("megatron-lm-2021", lambda lay: lay["zero"] == 0 and not lay["sp"]
                       and lay["recompute"] in ("none", "full"))):
        assert main(["memory", "--model", "llama-3-70b", "--fit", "--framework", fw,
                     "--json"]) == 0
        lay = json.loads(capsys.readouterr().out)["layout"]
        assert check(lay), (fw, lay)
    rc = main(["memory", "--model", "llama-3-70b", "--fit", "--framework", "llm-foundry",
               "--tp", "8"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "llm-foundry" in err and len(err.splitlines()) == 1


def test_deepspeed_pipeline_runs_with_zero1_at_most(capsys):
    # DeepSpeed v0.14-v0.16: PipelineEngine refuses ZeRO stage 2 or 3 (frameworks.toml
    # pipeline_zero_max = 1, source deepspeed-parallel-2024)
    j = _job("llama-3-8b", "deepspeed")
    g = layout_grid(j, make_cluster("a100-sxm-80gb", 64))
    pp, zero = g.cols["pp"], g.cols["zero"]
    assert (pp > 1).any() and not ((pp > 1) & (zero > 1)).any()
    assert ((pp == 1) & (zero == 3)).any()  # ZeRO-3 without pipeline stages stays offered
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "16", "--framework",
               "deepspeed", "--layout", "pp=2,zero=3"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "ZeRO-1 at most" in err and len(err.splitlines()) == 1
    assert main(["memory", "--model", "llama-3-70b", "--fit", "--framework", "deepspeed",
                 "--json"]) == 0
    lay = json.loads(capsys.readouterr().out)["layout"]
    assert not (lay["pp"] > 1 and lay["zero"] > 1)


def test_megatron_core_r080_splits_the_layers_evenly_only():
    # Megatron-LM core_r0.8.0 (source megatron-core-r080-even-split): validate_args asserts
    # num_layers % pp == 0 and (num_layers / pp) % layers-per-virtual-stage == 0 with
    # interleaving; get_num_layers_to_build gives every chunk num_layers // pp // vpp layers.
    # Llama 3 8B's 32 layers on 64 GPUs: pp x vpp must divide 32, and one layer per virtual
    # stage (vpp = 32 / pp) is a split the release can run
    c = _grid("megatron-core-0.8")
    piped = c["pp"] > 1
    assert piped.any()
    assert (32 % (c["pp"][piped] * c["vpp"][piped]) == 0).all()
    pairs = set(zip(c["pp"][piped].tolist(), c["vpp"][piped].tolist(), strict=True))
    assert (2, 16) in pairs and (4, 8) in pairs and (2, 3) not in pairs
    # the current Megatron-Core (any split: --pipeline-model-parallel-layout) keeps pp2 x vpp3
    cur = _grid("megatron-core")
    assert (2, 3) in set(zip(cur["pp"].tolist(), cur["vpp"].tolist(), strict=True))
    # an explicit layout the release cannot split is one line
    job, cl = _job(fw="megatron-core-0.8"), make_cluster("a100-sxm-80gb", 64)
    with pytest.raises(BadInput, match="evenly only"):
        evaluate_one(job, cl, dict(tp=1, pp=2, dp=32, cp=1, ep=1, zero=1, vpp=3, micro_batch=1,
                                   recompute="none"))
    # and the split it prices is L / pp on every stage, the output head adding no layers
    res = search(job, cl, dict(tp=1, pp=4, dp=16, cp=1, ep=1, zero=1, vpp=1, micro_batch=1,
                               recompute="full"), top=0)
    assert res.stage_layers == (8, 8, 8, 8)
    assert res.chunk_layers == (8, 8, 8, 8)


def test_megatron_core_r080_runs_take_the_readme_tp_overlap():
    # Megatron-LM README at f2e5db40 (the r0.8.0 model table): the runs pass --tp-comm-overlap
    # (source megatron-lm-readme-tp-comm-overlap); the library default stays off
    fw = get_framework("megatron-core-0.8")
    assert fw.values["tp_overlap"] is True
    assert fw.sources["tp_overlap"] == "megatron-lm-readme-tp-comm-overlap"
    assert get_framework("megatron-core").values["tp_overlap"] is False


def test_torchtitan_2024_04_is_fsdp2_zero3_and_tp_only():
    # torchtitan 395a52627 / 1ea476e9f parallelize_llama.py: 'PP not implemented yet.', FSDP2
    # fully_shard with reshard_after_forward on every block but the last (no zero2, no zero1),
    # TP with SequenceParallel norms; config_manager.py has no context or expert degree
    # (source torchtitan-1ea476e9f-parallelisms)
    c = _grid("torchtitan-2024-04", model="llama-3-70b")
    assert set(np.unique(c["pp"]).tolist()) == {1}
    assert set(np.unique(c["cp"]).tolist()) == {1}
    assert set(np.unique(c["ep"]).tolist()) == {1}
    assert set(np.unique(c["zero"]).tolist()) <= {0, 3}
    assert 3 in np.unique(c["zero"]).tolist() and c["tp"].max() > 1


def test_torchtitan_2024_12_has_no_reshard_option():
    # torchtitan 9dec370 apply_fsdp fixes reshard_after_forward per block (False under PP, else
    # true but for the last block) and config_manager.py has no option for it: zero3 only, with
    # PP, virtual stages and CP (source torchtitan-9dec370-parallelisms)
    c = _grid("torchtitan-2024-12", model="llama-3-70b", seq=8192)
    assert set(np.unique(c["zero"]).tolist()) <= {0, 3}
    assert set(np.unique(c["ep"]).tolist()) == {1}
    assert c["pp"].max() > 1 and c["vpp"].max() > 1 and c["cp"].max() > 1


def test_megatron_lm_2021_splits_the_layers_evenly_only():
    # Megatron-LM at 3d718bfc / 6985e589 (source megatron-lm-2021-even-split): ParallelTransformer
    # asserts num_layers % pp == 0 and builds (num_layers // pp) // vpp layers a chunk, so a split
    # where pp x vpp does not divide the layers cannot be built. SC21 Table 1's 76.1B GPT (60
    # layers, h 10240, 80 heads) on 1,024 A100 with global batch 1792: the script's PP4 x v3 (5
    # layers a chunk) is a split the code builds; PP16 x v3 (48 chunks of 60 layers), the free
    # search's pick before this profile field, and PP16 without interleaving are not
    from scalemodel.analytic.validate import row_model

    m = row_model({"layers": "60", "hidden": "10240", "heads": "80", "kv_heads": "80",
                   "ffn": "40960", "vocab": "51200", "positions": "learned", "gated": "0",
                   "tied": "1", "params_b": "76.1", "seq_len": "2048", "id": "megatron-76.1b"})

    def pairs(fw):
        job = make_job(m, seq_len=2048, global_batch_seqs=1792, framework_id=fw)
        c = layout_grid(job, make_cluster("a100-sxm-80gb", 1024)).cols
        piped = c["pp"] > 1
        return set(zip(c["pp"][piped].tolist(), c["vpp"][piped].tolist(), strict=True))

    even = pairs("megatron-lm-2021")
    assert (4, 3) in even and (4, 1) in even
    assert (16, 3) not in even and (16, 1) not in even
    assert all(60 % (p * v) == 0 for p, v in even)
    # Megatron-DeepSpeed splits with DeepSpeed's partition_balanced (source
    # deepspeed-pipe-partition-balanced: BLOOM ran 70 layers on 12 stages), so it keeps PP16
    assert (16, 1) in pairs("megatron-deepspeed-2021")


@pytest.mark.parametrize("fw", ["torchtitan", "torchtitan-2024-12"])
def test_torchtitan_replicates_only_on_a_one_dimensional_mesh(fw, capsys):
    # torchtitan parallelize_llama.py at 9dec370 (lines 79-108; source
    # torchtitan-9dec370-parallelisms) and models/llama3/infra/parallelize.py at 6b11290c (lines
    # 93-123; torchtitan-parallelism-2025-06): FSDP over the dp_shard x cp mesh whenever
    # dp_shard > 1 or cp > 1; DDP only where the world mesh is one-dimensional, else
    # RuntimeError("DDP has not supported > 1D parallelism"). So ZeRO 0 across more than one
    # data-parallel or CP rank exists only with no TP, PP or CP (frameworks.toml
    # replicate_1d_only)
    c = _grid(fw, seq=8192)
    z0 = c["zero"] == 0
    other = (c["tp"] > 1) | (c["pp"] > 1) | (c["cp"] > 1)
    assert not (z0 & (c["dp"] * c["cp"] > 1) & other).any()
    assert (z0 & (c["dp"] > 1) & ~other).any()  # plain DDP stays offered
    assert ((c["zero"] == 3) & (c["cp"] > 1)).any() and ((c["zero"] == 3) & (c["tp"] > 1)).any()
    assert (z0 & (c["dp"] == 1) & (c["cp"] == 1) & (c["tp"] > 1)).any()  # no DP: nothing to shard
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "16", "--framework", fw,
               "--layout", "tp=2,dp=8,zero=0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "replication" in err and len(err.splitlines()) == 1
    rc = main(["memory", "--model", "llama-3-8b", "--framework", fw, "--layout",
               "tp=1,pp=1,dp=4,cp=2,zero=0"])  # CP alone: its ranks are under FSDP too
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "cp=2" in err and "replication" in err and len(err.splitlines()) == 1
    assert main(["memory", "--model", "llama-3-8b", "--framework", fw, "--layout",
                 "tp=1,pp=1,dp=8,zero=0", "--json"]) == 0  # DDP on a 1-D mesh
    capsys.readouterr()
