"""What a layer's kernels keep for the backward (specs/data/saved_tensors.toml), each figure
sourced: the fused or eager kernel mode and the attention kernel of a framework profile."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import BadInput
from .sources import all_sources, load_toml

KERNEL_FIELDS = ("norm_input", "norm_upcast", "norm_stats", "layer_norm_input", "swiglu",
                 "rotary", "softmax", "kv_repeat")
ATTENTION_FIELDS = ("lse", "scores")


@dataclass(frozen=True)
class KernelSaves:
    """Bytes kept for the backward per element (16-bit activations), as the memory model reads
    them. ``kernels`` / ``attention`` name the modes they were read for."""

    norm_input: float  # per element of h: an RMSNorm's 16-bit input (fused: 2, eager: 0)
    norm_upcast: float  # per element of h: its fp32 copy + normalised 16-bit tensor (eager: 6)
    norm_stats: float  # per token per statistic (fp32)
    layer_norm_input: float  # LayerNorm (a native kernel in every mode): its 16-bit input
    swiglu: float  # per element of f (fused 6, eager 8)
    rotary: float  # per element of q and k (fused 0, eager 4)
    softmax: float  # unfused attention: per score element the softmax keeps (2 or 4 for fp32)
    kv_repeat: bool  # K and V kept at the query heads' width (repeat_kv)
    lse: float  # fused attention: bytes per head and token (fp32 log-sum-exp)
    scores: bool  # the attention kernel materialises the a s^2 scores
    dropout_mask: float = 1.0  # bytes per element of a dropout mask
    # per element of a Linear's input: what the Linear keeps of it for its weight-gradient GEMM
    # (2: the 16-bit input itself; 1: an fp8 copy, as Transformer Engine's fp8 Linears keep;
    # frameworks.toml fp8_saved_input, read for fp8 runs)
    linear_input: float = 2.0
    # MoE: the routing weights applied inside the expert activation (Megatron-Core >= 0.13:
    # weighted SwiGLU keeps the probs, 4 B per routed copy) instead of on the expert output in
    # the unpermute (which then keeps that output, 2 B per element of h per routed copy)
    moe_probs_in_act: bool = False
    # a framework's own fp8 storage of two tensors (frameworks.toml fp8_attn_out_saved and
    # fp8_moe_act_input_saved, read for fp8 runs; 0: not set, the accounting above): the
    # attention output kept once, at these bytes per element, for both the attention backward
    # and the output projection's weight gradient; the routed experts' SwiGLU input (fc1 output)
    # kept at these bytes per element, the SwiGLU output recomputed in the backward (not kept)
    attn_out_kept: float = 0.0
    moe_act_input: float = 0.0
    kernels: str = "fused"
    attention: str = "flash"
    sources: tuple[tuple[str, str], ...] = ()  # (field, source key)
    notes: tuple[tuple[str, str], ...] = ()

    def source_of(self, name: str) -> str:
        return dict(self.sources).get(name, "")

    def note_of(self, name: str) -> str:
        return dict(self.notes).get(name, "")


def _table(raw: dict[str, Any], section: str, key: str, fields: tuple[str, ...],
           allowed: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    t = raw.get(section, {}).get(key)
    if t is None:
        raise BadInput(f"--{'kernels' if section == 'kernels' else 'attention'}: unknown "
                       f"{section[:-1] if section == 'kernels' else 'attention'} mode {key!r}; "
                       f"choose one of {', '.join(allowed)}")
    known = all_sources()
    vals, srcs, notes = {}, {}, {}
    for f in fields:
        if f not in t or f"{f}_source" not in t:
            raise BadInput(f"saved_tensors.toml: [{section}.{key}] needs {f} and {f}_source")
        if t[f"{f}_source"] not in known:
            raise BadInput(f"saved_tensors.toml: [{section}.{key}] {f}_source = "
                           f"{t[f'{f}_source']!r} is not a known source key")
        vals[f], srcs[f] = t[f], t[f"{f}_source"]
        if f"{f}_note" in t:
            notes[f] = str(t[f"{f}_note"])
    return vals, srcs, notes


@cache
def kernel_saves(kernels: str = "fused", attention: str = "flash", linear_input: float = 2.0,
                 linear_input_source: str = "", moe_probs_in_act: bool = False,
                 moe_probs_source: str = "", attn_out_kept: float = 0.0,
                 attn_out_source: str = "", moe_act_input: float = 0.0,
                 moe_act_input_source: str = "") -> KernelSaves:
    """The saved-tensor figures of a kernel mode (fused / eager) and attention kernel;
    ``linear_input`` the bytes per element a Linear keeps of its input (2, or a framework's
    fp8_saved_input for an fp8 run, with its source); ``moe_probs_in_act`` whether the MoE
    routing weights are applied inside the expert activation (a framework's
    moe_probs_in_expert_act, with its source); ``attn_out_kept`` / ``moe_act_input`` a
    framework's fp8_attn_out_saved / fp8_moe_act_input_saved for an fp8 run (0: not set)."""
    if not 0 < linear_input <= 2:
        raise BadInput(f"bytes a Linear keeps per input element must be in (0, 2], "
                       f"got {linear_input}")
    raw = load_toml("saved_tensors.toml")
    kv, ks, kn = _table(raw, "kernels", kernels, KERNEL_FIELDS, tuple(raw["kernels"]))
    av, as_, an = _table(raw, "attention", attention, ATTENTION_FIELDS, tuple(raw["attention"]))
    drop = raw["dropout"]
    srcs = {**ks, **as_, "dropout_mask": drop["mask_source"]}
    if linear_input_source:
        srcs["linear_input"] = linear_input_source
    if moe_probs_source:
        srcs["moe_probs_in_act"] = moe_probs_source
    if attn_out_source:
        srcs["attn_out_kept"] = attn_out_source
    if moe_act_input_source:
        srcs["moe_act_input"] = moe_act_input_source
    notes = {**kn, **an, "dropout_mask": drop.get("mask_note", "")}
    return KernelSaves(**{k: float(v) if not isinstance(v, bool) else v
                          for k, v in {**kv, **av}.items()},
                       dropout_mask=float(drop["mask"]), linear_input=float(linear_input),
                       moe_probs_in_act=bool(moe_probs_in_act),
                       attn_out_kept=float(attn_out_kept), moe_act_input=float(moe_act_input),
                       kernels=kernels, attention=attention,
                       sources=tuple(srcs.items()), notes=tuple(notes.items()))
