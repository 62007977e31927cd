"""MoE serving under a latency SLA: attention TP/DP, expert parallelism and redundant experts per
phase, the per-layer timeline and the all-to-all tail.

Per MoE layer and GPU (tokens n per GPU per forward, DP attention groups of t GPUs):

* attention: roofline time max(FLOPs / (pi eff_c), bytes / (beta eff_m)) of the projections
  (weights / t) and the core attention (decode: the whole KV read; MLA's latent is not split by
  TP, GQA heads are), plus a TP all-reduce of the output when t > 1;
* dispatch all-to-all: n k h bytes (FP8) leave each GPU, the busiest GPU receives
  recv_max h bytes; remote copies cross the scale-out NIC, the rest NVLink;
* expert GEMMs: the busiest GPU's routed copies recv_max x 2 P_x FLOPs, and its m = (E + R) / EP
  experts' weights read once;
* combine all-to-all: the same copies back in BF16 (2 bytes);
* shared experts and dense layers: like attention projections, per GPU for its own tokens.

With two micro-batches overlapped (DeepSeek's dual-batch overlap in prefill and its decode
pipeline), a layer costs max(compute, communication); without, their sum.

recv_max is the tail: expert popularity is Zipf(s) per layer (a random permutation per layer),
placed with our planner (``moe_placement``) with R redundant slots; each Monte Carlo draw routes
n x EP x k copies multinomially, spreads each expert's copies evenly over its replicas and takes
the busiest GPU. Per-token latency sums independent layers; p50 and p99 over draws.

Every collective (the TP all-reduce, dispatch and combine) is priced by the collectives engine
(scalemodel.analytic.collectives); :func:`alltoall_time_s` adds DeepEP's two kernel families on
top of it: per-expert (low-latency, decode) and node-limited (normal kernels, prefill: one copy
per token and node over the NIC, then NVLink fan-out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, dtype
from ..specs.sources import cite
from .kv import model_kv_bytes_per_token
from .moe_data import check_limit, moe_table
from .moe_placement import _global_plan
from .params import attention_params, count_params, mlp_params


def moe_constants() -> dict[str, Any]:
    return moe_table()


def constant(name: str) -> tuple[float, str]:
    """(value, citation) of a [serving.*] figure in moe.toml."""
    t = moe_constants()["serving"][name]
    return float(t["value"]), cite(t["source"])


def published_prefill() -> tuple[dict[str, float], str]:
    """DeepSeek's published prefill rate per H800 node as published (cache hits included), its
    prefix-cache hit rate and the computed (cache-miss) tokens per second it implies."""
    from .serving.iteration import serving_constants

    x, src = constant("prefill_tokens_per_node_s")
    t = serving_constants()["deepseek"]
    h = float(t["prefix_cache_hit_rate"])
    return {"published": x, "hit_rate": h, "computed": x * (1 - h)}, src


# --- the all-to-all, priced by the collectives engine ------------------------------------------

DISPATCH_MODES = ("auto", "node-limited", "per-expert")


@dataclass(frozen=True)
class FabricSpec:
    """What the serving model reads from a GPU's spec (its ``interconnect`` table): the link
    inside a node and its per-GPU rate, the NIC link across nodes (None: single node only) and
    the NICs per GPU. ``intra_field`` names the spec field the intra link came from."""

    intra_link: str
    intra_field: str
    intra_bytes_per_s: float | None  # the GPU's own scale-up rate (None: the link's rate)
    inter_link: str | None
    nics_per_gpu: float


def fabric_spec(gpu: GPUSpec) -> FabricSpec:
    """The GPU's fabric as its spec gives it; BadInput naming the field where one is missing.

    Inside a node: ``interconnect.scale_up_link`` at ``scale_up_bytes_per_s_per_direction``
    (e.g. H800's reduced NVLink); a GPU without a scale-up fabric talks to its peers over
    ``pcie_link``. A scale-up rate without a link id is refused: the link's per-hop latency
    would be unknown. Across nodes: ``scale_out_link`` with ``nics_per_gpu``; without a
    scale-out link only single-node layouts are planned."""
    ic = gpu.interconnect
    up_rate = gpu.scale_up_bytes_per_s or None
    if ic.get("scale_up_link"):
        intra, fld = str(ic["scale_up_link"]), "interconnect.scale_up_link"
    elif up_rate:
        raise BadInput(f"--gpu: {gpu.id} gives a scale-up rate but no interconnect.scale_up_link "
                       "(a links.toml id, for the per-hop latency); add it to the GPU's spec")
    elif ic.get("pcie_link"):
        intra, fld = str(ic["pcie_link"]), "interconnect.pcie_link"
    else:
        raise BadInput(f"--gpu: {gpu.id} has neither interconnect.scale_up_link nor "
                       "interconnect.pcie_link in its spec; the all-to-all inside a node needs one")
    inter = ic.get("scale_out_link") or None
    if inter is not None and "nics_per_gpu" not in ic:
        raise BadInput(f"--gpu: {gpu.id} names a scale_out_link but no interconnect.nics_per_gpu")
    nics = float(ic["nics_per_gpu"]) if inter is not None else 1.0
    return FabricSpec(intra, fld, up_rate, str(inter) if inter else None, nics)


def serving_fabric(gpu: GPUSpec, gpus_per_node: int) -> Any:
    """The collectives engine's fabric for a GPU (see :func:`fabric_spec`)."""
    return _fabric(fabric_spec(gpu), gpus_per_node)


@cache
def _fabric(fs: FabricSpec, gpus_per_node: int) -> Any:
    from .collectives import make_fabric

    return make_fabric(fs.intra_link, fs.inter_link, gpus_per_node=gpus_per_node,
                       nics_per_gpu=fs.nics_per_gpu, intra_bytes_per_s=fs.intra_bytes_per_s)


def _a2a(nbytes: Any, ranks: int, ranks_per_node: int, fabric: Any) -> np.ndarray:
    """Engine price of a direct all-to-all (per-rank buffer ``nbytes``, nccl-tests convention),
    the fastest protocol per query; zero for one rank or no bytes. Both dispatch modes here are
    DeepEP's kernels, so the NVLink wire is the one the training step model floors them over
    (``collective_time("all_to_all_wire")``: the ring efficiency), not NCCL's own all-to-all
    plateau (``nccl_p2p``)."""
    from .collectives import price_best

    S = np.asarray(nbytes, dtype=np.float64)
    if ranks <= 1:
        return np.zeros(S.shape)
    uq, inv = np.unique(S.ravel(), return_inverse=True)
    t = price_best("all-to-all", uq, ranks, ranks_per_node, fabric=fabric,
                   algorithms=("direct",), nccl_p2p=False).time_s
    return np.where(S > 0, np.asarray(t)[inv].reshape(S.shape), 0.0)


def alltoall_time_s(copies: Any, bytes_per_copy: float, ep: int, fabric: Any, *,
                    mode: str = "per-expert", nic_copies: Any = None,
                    bytes_per_copy_each: Any = None,
                    calls: tuple[str, ...] | None = None,
                    nic_copies_counted: Any = None) -> np.ndarray:
    """One dispatch or combine on the busiest GPU, vectorised over ``copies``.

    ``per-expert`` (DeepEP's low-latency kernels, decode): each of a token's copies goes
    straight to its expert's GPU; ``copies`` = the larger of what the GPU sends and receives.
    Priced as one direct all-to-all over ``ep`` ranks with NVLink for peers in the node and the
    NIC for the rest (the engine's mixed case). DeepEP's EP8 and EP16 low-latency rates (98 and
    63 GB/s) exceed one 400 Gb/s NIC, so in-node peers do not go through the NIC.

    ``node-limited`` (DeepEP's normal kernels, prefill; DeepSeek-V3's node-limited routing):
    one copy per token and target node crosses the network on the GPU's rail (``nic_copies``,
    sent or received, the larger), then NVLink fans it out to the GPUs holding the experts
    (``copies``, deduplicated per GPU). The two stages are pipelined: the slower one counts.
    Each stage is an engine all-to-all: over the N nodes of the rail (one rank per node) and
    over the p GPUs of the node. ``bytes_per_copy_each`` (optional) gives a byte size per row
    of a stacked ``copies`` (dispatch and combine priced in one call).

    ``calls`` (one of "dispatch" / "combine" per stacked row): each row is priced no faster
    than DeepEP's measured rates allow, through the functions ``plan serve``'s wide-EP layouts
    and the training step model use (step/comm.py). In ``per-expert`` mode across nodes, the
    low-latency rate at ``ep`` ranks (``low_latency_stage_time``; collectives.toml
    [ep_dispatch_lowlatency.deepep]). In ``node-limited`` mode, each stage no faster than the
    normal kernels' rate: the network stage at the N nodes (``kernel_network_floor``,
    [ep_dispatch_kernel.deepep]) over ``nic_copies_counted`` rows (a token's nodes with its own,
    as the kernels' benchmark counts them; ``nic_copies`` where not given), the NVLink stage at
    the p GPUs of a node (``kernel_nvlink_floor``, [ep_dispatch_nvlink.deepep]) over the rows a
    GPU receives. None: the engine's wire alone.
    """
    p = fabric.gpus_per_node
    if bytes_per_copy_each is not None:
        bytes_per_copy = np.asarray(bytes_per_copy_each, dtype=np.float64).reshape(
            (-1,) + (1,) * (np.ndim(copies) - 1))
    vol = np.asarray(copies, dtype=np.float64) * bytes_per_copy
    if ep <= 1:
        return np.zeros(vol.shape)
    if mode not in DISPATCH_MODES[1:]:
        raise BadInput(f"--dispatch: {mode!r} is not one of {', '.join(DISPATCH_MODES[1:])}")
    kinds = (None if calls is None
             else np.array(calls).reshape((-1,) + (1,) * (np.ndim(vol) - 1)))

    def floored(wire: np.ndarray, floor: Any) -> np.ndarray:
        if kinds is None:
            return wire
        return np.maximum(wire, np.where(kinds == "dispatch", floor("dispatch"),
                                         floor("combine")))

    from .step.comm import (
        kernel_network_floor,
        kernel_nvlink_floor,
        low_latency_stage_time,
        nic_bytes_per_s,
    )

    up = fabric.intra.bytes_per_s_per_direction
    if mode == "per-expert" or ep <= p:
        wire = _a2a(vol, ep, min(ep, p), fabric)
        if mode == "node-limited":  # one node: the normal kernels' NVLink stage alone
            return floored(wire, lambda c: kernel_nvlink_floor("deepep", up, vol, ep, c))
        if fabric.inter is None:
            return wire
        return floored(wire, lambda c: low_latency_stage_time("deepep", fabric, vol, ep, c))
    nodes = -(-ep // p)
    nic = np.asarray(nic_copies, dtype=np.float64) * bytes_per_copy
    counted = (nic if nic_copies_counted is None
               else np.asarray(nic_copies_counted, dtype=np.float64) * bytes_per_copy)
    # the rail all-to-all sends (N-1)/N of its per-rank buffer to other nodes
    t_nic = floored(_a2a(nic * nodes / (nodes - 1), nodes, 1, fabric),
                    lambda c: kernel_network_floor("deepep", nic_bytes_per_s(fabric), counted,
                                                   nodes, c))
    t_nvl = floored(_a2a(vol, p, p, fabric),
                    lambda c: kernel_nvlink_floor("deepep", up, vol, p, c))
    return np.maximum(t_nic, t_nvl)


def allreduce_time_s(nbytes: Any, ranks: Any, fabric: Any) -> np.ndarray:
    """Attention TP all-reduce inside a node, priced by the engine (NCCL's best choice);
    vectorised over ``nbytes`` and ``ranks`` (broadcast); zero for one rank."""
    from .collectives import price_best

    S, n = np.broadcast_arrays(np.asarray(nbytes, dtype=np.float64),
                               np.asarray(ranks, dtype=np.float64))
    n = np.maximum(n, 1.0)
    t = price_best("all-reduce", S, n, np.minimum(n, fabric.gpus_per_node), fabric=fabric).time_s
    return np.where((n > 1) & (S > 0), np.asarray(t), 0.0)


# --- model pieces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    L: int
    L_moe: int
    E: int
    k: int
    h: int
    P_x: float  # one routed expert
    P_shared: float  # shared experts of one MoE layer
    P_dense_mlp: float  # dense MLP of one dense layer
    P_attn: float  # attention projections of one layer
    attn_flops_per_ctx: float  # core attention FLOPs per (query token, key token), all heads
    kv_tok_layer: float  # KV bytes per token per layer
    kv_split: int  # how many ways TP can split the KV (1 for MLA, n_kv_heads for GQA)
    P_embed_head: float
    groups: int = 0  # n_group: expert groups of the router (0: none)
    groups_per_token: int = 0  # topk_group: groups one token may use


def _model(m: ModelSpec, kv_dtype: str) -> _Model:
    if not m.is_moe:
        raise BadInput(f"--model: {m.id} is not a mixture-of-experts model (no routed experts)")
    pc = count_params(m)
    attn, _ = attention_params(m)
    moe_layer = next(lp for i, lp in enumerate(pc.layers) if m.layer_is_moe(i))
    dense_layers = [lp for i, lp in enumerate(pc.layers) if not m.layer_is_moe(i)]
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim if m.kv_lora_rank else m.head_dim
    v = m.v_head_dim if m.kv_lora_rank else m.head_dim
    kv_tok = model_kv_bytes_per_token(m, kv_dtype)
    return _Model(
        L=m.n_layers, L_moe=m.n_moe_layers, E=m.n_experts, k=m.top_k, h=m.hidden,
        P_x=float(moe_layer.expert_one), P_shared=float(moe_layer.shared),
        P_dense_mlp=float(mlp_params(m, m.ffn)) if dense_layers else 0.0,
        P_attn=float(attn), attn_flops_per_ctx=2.0 * m.n_heads * (qk + v),
        kv_tok_layer=kv_tok / m.n_layers,
        kv_split=1 if m.kv_lora_rank else max(1, m.n_kv_heads),
        P_embed_head=float(pc.embedding + pc.lm_head),
        groups=m.expert_groups if m.expert_groups and m.n_experts % m.expert_groups == 0 else 0,
        groups_per_token=m.groups_per_token,
    )


# --- Monte Carlo of the routed load --------------------------------------------------------------

PLACEMENTS = ("global", "groups-on-node")
EXACT_COPIES_PER_EXPERT = 10  # below this mean, draw the multinomial itself (normal approx. off)


def zipf_popularity(E: int, s: float, patterns: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.arange(1, E + 1, dtype=np.float64) ** -s
    p /= p.sum()
    return np.stack([p[rng.permutation(E)] for _ in range(patterns)])


@dataclass(frozen=True)
class LayoutStats:
    """What the routing Monte Carlo needs about one (EP, redundant experts, placement).

    For pattern i (a per-layer popularity ``pop[i]``, placed as ``plans[i]``: the logical
    expert of every slot, slot s on GPU s // slots per GPU), an expert's copies are spread
    evenly over its replicas (EPLB's model), so GPU g receives the sum over its slots of
    count_e / replicas_e. ``mean[i]`` is that sum for expected shares and ``noise[i]`` for
    Z sqrt(p (1 - p)), Z standard normals shared by every layout (common random numbers: two
    layouts are compared on the same draws)."""

    pop: np.ndarray
    plans: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]  # 1 / replicas of the slot's expert
    mean: np.ndarray  # (patterns, ep)
    noise: tuple[np.ndarray, ...]  # per pattern (draws of that pattern, ep)
    imbalance: float  # max / mean GPU load of the placement, expected shares

    def gpu_sum(self, i: int, per_expert: np.ndarray) -> np.ndarray:
        """Per-GPU sums of per-expert values (..., E) under pattern i's placement."""
        ep = self.mean.shape[1]
        x = per_expert[..., self.plans[i]] * self.weights[i]
        return x.reshape(x.shape[:-1] + (ep, -1)).sum(axis=-1)


def _distinct(a: np.ndarray) -> np.ndarray:
    sa = np.sort(a, axis=1)
    return 1 + (np.diff(sa, axis=1) != 0).sum(axis=1)


def fanout(pop: np.ndarray, plan: np.ndarray, *, k: int, groups: int, groups_per_token: int,
           ep: int, gpus_per_node: int, rng: np.random.Generator, tokens: int = 1024
           ) -> tuple[float, float, float]:
    """(distinct GPUs, distinct other nodes, distinct nodes with its own) one token's dispatch
    reaches, sampled. The third is the network stage's row count as DeepEP's normal kernels
    count their bytes (test_internode.py: a token's nodes, its own not masked).

    A token on a random GPU picks ``groups_per_token`` of the router's ``groups`` expert groups
    (when the model limits them; DeepSeek-V3: 4 of 8) in proportion to group popularity, then
    k experts inside them in proportion to expert popularity, without replacement
    (Plackett-Luce: the k largest of w_i / X_i with X_i standard exponential); each pick goes to
    one of the expert's replicas at random."""
    E = pop.size
    spg = plan.size // ep
    cnt = np.bincount(plan, minlength=E)
    order = np.argsort(plan, kind="stable")
    first = np.cumsum(cnt) - cnt
    score = pop.astype(np.float32)[None, :] / rng.standard_exponential((tokens, E),
                                                                         dtype=np.float32)
    if groups and 0 < groups_per_token < groups:
        gs = E // groups
        gsc = (pop.reshape(groups, gs).sum(axis=1).astype(np.float32)[None, :]
               / rng.standard_exponential((tokens, groups), dtype=np.float32))
        keep = np.argpartition(-gsc, groups_per_token - 1, axis=1)[:, :groups_per_token]
        allowed = np.zeros((tokens, groups), dtype=np.float32)
        allowed[np.arange(tokens)[:, None], keep] = 1.0
        score *= np.repeat(allowed, gs, axis=1)
    sel = np.argpartition(-score, k - 1, axis=1)[:, :k] if k < E else np.tile(np.arange(E),
                                                                               (tokens, 1))
    rep = np.minimum((rng.random(sel.shape) * cnt[sel]).astype(np.int64), cnt[sel] - 1)
    gpu = order[first[sel] + rep] // spg
    node = gpu // gpus_per_node
    src = rng.integers(0, ep, tokens) // gpus_per_node
    all_nodes = _distinct(node)
    d_node = all_nodes - (node == src[:, None]).any(axis=1)
    return float(_distinct(gpu).mean()), float(d_node.mean()), float(all_nodes.mean())


@cache
def layout_stats(E: int, k: int, groups: int, groups_per_token: int, ep: int, redundant: int,
                 placement: str, gpus_per_node: int, s: float, *, draws: int = 256,
                 patterns: int = 4, seed: int = 0) -> LayoutStats:
    from .moe_placement import _grouped_plan

    pop = zipf_popularity(E, s, patterns, seed)
    slots = E + redundant
    nodes = -(-ep // gpus_per_node)
    z = np.random.default_rng(seed + 7).standard_normal((draws, E))
    per = np.diff(np.linspace(0, draws, patterns + 1).astype(int))
    plans, wts, means, noises, imb = [], [], [], [], []
    lo = 0
    for row in pop:
        if placement == "groups-on-node":
            plan = _grouped_plan(row, slots, groups, nodes, ep)
        else:
            plan = _global_plan(row, slots, ep)
        plans.append(plan)
        wts.append(1.0 / np.bincount(plan, minlength=E)[plan])
    st = LayoutStats(pop, tuple(plans), tuple(wts), np.zeros((patterns, ep)), (), 0.0)
    for i, row in enumerate(pop):
        means.append(st.gpu_sum(i, row))
        noises.append(st.gpu_sum(i, z[lo:lo + per[i]] * np.sqrt(row * (1 - row))))
        lo += per[i]
        imb.append(means[-1].max() * ep)
    return LayoutStats(pop, tuple(plans), tuple(wts), np.stack(means), tuple(noises),
                       float(np.mean(imb)))


@cache
def layout_fanout(E: int, k: int, groups: int, groups_per_token: int, ep: int, redundant: int,
                  placement: str, gpus_per_node: int, s: float, *, draws: int = 256,
                  patterns: int = 4, seed: int = 0) -> tuple[float, float, float]:
    """Mean over the popularity patterns of :func:`fanout` for a layout's placements."""
    st = layout_stats(E, k, groups, groups_per_token, ep, redundant, placement, gpus_per_node, s,
                      draws=draws, seed=seed) if patterns == 4 else layout_stats(
        E, k, groups, groups_per_token, ep, redundant, placement, gpus_per_node, s, draws=draws,
        patterns=patterns, seed=seed)
    rng = np.random.default_rng(seed + 3)
    r = [fanout(row, plan, k=k, groups=groups, groups_per_token=groups_per_token, ep=ep,
                gpus_per_node=gpus_per_node, rng=rng) for row, plan in zip(st.pop, st.plans,
                                                                             strict=True)]
    a, b, c = (float(np.mean(col)) for col in zip(*r, strict=True))
    return a, b, c


def recv_tail(st: LayoutStats, copies: np.ndarray, *, seed: int = 0, gpus_per_node: int = 8
              ) -> tuple[np.ndarray, np.ndarray]:
    """(busiest GPU's routed copies, busiest node / mean node), shape (sizes, draws).

    ``copies``: routed copies in one step over the whole EP group (tokens x EP x k). A draw is
    one layer's routing of those copies: multinomial over the experts, drawn exactly when an
    expert expects fewer than 10 copies and by its normal approximation (mean n p, variance
    n p (1 - p), shared draws) above that."""
    copies = np.atleast_1d(np.asarray(copies, dtype=np.float64))
    E = st.pop.shape[1]
    ep = st.mean.shape[1]
    nodes = max(1, ep // gpus_per_node)
    out, node_imb = [], []
    for c in copies:
        if c < EXACT_COPIES_PER_EXPERT * E:
            rng = np.random.default_rng([seed, int(c)])
            loads = np.concatenate([st.gpu_sum(i, rng.multinomial(int(c), p, size=nz.shape[0]))
                                    for i, (p, nz) in enumerate(zip(st.pop, st.noise,
                                                                    strict=True))])
        else:
            loads = np.concatenate([c * m + np.sqrt(c) * nz
                                    for m, nz in zip(st.mean, st.noise, strict=True)])
        out.append(loads.max(axis=1))
        nl = loads[:, :nodes * gpus_per_node].reshape(loads.shape[0], nodes, -1).sum(axis=2)
        node_imb.append(nl.max(axis=1) / np.maximum(nl.mean(axis=1), 1e-300))
    return np.stack(out), np.stack(node_imb)


# --- one configuration --------------------------------------------------------------------------


@dataclass(frozen=True)
class PhasePlan:
    """One phase's layout and its figures. JSON keys fixed by the issue: attention (tp, dp), ep,
    redundant_experts, gpus, tokens_per_s_per_gpu, tpot_p50_s, tpot_p99_s, alltoall_p99_s."""

    phase: str
    attention: dict[str, int]
    ep: int
    redundant_experts: int
    gpus: int
    tokens_per_gpu: int
    tokens_per_s_per_gpu: float
    tpot_p50_s: float
    tpot_p99_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    alltoall_p99_s: float
    layer_p50_s: float
    layer_p99_s: float
    breakdown_s: dict[str, float]
    memory_bytes_per_gpu: dict[str, float]
    meets_sla: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "extra"} | self.extra


@dataclass(frozen=True)
class Knobs:
    gpu: GPUSpec
    weight_bytes: float
    # FP8 values + one FP32 scale per fp8_scale_group channels (moe.toml); combine in BF16
    dispatch_bytes: float = field(default_factory=lambda: _dispatch_bytes())
    combine_bytes: float = field(default_factory=lambda: dtype("bf16").bytes)
    kv_dtype: str = "bf16"
    compute_dtype: str = "fp8"
    gpus_per_node: int = 8
    skew: float = 0.6
    overlap: bool = True
    draws: int = 256
    seed: int = 0
    dispatch: str = "auto"

    def mode(self, phase: str) -> str:
        """auto follows DeepEP: normal (node-limited) kernels for prefill, low-latency
        (per-expert RDMA) kernels for decode."""
        if self.dispatch != "auto":
            return self.dispatch
        return "node-limited" if phase == "prefill" else "per-expert"


def _dispatch_bytes() -> float:
    g, _ = constant("fp8_scale_group")
    return 1.0 + 4.0 / g


def grid(mm: _Model, kb: Knobs, *, phase: str, ep: int, redundant: int, placement: str,
         tps: Any, sizes: Any, context: int, prompt: int) -> dict[str, Any]:
    """Timeline, tail and memory of every (attention TP, tokens per GPU) for one layout; arrays
    of shape (len(tps), len(sizes)) (and a trailing draws axis for the per-draw ones)."""
    gpu = kb.gpu
    fab = serving_fabric(gpu, kb.gpus_per_node)
    eff_c, _ = constant("compute_efficiency")
    eff_m, _ = constant("memory_efficiency")
    util, _ = constant("memory_utilization")
    peak = gpu.peak_flop_per_s(kb.compute_dtype) * eff_c
    bw = gpu.hbm_bytes_per_s * eff_m
    tp = np.asarray(tps, dtype=np.float64)[:, None]
    n = np.asarray(sizes, dtype=np.float64)[None, :]
    e_w, kv_l = kb.weight_bytes, mm.kv_tok_layer
    split = np.minimum(tp, mm.kv_split)
    # attention per layer on one GPU (a group of tp GPUs handles tp x n tokens)
    proj_f = 2 * mm.P_attn * n
    proj_b = mm.P_attn * e_w / tp
    if phase == "decode":
        core_f = mm.attn_flops_per_ctx * context * n
        kv_b = n * tp * context * kv_l / split
        ctx_len = context
    else:
        core_f = mm.attn_flops_per_ctx * n * prompt / 2  # causal: half the score matrix
        kv_b = n * kv_l + 0 * tp  # written once
        ctx_len = prompt
    t_attn = np.maximum((proj_f + core_f) / peak, (proj_b + kv_b) / bw)
    t_tp = _tp_allreduce(fabric_spec(gpu), kb.gpus_per_node,
                         tuple(int(t) for t in np.asarray(tps)), tuple(int(x) for x in sizes),
                         mm.h)
    t_shared = (np.maximum(2 * mm.P_shared * n / peak, mm.P_shared * e_w / bw)
                if mm.P_shared else 0.0 * n)
    t_dense = np.maximum(2 * mm.P_dense_mlp * n / peak, mm.P_dense_mlp * e_w / bw)
    # routed experts and the all-to-all on the busiest GPU, per draw
    st = layout_stats(mm.E, mm.k, mm.groups, mm.groups_per_token, ep, redundant, placement,
                      kb.gpus_per_node, kb.skew, draws=kb.draws, seed=kb.seed)
    slots_per_gpu = (mm.E + redundant) // ep
    nn = np.asarray(sizes, dtype=np.float64)
    recv, node_imb = recv_tail(st, nn * ep * mm.k, seed=kb.seed, gpus_per_node=kb.gpus_per_node)
    t_exp = np.maximum(2 * mm.P_x * recv / peak, slots_per_gpu * mm.P_x * e_w / bw)
    mode = kb.mode(phase)
    send = nn[:, None] * mm.k
    vol, nic, counted, fan = np.maximum(send, recv), None, None, (float(mm.k), 0.0, 1.0)
    if mode == "node-limited" and ep > 1:
        fan = layout_fanout(mm.E, mm.k, mm.groups, mm.groups_per_token, ep, redundant,
                            placement, kb.gpus_per_node, kb.skew, draws=kb.draws, seed=kb.seed)
        vol = vol * fan[0] / mm.k  # one copy per (token, GPU)
        nic = nn[:, None] * fan[1] * np.maximum(1.0, node_imb)  # one per (token, other node)
        counted = nn[:, None] * fan[2] * np.maximum(1.0, node_imb)  # the kernels' count
    # dispatch (FP8 + scales) and combine (BF16) priced together
    both = alltoall_time_s(np.stack([vol, vol]), 1.0, ep, fab, mode=mode,
                           bytes_per_copy_each=np.array([mm.h * kb.dispatch_bytes,
                                                         mm.h * kb.combine_bytes]),
                           nic_copies=None if nic is None else np.stack([nic, nic]),
                           nic_copies_counted=None if counted is None else np.stack([counted,
                                                                                     counted]),
                           calls=("dispatch", "combine"))
    t_disp, t_comb = both[0], both[1]
    comp = (t_attn + t_tp + t_shared)[:, :, None] + t_exp[None]
    comm = (t_disp + t_comb)[None]
    layer = np.maximum(comp, comm) if kb.overlap else comp + comm
    dense_layer = t_attn + t_tp + t_dense
    # the output head: every token in decode, only each prompt's last token in prefill
    logits = n if phase == "decode" else np.maximum(1.0, np.ceil(n / prompt))
    head = np.maximum(mm.P_embed_head * logits / peak, mm.P_embed_head / 2 * e_w / bw)
    # per token: L_moe layers drawn independently (resampled draws), as a count matrix
    rng = np.random.default_rng(kb.seed + 11)
    D = recv.shape[1]
    idx = rng.integers(0, D, size=(D, mm.L_moe))
    step = layer[..., idx].sum(axis=-1) + ((mm.L - mm.L_moe) * dense_layer + head)[:, :, None]
    a2a = t_disp + t_comb
    a2a_tok = a2a[..., idx].sum(axis=-1)
    nonexp = (mm.L * mm.P_attn / tp + mm.L_moe * mm.P_shared
              + (mm.L - mm.L_moe) * mm.P_dense_mlp + mm.P_embed_head / tp) * e_w
    exp_b = mm.L_moe * slots_per_gpu * mm.P_x * e_w
    if phase == "decode":
        kv_total = n * tp * ctx_len * kv_l * mm.L / split
    else:
        kv_total = n * kv_l * mm.L + 0 * tp
    cap = gpu.hbm_bytes * util
    q = np.quantile(step, [0.5, 0.99], axis=-1)
    return {
        "tp": np.asarray(tps), "sizes": np.asarray(sizes), "mode": mode, "stats": st,
        "t_attn": t_attn, "t_tp": t_tp, "t_shared": t_shared * np.ones_like(tp),
        "t_exp": t_exp, "t_disp": t_disp, "t_comb": t_comb, "layer": layer,
        "dense_layer": dense_layer, "head": head * np.ones_like(tp), "a2a": a2a,
        "a2a_tok": a2a_tok, "recv": recv, "node_imb": node_imb,
        "p50": q[0], "p99": q[1], "nonexp": nonexp * np.ones_like(n), "exp_b": exp_b,
        "kv_total": kv_total, "cap": cap,
        "fits": (nonexp + exp_b + kv_total <= cap),
        "chunks": np.maximum(1, np.ceil(prompt / n)) * np.ones_like(tp),
        "slots_per_gpu": slots_per_gpu, "gpn": kb.gpus_per_node, "fan": fan,
    }


@cache
def _tp_allreduce(fs: FabricSpec, gpn: int, tps: tuple[int, ...], sizes: tuple[int, ...],
                  h: int) -> np.ndarray:
    """TP all-reduce of a layer's output (BF16, tp x n tokens), (len(tps), len(sizes))."""
    tp = np.asarray(tps, dtype=np.float64)[:, None]
    n = np.asarray(sizes, dtype=np.float64)[None, :]
    return allreduce_time_s(n * tp * h * 2.0, tp, _fabric(fs, gpn))


def _phase_plan(g: dict[str, Any], mm: _Model, *, phase: str, ep: int, redundant: int,
                placement: str, i: int, j: int) -> PhasePlan:
    """The PhasePlan of cell (tp index i, size index j) of a grid."""
    tp, n = int(g["tp"][i]), int(g["sizes"][j])
    p50, p99 = float(g["p50"][i, j]), float(g["p99"][i, j])
    if phase == "decode":
        tpot50, tpot99, ttft50, ttft99 = p50, p99, float("nan"), float("nan")
    else:
        ch = float(g["chunks"][i, j])
        tpot50 = tpot99 = float("nan")
        ttft50, ttft99 = ch * p50, ch * p99
    st: LayoutStats = g["stats"]

    def q(a: np.ndarray, x: float) -> float:
        return float(np.quantile(a, x))

    return PhasePlan(
        phase=phase, attention={"tp": tp, "dp": ep // tp}, ep=ep, redundant_experts=redundant,
        gpus=ep, tokens_per_gpu=n, tokens_per_s_per_gpu=n / p50,
        tpot_p50_s=tpot50, tpot_p99_s=tpot99, ttft_p50_s=ttft50, ttft_p99_s=ttft99,
        alltoall_p99_s=q(g["a2a"][j], 0.99),
        layer_p50_s=q(g["layer"][i, j], 0.5), layer_p99_s=q(g["layer"][i, j], 0.99),
        breakdown_s={"attention": float(g["t_attn"][i, j]), "tp_allreduce": float(g["t_tp"][i, j]),
                     "shared_expert": float(g["t_shared"][i, j]),
                     "experts_p50": q(g["t_exp"][j], 0.5), "experts_p99": q(g["t_exp"][j], 0.99),
                     "dispatch_p99": q(g["t_disp"][j], 0.99),
                     "combine_p99": q(g["t_comb"][j], 0.99),
                     "dense_layer": float(g["dense_layer"][i, j]), "head": float(g["head"][i, j]),
                     "alltoall_per_token_p99": q(g["a2a_tok"][j], 0.99)},
        memory_bytes_per_gpu={"non_expert_weights": float(g["nonexp"][i, j]),
                              "expert_weights": float(g["exp_b"]),
                              "kv_cache": float(g["kv_total"][i, j]), "usable": float(g["cap"])},
        meets_sla=bool(g["fits"][i, j]),
        extra={"recv_copies_p50": q(g["recv"][j], 0.5), "recv_copies_p99": q(g["recv"][j], 0.99),
               "recv_copies_mean_gpu": n * mm.k, "slots_per_gpu": g["slots_per_gpu"],
               "placement": placement, "dispatch": g["mode"],
               "gpus_per_token": g["fan"][0], "remote_nodes_per_token": g["fan"][1],
               "placement_imbalance": st.imbalance, "nodes": -(-ep // g["gpn"])},
    )


def evaluate(mm: _Model, kb: Knobs, *, phase: str, tp: int, ep: int, redundant: int,
             tokens_per_gpu: int, context: int, prompt: int, placement: str = "global"
             ) -> PhasePlan:
    """Timeline, tail and memory of one (phase, tp, ep, redundant, tokens per GPU) choice."""
    g = grid(mm, kb, phase=phase, ep=ep, redundant=redundant, placement=placement, tps=[tp],
             sizes=[tokens_per_gpu], context=context, prompt=prompt)
    return _phase_plan(g, mm, phase=phase, ep=ep, redundant=redundant, placement=placement,
                       i=0, j=0)


# --- the search ----------------------------------------------------------------------------------

PREFILL_SIZES = (1024, 1448, 2048, 2896, 4096, 5793, 8192, 11585, 16384)
DECODE_SIZES = tuple(int(round(8 * 2 ** (i / 4))) for i in range(0, 29))  # 8 .. 1149


def _redundancy_options(E: int, ep: int) -> list[int]:
    base = (-E) % ep
    opts = [base, base + ep]
    return [r for r in opts if r <= E]


def _placements(mm: _Model, ep: int, gpus_per_node: int) -> list[str]:
    nodes = -(-ep // gpus_per_node)
    out = ["global"]
    if (mm.groups and 1 < nodes <= mm.groups and mm.groups % nodes == 0
            and ep % gpus_per_node == 0):
        out.append("groups-on-node")
    return out


@dataclass(frozen=True)
class ServingPlan:
    model: str
    gpu: str
    tpot_sla_s: float
    ttft_sla_s: float
    prefill: PhasePlan | None
    decode: PhasePlan | None
    candidates: dict[str, list[dict[str, Any]]]
    derivation: Derivation
    anchors: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "tpot_sla_s": self.tpot_sla_s,
                "ttft_sla_s": self.ttft_sla_s,
                "prefill": self.prefill.to_dict() if self.prefill else None,
                "decode": self.decode.to_dict() if self.decode else None,
                "candidates": self.candidates, "anchors": self.anchors,
                "derivation": self.derivation.to_dict()}


def plan(m: ModelSpec, gpu: GPUSpec, *, tpot_s: float, ttft_s: float, context: int | None = None,
         prompt: int = 4096, dtype_name: str = "fp8", kv_dtype: str = "bf16",
         skew: float | None = None, gpus_per_node: int = 8, overlap: bool = True,
         draws: int = 256, seed: int = 0, node_counts: tuple[int, ...] | None = None,
         dispatch: str = "auto") -> ServingPlan:
    if tpot_s <= 0 or ttft_s <= 0:
        raise BadInput("--tpot-ms and --ttft-ms must be positive")
    if dispatch not in DISPATCH_MODES:
        raise BadInput(f"--dispatch: {dispatch!r} is not one of {', '.join(DISPATCH_MODES)}")
    mm = _model(m, kv_dtype)
    e = dtype(dtype_name)
    if e.name not in gpu.flop_per_s:
        raise BadInput(f"--dtype: {gpu.id} has no {e.name} peak; it lists {', '.join(gpu.flop_per_s)}")
    ctx = int(context or constant("decode_context")[0])
    for flag, n in (("--context", ctx), ("--prompt", int(prompt))):
        if n > m.max_context:  # as plan serve refuses lengths beyond the model's context
            raise BadInput(f"{flag} {n:,} exceeds {m.id}'s context of {m.max_context:,} tokens")
    s = float(skew if skew is not None else constant("default_skew")[0])
    if not s >= 0:
        raise BadInput("--skew must be 0 or more")
    if draws < 1:
        raise BadInput(f"--draws: must be a whole number >= 1, got {draws}")
    check_limit("--draws", draws, "serve_draws")
    if gpus_per_node < 1:
        raise BadInput(f"--gpus-per-node: must be a whole number >= 1, got {gpus_per_node}")
    check_limit("--gpus-per-node", gpus_per_node, "serve_gpus_per_node")
    fs = fabric_spec(gpu)
    kb = Knobs(gpu=gpu, weight_bytes=e.bytes, dispatch_bytes=_dispatch_bytes(),
               kv_dtype=kv_dtype, compute_dtype=e.name, gpus_per_node=gpus_per_node, skew=s,
               overlap=overlap, draws=draws, seed=seed, dispatch=dispatch)
    max_nodes, max_nodes_src = constant("max_nodes")
    node_counts = node_counts or tuple(range(1, int(max_nodes) + 1))
    if fs.inter_link is None:  # no scale-out link in the GPU's spec: one node at most
        node_counts = tuple(c for c in node_counts if c == 1)
        if not node_counts:
            raise BadInput(f"--gpu: {gpu.id} has no interconnect.scale_out_link in its spec, so "
                           "only single-node layouts can be planned")
    cands: dict[str, list[dict[str, Any]]] = {"prefill": [], "decode": []}
    best: dict[str, PhasePlan | None] = {"prefill": None, "decode": None}
    best_key: dict[str, tuple[float, int]] = {}
    tps = [t for t in (1, 2, 4, 8) if t <= gpus_per_node]
    for phase, sizes in (("prefill", PREFILL_SIZES), ("decode", DECODE_SIZES)):
        sla = tpot_s if phase == "decode" else ttft_s
        for nodes in node_counts:
            ep = nodes * gpus_per_node
            for red in _redundancy_options(mm.E, ep):
                for place in _placements(mm, ep, gpus_per_node):
                    sz = list(sizes)
                    if phase == "decode":  # also the largest batch that fits memory, per TP
                        sz = sorted(set(sz) | set(_decode_fill(mm, kb, ep, red, tps, ctx)))
                    g = grid(mm, kb, phase=phase, ep=ep, redundant=red, placement=place,
                             tps=tps, sizes=sz, context=ctx, prompt=prompt)
                    lat = g["p99"] * (g["chunks"] if phase == "prefill" else 1.0)
                    tput = np.asarray(sz, dtype=np.float64)[None, :] / g["p50"]
                    ok = g["fits"] & (lat <= sla)
                    for i, t in enumerate(tps):
                        row_ok = np.nonzero(ok[i])[0]
                        j = (int(row_ok[np.argmax(tput[i, row_ok])]) if row_ok.size
                             else int(np.argmin(lat[i])))
                        cands[phase].append({
                            "nodes": nodes, "ep": ep, "redundant_experts": red,
                            "placement": place, "tp": t, "tokens_per_gpu": int(sz[j]),
                            "fits_memory": bool(g["fits"][i, j]), "latency_p99_s": float(lat[i, j]),
                            "tokens_per_s_per_gpu": float(tput[i, j]),
                            "meets_sla": bool(ok[i, j])})
                    if not ok.any():
                        continue
                    flat = np.where(ok, tput, -np.inf)
                    i, j = np.unravel_index(int(np.argmax(flat)), flat.shape)
                    key = (float(tput[i, j]), -ep)
                    cur = best_key.get(phase)
                    if cur is None or key > (cur[0] * (1 + 1e-9), cur[1]):
                        best_key[phase] = key
                        best[phase] = _phase_plan(g, mm, phase=phase, ep=ep, redundant=red,
                                                  placement=place, i=int(i), j=int(j))
    d = Derivation(f"MoE serving plan for {m.id} on {gpu.id}")
    d.given("TPOT SLA (p99)", "T_tpot", tpot_s, "s")
    d.given("TTFT SLA (p99)", "T_ttft", ttft_s, "s")
    d.given("decode context (KV length)", "C", ctx, "token", constant("decode_context")[1])
    d.given("expert popularity Zipf exponent", "s", s, "1", constant("default_skew")[1])
    d.given("GEMM efficiency", "eta_c", constant("compute_efficiency")[0], "1",
            constant("compute_efficiency")[1])
    d.given("HBM efficiency", "eta_m", constant("memory_efficiency")[0], "1",
            constant("memory_efficiency")[1])
    d.given("dispatch bytes per hidden element (FP8 + FP32 scale per tile)", "b_d",
            kb.dispatch_bytes, "B", constant("fp8_scale_group")[1])
    _fabric_steps(d, gpu, fs, gpus_per_node, max(node_counts), max_nodes_src)
    anchors = {}
    pub, pub_src = published_prefill()
    d.given("DeepSeek published prefill input tokens/s per H800 node (cache hits included)",
            "X_prefill_pub", pub["published"], "token/s", pub_src)
    d.given("DeepSeek's prefix-cache hit rate of those input tokens", "h_cache",
            pub["hit_rate"], "1", pub_src)
    d.calc("computed (cache-miss) prefill tokens/s per node", "X_prefill", "X_prefill_pub * "
           "(1 - h_cache)", "token/s",
           note="the model computes every prompt token, so it compares with this share")
    v_dec, src_dec = constant("decode_tokens_per_node_s")
    d.given("DeepSeek published decode tokens/s per H800 node", "X_decode", v_dec, "token/s",
            src_dec)
    anchors["deepseek_prefill_published_tokens_per_s_per_node"] = pub["published"]
    anchors["deepseek_prefix_cache_hit_rate"] = pub["hit_rate"]
    for ph, v in (("prefill", pub["computed"]), ("decode", v_dec)):
        anchors[f"deepseek_{ph}_tokens_per_s_per_gpu"] = v / 8
        b = best[ph]
        if b is not None:
            d.given(f"our {ph} tokens/s per GPU", f"x_{ph}", b.tokens_per_s_per_gpu, "token/s")
            d.calc(f"ours / DeepSeek's per GPU ({ph}, computed tokens)", f"r_{ph}",
                   f"x_{ph} / (X_{ph} / 8)", "1",
                   note="roofline times are lower bounds, so ratios above 1 are expected")
    return ServingPlan(m.id, gpu.id, tpot_s, ttft_s, best["prefill"], best["decode"], cands, d,
                       anchors)


def _fabric_steps(d: Derivation, gpu: GPUSpec, fs: FabricSpec, gpn: int, nodes: int,
                  nodes_src: str) -> None:
    """The fabric the plan was priced on, each figure from the GPU's or the link's spec."""
    from ..specs import get_link

    intra = get_link(fs.intra_link)
    rate = fs.intra_bytes_per_s or intra.bytes_per_s_per_direction
    rate_src = (gpu.source_of("interconnect.scale_up_bytes_per_s_per_direction")
                if fs.intra_bytes_per_s else intra.source_of("bytes_per_s_per_direction"))
    d.given(f"in-node link per GPU, one direction ({fs.intra_link}, from {fs.intra_field} of "
            f"{gpu.id})", "B_up", rate, "B/s", rate_src)
    d.given(f"in-node per-hop latency ({fs.intra_link})", "a_up", intra.latency_s, "s",
            intra.source_of("latency_s"))
    if fs.inter_link is not None:
        nic = get_link(fs.inter_link)
        d.given(f"NIC per GPU, one direction ({fs.inter_link}, interconnect.scale_out_link of "
                f"{gpu.id})", "B_nic", nic.bytes_per_s_per_direction, "B/s",
                nic.source_of("bytes_per_s_per_direction"))
        d.given("NICs per GPU", "n_nic", fs.nics_per_gpu, "1",
                gpu.source_of("interconnect.nics_per_gpu"))
        d.given(f"NIC per-hop latency ({fs.inter_link})", "a_nic", nic.latency_s, "s",
                nic.source_of("latency_s"))
    d.given("GPUs per node", "p", gpn, "1")
    d.given("largest deployment searched (nodes)", "N_max", nodes, "1",
            nodes_src if fs.inter_link is not None else f"{gpu.id} has no scale_out_link")


def _decode_fill(mm: _Model, kb: Knobs, ep: int, redundant: int, tps: list[int], ctx: int
                 ) -> list[int]:
    """Per attention TP, the most sequences per GPU whose KV fits next to the weights."""
    util, _ = constant("memory_utilization")
    cap = kb.gpu.hbm_bytes * util
    out = []
    for tp in tps:
        nonexp = (mm.L * mm.P_attn / tp + mm.L_moe * mm.P_shared
                  + (mm.L - mm.L_moe) * mm.P_dense_mlp + mm.P_embed_head / tp) * kb.weight_bytes
        exp_b = mm.L_moe * ((mm.E + redundant) // ep) * mm.P_x * kb.weight_bytes
        per = tp * ctx * mm.kv_tok_layer * mm.L / min(tp, mm.kv_split)
        n = int((cap - nonexp - exp_b) // per)
        if n >= 1:
            out.append(n)
    return out


def ep_vs_tp_bytes(m: ModelSpec, tokens: int, tp: int, ep: int, weight_bytes: float = 1.0
                   ) -> dict[str, float]:
    """Per MoE layer and GPU: what EP and TP (for the experts) move and read.

    EP: each token's k copies are sent (h bytes FP8) and returned (h bytes x 2, BF16); each GPU
    reads the weights of its E / EP experts. TP over the experts: every GPU reads 1/TP of every
    expert the batch touches and all-reduces the layer output (2 (TP-1)/TP x tokens x h x 2 B)."""
    mm = _model(m, "bf16")
    touched = mm.E * (1 - (1 - mm.k / mm.E) ** tokens)
    return {
        "ep_dispatch_bytes_per_gpu": tokens / ep * mm.k * mm.h * 1.0,
        "ep_combine_bytes_per_gpu": tokens / ep * mm.k * mm.h * 2.0,
        "ep_weight_bytes_per_gpu": mm.E / ep * mm.P_x * weight_bytes,
        "tp_allreduce_bytes_per_gpu": 2 * (tp - 1) / tp * tokens * mm.h * 2.0,
        "tp_weight_bytes_per_gpu": touched * mm.P_x * weight_bytes / tp,
    }
