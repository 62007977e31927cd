"""Pipeline parallelism: the (uneven) stage split, the slowest stage, the schedule's bubble
(1F1B, interleaved 1F1B, DualPipe) and the activations sent between stages."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..memory import stage_partition, stage_shape
from .candidates import Candidates, unique_rows
from .comm import LayerTime, collective_time, ranks_per_node
from .config import constants, profile_value
from .gemm import gemm3_of
from .shapes import split_extras

PARTS = ("compute", "tp", "cp", "ep", "host")


@dataclass(frozen=True)
class HeadTerms:
    """The output head and the loss per micro-batch (on the last stage)."""

    fwd: Any
    bwd: Any
    loss_ng: Any  # of which the loss's memory-bound passes over the logits


def head_terms(c: Candidates) -> HeadTerms:
    """Output-head GEMMs and the loss over the vocabulary: unfused fp32 passes over every logit
    (planner.toml [nongemm]). Each multi-token-prediction module (model.mtp_layers) passes its
    hidden states through the shared head and a loss of its own once more, after its eh_proj
    (2h -> h, column-parallel like Megatron-Core's MultiTokenPredictionLayer.eh_proj, an fp8
    GEMM in fp8 training); its decoder layer is one more layer of the last stage (split)."""
    ng = constants()["nongemm"]
    n = 1 + c.ms.mtp
    head_f, head_b = gemm3_of(c, "output_head", c.T, c.m.vocab / c.tp, c.h)
    proj_f, proj_b = gemm3_of(c, "mtp_proj", c.T, c.h / c.tp, 2 * c.h)
    logits = c.T * c.m.vocab / c.tp
    fw = n * (head_f + logits * float(ng["loss_fwd_bytes_per_logit"]) / c.hbm) + c.ms.mtp * proj_f
    bw = n * (head_b + logits * float(ng["loss_bwd_bytes_per_logit"]) / c.hbm) + c.ms.mtp * proj_b
    loss = n * logits * float(ng["loss_fwd_bytes_per_logit"]
                              + ng["loss_bwd_bytes_per_logit"]) / c.hbm
    return HeadTerms(fw, bw, loss)


@dataclass(frozen=True)
class StageTerms:
    """The stage split and the slowest stage, per micro-batch."""

    n_first: Any  # layers on the first, each middle and the last stage
    n_mid: Any
    n_last: Any
    mid_index: Any
    use_moe: Any  # the stage is priced as copies of the MoE layer (the heavier kind)
    which: Any  # slowest stage: 0 first, 1 middle, 2 last
    n_slow: Any  # its layers
    slow: dict[str, Any]  # its compute and exposed tp, cp, ep seconds per micro-batch
    t_slow: Any  # one micro-batch through it
    fwd_mb: Any  # of which the forward
    w_mb: Any  # its weight-gradient GEMMs
    ld: LayerTime  # one dense and one MoE layer of the slowest stage, as it runs them (with
    lm: LayerTime  # block recompute: its recomputed and plain layers averaged, stage_layers)
    rc_share: Any  # the share of its layers full recompute re-runs (Candidates.full_share_of)

    @property
    def bwd_mb(self) -> Any:
        return self.t_slow - self.fwd_mb


@dataclass(frozen=True)
class BlockLayers:
    """One dense and one MoE layer (per micro-batch) as the stages run them. Under block
    recompute (recompute_layers = N > 0, ``block`` rows) a stage of n layers recomputes
    min(N vpp, n) of them and runs the rest plainly (Megatron-Core's
    TransformerBlock._checkpointed_forward, block method, at core_v0.16.1: in each model chunk
    layer l is checkpointed when l < N), so ``rc`` holds the layer recomputed and ``plain`` the
    layer not (the run's other settings kept, e.g. the EP overlap it refuses). Elsewhere
    ``plain`` is None and ``rc`` the layout's own layers."""

    rc: tuple[LayerTime, LayerTime]
    plain: tuple[LayerTime, LayerTime] | None = None
    block: Any = False


def mix_layers(a: LayerTime, b: LayerTime, w: Any) -> LayerTime:
    """Field by field w a + (1 - w) b: a stage's mean layer where a share w of its layers runs
    as ``a`` and the rest as ``b`` (every field adds over a stage's layers)."""
    if a is b:
        return a
    return LayerTime(**{f.name: w * getattr(a, f.name) + (1 - w) * getattr(b, f.name)
                        for f in fields(LayerTime)})


def stage_layers(c: Candidates, layers: BlockLayers, n: Any) -> tuple[LayerTime, LayerTime]:
    """The mean dense and MoE layer of a stage of ``n`` layers: under block recompute a share
    Candidates.full_share_of(n) of them recomputed (the share the memory model keeps for the
    stage), the rest plain; the layout's own layers elsewhere."""
    if layers.plain is None:
        return layers.rc
    w = np.where(layers.block, c.full_share_of(n), 1.0)
    return (mix_layers(layers.rc[0], layers.plain[0], w),
            mix_layers(layers.rc[1], layers.plain[1], w))


def _pick_layer(which: Any, first: LayerTime, mid: LayerTime, last: LayerTime) -> LayerTime:
    """The slowest stage's layer, row by row (``which``: 0 first, 1 middle, 2 last)."""
    if first is mid is last:
        return first
    return LayerTime(**{f.name: np.where(which == 0, getattr(first, f.name),
                                         np.where(which == 1, getattr(mid, f.name),
                                                  getattr(last, f.name)))
                        for f in fields(LayerTime)})


def split(c: Candidates, last_min: int = 1) -> tuple[Any, Any, Any, Any]:
    """Layers on the first, middle and last stages and the middle stage's index (uneven split:
    the output head counts as layers), or the split the layout fixes. The last stage's count
    includes the MTP modules' layers (Megatron-Bridge's DeepSeek-V3 layouts put them, "m", on
    the last stage with the loss; DeepSeek-V3 report Sec. 3.2.3 with the output head), and
    ``last_min`` 0 lets its last chunk hold them alone (memory.chunk_partition)."""
    mtp = float(c.ms.mtp)
    if c.fixed_split is not None:
        nf, nm, mi, nl = c.fixed_split
        return nf, nm, mi, nl + mtp
    uniq, inv = unique_rows((c.pp, c.vpp))
    extra = split_extras(c.m, c.job.framework_id)  # 0 where the framework splits evenly only
    last_min = last_min if extra["last_extra"] else 1
    shape = np.array([stage_shape(stage_partition(c.m.n_layers, int(p), vpp=int(v),
                                                  last_extra=extra["last_extra"],
                                                  last_min=last_min,
                                                  edge_chunks=bool(extra.get("edge_chunks"))))
                      for p, v in zip(*uniq, strict=True)], dtype=np.float64)
    nf, nm, mi, nl = (shape[inv, i] for i in range(4))
    return nf, nm, mi, nl + mtp


@dataclass(frozen=True)
class _LayerKinds:
    """What every stage split of one evaluation shares: whether a stage is priced as copies of
    the MoE layer, and per part one layer of that kind and the whole model (pp == 1)."""

    use_m: Any
    big: dict[str, Any]
    whole: dict[str, Any]

    def per_stage(self, c: Candidates, n: Any, part: str) -> Any:
        """A stage's per-micro-batch seconds of one part: ``n`` copies of the heavier layer
        kind, or the whole model where pp == 1."""
        return np.where(c.one, self.whole[part], n * self.big[part])


def _layer_kinds(c: Candidates, Ld: LayerTime, Lm: LayerTime) -> _LayerKinds:
    ms = c.ms
    use_m = (ms.n_moe > 0) & ((ms.n_dense == 0) | (Lm.total >= Ld.total))
    big = {k: np.where(use_m, getattr(Lm, k), getattr(Ld, k)) for k in PARTS}
    whole = {k: ms.n_dense * getattr(Ld, k) + ms.n_moe * getattr(Lm, k) for k in PARTS}
    return _LayerKinds(use_m, big, whole)


def slowest_stage(c: Candidates, layers: BlockLayers, head: HeadTerms) -> StageTerms:
    """A pipeline stage is priced as n copies of its heavier layer kind, judged on the whole
    per-layer time (so every part comes from the same kind), each stage from its own layer
    count (under block recompute its own share recomputed, stage_layers); the slowest stage
    sets the pace. With MTP modules on the last stage, the planner's split is taken with and
    without a decoder layer of its own in the last chunk (both are layouts Megatron-Bridge runs:
    'Et|(tt|)*30mL' at v0.1.0rc3 on H100, '...|tmL' in the v0.4.2 B200 preset), the faster per
    layout."""
    a = _slowest(c, layers, head, split(c, 1))
    if not c.ms.mtp or c.fixed_split is not None:
        return a
    b = _slowest(c, layers, head, split(c, 0))
    take = b.t_slow < a.t_slow

    def pick(f: str) -> Any:
        x, y = getattr(b, f), getattr(a, f)
        if f == "slow":
            return {k: np.where(take, x[k], y[k]) for k in PARTS}
        if isinstance(x, LayerTime):
            return mix_layers(x, y, np.where(take, 1.0, 0.0))
        return np.where(take, x, y)

    return StageTerms(*(pick(f) for f in StageTerms.__dataclass_fields__))


def _slowest(c: Candidates, layers: BlockLayers, head: HeadTerms,
             sp: tuple[Any, Any, Any, Any]) -> StageTerms:
    ms, one = c.ms, c.one
    nf, nm, mi, nl = sp
    n_one = np.where(one, float(c.m.n_layers), nf)  # the whole model's block share at pp 1
    Lf, Lmid, Ll = (stage_layers(c, layers, n) for n in (n_one, nm, nl))
    if Lf is Lmid is Ll:  # no block recompute: every stage runs the same layers
        kf = km = kl = _layer_kinds(c, *Lf)
    else:
        kf, km, kl = (_layer_kinds(c, *L) for L in (Lf, Lmid, Ll))
    first = {k: kf.per_stage(c, nf, k) for k in PARTS}
    last = {k: kl.per_stage(c, nl, k) for k in PARTS}
    mid = {k: np.where(nm > 0, km.per_stage(c, nm, k), 0.0) for k in PARTS}
    last["compute"] = last["compute"] + head.fwd + head.bwd
    first["compute"] = np.where(one, first["compute"] + head.fwd + head.bwd, first["compute"])
    t_first = sum(first[k] for k in PARTS)
    t_last = np.where(one, t_first, sum(last[k] for k in PARTS))
    t_mid = sum(mid[k] for k in PARTS)
    t_slow = np.maximum(np.maximum(t_first, t_last), t_mid)
    which = np.where(t_slow == t_first, 0, np.where(t_slow == t_mid, 1, 2))
    slow = {k: np.where(which == 0, first[k], np.where(which == 1, mid[k], last[k]))
            for k in PARTS}
    n_slow = np.where(which == 0, nf, np.where(which == 1, nm, nl))
    Ld = _pick_layer(which, Lf[0], Lmid[0], Ll[0])
    Lm = _pick_layer(which, Lf[1], Lmid[1], Ll[1])
    use_m = np.where(which == 0, kf.use_m, np.where(which == 1, km.use_m, kl.use_m))
    fwd_mb = np.where(one, ms.n_dense * Ld.fwd + ms.n_moe * Lm.fwd + head.fwd,
                      n_slow * np.where(use_m, Lm.fwd, Ld.fwd))
    w_mb = np.where(one, ms.n_dense * Ld.wgrad + ms.n_moe * Lm.wgrad,
                    n_slow * np.where(use_m, Lm.wgrad, Ld.wgrad))
    rc_share = c.full_share_of(np.where(one, float(c.m.n_layers), n_slow))
    return StageTerms(nf, nm, nl, mi, use_m, which, n_slow, slow, t_slow, fwd_mb, w_mb, Ld, Lm,
                      rc_share)


def on_slow_stage(c: Candidates, st: StageTerms, part: str) -> Any:
    """Per micro-batch seconds of one layer part summed over the slowest stage's layers."""
    Ld, Lm = st.ld, st.lm
    return np.where(c.one, c.ms.n_dense * getattr(Ld, part) + c.ms.n_moe * getattr(Lm, part),
                    st.n_slow * np.where(st.use_moe, getattr(Lm, part), getattr(Ld, part)))


def dualpipe(c: Candidates) -> Any:
    """Layouts the DualPipe schedule runs (it needs pp > 1)."""
    return (c.job.schedule == "dualpipe") & (c.pp > 1)


def bubble(c: Candidates, t_mb: Any, f_mb: Any, w_mb: Any) -> Any:
    """Pipeline bubble: 1F1B (p - 1) / v t_mb (Narayanan 2021); DualPipe
    (p / 2 - 1)(F&B + B - 3 W) with F&B = F + B (the overlapped pair's compute, its
    communication hidden) (DeepSeek-V3 report, Table 2)."""
    b_mb = t_mb - f_mb
    return np.where(dualpipe(c), (c.pp / 2 - 1) * np.maximum(0.0, f_mb + 2 * b_mb - 3 * w_mb),
                    (c.pp - 1) / c.vpp * t_mb)


@dataclass(frozen=True)
class PipelineComm:
    """Send/recv between stages per step on the critical path."""

    msg_bytes: Any  # one activation (sequence-parallel shard)
    raw: Any  # 2 (v m + p - 1) crossings, forward and backward
    exposed: Any
    intra: Any  # the stages share one NVLink domain


def exposed_crossings(c: Candidates) -> Any:
    """Send/recv crossings per direction left on the critical path by the framework's P2P
    overlap (frameworks.toml pp_p2p_overlap), of the v m + p - 1 a step has:

    * "none": all of them (every send/recv is waited on before the next compute: Megatron-LM of
      2021, batched P2P without virtual stages, torch.distributed.pipelining's 1F1B);
    * "interleaved": with virtual stages (v > 1) only the warm-up and flush ones, the steady-state
      sends and receives running beside the other chunk's compute (Megatron-Core
      overlap_p2p_comm): the first stage's min(v m, 2 (p - 1) + (v - 1) p) warm-up micro-batch
      chunks (schedules.py get_num_warmup_microbatches) and the p - 1 of the fill; without
      virtual stages all of them;
    * "all": none (DualPipe: each send/recv beside the paired chunk's compute).

    A hidden send/recv is taken as hidden whole: one activation shard is far shorter than the
    chunk's forward or backward it runs beside (its time still enters the overlap slowdown)."""
    total = c.vpp * c.mb + c.pp - 1
    mode = profile_value(c.job, "pp_p2p_overlap", "none")
    if mode == "all":
        return np.zeros_like(total)
    if mode == "interleaved":
        warm = np.minimum(c.vpp * c.mb, 2 * (c.pp - 1) + (c.vpp - 1) * c.pp)
        return np.where(c.vpp > 1, np.minimum(total, warm + c.pp - 1), total)
    return total


def pipeline_comm(c: Candidates) -> PipelineComm:
    ov = constants()["overlap"]
    intra = c.tp * c.cp * c.dp * c.pp <= c.dom
    msg = c.e_a * c.T * c.h / c.sp_div
    t_p2p = collective_time("send_recv", msg, 2.0, np.where(intra, 2.0, 1.0), c.cl)
    # scatter/gather without sequence parallelism (frameworks.toml pp_recv_gather: Megatron-LM
    # of 2021, Narayanan et al. Sec. 4.1): each TP rank sends its 1/t chunk of the replicated
    # activation and the receiver all-gathers the t chunks over NVLink before it computes, in
    # the same synchronised call; with SP the next stage takes the shard as it is
    if (profile_value(c.job, "pp_recv_gather", False)
            and not profile_value(c.job, "sequence_parallel", True)):
        t_p2p = t_p2p + collective_time("all_gather", msg * c.tp, c.tp,
                                        ranks_per_node(1, c.tp, c.dom), c.cl)
    # blocking P2P calls per crossing (frameworks.toml pp_p2p_calls): Megatron posts a step's
    # send and receive in one batched call (1); DeepSpeed's PipelineEngine issues them as two
    # blocking calls one after the other, each a transfer on the critical path (2)
    t_p2p = t_p2p * float(profile_value(c.job, "pp_p2p_calls", 1))
    raw = np.where(c.pp > 1, 2 * (c.vpp * c.mb + c.pp - 1) * t_p2p, 0.0)
    # what the framework hides (pp_p2p_overlap), then the planner's flat share (planner.toml
    # [overlap] pp, 0: nothing more)
    exposed = np.where(c.pp > 1, 2 * exposed_crossings(c) * t_p2p, 0.0)
    return PipelineComm(msg, raw, (1 - ov["pp"]) * exposed, intra)


def schedule_1f1b(p: int, m: int, t_f: float, t_b: float) -> list[tuple[int, int, str, float,
                                                                           float]]:
    """The 1F1B schedule as (stage, micro-batch, "F"|"B", start, end), for the Gantt chart.

    Stage s runs min(p - s - 1, m) warm-up forwards, then alternates one forward and one
    backward, then drains its backwards; each op starts when its stage is free and its input
    (the previous stage's forward, the next stage's backward) has arrived.
    """
    order: list[list[tuple[str, int]]] = []
    for s in range(p):
        warm = min(p - s - 1, m)
        ops = [("F", i) for i in range(warm)]
        f_next, b_next = warm, 0
        while b_next < m:
            if f_next < m:
                ops.append(("F", f_next))
                f_next += 1
            ops.append(("B", b_next))
            b_next += 1
        order.append(ops)
    done: dict[tuple[str, int, int], float] = {}
    free = [0.0] * p
    pos = [0] * p
    out = []
    remaining = sum(len(o) for o in order)
    while remaining:
        progressed = False
        for s in range(p):
            if pos[s] >= len(order[s]):
                continue
            kind, i = order[s][pos[s]]
            if kind == "F":
                dep = 0.0 if s == 0 else done.get(("F", s - 1, i))
            else:
                dep = done.get(("F", s, i)) if s == p - 1 else done.get(("B", s + 1, i))
            if dep is None:
                continue
            start = max(free[s], dep)
            end = start + (t_f if kind == "F" else t_b)
            done[(kind, s, i)] = end
            free[s] = end
            out.append((s, i, kind, start, end))
            pos[s] += 1
            remaining -= 1
            progressed = True
        if not progressed:  # pragma: no cover - the order above is always feasible
            break
    return out
