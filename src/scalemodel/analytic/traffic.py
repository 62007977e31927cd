"""Traffic per parallelism strategy, as the step model prices it: which collective, the bytes
each GPU sends, calls per step, the tier, seconds with nothing hidden and seconds left exposed.

One implementation for every reader: ``plan train --json`` ``traffic``, ``comm traffic``, the
``parallelism-traffic`` and ``fabric-map`` answers and the drills all read :func:`step_traffic`
on an analytic/layout.py TrainLayout priced by the planner's step model (analytic/step/), so the
same layout gives the same rows everywhere. :func:`layout_traffic` builds the job and the
cluster for a layout the way ``comm traffic`` does (the default framework profile, the GPU's own
links) and prices it.

Ranks are numbered as Megatron-LM does, TP fastest, then CP, then DP, then PP; a group's tier
follows from how many of its members share one NVLink domain (analytic/step/comm.py
``ranks_per_node``). Bytes are what one GPU sends ((n - 1) / n of a ring collective's buffer per
call), counted over the slowest pipeline stage's layers, recompute included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import BadInput

# the GPU whose scale-up link a fabric names, where an answer gives a link and no GPU
GPU_OF_LINK = {"nvlink3": "a100-sxm-80gb", "nvlink4": "h100-sxm", "nvlink5": "b200"}


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
    from .step.config import TP_FWD_COLLECTIVES, profile_value, tp_bwd_collectives
    from .step.model import tp_share

    lay, v = row.layout, row.values
    cols = layout_columns(job, cl, [lay])
    c = candidates(job, cl, cols)
    cm = layer_comm(c, attention_terms(c))

    def one(x: Any) -> float:
        return float(np.asarray(x, dtype=np.float64).ravel()[0])

    n = one(v.n_first if lay.pp == 1 else slowest_stage_layers(v))
    mb, rc, dom = one(c.mb), lay.rc, c.dom
    # share of the slowest stage's layers full recompute re-runs (1, or block recompute's
    # min(N vpp, n) / n of its own n layers, as the step model prices that stage)
    full = one(c.full_share_of(float(job.model.n_layers) if lay.pp == 1 else n))
    moe_rc = one(c.recomputes("moe"))  # the selective "moe" module dispatches again
    out: list[StepTraffic] = []

    def add(name: str, coll: str, size: float, rpn: Any, nbytes: Any, calls: float, raw: Any,
            exposed: Any, what: str) -> None:
        if size > 1 and calls > 0:
            out.append(StepTraffic(name, coll, _tier(one(rpn), size), int(size), one(nbytes),
                                   float(calls), one(raw), one(exposed), what))

    tp, cp, ep, pp = lay.tp, lay.cp, lay.ep, lay.pp
    share = one(tp_share(c, cm))
    sp = bool(profile_value(job, "sequence_parallel", True))
    add("TP", "all-gather + reduce-scatter (sequence parallel)" if sp else
        "all-reduce (no sequence parallelism)", tp, ranks_per_node(1, tp, dom),
        v.tp_bytes, mb * n * share * (TP_FWD_COLLECTIVES * (1 + full + 0.5 * (rc == 3))
                                      + tp_bwd_collectives(job)),
        v.tp_raw_s, v.tp_s, ("per layer: 2 all-gathers + 2 reduce-scatters forward, 6 backward "
                             "(the weight-gradient inputs re-gathered)" if sp else
                             "per layer: 2 all-reduces forward, 2 backward (each counted as a "
                             "reduce-scatter + an all-gather)")
        + ", the forward ones again under recompute")
    cp_raw = mb * n * (one(cm.cp_f_raw) * (1 + full) + one(cm.cp_b_raw))
    add("CP", "send-recv (ring)", cp, ranks_per_node(tp, cp, dom), v.cp_bytes,
        mb * n * 3 * (cp - 1), cp_raw, v.cp_s,
        "K and V blocks passed around the ring (cp - 1 hops forward, K, V and their gradients "
        "backward), behind the attention of the block in hand")
    if job.model.is_moe:
        ep_raw = mb * n * (one(cm.ep_f_raw) * (1 + full + moe_rc) + one(cm.ep_b_raw))
        add("EP", "all-to-all" + (" + expert-TP all-gather" if lay.expert_tp > 1 else ""), ep,
            ranks_per_node(ep_stride(c), ep, dom), v.ep_bytes, mb * n * (4 + 2 * (full + moe_rc)),
            ep_raw,
            v.ep_s, "tokens dispatched to their experts and combined back, forward and backward")
    add("PP", "send-recv", pp, ranks_per_node(tp * cp * lay.dp, pp, dom), v.pp_bytes,
        2 * lay.vpp * mb, v.pp_raw_s, v.pp_s,
        "activations forward and their gradients backward at each stage boundary, per "
        "micro-batch (seconds: the 2 (v m + p - 1) crossings on the critical path; exposed: "
        "those the framework's P2P overlap leaves, frameworks.toml pp_p2p_overlap)")
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


def slowest_stage_layers(v: Any) -> float:
    """Layers on the slowest stage (the one the step model prices)."""
    which = int(v.slow_stage)
    return float((v.n_first, v.n_mid, v.n_last)[which])


def traffic_json(rows: tuple[StepTraffic, ...]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in rows]


@dataclass(frozen=True)
class LayoutTraffic:
    """One layout priced by the step model and its traffic rows, with everything that set them
    (the job, the cluster, the framework profile)."""

    model: str
    layout: Any  # analytic/layout.py TrainLayout
    framework: Any  # specs/frameworks.py Framework
    job: Any  # planner Job
    cluster: Any  # planner Cluster
    row: Any  # planner PlanRow
    rows: tuple[StepTraffic, ...]

    @property
    def exposed_s(self) -> float:
        return sum(r.exposed_s for r in self.rows)

    def get(self, name: str) -> StepTraffic | None:
        return next((r for r in self.rows if r.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """``comm traffic --json``: the layout, the job and the rows (``strategies``)."""
        v, lay, job = self.row.values, self.layout, self.job
        return {"model": self.model, "layout": lay.as_dict() | {"gpus": lay.gpus},
                "framework": self.framework.id, "seq_len": job.seq_len,
                "global_batch": job.global_batch_seqs, "microbatches": int(v.microbatches),
                "gpu": self.cluster.gpu.id, "strategies": traffic_json(self.rows),
                "exposed_time_per_step_s": self.exposed_s,
                "step_time_s": float(v.step_time_s)}


def priced(model: str, lay: Any, fw: Any, job: Any, cl: Any) -> LayoutTraffic:
    """Price ``lay`` (a TrainLayout) for ``job`` on ``cl`` and list its traffic."""
    from .planner import evaluate_layout

    row = evaluate_layout(job, cl, lay)
    return LayoutTraffic(model, lay, fw, job, cl, row, step_traffic(job, cl, row))


def layout_traffic(m: Any, lay: Any, *, seq_len: int, global_batch: int, gpu: Any = None,
                   intra: str | None = None, gpus_per_node: int | None = None,
                   nvlink_domain: int | None = None, inter: str | None = None,
                   nics_per_gpu: int | None = None, framework: str | None = None
                   ) -> LayoutTraffic:
    """``m`` (a ModelSpec) trained with ``lay`` on ``lay.gpus`` GPUs: the job from the framework
    profile (the default one where ``framework`` is None, as ``comm traffic``), the cluster from
    ``gpu`` (or the GPU whose scale-up link is ``intra``) with its own NVLink, ``inter`` NICs and
    ``gpus_per_node`` GPUs per NVLink domain."""
    from .planner import make_cluster, make_job

    if gpu is None:
        if intra is not None and intra not in GPU_OF_LINK:
            raise BadInput(f"--intra {intra}: the step model prices a GPU's own scale-up link; "
                           f"choose one of {', '.join(GPU_OF_LINK)} or give --gpu")
        gpu = GPU_OF_LINK.get(intra or "nvlink4")
    from ..specs import get_gpu
    from ..specs.frameworks import job_settings

    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    fw, settings = job_settings(framework, g, model=m.id)  # the recipe's EP overlap too
    job = make_job(m, seq_len=seq_len, global_batch_seqs=global_batch, **settings)
    cl = make_cluster(g, lay.gpus, gpus_per_node=gpus_per_node,
                      nvlink_domain=nvlink_domain or gpus_per_node, inter=inter,
                      nics_per_gpu=nics_per_gpu)
    return priced(m.id, lay, fw, job, cl)
