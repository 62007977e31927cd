"""The candidate layouts of one evaluation: layout keys as float arrays, job and GPU scalars."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ...specs import GPUSpec, ModelSpec, dtype
from .config import FUSED_ATTENTION, STAGE_COLS, constants
from .shapes import ModelShapes, model_shapes

if TYPE_CHECKING:
    from ..planner import Cluster, Job


@dataclass(frozen=True)
class Candidates:
    """Every candidate layout of one job on one cluster, one array entry per layout."""

    job: Job
    cl: Cluster
    ms: ModelShapes
    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray  # expert tensor parallelism (1 or tp)
    zero: np.ndarray
    vpp: np.ndarray
    rc: np.ndarray  # the recompute mode: index into memory.PLAN_RECOMPUTE (none, sel, full, op)
    b: np.ndarray  # sequences per micro-batch
    mb: np.ndarray  # micro-batches per step per pipeline
    S: float  # sequence length
    h: float  # hidden width
    e_a: float  # bytes per activation element (16 bits in bf16 and fp8 training alike)
    peak: float  # dense peak FLOP/s of the training precision
    peak16: float  # dense bf16 peak
    e_mm: float  # bytes per GEMM operand element of the training precision
    hbm: float  # HBM bytes/s that memory-bound kernels reach
    T: np.ndarray  # tokens of one micro-batch on one rank (b S / cp)
    sp_div: np.ndarray  # sequence-parallel split of norm and residual work (tp where tp > 1)
    # a stage split the layout fixes (--layout stages=...): layers on the first, middle and last
    # stage and the middle stage's index (planner.STAGE_COLS); None = the planner's own split
    fixed_split: tuple[np.ndarray, ...] | None = None
    rc_mods: Any = 0  # selective: module bits (layout.RECOMPUTE_MODULES; 0 = core_attn)
    rc_layers: Any = 0  # full: layers per model chunk recomputed (0 = all)
    # the share of a layer's forward full recompute re-runs, where given: the step model prices
    # a block-recompute layout's layers once recomputed (1) and once not (0) (model.evaluate)
    rc_share: Any = None

    def recomputes(self, module: str) -> Any:
        """Where the selective policy recomputes ``module`` (layout.RECOMPUTE_MODULES)."""
        from ..layout import RECOMPUTE_MODULES

        bit = (np.asarray(self.rc_mods).astype(np.int64) >> RECOMPUTE_MODULES.index(module)) & 1
        sel = self.rc == 1
        if module == "core_attn":  # Megatron-Core's default module list
            return sel & ((bit == 1) | (np.asarray(self.rc_mods) == 0))
        return sel & (bit == 1)

    @cached_property
    def offload(self) -> Any:
        """Layers whose activations go to the host (the profile's recipe for this model, GPU
        and precision, frameworks.toml activation_offload_recipes), where the layout runs one
        stage without recompute and the GPU states its host link; 0 elsewhere."""
        from .config import offload_layers

        n = offload_layers(self.job, self.gpu.id)
        if not n or not self.gpu.interconnect.get("host_bytes_per_s_per_direction"):
            return np.zeros_like(self.pp, dtype=np.float64)
        return np.where((self.pp == 1) & (self.rc == 0), float(n), 0.0)

    @property
    def block_rows(self) -> Any:
        """Rows with block recompute (recompute=full with recompute_layers = N > 0)."""
        return (self.rc == 2) & (np.asarray(self.rc_layers, dtype=np.float64) > 0)

    def full_share_of(self, n_stage: Any) -> Any:
        """Share of a stage's ``n_stage`` layers full recompute re-runs: 1 (all), 0 without it,
        and with recompute_layers = N (Megatron-Core's block method: each model chunk
        checkpoints its first N layers, a chunk with fewer recomputes all of them,
        TransformerBlock._checkpointed_forward at core_v0.16.1) the share the memory model keeps
        for that stage (memory.block_recompute_share: min(N vpp, n) / n)."""
        n = np.asarray(self.rc_layers, dtype=np.float64)
        if not np.any(self.block_rows):
            return np.where(self.rc == 2, 1.0, 0.0)
        from ..memory import block_recompute_share

        share = block_recompute_share(n, self.vpp, n_stage)
        return np.where(self.rc == 2, np.where(n > 0, share, 1.0), 0.0)

    @cached_property
    def full_share(self) -> Any:
        """The share of the layers full recompute re-runs that a layer's terms are priced at:
        ``rc_share`` where given, else :meth:`full_share_of` the split's largest stage (the
        split with a decoder layer in the last chunk where MTP gives two; the whole model at
        pp 1). The step model prices each stage of a block-recompute layout from its own
        count (pipeline.stage_layers; the traffic counts read that stage's share,
        StageTerms.rc_share); this value is the one the layer terms (through ``rc_share``)
        and the recomputed FLOP count read. The EP-overlap refusal reads the granularity
        (rc = 2), not this share."""
        if self.rc_share is not None:
            return self.rc_share
        if not np.any(self.block_rows):
            return np.where(self.rc == 2, 1.0, 0.0)
        from .pipeline import split

        nf, nm, _, nl = split(self, 1)
        n_st = np.where(self.one, float(self.m.n_layers), np.maximum(np.maximum(nf, nm), nl))
        return self.full_share_of(n_st)

    @property
    def m(self) -> ModelSpec:
        return self.job.model

    @property
    def gpu(self) -> GPUSpec:
        return self.cl.gpu

    @property
    def dom(self) -> int:
        return self.cl.nvlink_domain

    @property
    def fp8(self) -> bool:
        return self.job.precision == "fp8"

    @cached_property
    def fp8_scaling(self) -> tuple[str, str]:
        """(recipe, source) of the fp8 scaling (delayed, current, blockwise, mxfp8): the job's
        --fp8-recipe, else the framework profile's for this model on this GPU."""
        from .config import fp8_scaling

        return fp8_scaling(self.job, self.gpu.id)

    @cached_property
    def fp8_rate(self) -> float:
        """The fp8 GEMMs' rate over the per-tensor kernel's under the recipe (1 in bf16)."""
        if not self.fp8:
            return 1.0
        from .gemm import fp8_scaling_rate

        return fp8_scaling_rate(self.gpu.arch, self.fp8_scaling[0])

    @cached_property
    def fp8_block_kernel(self) -> str:
        """The framework's own block-scaled fp8 GEMM kernel (frameworks.toml fp8_block_gemm,
        e.g. DeepGEMM for deepseek-hai-llm) where the run is fp8 with block scaling; ""
        otherwise (Transformer Engine's cuBLASLt block GEMM, fp8_rate)."""
        if not self.fp8 or self.fp8_scaling[0] != "blockwise":
            return ""
        from .config import profile_value

        return str(profile_value(self.job, "fp8_block_gemm", "") or "")

    def fp8_rate_at(self, K: Any) -> Any:
        """The fp8 GEMMs' rate over the per-tensor kernel's at reduction length ``K``: the
        framework's own block kernel's measured rate by K where it has one, else fp8_rate."""
        if not self.fp8_block_kernel:
            return self.fp8_rate
        from .gemm import block_gemm_rate

        return block_gemm_rate(self.fp8_block_kernel, self.gpu.arch, K)

    @property
    def one(self) -> np.ndarray:
        """Layouts without pipeline parallelism."""
        return self.pp == 1


def candidates(job: Job, cl: Cluster, cols: dict[str, Any]) -> Candidates:
    """The candidate arrays of ``cols`` (the columns of a layout grid)."""
    gpu = cl.gpu
    if job.attention in FUSED_ATTENTION:  # the kernel's curve exists for this GPU (or BadInput)
        from .attention import curve_for

        curve_for(job.attention, gpu)
    f = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    tp = f["tp"]
    S = float(job.seq_len)
    T = f["micro_batch"] * S / f["cp"]
    split = (tuple(np.broadcast_to(f[k], tp.shape) for k in STAGE_COLS)
             if STAGE_COLS[0] in f else None)
    from ..layout import decode_recompute

    mode, mods, n_rc = decode_recompute(np.asarray(cols["rc"], dtype=np.int64))
    return Candidates(
        job=job, cl=cl, ms=model_shapes(job.model), tp=tp, pp=f["pp"], dp=f["dp"], cp=f["cp"],
        ep=f["ep"], etp=f.get("etp", tp), zero=f["zero"], vpp=f["vpp"],
        rc=mode.astype(np.float64), rc_mods=mods, rc_layers=n_rc.astype(np.float64),
        b=f["micro_batch"], mb=f["microbatches"], S=S, h=float(job.model.hidden), e_a=2.0,
        peak=gpu.peak_flop_per_s(job.precision), peak16=gpu.peak_flop_per_s("bf16"),
        e_mm=dtype(job.precision).bytes,
        hbm=gpu.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"], T=T,
        sp_div=np.where(tp > 1, tp, 1.0), fixed_split=split)


_SMALL_INT = 1 << 20  # integral columns below this are their own codes (no sort)
_DENSE_CODES = 1 << 22  # combined code spaces up to this are de-duplicated by counting


_HASH_BITS = 16  # buckets of the hashed de-duplication of other float columns (2^16)
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's odd multiplier (2^64 / phi)


def _hashed_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_codes` of a float64 column in linear time, without the sort of ``np.unique``: each
    entry goes to a bucket by a multiplicative hash of its bits, one entry stands for each bucket,
    and the answer is taken only where every entry equals its bucket's (no two values share a
    bucket) and the bucket values are distinct (0.0 and -0.0 are two bit patterns of one value);
    None otherwise (and for NaN, which equals nothing), for ``np.unique`` to answer."""
    if x.dtype != np.float64 or x.size < 1 << 10:
        return None
    x = np.ascontiguousarray(x)
    h = ((x.view(np.uint64) * _HASH_MUL) >> np.uint64(64 - _HASH_BITS)).astype(np.intp)
    first = np.zeros(1 << _HASH_BITS, dtype=np.intp)
    first[h] = np.arange(x.size)  # some entry of each bucket used (which one does not matter)
    if not np.array_equal(x[first[h]], x):
        return None
    used = np.flatnonzero(np.bincount(h, minlength=1 << _HASH_BITS))
    order = np.argsort(x[first[used]])
    vals = x[first[used[order]]]
    if not np.all(vals[1:] > vals[:-1]):
        return None
    rank = np.empty(1 << _HASH_BITS, dtype=np.intp)
    rank[used[order]] = np.arange(used.size)
    return vals, rank[h]


def _codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, the index of each entry among them) of one column: what
    ``np.unique(x, return_inverse=True)`` returns."""
    if x.size and x.min() >= 0 and x.max() < _SMALL_INT and np.array_equal(x, np.floor(x)):
        k = x.astype(np.int64)
        seen = np.bincount(k)
        vals = np.flatnonzero(seen)
        rank = np.cumsum(seen > 0) - 1
        return vals.astype(x.dtype), rank[k]
    hashed = _hashed_codes(x)
    if hashed is not None:
        return hashed
    vals, inv = np.unique(x, return_inverse=True)
    return vals, inv.ravel()


def unique_rows(cols: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The distinct rows of equal-length columns in lexicographic order and each row's index
    among them: what ``np.unique(np.stack(cols, 1), axis=0, return_inverse=True)`` returns, in
    one-dimensional passes (the row-wise sort of that call is ~100x slower on a 10^6 grid)."""
    vals, codes = zip(*(_codes(x) for x in cols), strict=True)
    key = codes[0]
    for v, k in zip(vals[1:], codes[1:], strict=True):
        key = key * len(v) + k
    space = math.prod(len(v) for v in vals)
    if space >= 1 << 62:  # codes would overflow int64
        uq, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        return tuple(uq.T), inv.ravel()
    if space <= _DENSE_CODES:
        seen = np.bincount(key, minlength=space) > 0
        ukey = np.flatnonzero(seen)
        inv = (np.cumsum(seen) - 1)[key]
    else:
        ukey, inv = np.unique(key, return_inverse=True)
        inv = inv.ravel()
    rows = []
    for v in reversed(vals):
        rows.append(v[ukey % len(v)])
        ukey = ukey // len(v)
    return tuple(reversed(rows)), inv
