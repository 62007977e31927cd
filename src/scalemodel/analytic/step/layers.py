"""A dense and an MoE transformer layer's compute per micro-batch on one rank: GEMMs, attention,
memory-bound kernels, and what each recompute policy repeats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import AttentionTerms
from .candidates import Candidates
from .config import ep_dispatch, moe_dispatcher, profile_value
from .elementwise import fused_grouped_mlp_saving, nongemm_time
from .gemm import expert_mlp, gemm3, gemm3_of, mlp
from .imbalance import ep_straggler


@dataclass(frozen=True)
class LayerCompute:
    """Seconds of one layer's compute per micro-batch on one rank."""

    fwd: Any  # forward: GEMMs, attention core, memory-bound kernels
    bwd: Any  # backward (dgrad + wgrad, the attention backward, memory-bound kernels)
    recompute: Any  # what the layout's recompute policy repeats in the backward
    wgrad: Any  # the weight-gradient GEMMs (the forward GEMMs' FLOPs; DualPipe's W)
    attention: Any  # attention kernels, forward + backward + recompute
    nongemm: Any  # memory-bound kernels, forward + backward + recompute
    # the GEMMs the four forward TP collectives sit beside (QKV, output projection, MLP in,
    # MLP out) and the same GEMMs' backward (dgrad + wgrad): what TP overlap hides them behind
    tp_gemm_f: tuple[Any, Any, Any, Any] = (0.0, 0.0, 0.0, 0.0)
    tp_gemm_b: tuple[Any, Any, Any, Any] = (0.0, 0.0, 0.0, 0.0)
    attn_f: Any = 0.0  # the attention block (projections and core), forward; the rest is the MLP
    attn_b: Any = 0.0
    experts_f: Any = 0.0  # an MoE layer's experts and token permutation, forward


def mla_up_share(c: Candidates) -> float:
    """Share of the MLA input projections' FLOPs that the "mla_up_proj" module re-runs: the
    function Megatron-Core checkpoints (MLASelfAttention ``qkv_up_proj_and_rope_apply``) holds
    the query's up-projection from its latent (``linear_q_up_proj``) or, for a model without a
    q latent (q_lora_rank None: Moonlight, DeepSeek-V2-Lite), the whole query projection from
    the hidden state (``linear_q_proj``), and the kv up-projection from the kv latent
    (source ``megatron-core-mla-up-proj-recompute``)."""
    m, ms = c.m, c.ms
    if not m.kv_lora_rank or not ms.attn_in_n:
        return 0.0
    q_in = m.q_lora_rank or c.h  # no q latent: the query is projected from the hidden state
    q_up = q_in * m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
    kv_up = m.kv_lora_rank * m.n_heads * (m.qk_nope_head_dim + m.v_head_dim)
    return (q_up + kv_up) / (ms.attn_in_n * c.h)


def _rc_modules(c: Candidates, a: AttentionTerms, mlp_f: Any, moe_f: Any = 0.0,
                shared_f: Any = 0.0, moe: bool = False) -> tuple[Any, Any]:
    """(seconds, of them memory-bound) the selective modules re-run in a layer's backward
    (Megatron-Core recompute_modules): core_attn the attention kernel, mla_up_proj the MLA
    up-projections, mlp the dense MLP (``mlp_f``), moe the MoE block (``moe_f``: experts,
    shared experts, router, permutes), shared_experts ``shared_f``, moe_act the experts'
    activation (read its 16-bit (up_k) input and write its output per element of the routed
    copies' width), layernorm the norms that are modules of their own (read and write 16-bit h
    per token; memory.py _module_drops)."""
    ms = c.ms
    act = (c.e_a * (ms.up_k + 1) * c.T * c.m.top_k * ms.moe_ffn / c.tp / c.hbm
           if c.m.is_moe else 0.0)
    # the norms that are modules of their own: MLA's input norm, an MoE layer's pre-MLP norm
    n_sep = int(bool(c.m.kv_lora_rank)) + int(moe)
    norm = c.e_a * 2 * n_sep * c.h * c.T / c.sp_div / c.hbm
    ng = c.recomputes("moe_act") * act + c.recomputes("layernorm") * norm
    t = (c.recomputes("core_attn") * a.core_f
         + c.recomputes("mla_up_proj") * mla_up_share(c) * a.in_proj_f
         + c.recomputes("mlp") * mlp_f + c.recomputes("moe") * moe_f
         + c.recomputes("shared_experts") * shared_f + ng)
    return t, ng


def _rc_dense(c: Candidates, a: AttentionTerms, fwd: Any, ng_f: Any) -> tuple[Any, Any]:
    """(seconds re-run, of them memory-bound): full recompute repeats the forward (of the share
    of the layers it covers), selective its modules, the op-level policy every second matmul of
    the block (k, o, and up or down) and every elementwise kernel, not the attention kernel
    (its output is kept)."""
    ms = c.ms
    up_f, _ = gemm3(c, c.T, ms.up_k * ms.ffn / c.tp, c.h)
    down_f, _ = gemm3(c, c.T, c.h, ms.ffn / c.tp)
    k_share = (c.m.kv_dim / ms.attn_in_n) if ms.attn_in_n else 0.0
    op_mm = a.in_proj_f * k_share + a.out_proj_f + (0.5 * up_f if ms.up_k == 2 else down_f)
    op_f = op_mm + ng_f
    rc = c.rc
    sel, sel_ng = _rc_modules(c, a, up_f + down_f)
    t = c.full_share * fwd + np.where(rc == 1, sel, np.where(rc == 3, op_f, 0.0))
    ng = c.full_share * ng_f + np.where(rc == 1, sel_ng, np.where(rc == 3, ng_f, 0.0))
    return t, ng


def _attention_share(c: Candidates, a: AttentionTerms) -> Any:
    return a.core_f + a.core_b + (c.recomputes("core_attn") + c.full_share) * a.core_f


def dense_layer(c: Candidates, a: AttentionTerms) -> LayerCompute:
    """A dense layer: attention block and the MLP split over the TP ranks."""
    ms = c.ms
    up_f, up_b = gemm3(c, c.T, ms.up_k * ms.ffn / c.tp, c.h)
    dn_f, dn_b = gemm3(c, c.T, c.h, ms.ffn / c.tp)
    df_, db_ = up_f + dn_f, up_b + dn_b
    ng_f, ng_b = nongemm_time(c, c.ms.ffn)
    fwd = a.proj_f + a.core_f + df_ + ng_f
    bwd = a.proj_b + a.core_b + db_ + ng_b
    rc, rc_ng = _rc_dense(c, a, fwd, ng_f)
    return LayerCompute(fwd=fwd, bwd=bwd, recompute=rc,
                        wgrad=a.proj_f + df_, attention=_attention_share(c, a),
                        nongemm=ng_f + ng_b + rc_ng,
                        tp_gemm_f=(a.in_proj_f, a.out_proj_f, up_f, dn_f),
                        tp_gemm_b=(a.in_proj_b, a.out_proj_b, up_b, dn_b))


def fp8_padding_bytes(c: Candidates) -> tuple[Any, Any]:
    """(forward, backward) HBM bytes of the fp8 quantisation padding around the grouped expert
    GEMMs, per MoE layer and micro-batch on one rank (frameworks.toml ``moe_fp8_padding``).

    Megatron-Core's TEGroupedMLP.forward (Megatron-Core at the commits Megatron-Bridge v0.2.1 to
    v0.5.0 pin, source ``megatron-core-tegroupedmlp-fp8-padding``), when fp8 is on, pads each
    local expert's rows to the quantisation alignment before fc1 (TE ``Fp8Padding``: 16 rows,
    32 for MXFP8) and strips the padding from fc2's output (``Fp8Unpadding``). Each is one
    ``fused_multi_row_padding`` / ``unpadding`` copy of the whole 16-bit activation, R rows h
    wide, unless every expert's count is already aligned (TE returns the input unchanged).
    Dropless force-balanced routing gives counts that are aligned only by chance, so the copies
    run, unless the dispatcher pads itself: Hybrid-EP's dispatch takes ``pad_multiple`` under
    fp8 and writes the padded layout (then both calls are no-ops), the all-to-all and DeepEP
    dispatchers pad only under ``moe_router_padding_for_fp8``, which no recipe here sets.

    * forward: pad (read R h, write R h) and unpad (read R h, write R h): 4 e h R;
    * backward: each copy's mirror (the unpad's backward pads the output gradient, the pad's
      backward unpads the input gradient): 4 e h R;

    with R = C etp the rows a rank's experts receive (C = t top_k, t = T / sp_div tokens it
    dispatches; balanced routing), e = 2 bytes. The padding rows themselves (under align rows
    per expert) and the probabilities' fp32 column padded beside them are not counted."""
    if not getattr(c, "fp8", False) or profile_value(c.job, "moe_fp8_padding",
                                                     "none") != "grouped_mlp":
        return 0.0, 0.0
    if moe_dispatcher(c.job, c.gpu.id) == "flex-hybridep":
        return 0.0, 0.0  # Hybrid-EP pads inside the dispatch; TE's calls see aligned counts
    R = c.T / c.sp_div * c.m.top_k * c.etp
    b = 4 * c.e_a * c.h * R
    return b, b


def permute_time(c: Candidates, n_local: Any) -> tuple[Any, Any]:
    """(forward, backward) seconds of the token permutation around the experts, as HBM traffic
    of 16-bit rows h wide, as the job's dispatcher runs it.

    The all-to-all dispatcher (Megatron-Core 0.16 moe_utils.permute / unpermute, fused in
    Transformer Engine, and sort_chunks_by_idxs):

    * permute: read each of the t tokens a rank dispatches, write its C = t top_k copies:
      2h (t + C) bytes; unpermute: read the C expert outputs, write the t merged tokens (the
      routing probabilities applied on the way): 2h (C + t);
    * with more than one local expert the R copies a rank receives (R = C etp after the
      expert-TP gather) are sorted by expert after the dispatch and back before the combine:
      read and write 2h each, twice, 4h R.

    A per-destination dispatcher (frameworks.toml ep_dispatch per_destination: DeepEP,
    Hybrid-EP) sends the t tokens themselves, one row per destination GPU, so nothing is
    permuted before the send. The rank receives u = t g etp rows (g the GPUs a token reaches,
    comm.reached; by symmetry what a rank sends over NVLink is what it receives; etp after the
    expert-TP gather) and expands them into its R expert-ordered copies: Hybrid-EP's
    dispatch_with_permute runs the dispatch kernel, then a permute kernel that reads the
    received chunks and writes the permuted tokens (DeepEP hybrid-ep
    csrc/hybrid_ep/extension/permute.cuh, tests/test_hybrid_ep.py); Megatron-Core's DeepEP
    manager permutes the received tokens by local expert with the fused permute. So
    2h (u + R), and back before the combine (unpermute, R rows merged to u) 2h (R + u); no
    source-side permute and no separate sort.

    Either way the backward is each pass's mirror (the same bytes), and the probabilities'
    gradient reads the C permuted copies once more: 2h C; under fp8, the quantisation padding
    around the grouped GEMMs (:func:`fp8_padding_bytes`). t = T / sp_div tokens (sequence
    parallel)."""
    t = c.T / c.sp_div
    C = t * c.m.top_k
    h, e = c.h, c.e_a
    pad_f, pad_b = fp8_padding_bytes(c)
    job = getattr(c, "job", None)  # a bare namespace (unit tests) is the all-to-all dispatcher
    if job is not None and ep_dispatch(job, c.gpu.id) == "per_destination":
        from .comm import reached

        R = C * c.etp
        u = t * reached(float(c.m.n_experts), float(c.m.top_k), c.ep) * c.etp
        fwd = 2 * e * h * (u + R)
    else:
        sort = np.where(np.asarray(n_local) > 1, 2 * 2 * e * h * C * c.etp, 0.0)
        fwd = 2 * e * h * (t + C) + sort
    return (fwd + pad_f) / c.hbm, (fwd + e * h * C + pad_b) / c.hbm


def moe_layer(c: Candidates, a: AttentionTerms) -> LayerCompute:
    """An MoE layer: attention block, the local experts, shared experts and the router.

    Tokens per local expert (balanced routing): the EP group's ranks each route their T / tp
    sequence-parallel tokens (T after the expert-TP gather when etp = tp), so an expert sees
    T top_k etp / (tp n_local) tokens and holds moe_ffn / etp of its width. Each layer waits for
    the EP rank that received the most copies: its expert GEMMs take (1 + v) times the mean's
    time (imbalance.ep_straggler; v = 0 where the routing's spread is not known)."""
    m, ms, tp, etp = c.m, c.ms, c.tp, c.etp
    n_local = m.n_experts / c.ep
    Me = c.T * m.top_k * etp / (tp * n_local)
    ef, eb = expert_mlp(c, Me, ms.moe_ffn, n_local, etp, 1.0 + ep_straggler(c))
    sf, sb = mlp(c, c.T, ms.shared_ffn) if ms.shared_ffn else (0.0, 0.0)
    rf, rb = gemm3_of(c, "router", c.T, float(m.n_experts), c.h)
    width = m.top_k * ms.moe_ffn + ms.shared_ffn
    # the routed copies a rank casts: T top_k etp / tp tokens enter its experts
    ng_f, ng_b = nongemm_time(c, width, m.top_k * etp / tp + (1 if ms.shared_ffn else 0))
    xf, xb = fused_grouped_mlp_saving(c, m.top_k * ms.moe_ffn)  # TE's fused MXFP8 grouped MLP
    ng_f, ng_b = ng_f - xf / c.hbm, ng_b - xb / c.hbm
    pf, pb = permute_time(c, n_local)
    ng_f, ng_b = ng_f + pf, ng_b + pb
    fwd = a.proj_f + a.core_f + ef + sf + rf + ng_f
    bwd = a.proj_b + a.core_b + eb + sb + rb + ng_b
    sel, sel_ng = _rc_modules(c, a, 0.0, ef + sf + rf + pf, sf, moe=True)
    rc = c.full_share * fwd + np.where(c.rc == 1, sel, 0.0)
    # without EP the MLP's TP collectives sit beside the experts (half each way)
    mf, mb_ = 0.5 * (ef + sf), 0.5 * (eb + sb)
    return LayerCompute(fwd=fwd, bwd=bwd, recompute=rc, wgrad=a.proj_f + ef + sf + rf,
                        attention=_attention_share(c, a),
                        nongemm=ng_f + ng_b + c.full_share * ng_f
                        + np.where(c.rc == 1, sel_ng, 0.0),
                        tp_gemm_f=(a.in_proj_f, a.out_proj_f, mf, mf),
                        tp_gemm_b=(a.in_proj_b, a.out_proj_b, mb_, mb_),
                        attn_f=a.proj_f + a.core_f, attn_b=a.proj_b + a.core_b,
                        experts_f=ef + pf)
