"""Traffic per parallelism strategy: which collective, bytes per call, calls per step, the tier.

For a model and a layout (TP, PP, DP, CP, EP, ZeRO stage, sequence parallel) this lists, for one
GPU and one optimizer step, every communication the layout implies, then prices each call with
the collectives engine on the tier where its group lands. Ranks are numbered as Megatron-LM does,
TP fastest, then CP, then DP, then PP: a group of k ranks whose members are ``stride`` apart sits
min(k, G / stride) to a node of G GPUs.

Sizes follow the nccl-tests convention of :mod:`scalemodel.analytic.collectives` (all-gather S =
the gathered output, reduce-scatter S = the full input, all-to-all S = the per-rank buffer).
Recomputation, which repeats forward collectives in the backward pass, is not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..specs.model import ModelSpec
from ..specs.sources import cite
from .collectives import Fabric, collective_cost, make_group
from .params import count_params, shard_params

DDP_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP bucket_cap_mb default (pytorch-ddp-docs)


@dataclass(frozen=True)
class TrainLayout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 1  # 0: plain DP all-reduce; 1/2: sharded optimizer (RS + AG); 3: FSDP
    sequence_parallel: bool = True
    seq_len: int = 4096
    micro_batch: int = 1
    global_batch: int = 1024  # sequences per optimizer step
    act_bytes: float = 2.0  # bf16 activations
    grad_bytes: float = 2.0  # bf16 gradients as reduced

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)


def validate(m: ModelSpec, lay: TrainLayout) -> None:
    for name in ("tp", "pp", "dp", "cp", "ep", "seq_len", "micro_batch", "global_batch"):
        if getattr(lay, name) < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be at least 1, got {getattr(lay, name)}")
    if lay.zero not in (0, 1, 2, 3):
        raise BadInput(f"--zero must be 0, 1, 2 or 3, got {lay.zero}")
    if lay.global_batch % (lay.dp * lay.micro_batch):
        raise BadInput(f"--global-batch {lay.global_batch} is not a multiple of dp x micro-batch "
                       f"= {lay.dp * lay.micro_batch}")
    if lay.pp > m.n_layers:
        raise BadInput(f"--pp {lay.pp} exceeds the {m.n_layers} layers of {m.id}")
    if lay.seq_len % lay.cp:
        raise BadInput(f"--seq-len {lay.seq_len} is not divisible by --cp {lay.cp}")
    if lay.ep > 1 and not m.is_moe:
        raise BadInput(f"--ep {lay.ep}: {m.id} is dense (no experts to spread)")
    if lay.ep > 1 and (lay.dp * lay.cp) % lay.ep:
        raise BadInput(f"--ep {lay.ep} must divide dp x cp = {lay.dp * lay.cp} (experts are "
                       "spread over the data-parallel ranks)")
    if m.is_moe and lay.ep > m.n_experts:
        raise BadInput(f"--ep {lay.ep} exceeds the {m.n_experts} experts of {m.id}")


def placement(size: int, stride: int, gpus_per_node: int) -> tuple[int, str]:
    """(ranks of the group per node, tier) for a group of ``size`` ranks ``stride`` apart."""
    if size <= 1:
        return 1, "none"
    per_node = max(1, min(size, gpus_per_node // stride)) if stride < gpus_per_node else 1
    while size % per_node:  # uneven packing: fall back to the largest divisor
        per_node -= 1
    nodes = size // per_node
    if nodes == 1:
        return per_node, "scale-up"
    return per_node, "scale-out" if per_node == 1 else "scale-up+scale-out"


@dataclass(frozen=True)
class Strategy:
    name: str
    collective: str
    group_size: int
    ranks_per_node: int
    tier: str
    bytes_per_call: float
    calls_per_step: int
    overlappable: bool
    algorithm: str
    time_per_call_s: float
    busbw_bytes_per_s: float
    latency_share: float  # fraction of the call time that is latency
    what: str
    source: str

    @property
    def bytes_per_step(self) -> float:
        return self.bytes_per_call * self.calls_per_step

    @property
    def time_per_step_s(self) -> float:
        return self.time_per_call_s * self.calls_per_step

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["bytes_per_step"] = self.bytes_per_step
        d["time_per_step_s"] = self.time_per_step_s
        return d


@dataclass(frozen=True)
class TrafficReport:
    model: str
    layout: TrainLayout
    fabric: str
    strategies: tuple[Strategy, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "layout": {k: getattr(self.layout, k) for k in self.layout.__dataclass_fields__}
            | {"world": self.layout.world, "micro_batches": self.layout.micro_batches},
            "fabric": self.fabric,
            "strategies": [s.to_dict() for s in self.strategies],
            "exposed_time_per_step_s": sum(s.time_per_step_s for s in self.strategies
                                           if not s.overlappable),
            "notes": list(self.notes),
        }


def traffic(m: ModelSpec, lay: TrainLayout, fabric: Fabric) -> TrafficReport:
    """Every communication of one training step, per GPU, priced on its tier."""
    validate(m, lay)
    G = fabric.gpus_per_node
    pc = count_params(m)
    sh = shard_params(pc, lay.tp, lay.pp, lay.ep)
    L_stage = math.ceil(m.n_layers / lay.pp)
    moe_stage = math.ceil(m.n_moe_layers / lay.pp) if m.is_moe else 0
    mb, s_local = lay.micro_batch, lay.seq_len // lay.cp
    nm = lay.micro_batches
    act = mb * s_local * m.hidden * lay.act_bytes  # one hidden-state tensor of a micro-batch
    out: list[Strategy] = []
    notes: list[str] = []

    def add(name: str, coll: str, size: int, stride: int, nbytes: float, calls: int,
            overlap: bool, what: str, src: str) -> None:
        if size <= 1 or calls <= 0 or nbytes <= 0:
            return
        rpn, tier = placement(size, stride, G)
        if tier != "scale-up" and fabric.inter is None:
            raise BadInput(f"{name}: a group of {size} ranks spans nodes of {G} GPUs; give "
                           "--inter LINK")
        unit = size * lay.act_bytes
        nb = math.ceil(nbytes / unit) * unit if coll != "send-recv" else nbytes
        grp = make_group(2 if coll == "send-recv" else size, fabric,
                         1 if (coll == "send-recv" and tier != "scale-up") else
                         (2 if coll == "send-recv" else rpn))
        c = collective_cost(coll, nb, grp, fabric, elem_bytes=lay.act_bytes)
        out.append(Strategy(name, coll, size, rpn, tier, nb, int(calls), overlap, c.algorithm,
                            c.time_s, c.busbw_bytes_per_s,
                            c.latency_s / c.time_s if c.time_s > 0 else 0.0, what, cite(src)))

    # --- data parallel: gradients (and parameters under ZeRO/FSDP) -----------------------
    dp_group = lay.dp * lay.cp  # CP ranks hold the same weights and join the gradient reduce
    dense_grad = sh.dense * lay.grad_bytes
    exp_grad = sh.experts * lay.grad_bytes
    groups = [("DP", dense_grad, dp_group, lay.tp)]
    if exp_grad > 0:
        groups.append(("DP experts", exp_grad, dp_group // lay.ep, lay.tp * lay.cp * lay.ep))
    for label, gbytes, size, stride in groups:
        if lay.zero == 0:
            calls = max(1, math.ceil(gbytes / DDP_BUCKET_BYTES))
            add(f"{label}: gradient all-reduce", "all-reduce", size, stride, gbytes / calls, calls,
                True, "gradients summed over the replicas in buckets during the backward pass",
                "pytorch-ddp-docs")
        elif lay.zero in (1, 2):
            calls = max(1, math.ceil(gbytes / DDP_BUCKET_BYTES))
            add(f"{label}: gradient reduce-scatter (ZeRO-{lay.zero})", "reduce-scatter", size,
                stride, gbytes / calls, calls, True,
                "each rank keeps the summed gradient of its optimizer shard", "rajbhandari-2020-zero")
            add(f"{label}: parameter all-gather (ZeRO-{lay.zero})", "all-gather", size, stride,
                gbytes / calls * lay.act_bytes / lay.grad_bytes, calls, True,
                "updated parameter shards gathered after the optimizer step",
                "rajbhandari-2020-zero")
        else:
            per_layer = gbytes / L_stage
            calls = L_stage * nm
            add(f"{label}: parameter all-gather, forward (FSDP)", "all-gather", size, stride,
                per_layer * lay.act_bytes / lay.grad_bytes, calls, True,
                "each layer's parameters gathered before its forward, per micro-batch",
                "zhao-2023-fsdp")
            add(f"{label}: parameter all-gather, backward (FSDP)", "all-gather", size, stride,
                per_layer * lay.act_bytes / lay.grad_bytes, calls, True,
                "gathered again for the backward (resharded after forward)", "zhao-2023-fsdp")
            add(f"{label}: gradient reduce-scatter (FSDP)", "reduce-scatter", size, stride,
                per_layer, calls, True, "each layer's gradients scattered to their owners",
                "zhao-2023-fsdp")

    # --- tensor parallel ---------------------------------------------------------------------
    if lay.tp > 1:
        calls = 4 * L_stage * nm  # two per layer forward, two backward (Megatron f/g operators)
        if lay.sequence_parallel:
            add("TP: all-gather (sequence parallel)", "all-gather", lay.tp, 1, act, calls, False,
                "before attention and MLP (forward), and their mirror in the backward",
                "korthikanti-2022")
            add("TP: reduce-scatter (sequence parallel)", "reduce-scatter", lay.tp, 1, act, calls,
                False, "after attention and MLP (forward), and their mirror in the backward",
                "korthikanti-2022")
        else:
            add("TP: all-reduce", "all-reduce", lay.tp, 1, act, calls, False,
                "after attention and after the MLP, forward and backward", "shoeybi-2019-megatron")

    # --- context parallel (ring attention) ----------------------------------------------------
    if lay.cp > 1:
        kv_heads_local = max(1, m.n_kv_heads // lay.tp)
        kv = 2 * mb * s_local * kv_heads_local * m.head_dim * lay.act_bytes
        add("CP: K/V ring exchange", "send-recv", lay.cp, lay.tp, kv,
            3 * (lay.cp - 1) * L_stage * nm, True,
            "K and V blocks passed around the ring (cp-1 hops forward; K, V and their gradients "
            "backward), hidden behind the attention of the block in hand", "liu-2023-ring-attention")

    # --- expert parallel -------------------------------------------------------------------
    if lay.ep > 1 and moe_stage:
        tokens = mb * s_local / (lay.tp if lay.sequence_parallel else 1)
        buf = tokens * m.top_k * m.hidden * lay.act_bytes
        add("EP: dispatch + combine all-to-all", "all-to-all", lay.ep, lay.tp * lay.cp, buf,
            4 * moe_stage * nm, False,
            "tokens sent to their top-k experts and back, forward and backward",
            "lepikhin-2020-gshard")

    # --- pipeline parallel -------------------------------------------------------------------
    if lay.pp > 1:
        pbytes = act / (lay.tp if lay.sequence_parallel else 1)
        add("PP: activation send/recv", "send-recv", lay.pp, lay.tp * lay.cp * lay.dp, pbytes,
            2 * nm, True, "activations forward and their gradients backward at each stage "
            "boundary, per micro-batch (1F1B overlaps them with other micro-batches)",
            "narayanan-2021-megatron")
    notes.append("Per GPU and per optimizer step; activation recomputation (which repeats the "
                 "forward TP collectives) is not counted.")
    notes.append(f"{nm} micro-batches of {mb} x {lay.seq_len} tokens per DP rank per step.")
    return TrafficReport(m.id, lay, fabric.describe(), tuple(out), tuple(notes))


# --- the step model's traffic, per strategy (plan train --json traffic, comm traffic) -----------


@dataclass(frozen=True)
class StepTraffic:
    """One strategy's communication in one training step on one GPU, as the step model prices
    it: bytes this GPU sends, collective calls, seconds with nothing hidden (``time_per_step_s``)
    and seconds left on the critical path after overlap (``exposed_s``)."""

    name: str
    collective: str
    tier: str
    group_size: int
    bytes_per_step: float
    calls_per_step: float
    time_per_step_s: float
    exposed_s: float
    what: str

    @property
    def bytes_per_call(self) -> float:
        return self.bytes_per_step / self.calls_per_step if self.calls_per_step else 0.0

    @property
    def overlappable(self) -> bool:
        return self.exposed_s < self.time_per_step_s

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["bytes_per_call"] = self.bytes_per_call
        d["overlappable"] = self.overlappable
        return d


def _tier(rpn: float, size: float) -> str:
    if size <= 1:
        return "none"
    if rpn >= size:
        return "scale-up"
    return "scale-out" if rpn <= 1 else "scale-up+scale-out"


def step_traffic(job: Any, cl: Any, row: Any) -> tuple[StepTraffic, ...]:
    """The traffic rows of one priced layout (``row``: a planner PlanRow). Bytes, raw and exposed
    seconds are the step model's own terms; calls and tiers come from the same candidate
    columns, so ``plan train`` and ``comm traffic`` list the same rows for the same layout."""
    import numpy as np

    from .planner import layout_columns
    from .step.attention import attention_terms
    from .step.candidates import candidates
    from .step.comm import ep_stride, layer_comm, ranks_per_node
    from .step.config import TP_BWD_COLLECTIVES, TP_FWD_COLLECTIVES
    from .step.model import tp_share

    lay, v = row.layout, row.values
    cols = layout_columns(job, cl, [lay])
    c = candidates(job, cl, cols)
    cm = layer_comm(c, attention_terms(c))

    def one(x: Any) -> float:
        return float(np.asarray(x, dtype=np.float64).ravel()[0])

    mb, n, rc, dom = one(c.mb), one(v.n_first if lay.pp == 1 else _n_slow(v)), lay.rc, c.dom
    full = rc == 2
    out: list[StepTraffic] = []

    def add(name: str, coll: str, size: float, rpn: Any, nbytes: Any, calls: float, raw: Any,
            exposed: Any, what: str) -> None:
        if size > 1 and calls > 0:
            out.append(StepTraffic(name, coll, _tier(one(rpn), size), int(size), one(nbytes),
                                   float(calls), one(raw), one(exposed), what))

    tp, cp, ep, pp = lay.tp, lay.cp, lay.ep, lay.pp
    share = one(tp_share(c, cm))
    add("TP", "all-gather + reduce-scatter (sequence parallel)", tp, ranks_per_node(1, tp, dom),
        v.tp_bytes, mb * n * share * (TP_FWD_COLLECTIVES * (1 + full + 0.5 * (rc == 3))
                                      + TP_BWD_COLLECTIVES),
        v.tp_raw_s, v.tp_s, "per layer: 2 all-gathers + 2 reduce-scatters forward, 6 backward "
        "(the weight-gradient inputs re-gathered), the forward ones again under recompute")
    cp_raw = mb * n * (one(cm.cp_f_raw) * (1 + full) + one(cm.cp_b_raw))
    add("CP", "send-recv (ring)", cp, ranks_per_node(tp, cp, dom), v.cp_bytes,
        mb * n * 3 * (cp - 1), cp_raw, v.cp_s,
        "K and V blocks passed around the ring (cp - 1 hops forward, K, V and their gradients "
        "backward), behind the attention of the block in hand")
    if job.model.is_moe:
        ep_raw = mb * n * (one(cm.ep_f_raw) * (1 + full) + one(cm.ep_b_raw))
        add("EP", "all-to-all" + (" + expert-TP all-gather" if lay.expert_tp > 1 else ""), ep,
            ranks_per_node(ep_stride(c), ep, dom), v.ep_bytes, mb * n * (4 + 2 * full), ep_raw,
            v.ep_s, "tokens dispatched to their experts and combined back, forward and backward")
    add("PP", "send-recv", pp, ranks_per_node(tp * cp * lay.dp, pp, dom), v.pp_bytes,
        2 * lay.vpp * mb, v.pp_raw_s, v.pp_s,
        "activations forward and their gradients backward at each stage boundary, per "
        "micro-batch (seconds: the 2 (v m + p - 1) crossings on the critical path)")
    group = lay.dp * cp
    egroup = tp * group / (lay.expert_tp * ep) if job.model.is_moe else 1
    groups = int(group > 1) + int(job.model.is_moe and egroup > 1)
    z = lay.zero
    coll = ("all-reduce", "reduce-scatter + all-gather (ZeRO-1)",
            "reduce-scatter + all-gather (ZeRO-2)", "all-gather + reduce-scatter (FSDP)")[z]
    calls = (1, 2, mb + 1, 3 * mb)[z] * groups
    add("DP", coll, max(group, egroup), ranks_per_node(tp, max(group, 1), dom), v.dp_bytes,
        calls, v.dp_raw_s, v.dp_s,
        "gradients reduced over the replicas (dense over dp x cp, experts over their own "
        "group), parameters gathered under ZeRO; hidden behind backward / forward up to the "
        "last bucket")
    return tuple(out)


def _n_slow(v: Any) -> float:
    """Layers on the slowest stage (the one the step model prices)."""
    which = int(v.slow_stage)
    return float((v.n_first, v.n_mid, v.n_last)[which])


def traffic_json(rows: tuple[StepTraffic, ...]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in rows]
