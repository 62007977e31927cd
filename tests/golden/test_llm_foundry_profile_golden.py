"""Golden checks of what the llm-foundry profile (frameworks.toml [profiles.llm-foundry]) makes the
step model price for the MPT benchmark runs of 2023 (llm-foundry scripts/train/benchmarking,
sweep table h100new.md at commit beb8dee, Composer 0.16.x, PyTorch 2.1 FSDP1). Each expected
value is derived by hand below from the framework source the profile cites (Composer v0.16.3,
torch 2.1.0's torch/distributed/fsdp).

MPT-13B as the yaml (scripts/train/yamls/pretrain/mpt-13b.yaml at beb8dee) and the table give it:
d_model 5120, 40 layers, expansion 4, vocab 50368, NumParams 12,853,954,560; 8 H100 SXM,
FULL_SHARD (ZeRO-3), micro-batch 2, no activation checkpointing, one micro-batch per step."""

import pytest

from scalemodel.analytic.planner import evaluate_one, make_cluster, make_job
from scalemodel.analytic.validate import row_model
from scalemodel.specs.frameworks import get_framework

NUM_PARAMS = 12_853_954_560  # the table's NumParams for MPT-13B at sequence 2048
LAYOUT = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 3, "vpp": 1, "micro_batch": 2,
          "recompute": "none"}


def _mpt13b():
    # the shape columns of validation/training_runs.csv row mpt-13b-h100
    return row_model({"id": "mpt-13b", "model": "", "layers": "40", "hidden": "5120",
                      "heads": "40", "kv_heads": "40", "ffn": "20480", "vocab": "50368",
                      "norm": "layer", "positions": "learned", "gated": "0", "tied": "1",
                      "params_b": "12.85", "seq_len": "2048"})


def _values(framework):
    job = make_job(_mpt13b(), seq_len=2048, global_batch_seqs=16, framework_id=framework)
    return evaluate_one(job, make_cluster("h100-sxm", 8), LAYOUT).values


# FSDP1's root unit (source torch-210-fsdp1-root): Composer wraps the MPT model as the root and
# each MPTBlock as its own unit (fsdp_wrap_fn), so the root's flat parameter holds what lies
# outside the blocks: the tied wte (50,368 x 5,120), the learned wpe (max_seq_len 2,048 x 5,120)
# and norm_f (weight and bias, 2 x 5,120).
ROOT_PARAMS = 50_368 * 5_120 + 2_048 * 5_120 + 2 * 5_120
# one MPTBlock: Wqkv, out_proj, up and down (12 d^2) with their biases (9 d) and two LayerNorms
# with bias (4 d); 40 of them and the root give the table's NumParams exactly
BLOCK_PARAMS = 12 * 5_120**2 + 13 * 5_120
assert 40 * BLOCK_PARAMS + ROOT_PARAMS == NUM_PARAMS


def test_composer_016_default_precision_reduces_in_bf16():
    # Composer v0.16.3 get_mixed_precision('DEFAULT'): param_dtype = buffer_dtype = bf16,
    # reduce_dtype left None; PyTorch FSDP (PR #90631, in 2.0 and 2.1) then infers
    # reduce_dtype = param_dtype. FULL_SHARD per micro-batch and GPU (torch 2.1.0
    # _runtime_utils.py): _pre_forward_unshard all-gathers every unit in bf16 for the forward;
    # _post_forward_reshard frees every unit but the root, so _pre_backward_hook gathers the
    # blocks again and not the root; _post_backward_hook reduce-scatters every unit's bf16
    # gradient (Composer uses no no_sync for FSDP). Bytes each GPU sends, (n - 1) / n of
    # 2 x P (forward) + 2 x (P - R) (backward) + 2 x P (gradients):
    # 7/8 x (6 x 12.854e9 - 2 x 268.4e6) = 67.01 GB on 8 GPUs.
    assert get_framework("llm-foundry").values["grad_reduce_bytes"] == 2
    v = _values("llm-foundry")
    assert float(v.dp_bytes) == pytest.approx(7 / 8 * (6 * NUM_PARAMS - 2 * ROOT_PARAMS),
                                              rel=1e-3)


def test_fsdp1_root_unit_exposed_per_micro_batch():
    # The same source: the root is the first unit gathered in each forward (after
    # _wait_for_computation_stream, nothing before it to hide it) and its reduce-scatter runs
    # after the embedding's backward, the last of the backward, which
    # _post_backward_final_callback then waits for. Block 0 sits beside it at both ends: its
    # gather is issued right after the root's, with only the embedding lookup before its
    # forward, and its reduce-scatter right before the root's. Every other block's gather and
    # reduce-scatter is hidden here: the gather of block i overlaps block i-1's forward
    # (forward_prefetch False, two gathers in flight), the backward gather of block i-1 and
    # block i+1's reduce-scatter overlap block i's backward (BACKWARD_POST), each far shorter
    # than that compute on 8 H100 NVLink at micro-batch 2. So the exposed traffic is the share
    # e = (R + B) / P of one gather and one reduce-scatter of the whole model; the raw traffic
    # is one full gather, a gather of all but the kept root (1 - f, f = R / P) and one
    # reduce-scatter, each of the bf16 2-byte elements.
    from scalemodel.analytic.step.comm import collective_time

    f = ROOT_PARAMS / NUM_PARAMS
    e = (ROOT_PARAMS + BLOCK_PARAMS) / NUM_PARAMS
    assert f == pytest.approx(0.02088, abs=1e-5) and e == pytest.approx(0.04536, abs=1e-5)
    cl = make_cluster("h100-sxm", 8)
    ag = float(collective_time("all_gather", NUM_PARAMS * 2, 8, 8, cl))
    rs = float(collective_time("reduce_scatter", NUM_PARAMS * 2, 8, 8, cl))
    v = _values("llm-foundry")
    assert float(v.dp_raw_s) == pytest.approx((2 - f) * ag + rs, rel=2e-3)
    assert float(v.dp_s) == pytest.approx(e * (ag + rs), rel=2e-3)


def test_composer_decoupled_adamw_runs_op_by_op():
    # Composer v0.16.3 DecoupledAdamW.adamw, per fp32 parameter element (weight_decay 0):
    #   exp_avg.mul_            read 4, write 4   8
    #   .add_(grad)             read 8, write 4  12
    #   exp_avg_sq.mul_         read 4, write 4   8
    #   .addcmul_(grad, grad)   read 8, write 4  12
    #   .sqrt()                 read 4, write 4   8
    #   / sqrt(bias_corr2)      read 4, write 4   8
    #   .add_(eps)              read 4, write 4   8
    #   param.addcdiv_          read 12, write 4 16
    # = 80 bytes per parameter. PyTorch 2.1.0 FSDP1 adds, once per step on the same shard:
    #   _cast_grad_to_param_dtype  bf16 -> fp32       read 2, write 4   6
    #   clip_grad_norm_ vector_norm (gradient_clipping in every yaml)  read 4   4
    #   clip_grad_norm_ grad.mul_(clip_coef_clamped)  read 4, write 4   8
    # = 18 bytes. On the 1/8 shard each GPU owns, at the planner's memory-bound rate (H100 SXM
    # 3.35 TB/s x planner.toml hbm_efficiency 0.8): 12.854e9 / 8 x 98 / 2.68e12 = 58.8 ms.
    v = _values("llm-foundry")
    assert float(v.optimizer_s) == pytest.approx(NUM_PARAMS / 8 * 98 / (3.35e12 * 0.8), rel=2e-3)
    # a framework without these fields keeps one fused pass: read and write master, m and v
    # (2 x 12 bytes) and 2 x 2 bytes of 16-bit weight / gradient traffic = 28 bytes
    base = _values("megatron-core")
    assert float(v.optimizer_s) / float(base.optimizer_s) == pytest.approx(98 / 28, rel=1e-9)


def test_fsdp1_passes_over_each_micro_batchs_unsharded_gradient():
    # PyTorch 2.1.0 FSDP1 with use_orig_params (Composer's default): the parameters are
    # torch.split views of the flat parameter, so SplitBackward concatenates their bf16
    # gradients into the unsharded flat gradient (read 2, write 2), and _reduce_grad divides it
    # in place by the pre-divide factor before the reduce-scatter (for 8 ranks
    # _get_gradient_predivide_factor gives 4 > 1, so it runs: read 2, write 2). 8 bytes per
    # unsharded parameter per micro-batch: 12.854e9 x 8 / 2.68e12 = 38.4 ms.
    v = _values("llm-foundry")
    assert float(v.grad_acc_s) == pytest.approx(NUM_PARAMS * 8 / (3.35e12 * 0.8), rel=2e-3)
    # Megatron-Core accumulates in its fused wgrad GEMM: no such pass
    assert float(_values("megatron-core").grad_acc_s) == 0.0
