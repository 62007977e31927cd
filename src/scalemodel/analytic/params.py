"""Parameter counts from the architecture, exact for the supported families.

Counts are split the way tensor parallelism splits them: ``sharded`` tensors are divided by TP
(projections, MLPs, vocab-parallel embeddings), ``replicated`` ones are copied on every TP rank
(norm weights, routers). Expert weights are kept apart because expert parallelism divides them.
Notation follows docs/notation.md: h hidden, f MLP width, V vocabulary, L layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..specs.model import ModelSpec


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one decoder layer, by how parallelism divides them."""

    attention: int  # TP-sharded attention projections (+ their biases)
    dense_mlp: int  # TP-sharded dense MLP (0 on MoE layers)
    experts: int  # routed experts, all of them (EP- and TP-sharded)
    expert_one: int  # one routed expert
    shared: int  # shared experts (TP-sharded, not EP)
    replicated: int  # norms, routers, the shared-expert gate

    @property
    def total(self) -> int:
        return self.attention + self.dense_mlp + self.experts + self.shared + self.replicated

    @property
    def active(self) -> int:
        """Parameters that one token touches (top-k experts instead of all)."""
        return self.total - self.experts


def _norm(m: ModelSpec, width: int) -> int:
    return width * (2 if m.norm == "layer" else 1)


def attention_params(m: ModelSpec) -> tuple[int, int]:
    """(TP-sharded, replicated) attention parameters of one layer."""
    h = m.hidden
    if m.kv_lora_rank:  # MLA: low-rank Q and compressed KV with a decoupled RoPE key
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank * m.n_heads * qk
            rep = m.q_lora_rank  # q_a_layernorm
        else:
            q, rep = h * m.n_heads * qk, 0
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv_b = m.kv_lora_rank * m.n_heads * (m.qk_nope_head_dim + m.v_head_dim)
        o = m.n_heads * m.v_head_dim * h
        return q + kv_a + kv_b + o, rep + m.kv_lora_rank  # kv_a_layernorm
    q, kv = m.q_dim, m.kv_dim
    w = h * q + 2 * h * kv + q * h
    if m.qkv_bias:
        w += q + 2 * kv
    if m.linear_bias:
        w += h  # output projection bias
    # QK-norm: one RMSNorm weight of head_dim for the query heads and one for the key heads,
    # replicated across TP like the other norms; OLMo 2 normalises the whole q and k projections
    if m.qk_norm_full:
        return w, q + kv
    return w, (2 * m.head_dim if m.qk_norm else 0)


def mlp_params(m: ModelSpec, width: int) -> int:
    """One (dense or expert) MLP of inner width ``width``."""
    h = m.hidden
    if m.gated_mlp:
        return 3 * h * width + (2 * width + h if m.linear_bias else 0)
    return 2 * h * width + (width + h if m.linear_bias else 0)


def layer_params(m: ModelSpec, i: int) -> LayerParams:
    attn, attn_rep = attention_params(m)
    rep = attn_rep + m.norms_per_layer * _norm(m, m.hidden)
    if m.layer_is_moe(i):
        one = mlp_params(m, m.moe_ffn)
        shared_w = m.shared_ffn or m.n_shared_experts * m.moe_ffn
        shared = mlp_params(m, shared_w) if shared_w else 0
        rep += m.hidden * m.n_experts + (m.n_experts if m.router_bias else 0)
        rep += m.hidden if m.shared_expert_gate else 0
        return LayerParams(attn, 0, m.n_experts * one, one, shared, rep)
    return LayerParams(attn, mlp_params(m, m.ffn), 0, 0, 0, rep)


@dataclass(frozen=True)
class ParamCount:
    embedding: int  # token (+ learned position) embeddings
    lm_head: int  # 0 when tied to the embedding
    final_norm: int
    layers: tuple[LayerParams, ...]
    active_experts: int = 0  # routed-expert parameters one token uses (top-k per MoE layer)

    @property
    def layers_total(self) -> int:
        return sum(lp.total for lp in self.layers)

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.final_norm + self.layers_total

    @property
    def active(self) -> int:
        """Parameters used per token: MoE layers count top-k routed experts."""
        return self.total - sum(lp.experts for lp in self.layers) + self.active_experts

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding - self.lm_head

    @property
    def attention_total(self) -> int:
        return sum(lp.attention for lp in self.layers)

    @property
    def mlp_total(self) -> int:
        return sum(lp.dense_mlp + lp.experts + lp.shared for lp in self.layers)

    @property
    def max_layer(self) -> LayerParams:
        return max(self.layers, key=lambda lp: lp.total)


def count_params(m: ModelSpec) -> ParamCount:
    """Exact parameter count of the main model (multi-token-prediction modules excluded)."""
    emb = m.vocab * m.hidden + m.learned_positions * m.hidden
    head = 0 if m.tied_embeddings else m.vocab * m.hidden
    layers = tuple(layer_params(m, i) for i in range(m.n_layers))
    active_experts = sum(m.top_k * lp.expert_one for lp in layers)
    return ParamCount(emb, head, _norm(m, m.hidden), layers, active_experts=active_experts)


@dataclass(frozen=True)
class ShardParams:
    """Parameters held by one GPU of the heaviest pipeline stage under (tp, pp, ep)."""

    dense: float  # non-expert parameters on this GPU
    experts: float  # routed-expert parameters on this GPU
    stage: str  # which stage is the heaviest ("first", "last" or "only")

    @property
    def total(self) -> float:
        return self.dense + self.experts


def shard_params(pc: ParamCount, tp: int, pp: int, ep: int = 1) -> ShardParams:
    """Per-GPU parameters on the heaviest pipeline stage.

    Layers are dealt to stages in contiguous blocks of ceil(L/pp); the first stage also holds
    the embedding, the last the final norm and the output head (a tied head is a second copy
    there when pp > 1, as Megatron keeps it). With pp > 1 the heaviest layer is assumed on every
    slot of a stage, an upper bound for models whose layers differ (dense-then-MoE).
    """
    n = len(pc.layers)
    per_stage = math.ceil(n / pp)
    if pp == 1:
        lay = pc.layers
        sharded = sum(lp.attention + lp.dense_mlp + lp.shared for lp in lay) / tp
        repl = sum(lp.replicated for lp in lay)
        exp = sum(lp.experts for lp in lay) / (tp * ep)
        d = sharded + repl + (pc.embedding + pc.lm_head) / tp + pc.final_norm
        return ShardParams(d, exp, "only")
    big = pc.max_layer
    body = per_stage * ((big.attention + big.dense_mlp + big.shared) / tp + big.replicated)
    exp = per_stage * big.experts / (tp * ep)
    head = pc.lm_head if pc.lm_head else pc.embedding  # tied: the last stage keeps a copy
    first = body + pc.embedding / tp
    last = body + head / tp + pc.final_norm
    return ShardParams(max(first, last), exp, "first" if first >= last else "last")
