"""Attention: the projections, and the core either as a fused kernel (FlashAttention-class, its
efficiency by the length of each call) or unfused (batched GEMMs and score passes in HBM)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ...errors import BadInput
from ...specs import GPUSpec
from .candidates import Candidates
from .config import FUSED_ATTENTION, constants, profile_value
from .gemm import gemm3, gemm3_of


@dataclass(frozen=True)
class AttentionCurve:
    """Fractions of the 16-bit dense peak one attention kernel family reaches on one
    architecture, by log2 of the call length: forward / backward, causal / full."""

    family: str
    label: str
    arch: str
    x: np.ndarray  # log2 of the measured lengths
    fwd_full: np.ndarray
    fwd_causal: np.ndarray
    bwd_full: np.ndarray
    bwd_causal: np.ndarray
    head_dim: float  # the measured head dim the curve comes from
    sources: tuple[str, ...]  # source keys, the measured curve first
    notes: tuple[str, ...]
    borrowed: tuple[str, ...]  # "family on arch: borrows other (why)" lines, for the derivation
    # the measured level is a burst rate (kernels.toml clocks = "burst"): a step keeps the GPU's
    # sustained share of it (gpus.toml sustained_gemm_ratio), as the burst GEMM anchor does
    burst: bool = False

    def scaled(self, fwd: float, bwd: float, **kw: Any) -> AttentionCurve:
        return dataclasses.replace(self, fwd_full=self.fwd_full * fwd,
                                   fwd_causal=self.fwd_causal * fwd,
                                   bwd_full=self.bwd_full * bwd, bwd_causal=self.bwd_causal * bwd,
                                   **kw)


def _measured_curve(family: str, label: str, arch: str, d: dict[str, Any],
                    head_dim: float) -> AttentionCurve:
    """A measured entry: the curve of the head dim nearest ``head_dim`` (log distance). An entry
    measured with the causal mask only (``bwd_causal_tflops``, no ``*_full_tflops``) takes the
    unmasked rate equal to the causal one (kernels.toml says so in its note)."""
    cv = min(d["curves"], key=lambda c: abs(math.log2(float(c["head_dim"]) / head_dim)))
    fc = np.asarray(cv["fwd_causal_tflops"], dtype=np.float64)
    ff = np.asarray(cv.get("fwd_full_tflops", cv["fwd_causal_tflops"]), dtype=np.float64)
    bf = np.asarray(cv.get("bwd_full_tflops", cv.get("bwd_causal_tflops")), dtype=np.float64)
    fwd_full, bwd_full = ff / d["peak_tflops"], bf / d["peak_tflops"]
    mask = fc / ff  # what the causal mask costs at each length
    return AttentionCurve(family, label, arch, np.log2(np.asarray(cv["lengths"], dtype=np.float64)),
                          fwd_full, fwd_full * mask, bwd_full, bwd_full * mask,
                          float(cv["head_dim"]), (d["source"],), (d.get("note", ""),), (),
                          burst=d.get("clocks") == "burst")


@cache
def attention_curve(family: str, arch: str, head_dim: float = 128.0) -> AttentionCurve:
    """The curve of one kernel family on one architecture (specs/data/kernels.toml): measured,
    the length dependence of another architecture scaled to measured maxima, a ratio to another
    family on the same architecture, or borrowed from another architecture (said in
    ``borrowed``)."""
    from ...specs.kernels import attention_entry, kernels

    label = kernels()["attention"][family].get("label", family)
    e = attention_entry(family, arch)
    d = e.data
    lent = ((f"{label} on {arch}: borrows {e.borrowed_from}'s entry ({e.borrow_note})",)
            if e.borrowed_from else ())
    if "curves" in d:
        c = _measured_curve(family, label, arch, d, head_dim)
    elif "shape_of" in d:
        shape = attention_curve(family, d["shape_of"], head_dim)
        c = dataclasses.replace(
            shape.scaled(d["fwd_max"] / shape.fwd_full[-1], d["bwd_max"] / shape.bwd_full[-1]),
            arch=arch, sources=(d["source"], *shape.sources), notes=(d.get("note", ""),),
            borrowed=shape.borrowed, burst=d.get("clocks") == "burst")
    else:  # a ratio to another family on the same architecture
        base = attention_curve(d["base"], arch, head_dim)
        if "slowdown" in d:
            f = b = 1.0 / float(d["slowdown"])
        else:
            f, b = float(d["fwd_speedup"]), float(d["bwd_speedup"])
        c = base.scaled(f, b, family=family, label=label,
                        sources=(d["source"], *base.sources),
                        notes=(d.get("note", ""), *base.notes), borrowed=base.borrowed)
    return dataclasses.replace(c, borrowed=lent + c.borrowed) if lent else c


def family_of(kind: str) -> str:
    """The kernel family (kernels.toml [attention.*]) an ``--attention`` kind names."""
    from ...specs.kernels import attention_family

    return attention_family(kind)[0]


def curve_for(kind: str, gpu: GPUSpec, head_dim: float = 128.0) -> AttentionCurve:
    """The curve of a fused ``--attention`` kind on this GPU; BadInput in one line where its
    architecture has none and borrows none."""
    from ...specs.kernels import FILE, kernels

    fam = family_of(kind)
    try:
        return attention_curve(fam, gpu.arch, float(head_dim))
    except BadInput:
        t = kernels()["attention"][fam]
        archs = sorted(k for k, v in t.items() if isinstance(v, dict))
        raise BadInput(f"--attention {kind} ({t.get('label', fam)}) has no curve for {gpu.id} "
                       f"(architecture {gpu.arch or 'unknown'}); {FILE} [attention.{fam}] has: "
                       f"{', '.join(archs)}; use --attention flash") from None


@cache
def part_ratio(family: str, gpu_id: str) -> dict[str, Any] | None:
    """kernels.toml [attention_part.<family>.<gpu>]: the measured speed of this part over the
    reference part whose architecture curve it uses, by call length (log2), forward / backward,
    causal / full (reference time over part time), with its source and note; None where the part
    has no such entry."""
    from ...specs.kernels import FILE, kernels

    e = kernels().get("attention_part", {}).get(family, {}).get(gpu_id)
    if e is None:
        return None
    if not e.get("source"):
        raise BadInput(f"{FILE} [attention_part.{family}.{gpu_id}]: source is missing")
    out: dict[str, Any] = {"x": np.log2(np.asarray(e["lengths"], dtype=np.float64)),
                           "reference": e["reference"], "source": e["source"],
                           "note": e.get("note", "")}
    for k in ("fwd_causal", "bwd_causal", "fwd_full", "bwd_full"):
        out[k] = (np.asarray(e[f"reference_{k}_ms"], dtype=np.float64)
                  / np.asarray(e[f"part_{k}_ms"], dtype=np.float64))
    return out


def attention_efficiency(gpu: GPUSpec, length: Any = 8192.0, *, causal: bool = True,
                         backward: bool = False, kind: str = "flash",
                         head_dim: float = 128.0) -> Any:
    """Fraction of the 16-bit peak a fused attention call of ``length`` tokens reaches
    (FLOPs counted as the planner counts them: causal half, backward
    ``backward_flop_factor`` x the forward); FlashAttention-2 unless ``kind`` names another.
    A curve timed at burst clocks (kernels.toml ``clocks = "burst"``) keeps the GPU's sustained
    share of its rate (``gpu.sustained_fraction``), as the GEMM model's burst anchor does. A part
    timed against another part of its architecture with one kernel build (kernels.toml
    [attention_part], :func:`part_ratio`) takes the curve times that measured ratio at the call's
    length (held at the end ratios outside the timed lengths)."""
    c = curve_for(kind, gpu, head_dim)
    y = getattr(c, ("bwd_" if backward else "fwd_") + ("causal" if causal else "full"))
    if c.burst:  # timed on an unthrottled GPU: a step keeps the sustained share (kernels.toml)
        y = y * gpu.sustained_fraction
    x = np.log2(np.maximum(np.asarray(length, dtype=np.float64), 1.0))
    slope = (y[1] - y[0]) / (c.x[1] - c.x[0])
    short = np.maximum(y[0] + slope * (x - c.x[0]),
                       constants()["attention"]["short_floor"] * y[0])
    out = np.where(x < c.x[0], short, np.interp(x, c.x, y))
    pr = part_ratio(c.family, gpu.id)
    if pr is not None:  # this part timed against the part the arch curve stands for
        r = pr[("bwd_" if backward else "fwd_") + ("causal" if causal else "full")]
        out = out * np.interp(x, pr["x"], r)
    return out if out.ndim else float(out)


def cp_blocks(flops_fwd: Any, S: float, cp: Any, peak16: float, gpu: GPUSpec,
              kind: str = "flash", head_dim: float = 128.0,
              balanced: bool = True) -> tuple[Any, Any, Any, Any]:
    """(diagonal forward, one off-diagonal forward, diagonal backward, one off-diagonal
    backward) seconds of the attention calls a rank runs per layer under load-balanced CP.

    ``flops_fwd`` are the executed (causal half) forward FLOPs. With 2 cp chunks (rank r holds
    chunks r and 2cp-1-r) a rank runs one causal call of S/cp tokens against themselves (1/cp of
    the FLOPs) and cp - 1 unmasked calls of half that work each (the rest), read at the
    geometric-mean length S / (cp sqrt 2). The backward executes ``backward_flop_factor``
    (planner.toml [attention], 2.5 in the FlashAttention papers) times the forward FLOPs.
    ``kind`` chooses the kernel family's curve (kernels.toml). Without CP the diagonal call is the
    whole causal call of S tokens and there are no other calls.

    ``balanced`` false (a profile's cp_load_balance: contiguous chunks, torch's
    _SequentialSharder) prices the slowest rank, the last: the same causal call and cp - 1
    unmasked calls of S/cp x S/cp each, twice the balanced half-block, (2cp - 1) / cp of the
    balanced rank's work in all; the others skip the steps whose K/V come from a later rank."""
    cp = np.asarray(cp, dtype=np.float64)
    diag_l = S / cp
    share = 1.0 / cp
    n_off = np.maximum(cp - 1, 1.0)
    # balanced: the off-diagonal calls share (1 - 1/cp) of the causal FLOPs (1/cp each), read at
    # the geometric-mean length of their S/cp x S/(2cp) shape; unbalanced: 2/cp each at S/cp
    off_l = S / (cp * math.sqrt(2.0)) if balanced else diag_l
    off_share = (1 - share) / n_off if balanced else 2.0 * share
    k_b = constants()["attention"]["backward_flop_factor"]

    def eff(length: Any, **kw: Any) -> Any:
        return attention_efficiency(gpu, length, kind=kind, head_dim=head_dim, **kw)

    d_f = flops_fwd * share / eff(diag_l) / peak16
    o_f = flops_fwd * off_share / eff(off_l, causal=False) / peak16
    d_b = k_b * flops_fwd * share / eff(diag_l, backward=True) / peak16
    o_b = k_b * flops_fwd * off_share / eff(off_l, causal=False, backward=True) / peak16
    return d_f, o_f, d_b, o_b


def attention_core_time(flops_fwd: Any, S: float, cp: Any, peak16: float,
                        gpu: GPUSpec, kind: str = "flash",
                        head_dim: float = 128.0) -> tuple[Any, Any]:
    """(forward, backward) seconds of the fused attention calls of one layer on one rank: the
    diagonal call and the cp - 1 off-diagonal ones of :func:`cp_blocks`."""
    d_f, o_f, d_b, o_b = cp_blocks(flops_fwd, S, cp, peak16, gpu, kind, head_dim)
    n_off = np.asarray(cp, dtype=np.float64) - 1
    return d_f + n_off * o_f, d_b + n_off * o_b


@dataclass(frozen=True)
class AttentionTerms:
    """Seconds per layer and micro-batch on one rank, forward and backward."""

    in_proj_f: Any  # q, k, v (or MLA) input projections
    in_proj_b: Any
    out_proj_f: Any  # output projection
    out_proj_b: Any
    core_f: Any  # the attention kernel(s), with the ring-attention merges under CP
    core_b: Any
    # under CP: the first (diagonal) call and one of the cp - 1 others, forward and backward
    # (what each ring step's K/V transfer runs beside); unfused attention: the whole core
    blk_f: tuple[Any, Any] = (0.0, 0.0)
    blk_b: tuple[Any, Any] = (0.0, 0.0)

    @property
    def proj_f(self) -> Any:
        return self.in_proj_f + self.out_proj_f

    @property
    def proj_b(self) -> Any:
        return self.in_proj_b + self.out_proj_b


def sdpa_kv_width(c: Candidates) -> Any:
    """Per-token width of K and V (together) as the attention call receives them: the model's
    KV heads, or, where the framework repeats them to every query head before the call
    (frameworks.toml cp_kv_heads = query: torchtitan's repeat_kv), the query heads'."""
    if profile_value(c.job, "cp_kv_heads", "kv") == "query" and not c.m.kv_lora_rank:
        return c.ms.qk_dim + c.ms.v_dim
    return c.ms.kv_dim


def cp_merge_time(c: Candidates) -> tuple[Any, Any]:
    """(forward, backward) seconds of the memory-bound work around each of the cp - 1 extra CP
    calls of one layer: merging the partial output into the running one (online softmax) and,
    backward, accumulating dq, dk, dv. Bytes per element from the framework profile
    (frameworks.toml cp_merge_bytes: per output element and per K/V element forward, per dq
    and per dk/dv element backward), else planner.toml [attention] cp_merge_bytes (16-bit:
    read the partial, read and write the accumulator) on the output and on dq, dk, dv. Under
    torch.compile (kernels fused) a profile's cp_merge_bytes_compiled replaces them: the traced
    loop's elementwise ops fused by the compiler, its unused copies dropped."""
    ms, tp = c.ms, c.tp
    mb = None
    if getattr(c.job, "kernels", None) == "fused":
        mb = profile_value(c.job, "cp_merge_bytes_compiled", None)
    if mb is None:
        mb = profile_value(c.job, "cp_merge_bytes", None)
    if mb is None:
        base = float(constants()["attention"]["cp_merge_bytes"])
        mb = {"fwd_out": base, "fwd_kv": 0.0, "bwd_q": base, "bwd_kv": base}
    kv_w = sdpa_kv_width(c)
    tok = c.T / tp
    m_f = tok * (mb["fwd_out"] * ms.v_dim + mb["fwd_kv"] * kv_w) / c.hbm
    m_b = tok * (mb["bwd_q"] * ms.qk_dim + mb["bwd_kv"] * kv_w) / c.hbm
    return m_f, m_b


def _fused_core(c: Candidates) -> tuple[Any, Any, Any, Any]:
    """FlashAttention-class kernel: causal half executed, backward backward_flop_factor x the
    forward; under CP each of the cp - 1 extra calls merges its partial output into the running
    result forward and accumulates dq, dk, dv backward (online-softmax merge)."""
    ms, S, cp, tp = c.ms, c.S, c.cp, c.tp
    core_flops = 2 * c.b * (S / cp) * S * (ms.qk_dim + ms.v_dim) / tp * 0.5
    if profile_value(c.job, "cp_exchange", "ring") == "all_to_all":
        # Ulysses: each rank runs the whole sequence's causal call on cp times fewer heads
        cp = np.ones_like(cp)
    # the profile's causal load balance (frameworks.toml cp_load_balance; head-tail by default)
    d_f, o_f, d_b, o_b = cp_blocks(core_flops, S, cp, c.peak16, c.gpu, c.job.attention,
                                   ms.qk_dim / c.m.n_heads,
                                   bool(profile_value(c.job, "cp_load_balance", True)))
    m_f, m_b = cp_merge_time(c)
    o_f, o_b = o_f + m_f, o_b + m_b
    return d_f + (cp - 1) * o_f, d_b + (cp - 1) * o_b, (d_f, o_f), (d_b, o_b)


def _unfused_core(c: Candidates) -> tuple[Any, Any]:
    """Unfused: two batched GEMMs per head over the whole s x s score matrix (their own roofline
    pays for writing scores and reading probabilities), plus the fused scale-mask-softmax and
    dropout passes over the scores in HBM, at the rate those kernels were measured to reach
    (planner.toml [nongemm] unfused_score_hbm_efficiency of the datasheet bandwidth:
    Korthikanti et al. 2022 Table 4), not the memory-bound kernels' assumed [gemm]
    hbm_efficiency."""
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
    rate = c.gpu.hbm_bytes_per_s * float(ng["unfused_score_hbm_efficiency"])
    return qk_f + av_f + scores * per_f / rate, qk_b + av_b + scores * per_b / rate


def attention_terms(c: Candidates) -> AttentionTerms:
    """The attention block's GEMMs and core for every candidate."""
    af1, ab1 = gemm3(c, c.T, c.ms.attn_in_n / c.tp, c.h)
    af2, ab2 = gemm3(c, c.T, c.h, c.ms.attn_out_k / c.tp)
    if c.job.attention in FUSED_ATTENTION:
        core_f, core_b, blk_f, blk_b = _fused_core(c)
    else:
        core_f, core_b = _unfused_core(c)
        n = np.maximum(c.cp, 1.0)
        blk_f, blk_b = (core_f / n, core_f / n), (core_b / n, core_b / n)
    return AttentionTerms(af1, ab1, af2, ab2, core_f, core_b, blk_f, blk_b)
