"""Training memory per GPU: weights, gradients, optimizer states and activations under a layout.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", arXiv:2205.05198, Sec. 4): per layer, with 16-bit activations and 1-byte
dropout masks, a GPT layer stores ``34 s b h + 5 a s^2 b`` bytes (eq. 2). The terms are kept
apart here so the same accounting covers GQA (smaller K and V), gated MLPs (three MLP tensors
of width f instead of two), models without dropout, MLA and MoE layers:

=======================  ===========================  =====================================
term                     bytes (GPT: f = 4h, MHA)     split by TP?
=======================  ===========================  =====================================
norm inputs (2 norms)    4 s b h                      only with sequence parallelism
attention / MLP inputs   2 s b h + 2 s b h            only with sequence parallelism
dropout masks            2 s b h (if dropout)         only with sequence parallelism
Q, K, V, attn output     2 s b (q + k + v + o)        yes (K, V by min(t, h_kv))
MLP internals            4 s b f (plain), 6 s b f     yes
attention scores         (2 + 3 [dropout]) a s^2 b    yes; dropped by selective recompute
=======================  ===========================  =====================================

Full recomputation keeps only each layer's input, ``2 s b h``. ZeRO stages shard optimizer
states (1), gradients (2) and parameters (3) over the data-parallel group (dp x cp ranks).
Under 1F1B the first pipeline stage holds activations of min(p, m) micro-batches for its layers
(p when there are enough micro-batches), times ``1 + (p - 1)/(p v)`` with ``v`` interleaved
chunks (Korthikanti et al., Sec. 4.2.3).

The vectorised function :func:`training_bytes` evaluates many layouts at once for searches;
:func:`memory_report` evaluates one as a derivation and checks it against the vectorised path.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..derive import Derivation, Table
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, assumption, dtype, optimizer
from ..specs.frameworks import allocator_slack_of, edge_chunk_split, get_framework
from ..specs.saved_tensors import KernelSaves, kernel_saves
from ..specs.sources import cite
from .kv import check_tp
from .layout import RECOMPUTE_MODULES, TrainLayout, ep_from_dp_only
from .params import ParamCount, count_params

RECOMPUTE = ("none", "selective", "full")
# the planner adds torchtitan's op-level policy (code 3): save the outputs of every other matmul
# of a block and of the attention kernel, recompute the rest (see layer_act_coeffs)
PLAN_RECOMPUTE = RECOMPUTE + ("op",)


def validate_layout(m: ModelSpec, lay: TrainLayout, seq_len: int,
                    microbatches: int | None = None, edge_slots: int = 0,
                    framework: str | None = None) -> None:
    """The rules a layout must meet on its own (no GPU count or batch: analytic/layout.py RULES
    check those where the command has them)."""
    check_tp(m, lay.tp, lay.pp)
    if lay.recompute not in PLAN_RECOMPUTE:
        raise BadInput(f"--recompute must be one of {', '.join(PLAN_RECOMPUTE)}, "
                       f"got {lay.recompute!r}")
    if lay.recompute == "op" and (m.is_moe or m.kv_lora_rank):
        raise BadInput("--layout recompute=op (torchtitan's op-level policy) is modelled for dense "
                       f"models without MLA; {m.id} is {'MoE' if m.is_moe else 'MLA'}")
    if lay.ep > 1 or lay.folded:
        if not m.is_moe:
            raise BadInput(f"--layout ep={lay.ep}: {m.id} has no experts to distribute")
        if m.n_experts % lay.ep:
            raise BadInput(f"--layout ep={lay.ep} does not divide the {m.n_experts} experts of "
                           f"{m.id}")
        # the ranks an expert group is drawn from, as layout._ep_group counts them: dp alone
        # under the core_r0.8.0 rank grid (layout.ep_from_dp_only), else dp x cp
        dp_only = ep_from_dp_only(framework) and not lay.folded
        pool = lay.dp * (1 if dp_only else lay.cp) * (lay.tp if lay.folded else 1)
        group = "dp" if dp_only else "dp x cp (tp x dp x cp when etp = 1)"
        if lay.expert_tp not in (1, lay.tp) or pool % lay.ep or (lay.folded and lay.ep == 1):
            raise BadInput(f"--layout ep={lay.ep},etp={lay.expert_tp}: etp must be 1 or the tp, "
                           f"and ep must divide {group} = {pool}")
    # the head-tail causal split (the profile's cp_load_balance, default on) cuts the sequence
    # into 2 x cp equal chunks, as layout.py's "sequence" rule asks
    halves = lay.cp > 1 and get_framework(framework).get("cp_load_balance") is not False
    if seq_len < 1 or seq_len % (2 * lay.cp if halves else lay.cp):
        raise BadInput(f"--layout cp={lay.cp} does not divide --seq-len {seq_len}"
                       + (" into 2 x cp equal chunks (the head-tail causal split)"
                          if halves else ""))
    if lay.pp * lay.vpp > m.n_layers + edge_slots:
        edge = f" (+ {edge_slots} layer-free edge chunks)" if edge_slots else ""
        raise BadInput(f"--layout pp x vpp = {lay.pp * lay.vpp} exceeds the {m.n_layers} layers"
                       f"{edge} of {m.id}")
    if microbatches is not None and microbatches < 1:
        raise BadInput("the number of micro-batches must be at least 1")
    if lay.stages is not None:
        from .layout import check_stages

        check_stages(lay.stages, lay.pp, m)


# --- per-layer activation coefficients (model and kernels) ---------------------------------------


@dataclass(frozen=True)
class ActCoeffs:
    """Per-layer activation bytes divided by (s b): TP-replicated and TP-split parts, and scores.

    ``rep`` and ``split`` multiply s*b; ``scores`` multiplies a*s^2*b. ``kv`` is the K and V part
    (split by min(t, h_kv) rather than t). ``lse`` is the fused attention's per-token statistic
    (TP-split), dropped with the scores by selective recompute. ``full`` is what full recompute
    keeps, ``overlap`` the part of it that the layer's own first kernel keeps too (the layer
    input, when the norm keeps its 16-bit input).
    """

    rep: float
    split: float
    kv: float
    scores: float
    full: float
    op: float = 0.0  # TP-split bytes per token kept by the op-level policy (dense, no MLA)
    lse: float = 0.0
    overlap: float = 0.0
    # what each selective module's recompute drops, (TP-replicated, TP-split, K/V) bytes per
    # token, in layout.RECOMPUTE_MODULES order (core_attn: the scores and lse above)
    mods: tuple[tuple[float, float, float], ...] = ()


def _norm_bytes(m: ModelSpec, ks: KernelSaves) -> tuple[float, float, float]:
    """(bytes per element of h, fp32 statistics bytes per token, 16-bit input kept per element)
    of one of the model's norms under the kernels ``ks``."""
    if m.norm == "layer":  # one native kernel in every mode: input, mean and rstd
        return ks.layer_norm_input, 2 * ks.norm_stats, ks.layer_norm_input
    return ks.norm_input + ks.norm_upcast, ks.norm_stats, ks.norm_input


def _attention_widths(m: ModelSpec) -> tuple[int, int, int, int]:
    """Per-token widths of Q, K, V and the attention output over all heads."""
    if m.kv_lora_rank:
        q = m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        return q, q, m.n_heads * m.v_head_dim, m.n_heads * m.v_head_dim
    return m.q_dim, m.kv_dim, m.kv_dim, m.q_dim


def layer_act_coeffs(m: ModelSpec, moe_layer: bool, saves: KernelSaves | None = None) -> ActCoeffs:
    """Bytes per token one layer keeps for its backward, term by term, under the kernels
    ``saves`` (default: fused kernels and unfused attention, the accounting of Korthikanti et al.
    2022). 16-bit activations; see specs/data/saved_tensors.toml for each kernel's figure."""
    ks = saves or kernel_saves("fused", "unfused")
    h = m.hidden
    drop = 1 if m.dropout else 0
    n_norm = m.norms_per_layer
    norm_b, stats, keep_in = _norm_bytes(m, ks)
    q, k, v, o = _attention_widths(m)
    mla = bool(m.kv_lora_rank)
    lin = ks.linear_input
    shared = (m.shared_ffn or m.n_shared_experts * m.moe_ffn) if moe_layer else 0
    # norms, the attention and MLP inputs (the norms' outputs), dropout masks after o and fc2
    rep = (n_norm * (norm_b * h + stats) + _norm_out_bytes(m, moe_layer, lin, shared) * h
           + ks.dropout_mask * 2 * h * drop)
    if mla:
        rep += 2 * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)  # latents
    # the attention output: kept 16-bit by a fused attention kernel for its own backward, and
    # by the output projection (the same tensor at 2 B; its own fp8 copy at 1 B)
    split = 2 * q + (ks.attn_out_kept or _kept(lin, 0 if ks.scores else 1, 1)) * o
    kv = 2 * (k + v)
    if ks.kv_repeat and not mla and m.n_kv_heads < m.n_heads:
        split += 2 * 2 * m.q_dim  # repeat_kv: K and V kept at the query heads' width
        kv = 0.0
    if not mla and m.rope:  # eager rotary keeps its inputs (fused: nothing)
        split += ks.rotary * q
        kv += ks.rotary * k
    if not mla and (m.qk_norm or m.qk_norm_full):  # an RMSNorm over q and k before rotary
        qk_stats = ks.norm_stats * (1 if m.qk_norm_full else m.n_heads)
        kv_stats = ks.norm_stats * (1 if m.qk_norm_full else m.n_kv_heads)
        split += (ks.norm_input + ks.norm_upcast) * q + qk_stats
        kv += (ks.norm_input + ks.norm_upcast) * k + kv_stats
    # the MLP's fc1 output kept by the activation, the activation's output kept by fc2 (at the
    # Linear's input bytes)
    mlp_k = (ks.swiglu if m.gated_mlp else 4) - 2 + lin
    # a routed expert's fc1 output kept at the framework's bytes with the activation's output
    # recomputed (fp8_moe_act_input_saved), else as the dense MLP keeps it
    mlp_e = _expert_mlp_bytes(m, ks, mlp_k)
    if moe_layer:
        # per routed copy: the dispatched input (kept by the expert fc1), the expert MLP, and the
        # expert output kept by the multiply with its routing weight (the unpermute), or, where
        # the weight is applied inside the activation, the weight itself (fp32)
        split += m.top_k * (lin * h + mlp_e * m.moe_ffn + _moe_weight_bytes(ks, h)) \
            + mlp_k * shared
        rep += 4 * m.n_experts  # fp32 router probabilities
    else:
        split += mlp_k * m.ffn
    if ks.scores:  # softmax output, then dropout mask + output or the 16-bit cast of fp32 probs
        scores = ks.softmax + (ks.dropout_mask + 2 if drop else (2 if ks.softmax != 2 else 0))
        lse = 0.0
    else:
        scores, lse = 0.0, ks.lse * m.n_heads
    # op-level policy (torchtitan selective_ac_option "op"): of a block's matmuls in call order
    # (q, k, v, o, then gate, up, down or up, down) the 1st, 3rd, 5th and 7th outputs are kept,
    # with the attention kernel's output; 16-bit, per token
    op = 2 * (q + v + o + m.ffn + (h if m.gated_mlp else 0))
    return ActCoeffs(rep=rep, split=split, kv=kv, scores=scores, full=2 * h, op=op, lse=lse,
                     overlap=keep_in * h,
                     mods=_module_drops(m, moe_layer, mlp_k, kv, n_norm, lin, ks))


def _kept(lin: float, n16: int, n_linears: int) -> float:
    """Bytes per element kept of a 16-bit tensor that ``n16`` other kernels keep as it is and
    ``n_linears`` Linears keep as their input: one 16-bit copy when the Linears keep the tensor
    itself (``lin`` = 2), otherwise the 16-bit copy where another kernel keeps it plus one
    ``lin``-byte copy per Linear (Transformer Engine's fp8 Linears each keep their own cast)."""
    if lin >= 2:
        return 2.0 if n16 or n_linears else 0.0
    return (2.0 if n16 else 0.0) + n_linears * lin


def _norm_out_bytes(m: ModelSpec, moe_layer: bool, lin: float, shared: float) -> float:
    """Bytes per element of h kept of the norms' outputs (the attention and MLP inputs).

    The input norm's output feeds the QKV projection (with MLA the two down-projections when
    q has a LoRA rank). The pre-MLP norm's output feeds fc1 on a dense layer; on an MoE layer
    the router (a 16-bit Linear: frameworks.toml fp8_bf16_modules) keeps it as it is, and the
    shared experts' fc1 keeps its own copy. A model with one norm per layer feeds both blocks
    from it. With ``lin`` = 2 this is 2 B per norm, Korthikanti et al.'s count."""
    n_in = 2 if m.kv_lora_rank and m.q_lora_rank else 1
    if m.norms_per_layer < 2:
        return _kept(lin, int(moe_layer), n_in + (0 if moe_layer else 1)
                     + (1 if moe_layer and shared else 0)) * min(m.norms_per_layer, 1)
    mlp_in = (_kept(lin, 1, 1 if shared else 0) if moe_layer else _kept(lin, 0, 1))
    return _kept(lin, 0, n_in) + mlp_in


def _expert_mlp_bytes(m: ModelSpec, ks: KernelSaves, mlp_k: float) -> float:
    """Bytes per element of a routed expert's width its MLP keeps: ``mlp_k`` (the activation's
    saved input and output, fc2's input), or, where the framework keeps the activation's input
    (the fc1 output: 2 elements per element of the width when gated) at ``ks.moe_act_input``
    bytes and recomputes its output in the backward (frameworks.toml fp8_moe_act_input_saved),
    that input alone."""
    if not ks.moe_act_input:
        return mlp_k
    return (2 if m.gated_mlp else 1) * ks.moe_act_input


def _moe_weight_bytes(ks: KernelSaves, h: int) -> float:
    """Bytes per routed copy per token kept for the routing-weight multiply: the expert output
    (2 B per element of h) where the unpermute applies the weight, the fp32 weight where the
    expert activation does (Megatron-Core >= 0.13, weighted SwiGLU)."""
    return 4.0 if ks.moe_probs_in_act else 2.0 * h


def _module_drops(m: ModelSpec, moe_layer: bool, mlp_k: float, kv: float, n_norm: int,
                  lin: float = 2.0, ks: KernelSaves | None = None
                  ) -> tuple[tuple[float, float, float], ...]:
    """Bytes per token each Megatron-Core selective module stops keeping (TransformerConfig
    .recompute_modules, core_v0.16): "mlp", "moe" and "shared_experts" checkpoint the whole
    submodule (its input is the norm output the layer keeps anyway, so the inside is dropped:
    the MLP's saved set; the routed copies, expert MLPs, unpermute outputs and router
    probabilities); "moe_act" discards the activation's output that fc2 keeps (2 B per element
    of the expert width per routed copy); "layernorm" the outputs of the norms that are modules
    of their own (gpt_layer_specs.py: the input norm with MLA, the pre-MLP norm of an MoE layer;
    the others are fused into the next linear, IdentityOp, and keep nothing apart from it);
    "mla_up_proj" the
    up-projected q, k and v (with RoPE applied). Dense modules on MoE layers and MoE modules on
    dense layers drop nothing (transformer_layer.py: "mlp" only where the MLP is not an
    MoELayer)."""
    h = m.hidden
    ks = ks or kernel_saves("fused", "unfused")
    shared = (m.shared_ffn or m.n_shared_experts * m.moe_ffn) if moe_layer else 0
    q, _, _, _ = _attention_widths(m)
    mla = bool(m.kv_lora_rank)
    zero = (0.0, 0.0, 0.0)
    mlp_e = _expert_mlp_bytes(m, ks, mlp_k)
    # moe_act drops fc2's input; where the framework recomputes the activation's output anyway
    # (fp8_moe_act_input_saved) nothing of it is kept to drop
    act_out = 0.0 if ks.moe_act_input else lin
    return (
        zero,  # core_attn: c.scores and c.lse
        zero if moe_layer else (0.0, mlp_k * m.ffn, 0.0),
        (4.0 * m.n_experts, m.top_k * (lin * h + _moe_weight_bytes(ks, h) + mlp_e * m.moe_ffn)
         + mlp_k * shared, 0.0) if moe_layer else zero,
        # with fp8 Megatron-Core has fc2 keep its original 16-bit input (set_save_original_input)
        # so that this recompute frees it: what fc2's input cost is freed either way
        (0.0, act_out * m.top_k * m.moe_ffn, 0.0) if moe_layer else zero,
        (0.0, mlp_k * shared, 0.0) if shared else zero,
        (2.0 * h * min(n_norm, int(mla) + int(moe_layer)), 0.0, 0.0),
        (0.0, 2.0 * q, kv) if mla else zero,
    )


def _layer_coeffs(m: ModelSpec, saves: KernelSaves | None = None
                  ) -> tuple[ActCoeffs, ActCoeffs | None, int]:
    dense = layer_act_coeffs(m, False, saves)
    moe = layer_act_coeffs(m, True, saves) if m.is_moe else None
    return dense, moe, m.n_moe_layers


def _act_parts(c: ActCoeffs, s: Any, b: Any, a: int, n_kv: int, tp: Any, sp: Any, mla: bool
               ) -> tuple[Any, Any, Any, Any, Any]:
    """(selective set, no-recompute set, full-recompute set, op-level set, what full recompute's
    re-run shares with the stored input), bytes of one layer per micro-batch."""
    sb = s * b
    rep_div = np.where(sp, tp, 1)
    kv_div = tp if mla else np.minimum(tp, n_kv)
    sel = c.rep * sb / rep_div + c.split * sb / tp + c.kv * sb / kv_div
    none = sel + c.scores * a * s * s * b / tp + c.lse * sb / tp
    full = c.full * sb / rep_div
    return sel, none, full, full + c.op * sb / tp, c.overlap * sb / rep_div


def _module_bytes(c: ActCoeffs, s: Any, b: Any, n_kv: int, tp: Any, sp: Any, mla: bool,
                  mods: Any) -> tuple[Any, Any]:
    """(bytes the selective modules ``mods`` (bits) drop, the largest one module's re-run
    holds) of one layer per micro-batch; core_attn is counted with the scores."""
    sb = s * b
    rep_div = np.where(sp, tp, 1)
    kv_div = tp if mla else np.minimum(tp, n_kv)
    mods = np.asarray(mods).astype(np.int64)
    total, top = 0.0, 0.0
    present = int(np.bitwise_or.reduce(mods, axis=None)) if mods.size else 0
    for i, (r, sp_, k) in enumerate(c.mods):
        if not (r or sp_ or k) or not present >> i & 1:
            continue
        x = np.where((mods >> i) & 1, r * sb / rep_div + sp_ * sb / tp + k * sb / kv_div, 0.0)
        total, top = total + x, np.maximum(top, x)
    return total, top


def _core_attn(rc: Any, mods: Any) -> Any:
    mods = np.asarray(mods).astype(np.int64)
    return (rc == 1) & ((mods == 0) | ((mods & 1) == 1))


def act_per_layer(
    c: ActCoeffs, s: Any, b: Any, a: int, n_kv: int, tp: Any, sp: Any, rc: Any, mla: bool,
    mods: Any = 0,
) -> Any:
    """Bytes of one layer's stored activations (vectorised over s, b, tp, sp, rc codes 0/1/2/3;
    3 = the op-level policy: the layer input and the kept matmul / attention outputs).

    A fused attention kernel (FlashAttention) never stores the a s^2 scores (``c.scores`` is 0
    and ``c.lse`` its per-token statistic), so "none" then keeps what "selective" keeps plus
    that statistic."""
    return act_stored_and_working(c, s, b, a, n_kv, tp, sp, rc, mla, mods)[0]


def act_working_set(
    c: ActCoeffs, s: Any, b: Any, a: int, n_kv: int, tp: Any, sp: Any, rc: Any, mla: bool,
    mods: Any = 0,
) -> Any:
    """Bytes the layer being recomputed holds on top of what is stored, during its backward:
    full recompute re-runs the layer's forward (its no-recompute set, less the stored input the
    re-run keeps again), selective the attention core (the scores), the op-level policy the
    dropped matmul outputs. 0 without recompute."""
    return act_stored_and_working(c, s, b, a, n_kv, tp, sp, rc, mla, mods)[1]


def act_stored_and_working(
    c: ActCoeffs, s: Any, b: Any, a: int, n_kv: int, tp: Any, sp: Any, rc: Any, mla: bool,
    mods: Any = 0,
) -> tuple[Any, Any]:
    """(:func:`act_per_layer`, :func:`act_working_set`) from one pass over the layer's parts."""
    sel, none, full, op, overlap = _act_parts(c, s, b, a, n_kv, tp, sp, mla)
    dropped, top = _module_bytes(c, s, b, n_kv, tp, sp, mla, mods)
    core = _core_attn(rc, mods)
    kept_sel = np.where(core, sel, none) - dropped
    stored = np.where(rc == 0, none, np.where(rc == 1, kept_sel, np.where(rc == 3, op, full)))
    sel_ws = np.maximum(np.where(core, none - sel, 0.0), top)
    working = np.where(rc == 0, 0.0, np.where(rc == 1, sel_ws, np.where(
        rc == 3, np.maximum(none - op, 0.0), none - overlap)))
    return stored, working


def offload_layer_bytes(sm: StaticModel, s: Any, b: Any, tp: Any, sp: Any) -> Any:
    """Bytes of one offloaded layer that go to the host and back per micro-batch: its stored
    activations without recompute. TE's CPU offload moves the tensors marked for it (the
    linears' and norms' saved inputs and statistics, the attention's q, k, v, output and
    statistics: te-cpu-offload-v2-8), and Megatron-Core's fused bias-SwiGLU marks the fc1
    output it keeps (core_v0.15.0 fusions/fused_bias_swiglu.py), so the whole set leaves.
    Dense layers."""
    return act_per_layer(sm.dense, s, b, sm.n_heads, sm.n_kv_heads, tp, sp, 0, sm.mla)


def zero_state_bytes(
    p_dense: Any, p_expert: Any, group: Any, egroup: Any, zero: Any,
    e_w: float, e_g: float, k_opt: float,
) -> tuple[Any, Any, Any]:
    """(weights, gradients, optimizer) bytes per GPU under ZeRO stage ``zero``.

    Rajbhandari et al. 2020, Sec. 5 and Fig. 1: stage 1 divides the optimizer states K*P by the
    data-parallel group N_d, stage 2 also the gradients, stage 3 also the weights. Dense and
    expert parameters are sharded over their own groups (expert ranks divide the DP group).
    """
    zero = np.asarray(zero)
    z3, z2, z1 = (np.where(zero >= k, group, 1.0) for k in (3, 2, 1))
    ez3, ez2, ez1 = (np.where(zero >= k, egroup, 1.0) for k in (3, 2, 1))
    weights = (p_dense / z3 + p_expert / ez3) * e_w
    grads = (p_dense / z2 + p_expert / ez2) * e_g
    opt = (p_dense / z1 + p_expert / ez1) * k_opt
    return weights, grads, opt


def block_recompute_share(layers: Any, vpp: Any, n_stage: Any) -> Any:
    """Share of a stage's ``n_stage`` layers that full recompute of ``layers`` = N layers per
    model chunk re-runs (Megatron-Core's block method: each of the stage's vpp chunks
    checkpoints its first N, TransformerBlock._checkpointed_forward at core_v0.16.1; N at or
    above a chunk's layers recomputes it whole): min(N vpp, n) / n, and 1 where N is 0 (all).
    The memory (training_bytes) and the step time (step/candidates.full_share_of, each stage
    from its own n) both read it."""
    n_rc = np.asarray(layers, dtype=np.float64) * np.asarray(vpp, dtype=np.float64)
    n = np.asarray(n_stage, dtype=np.float64)
    return np.where(n_rc > 0, np.minimum(n_rc, n) / np.maximum(n, 1.0), 1.0)


def stage_chunk_layers(pp: Any, vpp: Any, n_layers: int, n_first: Any, n_mid: Any,
                       n_last: Any) -> Any:
    """Layers per model chunk of a split's largest stage as :func:`block_recompute_share`
    counts them: ceil(max(first, middle, last) / vpp) (L at pp = 1). An N at or above it
    re-runs every layer of every stage (recompute=full)."""
    n = np.maximum(np.maximum(np.asarray(n_first, dtype=np.float64), n_mid), n_last)
    return np.where(np.asarray(pp) <= 1, float(n_layers),
                    np.ceil(n / np.maximum(np.asarray(vpp, dtype=np.float64), 1.0) - 1e-9))


# --- uneven pipeline stages ------------------------------------------------------------------------


def chunk_partition(
    n_layers: int, pp: int, *, first_extra: float = 0.0, last_extra: float = 0.0, vpp: int = 1,
    last_min: int = 1, edge_chunks: bool = False,
) -> tuple[int, ...]:
    """Layers per model chunk (pp x vpp of them, chunk j on stage j mod pp), contiguous, balanced
    in layer-equivalents.

    The first stage also runs the embedding and the last the output head and the loss; their
    cost in layers (``first_extra``, ``last_extra``) is added to those stages. The split is the
    one that minimises the heaviest stage: the smallest load C with sum(floor(C - extra_i)) >= L
    (C a fraction where the head's share makes it one: 128 layers on 64 stages with a head of
    0.17 layers take C = 2.17 and 2 layers everywhere, not C = 3),
    then the surplus layers are taken off the first stage, the last, then the middle ones from
    the front (the first stage also holds the most activations in flight). With ``vpp`` > 1 the
    split is made over the pp x vpp virtual stages (chunk j runs on stage j mod pp);
    :func:`stage_partition` sums each stage's chunks. Llama 3 405B: 126 layers on 16 stages
    gives the first and last stages 7 layers and the others 8, as Dubey et al. 2024
    (Sec. 3.3.2) describe. Every chunk holds at least one decoder layer except the last when
    ``last_min`` is 0: a model whose MTP modules (counted in ``last_extra``) sit there, as
    Megatron-Bridge's DeepSeek-V3 layout 'Et|(tt|)*30mL' gives the last chunk the MTP layer and
    the loss only (v0.1.0rc3 scripts/performance/run_script.py).

    ``edge_chunks`` (a profile's ``pipeline_split = "edge_chunks"``; Dubey et al. 2024, Sec.
    3.3.2): the embedding and the output layer with the loss each take one layer's slot, so the
    L + 2 slots are split as above (no extras) and the first and the last chunk hold one decoder
    layer less; with one slot per chunk the first chunk holds only the embedding and the last
    only the output layer and the loss (Llama 3 405B: 126 + 2 = 128 = 16 stages x 8 chunks).
    """
    if edge_chunks:
        counts = list(chunk_partition(n_layers + 2, pp, vpp=vpp))
        counts[0] -= 1
        counts[-1] -= 1
        return tuple(counts)
    v = pp * vpp
    if v < 1 or n_layers < v:
        raise BadInput(f"{v} pipeline chunks (pp x vpp) need at least {v} layers, got {n_layers}")
    extra = [0.0] * v
    extra[0] += first_extra
    extra[-1] += last_extra
    # the smallest load C (in layer-equivalents, not rounded up to a whole layer: a chunk that
    # also holds the head is loaded k + last_extra) at which the chunks hold every layer; the
    # loads where a chunk's count steps are the integers plus each chunk's extra
    floors = [1] * (v - 1) + [last_min]
    mean = (n_layers + sum(extra)) / v  # the load cannot be lower than the mean
    steps = sorted({k + e for e in set(extra) for k in range(n_layers + 2)})
    for cap in (c for c in steps if c >= mean - 1e-9):
        counts = [max(lo, math.floor(cap - e + 1e-9)) for lo, e in zip(floors, extra, strict=True)]
        if sum(counts) >= n_layers:
            break
    surplus = sum(counts) - n_layers
    order = [0, v - 1] + list(range(1, v - 1)) if v > 1 else [0]
    while surplus > 0:
        progressed = False
        for i in order:
            if surplus and counts[i] > floors[i]:
                counts[i] -= 1
                surplus -= 1
                progressed = True
        if not progressed:  # pragma: no cover - n_layers >= v guarantees progress
            break
    return tuple(counts)


def stage_partition(
    n_layers: int, pp: int, *, first_extra: float = 0.0, last_extra: float = 0.0, vpp: int = 1,
    last_min: int = 1, edge_chunks: bool = False,
) -> tuple[int, ...]:
    """Layers per pipeline stage (first to last): :func:`chunk_partition` summed per stage."""
    per_stage = [0] * pp
    for j, c in enumerate(chunk_partition(n_layers, pp, first_extra=first_extra,
                                          last_extra=last_extra, vpp=vpp, last_min=last_min,
                                          edge_chunks=edge_chunks)):
        per_stage[j % pp] += c
    return tuple(per_stage)


def stage_shape(stage_layers: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(first, heaviest middle, its index, last) layer counts of a partition; middle 0 if pp <= 2."""
    if len(stage_layers) <= 2:
        return stage_layers[0], 0, 1, stage_layers[-1]
    mid = stage_layers[1:-1]
    n_mid = max(mid)
    return stage_layers[0], n_mid, 1 + mid.index(n_mid), stage_layers[-1]


# --- the vectorised evaluation ---------------------------------------------------------------------


@dataclass(frozen=True)
class StaticModel:
    """Everything about a model that the vectorised path needs, computed once."""

    pc: ParamCount
    dense: ActCoeffs
    moe: ActCoeffs | None
    n_moe_layers: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    hidden: int
    vocab: int
    mla: bool
    # per-layer parameter split (heaviest layer; and totals for pp == 1)
    big_split: float
    big_rep: float
    big_exp: float
    sum_split: float
    sum_rep: float
    sum_exp: float
    saves: KernelSaves | None = None  # the kernels the activation coefficients were read for


def static_model(m: ModelSpec, saves: KernelSaves | None = None) -> StaticModel:
    pc = count_params(m)
    dense, moe, n_moe = _layer_coeffs(m, saves)
    big = pc.max_layer
    return StaticModel(
        pc=pc, dense=dense, moe=moe, n_moe_layers=n_moe, n_layers=m.n_layers,
        n_heads=m.n_heads, n_kv_heads=m.n_kv_heads, hidden=m.hidden, vocab=m.vocab,
        mla=m.attention == "mla",
        big_split=big.attention + big.dense_mlp + big.shared, big_rep=big.replicated,
        big_exp=big.experts,
        sum_split=sum(lp.attention + lp.dense_mlp + lp.shared for lp in pc.layers),
        sum_rep=sum(lp.replicated for lp in pc.layers),
        sum_exp=sum(lp.experts for lp in pc.layers), saves=saves,
    )


def with_kernels(sm: StaticModel, m: ModelSpec, saves: KernelSaves) -> StaticModel:
    """``sm`` with its activation coefficients read for the kernels ``saves`` (the parameter
    counts are kept)."""
    if sm.saves == saves:
        return sm
    dense, moe, _ = _layer_coeffs(m, saves)
    return replace(sm, dense=dense, moe=moe, saves=saves)


def pipeline_in_flight(rank: Any, pp: Any, microbatches: Any = None, vpp: Any = 1,
                       extra_warmup: Any = 0, with_after: bool = True) -> tuple[Any, list[Any]]:
    """(the most model-chunk micro-batches pipeline rank ``rank`` holds, and for c = 1..max(vpp)
    what it still holds once c of its chunks have run a first backward), in chunks.

    One rule for every framework, read from the schedules' source (they agree):

    * 1F1B (vpp 1): Megatron-Core's forward_backward_pipelining_without_interleaving runs
      num_warmup_microbatches = min(p - i - 1, m) forwards, then a forward before each
      backward (schedules.py at d98e8a6, lines 2277-2278); torch's Schedule1F1B runs
      min(m, p - i) warmup forwards then backward-forward pairs; DeepSpeed's TrainSchedule keeps
      min(p - i, m) pipe buffers. So rank i holds W = min(m, p - i): p on the first stage, as
      Korthikanti et al. 2022 (Sec. 4.2.3) state.
    * Interleaved (v chunks per rank): Megatron-Core's get_pp_rank_microbatches sets
      2 (p - 1 - i) + (v - 1) g warmup chunk forwards, g = microbatch_group_size_per_vp_stage
      (default p), plus ``extra_warmup`` (one with overlap_moe_expert_parallel_comm, from
      core_v0.14.0), capped at m v; torch's ScheduleInterleaved1F1B the same with g = its
      micro-batches per round (p when m is a multiple of p). Then forward-backward pairs, so W + 1
      in flight (at most m v). On the first stage that is v p + p - 1 chunks of L / (p v) layers:
      the 1F1B stage's p micro-batches times 1 + (p - 1) / (p v), Korthikanti et al.'s factor.
      Backwards walk the rank's chunks last first, p micro-batches per chunk, so chunk c
      (c = 1..v) has its first backward at the ((c - 1) p + 1)-th.

    ``microbatches`` None: as many as the schedule can use (no cap). ``with_after`` False skips
    the per-chunk list (returned empty) where no caller reads it."""
    rank, pp, v = (np.asarray(x, dtype=np.float64) for x in (rank, pp, vpp))
    m = np.asarray(np.inf if microbatches is None else microbatches, dtype=np.float64)
    inter = v > 1
    total = m * v  # chunk forwards of the step
    extra = np.asarray(extra_warmup, dtype=np.float64)
    warm = np.where(inter, np.minimum(2 * (pp - 1 - rank) + (v - 1) * pp + extra, total),
                    np.minimum(m, pp - rank))
    steady = total - warm  # forwards after the warmup, one per backward
    peak = np.where(inter, np.minimum(warm + 1, total), warm)
    v_max = (int(np.max(v)) if np.size(v) else 1) if with_after else 0
    after = []
    for c in range(1, v_max + 1):
        k = (c - 1) * pp + 1  # backwards run when chunk c has had its first
        held = np.where(inter, warm + 1 - np.maximum(k - steady + 1, 0.0),
                        warm - np.maximum(k - steady, 0.0))
        after.append(np.where(c <= v, np.clip(held, 0.0, peak), 0.0))
    return peak, after


@functools.lru_cache(maxsize=4096)
def _edge_held_layers(n_layers: int, rank: int, pp: int, m: int, vpp: int) -> float:
    """The most decoder layers' activations (in micro-batch-layers) pipeline rank ``rank`` holds
    under the interleaved schedule with the edge-chunk split (:func:`chunk_partition`
    ``edge_chunks``): the schedule's order of work replayed over the rank's own chunk sizes.
    Forward k runs chunk (k // p) mod v, backward k chunk v - 1 - ((k // p) mod v), as in
    :func:`pipeline_in_flight` (warmup min(2 (p - 1 - i) + (v - 1) p, m v), then a forward
    before each backward)."""
    chunks = chunk_partition(n_layers, pp, vpp=vpp, edge_chunks=True)
    size = np.array([chunks[c * pp + rank] for c in range(vpp)], dtype=np.float64)
    total = m * vpp
    warm = min(2 * (pp - 1 - rank) + (vpp - 1) * pp, total)
    k = np.arange(total)
    fwd = np.cumsum(size[(k // pp) % vpp])  # layers after forward k
    bwd = np.concatenate(([0.0], np.cumsum(size[vpp - 1 - (k // pp) % vpp])))
    held = fwd[:warm].max(initial=0.0)
    j = np.arange(total - warm)  # the steady state: forward warm + j before backward j
    if j.size:
        held = max(held, float((fwd[warm + j] - bwd[j]).max()))
    return float(held)


def edge_chunks_in_flight(n_layers: int, rank: Any, pp: Any, microbatches: Any, vpp: Any,
                          n_stage: Any) -> Any:
    """The in-flight count of :func:`pipeline_in_flight` in chunks of the stage's mean size
    (``n_stage`` / v layers), read from the edge-chunk split's own chunk sizes
    (:func:`_edge_held_layers`): on the first rank the warmup's extra forwards run the
    embedding-only chunk and hold no decoder layer, as Dubey et al. 2024 (Sec. 3.3.2) meant the
    split to balance the first stage's memory. ``microbatches`` None: p per round, two rounds."""
    rank, pp, v, n_stage = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                                 for x in (rank, pp, vpp, n_stage)))
    m = np.broadcast_to(np.asarray(2 * pp if microbatches is None else microbatches,
                                   dtype=np.float64), rank.shape)
    rows = np.stack([x.ravel() for x in (rank, pp, v, m, n_stage)], axis=1)
    uniq, inv = np.unique(rows, axis=0, return_inverse=True)
    vals = np.zeros(len(uniq))
    for u, (r_, p_, v_, m_, n_) in enumerate(uniq):
        if p_ < 2 or v_ < 2 or n_ <= 0 or n_layers + 2 < p_ * v_ or not np.isfinite(m_):
            continue
        vals[u] = _edge_held_layers(n_layers, int(r_), int(p_), int(m_), int(v_)) * v_ / n_
    return vals[np.ravel(inv)].reshape(rank.shape)


def pp_extra_warmup(framework: str | None, ep_overlap: Any) -> tuple[Any, str]:
    """(extra warmup chunk forwards of the interleaved schedule, its source): the profile's
    ``pp_ep_overlap_warmup`` where the job overlaps the EP all-to-all (Megatron-Core: one, with
    overlap_moe_expert_parallel_comm); 0 otherwise or where the profile has no such field."""
    fw = get_framework(framework)
    n = float(fw.get("pp_ep_overlap_warmup") or 0)
    return (np.where(np.asarray(ep_overlap, dtype=bool), n, 0.0),
            fw.sources.get("pp_ep_overlap_warmup", ""))


def pp_fsdp_terms(framework: str | None) -> tuple[bool, float, str, str]:
    """(FSDP keeps a pipeline stage's parameters gathered across its micro-batches, bytes per
    element of the unsharded gradient accumulated across them, and the two sources): the
    profile's ``pp_reshard_after_forward`` (false: gathered) and ``pp_grad_accum_bytes``
    (frameworks.toml); absent: ZeRO-3 regathers per layer and gradients are reduced per
    micro-batch (False, 0)."""
    fw = get_framework(framework)
    raf = fw.get("pp_reshard_after_forward")
    acc = fw.get("pp_grad_accum_bytes")
    return (raf is False, float(acc or 0.0), fw.sources.get("pp_reshard_after_forward", ""),
            fw.sources.get("pp_grad_accum_bytes", ""))


def ddp_bucket_bytes(framework: str | None) -> tuple[float, str]:
    """(bytes per local parameter of the data-parallel reducer's bucket buffers, held beside the
    gradients under ZeRO-0, and the source): the profile's ``ddp_bucket_bytes`` (frameworks.toml;
    torch DDP with gradient_as_bucket_view off keeps a flat copy of every gradient in its
    all-reduce buckets); absent: 0 (gradients reduced in place, as Megatron's own DDP does)."""
    fw = get_framework(framework)
    v = fw.get("ddp_bucket_bytes")
    return float(v or 0.0), fw.sources.get("ddp_bucket_bytes", "")


def framework_optimizer(framework: str | None, optimizer_id: str | None = None) -> str:
    """The optimizer id priced: ``optimizer_id`` where one is given (--optimizer), else the
    framework profile's ``optimizer`` (frameworks.toml: the one its report states, e.g. the
    DeepSeek-V3 report's bf16 AdamW moments), else ``adam`` (fp32 master, m and v)."""
    if optimizer_id:
        return optimizer_id
    return str(get_framework(framework).get("optimizer") or "adam")


def grad_buffer_bytes(framework: str | None) -> tuple[float | None, str]:
    """(bytes per local parameter of the gradient the framework keeps through the step, and the
    source): the profile's ``grad_buffer_bytes`` (frameworks.toml; Megatron-Core's DDP keeps fp32
    main gradients where grad_reduce_in_fp32 is on, 4: megatron-core, megatron-core-0.8; the
    Megatron-Bridge performance presets turn it off, 2); absent: None (the weights' 16-bit dtype)."""
    fw = get_framework(framework)
    v = fw.get("grad_buffer_bytes")
    return (None if v is None else float(v)), fw.sources.get("grad_buffer_bytes", "")


def state_zero(framework: str | None, zero: Any) -> Any:
    """The ZeRO stage the optimizer states are held at: the layout's, or at least 1 where the
    profile's optimizer shards its fp32 master weights and states over DP by itself
    (frameworks.toml ``optimizer_shards_states``: DeepSpeed's BF16_Optimizer at 56c522386, which
    the pipeline engine runs at ZeRO stage 0). Only the optimizer states move; the weights and
    gradients keep the layout's stage."""
    if get_framework(framework).get("optimizer_shards_states"):
        return np.maximum(np.asarray(zero), 1)
    return zero


def training_bytes(
    sm: StaticModel,
    *,
    tp: Any,
    pp: Any,
    dp: Any,
    cp: Any = 1,
    ep: Any = 1,
    etp: Any = None,
    zero: Any = 0,
    rc: Any = 0,
    rc_mods: Any = 0,
    rc_layers: Any = 0,
    sp: Any = True,
    micro_batch: Any = 1,
    seq_len: Any = 4096,
    vpp: Any = 1,
    microbatches: Any = None,
    e_w: float = 2.0,
    e_g: float = 2.0,
    k_opt: float = 12.0,
    e_w_linear: Any = None,
    n_first: Any = None,
    n_mid: Any = None,
    mid_index: Any = 1,
    n_last: Any = None,
    loss_bytes: Any = 4.0,
    pp_gathered: Any = False,
    pp_grad_accum_bytes: Any = 0.0,
    pp_extra_warmup: Any = 0.0,
    edge_chunks: bool = False,
    ddp_bucket: float = 0.0,
    mtp_layers: int = 0,
    mtp_proj_params: float = 0.0,
    mtp_embedding: Any = False,
    offload_layers: Any = 0,
    offload_bytes: Any = 0.0,
) -> dict[str, np.ndarray]:
    """Per-GPU bytes of the heaviest pipeline stage for arrays of layouts (numpy broadcasting).

    ``mtp_layers`` multi-token-prediction modules sit on the last stage (where pp > 1 its
    ``n_last`` already counts their decoder layers; at pp = 1 they are added to the whole
    model's): each adds ``mtp_proj_params`` (eh_proj, TP-split, and its norms), one more copy
    of the output activations (its head input and logits) and, where ``mtp_embedding`` and
    pp > 1, the word-embedding copy the MTP stage builds for itself (Megatron-Core GPTModel:
    an embedding wherever pre_process or mtp_process).

    Stages hold ceil(L / pp) layers unless ``n_first`` / ``n_last`` (layers on the first and
    last stage) and ``n_mid`` (the most layers on a middle stage, the first such stage being
    ``mid_index``; 0 for none) describe an uneven split (see :func:`stage_partition`). A middle
    stage holds pp - mid_index micro-batches in flight.

    Routed experts are split over ``etp`` ranks (default: the tp) and ``ep`` expert groups; the
    ranks holding the same expert shard number tp x dp x cp / (etp x ep).

    Activations are the stored ones of the micro-batches in flight plus, under recompute, the
    working set of the one layer being recomputed (:func:`act_working_set`); the kernels are
    those ``sm`` was read for (:func:`with_kernels`). ``rc_mods`` are the selective modules
    (bits of layout.RECOMPUTE_MODULES), ``rc_layers`` the N layers per model chunk that full
    recompute re-runs (0: all; the other layers of the stage keep their no-recompute set).

    Returns arrays ``params``, ``grads``, ``optimizer``, ``activations``, ``total``, the
    boolean ``first_is_heaviest`` and ``heaviest`` (0 first, 1 middle, 2 last), and of the
    heaviest stage ``grad_accum`` (the accumulator bytes inside ``grads``) and
    ``chunks_in_flight`` (model-chunk micro-batches held at its peak).

    ``loss_bytes`` is what the loss holds per logit element at its peak, per layout
    (:func:`loss_logit_bytes`; 4: one fp32 copy of the logits, the default).

    ``offload_layers`` layers (pp = 1, no recompute) send ``offload_bytes`` each to the host
    after their forward (:func:`offload_layer_bytes`): one copy is in flight at a time, its
    buffer freed when the main stream waits for it (te-cpu-offload-v2-8); the last is waited
    for at the block's last layer, so the peak holds L - N layers and the larger of one layer
    and the output's activations (the logits).

    Micro-batches in flight follow the pipeline schedule's warmup on each stage
    (:func:`pipeline_in_flight`, one rule for every framework; ``pp_extra_warmup`` the chunk
    forwards a framework adds to the interleaved warmup, :func:`pp_extra_warmup`).
    ``pp_gathered`` and ``pp_grad_accum_bytes`` are the FSDP-under-pipeline terms of a framework
    (:func:`pp_fsdp_terms`): with pp > 1 and ZeRO-3 a gathered stage keeps every parameter of the
    stage unsharded (``e_w`` bytes each) instead of two layers; with pp > 1 and ZeRO >= 2 each
    stage parameter gets an unsharded gradient accumulator of ``pp_grad_accum_bytes`` from its
    model chunk's first backward to the step's last, counted at the schedule's moment where
    accumulators plus activations peak (the gradients then include it).
    ``ddp_bucket`` bytes per local parameter are the reducer's bucket copy of the gradients
    under ZeRO-0 (:func:`ddp_bucket_bytes`), counted with the gradients.

    ``e_w_linear`` (per layout; None: ``e_w``) is what one weight of the transformer layers'
    matmuls holds (attention projections, dense MLP, shared and routed experts) where the
    framework keeps them as fp8 primary weights (step/config.py fp8_weight_bytes); the
    embedding, the output head, the norms and the MTP projection stay at ``e_w``.
    """
    tp, pp, dp, cp, ep = (np.asarray(x, dtype=np.float64) for x in (tp, pp, dp, cp, ep))
    etp = tp if etp is None else np.asarray(etp, dtype=np.float64)
    zero, rc = np.asarray(zero), np.asarray(rc)
    s = np.asarray(seq_len, dtype=np.float64) / cp
    b = np.asarray(micro_batch, dtype=np.float64)
    L = sm.n_layers
    per_stage = np.ceil(L / pp)
    uneven = n_first is not None
    nf = np.asarray(n_first, dtype=np.float64) if uneven else per_stage
    nl = np.asarray(n_last, dtype=np.float64) if uneven else per_stage
    nm = np.asarray(n_mid, dtype=np.float64) if uneven else np.zeros_like(per_stage)
    one = pp == 1
    pc = sm.pc
    # parameters on one GPU of the first and the last stage (dense part), and experts
    lay_d = sm.big_split / tp + sm.big_rep

    mtp = float(mtp_layers)
    mtp_p = mtp * (mtp_proj_params / tp)  # eh_proj column-parallel (its 3 norms: under 1e-5)

    def body(n: Any) -> Any:
        return np.where(one, sm.sum_split / tp + sm.sum_rep + mtp * lay_d, n * lay_d)

    head = pc.lm_head if pc.lm_head else pc.embedding
    first_p = np.where(one, body(nf) + (pc.embedding + pc.lm_head) / tp + pc.final_norm + mtp_p,
                       body(nf) + pc.embedding / tp)
    emb_copy = np.where(np.asarray(mtp_embedding, dtype=bool) & (mtp > 0) & (pc.lm_head > 0),
                        pc.embedding / tp, 0.0)
    last_p = np.where(one, first_p, body(nl) + head / tp + pc.final_norm + mtp_p + emb_copy)
    mid_p = nm * lay_d

    def experts(n: Any) -> Any:
        return np.where(one, sm.sum_exp + mtp * sm.big_exp, n * sm.big_exp) / (etp * ep)

    exp_p = experts(nf)

    group = dp * cp  # ranks holding the same dense shard
    egroup = tp * group / (etp * ep)  # ranks holding the same expert shard
    # the layers' matmul weights on one GPU of each stage (the dense part of body(n))
    lin_one = (sm.sum_split + mtp * sm.big_split) / tp
    first_lin = np.where(one, lin_one, nf * sm.big_split / tp)
    last_lin = np.where(one, lin_one, nl * sm.big_split / tp)
    mid_lin = nm * sm.big_split / tp
    d_lin = 0.0 if e_w_linear is None else np.asarray(e_w_linear, dtype=np.float64) - e_w

    gathered = (pp > 1) & (zero >= 3) & np.asarray(pp_gathered, dtype=bool)
    accum = np.where((pp > 1) & (zero >= 2), np.asarray(pp_grad_accum_bytes, dtype=np.float64),
                     0.0)

    def states(p_dense: Any, p_exp: Any = None, p_lin: Any = 0.0) -> tuple[Any, Any, Any]:
        p_exp = exp_p if p_exp is None else p_exp
        par, gr, op = zero_state_bytes(p_dense, p_exp, group, egroup, zero, e_w, e_g, k_opt)
        gr = gr + np.where(zero == 0, (p_dense + p_exp) * ddp_bucket, 0.0)
        # ZeRO-3 gathers whole layers for compute: the current one and one prefetched; a
        # gathered pipeline stage (reshard_after_forward off) keeps all of its layers gathered
        par = par + np.where(gathered, (p_dense + p_exp) * e_w, np.where(
            zero >= 3, 2 * (sm.big_split / tp + sm.big_exp / (etp * ep)) * e_w, 0.0))
        # fp8 primary weights: the layers' matmul weights at e_w_linear instead of e_w (their
        # shards, and under ZeRO-3 the gathered copies too)
        z3 = zero >= 3
        lin_held = (p_lin / np.where(z3, group, 1.0) + p_exp / np.where(z3, egroup, 1.0)
                    + np.where(gathered, p_lin + p_exp, np.where(
                        z3, 2 * (sm.big_split / tp + sm.big_exp / (etp * ep)), 0.0)))
        return par + lin_held * d_lin, gr, op

    # activations of one micro-batch through one layer (dense / MoE)
    rc_mods = np.asarray(rc_mods)
    n_rc = np.asarray(rc_layers, dtype=np.float64) * np.asarray(vpp, dtype=np.float64)

    def layer_acts(rc_: Any) -> tuple[Any, Any, Any, Any]:
        args = (s, b, sm.n_heads, sm.n_kv_heads, tp, sp, rc_, sm.mla)
        a_dense, ws_ = act_stored_and_working(sm.dense, *args, rc_mods)
        if sm.moe is not None:
            a_moe, ws_moe = act_stored_and_working(sm.moe, *args, rc_mods)
            ws_ = np.maximum(ws_, ws_moe)
            n_dense = L - sm.n_moe_layers
            a_big = np.maximum(a_dense, a_moe)
            first = np.where(one, n_dense * a_dense + sm.n_moe_layers * a_moe + mtp * a_big,
                             nf * a_big)
        else:
            a_big = a_dense
            first = np.where(one, (L + mtp) * a_dense, nf * a_dense)
        return first, np.where(one, first, nl * a_big), nm * a_big, ws_

    stage_layers_act, last_layers_act, mid_layers_act, ws = layer_acts(rc)
    if np.any(n_rc > 0):  # full recompute of N layers per chunk: the rest keep everything
        f0, l0, m0, _ = layer_acts(np.zeros_like(rc))
        part = (rc == 2) & (n_rc > 0)

        def mix(x: Any, x0: Any, n: Any) -> Any:
            share = block_recompute_share(rc_layers, vpp, n)
            return np.where(part, share * x + (1 - share) * x0, x)

        stage_layers_act = mix(stage_layers_act, f0, np.where(one, float(L), nf))
        last_layers_act = mix(last_layers_act, l0, np.where(one, float(L), nl))
        mid_layers_act = mix(mid_layers_act, m0, nm)
    vpp = np.asarray(vpp, dtype=np.float64)
    rep_div = np.where(sp, tp, 1)
    out_act = (1 + mtp) * (4 * s * b * sm.hidden / rep_div
                           + np.asarray(loss_bytes, dtype=np.float64) * s * b * sm.vocab
                           / tp)  # norm/head input + logits (the MTP modules' own too)
    # offloaded layers (pp = 1): the last one's copy is waited for at the last layer's commit, so
    # the block's end holds one of them, the loss after it none (and the reloads of the
    # backward come back as later layers free theirs): (L - N) layers plus the larger of one
    # layer and the output's activations
    n_off = np.where(one & (rc == 0), np.asarray(offload_layers, dtype=np.float64), 0.0)
    off_b = np.asarray(offload_bytes, dtype=np.float64)
    freed = np.where(n_off > 0, np.maximum(n_off - 1, 0.0) * off_b + np.minimum(off_b, out_act),
                     0.0)
    stage_layers_act = stage_layers_act - freed
    last_layers_act = np.where(one, stage_layers_act, last_layers_act)

    def stage_peak(rank: Any, a_stage: Any, extra: Any, grads_acc: Any,
                   n_stage: Any = 0.0) -> tuple[Any, Any]:
        """(activations, accumulated gradients) of one stage at its peak: the schedule's most
        chunks in flight, or a moment after a chunk's first backward where the unsharded
        gradient accumulators of its chunks add to what is still in flight."""
        # the per-chunk moments only matter where some layout accumulates unsharded gradients
        need = bool(np.any(np.asarray(grads_acc) > 0))
        peak, with_acc = pipeline_in_flight(rank, pp, microbatches, vpp, pp_extra_warmup,
                                            with_after=need)
        if edge_chunks and np.any(vpp > 1):  # the edge-chunk split's own chunk sizes
            peak = np.where((vpp > 1) & (pp > 1), edge_chunks_in_flight(
                L, rank, pp, microbatches, vpp, n_stage), peak)
        best_n = peak + 0.0 * a_stage
        best_a = best_n / vpp * a_stage
        best_g = np.zeros_like(best_a)
        for c, n_c in enumerate(with_acc, start=1):
            a_c, g_c = n_c / vpp * a_stage, np.where(c <= vpp, c / vpp, 1.0) * grads_acc
            take = (grads_acc > 0) & (a_c + g_c > best_a + best_g)
            best_a, best_g = np.where(take, a_c, best_a), np.where(take, g_c, best_g)
            best_n = np.where(take, n_c, best_n)
        return best_a + extra + ws, best_g, best_n

    fp, fg, fo = states(first_p, p_lin=first_lin)
    lp_, lg, lo = states(last_p, experts(nl), last_lin)
    mp, mg, mo = states(mid_p, nm * sm.big_exp / (etp * ep), mid_lin)
    first_a, fa, fn = stage_peak(0.0, stage_layers_act, np.where(one, out_act, 0.0),
                                 accum * (first_p + exp_p), nf)
    last_a, la, ln = stage_peak(pp - 1, last_layers_act, out_act,
                                accum * (last_p + experts(nl)), nl)
    mid_a, ma, mn = stage_peak(np.asarray(mid_index, dtype=np.float64), mid_layers_act, 0.0,
                               accum * (mid_p + nm * sm.big_exp / (etp * ep)), nm)
    fg, lg, mg = fg + fa, lg + la, mg + ma
    first_t = fp + fg + fo + first_a
    last_t = lp_ + lg + lo + last_a
    mid_t = np.where(nm > 0, mp + mg + mo + mid_a, 0.0)
    first_heavy = first_t >= last_t
    heaviest = np.where(first_heavy, 0, 2)
    heaviest = np.where(mid_t > np.maximum(first_t, last_t), 1, heaviest)

    def pick(x: Any, y: Any, z: Any) -> Any:
        return np.where(heaviest == 0, x, np.where(heaviest == 1, y, z))

    return {
        "params": pick(fp, mp, lp_),
        "grads": pick(fg, mg, lg),
        "optimizer": pick(fo, mo, lo),
        "activations": pick(first_a, mid_a, last_a),
        "grad_accum": pick(fa, ma, la),  # of "grads": the unsharded accumulators at the peak
        "chunks_in_flight": pick(fn, mn, ln),  # model-chunk micro-batches held at the peak
        "total": np.maximum(np.maximum(first_t, last_t), mid_t),
        "first_is_heaviest": heaviest == 0,
        "heaviest": heaviest,
    }


# --- what a step may fill -----------------------------------------------------------------------


def communicators(tp: Any, pp: Any, dp: Any, cp: Any = 1, ep: Any = 1) -> Any:
    """NCCL communicators a step uses: one per parallel group of more than one rank (TP, PP,
    the DP / ZeRO group over dp x cp, CP, EP)."""
    tp, pp, dp, cp, ep = (np.asarray(x) for x in (tp, pp, dp, cp, ep))
    return ((tp > 1).astype(np.float64) + (pp > 1) + (dp * cp > 1) + (cp > 1) + (ep > 1))


def _fp8(precision: str) -> bool:
    if precision not in ("bf16", "fp8"):
        raise BadInput(f"--precision must be bf16 or fp8, got {precision!r}")
    return precision == "fp8"


def linear_input_bytes(framework: str | None, fp8: bool) -> tuple[float, str]:
    """(bytes per element a Linear keeps of its input for the weight gradient, its source):
    the 16-bit input (2) unless the run is fp8 and the framework profile's fp8 Linears keep
    something else (frameworks.toml fp8_saved_input: Transformer Engine keeps its fp8 cast)."""
    if not fp8:
        return 2.0, ""
    fw = get_framework(framework)
    v = fw.get("fp8_saved_input")
    return (2.0, "") if v is None else (float(v), fw.sources.get("fp8_saved_input", ""))


def moe_saves(framework: str | None, fp8: bool = False) -> dict[str, Any]:
    """kernel_saves keywords of a framework's MoE layer: the profile's moe_probs_in_expert_act
    (the routing weights applied inside the expert activation) with its source; absent: False.
    For an fp8 run also the profile's own fp8 storage of the attention output
    (fp8_attn_out_saved: bytes per element of the one copy both the attention backward and the
    output projection read) and of the routed experts' SwiGLU input (fp8_moe_act_input_saved:
    bytes per element of the fc1 output kept, the SwiGLU output recomputed), with their
    sources; absent: not in the keywords (the accounting of linear_input_bytes)."""
    fw = get_framework(framework)
    v = fw.get("moe_probs_in_expert_act")
    out = {"moe_probs_in_act": bool(v),
           "moe_probs_source": fw.sources.get("moe_probs_in_expert_act", "") if v else ""}
    for name, kw, key in (("fp8_attn_out_saved", "attn_out_kept", "attn_out"),
                           ("fp8_moe_act_input_saved", "moe_act_input", "moe_act_input")):
        x = fw.get(name) if fp8 else None
        if x is not None:
            out[kw], out[f"{key}_source"] = float(x), fw.sources.get(name, "")
    return out


LOSS_TP_NOTE = ("with TP the loss runs vocab-parallel; the profile does not give its buffers: one "
                "fp32 copy counted")


def loss_logit_bytes(framework: str | None, tp: Any = 1) -> tuple[Any, str, str]:
    """(bytes per logit element the loss holds at its peak, its source, its note): the framework
    profile's ``loss_logit_bytes`` (frameworks.toml) on a rank without TP and
    ``loss_logit_bytes_tp`` per element of a rank's vocabulary shard under TP (the
    vocab-parallel loss); a field the profile does not set reads 4 (one fp32 copy of the
    logits). ``tp`` may be an array of layouts; the bytes then come back as an array (source and
    note of the TP field where any layout has tp > 1)."""
    fw = get_framework(framework)

    def field(k: str) -> tuple[float, str, str]:
        v = fw.get(k)
        if v is None:
            return 4.0, "", LOSS_TP_NOTE if k.endswith("_tp") else ""
        return float(v), fw.sources.get(k, ""), fw.notes.get(k, "")

    base, tp_b = field("loss_logit_bytes"), field("loss_logit_bytes_tp")
    tp_a = np.asarray(tp, dtype=np.float64)
    if tp_a.ndim == 0:
        return tp_b if tp_a > 1 else base
    _, src, note = tp_b if np.any(tp_a > 1) else base
    return np.where(tp_a > 1, tp_b[0], base[0]), src, note


def usable_memory(hbm_bytes: float, n_comms: Any, framework: str | None = None,
                  memory_fraction: float | None = None, *, model_id: str | None = None,
                  gpu_id: str | None = None, precision: str | None = None) -> Any:
    """Bytes the training step's tensors may fill on one GPU: the HBM less the framework's
    reserve (CUDA context, NCCL buffers per communicator), shared with the caching allocator's
    slack: (M_hbm - R - n_comm x R_nccl) / (1 + f). A ``memory_fraction`` (--mem-fraction)
    replaces it with M_hbm x u.

    f is the profile's ``allocator_slack``, or, where ``model_id``, ``gpu_id`` and ``precision``
    (bf16 or the fp8 scaling) are given, the profile's model_recipes entry for that recipe where
    it sets one (frameworks.allocator_slack_of: a launcher that turns on expandable segments for
    that recipe only)."""
    if memory_fraction is not None:
        return np.asarray(n_comms, dtype=np.float64) * 0.0 + hbm_bytes * memory_fraction
    fw = get_framework(framework)
    reserve = float(fw.get("reserved_bytes") or 0.0)
    per_comm = float(fw.get("nccl_comm_bytes") or 0.0)
    slack = allocator_slack_of(fw.values, model_id, gpu_id, precision)[0]
    return (hbm_bytes - reserve - np.asarray(n_comms, dtype=np.float64) * per_comm) / (1 + slack)


def recipe_precision(framework: str | None, model_id: str, gpu_id: str, precision: str,
                     fp8_scaling: str | None = None) -> str:
    """The precision a recipe entry is keyed by: bf16, or the fp8 scaling the run uses (the
    given one, else the profile's for this model on this GPU, fp8_scaling_of)."""
    if precision != "fp8":
        return precision
    if fp8_scaling:
        return fp8_scaling
    from ..specs.frameworks import fp8_scaling_of

    try:
        fw = get_framework(framework)
    except BadInput:  # a profile from a user file: the default's fields
        fw = get_framework(None)
    return fp8_scaling_of(fw, model_id, gpu_id)[0]


def _capacity_steps(d: Derivation, gpu: GPUSpec, lay: TrainLayout, framework: str | None,
                    memory_fraction: float | None, model_id: str | None = None,
                    precision: str | None = None) -> float:
    d.given(f"{gpu.name} memory", "M_hbm", gpu.hbm_bytes, "B", gpu.source_of("hbm_bytes"))
    if memory_fraction is not None:
        d.given("fraction planned for the step", "u", memory_fraction, "1", "--mem-fraction")
        return d.calc("usable memory per GPU", "M_cap", "M_hbm * u", "B")
    fw = get_framework(framework)

    def src(k: str) -> str:
        return cite(fw.sources.get(k, ""))

    n = float(communicators(lay.tp, lay.pp, lay.dp, lay.cp, lay.ep))
    d.given(f"{fw.id}: CUDA context and loaded kernels", "R", float(fw.get("reserved_bytes") or 0),
            "B", src("reserved_bytes"), note=fw.notes.get("reserved_bytes", ""))
    d.given(f"{fw.id}: NCCL buffers per communicator", "R_nccl",
            float(fw.get("nccl_comm_bytes") or 0), "B", src("nccl_comm_bytes"),
            note=fw.notes.get("nccl_comm_bytes", ""))
    d.given("communicators in use (groups of more than one rank)", "n_comm", n, "1",
            note="TP, PP, DP x CP, CP, EP")
    slack, recipe = allocator_slack_of(fw.values, model_id, gpu.id, precision)
    if recipe is None:
        d.given(f"{fw.id}: caching-allocator slack (share of the peak)", "f", slack, "1",
                src("allocator_slack"), note=fw.notes.get("allocator_slack", ""))
    else:
        d.given(f"{fw.id}: caching-allocator slack of this recipe ({model_id} on {gpu.id}, "
                f"{precision})", "f", slack, "1", cite(recipe),
                note="the recipe's launcher sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    cap = d.calc("usable memory per GPU", "M_cap", "(M_hbm - R - n_comm * R_nccl) / (1 + f)", "B",
                 check=float(usable_memory(gpu.hbm_bytes, n, framework, model_id=model_id,
                                           gpu_id=gpu.id, precision=precision)), rel_tol=1e-9)
    return cap


# --- one layout, with its derivation -----------------------------------------------------------------


@dataclass(frozen=True)
class MemoryReport:
    model: str
    gpu: str | None
    layout: TrainLayout
    seq_len: int
    microbatches: int | None
    optimizer: str
    dtype: str
    per_gpu_bytes: float
    breakdown: dict[str, float]
    heaviest_stage: str
    capacity_bytes: float | None
    fits: bool | None
    derivation: Derivation
    min_gpus: int | None = None
    min_layout: TrainLayout | None = None
    fit_table: Table | None = None
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "model": self.model,
            "gpu": self.gpu,
            "layout": layout_json(self.layout, self.seq_len, self.microbatches),
            "optimizer": self.optimizer,
            "dtype": self.dtype,
            "per_gpu_bytes": self.per_gpu_bytes,
            "breakdown": self.breakdown,
            "heaviest_stage": self.heaviest_stage,
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "warnings": list(self.warnings),
        }
        if self.min_gpus is not None:
            d["min_gpus"] = self.min_gpus
            d["min_layout"] = (layout_json(self.min_layout, self.seq_len, None)
                               if self.min_layout else None)
        d.update(self.extra)
        d["derivation"] = self.derivation.to_dict()
        return d


def layout_json(lay: TrainLayout, seq_len: int, microbatches: int | None) -> dict[str, Any]:
    """A layout in memory's JSON: the layout keys, sp, the GPUs, the sequence and micro-batches."""
    return lay.as_dict() | {"sp": lay.sp, "gpus": lay.gpus, "seq_len": seq_len,
                            "microbatches": microbatches}


def _mtp_terms(m: ModelSpec, framework: str | None) -> dict[str, Any]:
    """training_bytes' multi-token-prediction keywords for a model (its config's
    num_nextn_predict_layers), read from the one place the step model reads them
    (step/shapes.py model_shapes) so that `memory` and `plan train` count the same MTP bytes."""
    if not m.mtp_layers:
        return {}
    from .step.shapes import model_shapes

    ms = model_shapes(m)
    return {"mtp_layers": ms.mtp, "mtp_proj_params": ms.mtp_proj_params,
            "mtp_embedding": bool(get_framework(framework).get("mtp_embedding_copy") or False)}


def _fp8_primary_weights(framework: str | None, model_id: str, gpu: GPUSpec | None,
                         precision: str, zero: int, e_w: float
                         ) -> tuple[float, str, str, str] | None:
    """(bytes per layer-matmul weight, fp8 scaling, profile source key, storage citation) where
    the profile's recipe keeps fp8 primary weights for an fp8 run of the model on the GPU
    (frameworks.fp8_param_bytes; as step/config.py fp8_weight_bytes prices them for
    ``plan train``): 16-bit working weights and a GPU; at ZeRO 2 / 3 Megatron-FSDP's buffers
    (fp8_param_gather_fsdp); else None."""
    if precision != "fp8" or gpu is None or e_w != 2.0:
        return None
    from ..specs.frameworks import fp8_param_bytes

    try:
        fw = get_framework(framework)
    except BadInput:  # a profile from a user file: the default's fields
        fw = get_framework(None)
    scaling = recipe_precision(framework, model_id, gpu.id, precision)
    fsdp = zero >= 2
    hit = fp8_param_bytes(fw.values, scaling, gpu.compute_capability, fsdp=fsdp)
    if hit is None:
        return None
    key = "fp8_param_gather_fsdp" if fsdp else "fp8_param_gather"
    return hit[0], scaling, str(fw.sources.get(key, "")), hit[2]


def memory_report(
    m: ModelSpec,
    lay: TrainLayout,
    *,
    seq_len: int = 4096,
    microbatches: int | None = None,
    gpu: GPUSpec | None = None,
    optimizer_id: str | None = None,
    weight_dtype: str = "bf16",
    grad_dtype: str | None = None,
    memory_fraction: float | None = None,
    attention: str = "unfused",
    kernels: str = "fused",
    framework: str | None = None,
    precision: str = "bf16",
    ep_overlap: bool = False,
) -> MemoryReport:
    """One layout's memory per GPU with its derivation. ``attention`` and ``kernels`` name the
    kernels whose saved tensors the activations count (specs/data/saved_tensors.toml; the
    defaults are Korthikanti et al.'s accounting: fused kernels, scores in HBM); ``framework``
    the profile whose memory reserve the usable memory leaves free (:func:`usable_memory`) and,
    with ``precision`` fp8, what its fp8 Linears keep of their inputs
    (:func:`linear_input_bytes`); ``ep_overlap`` whether the job overlaps the EP all-to-all (the
    warmup a framework adds for it, :func:`pp_extra_warmup`)."""
    validate_layout(m, lay, seq_len, microbatches,
                    2 if edge_chunk_split(framework, m.id) else 0, framework)
    ks = kernel_saves(kernels, attention, *linear_input_bytes(framework, _fp8(precision)),
                      **moe_saves(framework, _fp8(precision)))
    warnings: list[str] = []
    if seq_len > m.max_context:
        warnings.append(
            f"--seq-len {seq_len:,} exceeds {m.id}'s max_position_embeddings "
            f"{m.max_context:,}; computed anyway"
        )
    opt = optimizer(framework_optimizer(framework, optimizer_id))
    ew = dtype(weight_dtype, "--dtype")
    eg = dtype(grad_dtype or weight_dtype, "--grad-dtype")
    e_g, eg_src = float(eg.bytes), eg.source
    fw_g, fw_g_src = grad_buffer_bytes(framework)
    if grad_dtype is None and fw_g is not None:  # the profile's gradient buffer, unless asked
        e_g, eg_src = fw_g, fw_g_src
    sm = static_model(m, ks)
    rc_code = PLAN_RECOMPUTE.index(lay.recompute)
    rc_mods = (lay.rc_code // 4) % (1 << len(RECOMPUTE_MODULES))
    sp = lay.sp and lay.tp > 1
    etp = lay.expert_tp
    shape: dict[str, Any] = {}
    if lay.stages is not None and lay.pp > 1:
        nf, nm, mi, nl = stage_shape(lay.stages)
        shape = {"n_first": nf, "n_mid": nm, "mid_index": mi, "n_last": nl}
    gathered, accum, raf_src, acc_src = pp_fsdp_terms(framework)
    # the edge-chunk split's own chunk sizes, where the layout's stages are that split
    edge = edge_chunk_split(framework, m.id) and lay.pp > 1 and (
        lay.stages is None or tuple(lay.stages) == stage_partition(
            m.n_layers, lay.pp, vpp=lay.vpp, edge_chunks=True))
    # the EP overlap's extra warmup chunk; a framework that refuses that overlap with full
    # recompute runs such a layout without it (as the step model's EP term does)
    ep_on = ep_overlap and m.is_moe and not (
        lay.recompute == "full"
        and get_framework(framework).get("ep_overlap_full_recompute") is False)
    extra_w, extra_src = pp_extra_warmup(framework, ep_on)
    bucket, bucket_src = ddp_bucket_bytes(framework)
    f8w = _fp8_primary_weights(framework, m.id, gpu, precision, lay.zero, ew.bytes)
    vec = training_bytes(
        sm, tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp, ep=lay.ep, etp=etp,
        zero=state_zero(framework, lay.zero),
        rc=rc_code, rc_mods=rc_mods, rc_layers=lay.recompute_layers, sp=sp,
        micro_batch=lay.micro_batch, seq_len=seq_len, vpp=lay.vpp,
        microbatches=microbatches, e_w=ew.bytes, e_g=e_g, k_opt=opt.bytes_per_param,
        e_w_linear=None if f8w is None else f8w[0],
        loss_bytes=loss_logit_bytes(framework, lay.tp)[0], pp_gathered=gathered,
        pp_grad_accum_bytes=accum, pp_extra_warmup=extra_w, ddp_bucket=bucket,
        edge_chunks=edge, **shape,
        **_mtp_terms(m, framework),
    )
    heavy = int(vec["heaviest"])
    stage = "only" if lay.pp == 1 else ("first", "middle", "last")[heavy]
    # layers on the heaviest stage, and its micro-batches in flight (uneven splits only)
    n_stage = (shape.get(("n_first", "n_mid", "n_last")[heavy]) if shape else None)
    src = m.source
    pc = sm.pc
    d = Derivation(f"Training memory per GPU: {m.id}, {lay.describe()}")

    # parameters held by this GPU
    d.given("parameters (exact count from the config)", "P", pc.total, "1", src)
    d.given("tensor-parallel degree", "t", lay.tp, "1")
    d.given("pipeline-parallel degree", "p", lay.pp, "1")
    d.given("data-parallel degree", "d", lay.dp, "1")
    d.given("context-parallel degree", "c", lay.cp, "1")
    if m.is_moe:
        d.given("expert-parallel degree", "x", lay.ep, "1")
        d.given("expert tensor-parallel degree", "t_e", etp, "1",
                note="experts split like the dense MLP" if etp == lay.tp else
                "experts unsplit below the tp: MoE parallel folding")
    if lay.pp == 1:
        dense_gpu = (sm.sum_split / lay.tp + sm.sum_rep + (pc.embedding + pc.lm_head) / lay.tp
                     + pc.final_norm)
        exp_gpu = sm.sum_exp / (etp * lay.ep)
        d.given("dense parameters on one GPU (TP-split, norms replicated)", "P_d", dense_gpu, "1",
                note="(attention + MLP + embeddings)/t + norms")
    else:
        per_stage = math.ceil(m.n_layers / lay.pp) if n_stage is None else n_stage
        body = per_stage * (sm.big_split / lay.tp + sm.big_rep)
        head = pc.lm_head if pc.lm_head else pc.embedding
        ends = {"first": pc.embedding / lay.tp, "middle": 0.0,
                "last": head / lay.tp + pc.final_norm}
        dense_gpu = body + ends[stage]
        exp_gpu = per_stage * sm.big_exp / (etp * lay.ep)
        what = {"first": " + embedding", "middle": "", "last": " + output head"}[stage]
        count = f"ceil(L/p) = {per_stage}" if n_stage is None else f"{per_stage} (uneven split)"
        d.given(f"dense parameters on one GPU of the {stage} stage", "P_d", dense_gpu, "1",
                note=f"{count} layers (heaviest layer assumed){what}, split by t")
    if m.is_moe:
        d.given("routed-expert parameters on one GPU", "P_e", exp_gpu, "1",
                note="experts / (t_e * x) on this stage")
    d.given(f"bytes per {ew.name} weight", "e_w", ew.bytes, "B", ew.source)
    if e_g == eg.bytes and eg_src == eg.source:
        d.given(f"bytes per {eg.name} gradient", "e_g", eg.bytes, "B", eg.source)
    else:
        d.given("bytes per gradient (the framework's gradient buffer)", "e_g", e_g, "B",
                cite(eg_src), note="frameworks.toml grad_buffer_bytes")
    d.given(f"optimizer bytes per parameter ({opt.label})", "K", opt.bytes_per_param, "B",
            opt.source, note=opt.note)
    d.given("ZeRO stage", "z", lay.zero, "1")
    d.calc("ranks sharing one dense shard (ZeRO group)", "G", "d * c", "1")
    d.calc("ranks sharing one expert shard", "G_e", "t * d * c / (t_e * x)" if m.is_moe
           else "d * c", "1")
    moe = m.is_moe

    def held(sharded: bool) -> str:
        """Parameters one GPU keeps for a state that ZeRO shards (or not) at this stage."""
        dense = "P_d / G" if sharded else "P_d"
        if not moe:
            return dense
        return f"({dense} + {'P_e / G_e' if sharded else 'P_e'})"

    p_formula = f"{held(lay.zero >= 3)} * e_w"
    if f8w is not None:  # fp8 primary weights (ZeRO 0 / 1 only: f8w is None from 2)
        mtp_n = float(_mtp_terms(m, framework).get("mtp_layers", 0))
        lin_gpu = ((sm.sum_split + mtp_n * sm.big_split) / lay.tp if lay.pp == 1
                   else (per_stage * sm.big_split / lay.tp))
        d.given("transformer-layer matmul weights on one GPU (Transformer Engine Linear)",
                "P_l", lin_gpu, "1", note="attention and MLP projections of P_d, split by t")
        d.given(f"bytes per fp8 primary weight ({f8w[1]}, {gpu.name if gpu else ''})", "e_l",
                f8w[0], "B", f8w[3],
                note=f"the framework keeps the layers' weights in fp8 ({cite(f8w[2])}); "
                     "embedding, head and norms stay at e_w")
        p_formula = ("(P_d - P_l) * e_w + (P_l + P_e) * e_l" if moe
                     else "(P_d - P_l) * e_w + P_l * e_l")
    if gathered and lay.pp > 1 and lay.zero >= 3:
        p_formula += f" + {held(False)} * e_w"
        d.note("FSDP under pipeline parallelism keeps the stage's parameters gathered from its "
               f"first forward to its last backward (the profile's pp_reshard_after_forward = "
               f"false; {cite(raf_src)}): the whole stage unsharded beside the shards.")
    elif lay.zero >= 3:
        d.given("parameters of the heaviest layer on one GPU", "P_lay",
                sm.big_split / lay.tp + sm.big_exp / (etp * lay.ep), "1")
        p_formula += " + 2 * P_lay * e_w"
        d.note("ZeRO-3/FSDP gathers whole layers to compute: one in use and one prefetched.")
    params_b = d.calc("weights per GPU", "M_p", p_formula, "B", check=float(vec["params"]),
                      rel_tol=1e-6)
    g_formula = f"{held(lay.zero >= 2)} * e_g"
    acc_b = float(vec["grad_accum"])
    acc_share = 0.0
    if acc_b > 0:
        acc_share = acc_b / (accum * (dense_gpu + (exp_gpu if moe else 0.0)))
        d.given("bytes per element of the unsharded gradient accumulated across micro-batches",
                "e_acc", accum, "B", cite(acc_src),
                note="FSDP reduces gradients only after the step's last backward under PP")
        d.given("share of the stage's chunks holding accumulators at the peak", "f_acc",
                acc_share, "1", note="c / v after the first backward of c of the v chunks")
        g_formula += f" + f_acc * {held(False)} * e_acc"
    if bucket > 0 and lay.zero == 0:
        d.given("bytes per local parameter of the DP reducer's bucket copy of the gradients",
                "e_bkt", bucket, "B", cite(bucket_src),
                note="torch DDP without gradient_as_bucket_view: a flat copy of every gradient")
        g_formula += f" + {held(False)} * e_bkt"
    grads_b = d.calc("gradients per GPU", "M_g", g_formula, "B",
                     check=float(vec["grads"]), rel_tol=1e-6)
    opt_b = d.calc("optimizer states per GPU", "M_o", f"{held(bool(state_zero(framework, lay.zero) >= 1))} * K", "B",
                   check=float(vec["optimizer"]), rel_tol=1e-6)

    # activations
    act_b = _activation_steps(d, m, sm, lay, sp, stage, float(vec["activations"]), n_stage,
                              shape.get("mid_index", 1), seq_len, microbatches, framework,
                              float(vec["chunks_in_flight"]), acc_share,
                              (float(extra_w), extra_src), edge)
    total = d.calc("total per GPU", "M_gpu", "M_p + M_g + M_o + M_a", "B",
                   check=float(vec["total"]), rel_tol=1e-6)
    cap = fits = None
    if gpu is not None:
        cap = _capacity_steps(d, gpu, lay, framework, memory_fraction, m.id,
                              recipe_precision(framework, m.id, gpu.id, precision))
        fits = bool(total <= cap)
    return MemoryReport(
        model=m.id, gpu=gpu.id if gpu else None, layout=lay, seq_len=seq_len,
        microbatches=microbatches, optimizer=opt.id, dtype=ew.name,
        per_gpu_bytes=float(total),
        breakdown={"params": float(params_b), "grads": float(grads_b),
                   "optimizer": float(opt_b), "activations": float(act_b)},
        heaviest_stage=stage, capacity_bytes=cap, fits=fits, derivation=d,
        warnings=tuple(warnings),
    )


def _kernel_note(m: ModelSpec, ks: KernelSaves) -> str:
    """What the kernels keep, in words, for the derivation."""
    norm_b, stats, _ = _norm_bytes(m, ks)
    parts = [f"{m.norms_per_layer} {'LayerNorm' if m.norm == 'layer' else 'RMSNorm'}(s) keeping "
             f"{norm_b:g} B per element + {stats:g} B per token"
             + (" (fp32 upcast)" if m.norm != "layer" and ks.norm_upcast else "")]
    if m.gated_mlp:
        parts.append(f"SwiGLU keeping {ks.swiglu:g} B per element of f")
    if m.rope and not m.kv_lora_rank and ks.rotary:
        parts.append(f"rotary keeping {ks.rotary:g} B per element of q and k")
    if ks.kv_repeat and m.n_kv_heads < m.n_heads and not m.kv_lora_rank:
        parts.append("K and V repeated to the query heads")
    if m.is_moe:
        if ks.moe_probs_in_act:
            src = ks.source_of("moe_probs_in_act")
            parts.append("per routed copy: input 2h, expert MLP, its fp32 routing weight (applied "
                         "inside the activation; the expert output is not kept)"
                         + (f" [{cite(src)}]" if src else ""))
        else:
            parts.append("per routed copy: input 2h, expert MLP, output 2h")
    if ks.linear_input != 2:
        src = ks.source_of("linear_input")
        parts.append(f"fp8 Linears keep {ks.linear_input:g} B per element of their inputs "
                     f"(QKV, proj, fc1, fc2, experts){' [' + cite(src) + ']' if src else ''}")
    if ks.attn_out_kept:
        src = ks.source_of("attn_out_kept")
        parts.append(f"the attention output kept once at {ks.attn_out_kept:g} B per element for "
                     "the attention backward and proj (frameworks.toml fp8_attn_out_saved)"
                     + (f" [{cite(src)}]" if src else ""))
    if ks.moe_act_input and m.is_moe:
        src = ks.source_of("moe_act_input")
        parts.append(f"routed experts keep the SwiGLU input at {ks.moe_act_input:g} B per "
                     "element and recompute its output (frameworks.toml fp8_moe_act_input_saved)"
                     + (f" [{cite(src)}]" if src else ""))
    return f"{ks.kernels} kernels, {ks.attention} attention: " + "; ".join(parts)


def _module_steps(d: Derivation, c: ActCoeffs, tag: str, mods: tuple[str, ...]
                  ) -> list[str]:
    """One symbol per selective module that drops bytes on this layer (bytes per micro-batch)."""
    out = []
    for name in mods:
        r, x, k = c.mods[RECOMPUTE_MODULES.index(name)]
        if r or x or k:
            d.calc(f"{tag} layer: bytes the {name} recompute stops keeping", f"D_{name}_{tag}",
                   f"({r:g} / sp_div + {x:g} / t + {k:g} / kv_div) * s * b", "B",
                   note="Megatron-Core recompute_modules (transformer_layer.py, core_v0.16): "
                        "the module's saved tensors")
            out.append(f"D_{name}_{tag}")
    return out


def _layer_steps(d: Derivation, m: ModelSpec, c: ActCoeffs, tag: str, rc: str,
                 ks: KernelSaves, lay: TrainLayout | None = None) -> tuple[str, str | None]:
    """One layer's stored activations per micro-batch (its symbol) and, under recompute, the
    working set of the layer being recomputed (its symbol)."""
    sym, ws = f"A_{tag}", f"W_{tag}"

    def src(name: str) -> str:
        return cite(ks.source_of(name))

    d.given(f"{tag} layer: TP-replicated bytes per token", f"r_{tag}", c.rep, "B",
            src("norm_upcast" if ks.norm_upcast else "norm_input"),
            note="norms, attention and MLP inputs 2h + 2h"
                 + (", dropout masks 2h x 1 B" if m.dropout else "")
                 + (", fp32 router probabilities" if tag == "moe" else "")
                 + f" (Korthikanti 2022, eq. 1-2); {_kernel_note(m, ks)}")
    d.given(f"{tag} layer: TP-split bytes per token", f"x_{tag}", c.split, "B",
            src("swiglu") if m.gated_mlp else "",
            note="Q and attention output, MLP internals "
                 + (f"({ks.swiglu:g}f gated)" if m.gated_mlp else "(4f)"))
    d.given(f"{tag} layer: K and V bytes per token", f"k_{tag}", c.kv, "B", src("kv_repeat"))
    none_f = f"(r_{tag} / sp_div + x_{tag} / t + k_{tag} / kv_div) * s * b"
    sel_f = none_f
    if c.scores:
        d.given("score bytes per (head x token^2)", f"q_{tag}", c.scores, "B", src("softmax"),
                note=f"softmax output {ks.softmax:g}"
                     + (" + dropout mask 1 + dropout output 2" if m.dropout else
                        " + its 16-bit cast 2" if ks.softmax != 2 else "") + " (unfused attention)")
        none_f += f" + q_{tag} * a * s * s * b / t"
    if c.lse:
        d.given(f"{ks.attention} attention: fp32 log-sum-exp bytes per token (all heads)",
                f"l_{tag}", c.lse, "B", src("lse"),
                note="the a s^2 scores are recomputed inside the kernel, never stored")
        none_f += f" + l_{tag} * s * b / t"
    if rc == "full" and lay is not None and lay.recompute_layers:
        d.calc(f"{tag} layer: stored activations of a layer not recomputed", f"A0_{tag}",
               none_f, "B")
    if rc == "full":
        d.calc(f"{tag} layer: stored input only (full recompute)", sym,
               f"{c.full:g} * s * b / sp_div", "B",
               note="2 s b h: each layer's input is kept; everything else is recomputed")
        d.calc(f"{tag} layer: working set of the layer being recomputed", ws,
               f"{none_f} - {c.overlap:g} * s * b / sp_div", "B",
               note="its forward re-run keeps the no-recompute set for its backward (less the "
                    "stored input, which the re-run keeps again)")
        return sym, ws
    if rc == "op":
        d.calc(f"{tag} layer: input + kept matmul and attention outputs (op-level policy)",
               sym, f"{c.full:g} * s * b / sp_div + {c.op:g} * s * b / t", "B",
               note="torchtitan's op policy: every other matmul output and the attention "
               "output are kept")
        d.calc(f"{tag} layer: working set of the layer being recomputed", ws,
               f"max({none_f} - {sym}, 0)", "B", note="the dropped matmul outputs, re-made")
        return sym, ws
    mods = lay.recompute_modules if lay is not None else ()
    core = rc == "selective" and (not mods or "core_attn" in mods)
    drops = _module_steps(d, c, tag, mods) if rc == "selective" else []
    base = sel_f if core else none_f
    d.calc(f"{tag} layer: stored activations per micro-batch", sym,
           base + "".join(f" - {x}" for x in drops) if rc == "selective" else none_f, "B")
    if rc == "selective":
        parts = ([f"({none_f} - {sel_f})"] if core else []) + drops
        f = parts[0] if len(parts) == 1 else f"max({', '.join(parts)})" if parts else "0"
        d.calc(f"{tag} layer: working set of the layer being recomputed", ws, f, "B",
               note="the largest recomputed module's re-run, held for its backward")
        return sym, ws
    return sym, None


def _activation_steps(
    d: Derivation, m: ModelSpec, sm: StaticModel, lay: TrainLayout, sp: bool, stage: str,
    check: float, n_stage: int | None = None, mid_index: int = 1,
    seq_len: int = 4096, microbatches: int | None = None, framework: str | None = None,
    n_chunks: float = 1.0, acc_share: float = 0.0, extra_warmup: tuple[float, str] = (0.0, ""),
    edge: bool = False,
) -> float:
    src = m.source
    ks = sm.saves or kernel_saves("fused", "unfused")
    d.given("sequence length", "S", seq_len, "token")
    d.given("micro-batch", "b", lay.micro_batch, "seq")
    d.calc("tokens per sequence on this rank (S / c)", "s", "S / c", "token")
    d.given("hidden size", "h", m.hidden, "1", src)
    d.given("attention heads", "a", m.n_heads, "1", src)
    d.env["sp_div"] = lay.tp if sp else 1
    d.env["kv_div"] = lay.tp if sm.mla else min(lay.tp, m.n_kv_heads)
    rc = lay.recompute
    if m.attention != "mla" and lay.tp > 1:
        d.note(f"Sequence parallelism {'on' if sp else 'off'}: replicated terms are "
               f"{'split by t' if sp else 'kept whole'} on each TP rank.")
    dense_sym, ws = _layer_steps(d, m, sm.dense, "dense", rc, ks, lay)
    L = m.n_layers
    n_l = "ceil(L / p)"
    if n_stage is not None:
        d.given(f"layers on the {stage} stage (uneven split)", "n_s", n_stage, "1",
                note=f"stages hold {list(lay.stages or ())} layers")
        n_l = "n_s"
    if sm.moe is not None:
        moe_sym, ws_moe = _layer_steps(d, m, sm.moe, "moe", rc, ks, lay)
        if ws is not None:
            ws = f"max({ws}, {ws_moe})"
        d.given("MoE layers", "L_moe", sm.n_moe_layers, "1", src)
        d.given("layers", "L", L, "1", src)
        if lay.pp == 1:
            stage_f = f"(L - L_moe) * {dense_sym} + L_moe * {moe_sym}"
        else:
            stage_f = f"{n_l} * max({dense_sym}, {moe_sym})"
    else:
        d.given("layers", "L", L, "1", src)
        stage_f = f"{n_l} * {dense_sym}"
    if rc == "full" and lay.recompute_layers:
        n_st = L if lay.pp == 1 else (n_stage or -(-L // lay.pp))
        d.given("layers of this stage fully recomputed (N per chunk x v chunks, at most the "
                "stage's)", "n_rc", min(lay.recompute_layers * lay.vpp, n_st), "1",
                note="Megatron-Core --recompute-method block --recompute-num-layers N: the "
                     "first N layers of each model chunk; the others keep everything")
        d.given("layers of this stage", "n_st", n_st, "1")
        stage0 = stage_f.replace(dense_sym, f"A0_{'dense'}")
        if sm.moe is not None:
            stage0 = stage0.replace("A_moe", "A0_moe")
        stage_f = f"n_rc / n_st * ({stage_f}) + (1 - n_rc / n_st) * ({stage0})"
    d.calc("one micro-batch through this stage's layers", "A_stage", stage_f, "B")
    d.given("vocabulary", "V", m.vocab, "1", src)
    lb, lb_src, lb_note = loss_logit_bytes(framework, lay.tp)
    d.given("loss: bytes held per logit element at its peak", "e_loss", lb, "B", cite(lb_src),
            note=lb_note or "one fp32 copy of the logits")
    d.calc("output layer: norm and head inputs + the loss's logit buffers", "A_out",
           "4 * s * b * h / sp_div + e_loss * s * b * V / t", "B")
    rc_f = f" + {ws}" if ws is not None else ""
    rank = {"first": 0, "only": 0, "middle": mid_index, "last": lay.pp - 1}[stage]
    v = lay.vpp
    d.given("interleaved chunks per stage", "v", v, "1")
    n_x, x_src = extra_warmup
    if v > 1:
        plus = f" + {n_x:g} (EP all-to-all overlap; {cite(x_src)})" if n_x else ""
        how = (f"interleaved: min(2 (p - 1 - i) + (v - 1) p{plus}, m v) warmup chunk forwards, "
               f"then forward-backward pairs (i = {rank}; Megatron-Core schedules.py "
               "get_pp_rank_microbatches, torch ScheduleInterleaved1F1B)")
    else:
        how = (f"1F1B: min(m, p - i) forwards before the first backward (i = {rank}; "
               "Megatron-Core and torch Schedule1F1B; Korthikanti et al. 2022 Sec. 4.2.3: p on "
               "the first stage)")
    if edge and v > 1 and lay.pp > 1:
        how += ("; edge-chunk split (the first chunk the embedding only, the last the output "
                "layer and loss only; Dubey et al. 2024 Sec. 3.3.2): the decoder layers the "
                "schedule holds, replayed over this rank's own chunk sizes, in chunks of the "
                "stage's mean size n_s / v")
    if acc_share:
        how += ("; counted after the first backward of the chunks whose gradient accumulators "
                "are held, where accumulators and activations peak together")
    d.given(f"model-chunk micro-batches in flight on the {stage} stage at its peak", "n_ch",
            n_chunks, "1", note=how + ("" if microbatches is None else f"; m = {microbatches}"))
    out = "" if stage in ("first", "middle") else " + A_out"
    return d.calc("activations per GPU", "M_a", f"A_stage * n_ch / v{out}{rc_f}", "B",
                  check=check, rel_tol=1e-6)


def korthikanti_per_layer(s: float, b: float, h: float, a: float, t: float = 1,
                          sp: bool = False, recompute: str = "none") -> float:
    """The paper's closed forms (GPT layer), for reference and tests: bytes per layer.

    none: s b h (34 + 5 a s / h) without TP; s b h (10 + 24/t + 5 a s/(h t)) with TP;
    s b h / t (34 + 5 a s / h) with TP and SP; selective drops the a s / h term; full keeps 2 s b h.
    """
    if recompute == "full":
        return 2 * s * b * h / (t if sp else 1)
    scores = 5 * a * s / h if recompute == "none" else 0.0
    if sp:
        return s * b * h / t * (34 + scores)
    return s * b * h * (10 + 24 / t + scores / t)


# --- the smallest layout that fits ------------------------------------------------------------------


@dataclass(frozen=True)
class FitResult:
    min_gpus: int | None
    layout: TrainLayout | None
    per_gpu_bytes: float | None
    rows_evaluated: int
    candidates: Table  # the best layout at each GPU count tried, for the answer


def _divisors(n: int, limit: int) -> list[int]:
    return [k for k in range(1, min(n, limit) + 1) if n % k == 0]


def tp_options(m: ModelSpec, limit: int) -> list[int]:
    """TP degrees up to ``limit`` that split heads evenly and K/V heads evenly or by replication."""
    out = []
    for t in _divisors(m.n_heads, limit):
        if m.attention == "mla" or m.n_kv_heads % t == 0 or t % m.n_kv_heads == 0:
            out.append(t)
    return out


def find_min_gpus(
    m: ModelSpec,
    gpu: GPUSpec,
    *,
    seq_len: int = 4096,
    micro_batch: int = 1,
    optimizer_id: str | None = None,
    weight_dtype: str = "bf16",
    grad_dtype: str | None = None,
    fixed: dict[str, Any] | None = None,
    max_gpus: int = 65536,
    memory_fraction: float | None = None,
    whole_nodes: bool = True,
    exact: bool = False,
    framework: str | None = None,
    attention: str = "unfused",
    kernels: str = "fused",
    precision: str = "bf16",
    global_batch: int | None = None,
) -> FitResult:
    """Smallest GPU count whose best layout fits, searching TP (within a node), PP, DP, ZeRO
    stage and recompute mode; with ``exact`` only layouts of exactly ``max_gpus`` GPUs; with
    ``global_batch`` (sequences) only layouts whose dp x micro-batch divides it. Entries of ``fixed`` (tp, pp, dp, cp, zero, recompute, ep) pin
    that dimension. Among layouts of equal size the cheapest to run wins: less recompute, then a
    lower ZeRO stage, then fewer pipeline stages, then less TP. With ``whole_nodes`` the GPU
    counts tried are powers of two up to one node and whole nodes beyond it.
    """
    fixed = dict(fixed or {})
    opt = optimizer(framework_optimizer(framework, optimizer_id))
    ew = dtype(weight_dtype, "--dtype")
    eg = dtype(grad_dtype or weight_dtype, "--grad-dtype")
    fw_g = grad_buffer_bytes(framework)[0]
    e_g = fw_g if (grad_dtype is None and fw_g is not None) else float(eg.bytes)
    node = int(assumption("gpus_per_node").value)
    sm = static_model(m, kernel_saves(kernels, attention,
                                      *linear_input_bytes(framework, _fp8(precision)),
                                      **moe_saves(framework, _fp8(precision))))
    tps = [fixed["tp"]] if "tp" in fixed else tp_options(m, node)
    pps = [fixed["pp"]] if "pp" in fixed else _divisors(m.n_layers, m.n_layers)
    cps = [fixed.get("cp", 1)]
    zeros = [fixed["zero"]] if "zero" in fixed else [0, 1, 2, 3]
    rcs = [RECOMPUTE.index(fixed["recompute"])] if "recompute" in fixed else [0, 1, 2]
    # only what the framework profile offers (frameworks.toml parallelisms, recompute_options),
    # as the planner's layout grid keeps to it
    from ..specs.frameworks import (
        get_framework,
        offered_values,
        pipeline_zero_max,
        recompute_modes,
        replicate_1d_only,
    )

    offered = {"tp": offered_values(framework, "tp", tps),
               "pp": offered_values(framework, "pp", pps),
               "zero": offered_values(framework, "zero", zeros)}
    modes = recompute_modes(framework)
    offered["recompute"] = [r for r in rcs if not modes or RECOMPUTE[r] in modes]
    for k, kept in offered.items():
        if k in fixed and not kept:
            fw = get_framework(framework)
            raise BadInput(f"--{k} {fixed[k]}: {fw.id} ({fw.version}) does not offer it")
    tps, pps, zeros, rcs = offered["tp"], offered["pp"], offered["zero"], offered["recompute"]
    ep = fixed.get("ep", 1)
    if "dp" in fixed:
        dps = [fixed["dp"]]
    else:
        dps = sorted(set(range(1, 257)) | {2**k for k in range(8, 17)})
    T, P, D, C, Z, R = np.meshgrid(tps, pps, dps, cps, zeros, rcs, indexing="ij")
    T, P, D, C, Z, R = (a.ravel() for a in (T, P, D, C, Z, R))
    n = T * P * D * C
    # the layout rule "divisibility": ep divides dp x cp, or dp alone under the core_r0.8.0
    # rank grid (layout.ep_from_dp_only)
    pool = D if ep_from_dp_only(framework) else D * C
    ok = ((n == max_gpus) if exact else (n <= max_gpus)) & (pool % ep == 0)
    if global_batch is not None:  # the layout rule "batch": dp x micro-batch divides the batch
        ok &= global_batch % (D * micro_batch) == 0
    zmax = pipeline_zero_max(framework)
    if zmax is not None:  # pipeline stages only beside the ZeRO stages the framework pairs them with
        ok &= ~((P > 1) & np.greater(Z, zmax))
    if replicate_1d_only(framework):  # replication on a 1-D mesh only; CP always under FSDP
        ok &= ~((Z == 0) & (D * C > 1) & ((T > 1) | (P > 1) | (C > 1)))
    if whole_nodes:  # 1, 2, 4, ... up to a node, then whole nodes
        ok &= np.where(n < node, (n & (n - 1)) == 0, n % node == 0)
    T, P, D, C, Z, R, n = (a[ok] for a in (T, P, D, C, Z, R, n))
    sp = bool(get_framework(framework).values.get("sequence_parallel", True))
    gathered, accum, _, _ = pp_fsdp_terms(framework)
    # fp8 primary weights where the recipe keeps them, at ZeRO 0 / 1 (_fp8_primary_weights)
    f8w = _fp8_primary_weights(framework, m.id, gpu, precision, 0, ew.bytes)
    e_lin = None if f8w is None else np.where(Z >= 2, ew.bytes, f8w[0])
    res = training_bytes(sm, tp=T, pp=P, dp=D, cp=C, ep=ep, zero=state_zero(framework, Z),
                         rc=R, sp=sp,
                         micro_batch=micro_batch, seq_len=seq_len, e_w=ew.bytes, e_g=e_g,
                         k_opt=opt.bytes_per_param, e_w_linear=e_lin, pp_gathered=gathered,
                         pp_grad_accum_bytes=accum,
                         ddp_bucket=ddp_bucket_bytes(framework)[0])
    cap = usable_memory(gpu.hbm_bytes, communicators(T, P, D, C, ep), framework, memory_fraction,
                        model_id=m.id, gpu_id=gpu.id,
                        precision=recipe_precision(framework, m.id, gpu.id, precision))
    fits = res["total"] <= cap
    rows_evaluated = int(T.size)
    if not fits.any():
        empty = Table("", ("GPUs", "layout", "bytes per GPU"), ())
        return FitResult(None, None, None, rows_evaluated, empty)
    # rank: GPUs, recompute, zero, pp, tp
    key = np.lexsort((T, P, Z, R, n))
    key = key[fits[key]]
    best = key[0]
    lay = TrainLayout(tp=int(T[best]), pp=int(P[best]), dp=int(D[best]), cp=int(C[best]), ep=ep,
                      zero=int(Z[best]), recompute=RECOMPUTE[int(R[best])],
                      micro_batch=micro_batch, sp=sp)
    # the best layout at the first few GPU counts that fit, for context
    seen: dict[int, int] = {}
    for i in key:
        seen.setdefault(int(n[i]), int(i))
        if len(seen) >= 6:
            break
    rows = tuple(
        (g, TrainLayout(tp=int(T[i]), pp=int(P[i]), dp=int(D[i]), cp=int(C[i]), ep=ep,
                        zero=int(Z[i]), recompute=RECOMPUTE[int(R[i])],
                        micro_batch=micro_batch, sp=sp).describe(), float(res["total"][i]) / 1e9)
        for g, i in sorted(seen.items())
    )
    table = Table("Smallest layouts that fit, by GPU count",
                  ("GPUs", "layout", "GB per GPU"), rows,
                  note=f"usable memory per GPU of the smallest layout {float(cap[best]) / 1e9:.1f} GB "
                       f"({gpu.id} HBM less the framework's reserve"
                       + (")" if memory_fraction is None else f", or {memory_fraction:g} x HBM)"))
    return FitResult(int(n[best]), lay, float(res["total"][best]), rows_evaluated, table)
