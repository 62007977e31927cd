"""Per-module precision of a published checkpoint and replicated projections (serving.toml
[checkpoints.nvidia-deepseek-r1-fp4]; frameworks.toml trtllm-1.0 ``replicated_modules``;
analytic/serving/iteration.py ``checkpoint_quant``; analytic/weights.py ``weight_bytes``).

Derivation (no model output is copied here):

* What the release stores: NVIDIA's ModelOpt recipe for DeepSeek-R1 (examples/deepseek at the
  0.25.0 release, commit 2017cd90; source ``modelopt-deepseek-nvfp4-recipe``) calibrates with
  every ``*attn*`` quantizer disabled and re-quantizes to NVFP4 only the gate_proj / up_proj /
  down_proj weights of the 61 decoder layers; every other weight of the FP8 release is
  dequantized to BF16, the MTP layer (HF layer 61) included. The exclude list in ModelOpt's
  glob form: ``*self_attn*``, ``lm_head``, ``model.layers.61*``.
* NVFP4 (source ``nvidia-nvfp4-format``): 4-bit values, one 1-byte E4M3 scale per 16 inputs:
  0.5 + 1/16 = 0.5625 B per weight where the input width divides by 16 (all of them here).
* DeepSeek-V3 / R1 config (hf-deepseek-v3-config): hidden 7168, q_lora_rank 1536,
  kv_lora_rank 512, qk_nope 128 + qk_rope 64, v_head 128, 128 heads, dense FFN 18432 (layers
  0-2), 256 routed experts of 2048 and one shared expert of 2048 (layers 3-60), vocab 129280.

  attention, one layer (BF16, 2 B):
    q_a_proj            7168 x 1536          =  11,010,048
    q_b_proj            1536 x 128*192       =  37,748,736
    kv_a_proj_with_mqa  7168 x (512 + 64)    =   4,128,768
    kv_b_proj           512 x 128*(128+128)  =  16,777,216
    o_proj              128*128 x 7168       = 117,440,512
    sum                                      = 187,105,280 weights -> 374,210,560 B
  dense FFN, one layer (NVFP4): 3 x 7168 x 18432 = 396,361,728 weights -> 222,953,472 B
  one expert (NVFP4): 3 x 7168 x 2048 = 44,040,192 weights -> 24,772,608 B (the shared
  expert the same)
  the output head (BF16): 7168 x 129280 = 926,679,040 weights -> 1,853,358,080 B
* Replication (source ``trtllm-mla-fused-a-replicated``): TensorRT-LLM's MLA builds fused_a
  (q_a_proj + kv_a_proj_with_mqa, 7168 x 2112) without a tensor-parallel mode, so each of the
  8 TP ranks holds the whole 15,138,816 weights (30,277,632 B at BF16) and runs the whole
  GEMM; the rest of the attention, 171,966,464 weights, splits 8 ways.
"""

import pytest

from conftest import sourced_field, user_profile_refusal
from scalemodel.analytic.params import shard_params
from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving import iteration as it
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import (
    ServeLayout,
    build,
    checkpoint_quant,
    precision,
    read_checkpoint,
)
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.weights import weight_bytes
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model

H = 7168
Q_A, Q_B = 7168 * 1536, 1536 * 128 * 192
KV_A, KV_B = 7168 * 576, 512 * 128 * 256
O_PROJ = 128 * 128 * 7168
ATTN = Q_A + Q_B + KV_A + KV_B + O_PROJ
FUSE_A = Q_A + KV_A
DENSE_FFN = 3 * 7168 * 18432
EXPERT = 3 * 7168 * 2048
NVFP4 = 0.5 + 1 / 16
BF16 = 2.0


def _released():
    m = get_model("deepseek-v3")
    from dataclasses import replace

    return replace(m, quant=checkpoint_quant(m, precision("fp4")))


def test_hand_counts_match_the_config():
    assert ATTN == 187_105_280 and FUSE_A == 15_138_816
    assert DENSE_FFN == 396_361_728 and EXPERT == 44_040_192


def test_the_release_excludes_attention_head_and_mtp_layer():
    q = checkpoint_quant(get_model("deepseek-v3"), precision("fp4"))
    assert q.ignore == ("*self_attn*", "lm_head", "model.layers.61*")
    for name in ("model.layers.0.self_attn.q_a_proj", "model.layers.40.self_attn.o_proj",
                 "lm_head", "model.layers.61.mlp.experts.0.gate_proj", "model.layers.61.eh_proj",
                 "model.layers.61.mlp.shared_experts.down_proj"):
        assert not q.is_quantized(name), name
    for name in ("model.layers.0.mlp.gate_proj", "model.layers.3.mlp.experts.7.down_proj",
                 "model.layers.60.mlp.shared_experts.up_proj"):
        assert q.is_quantized(name), name
    # other precisions and models keep what they had: the engine's quantizer record for a
    # 16-bit checkpoint, the model's own config otherwise
    assert checkpoint_quant(get_model("deepseek-v3"), precision("fp8")) is get_model(
        "deepseek-v3").quant
    assert checkpoint_quant(get_model("llama-3-8b"), precision("bf16")) is None


def test_weight_bytes_per_module_by_hand():
    wb = weight_bytes(_released(), BF16)
    dense_layer, moe_layer = wb.layers[0], wb.layers[3]
    assert dense_layer.attention == pytest.approx(ATTN * BF16, rel=1e-12)  # 374,210,560 B
    assert moe_layer.attention == pytest.approx(ATTN * BF16, rel=1e-12)
    assert dense_layer.dense_mlp == pytest.approx(DENSE_FFN * NVFP4, rel=1e-12)  # 222,953,472
    assert moe_layer.expert_one == pytest.approx(EXPERT * NVFP4, rel=1e-12)  # 24,772,608
    assert moe_layer.experts == pytest.approx(256 * EXPERT * NVFP4, rel=1e-12)
    assert moe_layer.shared == pytest.approx(EXPERT * NVFP4, rel=1e-12)
    assert wb.lm_head == pytest.approx(7168 * 129280 * BF16, rel=1e-12)  # 1,853,358,080 B
    assert wb.embedding == pytest.approx(7168 * 129280 * BF16, rel=1e-12)


def test_replicated_fuse_a_is_whole_on_every_rank():
    m = _released()
    rep = ("q_a_proj", "kv_a_proj_with_mqa")
    split, whole = weight_bytes(m, BF16), weight_bytes(m, BF16, rep)
    lp = whole.layers[5]
    assert lp.replicated - split.layers[5].replicated == pytest.approx(FUSE_A * BF16, rel=1e-12)
    assert lp.attention == pytest.approx((ATTN - FUSE_A) * BF16, rel=1e-12)
    # per GPU at TP 8: 60 more MB... exactly 61 layers x 30,277,632 B x (1 - 1/8)
    extra = shard_params(whole, 8, 1).total - shard_params(split, 8, 1).total
    assert extra == pytest.approx(61 * FUSE_A * BF16 * 7 / 8, rel=1e-12)


def test_engine_kv_budget_reads_the_same_map():
    """The KV budget's weight bytes per GPU are the per-module bytes above, sharded by TP 8 with
    fused_a whole (trtllm-1.0)."""
    from scalemodel.analytic.serving.engine import setup

    m, gpu = get_model("deepseek-v3"), get_gpu("b200")
    eng = get_serving_engine("trtllm-1.0")
    assert eng.replicated_modules == ("q_a_proj", "kv_a_proj_with_mqa")
    es = setup(eng, m, gpu, ServeLayout(8, 1, ep=4), precision("fp4"), "fp8", 1024, 2048,
               max_batch=8, token_budget=8192)
    want = shard_params(weight_bytes(_released(), BF16, eng.replicated_modules), 8, 1).total
    assert es.kv.weights_bytes == pytest.approx(want, rel=1e-12)


def _kw(gpu, **extra):
    return dict(max_tokens=16, max_seqs=1, attention_kind="flash3", overhead_s=0.0,
                cluster=make_cluster(gpu, 8), **extra)


def test_replicated_gemm_costs_the_full_gemm():
    """At one token every projection is a weight read: replicating fused_a adds its whole
    7168 x 2112 bytes (and its activations) on each rank and takes away its 1/8 share of the
    split lump (the lump's N is the attention's input projections over K = h)."""
    m, gpu = get_model("llama-3-8b"), get_gpu("h100-sxm")
    ds = get_model("deepseek-v3")
    lay = ServeLayout(8, 1, ep=4)
    prec = precision("bf16")  # every module at 2 B, so only the split differs
    base = build(ds, gpu, lay, prec, "bf16", **_kw(gpu))
    rep = build(ds, gpu, lay, prec, "bf16", replicated_modules=("q_a_proj", "kv_a_proj_with_mqa"),
                **_kw(gpu))
    hbm = gpu.hbm_bytes_per_s * float(constants()["gemm"]["hbm_efficiency"])
    n_in = (ATTN - O_PROJ) / H  # the input projections as one GEMM on K = h
    n_fa = 1536 + 576

    def read(n):  # one row: K N weights and K + N activations, 2 B each
        return (H * n * 2.0 + 2.0 * (H + n)) / hbm

    want = read(n_fa) + read((n_in - n_fa) / 8) - read(n_in / 8)
    assert float(rep.tables.dense[1] - base.tables.dense[1]) == pytest.approx(want, rel=1e-9)
    assert float(rep.tables.moe[1] - base.tables.moe[1]) == pytest.approx(want, rel=1e-9)
    # under attention DP every projection is whole already: nothing to add
    adp = ServeLayout(8, 1, ep=8, attention_dp=True)
    ex = get_serving_engine("trtllm-1.0").adp_exchange()
    a0 = build(ds, gpu, adp, prec, "bf16", adp_exchange=ex, **_kw(gpu))
    a1 = build(ds, gpu, adp, prec, "bf16", adp_exchange=ex,
               replicated_modules=("q_a_proj", "kv_a_proj_with_mqa"), **_kw(gpu))
    assert float(a1.tables.dense[1]) == float(a0.tables.dense[1])
    # a GQA model has no such projections: the names change nothing
    g0 = build(m, gpu, ServeLayout(8), prec, "bf16", **_kw(gpu))
    g1 = build(m, gpu, ServeLayout(8), prec, "bf16",
               replicated_modules=("q_a_proj", "kv_a_proj_with_mqa"), **_kw(gpu))
    assert list(g1.tables.dense) == list(g0.tables.dense)


def test_an_excluded_module_runs_on_the_16_bit_path(monkeypatch):
    """A release that excludes every module ("*") prices each GEMM of an fp4 run exactly as the
    bf16 precision does (the 16-bit tensor-core path, 2 B per weight and activation); the
    NVIDIA release (attention 16-bit, FFNs NVFP4) sits between all-NVFP4 and all-16-bit."""
    from dataclasses import replace

    m, gpu = get_model("deepseek-v3"), get_gpu("b200")
    lay = ServeLayout(8, 1, ep=4)
    released = build(m, gpu, lay, precision("fp4"), "fp8", **_kw(gpu))
    bf16 = build(replace(m, quant=None), gpu, lay, precision("bf16"), "fp8", **_kw(gpu))
    consts = dict(it.serving_constants())
    entry = dict(consts["checkpoints"]["nvidia-deepseek-r1-fp4"])
    consts["checkpoints"] = {"all16": {**entry, "exclude_modules": ["*"]}}
    monkeypatch.setattr(it, "serving_constants", lambda: consts)
    all16 = build(m, gpu, lay, precision("fp4"), "fp8", **_kw(gpu))
    assert list(all16.tables.dense) == list(bf16.tables.dense)
    assert list(all16.tables.moe) == list(bf16.tables.moe)
    consts["checkpoints"] = {}
    plain = build(replace(m, quant=None), gpu, lay, precision("fp4"), "fp8", **_kw(gpu))
    for t in (1, 8):
        assert plain.tables.dense[t] < released.tables.dense[t] < bf16.tables.dense[t]
        assert plain.tables.moe[t] < released.tables.moe[t] < bf16.tables.moe[t]


def test_the_mtp_layer_runs_at_its_own_precision(monkeypatch):
    """The draft pass runs the checkpoint's layer 61, which the release keeps 16-bit whole:
    it costs more than the same pass with every module at NVFP4, and more than the increase of
    a target MoE layer (whose experts stay NVFP4)."""
    from dataclasses import replace

    from scalemodel.analytic.serving.speculative import Speculation

    m, gpu = get_model("deepseek-v3"), get_gpu("b200")
    lay = ServeLayout(8, 1, ep=4)
    kw = _kw(gpu, spec=Speculation(k=1, alpha=0.9, drafter="mtp"))
    released = build(m, gpu, lay, precision("fp4"), "fp8", **kw)
    consts = dict(it.serving_constants())
    consts["checkpoints"] = {}
    monkeypatch.setattr(it, "serving_constants", lambda: consts)
    plain = build(replace(m, quant=None), gpu, lay, precision("fp4"), "fp8", **kw)
    d_draft = float(released.draft_pass[1] - plain.draft_pass[1])
    d_layer = float(released.tables.moe[1] - plain.tables.moe[1])
    assert d_draft > d_layer > 0


def test_bad_checkpoint_entries_are_one_line():
    good = {"model": "deepseek-v3", "precision": "fp4", "exclude_modules": ["lm_head"],
            "format": {"method": "nvfp4", "weight_bits": 4, "strategy": "group",
                       "group_size": 16, "scale_bytes": 1}}
    assert read_checkpoint("x", good).ignore == ("lm_head",)
    for bad in ({"exclude_modules": "lm_head"}, {"precision": "fp2"},
                {"format": {**good["format"], "strategy": "rows"}},
                {"format": {**good["format"], "weight_bits": 0}},
                {"format": {"method": "nvfp4"}}):
        with pytest.raises(BadInput) as e:
            read_checkpoint("x", {**good, **bad})
        assert "checkpoints.x" in str(e.value) and "\n" not in str(e.value)


def test_bad_replicated_modules_in_a_user_profile(tmp_path):
    msg = user_profile_refusal(tmp_path, sourced_field("replicated_modules", '["fused_a"]'))
    assert "replicated_modules" in msg and "kv_a_proj_with_mqa" in msg
