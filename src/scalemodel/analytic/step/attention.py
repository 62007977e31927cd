"""Attention: the projections, and the core either as a fused kernel (FlashAttention-class, its
efficiency by the length of each call) or unfused (batched GEMMs and score passes in HBM)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ...specs import GPUSpec
from .candidates import Candidates
from .config import FUSED_ATTENTION, constants
from .gemm import gemm3, gemm3_of


@cache
def _attention_curves(arch: str) -> dict[str, np.ndarray]:
    """Fractions of the 16-bit peak by call length: forward/backward, causal/full (see
    planner.toml [attention]). Hopper and later use the H100 measurements; Ampere scales their
    shape to the A100 maxima of the FlashAttention-2 paper."""
    a = constants()["attention"]
    fc = np.asarray(a["h100_fa2_fwd_causal"], dtype=np.float64)
    ff = np.asarray(a["h100_fa2_fwd_full"], dtype=np.float64)
    bf = np.asarray(a["h100_fa2_bwd_full"], dtype=np.float64)
    if arch == "ampere":
        fwd_full = a["a100_fwd_max"] * ff / ff[-1]
        bwd_full = a["a100_bwd_max"] * bf / bf[-1]
    else:
        fwd_full = ff / a["h100_peak_tflops"]
        bwd_full = bf / a["h100_peak_tflops"]
    mask = fc / ff  # what the causal mask costs at each length
    return {"x": np.log2(np.asarray(a["lengths"], dtype=np.float64)),
            "fwd_full": fwd_full, "fwd_causal": fwd_full * mask,
            "bwd_full": bwd_full, "bwd_causal": bwd_full * mask}


def attention_efficiency(gpu: GPUSpec, length: Any = 8192.0, *, causal: bool = True,
                         backward: bool = False) -> Any:
    """Fraction of the 16-bit peak a FlashAttention call of ``length`` tokens reaches
    (FLOPs counted as the planner counts them: causal half, backward
    ``backward_flop_factor`` x the forward)."""
    c = _attention_curves(gpu.arch)
    y = c[("bwd_" if backward else "fwd_") + ("causal" if causal else "full")]
    x = np.log2(np.maximum(np.asarray(length, dtype=np.float64), 1.0))
    slope = (y[1] - y[0]) / (c["x"][1] - c["x"][0])
    short = np.maximum(y[0] + slope * (x - c["x"][0]),
                       constants()["attention"]["short_floor"] * y[0])
    out = np.where(x < c["x"][0], short, np.interp(x, c["x"], y))
    return out if out.ndim else float(out)


def attention_slowdown(kind: str, backward: bool = False) -> float:
    """How much slower than the FlashAttention-2 curves a fused attention kind runs (below 1:
    faster): the Triton kernel by ``triton_slowdown``; FlashAttention-3 / cuDNN on Hopper by the
    inverse of ``flash3_fwd_speedup`` / ``flash3_bwd_speedup``."""
    a = constants()["attention"]
    if kind == "triton":
        return float(a["triton_slowdown"])
    if kind == "flash3":
        return 1.0 / float(a["flash3_bwd_speedup" if backward else "flash3_fwd_speedup"])
    return 1.0


def attention_core_time(flops_fwd: Any, S: float, cp: Any, peak16: float,
                        gpu: GPUSpec, kind: str = "flash") -> tuple[Any, Any]:
    """(forward, backward) seconds of the FlashAttention calls of one layer on one rank.

    ``flops_fwd`` are the executed (causal half) forward FLOPs. Without CP it is one causal call
    of S tokens. With load-balanced CP (2 cp chunks) a rank runs one causal call of S/cp tokens
    (1/cp of the FLOPs) and cp - 1 unmasked calls of half that size (the rest), read at the
    geometric-mean length S / (cp sqrt 2). The backward executes ``backward_flop_factor``
    (planner.toml [attention], 2.5 in the FlashAttention papers) times the forward FLOPs.
    ``kind`` scales the FlashAttention-2 rates (:func:`attention_slowdown`).
    """
    cp = np.asarray(cp, dtype=np.float64)
    diag_l = S / cp
    off_l = S / (cp * math.sqrt(2.0))
    share = 1.0 / cp
    f = (flops_fwd * share / attention_efficiency(gpu, diag_l)
         + flops_fwd * (1 - share) / attention_efficiency(gpu, off_l, causal=False))
    b = constants()["attention"]["backward_flop_factor"] * (
        flops_fwd * share / attention_efficiency(gpu, diag_l, backward=True)
        + flops_fwd * (1 - share) / attention_efficiency(gpu, off_l, causal=False,
                                                         backward=True))
    return (attention_slowdown(kind) * f / peak16,
            attention_slowdown(kind, backward=True) * b / peak16)


@dataclass(frozen=True)
class AttentionTerms:
    """Seconds per layer and micro-batch on one rank, forward and backward."""

    in_proj_f: Any  # q, k, v (or MLA) input projections
    in_proj_b: Any
    out_proj_f: Any  # output projection
    out_proj_b: Any
    core_f: Any  # the attention kernel(s), with the ring-attention merges under CP
    core_b: Any

    @property
    def proj_f(self) -> Any:
        return self.in_proj_f + self.out_proj_f

    @property
    def proj_b(self) -> Any:
        return self.in_proj_b + self.out_proj_b


def _fused_core(c: Candidates) -> tuple[Any, Any]:
    """FlashAttention-class kernel: causal half executed, backward backward_flop_factor x the
    forward; under CP each of the cp - 1 extra calls merges its partial output into the running
    result forward and accumulates dq, dk, dv backward (online-softmax merge)."""
    ms, S, cp, tp = c.ms, c.S, c.cp, c.tp
    core_flops = 2 * c.b * (S / cp) * S * (ms.qk_dim + ms.v_dim) / tp * 0.5
    core_f, core_b = attention_core_time(core_flops, S, cp, c.peak16, c.gpu, c.job.attention)
    merge = float(constants()["attention"]["cp_merge_bytes"]) * (cp - 1) * c.T / tp
    return (core_f + merge * ms.v_dim / c.hbm,
            core_b + merge * (ms.qk_dim + ms.kv_dim) / c.hbm)


def _unfused_core(c: Candidates) -> tuple[Any, Any]:
    """Unfused: two batched GEMMs per head over the whole s x s score matrix (their own roofline
    pays for writing scores and reading probabilities), plus the fused scale-mask-softmax and
    dropout passes over the scores in HBM."""
    m, ms, ng = c.m, c.ms, constants()["nongemm"]
    heads = m.n_heads / c.tp
    sl = c.S / c.cp
    dq, dv = ms.qk_dim / m.n_heads, ms.v_dim / m.n_heads
    nb = c.b * heads  # one batched launch over the micro-batch's sequences and this rank's heads
    qk_f, qk_b = gemm3_of(c, "attention_matmuls", sl, c.S, dq, nb)
    av_f, av_b = gemm3_of(c, "attention_matmuls", sl, dv, c.S, nb)
    per_f = ng["unfused_fwd_bytes_per_score"] + (ng["unfused_dropout_fwd_bytes"]
                                                 if m.dropout else 0)
    per_b = ng["unfused_bwd_bytes_per_score"] + (ng["unfused_dropout_bwd_bytes"]
                                                 if m.dropout else 0)
    scores = c.b * heads * sl * c.S
    return qk_f + av_f + scores * per_f / c.hbm, qk_b + av_b + scores * per_b / c.hbm


def attention_terms(c: Candidates) -> AttentionTerms:
    """The attention block's GEMMs and core for every candidate."""
    af1, ab1 = gemm3(c, c.T, c.ms.attn_in_n / c.tp, c.h)
    af2, ab2 = gemm3(c, c.T, c.h, c.ms.attn_out_k / c.tp)
    core_f, core_b = (_fused_core(c) if c.job.attention in FUSED_ATTENTION else _unfused_core(c))
    return AttentionTerms(af1, ab1, af2, ab2, core_f, core_b)
