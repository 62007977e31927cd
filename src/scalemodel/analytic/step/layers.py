"""A dense and an MoE transformer layer's compute per micro-batch on one rank: GEMMs, attention,
memory-bound kernels, and what each recompute policy repeats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import AttentionTerms
from .candidates import Candidates
from .elementwise import nongemm_time
from .gemm import expert_mlp, gemm3, gemm3_of, mlp


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


def _rc_dense(c: Candidates, a: AttentionTerms, fwd: Any, ng_f: Any) -> Any:
    """Full recompute repeats the forward, selective the attention core, the op-level policy
    every second matmul of the block (k, o, and up or down) and every elementwise kernel, not
    the attention kernel (its output is kept)."""
    ms = c.ms
    up_f, _ = gemm3(c, c.T, ms.up_k * ms.ffn / c.tp, c.h)
    down_f, _ = gemm3(c, c.T, c.h, ms.ffn / c.tp)
    k_share = (c.m.kv_dim / ms.attn_in_n) if ms.attn_in_n else 0.0
    op_mm = a.in_proj_f * k_share + a.out_proj_f + (0.5 * up_f if ms.up_k == 2 else down_f)
    op_f = op_mm + ng_f
    rc = c.rc
    return np.where(rc == 2, fwd, np.where(rc == 1, a.core_f, np.where(rc == 3, op_f, 0.0)))


def _attention_share(c: Candidates, a: AttentionTerms) -> Any:
    return a.core_f + a.core_b + np.where((c.rc == 1) | (c.rc == 2), a.core_f, 0.0)


def dense_layer(c: Candidates, a: AttentionTerms) -> LayerCompute:
    """A dense layer: attention block and the MLP split over the TP ranks."""
    ms = c.ms
    up_f, up_b = gemm3(c, c.T, ms.up_k * ms.ffn / c.tp, c.h)
    dn_f, dn_b = gemm3(c, c.T, c.h, ms.ffn / c.tp)
    df_, db_ = up_f + dn_f, up_b + dn_b
    ng_f, ng_b = nongemm_time(c, c.ms.ffn)
    fwd = a.proj_f + a.core_f + df_ + ng_f
    bwd = a.proj_b + a.core_b + db_ + ng_b
    return LayerCompute(fwd=fwd, bwd=bwd, recompute=_rc_dense(c, a, fwd, ng_f),
                        wgrad=a.proj_f + df_, attention=_attention_share(c, a),
                        nongemm=ng_f + ng_b + np.where(c.rc >= 2, ng_f, 0.0),
                        tp_gemm_f=(a.in_proj_f, a.out_proj_f, up_f, dn_f),
                        tp_gemm_b=(a.in_proj_b, a.out_proj_b, up_b, dn_b))


def permute_time(c: Candidates, n_local: Any) -> tuple[Any, Any]:
    """(forward, backward) seconds of the token permutation around the experts, as HBM traffic
    of 16-bit rows h wide (Megatron-Core 0.16 moe_utils.permute / unpermute, fused in Transformer
    Engine, and the all-to-all dispatcher's sort_chunks_by_idxs):

    * permute: read each of the t tokens a rank dispatches, write its C = t top_k copies:
      2h (t + C) bytes; unpermute: read the C expert outputs, write the t merged tokens (the
      routing probabilities applied on the way): 2h (C + t);
    * with more than one local expert the R copies a rank receives (R = C etp after the
      expert-TP gather) are sorted by expert after the dispatch and back before the combine:
      read and write 2h each, twice, 4h R;
    * backward: each pass's mirror (the same bytes), and the probabilities' gradient reads the
      C permuted copies once more: 2h C.

    t = T / sp_div tokens (sequence parallel)."""
    t = c.T / c.sp_div
    C = t * c.m.top_k
    h, e = c.h, c.e_a
    sort = np.where(np.asarray(n_local) > 1, 2 * 2 * e * h * C * c.etp, 0.0)
    fwd = 2 * e * h * (t + C) + sort
    return fwd / c.hbm, (fwd + e * h * C) / c.hbm


def moe_layer(c: Candidates, a: AttentionTerms) -> LayerCompute:
    """An MoE layer: attention block, the local experts, shared experts and the router.

    Tokens per local expert (balanced routing): the EP group's ranks each route their T / tp
    sequence-parallel tokens (T after the expert-TP gather when etp = tp), so an expert sees
    T top_k etp / (tp n_local) tokens and holds moe_ffn / etp of its width."""
    m, ms, tp, etp = c.m, c.ms, c.tp, c.etp
    n_local = m.n_experts / c.ep
    Me = c.T * m.top_k * etp / (tp * n_local)
    ef, eb = expert_mlp(c, Me, ms.moe_ffn, n_local, etp)
    sf, sb = mlp(c, c.T, ms.shared_ffn) if ms.shared_ffn else (0.0, 0.0)
    rf, rb = gemm3_of(c, "router", c.T, float(m.n_experts), c.h)
    width = m.top_k * ms.moe_ffn + ms.shared_ffn
    # the routed copies a rank casts: T top_k etp / tp tokens enter its experts
    ng_f, ng_b = nongemm_time(c, width, m.top_k * etp / tp + (1 if ms.shared_ffn else 0))
    pf, pb = permute_time(c, n_local)
    ng_f, ng_b = ng_f + pf, ng_b + pb
    fwd = a.proj_f + a.core_f + ef + sf + rf + ng_f
    bwd = a.proj_b + a.core_b + eb + sb + rb + ng_b
    rc = np.where(c.rc == 2, fwd, np.where(c.rc == 1, a.core_f, 0.0))
    # without EP the MLP's TP collectives sit beside the experts (half each way)
    mf, mb_ = 0.5 * (ef + sf), 0.5 * (eb + sb)
    return LayerCompute(fwd=fwd, bwd=bwd, recompute=rc, wgrad=a.proj_f + ef + sf + rf,
                        attention=_attention_share(c, a),
                        nongemm=ng_f + ng_b + np.where(c.rc == 2, ng_f, 0.0),
                        tp_gemm_f=(a.in_proj_f, a.out_proj_f, mf, mf),
                        tp_gemm_b=(a.in_proj_b, a.out_proj_b, mb_, mb_),
                        attn_f=a.proj_f + a.core_f, attn_b=a.proj_b + a.core_b)
