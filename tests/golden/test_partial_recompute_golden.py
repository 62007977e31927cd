"""Partial and per-module recompute (issue 16): Megatron-Core's selective modules
(``--recompute-modules``) and full recompute of N layers per model chunk (``--recompute-method
block --recompute-num-layers N``), priced in memory, time and FLOPs.

Every expected value below is derived in the test from the model's config and the kernels'
saved tensors (specs/data/saved_tensors.toml: the fused SwiGLU keeps 6 B per element of the
MLP width, its output 2 B of them; 16-bit activations), and Megatron-Core core_v0.16's
transformer_layer.py / multi_latent_attention.py / experts.py checkpoint wrappers:

* ``mla_up_proj`` discards the up-projected q, k and v (output-discarding checkpoint);
* ``mlp`` checkpoints a dense MLP whole (not an MoE layer's);
* ``moe_act`` discards the expert activation's output (kept by fc2 otherwise);
* ``layernorm`` discards the outputs of the norms that are modules of their own
  (gpt_layer_specs.py: MLA's input norm, an MoE layer's pre-MLP norm; the others are fused
  into the next linear).
"""

import pytest

from scalemodel.analytic.layout import (
    Context,
    TrainLayout,
    check,
    parse_layout,
    recompute_code,
    recompute_spec,
)
from scalemodel.analytic.memory import act_per_layer, static_model, training_bytes
from scalemodel.analytic.planner import evaluate_layout, make_cluster, make_job
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.specs.saved_tensors import kernel_saves

S = 4096
FLASH = kernel_saves("fused", "flash")


def _bits(*mods: str) -> int:
    return recompute_code("selective", mods) // 4


def _drop(model: str, moe: bool, tp: int, sp: bool, *mods: str) -> float:
    """Bytes one layer stops keeping per micro-batch (b = 1, s = 4096) under the modules,
    against the no-recompute set (core_attn not among them, so the lse stays in both)."""
    m = get_model(model)
    sm = static_model(m, FLASH)
    c = sm.moe if moe else sm.dense
    args = (S, 1, m.n_heads, m.n_kv_heads, tp, sp)
    none = float(act_per_layer(c, *args, 0, sm.mla))
    sel = float(act_per_layer(c, *args, 1, sm.mla, _bits(*mods)))
    return none - sel


def test_mla_up_proj_drops_q_k_v():
    # DeepSeek-V3: 128 heads, q/k head 128 nope + 64 rope = 192, v head 128.
    # q = k = 128 x 192 = 24,576 per token, v = 128 x 128 = 16,384; 2 B each:
    # 2 (24,576 + 24,576 + 16,384) = 131,072 B per token, split over tp = 2.
    want = 2 * (24576 + 24576 + 16384) * S / 2
    assert _drop("deepseek-v3", True, 2, True, "mla_up_proj") == pytest.approx(want)


def test_mlp_drops_the_dense_mlp_and_only_there():
    # Llama 3 8B: ffn 14,336; the fused SwiGLU set is 6 B per element of f, TP-split (tp = 2)
    assert _drop("llama-3-8b", False, 2, True, "mlp") == pytest.approx(6 * 14336 * S / 2)
    # "mlp" on an MoE layer is Megatron's no-op (the MLP is an MoELayer there)
    assert _drop("deepseek-v3", True, 1, False, "mlp") == 0.0


def test_moe_act_and_layernorm():
    # Mixtral 8x7B: top-2 routing, expert width 14,336: 2 B x 14,336 per routed copy
    assert _drop("mixtral-8x7b", True, 1, False, "moe_act") == pytest.approx(
        2 * 2 * 14336 * S)
    # the norms that are modules of their own (gpt_layer_specs.py): on Mixtral's MoE layer the
    # pre-MLP norm (the router reads it); the input norm is fused into linear_qkv. Its 16-bit
    # output, h = 4096, TP-replicated, split by sequence parallelism (tp 4)
    assert _drop("mixtral-8x7b", True, 4, True, "layernorm") == pytest.approx(
        2 * 4096 * S / 4)
    # a dense GPT layer: both norms are fused, nothing to drop
    assert _drop("llama-3-8b", False, 1, False, "layernorm") == 0.0
    # DeepSeek-V3 MoE layer: the input norm (MLA: q/kv down-projections are plain linears) and
    # the pre-MLP norm, h = 7168
    assert _drop("deepseek-v3", True, 1, False, "layernorm") == pytest.approx(2 * 2 * 7168 * S)
    # the two together drop both (their saved tensors do not overlap)
    both = _drop("mixtral-8x7b", True, 1, False, "moe_act", "layernorm")
    assert both == pytest.approx(2 * 2 * 14336 * S + 2 * 4096 * S)


def test_full_recompute_of_n_layers_keeps_the_rest_whole():
    """Llama 3 8B, pp = 1, N = 5 of 32 layers: 5 layers keep their 2 s b h input, the other 27
    their no-recompute set, so (partial - full) = 27 (A_none - 2 s h) per micro-batch."""
    m = get_model("llama-3-8b")
    sm = static_model(m, FLASH)
    kw = dict(tp=1, pp=1, dp=8, zero=3, sp=False, micro_batch=1, seq_len=S)
    full = float(training_bytes(sm, rc=2, **kw)["activations"])
    part = float(training_bytes(sm, rc=2, rc_layers=5, **kw)["activations"])
    a_none = float(act_per_layer(sm.dense, S, 1, m.n_heads, m.n_kv_heads, 1, False, 0, False))
    assert part - full == pytest.approx(27 * (a_none - 2 * S * m.hidden))


def test_hardware_flops_of_partial_full_recompute():
    """Full recompute re-runs one forward (a third of the 6 N-per-token training FLOPs); with
    N = 8 of the 32 layers of a chunk (pp = 1, vpp = 1) a quarter of it: hw / model = 1 + 1/12."""
    m = get_model("llama-3-8b")
    job = make_job(m, seq_len=S, global_batch_seqs=64)
    cl = make_cluster("h100-sxm", 8)
    lay = TrainLayout(tp=1, pp=1, dp=8, zero=3, recompute="full", recompute_layers=8)
    v = evaluate_layout(job, cl, lay).values
    assert float(v.hw_flops) / float(v.model_flops) == pytest.approx(1 + 0.25 / 3)


def test_step_time_orders_the_policies():
    """Recompute adds work to the backward: none <= N layers <= all layers; a selective
    module set re-runs a subset of a full forward."""
    m = get_model("mixtral-8x7b")
    job = make_job(m, seq_len=S, global_batch_seqs=256)
    cl = make_cluster("h100-sxm", 64)
    base = TrainLayout(tp=2, pp=2, dp=16, ep=8, zero=1)

    def t(**kw):
        return float(evaluate_layout(job, cl, base.with_(**kw)).values.step_time_s)

    none, full = t(recompute="none"), t(recompute="full")
    part = t(recompute="full", recompute_layers=4)
    sel = t(recompute="selective", recompute_modules=("moe_act", "layernorm"))
    assert none < part < full
    assert none < sel < full


def test_recompute_spec_and_codes_round_trip():
    assert recompute_spec("selective:mla_up_proj+mlp") == {
        "recompute": "selective", "recompute_modules": ("mlp", "mla_up_proj")}
    assert recompute_spec("full:2") == {"recompute": "full", "recompute_layers": 2}
    lay = TrainLayout(recompute="selective", recompute_modules=("mla_up_proj", "mlp"))
    assert lay.as_dict()["recompute_modules"] == "mla_up_proj+mlp"
    assert parse_layout(lay.as_text())["recompute_modules"] == ("mlp", "mla_up_proj")


@pytest.mark.parametrize("lay, rule", [
    (TrainLayout(tp=8, dp=8, recompute_modules=("mlp",)), "recompute modules"),
    (TrainLayout(tp=8, dp=8, recompute="selective", recompute_modules=("mla_up_proj",)),
     "recompute modules"),
    (TrainLayout(tp=8, dp=8, recompute="selective", recompute_modules=("moe_act",)),
     "recompute modules"),
    (TrainLayout(tp=8, dp=8, recompute_layers=2), "recompute layers"),
    (TrainLayout(tp=8, pp=8, dp=1, recompute="full", recompute_layers=12), "recompute layers"),
])
def test_rules_refuse_what_megatron_refuses(lay, rule):
    # llama-3-70b (dense, no MLA, 80 layers). At pp 8 the planner's split balances the output
    # head (1.23 layers on the last stage): a load of 10.23 holds 7 x 10 + 9 = 79 < 80 layers, a
    # load of 11 holds 7 x 11 + 9 = 86, and the 6 spare layers come off the first stage, the
    # last (to 8) and the first four middle ones: 10/10/10/10/10/11/11/8, so N = 11 is the
    # largest chunk and N = 12 is refused
    with pytest.raises(BadInput, match=f"rule {rule}:"):
        check(lay, Context(get_model("llama-3-70b"), lay.gpus, 512, S))


@pytest.mark.parametrize("text, needle", [
    ("recompute=selective,recompute_modules=attn", "recompute_modules must be"),
    ("recompute=full,recompute_layers=x", "whole number"),
])
def test_bad_keys_are_one_line(capsys, text, needle):
    try:
        rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "8", "--layout", text])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2 and not out and err.count("\n") == 1 and needle in err


def test_megatron_export_states_the_policy():
    """The Megatron export writes the policy as Megatron-Core's arguments: block method with N
    layers, and the module list (in layout.RECOMPUTE_MODULES order)."""
    from scalemodel.analytic.planner import search
    from scalemodel.report.export import export

    m = get_model("deepseek-v3")
    job = make_job(m, seq_len=S, global_batch_seqs=8192, precision="fp8")
    cl = make_cluster("h100-sxm", 1024)
    lay = "tp=2,pp=8,dp=64,ep=64,etp=1,vpp=4,micro_batch=1,zero=2,"
    text = " ".join(export("megatron", search(job, cl, parse_layout(
        lay + "recompute=full,recompute_layers=1"), top=0)).split())
    assert "--recompute-method block --recompute-num-layers 1" in text
    text = " ".join(export("megatron", search(job, cl, parse_layout(
        lay + "recompute=selective,recompute_modules=mla_up_proj+mlp"), top=0)).split())
    assert "--recompute-granularity selective --recompute-modules mlp mla_up_proj" in text
