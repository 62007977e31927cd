"""The roofline: FLOPs, bytes, arithmetic intensity, the ridge point, and which roof binds.

Williams, Waterman and Patterson, "Roofline: an insightful visual performance model for
multicore architectures", CACM 52(4), 2009: attainable FLOP/s = min(peak, I x bandwidth), with
I = FLOPs / bytes moved to and from memory. The ridge point is peak / bandwidth; below it a
kernel is memory-bound. Time from the roofline, max(FLOPs / peak, bytes / bandwidth), is a
lower bound: it assumes perfect overlap of compute and memory traffic at datasheet rates.

Costs counted here (e = bytes per element):

* GEMM (M x K) @ (K x N): 2 M N K FLOPs; e (M K + K N + M N) bytes (each operand once).
* Attention over s_q queries and s_kv keys, H heads of dim d: 4 s_q s_kv H d FLOPs (Q K^T and
  P V), halved for a causal prefill by fused kernels that skip masked blocks. Fused kernels move
  Q, K, V and O once; unfused ones compute the whole score matrix and also write and read the
  scores and probabilities (4 passes over H s_q s_kv elements).
* A model's decode step at batch B, context C: FLOPs 2 x (matmul weights per token) x B +
  attention 4 C H d_qk-ish per token per layer; bytes = weights read once + the B x C KV cache
  read. For MoE the weights read are the experts that the batch touches in expectation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, dtype
from .kv import model_kv_bytes_per_sequence, model_kv_bytes_per_token
from .params import count_params
from .weights import weight_bytes


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel or step placed on one GPU's roofline. JSON keys are public."""

    label: str
    gpu: str
    dtype: str
    flops: float
    bytes: float
    arithmetic_intensity: float
    ridge_flop_per_byte: float
    peak_flop_per_s: float
    hbm_bytes_per_s: float
    bound: str  # "memory" or "compute"
    attainable_flop_per_s: float
    time_s: float
    crossover_batch: int | None
    derivation: Derivation
    extra: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("derivation", "extra")}
        d.update(self.extra)
        d["derivation"] = self.derivation.to_dict()
        return d


def ridge_points(gpu: GPUSpec) -> list[tuple[str, float, float]]:
    """(precision, peak FLOP/s, ridge FLOP/byte) for every precision in the GPU's spec,
    bf16 dense first."""
    order = ["bf16", "fp16", "fp8", "fp4", "int8", "tf32", "fp32", "fp64_tensor", "fp64"]
    keys = [k for k in order if k in gpu.flop_per_s] + [
        k for k in gpu.flop_per_s if k not in order
    ]
    return [(k, gpu.flop_per_s[k], gpu.flop_per_s[k] / gpu.hbm_bytes_per_s) for k in keys]


def _place(d: Derivation, gpu: GPUSpec, prec: str, label: str, crossover: int | None,
           extra: dict[str, Any], e_name: str, tp: int = 1) -> RooflinePoint:
    """Add the roofline steps (ridge, bound, attainable, time) after F and Q are defined.

    With tp > 1 the FLOPs and bytes are split evenly over t GPUs first (TP communication is not
    part of the roofline and is not included)."""
    if tp > 1:
        d.given("tensor-parallel degree (FLOPs and bytes split evenly)", "t", tp, "1")
        d.calc("FLOPs per GPU", "F_1", "F / t", "FLOP")
        d.calc("bytes per GPU", "Q_1", "Q / t", "B")
        d.note("Intensity is unchanged by the split; time falls by t (communication excluded).")
    else:
        d.env["F_1"], d.env["Q_1"] = d["F"], d["Q"]
    d.given(f"{gpu.name} dense {prec} peak", "pi", gpu.peak_flop_per_s(prec), "FLOP/s",
            gpu.source_of(f"flop_per_s.{prec}"))
    d.given(f"{gpu.name} HBM bandwidth", "beta", gpu.hbm_bytes_per_s, "B/s",
            gpu.source_of("hbm_bytes_per_s"))
    ridge = d.calc("ridge point", "I_ridge", "pi / beta", "FLOP/B")
    ai = d.calc("arithmetic intensity", "I", "F / Q", "FLOP/B")
    att = d.calc("attainable rate", "R", "min(pi, I * beta)", "FLOP/s", bound="upper")
    t = d.calc("time (roofline)", "T", "max(F_1 / pi, Q_1 / beta)", "s", bound="lower",
               note="perfect overlap of compute and memory at datasheet peaks")
    return RooflinePoint(
        label=label, gpu=gpu.id, dtype=e_name, flops=float(d["F"]), bytes=float(d["Q"]),
        arithmetic_intensity=float(ai), ridge_flop_per_byte=float(ridge),
        peak_flop_per_s=float(d["pi"]), hbm_bytes_per_s=float(d["beta"]),
        bound="memory" if ai < ridge else "compute", attainable_flop_per_s=float(att),
        time_s=float(t), crossover_batch=crossover, derivation=d, extra=extra,
    )


def gemm(gpu: GPUSpec, M: int, N: int, K: int, dtype_name: str = "bf16") -> RooflinePoint:
    for name, v in (("M", M), ("N", N), ("K", K)):
        if v <= 0:
            raise BadInput(f"--gemm: {name} must be positive, got {v}")
    e = dtype(dtype_name)
    d = Derivation(f"GEMM {M}x{K} @ {K}x{N} ({e.name}) on {gpu.id}")
    d.given("rows of A and C", "M", M, "1")
    d.given("columns of B and C", "N", N, "1")
    d.given("inner dimension", "K", K, "1")
    d.given(f"bytes per {e.name} element", "e", e.bytes, "B", e.source)
    d.calc("FLOPs (one multiply-add = 2 FLOPs)", "F", "2 * M * N * K", "FLOP")
    d.calc("bytes moved (A, B read once; C written once)", "Q", "e * (M * K + K * N + M * N)", "B",
           bound="lower", note="assumes each operand crosses HBM exactly once (perfect reuse in cache)")
    # the M (= tokens) at which a square-ish GEMM with this N, K reaches the ridge
    ridge = gpu.peak_flop_per_s(e.name) / gpu.hbm_bytes_per_s
    ms = np.arange(1, 1 << 16, dtype=np.float64)
    ai = 2 * ms * N * K / (e.bytes * (ms * K + K * N + ms * N))
    hit = np.nonzero(ai >= ridge)[0]
    cross = int(ms[hit[0]]) if hit.size else None
    return _place(d, gpu, e.name, "gemm", cross, {"M": M, "N": N, "K": K}, e.name)


def attention(gpu: GPUSpec, *, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int,
              head_dim: int, dtype_name: str = "bf16", fused: bool = True,
              causal: bool = True) -> RooflinePoint:
    e = dtype(dtype_name)
    d = Derivation(f"attention {'fused' if fused else 'unfused'} on {gpu.id}")
    d.given("batch", "B", batch, "seq")
    d.given("query tokens", "s_q", q_len, "token")
    d.given("key/value tokens", "s_kv", kv_len, "token")
    d.given("query heads", "H", heads, "1")
    d.given("K/V heads", "H_kv", kv_heads, "1")
    d.given("head dim", "d", head_dim, "1")
    d.given(f"bytes per {e.name} element", "e", e.bytes, "B", e.source)
    # a fused kernel skips the blocks above the diagonal; an unfused one computes and stores the
    # whole s_q x s_kv matrix and masks it afterwards
    mask = 0.5 if fused and causal and q_len == kv_len and q_len > 1 else 1.0
    d.given("causal fraction of the score matrix computed", "c", mask, "1",
            note="fused kernels skip masked blocks; unfused ones compute the full matrix")
    d.calc("FLOPs (Q K^T and P V)", "F", "4 * B * s_q * s_kv * H * d * c", "FLOP")
    io = "e * B * (2 * s_q * H * d + 2 * s_kv * H_kv * d)"
    if fused:
        d.calc("bytes (Q, O once; K, V once)", "Q", io, "B", bound="lower")
    else:
        d.calc("bytes (Q, K, V, O + scores and probabilities written and read)", "Q",
               io + " + 4 * e * B * H * s_q * s_kv", "B", bound="lower")
    return _place(d, gpu, e.name, "attention", None, {"fused": fused}, e.name)


def _matmul_params(m: ModelSpec) -> tuple[float, float, float]:
    """(dense matmul weights, one routed expert, routed experts per MoE layer count) per token.

    Embedding lookups are not matmuls; the output head is (a tied head reuses the embedding).
    """
    pc = count_params(m)
    dense = pc.total - pc.embedding - sum(lp.experts for lp in pc.layers)
    if m.tied_embeddings:
        dense += m.vocab * m.hidden  # the head multiplies by the (tied) embedding matrix
    return float(dense), float(pc.layers[-1].expert_one if m.is_moe else 0), float(m.n_moe_layers)


def _matmul_weight_bytes(m: ModelSpec, e_w: float) -> tuple[float, float]:
    """(dense matmul weight bytes, bytes of one routed expert), as the checkpoint stores them."""
    wb = weight_bytes(m, e_w)
    dense = wb.total - wb.embedding - sum(lp.experts for lp in wb.layers)
    if m.tied_embeddings:
        dense += m.vocab * m.hidden * e_w  # the head reads the (tied, unquantized) embedding
    return float(dense), float(wb.layers[-1].expert_one if m.is_moe else 0)


def _attended_layers(m: ModelSpec, context: float) -> float:
    """Layers' worth of the context a new token attends to and reads: L without sliding
    windows, (L_full * C + L_w * min(C, W)) / C with them."""
    return m.kv_tokens_held(int(context)) / context if m.n_sliding_layers else float(m.n_layers)


def _decode_arrays(m: ModelSpec, batch: np.ndarray, context: float, e_w: float,
                   kv_tok: float) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, bytes) of one decode step for an array of batch sizes; ``kv_tok`` is the KV
    bytes per token of context (window-bounded layers averaged in)."""
    dense, one_exp, n_moe = _matmul_params(m)
    dense_b, one_b = _matmul_weight_bytes(m, e_w)
    qk, v = decode_attention_dims(m)
    attn_f = 2 * context * m.n_heads * (qk + v) * _attended_layers(m, context)  # per token
    if m.is_moe:
        # experts touched by B tokens each picking k of E: E (1 - (1 - k/E)^B) per layer
        touched = m.n_experts * (1 - (1 - m.top_k / m.n_experts) ** batch)
        w_bytes = dense_b + n_moe * touched * one_b
        mm_f = 2 * (dense + n_moe * m.top_k * one_exp) * batch
    else:
        w_bytes = np.full_like(batch, dense_b, dtype=np.float64)
        mm_f = 2 * dense * batch
    flops = mm_f + attn_f * batch
    byts = w_bytes + batch * context * kv_tok
    return flops, byts


def _kv_per_context_token(m: ModelSpec, kv_dtype: str, context: float) -> float:
    return model_kv_bytes_per_sequence(m, context, kv_dtype) / context


def decode_attention_dims(m: ModelSpec) -> tuple[int, int]:
    """(d_qk, d_v) each query head works in against one cached token at decode.

    MLA decodes with the up-projections absorbed (DeepSeek-V2, Sec. 2.1.3): W_UK folds into the
    query and W_UV into the output, so every head scores against the cached latent (kv_lora_rank)
    plus the shared RoPE key (qk_rope_head_dim) and sums values in the latent: the FLOPs follow
    the same compressed cache the bytes read. Other attention uses its head dim.
    """
    if m.kv_lora_rank:
        return m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank
    return m.head_dim, m.head_dim


def _model_givens(d: Derivation, m: ModelSpec, e: Any, ekv: Any, kv_tok: float,
                  context: float | None = None, absorbed: bool = False) -> tuple[int, int]:
    """The per-model inputs of a decode or prefill derivation; returns (d_qk, d_v).

    ``absorbed``: MLA attention runs in the latent space (decode), see decode_attention_dims."""
    d.given(f"bytes per {e.name} weight", "e_w", e.bytes, "B", e.source)
    d.given("layers", "L", m.n_layers, "1", m.source)
    if context is not None and m.n_sliding_layers:
        d.given(f"layers' worth of context attended ({m.n_sliding_layers} sliding layers see at "
                f"most {m.sliding_window:,} tokens)", "L_a", _attended_layers(m, context), "1",
                m.source, note="(L_full * C + L_w * min(C, W)) / C")
    d.given("query heads", "H", m.n_heads, "1", m.source)
    if m.kv_lora_rank and absorbed:
        qk, v = decode_attention_dims(m)
        d.given("query-key dim per head, absorbed MLA (latent + RoPE key)", "d_qk", qk, "1",
                m.source, note=f"kv_lora_rank {m.kv_lora_rank} + qk_rope_head_dim "
                f"{m.qk_rope_head_dim}: the query is multiplied into the latent space, as the "
                "cache holds it (DeepSeek-V2 Sec. 2.1.3)")
        d.given("value dim per head, absorbed MLA (the latent)", "d_v", v, "1", m.source,
                note="values summed in the latent; W_UV is applied once per token after")
    else:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim if m.kv_lora_rank else m.head_dim
        v = m.v_head_dim if m.kv_lora_rank else m.head_dim
        d.given("query-key dim per head", "d_qk", qk, "1", m.source)
        d.given("value dim per head", "d_v", v, "1", m.source)
    label = (f"KV bytes per token of context ({ekv.name}, window-bounded layers averaged in)"
             if context is not None and m.n_sliding_layers else f"KV bytes per token ({ekv.name})")
    d.given(label, "b_tok", kv_tok, "B")
    return qk, v


def _weight_term(d: Derivation, m: ModelSpec, e_w: float, params_symbol: str, bytes_symbol: str,
                 byts: float) -> str:
    """The weight-bytes term of a bytes formula: ``P * e_w``, or the per-module quantized bytes."""
    if m.quant is None:
        return f"{params_symbol} * e_w"
    d.given(f"bytes of those weights as stored ({m.quant.label})", bytes_symbol, byts, "B",
            m.source, note="quantized linear weights with their scales; the rest at e_w")
    return bytes_symbol


def decode_step(gpu: GPUSpec, m: ModelSpec, *, batch: int, context: int, dtype_name: str = "bf16",
                kv_dtype: str = "bf16", tp: int = 1) -> RooflinePoint:
    """One decode step (one new token for each of ``batch`` sequences at ``context`` tokens)."""
    if batch <= 0 or context <= 0:
        raise BadInput("--batch and --context must be positive")
    e, ekv = dtype(dtype_name), dtype(kv_dtype, "--kv-dtype")
    kv_tok = _kv_per_context_token(m, ekv.name, context)
    dense, one_exp, n_moe = _matmul_params(m)
    dense_b, one_b = _matmul_weight_bytes(m, e.bytes)
    d = Derivation(f"decode step of {m.id} at batch {batch}, context {context} on {gpu.id}")
    for n in m.notes:
        d.note(f"{m.id}: {n}")
    d.given("batch (sequences, one new token each)", "B", batch, "seq")
    d.given("context already in the KV cache", "C", context, "token")
    d.given("matmul weights used by every token (attention, dense MLP, head)", "P_mm", dense, "1",
            m.source, note="all parameters except the embedding table and routed experts")
    qk, v = _model_givens(d, m, e, ekv, kv_tok, context, absorbed=True)
    la = "L_a" if m.n_sliding_layers else "L"
    w_mm = _weight_term(d, m, e.bytes, "P_mm", "W_mm", dense_b)
    if m.is_moe:
        d.given("MoE layers", "L_moe", n_moe, "1", m.source)
        d.given("routed experts per layer", "E", m.n_experts, "1", m.source)
        d.given("experts per token", "k", m.top_k, "1", m.source)
        d.given("parameters of one routed expert", "P_x", one_exp, "1")
        d.calc("experts the batch touches per layer (expected)", "E_hit",
               "E * (1 - (1 - k / E) ** B)", "1",
               note="each token picks k of E uniformly; real routers are skewed, so fewer")
        d.calc("FLOPs", "F", f"2 * (P_mm + L_moe * k * P_x) * B + 2 * B * C * H * (d_qk + d_v) * {la}",
               "FLOP")
        w_x = _weight_term(d, m, e.bytes, "P_x", "W_x", one_b)
        d.calc("bytes (weights touched + KV cache read)", "Q",
               f"{w_mm} + L_moe * E_hit * {w_x} + B * C * b_tok", "B", bound="lower")
    else:
        d.calc("FLOPs (matmuls + attention over the cache)", "F",
               f"2 * P_mm * B + 2 * B * C * H * (d_qk + d_v) * {la}", "FLOP")
        d.calc("bytes (weights read once + KV cache read)", "Q", f"{w_mm} + B * C * b_tok", "B",
               bound="lower", note="activations and the new token's KV write are negligible here")
    # crossover: the smallest batch whose intensity reaches the ridge (vectorised scan)
    ridge = gpu.peak_flop_per_s(e.name) / gpu.hbm_bytes_per_s
    bs = np.arange(1, 1 << 17, dtype=np.float64)
    f, q = _decode_arrays(m, bs, float(context), e.bytes, kv_tok)
    hit = np.nonzero(f / q >= ridge)[0]
    cross = int(bs[hit[0]]) if hit.size else None
    per_tok_f = (2 * (dense + n_moe * m.top_k * one_exp)
                 + 2 * context * m.n_heads * (qk + v) * _attended_layers(m, context))
    asymptote = per_tok_f / (context * kv_tok)
    extra = {"batch": batch, "context": context, "tp": tp, "model": m.id,
             "intensity_limit_large_batch": asymptote}
    f1, q1 = _decode_arrays(m, np.array([float(batch)]), float(context), e.bytes, kv_tok)
    if not (np.isclose(f1[0], d["F"]) and np.isclose(q1[0], d["Q"])):
        raise AssertionError("decode derivation and vectorised path disagree")
    return _place(d, gpu, e.name, "decode", cross, extra, e.name, tp)


def decode_sweep(gpu: GPUSpec, m: ModelSpec, batches: np.ndarray, context: int,
                 dtype_name: str = "bf16", kv_dtype: str = "bf16") -> dict[str, np.ndarray]:
    """Intensity, attainable FLOP/s and step time for many batch sizes (for plots and tables)."""
    e = dtype(dtype_name)
    kv_tok = _kv_per_context_token(m, dtype(kv_dtype).name, context)
    f, q = _decode_arrays(m, batches.astype(np.float64), float(context), e.bytes, kv_tok)
    peak, bw = gpu.peak_flop_per_s(e.name), gpu.hbm_bytes_per_s
    ai = f / q
    return {"batch": batches, "flops": f, "bytes": q, "intensity": ai,
            "attainable": np.minimum(peak, ai * bw), "time_s": np.maximum(f / peak, q / bw),
            "tokens_per_s": batches / np.maximum(f / peak, q / bw)}


def prefill(gpu: GPUSpec, m: ModelSpec, *, batch: int, prompt: int, dtype_name: str = "bf16",
            kv_dtype: str = "bf16", tp: int = 1) -> RooflinePoint:
    """One prefill pass over ``batch`` prompts of ``prompt`` tokens (causal attention)."""
    if batch <= 0 or prompt <= 0:
        raise BadInput("--batch and --context must be positive")
    e, ekv = dtype(dtype_name), dtype(kv_dtype, "--kv-dtype")
    kv_tok = model_kv_bytes_per_token(m, ekv.name)
    dense, one_exp, n_moe = _matmul_params(m)
    d = Derivation(f"prefill of {m.id}: {batch} x {prompt} tokens on {gpu.id}")
    d.given("batch", "B", batch, "seq")
    d.given("prompt tokens", "S", prompt, "token")
    active = dense + n_moe * m.top_k * one_exp
    d.given("matmul weights used per token", "P_act", active, "1", m.source)
    d.given("weights read (all of them)", "P_all", dense + n_moe * m.n_experts * one_exp, "1")
    _model_givens(d, m, e, ekv, kv_tok)
    dense_b, one_b = _matmul_weight_bytes(m, e.bytes)
    w_all = _weight_term(d, m, e.bytes, "P_all", "W_all", dense_b + n_moe * m.n_experts * one_b)
    if m.n_sliding_layers:
        d.note(f"{m.n_sliding_layers} sliding-window layers are priced as full causal attention "
               "here (an upper bound on their attention FLOPs when S exceeds the window)")
    d.calc("FLOPs (matmuls + causal attention)", "F",
           "2 * P_act * B * S + B * S * S * H * (d_qk + d_v) * L", "FLOP",
           note="attention 2 S^2 H (d_qk + d_v) per layer, halved by the causal mask")
    d.calc("bytes (weights once + KV written)", "Q", f"{w_all} + B * S * b_tok", "B",
           bound="lower")
    return _place(d, gpu, e.name, "prefill", None,
                  {"batch": batch, "context": prompt, "model": m.id, "tp": tp}, e.name, tp)
