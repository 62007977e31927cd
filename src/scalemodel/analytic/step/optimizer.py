"""The optimizer step and the weight-gradient accumulation passes, as HBM traffic."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...specs import optimizer
from .candidates import Candidates
from .config import constants, profile_value
from .data_parallel import LocalParams
from .memory_terms import E_W, MemoryTerms


def optimizer_time(c: Candidates, mem: MemoryTerms, loc: LocalParams) -> Any:
    """Read and write the states, read the gradients, write the weights, once per step; fp8
    training also casts (and transposes) the bf16 weights to fp8 once (Transformer Engine).
    A framework whose optimizer runs op by op (frameworks.toml optimizer_step_bytes for this
    optimizer id: Composer's DecoupledAdamW, eight elementwise kernels per tensor) moves that
    many bytes per parameter instead of the one fused pass."""
    opt = optimizer(c.job.optimizer_id)
    p_opt = mem.optimizer / opt.bytes_per_param
    per_param = (profile_value(c.job, "optimizer_step_bytes", None) or {}).get(c.job.optimizer_id)
    step_bytes = 2 * opt.bytes_per_param + 2 * E_W if per_param is None else float(per_param)
    t = p_opt * step_bytes / c.hbm
    if c.fp8:
        t = t + loc.total * float(constants()["nongemm"]["fp8_weight_cast_bytes"]) / c.hbm
    return t


def grad_accum_time(c: Candidates, loc: LocalParams, like: Any) -> Any:
    """Seconds per micro-batch of adding the weight gradients into the fp32 main gradient.

    Megatron's fused wgrad GEMM accumulates into the main gradient itself (0 s); without it every
    micro-batch adds each 16-bit weight gradient in a separate pass (planner.toml [nongemm]
    grad_accum_bytes per local parameter); ZeRO-3 reduce-scatters each micro-batch's gradients
    instead, so it has no such pass."""
    if c.job.grad_accum_fusion:
        return np.zeros_like(like)
    return np.where(c.zero >= 3, 0.0,
                    loc.total * float(constants()["nongemm"]["grad_accum_bytes"]) / c.hbm)
