"""Weight bytes of a model as stored: the one place serving paths turn parameters into bytes.

Without a ``quantization_config`` every parameter costs ``e_w`` bytes. With one, each linear
module is priced by :meth:`~scalemodel.specs.quant.WeightQuant.linear_bytes` (its quantized
weight plus scales, zero points and group indices), modules the config leaves unquantized and
everything that is not a linear weight (embeddings, norms, biases, routers) cost ``e_w``.
The result is a :class:`~scalemodel.analytic.params.ParamCount` whose numbers are bytes, so
the same sharding rules (``shard_params``) give the bytes on one GPU.

Module names follow the Llama layout (``model.layers.{i}.self_attn.q_proj``,
``model.layers.{i}.mlp.gate_proj``, ``...mlp.experts.{j}.down_proj``, ``lm_head``), the names
ignore lists are written against; fused families (Phi-3's qkv_proj, Falcon's query_key_value)
are priced as the separate projections they hold.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ..specs.model import ModelSpec
from .params import LayerParams, ParamCount, attention_params, count_params, mlp_params


def _attention_linears(m: ModelSpec) -> list[tuple[str, int, int]]:
    """(name, n_in, n_out) of one layer's attention projections."""
    h = m.hidden
    if m.kv_lora_rank:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = ([("q_a_proj", h, m.q_lora_rank), ("q_b_proj", m.q_lora_rank, m.n_heads * qk)]
             if m.q_lora_rank else [("q_proj", h, m.n_heads * qk)])
        return q + [("kv_a_proj_with_mqa", h, m.kv_lora_rank + m.qk_rope_head_dim),
                    ("kv_b_proj", m.kv_lora_rank, m.n_heads * (m.qk_nope_head_dim + m.v_head_dim)),
                    ("o_proj", m.n_heads * m.v_head_dim, h)]
    return [("q_proj", h, m.q_dim), ("k_proj", h, m.kv_dim), ("v_proj", h, m.kv_dim),
            ("o_proj", m.q_dim, h)]


def _mlp_linears(m: ModelSpec, width: int) -> list[tuple[str, int, int]]:
    h = m.hidden
    up = [("gate_proj", h, width), ("up_proj", h, width)] if m.gated_mlp else [("up_proj", h, width)]
    return up + [("down_proj", width, h)]


def _priced(m: ModelSpec, prefix: str, linears: list[tuple[str, int, int]], total_params: int,
            e_w: float) -> float:
    """Bytes of a block: its linear weights as the quantization stores them, the rest at e_w."""
    q = m.quant
    assert q is not None
    lin = sum(n_in * n_out for _, n_in, n_out in linears)
    b = sum(q.linear_bytes(f"{prefix}.{name}", n_in, n_out, e_w) for name, n_in, n_out in linears)
    return b + (total_params - lin) * e_w


def attention_linears(m: ModelSpec) -> list[tuple[str, int, int]]:
    """(name, n_in, n_out) of one layer's attention projections (``self_attn.<name>``), as
    priced here; the serving iteration prices the same list."""
    return _attention_linears(m)


def attention_linear_names(m: ModelSpec) -> tuple[str, ...]:
    """The names of one layer's attention projections (``self_attn.<name>``), as priced here."""
    return tuple(name for name, _, _ in _attention_linears(m))


def weight_bytes(m: ModelSpec, e_w: float, replicated: tuple[str, ...] = ()) -> ParamCount:
    """Stored bytes of every part of the model, in the shape of its parameter count. A pure
    function of a frozen spec and a byte width, remembered: a serving search asks it for the same
    model and precision at every layout it screens (640 calls, 40% of a 64-GPU SLA search). A spec
    that cannot be hashed is priced afresh. ``replicated``: attention projections (names of
    :func:`attention_linear_names`) the engine keeps whole on every TP rank; their bytes move
    from each layer's ``attention`` (split by TP) to its ``replicated`` share."""
    try:
        return _weight_bytes_remembered(m, e_w, tuple(replicated))
    except TypeError:  # an unhashable field in a user's spec
        return _weight_bytes(m, e_w, tuple(replicated))


@lru_cache(maxsize=256)
def _weight_bytes_remembered(m: ModelSpec, e_w: float, replicated: tuple[str, ...]) -> ParamCount:
    return _weight_bytes(m, e_w, replicated)


def _replicate(m: ModelSpec, pc: ParamCount, e_w: float, replicated: tuple[str, ...]) -> ParamCount:
    """``pc`` (bytes) with the named attention projections of every layer moved from the
    TP-split ``attention`` share to the ``replicated`` one, each at its stored bytes."""
    lins = [x for x in _attention_linears(m) if x[0] in replicated]
    if not lins:
        return pc
    layers = []
    for i, lp in enumerate(pc.layers):
        if m.quant is None:
            b = sum(n_in * n_out for _, n_in, n_out in lins) * e_w
        else:
            b = sum(m.quant.linear_bytes(f"model.layers.{i}.self_attn.{name}", n_in, n_out, e_w)
                    for name, n_in, n_out in lins)
        layers.append(replace(lp, attention=lp.attention - b, replicated=lp.replicated + b))
    return replace(pc, layers=tuple(layers))


def _weight_bytes(m: ModelSpec, e_w: float, replicated: tuple[str, ...] = ()) -> ParamCount:
    pc = count_params(m)
    if m.quant is None:
        return _replicate(m, ParamCount(
            pc.embedding * e_w, pc.lm_head * e_w, pc.final_norm * e_w,  # type: ignore[arg-type]
            tuple(LayerParams(*(f * e_w for f in (lp.attention, lp.dense_mlp,  # type: ignore[arg-type]
                                                   lp.experts, lp.expert_one,
                                                   lp.shared, lp.replicated)))
                  for lp in pc.layers),
            active_experts=pc.active_experts * e_w), e_w, replicated)  # type: ignore[arg-type]
    attn_w, _ = attention_params(m)
    layers = []
    for i, lp in enumerate(pc.layers):
        base = f"model.layers.{i}"
        attn = _priced(m, f"{base}.self_attn", _attention_linears(m), attn_w, e_w)
        dense = one = shared = 0.0
        if lp.dense_mlp:
            dense = _priced(m, f"{base}.mlp", _mlp_linears(m, m.ffn), lp.dense_mlp, e_w)
        if lp.expert_one:
            # experts of a layer share one shape; expert 0's name stands for all of them
            one = _priced(m, f"{base}.mlp.experts.0", _mlp_linears(m, m.moe_ffn), lp.expert_one, e_w)
        if lp.shared:
            width = m.shared_ffn or m.n_shared_experts * m.moe_ffn
            shared = _priced(m, f"{base}.mlp.shared_experts", _mlp_linears(m, width),
                             mlp_params(m, width), e_w)
        layers.append(LayerParams(attn, dense, one * m.n_experts if lp.expert_one else 0.0,  # type: ignore[arg-type]
                                  one, shared, lp.replicated * e_w))
    head = 0.0
    if pc.lm_head:
        head = m.quant.linear_bytes("lm_head", m.hidden, m.vocab, e_w)
    active = sum(m.top_k * lp.expert_one for lp in layers)
    return _replicate(m, replace(pc, embedding=pc.embedding * e_w, lm_head=head,
                                 final_norm=pc.final_norm * e_w, layers=tuple(layers),
                                 active_experts=active), e_w, replicated)
