"""The step model's result: every term of every candidate layout, typed and named."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np


@dataclass(frozen=True)
class StepTerms:
    """One training step of each candidate layout (numpy arrays, one entry per layout; or plain
    numbers for one layout, :meth:`at`). Seconds per step unless named otherwise; bytes per GPU
    per step; FLOPs per step."""

    step_time_s: Any
    lower_s: Any  # compute only (all communication hidden)
    upper_s: Any  # nothing overlapped
    compute_s: Any  # GEMMs, attention, memory-bound kernels, recompute on the slowest stage
    attention_s: Any  # of which attention kernels
    nongemm_s: Any  # of which memory-bound kernels (and the accumulation pass)
    tp_s: Any  # exposed TP/SP collectives
    cp_s: Any  # exposed ring-attention traffic
    ep_s: Any  # exposed MoE all-to-all and expert-TP gather
    pp_s: Any  # exposed pipeline send/recv
    dp_s: Any  # exposed DP gradient / ZeRO traffic
    bubble_s: Any
    overlap_s: Any  # compute slowdown beside hidden collectives
    optimizer_s: Any
    grad_acc_s: Any  # weight-gradient accumulation passes (no accumulation fusion)
    fsdp_copy_s: Any  # FSDP2's parameter copy-out and gradient copy-in on the compute stream
    tp_raw_s: Any
    pp_raw_s: Any
    dp_raw_s: Any
    t_slow_s: Any  # one micro-batch through the slowest stage
    fwd_mb_s: Any  # its forward
    w_mb_s: Any  # its weight-gradient GEMMs
    bwd_mb_s: Any  # its backward
    slow_stage: Any  # 0 first, 1 middle, 2 last
    n_first: Any
    n_mid: Any
    n_last: Any
    mid_index: Any
    tokens_per_s: Any
    tokens_per_s_per_gpu: Any
    tflops_per_gpu: Any  # model FLOP/s per GPU
    mfu: Any
    hfu: Any
    model_flops: Any
    hw_flops: Any
    memory_per_gpu_bytes: Any
    mem_params: Any
    mem_grads: Any
    mem_optimizer: Any
    mem_activations: Any
    capacity_bytes: Any
    fits: Any
    tp_bytes: Any  # traffic per GPU per step on each strategy's tier
    cp_bytes: Any
    ep_bytes: Any
    pp_bytes: Any
    dp_bytes: Any
    tp_intra: Any  # the strategy's group stays inside one NVLink domain
    cp_intra: Any
    pp_intra: Any
    dp_intra: Any
    ep_intra: Any
    microbatches: Any  # micro-batches per step per pipeline
    host_s: Any = 0.0  # host launch time exposed after the MoE dispatchers' host wait
    offload_s: Any = 0.0  # the activation offload's host copies the compute does not hide
    # a p2p ring's CP transfers over the NICs beside compute (slowed by the SMs their NCCL
    # kernels hold, not by the collectives' sigma: in overlap_s)
    cp_net_hidden_s: Any = 0.0
    # an all-to-all dispatcher's send / receive over the NICs beside compute, and the compute
    # seconds it costs (the SMs its NCCL kernel holds x that time: in overlap_s)
    ep_net_hidden_s: Any = 0.0
    ep_net_slow_s: Any = 0.0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def at(self, i: int) -> StepTerms:
        """The terms of candidate ``i`` as plain Python numbers."""
        out = {}
        for k in self.names():
            v = getattr(self, k)
            out[k] = np.asarray(v)[i].item() if np.ndim(v) else v
        out["microbatches"] = int(out["microbatches"])
        return StepTerms(**out)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.names()}
