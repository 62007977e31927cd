"""GEMM time by shape: a per-GPU ceiling measured on large GEMMs (a shape search's best, else one
anchor GEMM), tile padding and wave quantization over the SMs (first principles), the HBM roofline
for thin GEMMs."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from ...errors import BadInput
from ...specs import GPUSpec, dtype, get_gpu
from .candidates import Candidates
from .config import constants


@cache
def tiles(arch: str) -> tuple[int, int, int]:
    """(tile_m, tile_n, tile_k) of an architecture's tensor-core GEMMs (kernels.toml [gemm])."""
    from ...specs.kernels import gemm_entry

    d = gemm_entry(arch).data
    return int(d["tile_m"]), int(d["tile_n"]), int(d["tile_k"])


@cache
def k_overhead(arch: str) -> float:
    """Fixed cost of one output tile (pipeline fill, epilogue), in K elements of its main loop
    (kernels.toml [gemm.<arch>] k_overhead; 0 where none is measured)."""
    from ...specs.kernels import gemm_entry

    return float(gemm_entry(arch).data.get("k_overhead", 0.0))


def _shape_factor(M: Any, N: Any, K: Any, sms: int, batch: Any = 1.0,
                  tile: tuple[int, int, int] = (128, 128, 64), k0: float = 0.0) -> Any:
    """Fraction of the ceiling left after tile padding and wave quantization (first principles).
    A batched GEMM (``batch`` independent products in one launch, as bmm / baddbmm run the
    attention heads) spreads the tiles of every product over the SMs together. ``k0``: each
    tile's fixed cost in K elements (:func:`k_overhead`), so a tile's main loop keeps
    K / (K + k0) of its time, taken relative to the anchor's K (where the ceiling is measured)."""
    tm, tn, tk = tile
    tiles_m, tiles_n = np.ceil(M / tm), np.ceil(N / tn)
    tiles = tiles_m * tiles_n * batch
    waves = np.ceil(tiles / sms)
    wave = tiles / (waves * sms)
    kp = np.ceil(K / tk) * tk
    pad = (M / (tiles_m * tm)) * (N / (tiles_n * tn)) * (K / kp)
    if k0:
        ka = float(constants()["gemm"]["anchor_k"])
        pad = pad * (kp / (kp + k0)) * ((ka + k0) / ka)
    return wave * pad


@cache
def anchor_ceiling() -> float:
    """The shape-free ceiling that makes planner.toml [gemm]'s anchor shape come out at its
    measured efficiency on the anchor GPU: the ceiling of a GPU with no burst measurement."""
    g = constants()["gemm"]
    anchor = get_gpu(g["anchor_gpu"])
    f = float(_shape_factor(np.float64(g["anchor_m"]), np.float64(g["anchor_n"]),
                            np.float64(g["anchor_k"]), anchor.sm_count, tile=tiles(anchor.arch)))
    return g["anchor_efficiency"] / f


def gemm_ceiling(gpu: GPUSpec | None = None) -> float:
    """A GPU's shape-free burst GEMM ceiling, a fraction of its dense bf16 peak: its measured
    ``gemm_burst_efficiency`` (gpus.toml: a shape search's best bf16 matmul, short runs), read as
    the rate of a shape that loses nothing to tiles, waves or per-tile cost; else (or with no GPU)
    :func:`anchor_ceiling`."""
    if gpu is not None and gpu.gemm_burst_efficiency:
        return gpu.gemm_burst_efficiency
    return anchor_ceiling()


PER_TENSOR = ("delayed", "current")  # fp8 recipes whose GEMM is the per-tensor-scaled kernel


@cache
def fp8_scaling_rate(arch: str, scaling: str) -> float:
    """Rate of an fp8 GEMM under ``scaling`` over the per-tensor fp8 GEMM's (kernels.toml
    [fp8_gemm.<arch>]): 1 for delayed and current scaling (one kernel, a per-tensor scale);
    for a block-scaled recipe per_tensor_ms over the block GEMM's own ms, measured GEMM-only
    (``<scaling>_ms``) or with its casts (``<scaling>_autocast_ms``, less the casts at the
    delayed recipe's measured cast time scaled by planner.toml fp8_cast_bytes_<scaling>
    over fp8_cast_bytes_delayed)."""
    from ...specs.frameworks import FP8_SCALINGS
    from ...specs.kernels import FILE, kernels

    if scaling not in FP8_SCALINGS:
        raise BadInput(f"--fp8-recipe must be one of {', '.join(FP8_SCALINGS)}, got {scaling!r}")
    if scaling in PER_TENSOR:
        return 1.0
    e = (kernels().get("fp8_gemm") or {}).get(arch) or {}
    pt = e.get("per_tensor_ms")
    if pt and f"{scaling}_ms" in e:
        return float(pt) / float(e[f"{scaling}_ms"])
    if pt and f"{scaling}_autocast_ms" in e and "delayed_autocast_ms" in e:
        from .config import cast_bytes

        cast = ((float(e["delayed_autocast_ms"]) - float(pt)) * cast_bytes(scaling)[0]
                / cast_bytes("delayed")[0])
        return float(pt) / (float(e[f"{scaling}_autocast_ms"]) - cast)
    has = [k for k in FP8_SCALINGS if k in PER_TENSOR or f"{k}_ms" in e
           or f"{k}_autocast_ms" in e]
    raise BadInput(f"{FILE} [fp8_gemm.{arch or '(none)'}]: no measured {scaling} fp8 GEMM on "
                   f"this architecture; fp8 recipes priced here: {', '.join(has)}")


@cache
def block_gemm_rates(kernel: str, arch: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(K values, rates) of a framework's own block-scaled fp8 GEMM kernel (kernels.toml
    [fp8_block_gemm.<kernel>.<arch>]): at each measured shape with M >= 4096 rows (per group),
    the measured TFLOP/s over the per-tensor fp8 GEMM model's burst TFLOP/s at that shape on
    the measuring GPU (:func:`gemm_time` over the GPU's sustained fraction), averaged per K."""
    from ...specs.kernels import FILE, kernels

    fam = (kernels().get("fp8_block_gemm") or {}).get(kernel) or {}
    e = fam.get(arch)
    if not e:
        raise BadInput(f"{FILE} [fp8_block_gemm.{kernel}.{arch or '(none)'}]: no measured "
                       f"{kernel} fp8 GEMM on this architecture")
    g = get_gpu(e["gpu"])
    peak = g.peak_flop_per_s("fp8")
    rows = [(1.0, *r) for r in e.get("dense", ())] + [tuple(r) for r in
                                                      e.get("grouped_contiguous", ())]
    by_k: dict[float, list[float]] = {}
    for n_g, m, n, k, tf in rows:
        if m < 4096:
            continue
        t = float(gemm_time(np.float64(m), np.float64(n), np.float64(k), g, peak, 1.0,
                            np.float64(n_g), "fp8"))
        model = n_g * 2.0 * m * n * k / t / g.sustained_fraction
        by_k.setdefault(float(k), []).append(tf * 1e12 / model)
    ks = tuple(sorted(by_k))
    return ks, tuple(float(np.mean(by_k[k])) for k in ks)


def block_gemm_rate(kernel: str, arch: str, K: Any) -> Any:
    """A block-scaled kernel's rate over the per-tensor fp8 GEMM model at reduction length
    ``K``: :func:`block_gemm_rates` interpolated in log K (held at the ends)."""
    ks, rs = block_gemm_rates(kernel, arch)
    return np.interp(np.log(np.maximum(np.asarray(K, dtype=np.float64), 1.0)), np.log(ks), rs)


def gemm_time(M: Any, N: Any, K: Any, gpu: GPUSpec, peak: float, elem_bytes: float,
              batch: Any = 1.0, dtype_name: str = "bf16", rate: float = 1.0) -> Any:
    """Seconds for one (M x K) @ (K x N) GEMM, or one launch of ``batch`` of them: compute at the
    shape's efficiency or HBM traffic, whichever is longer (roofline). ``peak`` is the dense
    peak of ``dtype_name``; an fp8 GEMM also takes the GPU's measured fp8/bf16 efficiency ratio,
    and ``rate`` its scaling recipe's rate over the per-tensor kernel (:func:`fp8_scaling_rate`)."""
    g = constants()["gemm"]
    if not gpu.sm_count:
        raise BadInput(f"GPU {gpu.id}: sm_count is missing; the GEMM model (tiles in waves over "
                       "the SMs) needs it: add sm_count = N to the GPU's TOML")
    # the ceiling is the GPU's short-run (burst) fraction of the dense peak; a training step
    # keeps the GPU's sustained share of it, and an fp8 GEMM its measured fp8/bf16 ratio
    # (gpus.toml)
    eff = (gemm_ceiling(gpu) * _shape_factor(M, N, K, gpu.sm_count, batch, tiles(gpu.arch),
                                          k_overhead(gpu.arch))
           * gpu.sustained_fraction
           * gpu.gemm_dtype_factor(dtype_name) * rate)
    t_c = batch * 2.0 * M * N * K / (peak * eff)
    t_m = batch * elem_bytes * (M * K + K * N + M * N) / (gpu.hbm_bytes_per_s
                                                           * g["hbm_efficiency"])
    return np.maximum(t_c, t_m)


def gemm_efficiency(M: Any, N: Any, K: Any, gpu: GPUSpec, dtype_name: str = "bf16",
                    rate: float = 1.0) -> Any:
    """Achieved fraction of the dense peak for one GEMM (the curve docs/planner.md plots);
    ``rate``: an fp8 scaling recipe's rate over the per-tensor kernel."""
    peak = gpu.peak_flop_per_s(dtype_name)
    e = dtype(dtype_name).bytes
    t = gemm_time(M, N, K, gpu, peak, e, dtype_name=dtype_name, rate=rate)
    return 2.0 * M * N * K / (t * peak)


def gemm3(c: Candidates, Mx: Any, Nx: Any, Kx: Any, batch: Any = 1.0) -> tuple[Any, Any]:
    """(forward, backward) seconds of one GEMM in the training precision: backward = dgrad
    (M x N @ N x K) + wgrad (K x M @ M x N); ``batch`` products per launch (batched GEMMs)."""
    p, e, dt, r = c.peak, c.e_mm, c.job.precision, c.fp8_rate_at
    fw = gemm_time(Mx, Nx, Kx, c.gpu, p, e, batch, dt, r(Kx))
    bw = (gemm_time(Mx, Kx, Nx, c.gpu, p, e, batch, dt, r(Nx))
          + gemm_time(Kx, Nx, Mx, c.gpu, p, e, batch, dt, r(Mx)))
    return fw, bw


def gemm3_of(c: Candidates, module: str, Mx: Any, Nx: Any, Kx: Any,
             batch: Any = 1.0) -> tuple[Any, Any]:
    """gemm3 for a module that fp8 training may keep in bf16 (planner.toml [nongemm]
    fp8_bf16_modules: the output head, an MoE router, the attention matmuls)."""
    if module not in set(constants()["nongemm"]["fp8_bf16_modules"]):
        return gemm3(c, Mx, Nx, Kx, batch)
    fw = gemm_time(Mx, Nx, Kx, c.gpu, c.peak16, 2.0, batch)
    bw = (gemm_time(Mx, Kx, Nx, c.gpu, c.peak16, 2.0, batch)
          + gemm_time(Kx, Nx, Mx, c.gpu, c.peak16, 2.0, batch))
    return fw, bw


@cache
def grouped_overhead(arch: str, kernel: str | None = None) -> float:
    """Seconds per expert GEMM launch beyond the shape model (kernels.toml [grouped_gemm]): the
    measured grouped GEMM's time per expert less :func:`gemm_time` of one expert's shape on the
    measured GPU, never below zero. ``kernel`` names one of the benchmark's kernels (its
    ``kernels`` table: the one a serving engine runs); None takes the entry's ``tflops``."""
    from ...specs.kernels import FILE, kernels, resolve

    d = resolve(kernels()["grouped_gemm"], arch, "grouped_gemm").data
    if kernel is None:
        rate = float(d["tflops"])
    else:
        ks = dict(d.get("kernels") or {})
        if kernel not in ks:
            raise BadInput(f"{FILE} [grouped_gemm.{arch}]: no measured rate for kernel "
                           f"{kernel!r}; it has: {', '.join(sorted(ks)) or '(none)'}")
        rate = float(ks[kernel])
    g = get_gpu(d["gpu"])
    M, N, K, E = (float(d[k]) for k in ("m_per_expert", "n", "k", "experts"))
    measured = 2.0 * M * N * K * E / (rate * 1e12) / E
    model = float(gemm_time(M, N, K, g, g.peak_flop_per_s("bf16"), 2.0))
    return max(0.0, measured - model)


def grouped_overhead_at(arch: str, kernel: str | None, rows: Any) -> Any:
    """:func:`grouped_overhead` for an expert GEMM of ``rows`` rows (scalar or array). Where the
    entry says the cost scales with rows (kernels.toml [grouped_gemm] ``rows_scaling = "rows"``,
    from a measurement at a few rows per expert), it is taken in proportion to ``rows`` up to the
    measured ``m_per_expert`` and in full at and beyond it; otherwise in full at any row count.
    The rule is a measurement of its own architecture's kernel: an architecture that borrows
    another's entry keeps the full cost unless its own entry states the rule too (with a source:
    the borrowed cost's kernel family scales so)."""
    from ...specs.kernels import kernels, resolve

    t0 = grouped_overhead(arch, kernel)
    table = kernels()["grouped_gemm"]
    e = resolve(table, arch, "grouped_gemm")
    d = e.data
    rule = d.get("rows_scaling") if e.borrowed_from is None else table[arch].get("rows_scaling")
    if rule != "rows":
        return t0 * np.ones_like(np.asarray(rows, dtype=np.float64))
    m_ref = float(d["m_per_expert"])
    return t0 * np.clip(np.asarray(rows, dtype=np.float64) / m_ref, 0.0, 1.0)


def mlp(c: Candidates, Mx: Any, width: float, count: Any = 1.0,
        split: Any = None) -> tuple[Any, Any]:
    """An MLP's GEMMs (forward, backward), its width split over ``split`` ranks (the tp unless
    given), ``count`` of them (local experts)."""
    k = c.tp if split is None else split
    uf, ub = gemm3(c, Mx, c.ms.up_k * width / k, c.h)
    df, db = gemm3(c, Mx, c.h, width / k)
    return count * (uf + df), count * (ub + db)


def expert_mlp(c: Candidates, Mx: Any, width: float, count: Any, split: Any,
               load: Any = 1.0) -> tuple[Any, Any]:
    """``count`` experts' MLPs as a grouped GEMM runs them: each expert's GEMMs at their shape
    plus the measured per-launch cost at the rows each expert holds (:func:`grouped_overhead_at`,
    the serving iteration's rule) for the 2 forward GEMMs and the 4 backward ones (dgrad and wgrad
    of each). ``load`` scales the GEMMs' time (not the launches)
    to a rank holding that multiple of the mean tokens (the EP straggler, step/imbalance.py),
    at the mean's shape: the tile padding of the straggler's unequal per-expert counts is not
    priced."""
    f, b = mlp(c, Mx, width, count, split)
    t0 = grouped_overhead_at(c.gpu.arch, None, Mx)
    return load * f + 2.0 * count * t0, load * b + 4.0 * count * t0
