"""Multi-token prediction (DeepSeek-V3's MTP module) as the planner prices it, against the
Megatron-Bridge tables' model TFLOP per token and derivations written out here.

Sources:
* DeepSeek-V3 report (arXiv 2412.19437) Sec. 2.2: each MTP module is a shared embedding, two
  RMSNorms, a 2h x h projection, one Transformer block and the shared output head with its own
  loss; Sec. 4.2: depth D = 1. The HF config says num_nextn_predict_layers = 1.
* NVIDIA-NeMo/Megatron-Bridge v0.1.0rc3 (NeMo 25.09): recipes/deepseek/deepseek_v3.py
  (mtp_num_layers = 1), scripts/performance/run_script.py (layout 'Et|(tt|)*30mL' at PP8 VP4),
  training/utils/flop_utils.py (the model-FLOP formula the tables print).
* Megatron-Bridge docs/performance-summary-archive.md at 067f987d: 'DeepSeekV3 (w/o MTP)' rows of
  the 25.11 GB300 / GB200 tables and the 'w/ MTP' 25.11 B200 row, and the 25.09 H100 row.
"""

import pytest

from scalemodel.analytic.memory import chunk_partition, stage_partition
from scalemodel.analytic.planner import model_flops_per_token, split_extras
from scalemodel.specs import get_model

# DeepSeek-V3 (HF config.json)
H, NH, QL, KVL, QK, ROPE, V, SEQ, VOCAB = 7168, 128, 1536, 512, 128, 64, 128, 4096, 129280
DENSE, MOE, FFN, MOE_FFN, TOPK = 3, 58, 18432, 2048, 8


def megatron_bridge_flops_per_token(mtp: int) -> float:
    """Megatron-Bridge v0.1.0rc3 flop_utils.py transformer_flops for DeepSeek-V3, per token
    (batch x seq divided out), written out by hand. The MTP layer counts as one more layer of
    the last layer's kind (MoE), plus 6 (3h + 2h^2) for its norms and eh_proj and one more
    output-head GEMM 6 h V. The padded vocabulary: 129280 is a multiple of 128 x TP (TP 2: 256),
    so no padding."""
    n_dense, n_moe, n_layers = DENSE, MOE + mtp, 61 + mtp
    g = 1.5  # SwiGLU
    mlp = 12 * H * (FFN * g * n_dense + (MOE_FFN * TOPK * g + MOE_FFN * g) * n_moe)
    q = QL * (H + NH * (QK + ROPE) + 1)
    kv = KVL * (H + NH * (QK + V) + 1)
    attn = 6 * n_layers * (q + kv + H * ROPE + NH * V * H
                           + SEQ * NH * (QK + ROPE) / 2 + SEQ * NH * V / 2)
    mtp_proj = 6 * mtp * (3 * H + 2 * H * H)
    logits = 6 * H * VOCAB * (mtp + 1)
    return mlp + attn + mtp_proj + logits


def test_megatron_bridge_tables_count_mtp_in_model_flops():
    # by hand: 0.249812 TFLOP per token without MTP, 0.259993 with it (+0.010181: the MoE layer
    # 0.002378 MLP + 0.001626 attention, norms and eh_proj 0.000617, the head 0.005560)
    wo, w = megatron_bridge_flops_per_token(0), megatron_bridge_flops_per_token(1)
    assert wo / 1e12 == pytest.approx(0.249812, abs=1e-6)
    assert w / 1e12 == pytest.approx(0.259993, abs=1e-6)
    # the tables (model TFLOP/s over tokens/s, both printed as integers; within 0.3%, while
    # the MTP module moves the figure by 4%):
    without = [961 / 3848, 1088 / 4357, 782 / 3139, 1003 / 4018]  # 25.11 GB300, GB200, w/o MTP
    with_mtp = [557 / 2139, 338 / 1297]  # 25.11 B200 'w/ MTP', 25.09 H100 (MTP not labelled)
    for r in without:
        assert r == pytest.approx(wo / 1e12, rel=0.003)
    for r in with_mtp:
        assert r == pytest.approx(w / 1e12, rel=0.003)
        assert abs(r - wo / 1e12) > 0.009  # not the w/o-MTP figure
    # so the 25.09 H100 row (338 / 1297 = 0.2606) ran with MTP, as its recipe says


def test_planner_model_flops_add_one_mtp_module():
    # The planner's own convention (PaLM App. B: 6 x matmul parameters + 6 L s (d_qk + d_v),
    # no causal half). One MTP module adds, by hand:
    # * the MoE layer's active parameters: MLA attention 7168 x 1536 + 1536 x 128 x 192
    #   + 7168 x 576 + 512 x 128 x 256 + 128 x 128 x 7168 = 187,105,280; norms 2 x 7168 + 1536
    #   + 512, router 256 x 7168 and its 256 biases = 1,851,648; shared expert 3 x 7168 x 2048
    #   = 44,040,192; 8 routed experts 8 x 44,040,192 = 352,321,536: 585,318,656 in all;
    # * eh_proj 2 x 7168^2 = 102,760,448 and three norms 3 x 7168 = 21,504;
    # * the output head once more: 129,280 x 7168 = 926,679,040;
    # * its attention: 6 x 4096 x 128 x (192 + 128) = 1,006,632,960.
    params = 585_318_656 + 102_760_448 + 21_504 + 926_679_040
    by_hand = 6 * params + 6 * 4096 * 128 * (192 + 128)
    assert by_hand == 10_695_310_848
    m = get_model("deepseek-v3")
    assert m.mtp_layers == 1  # HF num_nextn_predict_layers
    no_mtp = m.with_overrides(mtp_layers=0)
    diff = model_flops_per_token(m, 4096) - model_flops_per_token(no_mtp, 4096)
    assert diff == pytest.approx(by_hand, rel=1e-9)


def test_megatron_bridge_2509_layout_puts_mtp_alone_in_the_last_chunk():
    # 'Et|(tt|)*30mL' at PP8 VP4: chunk 0 = E + 1 layer, chunks 1-30 = 2 layers, chunk 31 = the
    # MTP layer and the loss; chunk j on stage j mod 8: stage 0 1 + 2 + 2 + 2 = 7, stages 1-6
    # 8, stage 7 2 + 2 + 2 + 0 = 6 decoder layers (+ the MTP layer)
    m = get_model("deepseek-v3")
    ex = split_extras(m)
    assert ex["last_min"] == 0
    assert stage_partition(61, 8, vpp=4, **ex) == (7, 8, 8, 8, 8, 8, 8, 6)
    assert chunk_partition(61, 8, vpp=4, **ex)[-1] == 0
    # a model without MTP keeps one decoder layer in every chunk
    assert split_extras(m.with_overrides(mtp_layers=0))["last_min"] == 1


def test_mtp_module_memory_at_pp1_by_hand():
    # One GPU holding the whole model (tp = pp = dp = ep = 1, no ZeRO), bf16 weights (2 B): the MTP
    # module adds its MoE layer, 187,105,280 attention + 11,274,289,152 routed experts (256 x
    # 44,040,192) + 44,040,192 shared + 1,851,648 norms and router = 11,507,286,272 parameters,
    # and eh_proj with its norms, 102,760,448 + 21,504: 11,610,068,224 parameters, 2 B each.
    # The embedding is not copied: at pp = 1 the MTP module shares the first stage's.
    from scalemodel.analytic.memory import static_model, training_bytes

    m = get_model("deepseek-v3")
    sm = static_model(m)
    kw = dict(tp=1, pp=1, dp=1, zero=0, micro_batch=1, seq_len=4096, microbatches=1)
    a = training_bytes(sm, **kw)
    b = training_bytes(sm, **kw, mtp_layers=1, mtp_proj_params=2 * H * H + 3 * H,
                       mtp_embedding=True)
    assert float(b["params"] - a["params"]) == pytest.approx(2 * 11_610_068_224, rel=1e-9)


def test_memory_command_counts_mtp_as_plan_train_does(capsys):
    """`memory` and `plan train` read one memory model: on DeepSeek-V3 at PP16 the default
    split puts 4 decoder layers on each of the first 14 stages, 5 on the 15th and none on the
    last, which holds the MTP module and the head (61 = 14 x 4 + 5 + 0); both commands accept
    that split and give the same bytes per GPU."""
    import json

    from conftest import run_cli

    args = ["--model", "deepseek-v3", "--gpu", "h800", "--gpus", "2048", "--seq-len", "4096",
            "--global-batch", "15360"]
    rc, out, _ = run_cli(capsys, "memory", *args, "--tp", "1", "--pp", "16", "--dp", "128",
                         "--ep", "64", "--zero", "1", "--recompute", "full", "--json")
    assert rc == 0
    mem = json.loads(out)["per_gpu_bytes"]
    rc, out, _ = run_cli(capsys, "plan", "train", *args, "--layout",
                         "tp=1,pp=16,dp=128,ep=64,zero=1,recompute=full,micro_batch=1,vpp=1,cp=1",
                         "--json")
    assert rc == 0
    assert json.loads(out)["memory_per_gpu_bytes"] == pytest.approx(mem, rel=1e-9)

