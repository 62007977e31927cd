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
from .config import fp8_weight_bytes, profile_value
from .pipeline import StageTerms, dualpipe

E_W = 2.0  # bf16 working weights and gradients (fp8 GEMMs cast on the fly, unless the
# framework keeps fp8 primary weights: config.fp8_weight_bytes)


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
        ep_on = ep_on & ~(np.asarray(c.rc) == 2)
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
    # fp8 primary weights where the profile's recipe keeps them (Megatron-Core
    # --fp8-param-gather): Transformer Engine's bytes per layer-matmul weight (config.py)
    e_lin = fp8_weight_bytes(job, c.gpu, c.zero, E_W)[0]
    mem = training_bytes(sm, tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, ep=c.ep, etp=c.etp,
                         zero=state_zero(job.framework_id, c.zero), rc=c.rc, rc_mods=c.rc_mods,
                         rc_layers=c.rc_layers, sp=sp, micro_batch=c.b, seq_len=c.S, vpp=c.vpp,
                         microbatches=c.mb, e_w=E_W, e_g=e_g, k_opt=opt.bytes_per_param,
                         e_w_linear=e_lin,
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
    from .config import fp8_scaling

    prec = fp8_scaling(job, c.gpu.id)[0] if job.precision == "fp8" else job.precision
    cap = np.broadcast_to(usable_memory(c.gpu.hbm_bytes, n_comm, job.framework_id,
                                        job.memory_fraction, model_id=job.model.id,
                                        gpu_id=c.gpu.id, precision=prec),
                          np.shape(total)).astype(np.float64)
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


@dataclass(frozen=True)
class _Split:
    """A stage split as memory_terms reads it (pipeline.StageTerms' split fields)."""

    n_first: Any
    n_mid: Any
    n_last: Any
    mid_index: Any


def fewest_block_layers(job: Any, cl: Any, cols: dict[str, Any]) -> list[np.ndarray]:
    """Per layout of ``cols``, the fewest layers N per model chunk whose full recompute (the
    block method: Megatron-Core TransformerBlock._checkpointed_forward recomputes the first N
    layers of each chunk, core_v0.16.1) makes the layout fit, from 1 to one less than the layers
    per chunk of the split's largest stage (memory.stage_chunk_layers: ceil(n / vpp); all of
    them is recompute=full); 0 where none of these fits.
    One array per stage split the step model may take: under MTP it takes the faster of two
    (pipeline.slowest_stage), so both are returned; one otherwise.

    The bytes are :func:`memory_terms`' (memory.training_bytes with rc_layers = N): each stage's
    activations are share x (full recompute's) + (1 - share) x (no recompute's), share =
    min(N vpp, n) / n of its n layers, and every other term is the same for every N >= 1. So a
    layout's bytes M(N) fall with N and, being the largest of the stages' convex pieces, lie on
    or below the chord from M(1) to M(N_max). The most layers are priced first (where they do
    not fit, no N does), then N = 1, then where the chord meets the capacity (an N that fits)
    and the N below it: where that one does not fit, the crossing is the answer. The few where
    it fits too (M bends) are priced at every N of what is left of their range at once, or by
    bisection where that is more than _SPAN_AT_ONCE rows."""
    from .candidates import candidates
    from .config import STAGE_COLS
    from .pipeline import split
    from .shapes import model_shapes

    n = int(np.asarray(cols["tp"]).size)
    c = candidates(job, cl, cols)

    def split_of(last_min: int) -> tuple[np.ndarray, ...]:
        return tuple(np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)).copy()
                     for x in split(c, last_min))

    first = split_of(1)
    out = [_fewest_block_layers(job, cl, cols, first)]
    if model_shapes(job.model).mtp and STAGE_COLS[0] not in cols:  # as pipeline.slowest_stage
        other = split_of(0)
        differ = np.flatnonzero(np.any([a != b for a, b in zip(first, other, strict=True)],
                                       axis=0))
        second = out[0].copy()
        if differ.size:
            second[differ] = _fewest_block_layers(
                job, cl, {k: np.asarray(v)[differ] for k, v in cols.items()},
                tuple(x[differ] for x in other))
        out.append(second)
    return out


_SPAN_AT_ONCE = 1 << 14  # rows the chord missed priced at every N in one evaluation, up to this


def _fewest_block_layers(job: Any, cl: Any, cols: dict[str, Any],
                         stage_split: tuple[np.ndarray, ...]) -> np.ndarray:
    """:func:`fewest_block_layers` under one stage split (first, middle, middle index, last
    layers per row, as pipeline.split gives them)."""
    from ..layout import recompute_code
    from ..memory import stage_chunk_layers
    from .candidates import candidates

    n = int(np.asarray(cols["tp"]).size)
    nf, nm, mi, nl = stage_split
    # at most: one less than the largest stage's layers per chunk (memory.stage_chunk_layers;
    # from there on every stage re-runs all of its layers, which is recompute=full)
    hi = stage_chunk_layers(cols["pp"], cols["vpp"], job.model.n_layers, nf, nm,
                            nl).astype(np.int64) - 1
    lo = np.ones(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)

    def bytes_at(rows: np.ndarray, layers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bytes per GPU, capacity) of the rows with N = layers (two rows may be one)."""
        sub = {k: np.asarray(v)[rows] for k, v in cols.items()}
        sub["rc"] = recompute_code("full", layers=layers)
        mem = memory_terms(candidates(job, cl, sub), _Split(nf[rows], nm[rows], nl[rows],
                                                            mi[rows]))
        return np.asarray(mem.total, dtype=np.float64), np.asarray(mem.capacity, dtype=np.float64)

    # the most layers first: where even they do not fit, no N does; then N = 1
    act = np.flatnonzero(hi >= 1)
    if not act.size:
        return out
    mh, cap = bytes_at(act, hi[act])
    keep = mh <= cap
    act, mh = act[keep], mh[keep]
    if not act.size:
        return out
    m1, cap = bytes_at(act, lo[act])
    one = m1 <= cap
    out[act[one]] = 1
    act, m1, mh, cap = act[~one], m1[~one], mh[~one], cap[~one]
    if act.size:
        # the chord's crossing, and the N below it
        h = hi[act]
        t = (m1 - cap) / np.maximum(m1 - mh, 1e-300)
        n0 = np.clip(np.ceil(1 + t * (h - 1) - 1e-9).astype(np.int64), 2, h)
        k = act.size
        tot, cap2 = bytes_at(np.concatenate([act, act]), np.concatenate([n0, n0 - 1]))
        fit0, fit1 = tot[:k] <= cap2[:k], tot[k:] <= cap2[k:]
        # M falls with N: n0 fits and n0 - 1 does not -> n0; else the fewest lies in
        # [2, n0 - 1] (n0 - 1 fits) or [n0 + 1, hi] (n0 does not)
        lo[act] = np.where(fit0 & ~fit1, n0, np.where(fit1, 2, n0 + 1))
        hi = hi.copy()
        hi[act] = np.where(fit0 & ~fit1, n0, np.where(fit1, n0 - 1, hi[act]))
    done = lo[act] >= hi[act]
    out[act[done]] = hi[act[done]]
    act = act[~done]
    span = hi[act] - lo[act] + 1
    if act.size and int(span.sum()) <= _SPAN_AT_ONCE:
        # the few the chord missed: every N of their ranges in one evaluation, the first that
        # fits (hi fits)
        rows = np.repeat(act, span)
        start = np.repeat(np.cumsum(span) - span, span)
        layers = np.repeat(lo[act], span) + np.arange(rows.size) - start
        tot, cap = bytes_at(rows, layers)
        first = np.minimum.reduceat(np.where(tot <= cap, layers, np.iinfo(np.int64).max),
                                    np.cumsum(span) - span)
        out[act] = np.minimum(first, hi[act])
        act = act[:0]
    while act.size:  # bisection where the chord missed: the fewest N in [lo, hi]; hi fits
        done = lo[act] >= hi[act]
        out[act[done]] = hi[act[done]]
        act = act[~done]
        if not act.size:
            break
        mid = (lo[act] + hi[act]) // 2
        tot, cap = bytes_at(act, mid)
        ok = tot <= cap
        hi[act[ok]] = mid[ok]
        lo[act[~ok]] = mid[~ok] + 1
    return out
