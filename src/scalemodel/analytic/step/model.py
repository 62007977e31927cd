"""The step model composed: :func:`evaluate` prices every candidate layout from its parts.

The single-layout evaluation (``plan train --layout``) and the search run this same code; a
single layout is a candidate array of one."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .attention import attention_terms
from .candidates import Candidates, candidates
from .comm import (
    LayerComm,
    LayerTime,
    cp_p2p_net_sm_share,
    dedup_buffers,
    dispatch_copies,
    ep_stride,
    layer_comm,
    layer_time,
    ranks_per_node,
)
from .config import TP_FWD_COLLECTIVES, constants, ep_dispatch, tp_bwd_collectives
from .data_parallel import DPTerms, dp_terms, local_params
from .layers import dense_layer, mla_up_share, moe_layer
from .memory_terms import memory_terms, offload_exposed_time
from .optimizer import fsdp_copy_time, grad_accum_time, optimizer_time
from .pipeline import (
    BlockLayers,
    HeadTerms,
    PipelineComm,
    StageTerms,
    bubble,
    head_terms,
    on_slow_stage,
    pipeline_comm,
    slowest_stage,
)
from .result import StepTerms
from .shapes import model_flops_per_token

if TYPE_CHECKING:
    from ..planner import Cluster, Job


@dataclass(frozen=True)
class StepTimes:
    """The step's seconds on the slowest stage (after the accumulation passes)."""

    step: Any
    lower: Any
    upper: Any
    compute: Any
    attention: Any
    nongemm: Any
    bubble: Any
    overlap: Any
    t_slow: Any
    slow: dict[str, Any]  # compute and exposed tp, cp, ep per micro-batch
    hidden_cp_net: Any = 0.0  # p2p ring transfers over the NICs beside compute, per step
    hidden_ep_net: Any = 0.0  # all-to-all send / receive over the NICs beside compute, per step
    ep_net_slow: Any = 0.0  # the compute seconds they cost (ep_a2a_net_sm_share x the above)


def step_times(c: Candidates, st: StageTerms, head: HeadTerms,
               pc: PipelineComm, dp: DPTerms, t_opt: Any, t_acc: Any) -> StepTimes:
    """m micro-batches through the slowest stage, the bubble, the exposed send/recv and DP
    traffic, the optimizer, and the slowdown of compute that runs beside a hidden collective
    (sigma x the hidden communication, planner.toml overlap.compute_slowdown)."""
    mb, one = c.mb, c.one
    t_slow = st.t_slow + t_acc
    bub = bubble(c, t_slow, st.fwd_mb, st.w_mb)
    slow = {**st.slow, "compute": st.slow["compute"] + t_acc}
    compute = mb * slow["compute"]
    has_head = one | (st.which == 2)
    attn_s = mb * np.where(one, c.ms.n_layers_run * st.ld.attention,
                           st.n_slow * st.ld.attention)
    ng_s = mb * (on_slow_stage(c, st, "nongemm")
                 + np.where(has_head, head.loss_ng, 0.0) + t_acc)
    sigma = float(constants()["overlap"]["compute_slowdown"])
    hidden = (mb * on_slow_stage(c, st, "hidden") + (pc.raw - pc.exposed)
              + np.maximum(0.0, dp.raw - dp.exposed))
    # a p2p ring's transfers over the NICs slow the compute beside them by the SMs their NCCL
    # kernels hold (comm.cp_p2p_net_sm_share), not by the collectives' measured sigma
    hidden_net = mb * on_slow_stage(c, st, "hidden_cp_net")
    # so does an all-to-all dispatcher's grouped send / receive over the NICs
    # (comm.ep_a2a_net_sm_share: one share per layout, the MoE layers' own)
    hidden_ep = mb * on_slow_stage(c, st, "hidden_ep_net")
    ep_slow = st.lm.ep_net_sm * hidden_ep
    t_ov = sigma * hidden + cp_p2p_net_sm_share(c.gpu) * hidden_net + ep_slow
    step = mb * t_slow + bub + pc.exposed + dp.exposed + t_opt + t_ov
    lower = compute + bub * slow["compute"] / np.maximum(t_slow, 1e-30) + t_opt
    # nothing overlapped: every collective in full, and the host time the GPU does not cover
    # (step/host.py) on top of the compute
    upper_mb = (slow["compute"] + on_slow_stage(c, st, "raw_comm")
                + on_slow_stage(c, st, "host"))
    upper = mb * upper_mb + (c.pp - 1) / c.vpp * upper_mb + pc.raw + dp.raw + t_opt
    return StepTimes(step, lower, upper, compute, attn_s, ng_s, bub, t_ov, t_slow, slow,
                     hidden_net, hidden_ep, ep_slow)


def tp_share(c: Candidates, cm: LayerComm) -> Any:
    """Share of a layer's TP collectives the slowest stage runs (an MoE layer with EP keeps the
    attention block's half)."""
    ms = c.ms
    if not c.m.is_moe:
        return 1.0
    return np.where(c.one, (ms.n_dense + ms.n_moe * cm.moe_tp_keep) / ms.n_layers_run,
                    np.where(ms.n_moe > 0, cm.moe_tp_keep, 1.0))


def flops(c: Candidates) -> tuple[float, Any]:
    """(model FLOPs, hardware FLOPs) per step: PaLM's convention, and the same plus what
    recompute repeats (full: a forward of the layers it covers, selective: its modules' forward
    matmuls (core_attn the attention scores), op-level: every second matmul)."""
    m, ms, rc = c.m, c.ms, c.rc
    tokens = float(c.job.tokens_per_step)
    fpt = model_flops_per_token(m, c.job.seq_len)
    L = ms.n_layers_run  # the MTP modules' layers run (and recompute) like the others
    attn_fwd_tok = 2 * L * c.S * (ms.qk_dim + ms.v_dim)
    op_tok = 2 * L * m.hidden * (m.kv_dim + ms.attn_out_k + ms.ffn)
    h, w = m.hidden, ms.up_k + 1  # matmuls per MLP: (gate,) up and down
    shared = 2 * h * w * ms.shared_ffn * ms.n_moe
    moe = (2 * h * w * ms.moe_ffn * m.top_k + 2 * h * (m.n_experts or 0)) * ms.n_moe + shared
    sel_tok = (c.recomputes("core_attn") * attn_fwd_tok
               + c.recomputes("mla_up_proj") * 2 * L * ms.attn_in_n * h
               * (mla_up_share(c) if m.kv_lora_rank else 0.0)
               + c.recomputes("mlp") * 2 * h * w * ms.ffn * ms.n_dense
               + c.recomputes("moe") * moe + c.recomputes("shared_experts") * shared)
    rc_tok = c.full_share * fpt / 3 + np.where(rc == 1, sel_tok, np.where(rc == 3, op_tok, 0.0))
    return fpt * tokens, (fpt + rc_tok) * tokens


def traffic_bytes(c: Candidates, st: StageTerms, cm: LayerComm, pc: PipelineComm,
                  share: Any) -> dict[str, Any]:
    """Bytes each strategy sends per GPU per step (the slowest stage's layers)."""
    mb, rc, n = c.mb, c.rc, st.n_slow
    full = st.rc_share  # of the slowest stage's layers (block recompute: its own count)
    tp = (mb * n * share * (TP_FWD_COLLECTIVES * (1 + full + 0.5 * (rc == 3))
                            + tp_bwd_collectives(c.job)) * (c.tp - 1) / c.tp * cm.act_bytes)
    if c.m.is_moe:
        r_ep = ranks_per_node(ep_stride(c), c.ep, c.dom)
        if ep_dispatch(c.job, c.gpu.id) == "per_destination":
            # the bytes of the tier the EP row names (comm.dedup_buffers): across nodes the
            # rows a rank puts on the network for the other nodes; inside one node its NVLink
            # rows to the other GPUs (the NVLink stage of a spanning group is not counted)
            rdma_buf, n_nodes, nvl_buf = dedup_buffers(c, r_ep)
            one = np.where(n_nodes > 1, rdma_buf * (n_nodes - 1) / n_nodes,
                           nvl_buf * (r_ep - 1) / r_ep)
        else:
            one = ((c.ep - 1) / c.ep * c.e_a * c.T / c.sp_div * c.h
                   * dispatch_copies(c.m, c.ep, r_ep))
        ep = mb * n * (4 + 2 * (full + c.recomputes("moe"))) * one
    else:
        ep = np.zeros_like(mb)
    return {"tp_bytes": tp, "cp_bytes": mb * n * cm.cp_sent, "ep_bytes": ep,
            "pp_bytes": np.where(c.pp > 1, 2 * c.vpp * mb * pc.msg_bytes, 0.0)}


def _layers(c: Candidates, att: Any) -> tuple[LayerComm, LayerTime, LayerTime]:
    """The layer collectives and one dense and one MoE layer of the candidates."""
    cm = layer_comm(c, att)
    Ld = layer_time(c, dense_layer(c, att), cm, False)
    return cm, Ld, (layer_time(c, moe_layer(c, att), cm, True) if c.m.is_moe else Ld)


def _stitch(mask: np.ndarray, a: StepTerms, b: StepTerms) -> StepTerms:
    """The terms of ``a`` on the rows of ``mask`` and of ``b`` on the others."""
    out: dict[str, Any] = {}
    for k in StepTerms.names():
        x, y = getattr(a, k), getattr(b, k)
        if np.ndim(x) == 0 and np.ndim(y) == 0 and x == y:
            out[k] = x
            continue
        v = np.empty(mask.shape, dtype=np.result_type(np.asarray(x), np.asarray(y)))
        v[mask], v[~mask] = x, y
        out[k] = v
    return StepTerms(**out)


def evaluate(job: Job, cl: Cluster, cols: dict[str, Any]) -> StepTerms:
    """Step time, its breakdown, FLOPs and memory for every row of ``cols`` (numpy arrays)."""
    c = candidates(job, cl, cols)
    block = np.asarray(c.block_rows)
    if block.any() and not block.all():
        # the block-recompute rows price their layers twice (below): only those rows do
        return _stitch(block, evaluate(job, cl, {k: v[block] for k, v in cols.items()}),
                       evaluate(job, cl, {k: v[~block] for k, v in cols.items()}))
    att = attention_terms(c)
    if np.any(block):
        # block recompute: each layer priced recomputed and not, each stage taking its own
        # share of them (pipeline.stage_layers); the other rows as their layout runs them
        c_rc = replace(c, rc_share=np.where(block, 1.0, c.full_share))
        c_plain = replace(c, rc_share=np.where(block, 0.0, c.full_share))
        cm, Ld, Lm = _layers(c_rc, att)
        cm0, Ld0, Lm0 = _layers(c_plain, att)
        layers = BlockLayers((Ld, Lm), (Ld0, Lm0), block)
    else:
        cm, Ld, Lm = _layers(c, att)
        cm0, layers = cm, BlockLayers((Ld, Lm))
    head = head_terms(c)
    st = slowest_stage(c, layers, head)
    pc = pipeline_comm(c)
    mem = memory_terms(c, st)
    loc = local_params(c, st)
    dp = dp_terms(c, st, loc)
    t_opt = optimizer_time(c, mem, loc)
    t_acc = grad_accum_time(c, loc, st.t_slow)
    t_copy = fsdp_copy_time(c, loc, st.t_slow)
    t_off = offload_exposed_time(c, st, mem)
    t = step_times(c, st, head, pc, dp, t_opt, t_acc + t_copy + t_off)
    share = tp_share(c, cm)
    # the TP collectives recompute repeats on the slowest stage (block recompute: its share)
    w = np.where(block, st.rc_share, 1.0)
    tp_rc = w * cm.tp_rc + (1 - w) * cm0.tp_rc
    model_flops, hw_flops = flops(c)
    tokens, n, step = float(job.tokens_per_step), float(cl.n_gpus), t.step
    mb = c.mb
    return StepTerms(
        step_time_s=step, lower_s=t.lower, upper_s=t.upper, compute_s=t.compute,
        attention_s=t.attention, nongemm_s=t.nongemm, tp_s=mb * t.slow["tp"],
        cp_s=mb * t.slow["cp"], ep_s=mb * t.slow["ep"], pp_s=pc.exposed, dp_s=dp.exposed,
        bubble_s=t.bubble, overlap_s=t.overlap, optimizer_s=t_opt, grad_acc_s=mb * t_acc,
        fsdp_copy_s=mb * t_copy,
        tp_raw_s=mb * st.n_slow * share * (cm.tp_f + cm.tp_b + tp_rc), pp_raw_s=pc.raw,
        dp_raw_s=dp.raw, t_slow_s=t.t_slow, fwd_mb_s=st.fwd_mb, w_mb_s=st.w_mb,
        bwd_mb_s=st.bwd_mb, slow_stage=st.which, n_first=st.n_first, n_mid=st.n_mid,
        n_last=st.n_last, mid_index=st.mid_index, tokens_per_s=tokens / step,
        tokens_per_s_per_gpu=tokens / step / n, tflops_per_gpu=model_flops / step / n,
        mfu=model_flops / step / n / c.peak, hfu=hw_flops / step / n / c.peak,
        model_flops=np.full_like(step, model_flops), hw_flops=hw_flops,
        memory_per_gpu_bytes=mem.total, mem_params=mem.params, mem_grads=mem.grads,
        mem_optimizer=mem.optimizer, mem_activations=mem.activations,
        capacity_bytes=mem.capacity, fits=mem.fits,
        **traffic_bytes(c, st, cm, pc, share), dp_bytes=dp.bytes,
        tp_intra=cm.tp_intra, cp_intra=cm.cp_intra, pp_intra=pc.intra, dp_intra=dp.intra,
        ep_intra=cm.ep_intra, microbatches=mb, host_s=mb * t.slow["host"],
        offload_s=mb * t_off, cp_net_hidden_s=t.hidden_cp_net,
        ep_net_hidden_s=t.hidden_ep_net, ep_net_slow_s=t.ep_net_slow)
