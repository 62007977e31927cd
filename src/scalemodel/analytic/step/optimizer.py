"""The optimizer step and the weight-gradient accumulation passes, as HBM traffic."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...specs import optimizer
from .candidates import Candidates
from .config import cast_bytes, constants, profile_value
from .data_parallel import LocalParams
from .memory_terms import E_W, MemoryTerms


def optimizer_time(c: Candidates, mem: MemoryTerms, loc: LocalParams) -> Any:
    """Read and write the states, read the gradients, write the weights, once per step; fp8
    training also casts (and transposes) the bf16 weights to fp8 once (Transformer Engine).

    A framework whose optimizer runs op by op (frameworks.toml ``optimizer_step_bytes`` for this
    optimizer id: Composer's DecoupledAdamW, eight elementwise kernels per tensor; torch's
    foreach AdamW with the gradient clipping in torchtitan 2024-12) moves that many bytes per
    local parameter instead of the one fused pass.

    A framework that passes over the whole local gradient buffer once per step (frameworks.toml
    ``unsharded_step_grad_bytes``, per local parameter, unsharded even where the optimizer
    states are: Megatron-Core r0.8's zeroing of the fp32 grad buffer and its NaN-check norm of
    every bucket; DeepSpeed's BF16_Optimizer's norm over the fp32 gradients and their zeroing)
    adds those bytes too."""
    opt = optimizer(c.job.optimizer_id)
    p_opt = mem.optimizer / opt.bytes_per_param
    per_param = (profile_value(c.job, "optimizer_step_bytes", None) or {}).get(c.job.optimizer_id)
    step_bytes = 2 * opt.bytes_per_param + 2 * E_W if per_param is None else float(per_param)
    # passes over the sharded gradients once per step that the framework adds (FSDP1: the cast
    # of the reduced shard to the fp32 parameter dtype, clip_grad_norm_'s norm and scale)
    step_bytes = step_bytes + float(profile_value(c.job, "sharded_grad_pass_bytes", 0.0))
    t = p_opt * step_bytes / c.hbm
    full = float(profile_value(c.job, "unsharded_step_grad_bytes", 0.0))
    if full:
        t = t + loc.total * full / c.hbm
    if c.fp8:
        t = t + loc.total * cast_bytes(c.fp8_scaling[0], weights=True)[0] / c.hbm
    return t


def grad_accum_time(c: Candidates, loc: LocalParams, like: Any) -> Any:
    """Seconds per micro-batch of adding the weight gradients into the fp32 main gradient.

    Megatron's fused wgrad GEMM accumulates into the main gradient itself (0 s); without it every
    micro-batch adds each 16-bit weight gradient in a separate pass (planner.toml [nongemm]
    grad_accum_bytes per local parameter); ZeRO-3 reduce-scatters each micro-batch's gradients
    instead, so it has no such pass. A framework that passes over each micro-batch's unsharded
    gradient before reducing it (frameworks.toml unsharded_grad_pass_bytes: PyTorch FSDP1's
    concatenation of the parameter views' gradients into the flat gradient and its in-place
    pre-division) adds that many bytes per local parameter."""
    t_pass = loc.total * float(profile_value(c.job, "unsharded_grad_pass_bytes", 0.0)) / c.hbm
    if c.job.grad_accum_fusion:
        return np.zeros_like(like) + t_pass
    return np.where(c.zero >= 3, 0.0,
                    loc.total * float(constants()["nongemm"]["grad_accum_bytes"]) / c.hbm) + t_pass


def fsdp_copy_time(c: Candidates, loc: LocalParams, like: Any) -> Any:
    """Seconds per micro-batch of FSDP2's copies on the compute stream (frameworks.toml
    ``fsdp_copy_bytes``; 0 where the profile records none): the copy-out after every parameter
    all-gather (``gather_out`` bytes per unsharded local parameter) and the copy-in before
    every gradient reduce-scatter (``reduce_in``). ZeRO-3 gathers for the forward and again for
    the backward and reduce-scatters once per micro-batch; ZeRO-2 (no reshard after forward)
    gathers once per step and reduce-scatters every micro-batch; under pipeline stages that
    keep their parameters gathered (``pp_reshard_after_forward`` false) both happen once per
    step. Nothing without a sharded group (dp x cp = 1)."""
    fc = profile_value(c.job, "fsdp_copy_bytes")
    if not fc:
        return np.zeros_like(like)
    g, r = float(fc["gather_out"]), float(fc["reduce_in"])
    mb = c.mb
    pp_kept = (c.pp > 1) & (profile_value(c.job, "pp_reshard_after_forward") is False)
    per_mb = np.where(pp_kept, (g + r) / mb,
                      np.where(c.zero >= 3, 2 * g + r,
                               np.where(c.zero == 2, g / mb + r, 0.0)))
    return np.where(c.dp * c.cp > 1, loc.total * per_mb / c.hbm, 0.0) + 0.0 * like
