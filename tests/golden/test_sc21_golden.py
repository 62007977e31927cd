"""The SC21 Megatron-LM runs (Narayanan et al. 2021, Table 1) as their launch scripts ran them.

Sources: NVIDIA/Megatron-LM examples/sc21/run_table_1.sh and CONFIG.sh at commit 6985e589
(2021-08-18, "more updates on examples"; the scripts the paper's README names for Table 1), and
megatron/training.py, megatron/schedules.py of the same commit.
"""

import numpy as np

from scalemodel.analytic.memory import chunk_partition, stage_partition


def test_uniform_split_when_the_head_is_a_fraction_of_a_layer():
    # Derivation: the 1T model has 128 layers on PP64 (run_table_1.sh: NLS=128, PP=64). Its
    # output head is V h / (12 h^2) = 51200 / (12 x 25600) = 0.167 layer-equivalents. The
    # smallest heaviest-stage load that holds all 128 layers is C = 2.167 (every stage 2
    # layers, the last 2 + 0.167), not the whole-layer C = 3 (which left one middle stage with
    # 3 layers, 50% more than the 2 layers every stage of the 2021 code runs: that code
    # splits num_layers / pp evenly).
    head = 51200 / (12 * 25600)
    assert stage_partition(128, 64, last_extra=head) == (2,) * 64
    # 145.6B: 80 layers, PP8, 5 layers per virtual stage (vpp 2): 16 chunks of 5
    # (head 51200 / (12 x 12288) = 0.35 layer; C = 5.35)
    assert chunk_partition(80, 8, vpp=2, last_extra=51200 / (12 * 12288)) == (5,) * 16
    # 310.1B: 96 layers, PP16, 3 layers per virtual stage: 32 chunks of 3
    assert chunk_partition(96, 16, vpp=2, last_extra=51200 / (12 * 16384)) == (3,) * 32
    # a head heavier than the slack still moves a layer: Llama 3 405B's 7 + 14 x 8 + 7 is kept
    # (tests/golden/test_plan_golden.py); 10 layers, 2 stages, head 1.5 layers: C = 6 gives
    # first 6, last floor(6 - 1.5) = 4 (loads 6 and 5.5)
    assert stage_partition(10, 2, last_extra=1.5) == (6, 4)


def _values(fid, lay, model="llama-2-7b", gpus=16, seqs=64):
    from scalemodel.analytic.planner import make_cluster, make_job, search
    from scalemodel.specs import get_model
    from scalemodel.specs.frameworks import job_settings

    _, s = job_settings(fid, "a100-sxm-80gb")
    job = make_job(get_model(model), seq_len=2048, global_batch_seqs=seqs, **s)
    return search(job, make_cluster("a100-sxm-80gb", gpus), lay, top=0).best.values


LAY = {"tp": 2, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 0, "vpp": 1, "micro_batch": 8,
       "recompute": "full"}


def test_fp16_optimizer_step_bytes():
    # Float16OptimizerWithFloat16Params.step at 6985e589, bytes per local parameter:
    # fp16 grad -> new fp32 grad (.float(): 2 read + 4 written) = 6
    # _amp_foreach_non_finite_check_and_unscale_ over fp32 grads (4 + 4) = 8
    # clip_grad_norm_fp32's multi_tensor_l2norm (4 read; the scale runs only if norm > 1) = 4
    # apex FusedAdam: param, grad, m, v read (16), param, m, v written (12) = 28
    # main params -> fp16 model params (4 + 2) = 6
    # 6 + 8 + 4 + 28 + 6 = 52, against the planner's one fused pass of 2 x 12 + 2 x 2 = 28
    from scalemodel.specs.frameworks import get_framework

    assert get_framework("megatron-lm-2021").get("optimizer_step_bytes") == {"adam": 52}
    old, new = _values("megatron-lm-2021", LAY), _values("megatron-core", LAY)
    # same layout, same local parameters and Adam states: the step scales by 52 / 28
    assert np.isclose(float(old.optimizer_s) / float(new.optimizer_s), 52 / 28)


def test_torch_ddp_hides_the_all_reduce_behind_the_last_backward():
    # run_table_1.sh: 1.7B-18B with --DDP-impl torch. One micro-batch per rank (64 sequences,
    # DP 8, MBS 8): the bucketed all-reduce runs beside that backward; only the last bucket
    # (planner.toml dp_bucket_bytes of the gradient bytes) is left, where the backward is longer
    # than the all-reduce. --DDP-impl local (megatron-lm-2021) all-reduces after the backward.
    local, torch_ddp = _values("megatron-lm-2021", LAY), _values("megatron-lm-2021-torch-ddp", LAY)
    assert np.isclose(float(local.dp_s), float(local.dp_raw_s))
    assert np.isclose(float(torch_ddp.dp_raw_s), float(local.dp_raw_s))
    assert float(torch_ddp.dp_raw_s) < float(torch_ddp.bwd_mb_s)
    from scalemodel.analytic.step.config import constants

    # the gradient bytes each rank reduces, from the bytes it sends in a ring all-reduce over
    # 8 ranks: 2 x 7/8 x gradient bytes
    grad_bytes = float(torch_ddp.dp_bytes) / (2 * 7 / 8)
    bucket = min(1.0, float(constants()["overlap"]["dp_bucket_bytes"]) / grad_bytes)
    assert 0 < bucket < 1
    assert np.isclose(float(torch_ddp.dp_s), float(torch_ddp.dp_raw_s) * bucket)


def test_torch_ddp_has_no_pipeline():
    # setup_model_and_optimizer asserts DDP_impl == 'local' when pp > 1 or with virtual stages
    from scalemodel.specs.frameworks import get_framework

    assert get_framework("megatron-lm-2021-torch-ddp").get("parallelisms") == ["tp"]


def test_scatter_gather_adds_the_receivers_all_gather():
    # p2p_communication._communicate (6985e589): each TP rank sends 1/t of the activation, then
    # the receiver all-gathers the t chunks over the TP group: per crossing the send of
    # s b h / t elements plus an NVLink all-gather of s b h elements (gathered size), for each of
    # the 2 (v m + p - 1) crossings, all exposed (pp_p2p_overlap none)
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.step.comm import collective_time

    lay = {"tp": 4, "pp": 2, "dp": 2, "cp": 1, "ep": 1, "zero": 0, "vpp": 1, "micro_batch": 2,
           "recompute": "full"}
    v = _values("megatron-lm-2021", lay)
    m_mb = 64 // 2 // 2  # sequences / dp / micro-batch
    crossings = 2 * (1 * m_mb + 2 - 1)
    msg = 2.0 * 2048 * 2 * 4096  # 16-bit, s x b x h of Llama 2 7B
    cl = make_cluster("a100-sxm-80gb", 16)
    send = float(collective_time("send_recv", msg / 4, 2.0, 1.0, cl))  # stages on two nodes
    gather = float(collective_time("all_gather", msg, 4.0, 4.0, cl))
    assert np.isclose(float(v.pp_raw_s), crossings * (send + gather))
    assert gather > 0


def test_no_sequence_parallelism_keeps_the_replicated_activations_whole():
    # Korthikanti et al. 2022 (Sec. 4.2.2, Table 2), activations per layer without SP under TP t:
    # s b h (10 + 24 / t) + 5 a s^2 b / t bytes (16-bit, unfused attention: the score matrix,
    # its softmax and dropout mask stored). SC21 18.4B (h 6144, a 48, 40 layers) at TP8, micro-
    # batch 4, no recompute: s b h = 2048 x 4 x 6144 = 50.3M; 50.3M x 13 = 654.3 MB plus
    # 5 x 48 x 2048^2 x 4 / 8 = 503.3 MB: 1.158 GB x 40 = 46.3 GB; the 2021 code has no SP
    # (frameworks.toml sequence_parallel = false), so its 10 s b h stay whole on each rank
    from scalemodel.analytic.layout import TrainLayout
    from scalemodel.analytic.planner import evaluate_layout, make_cluster, make_job
    from scalemodel.analytic.validate import row_model
    from scalemodel.specs.frameworks import job_settings

    row = {"layers": "40", "hidden": "6144", "heads": "48", "kv_heads": "48", "ffn": "24576",
           "vocab": "51200", "positions": "learned", "gated": "0", "tied": "1",
           "params_b": "18.4", "seq_len": "2048", "dropout": "1", "id": "megatron-18.4b"}
    m = row_model(row)
    lay = {"tp": 8, "pp": 1, "dp": 32, "cp": 1, "ep": 1, "zero": 0, "vpp": 1, "micro_batch": 4,
           "recompute": "none"}
    _, s = job_settings("megatron-lm-2021-torch-ddp", "a100-sxm-80gb")
    job = make_job(m, seq_len=2048, global_batch_seqs=1024, **s)
    cl = make_cluster("a100-sxm-80gb", 256, inter="hdr-200")
    v = evaluate_layout(job, cl, TrainLayout(**lay)).values
    sbh = 2048 * 4 * 6144
    layers = 40 * (sbh * (10 + 24 / 8) + 5 * 48 * 2048**2 * 4 / 8)
    # the stored activations also hold the logits and the loss's buffers: within 5%
    assert layers <= float(v.mem_activations) <= 1.05 * layers
    # so the layout the free search picked before (83.6 GB with the weights and Adam states of
    # 18.4e9 / 8 parameters at 16 B) does not fit in the 80 GB A100
    assert not bool(v.fits)
