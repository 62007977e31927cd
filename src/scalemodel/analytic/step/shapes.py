"""Per-layer GEMM widths and FLOP counts of a model, computed once per model."""

from __future__ import annotations

from dataclasses import dataclass

from ...specs import ModelSpec
from ..memory import StaticModel, static_model


@dataclass(frozen=True)
class ModelShapes:
    """Per-layer GEMM widths and FLOP counts of a model, computed once."""

    sm: StaticModel
    attn_in_n: float  # output width of the input projections (q, k, v / MLA paths) on K = h
    attn_out_k: float  # width into the output projection
    qk_dim: float  # per-token width of Q (and K) over all heads
    v_dim: float  # per-token width of V over all heads
    kv_dim: float  # K and V width actually sent in ring attention (per token)
    up_k: int  # 2 for gated MLPs (gate and up), 1 otherwise
    ffn: int
    moe_ffn: int
    shared_ffn: int
    n_moe: int
    n_dense: int
    matmul_params_per_token: float  # model-FLOP parameters: active, no embedding lookup
    last_extra_layers: float  # output head + loss, in layers (for the stage split)


def model_shapes(m: ModelSpec) -> ModelShapes:
    sm = static_model(m)
    pc = sm.pc
    h = m.hidden
    big_attn = max(lp.attention for lp in pc.layers)
    if m.kv_lora_rank:
        qk = m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        v = m.n_heads * m.v_head_dim
        kv_send = m.kv_lora_rank + m.qk_rope_head_dim
    else:
        qk, v = m.q_dim, m.q_dim
        kv_send = 2 * m.kv_dim
    o_k = v
    attn_in_n = (big_attn - o_k * h) / h
    shared = m.shared_ffn or m.n_shared_experts * m.moe_ffn
    head_params = pc.lm_head or pc.embedding
    matmul = pc.active - pc.embedding - pc.lm_head + head_params
    per_layer_active = (pc.active - pc.embedding - pc.lm_head - pc.final_norm) / m.n_layers
    return ModelShapes(
        sm=sm, attn_in_n=attn_in_n, attn_out_k=o_k, qk_dim=qk, v_dim=v, kv_dim=kv_send,
        up_k=2 if m.gated_mlp else 1, ffn=m.ffn, moe_ffn=m.moe_ffn, shared_ffn=shared,
        n_moe=m.n_moe_layers, n_dense=m.n_layers - m.n_moe_layers,
        matmul_params_per_token=float(matmul),
        last_extra_layers=head_params / per_layer_active,
    )


def model_flops_per_token(m: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per token (PaLM, Appendix B): 6 N + 6 L s H (d_qk + d_v); N = matmul
    parameters a token uses (no embedding lookup), attention counted without the causal half."""
    ms = model_shapes(m)
    return 6 * ms.matmul_params_per_token + 6 * m.n_layers * seq_len * (ms.qk_dim + ms.v_dim)
