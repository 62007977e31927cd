"""Per-layer GEMM widths and FLOP counts of a model, computed once per model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import BadInput
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
    n_moe: int  # MoE layers that run, the MTP modules' included
    n_dense: int  # dense layers that run, the MTP modules' included
    matmul_params_per_token: float  # model-FLOP parameters: active, no embedding lookup
    last_extra_layers: float  # output head + loss (and the MTP modules), in layers (stage split)
    # multi-token prediction (DeepSeek-V3 Sec. 2.2; HF num_nextn_predict_layers): each module is
    # one more decoder layer of the last layer's kind on the last stage, after two RMSNorms and
    # a 2h -> h projection, with its own pass through the shared output head and loss
    mtp: int = 0
    mtp_proj_params: float = 0.0  # eh_proj (2h x h) and the three norms of one module
    n_layers_run: int = 0  # decoder layers a token runs: n_layers + mtp


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
    mtp = int(m.mtp_layers or 0)
    last_moe = m.layer_is_moe(m.n_layers - 1)
    last = pc.layers[-1]
    # one MTP module's matmul parameters a token uses: the layer (its top-k experts), eh_proj
    # and the output head it passes through again (Megatron-Core MultiTokenPredictionLayer:
    # enorm, hnorm, eh_proj, the layer, final_layernorm; the embedding and head shared)
    proj = 2 * h * h + 3 * h
    layer_active = last.active + (m.top_k * last.expert_one if last_moe else 0)
    matmul += mtp * (layer_active + proj + head_params)
    return ModelShapes(
        sm=sm, attn_in_n=attn_in_n, attn_out_k=o_k, qk_dim=qk, v_dim=v, kv_dim=kv_send,
        up_k=2 if m.gated_mlp else 1, ffn=m.ffn, moe_ffn=m.moe_ffn, shared_ffn=shared,
        n_moe=m.n_moe_layers + mtp * last_moe, n_dense=m.n_layers - m.n_moe_layers
        + mtp * (not last_moe),
        matmul_params_per_token=float(matmul),
        last_extra_layers=(head_params + mtp * (head_params + proj)) / per_layer_active + mtp,
        mtp=mtp, mtp_proj_params=float(proj), n_layers_run=m.n_layers + mtp,
    )


def model_flops_per_token(m: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per token (PaLM, Appendix B): 6 N + 6 L s H (d_qk + d_v); N = matmul
    parameters a token uses (no embedding lookup), attention counted without the causal half;
    the MTP modules count as what they run (a layer, eh_proj and the output head each)."""
    ms = model_shapes(m)
    return (6 * ms.matmul_params_per_token
            + 6 * ms.n_layers_run * seq_len * (ms.qk_dim + ms.v_dim))


def split_extras(m: ModelSpec, framework_id: str | None = None) -> dict[str, float | int]:
    """Keywords of memory.stage_partition / chunk_partition for this model: the output head,
    loss and MTP modules in layers on the last stage, and whether its last chunk may hold no
    decoder layer of its own (it holds the MTP layers). A framework that splits evenly only
    (frameworks.toml ``pipeline_split = "even"``: Megatron-LM of 2021, Megatron-Core r0.8.0)
    puts L / (pp x vpp) layers in every chunk whatever the head costs: no extra is counted, so
    the balanced split of a divisible layer count is the even one."""
    from ...specs.frameworks import edge_chunk_split, even_pipeline_split

    if framework_id is not None and even_pipeline_split(framework_id, m.id):
        return {"last_extra": 0.0, "last_min": 1}
    if framework_id is not None and edge_chunk_split(framework_id, m.id):
        # the embedding and the output layer take one layer's slot each (chunk_partition
        # edge_chunks; Dubey et al. 2024 Sec. 3.3.2)
        return {"last_extra": 0.0, "last_min": 1, "edge_chunks": True}
    ms = model_shapes(m)
    return {"last_extra": ms.last_extra_layers, "last_min": 0 if ms.mtp else 1}


def largest_chunk_layers(m: ModelSpec, framework_id: str | None, pp: Any, vpp: Any,
                         stages: tuple[int, ...] | None = None) -> np.ndarray:
    """Decoder layers of the largest model chunk in the split a layout builds: the most
    ``recompute_layers`` N means (Megatron-Core's block method checkpoints each chunk's first
    N layers; more than a chunk has recomputes it whole). ``stages`` given: its largest count
    over vpp (rounded up); pp = 1: the L layers; else the planner's split (pipeline.split:
    memory.chunk_partition with the framework's split_extras), both MTP placements where the
    model has MTP modules (pipeline.slowest_stage may take either)."""
    from ..memory import chunk_partition

    pp_a = np.atleast_1d(np.asarray(pp, dtype=np.int64))
    vpp_a = np.broadcast_to(np.atleast_1d(np.asarray(vpp, dtype=np.int64)), pp_a.shape)
    if stages is not None:
        return np.ceil(max(stages) / np.maximum(vpp_a, 1) - 1e-9).astype(np.int64)
    L = m.n_layers
    extra = split_extras(m, framework_id)
    mins = {int(extra["last_min"]), 1}
    out = np.full(pp_a.shape, L, dtype=np.int64)
    code = pp_a * (int(vpp_a.max(initial=1)) + 1) + vpp_a
    _, first = np.unique(code, return_index=True)
    for p, v in ((int(pp_a[i]), int(vpp_a[i])) for i in first):
        if p <= 1 or p * v > L + 2:
            continue  # pp = 1: the whole model; too many chunks is the "layers" rule's
        try:
            top = max(max(chunk_partition(L, p, vpp=v, last_extra=float(extra["last_extra"]),
                                          last_min=lm, edge_chunks=bool(extra.get("edge_chunks"))))
                      for lm in mins)
        except BadInput:
            continue
        out[(pp_a == p) & (vpp_a == v)] = top
    return out
