"""Bytes per GPU of the slowest stage: analytic/memory.py training_bytes (the model that
``scalemodel memory`` shows) with the activations the job's attention kernel and kernel mode
keep (specs/data/saved_tensors.toml), and the DualPipe schedule's extra copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...specs import optimizer
from ...specs.frameworks import edge_chunk_split
from ...specs.saved_tensors import kernel_saves
from ..memory import (
    communicators,
    ddp_bucket_bytes,
    grad_buffer_bytes,
    linear_input_bytes,
    loss_logit_bytes,
    moe_saves,
    offload_layer_bytes,
    pp_extra_warmup,
    pp_fsdp_terms,
    state_zero,
    training_bytes,
    usable_memory,
    with_kernels,
)
from .candidates import Candidates
from .config import profile_value
from .pipeline import StageTerms, dualpipe

E_W = 2.0  # bf16 working weights and gradients (fp8 GEMMs cast on the fly)


@dataclass(frozen=True)
class MemoryTerms:
    """Bytes per GPU."""

    params: Any
    grads: Any
    optimizer: Any
    activations: Any
    total: Any
    capacity: Any  # what a step may fill (HBM less the framework's reserve; memory.usable_memory)
    offload_bytes: Any = 0.0  # what one offloaded layer sends to the host per micro-batch

    @property
    def fits(self) -> Any:
        return self.total <= self.capacity


def memory_terms(c: Candidates, st: StageTerms) -> MemoryTerms:
    job = c.job
    opt = optimizer(job.optimizer_id)
    sm = with_kernels(c.ms.sm, c.m, kernel_saves(job.kernels, job.attention,
                                                 *linear_input_bytes(job.framework_id, c.fp8),
                                                 **moe_saves(job.framework_id, c.fp8)))
    gathered, accum, _, _ = pp_fsdp_terms(job.framework_id)
    # the interleaved warmup's extra chunk comes with the EP all-to-all overlap; a layout whose
    # full recompute the framework refuses with that overlap runs without it (step/comm.py)
    ep_on = np.asarray(bool(job.ep_overlap) and c.m.is_moe)
    if not profile_value(job, "ep_overlap_full_recompute", True):
        ep_on = ep_on & ~(np.asarray(c.full_share) > 0)
    extra_w, _ = pp_extra_warmup(job.framework_id, ep_on)
    # a framework without sequence parallelism (frameworks.toml sequence_parallel = false: the
    # 2021 Megatron-LM) keeps the norms', dropouts' and residuals' activations whole on every TP
    # rank (Korthikanti et al. 2022 eq. 2: s b h (10 + 24 / t) + 5 a s^2 b / t per layer), as
    # `memory --framework` does
    sp = bool(profile_value(job, "sequence_parallel", True))
    # the gradient the framework keeps (frameworks.toml grad_buffer_bytes: Megatron-Core's fp32
    # main_grad with grad_reduce_in_fp32), else the working weights' 16 bits
    e_g = grad_buffer_bytes(job.framework_id)[0] or E_W
    off_b = np.where(c.offload > 0, offload_layer_bytes(sm, c.S / c.cp, c.b, c.tp, sp),
                     0.0)
    mem = training_bytes(sm, tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, ep=c.ep, etp=c.etp,
                         zero=state_zero(job.framework_id, c.zero), rc=c.rc, rc_mods=c.rc_mods,
                         rc_layers=c.rc_layers, sp=sp, micro_batch=c.b, seq_len=c.S, vpp=c.vpp,
                         microbatches=c.mb, e_w=E_W, e_g=e_g, k_opt=opt.bytes_per_param,
                         n_first=st.n_first, n_mid=st.n_mid, mid_index=st.mid_index,
                         n_last=st.n_last, loss_bytes=loss_logit_bytes(job.framework_id, c.tp)[0],
                         pp_gathered=gathered, pp_grad_accum_bytes=accum,
                         pp_extra_warmup=extra_w,
                         # the edge split's own chunks (a split given per stage is not it)
                         edge_chunks=edge_chunk_split(job.framework_id, job.model.id) and c.fixed_split is None,
                         ddp_bucket=ddp_bucket_bytes(job.framework_id)[0],
                         mtp_layers=c.ms.mtp,
                         mtp_proj_params=c.ms.mtp_proj_params,
                         mtp_embedding=bool(profile_value(job, "mtp_embedding_copy", False)),
                         offload_layers=c.offload, offload_bytes=off_b)
    params, acts = np.asarray(mem["params"]), np.asarray(mem["activations"])
    total = np.asarray(mem["total"])
    if job.schedule == "dualpipe":  # two parameter copies, p + 1 micro-batches of activations
        dual = dualpipe(c)
        total = total + np.where(dual, params + acts / np.maximum(c.pp, 1), 0.0)
        params, acts = (np.where(dual, 2 * params, params),
                        np.where(dual, acts * (c.pp + 1) / c.pp, acts))
    n_comm = communicators(c.tp, c.pp, c.dp, c.cp, c.ep)
    cap = np.broadcast_to(usable_memory(c.gpu.hbm_bytes, n_comm, job.framework_id,
                                        job.memory_fraction), np.shape(total)).astype(np.float64)
    return MemoryTerms(params, np.asarray(mem["grads"]), np.asarray(mem["optimizer"]), acts,
                       total, cap, off_b)


def offload_exposed_time(c: Candidates, st: StageTerms, mem: MemoryTerms) -> Any:
    """Seconds per micro-batch the activation offload adds (te-cpu-offload-v2-8): each of the
    N offloaded layers copies its bytes to the host on a side stream after its forward and back
    before its backward, over the GPU's host link (gpus.toml interconnect
    host_bytes_per_s_per_direction, each way); the main stream waits for a layer's copy only
    L // N layers later, so a copy hides under that many layers' forward (the reload under as
    many layers' backward), and what it takes beyond that is exposed."""
    n = np.asarray(c.offload, dtype=np.float64)
    bw = float(c.gpu.interconnect.get("host_bytes_per_s_per_direction", 0.0))
    if not bw or not np.any(n > 0):
        return np.zeros_like(st.t_slow)
    t_copy = np.asarray(mem.offload_bytes) / bw
    window = np.floor(c.m.n_layers / np.maximum(n, 1.0))
    per_layer = np.maximum(st.n_slow, 1.0)
    fwd, bwd = window * st.fwd_mb / per_layer, window * st.bwd_mb / per_layer
    return np.where(n > 0, n * (np.maximum(t_copy - fwd, 0.0) + np.maximum(t_copy - bwd, 0.0)),
                    0.0)
