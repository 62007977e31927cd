"""Golden checks of what an fp8 run keeps for the backward and of the memory a launcher's
allocator setting leaves (issue 16, memory feasibility as real runs use it).

Sources, read at the named versions:
- Transformer Engine linear.py / layernorm_linear.py / grouped_linear.py (v1.0, v1.4, v2.7):
  under fp8 autocast a Linear keeps the fp8 cast of its GEMM input for the weight-gradient GEMM
  (1 byte per element and a per-tensor scale), not its 16-bit input; LayerNormLinear keeps its
  16-bit norm input, the fp32 statistics and the fp8 ln_out. The attention core (TE's
  DotProductAttention without fp8_dpa) and the router stay 16-bit.
- torchao float8_linear.py: matmul_with_hp_or_float8_args saves input_hp (the 16-bit input).
- Megatron-Core experts.py (TEGroupedMLP): with moe_act recompute under fp8, fc2 is told to keep
  its original input (set_save_original_input), which the recompute then discards.
- Megatron-Bridge v0.5.0 scripts/performance/utils/executors.py: PERF_ENV_VARS sets
  PYTORCH_CUDA_ALLOC_CONF = expandable_segments:True for every Slurm performance run.
The expected bytes are derived below from those saved-tensor lists; nothing is copied from the
code's own output."""

import json

import pytest

from scalemodel.analytic.memory import (
    act_per_layer,
    layer_act_coeffs,
    linear_input_bytes,
    usable_memory,
)
from scalemodel.analytic.planner import evaluate_one, make_cluster, make_job
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.saved_tensors import kernel_saves


def _per_token(m, moe_layer, lin, attention="flash", rc=0, mods=0):
    c = layer_act_coeffs(m, moe_layer, kernel_saves("fused", attention, lin))
    return float(act_per_layer(c, 4096, 1, m.n_heads, m.n_kv_heads, 1, True, rc,
                               bool(m.kv_lora_rank), mods)) / 4096


def test_dense_llama_layer_fp8_keeps_one_byte_per_linear_input():
    # Llama 3 70B layer at TP 1 (h 8192, q width 8192, kv 1024, f 28672), fused kernels and a
    # fused attention kernel. Per token, bf16 (Korthikanti's count with FlashAttention):
    #   2 RMSNorms: 16-bit input 2 h + rstd 4 each;    norm outputs (QKV and fc1 inputs) 2 x 2 h
    #   q 2 q, k and v 2 (k + v), attention output 2 o (kept by the kernel and by proj), lse 4 a
    #   fc1 output 4 f (SwiGLU), SwiGLU output 2 f (fc2's input)
    # fp8 with TE: the QKV and fc1 inputs become 1 h each, proj keeps its own 1 B copy of the
    # attention output beside the kernel's 16-bit one, fc2 keeps 1 f.
    m = get_model("llama-3-70b")
    h, q, kv, f, a = 8192, 8192, 1024, 28672, 64
    common = 2 * (2 * h + 4) + 2 * q + 2 * (2 * kv) + 4 * a + 4 * f
    bf16 = common + 2 * 2 * h + 2 * q + 2 * f
    fp8 = common + 2 * 1 * h + (2 + 1) * q + 1 * f
    assert _per_token(m, False, 2.0) == pytest.approx(bf16, rel=1e-12)
    assert _per_token(m, False, 1.0) == pytest.approx(fp8, rel=1e-12)
    assert fp8 < bf16


def test_unfused_attention_leaves_the_projection_the_only_keeper():
    # scores in HBM (unfused attention): the PV matmul keeps the probabilities and V, not its
    # output, so the attention output is kept by the output projection alone: 2 B -> 1 B.
    m = get_model("llama-3-8b")
    o, h, f = 4096, 4096, 14336
    diff = _per_token(m, False, 2.0, "unfused") - _per_token(m, False, 1.0, "unfused")
    assert diff == pytest.approx(2 * h * (2 - 1) + o * (2 - 1) + f * (2 - 1), rel=1e-12)


def test_moe_layer_fp8_keeps_the_router_input_and_the_unpermute_output_in_16_bits():
    # Qwen3-30B-A3B MoE layer (h 2048, 32 q heads x 128, 128 experts, top 8, expert width 768,
    # no shared expert). fp8 changes, per token: the QKV input 2 h -> 1 h; the pre-MLP norm's
    # output stays 2 h (the bf16 router keeps it); proj + 1 B x o; per routed copy the expert
    # fc1 input 2 h -> 1 h and the expert fc2 input 2 f_e -> 1 f_e; the expert output the
    # unpermute multiply keeps stays 2 h.
    m = get_model("qwen3-30b-a3b")
    h, o, k, fe = 2048, 32 * 128, 8, 768
    assert (m.hidden, m.q_dim, m.top_k, m.moe_ffn, m.shared_ffn, m.n_shared_experts) == (
        h, o, k, fe, 0, 0)
    diff = _per_token(m, True, 2.0) - _per_token(m, True, 1.0)
    assert diff == pytest.approx(h - o + k * (h + fe), rel=1e-12)


def test_moe_act_recompute_frees_what_fc2_keeps():
    # moe_act (bit 3 of layout.RECOMPUTE_MODULES) drops fc2's input: 2 B per element of the
    # expert width per routed copy in bf16; under fp8 fc2 keeps its original input for the
    # recompute to discard, so the same tensor counted at the fp8 Linear-input bytes (1 B) is
    # what is dropped from the fp8 set.
    m = get_model("qwen3-30b-a3b")
    moe_act = 1 << 3
    for lin in (2.0, 1.0):
        drop = _per_token(m, True, lin) - _per_token(m, True, lin, rc=1, mods=moe_act)
        assert drop == pytest.approx(lin * m.top_k * m.moe_ffn, rel=1e-12)


def test_which_frameworks_keep_fp8_inputs():
    assert linear_input_bytes("megatron-core", True)[0] == 1.0
    assert linear_input_bytes("nemo-26.02", True)[0] == 1.0  # extends megatron-core
    assert linear_input_bytes("torchtitan", True)[0] == 2.0  # torchao keeps input_hp
    assert linear_input_bytes("deepspeed", True)[0] == 2.0  # no fp8 recipe, no field
    # DeepSeek-V3 report Sec. 3.3.3: Linear inputs cached in fp8 (HAI-LLM, not TE)
    assert linear_input_bytes("deepseek-hai-llm", True) == (1.0, "deepseek-2024-v3-report")
    assert linear_input_bytes("megatron-lm-2021", True)[0] == 2.0  # no fp8 in 2021
    assert linear_input_bytes("megatron-core", False)[0] == 2.0  # bf16 runs are unchanged
    assert linear_input_bytes("megatron-core", True)[1] == "te-linear-fp8-saved-input"


def test_planner_fp8_activations_follow_the_framework():
    # the same fp8 job under a TE framework keeps fewer activation bytes than under torchtitan
    # (whose Float8Linear keeps the 16-bit input), and a bf16 job is the same under both; the
    # difference is the per-token saving derived above times the layers and tokens.
    m = get_model("llama-3-8b")
    lay = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 3, "vpp": 1, "micro_batch": 1,
           "recompute": "none"}

    def acts(precision, framework):
        j = make_job(m, seq_len=4096, global_batch_seqs=64, precision=precision,
                     framework_id=framework, attention="flash3", kernels="fused")
        return evaluate_one(j, make_cluster("h100-sxm", 8), lay).values.mem_activations

    h, o, f = 4096, 4096, 14336
    per_token = 2 * h - o + f  # norm outputs -2 x 1 h, proj +1 o, fc2 -1 f
    saved = acts("fp8", "torchtitan") - acts("fp8", "megatron-core")
    assert saved == pytest.approx(per_token * 4096 * 32, rel=1e-9)
    assert acts("bf16", "torchtitan") == pytest.approx(acts("bf16", "megatron-core"), rel=1e-12)


def test_expandable_segments_launcher_leaves_no_allocator_slack():
    # nemo-26.06 (Megatron-Bridge v0.5.0 sets expandable segments for every perf run) gives the
    # step the whole HBM less the reserve; nemo-26.04 keeps the 5% split-block assumption.
    gpu = get_gpu("h100-sxm")
    r, nccl, n = 758_120_448, 805_306_368, 3
    assert float(usable_memory(gpu.hbm_bytes, n, "nemo-26.06")) == pytest.approx(
        gpu.hbm_bytes - r - n * nccl, rel=1e-12)
    assert float(usable_memory(gpu.hbm_bytes, n, "nemo-26.04")) == pytest.approx(
        (gpu.hbm_bytes - r - n * nccl) / 1.05, rel=1e-12)


def test_memory_command_counts_the_fp8_inputs_as_plan_train_does():
    # `scalemodel memory --precision fp8` reads the same profile field as the step model: under
    # megatron-core the Llama 3 8B layer keeps (2 h - o + f) bytes per token less than in bf16
    # (derived above), 32 layers, one micro-batch of 4096 tokens in flight at PP 1.
    from scalemodel.analytic.layout import TrainLayout
    from scalemodel.analytic.memory import memory_report
    from scalemodel.errors import BadInput

    m = get_model("llama-3-8b")
    lay = TrainLayout(tp=1, pp=1, dp=8, zero=1, micro_batch=1, recompute="none")
    kw = dict(seq_len=4096, gpu=get_gpu("h100-sxm"), attention="flash3", kernels="fused",
              framework="megatron-core")
    bf16 = memory_report(m, lay, precision="bf16", **kw)
    fp8 = memory_report(m, lay, precision="fp8", **kw)
    saved = bf16.breakdown["activations"] - fp8.breakdown["activations"]
    assert saved == pytest.approx((2 * 4096 - 4096 + 14336) * 4096 * 32, rel=1e-9)
    assert "fp8 Linears keep 1 B" in json.dumps(fp8.derivation.to_dict())
    with pytest.raises(BadInput, match="--precision"):
        memory_report(m, lay, precision="fp16", **kw)
