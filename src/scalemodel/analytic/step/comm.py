"""Collectives inside a layer (TP/SP, CP ring attention, EP all-to-all) with their fabric tier,
priced by the collectives engine (analytic/collectives.py) through :func:`collective_time`, and
how much of each compute hides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...specs import ModelSpec
from .attention import AttentionTerms, sdpa_kv_width
from .candidates import Candidates, unique_rows
from .config import (
    TP_FWD_COLLECTIVES,
    constants,
    ep_comm_sm_share,
    ep_dispatch,
    ep_dispatch_kernel,
    moe_dispatcher,
    profile_value,
    recipe_overlap,
    tp_bwd_collectives,
)
from .host import eager_layer_floor, host_exposed
from .imbalance import ep_straggler
from .layers import LayerCompute

if TYPE_CHECKING:
    from ..planner import Cluster

_ENGINE_NAMES = {"all_reduce": "all-reduce", "all_gather": "all-gather",
                 "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all",
                 "all_to_all_wire": "all-to-all", "send_recv": "send-recv"}


def collective_time(kind: str, nbytes: Any, ranks: Any, ranks_per_node: Any,
                    cluster: Cluster) -> Any:
    """Seconds for one collective on every row: the collectives engine's NCCL-like choice.

    ``nbytes`` follows the nccl-tests convention of analytic/collectives.py (the gathered size
    for all_gather, the input for reduce_scatter and all_reduce, the per-rank buffer for
    all_to_all, the message for send_recv). ``all_to_all`` is NCCL's (its p2p kernel's measured
    plateau inside a node, and its measured share of the NIC rate across nodes);
    ``all_to_all_wire`` the same bytes at the ring efficiencies, the wire
    under a per-destination dispatch kernel whose own measured rate floors it (collectives.toml
    [efficiency_alltoall]). ``ranks_per_node`` is how many members of the group
    share one NVLink domain (the engine's "node"). NCCL's own tuning model (analytic/
    nccl_tuner.py, NCCL 2.21.5) picks the (algorithm, protocol) NCCL would run, and the physical
    model prices that pick (price_best in analytic/collectives.py). Queries are de-duplicated
    first: a layout grid repeats the same (size, ranks, placement) many times, and each distinct
    query is priced once per cluster (:func:`_priced`).
    """
    S, n, r = np.broadcast_arrays(np.asarray(nbytes, dtype=np.float64),
                                  np.asarray(ranks, dtype=np.float64),
                                  np.asarray(ranks_per_node, dtype=np.float64))
    n = np.maximum(n, 1.0)
    r = np.clip(r, 1.0, n)
    if kind == "send_recv":
        n = np.where(n > 1, 2.0, 1.0)
        r = np.minimum(r, n)
    live = (n > 1) & (S > 0)
    out = np.zeros(S.shape)
    if live.any():
        uq, inv = unique_rows((S[live], n[live], r[live]))
        out[live] = _priced(kind, uq, cluster)[inv]
    return out if out.ndim else float(out)


def _priced(kind: str, queries: tuple[np.ndarray, ...], cluster: Cluster) -> np.ndarray:
    """price_best's seconds for each distinct (size, ranks, ranks per node) query, remembered
    in the cluster's ``collective_seconds`` (the search prices its grid in chunks that repeat
    the same queries): only the queries not seen before on this cluster are priced."""
    from ..collectives import price_best

    memo = getattr(cluster, "collective_seconds", None)
    memo = {} if memo is None else memo
    keys = [(kind, *q) for q in zip(*(np.asarray(x).tolist() for x in queries), strict=True)]
    new = [i for i, k in enumerate(keys) if k not in memo]
    if new:
        at = np.asarray(new)
        t = price_best(_ENGINE_NAMES[kind], *(x[at] for x in queries),
                       fabric=cluster.fabric, nccl_p2p=kind != "all_to_all_wire").time_s
        memo.update(zip((keys[i] for i in new), np.asarray(t, dtype=np.float64).tolist(),
                        strict=True))
    return np.array([memo[k] for k in keys], dtype=np.float64)


def ranks_per_node(stride: Any, size: Any, domain: int) -> Any:
    """Members of a group (``size`` ranks, ``stride`` apart) that share one NVLink domain."""
    stride = np.asarray(stride, dtype=np.float64)
    return np.where(stride * size <= domain, size, np.maximum(1.0, np.floor(domain / stride)))


def dispatch_copies(m: ModelSpec, ep: Any, ranks_per_domain: Any) -> Any:
    """Copies of a token's hidden state Megatron-Core's all-to-all dispatcher sends (ep_dispatch
    per_expert): one row per (token, expert) pair, top_k, wherever the experts sit. Node-limited
    routing (DeepSeek-V3: 4 of 8 groups) bounds the nodes a token reaches, which only a
    per-destination dispatcher turns into fewer copies (:func:`dedup_buffers`)."""
    del ranks_per_domain  # the rows do not depend on where the experts sit
    k = float(m.top_k)
    return np.full(np.shape(ep), k) if np.ndim(ep) else k


EXPERT_RANKS = ("own_grid", "dp_split")


def expert_ranks(c: Any) -> str:
    """How the framework numbers the expert ranks (frameworks.toml expert_ranks): "own_grid",
    Megatron-Core from core_r0.10.0 (a second RankGenerator for the expert layers, tp = etp and
    cp = 1, order tp-cp-ep-dp-pp), or "dp_split", core_r0.8.0 / core_r0.9.0 (one grid, the EP
    digit cut out of the DP digit, after TP and CP). A profile that states neither keeps
    dp_split, the placement the planner used for every framework before issue 16's CP check."""
    return str(profile_value(getattr(c, "job", None), "expert_ranks", "dp_split"))


def ep_stride(c: Candidates) -> Any:
    """Rank stride of an EP group. "own_grid": etp (the expert grid's first digit; its cp digit
    is 1, so the group runs over CP and DP ranks alike, CP folded into it); "dp_split": tp x cp
    when the experts are split like the dense MLP (the EP digit after TP and CP), etp when
    folded (etp < tp, which only the own grid builds)."""
    if expert_ranks(c) == "own_grid":
        return np.asarray(c.etp, dtype=np.float64)
    return np.where(c.etp == c.tp, c.tp * c.cp, c.etp)


@dataclass(frozen=True)
class LayerComm:
    """Collective seconds per layer and micro-batch on one rank, before overlap (``_raw``) or
    after what compute hides, and the bytes and tiers behind them."""

    act_bytes: Any  # one gathered activation of the micro-batch (the TP collectives' size)
    tp_one: Any  # one TP/SP all-gather or reduce-scatter
    tp_f: Any  # forward TP collectives
    tp_b: Any  # backward TP collectives
    tp_rc: Any  # TP collectives repeated by recompute
    kv_bytes: Any  # K and V a ring-attention step sends
    cp_f_raw: Any
    cp_b_raw: Any
    cp_f: Any  # ring-attention traffic the attention kernel does not hide
    cp_b: Any
    cp_sent: Any  # bytes the CP exchange sends per layer and micro-batch (forward + backward)
    ep_f_raw: Any  # all-to-all dispatch and combine and the expert-TP gather, forward
    ep_b_raw: Any
    ep_meta: Any  # of ep_f_raw: the dispatcher's metadata exchange before a forward dispatch
    moe_tp_keep: Any  # share of an MoE layer's TP collectives left with EP (the attention's)
    tp_intra: Any  # tiers: True = inside one NVLink domain
    cp_intra: Any
    ep_intra: Any
    # the ring exchange runs as NCCL point-to-point kernels over the NICs (a p2p ring whose
    # group leaves the NVLink domain): compute beside it loses only the SMs those kernels hold
    # (:func:`cp_p2p_net_sm_share`), not the collectives' measured slowdown
    cp_p2p_net: Any = False
    # of ep_b_raw: the share that is the all-to-all itself where it runs as NCCL's grouped
    # send / receive over the NICs (an all-to-all dispatcher whose EP group leaves the NVLink
    # domain), 0 elsewhere; and the SMs its kernel holds (:func:`ep_a2a_net_sm_share`)
    ep_a2a_net_share: Any = 0.0
    ep_a2a_net_sm: Any = 0.0


def cp_p2p_net_sm_share(gpu: Any) -> float:
    """Share of the SMs the NCCL send and receive kernels of one ring-attention step hold when
    both peers sit across the network: planner.toml [overlap] cp_p2p_net_ctas blocks (a send
    and a receive, at most 2 channels each, one block per channel) over the GPU's sm_count. A
    GPU without an SM count keeps the collectives' slowdown (planner.toml compute_slowdown)."""
    ov = constants()["overlap"]
    n = getattr(gpu, "sm_count", None)
    if not n:
        return float(ov["compute_slowdown"])
    return min(1.0, float(ov["cp_p2p_net_ctas"]) / float(n))


def ep_a2a_net_sm_share(gpu: Any, n_nodes: Any) -> Any:
    """Share of the SMs the NCCL kernel of one all-to-all holds when its group spans ``n_nodes``
    NVLink domains (torch's all_to_all_single: one grouped ncclSend / ncclRecv to every peer):
    planner.toml [overlap] ep_a2a_net_ctas_per_node blocks for each node the group spans (NCCL
    gives every peer at the same node distance the same channel base and an operation with a
    network peer 2 channels, one block each) over the GPU's sm_count. A GPU without an SM count
    keeps the collectives' slowdown (planner.toml compute_slowdown)."""
    ov = constants()["overlap"]
    n = getattr(gpu, "sm_count", None)
    if not n:
        return np.full(np.shape(n_nodes), float(ov["compute_slowdown"])) if np.ndim(n_nodes) \
            else float(ov["compute_slowdown"])
    return np.minimum(1.0, float(ov["ep_a2a_net_ctas_per_node"])
                      * np.asarray(n_nodes, dtype=np.float64) / float(n))


def _tp_terms(c: Candidates) -> tuple[Any, Any, Any, Any, Any]:
    act_bytes = c.e_a * c.T * c.h
    tp_one = collective_time("all_gather", act_bytes, c.tp, ranks_per_node(1, c.tp, c.dom), c.cl)
    tp_f = TP_FWD_COLLECTIVES * tp_one
    tp_b = tp_bwd_collectives(c.job) * tp_one
    # the op-level policy keeps reduce-scatter outputs and repeats the all-gathers (half of them)
    # (full recompute of N layers per chunk: that share of the layers)
    tp_rc = c.full_share * tp_f + np.where(c.rc == 3, 0.5 * tp_f, 0.0)
    return act_bytes, tp_one, tp_f, tp_b, tp_rc


def reached(n_experts: float, top_k: float, groups: Any) -> Any:
    """Expected number of ``groups`` equal groups of experts (GPUs or nodes) that a token's
    ``top_k`` distinct experts reach, routing uniform: groups x (1 - P(a group gets none)),
    P = prod_{i<k} (E - E/groups - i) / (E - i)."""
    g = np.asarray(groups, dtype=np.float64)
    miss = np.ones_like(g)
    for i in range(int(top_k)):
        miss = miss * np.clip((n_experts - n_experts / g - i) / (n_experts - i), 0.0, 1.0)
    return g * (1.0 - miss)


def dedup_buffers(c: Candidates, r_ep: Any) -> tuple[Any, Any, Any]:
    """(network buffer per rank, nodes of the EP group, NVLink buffer per rank) of one dispatch
    as DeepEP-class kernels send it (frameworks.toml ep_dispatch = per_destination, or a recipe
    whose dispatcher is flex with DeepEP / Hybrid-EP): a token goes once to every node its
    experts reach (to the GPU of the same in-node index; the copy for its own node stays local)
    and, inside each node, once to every GPU its experts reach. A rank's t tokens reach
    ``nodes`` nodes (node-limited routing caps them at groups_per_token) and ``gpus`` GPUs on
    average, so it puts t nodes rows on the network and, as the forwarder for its in-node index,
    receives from each of the n nodes t gpus / n rows for its node's GPUs: t gpus rows on NVLink
    (t = T / sp_div tokens of e_a h bytes)."""
    t_bytes = c.e_a * (c.T / c.sp_div) * c.h
    nodes, n_nodes, gpus = dedup_rows(c.m, c.ep, r_ep)
    return t_bytes * nodes, n_nodes, t_bytes * gpus


def dedup_rows(m: ModelSpec, ep: Any, r_ep: Any) -> tuple[Any, Any, Any]:
    """(nodes a token reaches, nodes of the EP group, GPUs a token reaches) of a per-destination
    dispatch over ``ep`` ranks, ``r_ep`` of them per NVLink domain (:func:`dedup_buffers`: the
    rows per token each stage carries)."""
    n_nodes = np.maximum(ep / r_ep, 1.0)
    nodes = reached(float(m.n_experts), float(m.top_k), n_nodes)
    if m.expert_groups and m.groups_per_token and m.groups_per_token < m.expert_groups:
        # node-limited routing picks groups_per_token of the expert_groups groups, then the
        # experts inside them: where each node holds whole groups the nodes reached are those
        # of the picked groups, reached(G, g, nodes); a group spread over several nodes still
        # caps them at g
        G, g = float(m.expert_groups), float(m.groups_per_token)
        whole = (n_nodes <= G) & (np.mod(G, n_nodes) == 0)
        nodes = np.minimum(nodes, np.where(whole, reached(G, g, n_nodes), g))
    gpus = reached(float(m.n_experts), float(m.top_k), ep)
    return nodes, n_nodes, gpus


def kernel_rate(kernel: str, call: str, size: Any, stage: str = "network") -> Any:
    """A per-destination dispatch kernel's measured bandwidth (``call`` dispatch or combine) as a
    fraction of the bandwidth it was measured on, at ``size``: for the network stage
    (collectives.toml [ep_dispatch_kernel.<kernel>]) the nodes the group spans, over the
    measuring NIC's line rate; for the NVLink stage ([ep_dispatch_nvlink.<kernel>]) the ranks of
    one domain, over the measuring GPU's scale-up bandwidth per direction (gpus.toml).
    Interpolated in log size between the measured sizes and held at the ends. In the kernels'
    own byte count (:func:`dedup_buffers`' buffers: the own node's, or own rank's, copy
    included)."""
    from ...specs import get_gpu
    from ..collectives import _consts

    if stage == "network":
        e = _consts()["ep_dispatch_kernel"][kernel]
        xs, ref = e["nodes"], float(e["nic_bytes_per_s"])
    elif stage == "low_latency":
        e = _consts()["ep_dispatch_lowlatency"][kernel]
        xs, ref = e["ranks"], float(e["nic_bytes_per_s"])
    else:
        e = _consts()["ep_dispatch_nvlink"][kernel]
        xs, ref = e["ranks"], float(get_gpu(e["gpu"]).scale_up_bytes_per_s)
    rate = np.asarray(e[f"{call}_bytes_per_s"], dtype=np.float64) / ref
    n = np.log(np.maximum(np.asarray(size, dtype=np.float64), 1.0))
    return np.interp(n, np.log(np.asarray(xs, dtype=np.float64)), rate)


def network_stage_time(c: Candidates, rdma_buf: Any, n_nodes: Any, call: str) -> Any:
    """Seconds of a per-destination dispatch's (or combine's) network stage: the wire as the
    collectives engine prices an all-to-all of ``rdma_buf`` over one rank per node, and no less
    than the dispatcher kernel's own measured rate at that many nodes allows (:func:`kernel_rate`
    x the job's scale-out bandwidth per GPU, over the same counted bytes, the own node's copy
    included as the kernels' benchmarks count it). One node: no network stage."""
    return kernel_network_stage(ep_dispatch_kernel(c.job, c.gpu.id), c.cl, rdma_buf, n_nodes,
                                call)


def nic_bytes_per_s(cl: Cluster) -> float:
    """A GPU's scale-out bandwidth per direction (its NICs together)."""
    return float(cl.inter.bytes_per_s_per_direction * cl.nics_per_gpu)


def kernel_network_stage(kernel: str | None, cl: Cluster, rdma_buf: Any, n_nodes: Any,
                         call: str) -> Any:
    """:func:`network_stage_time` for a named dispatcher kernel (None: the wire alone) on a
    cluster, without a training candidate (the serving model calls it too)."""
    wire = collective_time("all_to_all_wire", rdma_buf, n_nodes, 1.0, cl)
    if kernel is None:
        return wire
    return np.maximum(wire, kernel_network_floor(kernel, nic_bytes_per_s(cl), rdma_buf, n_nodes,
                                                 call))


def kernel_network_floor(kernel: str, nic_bytes: float, rdma_buf: Any, n_nodes: Any,
                         call: str) -> Any:
    """The least seconds a per-destination kernel's network stage takes: ``rdma_buf`` (counted
    as the kernels' benchmarks count it, the own node's copy included) at the kernel's measured
    rate at ``n_nodes`` nodes (:func:`kernel_rate`) times ``nic_bytes`` per second per GPU; 0 on
    one node. Every model of the normal kernels' network stage (the step model, ``plan serve``,
    ``moe serve``) floors its wire with this."""
    measured = (np.asarray(rdma_buf, dtype=np.float64)
                / (kernel_rate(kernel, call, n_nodes) * nic_bytes))
    return np.where(np.asarray(n_nodes) > 1, measured, 0.0)


def kernel_nvlink_floor(kernel: str, up: float, nvl_buf: Any, r_ep: Any, call: str) -> Any:
    """The least seconds a per-destination kernel's NVLink stage takes: ``nvl_buf`` (the rows a
    rank receives, its own included) at the kernel's measured NVLink rate at ``r_ep`` ranks of
    one domain (:func:`kernel_rate`, ``stage="nvlink"``) times ``up`` bytes per second per
    direction; 0 for one rank."""
    measured = (np.asarray(nvl_buf, dtype=np.float64)
                / (kernel_rate(kernel, call, r_ep, "nvlink") * float(up)))
    return np.where(np.asarray(r_ep) > 1, measured, 0.0)


def nvlink_stage_time(c: Candidates, nvl_buf: Any, r_ep: Any, call: str) -> Any:
    """Seconds of a per-destination dispatch's (or combine's) NVLink stage: the wire as the
    collectives engine prices an all-to-all of ``nvl_buf`` over the r ranks of a domain, and no
    less than the kernel's measured NVLink rate at r ranks allows (:func:`kernel_rate` x the
    GPU's scale-up bandwidth per direction, over the rows a rank receives, its own included,
    as the kernels' tests count them). A GPU without a scale-up link keeps the wire."""
    return kernel_nvlink_stage(ep_dispatch_kernel(c.job, c.gpu.id), c.cl,
                               c.gpu.scale_up_bytes_per_s, nvl_buf, r_ep, call)


def kernel_nvlink_stage(kernel: str | None, cl: Cluster, up: Any, nvl_buf: Any, r_ep: Any,
                        call: str) -> Any:
    """:func:`nvlink_stage_time` for a named dispatcher kernel on a cluster whose GPU has
    ``up`` bytes/s of scale-up bandwidth per direction (None or 0: the wire alone)."""
    wire = collective_time("all_to_all_wire", nvl_buf, r_ep, r_ep, cl)
    if kernel is None or not up:
        return wire
    return np.maximum(wire, kernel_nvlink_floor(kernel, up, nvl_buf, r_ep, call))


def low_latency_stage_time(kernel: str, cl: Cluster, nbytes: Any, ep: Any, call: str) -> Any:
    """Seconds of a low-latency dispatch (or combine) call of ``nbytes`` over ``ep`` ranks: the
    bytes at the kernel's measured rate at that many EP ranks (:func:`kernel_rate`,
    ``stage="low_latency"``: the measured bandwidth over the measuring NIC's line rate) times
    the cluster's scale-out bandwidth per GPU. The kernels send every (token, expert) pair as
    its own row, local ones included, and their benchmark counts those bytes (DeepEP
    tests/test_low_latency.py), so ``nbytes`` is tokens x top_k x row bytes. Measured at one
    batch size (collectives.toml [ep_dispatch_lowlatency.*] tokens_per_rank) and applied as a
    byte rate at every batch (assumption: a smaller batch keeps the rate, not the latency)."""
    rate = kernel_rate(kernel, call, ep, "low_latency") * nic_bytes_per_s(cl)
    return np.where(np.asarray(ep) > 1, np.asarray(nbytes, dtype=np.float64) / rate, 0.0)


def _dedup_dispatch(c: Candidates, r_ep: Any, straggle: Any = 1.0) -> Any:
    """One all-to-all of a per-destination dispatcher (the mean of its dispatch and its combine,
    which move the same rows; :func:`dedup_buffers`): the network stage
    (:func:`network_stage_time`) and the NVLink stage (:func:`nvlink_stage_time`) pipeline, so
    the longer sets the time. ``straggle`` (1 + v) scales both buffers to the slowest EP rank's
    (an upper bound: a node's rows aggregate its ranks' loads, which spread less)."""
    rdma_buf, n_nodes, nvl_buf = dedup_buffers(c, r_ep)
    rdma_buf, nvl_buf = rdma_buf * straggle, nvl_buf * straggle
    d = np.maximum(network_stage_time(c, rdma_buf, n_nodes, "dispatch"),
                   nvlink_stage_time(c, nvl_buf, r_ep, "dispatch"))
    k = np.maximum(network_stage_time(c, rdma_buf, n_nodes, "combine"),
                   nvlink_stage_time(c, nvl_buf, r_ep, "combine"))
    return 0.5 * (d + k)


def dispatch_metadata(c: Candidates, r_ep: Any) -> Any:
    """Seconds of the dispatcher's metadata exchange before each forward dispatch, for the
    dispatchers a recipe names (frameworks.toml moe_recipes), from their source:

    * flex with Hybrid-EP: its preprocessing needs every EP rank's routing map. DeepEP
      hybrid-ep ``HybridEpBuffer.dispatch`` (deep_ep/hybrid_ep_buffer.py) all-gathers the
      [t, E] boolean map of each of the ep ranks into a [t ep, E] one (the C++ executor's
      ``allgather_routing_map``: NCCL across nodes, its own NVLink all-gather inside one) before
      the metadata kernel reads it (source ``hybrid-ep-metadata-preprocess``): t E ep bytes
      gathered (1 byte a bool; t = T / sp_div tokens);
    * alltoall (Megatron-Core 0.16.1 ``MoEAlltoAllTokenDispatcher.preprocess``): the [E] int64
      tokens-per-expert counts all-gathered over the expert-TP x EP group, E 8 ep etp bytes
      (source ``megatron-core-alltoall-preprocess``);
    * flex with DeepEP: its layout kernel is local and the counts travel inside the dispatch
      kernel's notify stage (nothing apart here).

    Per MoE layer and micro-batch, priced by the collectives engine. The backward dispatch and
    the combines reuse the handle / splits; a recomputed MoE layer dispatches, and exchanges,
    again (the caller's share). The host synchronisation each of them ends in (tokens per
    expert read on the host for dropless routing) is priced apart (step/host.py)."""
    kind = moe_dispatcher(c.job, c.gpu.id)
    z = np.zeros_like(np.asarray(c.ep, dtype=np.float64))
    if kind == "flex-hybridep":
        gathered = (c.T / c.sp_div) * float(c.m.n_experts) * c.ep
        return np.where(c.ep > 1, collective_time("all_gather", gathered, c.ep, r_ep, c.cl), 0.0)
    if kind == "alltoall":
        etp = getattr(c, "etp", 1.0)
        n = c.ep * etp
        return np.where(n > 1, collective_time("all_gather", 8.0 * float(c.m.n_experts) * n, n,
                                               np.minimum(r_ep * etp, n), c.cl), 0.0)
    return z


def _ep_terms(c: Candidates) -> tuple[Any, Any, Any, Any, Any]:
    """With sequence parallelism a rank holds T / tp tokens of the micro-batch and dispatches
    only those; experts split over etp ranks then gather the tokens an EP rank received across
    those etp ranks (and reduce-scatter them on the way back) inside the node. The forward also
    carries the dispatcher's metadata exchange (:func:`dispatch_metadata`), returned apart as
    the third term (it is inside the first); the fourth is the all-to-all's own part of the
    second (dispatch and combine, without the expert-TP gather) and the fifth the EP ranks per
    NVLink domain. Each all-to-all lasts as long as the EP rank that
    receives the most copies: the per-rank buffer and the expert-TP gather are priced at
    (1 + v) times the mean (imbalance.ep_straggler; the engine gives every rank that buffer, an
    upper bound where one rank alone is the straggler)."""
    m = c.m
    if not m.is_moe:
        z = np.zeros_like(c.tp)
        return z, z, z, z, np.ones_like(z)
    r_ep = ranks_per_node(ep_stride(c), c.ep, c.dom)
    straggle = 1.0 + ep_straggler(c)
    if ep_dispatch(c.job, c.gpu.id) == "per_destination":
        a2a = _dedup_dispatch(c, r_ep, straggle)
    else:
        a2a = collective_time("all_to_all", c.e_a * (c.T / c.sp_div) * straggle
                              * dispatch_copies(m, c.ep, r_ep) * c.h, c.ep, r_ep, c.cl)
    e_gather = np.where(c.ep > 1, collective_time("all_gather",
                                                  c.e_a * c.T * c.etp / c.tp * m.top_k * c.h
                                                  * straggle,
                                                  c.etp, ranks_per_node(1, c.etp, c.dom), c.cl),
                        0.0)
    raw = 2 * a2a + 2 * e_gather
    meta = dispatch_metadata(c, r_ep)
    return raw + meta, raw, meta, 2 * a2a, r_ep


def _ring_exposed(cp: Any, t_step: Any, blocks: tuple[Any, Any]) -> Any:
    """Ring-attention transfer time the attention calls do not hide, step by step (Transformer
    Engine AttnFuncWithCPAndKVP2P): the cp - 1 K/V transfers each run beside one call, the
    first beside the diagonal call, the others beside the off-diagonal ones; a transfer longer
    than its call stalls the ring by the difference. Backward each step sends K, V and the
    accumulated dK, dV (``t_step`` doubled by the caller)."""
    diag, off = blocks
    return np.where(cp > 1, np.maximum(0.0, t_step - diag)
                    + np.maximum(cp - 2, 0.0) * np.maximum(0.0, t_step - off), 0.0)


def _cp_terms(c: Candidates, a: AttentionTerms, cp_intra: Any) -> tuple[Any, ...]:
    """(K/V bytes of one chunk, forward raw, backward raw, forward exposed, backward exposed,
    bytes sent per layer) of the CP exchange the framework runs (frameworks.toml cp_exchange):

    * ring (Transformer Engine p2p): cp - 1 K/V transfers, each beside one attention call
      (:func:`_ring_exposed`); backward K, V and the travelling dK, dV;
    * all_gather (torchtitan's default rotate method, torch's context_parallel): every chunk's
      K/V gathered while the local (diagonal) call runs (with the profile's cp_gather_overlap
      false, as Meta's Llama 3 stack: gathered before any attention call, all of it exposed); backward the gather again beside the
      diagonal call, and dK, dV passed to the next rank after every call (in the profile's
      cp_grad_bytes per element: torch accumulates them in fp32), each hidden behind the next
      call, the last exposed. Under torch.compile (kernels fused) with the profile's
      cp_compiled_overlap false, the traced loop waits for every collective where it is issued:
      the gathers and every dK, dV transfer exposed in full;
    * all_to_all (DeepSpeed Ulysses): Q, K, V re-split from sequence to heads before the
      attention and the output back after it, and the mirror in the backward, none of it beside
      compute (each waits on its data)."""
    m, ms, tp, cp = c.m, c.ms, c.tp, c.cp
    kv_bytes = c.e_a * c.b * (c.S / cp) * ms.kv_dim / np.minimum(tp, max(m.n_kv_heads, 1)) \
        if not m.kv_lora_rank else c.e_a * c.b * (c.S / cp) * ms.kv_dim
    if profile_value(c.job, "cp_kv_heads", "kv") == "query" and not m.kv_lora_rank:
        # K and V repeated to every query head before the call (torchtitan's repeat_kv): the
        # exchange moves the repeated tensors, split over TP like the query heads
        kv_bytes = c.e_a * c.b * (c.S / cp) * sdpa_kv_width(c) / tp
    mode = profile_value(c.job, "cp_exchange", "ring")
    r_cp = ranks_per_node(tp, cp, c.dom)
    if mode == "all_to_all":
        width = (ms.qk_dim + ms.kv_dim + ms.v_dim) / tp
        f = collective_time("all_to_all", c.e_a * c.T * width, cp, r_cp, c.cl)
        sent = 2 * (cp - 1) / cp * c.e_a * c.T * width
        return kv_bytes, f, f, f, f, sent
    if mode == "all_gather":
        ag = collective_time("all_gather", kv_bytes * cp, cp, r_cp, c.cl)
        # the profile's cp_gather_overlap false: the forward gather completes before the local
        # Q chunk's attention starts, nothing beside it (Dubey et al. 2024, Sec. 3.3.2: the
        # all-gather latency sits on the critical path)
        # under torch.compile with the profile's cp_compiled_overlap false, the traced ring's
        # collectives are waited where they are issued: nothing of them beside any call
        traced = (getattr(c.job, "kernels", None) == "fused"
                  and not profile_value(c.job, "cp_compiled_overlap", True))
        hide_f = a.blk_f[0] if (profile_value(c.job, "cp_gather_overlap", True)
                                and not traced) else 0.0
        f_exp = np.where(cp > 1, np.maximum(0.0, ag - hide_f), 0.0)
        # backward: the gather again beside the diagonal call; dK, dV travel the ring one step
        # per call (torch's dkv rotater is all-to-all, a permute to the next rank), each waited
        # for after the next call, the last one right after the loop (nothing beside it)
        g_bytes = kv_bytes / c.e_a * float(profile_value(c.job, "cp_grad_bytes", c.e_a))
        t_g = collective_time("send_recv", g_bytes, 2.0, np.where(cp_intra, 2.0, 1.0), c.cl)
        hide_b = (0.0, 0.0) if traced else a.blk_b
        b_exp = np.where(cp > 1, np.maximum(0.0, ag - hide_b[0])
                         + (cp - 1) * np.maximum(0.0, t_g - hide_b[1]) + t_g, 0.0)
        b_raw = np.where(cp > 1, ag + cp * t_g, 0.0)
        return (kv_bytes, ag, b_raw, f_exp, b_exp,
                np.where(cp > 1, 2 * (cp - 1) * kv_bytes + cp * g_bytes, 0.0))
    step = collective_time("send_recv", kv_bytes, 2.0, np.where(cp_intra, 2.0, 1.0), c.cl)
    return (kv_bytes, (cp - 1) * step, 2 * (cp - 1) * step, _ring_exposed(cp, step, a.blk_f),
            _ring_exposed(cp, 2 * step, a.blk_b), 3 * (cp - 1) * kv_bytes)


def layer_comm(c: Candidates, a: AttentionTerms) -> LayerComm:
    """The in-layer collectives of every candidate."""
    tp, cp = c.tp, c.cp
    act_bytes, tp_one, tp_f, tp_b, tp_rc = _tp_terms(c)
    cp_intra = tp * cp <= c.dom
    kv_bytes, cp_f_raw, cp_b_raw, cp_f, cp_b, cp_sent = _cp_terms(c, a, cp_intra)
    ep_f_raw, ep_b_raw, ep_meta, ep_a2a, r_ep = _ep_terms(c)
    ring_net = (profile_value(c.job, "cp_exchange", "ring") == "ring") & ~np.asarray(cp_intra)
    # an all-to-all dispatcher (NCCL send / receive) whose EP group leaves the NVLink domain
    ep_nodes = np.maximum(c.ep / r_ep, 1.0)
    a2a_net = ((ep_dispatch(c.job, c.gpu.id) != "per_destination") & (c.ep > 1)
               & (ep_nodes > 1))
    a2a_net_share = np.where(a2a_net, ep_a2a / np.maximum(ep_b_raw, 1e-30), 0.0)
    return LayerComm(
        act_bytes=act_bytes, tp_one=tp_one, tp_f=tp_f, tp_b=tp_b, tp_rc=tp_rc,
        kv_bytes=kv_bytes, cp_f_raw=cp_f_raw, cp_b_raw=cp_b_raw, cp_f=cp_f, cp_b=cp_b,
        cp_sent=cp_sent, ep_f_raw=ep_f_raw, ep_b_raw=ep_b_raw, ep_meta=ep_meta,
        # with EP an MoE layer's tokens move by dispatch and the expert-TP gather (in ep_f_raw),
        # so of the layer's TP collectives only the attention block's half remains
        moe_tp_keep=np.where(c.ep > 1, 0.5, 1.0),
        tp_intra=tp <= c.dom, cp_intra=cp_intra, ep_intra=ep_stride(c) * c.ep <= c.dom,
        cp_p2p_net=ring_net & (cp > 1), ep_a2a_net_share=a2a_net_share,
        ep_a2a_net_sm=ep_a2a_net_sm_share(c.gpu, ep_nodes))


@dataclass(frozen=True)
class LayerTime:
    """One layer per micro-batch on one rank: compute and the communication left exposed."""

    compute: Any
    tp: Any  # exposed TP/SP collectives
    cp: Any  # exposed ring-attention traffic
    ep: Any  # exposed all-to-all and expert-TP gather
    fwd: Any  # forward pass (compute and exposed communication)
    bwd: Any  # backward pass, recompute included
    raw_comm: Any  # every collective, nothing hidden
    hidden: Any  # communication that runs beside compute (it slows that compute down)
    # of the CP traffic: a p2p ring's transfers over the NICs that run beside compute (not in
    # ``hidden``: they slow it by the SMs their NCCL kernels hold, cp_p2p_net_sm_share)
    hidden_cp_net: Any
    attention: Any  # of the compute: attention kernels
    nongemm: Any  # of the compute: memory-bound kernels
    wgrad: Any  # weight-gradient GEMMs
    host: Any = 0.0  # host time exposed: after the dispatcher's wait, and the eager layer's floor
    # beyond its GPU time (step/host.py)
    host_ops: Any = 0.0  # kernels launched after that wait, one forward
    # of the EP traffic: an all-to-all dispatcher's send / receive over the NICs that runs beside
    # compute (not in ``hidden``: it slows that compute by the SMs its NCCL kernel holds,
    # ep_a2a_net_sm_share), and that share itself
    hidden_ep_net: Any = 0.0
    ep_net_sm: Any = 0.0

    @property
    def total(self) -> Any:
        return self.compute + self.tp + self.cp + self.ep + self.host


def _overlapped(comm: Any, gemm: Any, splits: Any) -> Any:
    """Exposed seconds of one collective split in ``splits`` chunks and pipelined with the GEMM
    that consumes or produces it: max(comm, gemm) + min(comm, gemm) / splits - gemm (the first
    chunk's transfer, or the last chunk's GEMM, cannot overlap; a bulk overlap has no chunks)."""
    return np.maximum(comm - gemm, 0.0) + np.minimum(comm, gemm) / splits


@dataclass(frozen=True)
class TPChunks:
    """The TP-overlapped GEMMs as Transformer Engine's userbuffers runs them (module/base.py
    initialize_ub and common/comm_gemm_overlap/comm_gemm_overlap.cpp, v1.11 to main): a ring
    exchange all-gather (QKV and MLP-in forward, output-projection and MLP-out dgrad) issues its
    GEMM as tp launches of T / tp token rows each (split_overlap_ag: one per gathered chunk); a
    "pipeline" reduce-scatter (output projection and MLP-out forward) as 4 launches of a quarter
    of the output columns each (split_overlap_rs). Each launch is priced at its own shape by the
    shape model (gemm.py: tile padding, wave quantization), so a chunk too small to fill the SMs
    costs what it costs (source ``te-comm-gemm-overlap-chunks``). A profile with
    ``tp_overlap_kind = "symm_mem"`` (torch Inductor's micro-pipeline TP, source
    ``torch-micro-pipeline-tp``) launches its reduce-scatter GEMMs as tp blocks of T / tp rows,
    adds the reduction kernel over the stacked partials to the forward, and leaves the
    backward's QKV / MLP-in input-gradient reduce-scatter unfused (``bwd_rs_fused``). Seconds
    per layer and micro-batch on one rank."""

    fwd: tuple[Any, Any, Any, Any]  # QKV, output projection, MLP in, MLP out, as launched
    dgrad: tuple[Any, Any]  # output-projection and MLP-out dgrad, as launched
    extra_f: Any  # what the chunked launches add over the unsplit GEMMs, forward
    extra_b: Any  # the same for the backward (the two ring-exchange dgrads)
    extra_mlp_f: Any  # of extra_f: the dense MLP's (what selective "mlp" recompute repeats)
    rs_splits: Any = 4.0  # chunks of a forward reduce-scatter (4 columns, or tp rows)
    bwd_rs_fused: bool = True  # the QKV / MLP-in input-gradient reduce-scatter overlapped


def tp_chunks(c: Candidates, lc: LayerCompute, moe: bool) -> TPChunks:
    """The GEMMs beside the TP collectives at the shapes TE's userbuffers overlap launches them
    (:class:`TPChunks`). The QKV chunks apply to standard attention (an MLA block's projections
    are other linears); an MoE layer's expert GEMMs are not TE linears, so its MLP pair keeps the
    unsplit times."""
    from .gemm import gemm_time

    ms, T, h, tp = c.ms, c.T, c.h, c.tp
    p, e, dt, gpu, r = c.peak, c.e_mm, c.job.precision, c.gpu, c.fp8_rate_at
    split = float(constants()["overlap"]["tp_pipeline_splits"])
    g = lc.tp_gemm_f
    symm = profile_value(c.job, "tp_overlap_kind", "userbuffers") == "symm_mem"

    def t(M: Any, N: Any, K: Any) -> Any:  # at the fp8 recipe's rate, as gemm3 prices g
        return gemm_time(M, N, K, gpu, p, e, dtype_name=dt, rate=r(K))

    def ring(N: Any, K: Any) -> Any:  # tp launches of T / tp rows
        return tp * t(T / tp, N, K)

    def rs(N: Any, K: Any) -> Any:  # a reduce-scatter's GEMM as the overlap launches it
        # userbuffers: `split` launches of N / split output columns; micro-pipeline TP
        # (_fused_matmul_reduce_scatter_impl): tp launches of T / tp rows
        return ring(N, K) if symm else split * t(T, N / split, K)

    # micro-pipeline TP sums the tp partials it received in one kernel: it reads the stacked
    # T x h partials and writes the T / tp x h shard (e_a bytes each), beside no collective
    rs_sum = np.where(tp > 1, c.e_a * T * h * (1 + 1 / tp) / c.hbm, 0.0) if symm else 0.0
    mla = bool(c.m.kv_lora_rank)
    qkv = g[0] if mla else np.where(tp > 1, ring(ms.attn_in_n / tp, h), g[0])
    o_k = ms.attn_out_k / tp
    proj = np.where(tp > 1, rs(h, o_k), g[1])
    proj_dg_full = t(T, o_k, h)
    proj_dg = np.where(tp > 1, ring(o_k, h), proj_dg_full)
    if moe:
        fc1, fc2 = g[2], g[3]
        fc2_dg = fc2_dg_full = 0.5 * lc.tp_gemm_b[3]  # as _tp_exposed prices it unsplit
        mlp_sum = 0.0
    else:
        f_k = ms.ffn / tp
        fc1 = np.where(tp > 1, ring(ms.up_k * f_k, h), g[2])
        fc2 = np.where(tp > 1, rs(h, f_k), g[3])
        fc2_dg_full = t(T, f_k, h)
        fc2_dg = np.where(tp > 1, ring(f_k, h), fc2_dg_full)
        mlp_sum = rs_sum
    extra_mlp = (fc1 - g[2]) + (fc2 - g[3]) + mlp_sum
    return TPChunks(fwd=(qkv, proj, fc1, fc2), dgrad=(proj_dg, fc2_dg),
                    extra_f=(qkv - g[0]) + (proj - g[1]) + rs_sum + extra_mlp,
                    extra_b=(proj_dg - proj_dg_full) + (fc2_dg - fc2_dg_full),
                    extra_mlp_f=extra_mlp, rs_splits=tp if symm else split,
                    bwd_rs_fused=not symm)


def _tp_exposed(c: Candidates, lc: LayerCompute, cm: LayerComm, k_tp: Any,
                ch: TPChunks | None = None) -> tuple[Any, Any]:
    """(forward, backward) TP seconds left exposed per layer where the framework overlaps them
    (Transformer Engine userbuffers, module/base.py initialize_ub at v1.11): forward the QKV and
    MLP-in all-gathers by ring exchange in tp chunks, the output-projection and MLP-out
    reduce-scatters pipelined in 4; backward the gradient all-gathers of the output projection
    and MLP-out by ring exchange beside their dgrad GEMM (half the backward GEMMs), the QKV and
    MLP-in reduce-scatter and input re-gather in bulk beside that block's dgrad + wgrad. An MoE
    layer with EP keeps only the attention block's pairs (``k_tp`` = 0.5). With ``ch`` (the
    GEMMs as the overlap launches them, :func:`tp_chunks`) each collective hides behind its
    chunked GEMM and the ring-exchange dgrads are the dgrad GEMMs themselves; without it, the
    unsplit GEMMs, and half the backward GEMMs for those dgrads. Under micro-pipeline TP
    (``ch.rs_splits`` = tp, ``ch.bwd_rs_fused`` false) the forward reduce-scatters pipeline in
    tp row blocks and the backward's input-gradient reduce-scatter is exposed whole."""
    one, tp = cm.tp_one, c.tp
    mlp = 2 * k_tp - 1  # 1 with the MLP's collectives, 0 without
    gb = lc.tp_gemm_b
    if ch is None:
        g, dg = lc.tp_gemm_f, (0.5 * gb[1], 0.5 * gb[3])
        pipe, bulk_rs = float(constants()["overlap"]["tp_pipeline_splits"]), True
    else:
        g, dg, pipe, bulk_rs = ch.fwd, ch.dgrad, ch.rs_splits, ch.bwd_rs_fused
    f = (_overlapped(one, g[0], tp) + _overlapped(one, g[1], pipe)
         + mlp * (_overlapped(one, g[2], tp) + _overlapped(one, g[3], pipe)))

    def bulk(gemm: Any) -> Any:  # the input-gradient reduce-scatter and the input re-gather
        if bulk_rs:
            return _overlapped(2 * one, gemm, np.inf)
        # micro-pipeline TP fuses a reduce-scatter only with the one matmul that produces its
        # input (micro_pipeline_tp.py _find_producer_matmul); the QKV and MLP-in input gradient
        # is a sum over separate linears (wq, wk, wv; w1, w3), so its reduce-scatter runs alone
        return one + _overlapped(one, gemm, np.inf)

    b = (bulk(gb[0]) + _overlapped(one, dg[0], tp)
         + mlp * (bulk(gb[2]) + _overlapped(one, dg[1], tp)))
    return f, b


def _ep_overlapped(lc: LayerCompute, e_f: Any, e_b: Any, rcx: Any,
                   meta: Any = 0.0, sm_share: float = 0.0) -> tuple[Any, Any]:
    """(forward, backward) all-to-all seconds left exposed where a forward layer of one
    micro-batch runs beside a backward layer of another, sub-module by sub-module as
    Megatron-Core 0.16 schedules it (models/common/model_chunk_schedule_plan.py
    TransformerLayerSchedulePlan.run; the DeepSeek-V3 report's Fig. 4 pairs the same parts):

        comm stream: combine_bwd | dispatch_fwd, dispatch_bwd | combine_fwd
        comp stream: attn_fwd    | mlp_bwd, mlp_bwd_dw, mlp_fwd | attn_bwd

    each phase lasts as long as its longer stream. Dispatch and combine are half of each
    direction's all-to-all traffic (``e_f``, ``e_b``: the all-to-all and the expert-TP gather,
    the backward with what full recompute repeats); the middle phase's excess is split evenly.
    ``meta`` (inside ``e_f``), the dispatcher's metadata exchange, belongs to dispatch_fwd.

    The dispatch and combine kernels hold ``sm_share`` of the SMs while they run (frameworks.toml
    ``ep_comm_sms``: DeepEP's and Hybrid-EP's kernels keep one block per SM for the call), so
    the compute beside them runs on the rest, at (1 - s) of its rate: work w beside a kernel of
    c seconds, both starting together, ends at max(c, w + s c) (w + s c while the compute
    outlasts the kernel, c once c >= w / (1 - s)). A phase's exposed time is then
    max(c - w, s c); the metadata exchange (NCCL) is not charged."""
    attn_f, attn_b = lc.attn_f, lc.attn_b
    mlp_f = lc.fwd - attn_f
    mlp_b = lc.bwd + rcx - attn_b
    a2a_f = e_f - meta
    s = sm_share
    p1 = np.maximum(0.5 * e_b - attn_f, s * 0.5 * e_b)
    p2 = np.maximum(0.5 * (a2a_f + e_b) + meta - (mlp_f + mlp_b), s * 0.5 * (a2a_f + e_b))
    p3 = np.maximum(0.5 * a2a_f - attn_b, s * 0.5 * a2a_f)
    p1, p2, p3 = np.maximum(0.0, p1), np.maximum(0.0, p2), np.maximum(0.0, p3)
    return p3 + 0.5 * p2, p1 + 0.5 * p2


def ep_alone_share(pp: Any, mb: Any) -> Any:
    """Share of the micro-batch passes whose all-to-all has no partner to hide behind under
    Megatron-Core's combined 1F1B (pipeline_parallel/combined_1f1b.py, EP A2A overlap): without
    pipelining the first forward and the last backward of the m micro-batches run alone (1 / m);
    interleaved, stage r runs its warmup, (pp - r - 1) 2 + (vpp - 1) pp forward chunks plus the
    one the overlap adds (schedules.py num_warmup_microbatches += 1), alone, and as many
    backward chunks in the cooldown: pp vpp of its m vpp chunk steps on average over the
    stages, a share pp / m either way."""
    return np.minimum(1.0, np.asarray(pp, dtype=np.float64) / np.asarray(mb, dtype=np.float64))


def layer_time(c: Candidates, lc: LayerCompute, cm: LayerComm, moe: bool) -> LayerTime:
    """Combine a layer's compute with its collectives: TP and EP hidden by the framework's
    overlap shares (planner.toml [overlap]), CP behind the attention kernel, EP behind another
    micro-batch's compute where the all-to-alls are overlapped (DualPipe-style)."""
    ov = constants()["overlap"]
    tp_exp, ep_exp = 1 - ov["tp"], 1 - ov["ep"]
    fw, bw, rcx, rc = lc.fwd, lc.bwd, lc.recompute, c.rc
    e_f = cm.ep_f_raw if moe else 0.0
    e_b = cm.ep_b_raw if moe else 0.0
    k_tp = cm.moe_tp_keep if moe else 1.0
    tp_f, tp_b, tp_rc = k_tp * cm.tp_f, k_tp * cm.tp_b, k_tp * cm.tp_rc
    if recipe_overlap(c.job, c.gpu.id, "tp_overlap", False):
        ch = tp_chunks(c, lc, moe)
        xt_f, xt_b = _tp_exposed(c, lc, cm, k_tp, ch)
        xt_rc = c.full_share * xt_f + np.where(rc == 3, 0.5 * xt_f, 0.0)
        # the chunked launches' cost over the unsplit GEMMs is compute: forward, the two
        # ring-exchange dgrads, and what recompute replays (full: the forward; selective mlp:
        # the MLP's)
        fw = fw + ch.extra_f
        bw = bw + ch.extra_b
        rcx = rcx + c.full_share * ch.extra_f + c.recomputes("mlp") * ch.extra_mlp_f
    else:
        xt_f, xt_b, xt_rc = tp_exp * tp_f, tp_exp * tp_b, tp_exp * tp_rc
    # a recomputed MoE layer (full, or the selective "moe" module) dispatches again
    rc_ep = (c.full_share + c.recomputes("moe")) * e_f
    rc_cp = c.full_share * cm.cp_f
    if moe and c.job.ep_overlap:
        x_f, x_b = _ep_overlapped(lc, e_f, e_b + rc_ep, rcx, cm.ep_meta,
                                  ep_comm_sm_share(c.job, c.gpu))
        if c.job.schedule == "1f1b":
            alone = ep_alone_share(c.pp, c.mb)
            x_f = (1 - alone) * x_f + alone * ep_exp * e_f
            x_b = (1 - alone) * x_b + alone * ep_exp * (e_b + rc_ep)
        if not profile_value(c.job, "ep_overlap_full_recompute", True):
            # Megatron-Core refuses the EP A2A overlap with full recompute
            # (transformer_config.py: recompute_granularity != 'full' under
            # overlap_moe_expert_parallel_comm): such layouts run the all-to-all exposed
            refused = c.rc == 2  # the run's granularity, recomputed layer or not
            x_f = np.where(refused, ep_exp * e_f, x_f)
            x_b = np.where(refused, ep_exp * (e_b + rc_ep), x_b)
    else:
        x_f, x_b = ep_exp * e_f, ep_exp * (e_b + rc_ep)
    cp_raw = cm.cp_f_raw + cm.cp_b_raw + c.full_share * cm.cp_f_raw
    if moe:
        # the kernels after the dispatcher's host wait: the experts, the permutation and the
        # forward all-to-all traffic (flex: the combine only; the wait is inside its dispatch)
        a2a_after = (e_f - cm.ep_meta) * np.where(
            ep_dispatch(c.job, c.gpu.id) == "per_destination", 0.5, 1.0)
        host_f, host_ops = host_exposed(c, lc.experts_f + a2a_after)
    else:
        host_f, host_ops = 0.0, 0.0
    host_rc = (c.full_share + c.recomputes("moe")) * host_f  # a recomputed layer waits again
    fwd = fw + xt_f + cm.cp_f + x_f + host_f
    bwd = bw + rcx + xt_b + xt_rc + cm.cp_b + rc_cp + x_b + host_rc
    if moe:
        # an eager layer lasts at least its host time, forward and backward apart (step/host.py)
        floor_f, floor_b = eager_layer_floor(c)
        floor_b = floor_b + (c.full_share + c.recomputes("moe")) * floor_f
        over_f, over_b = np.maximum(0.0, floor_f - fwd), np.maximum(0.0, floor_b - bwd)
        fwd, bwd = fwd + over_f, bwd + over_b
        host_rc = host_rc + over_f + over_b
    cp_hid = cp_raw - (cm.cp_f + cm.cp_b + rc_cp)
    cp_net = np.where(cm.cp_p2p_net, cp_hid, 0.0)
    # the hidden EP traffic's all-to-all part, in proportion to its share of the raw EP time
    # (the expert-TP gather and the metadata exchange stay with sigma)
    ep_hid = (e_f + e_b + rc_ep) - x_f - x_b
    ep_net = (cm.ep_a2a_net_share if moe else 0.0) * ep_hid
    return LayerTime(
        compute=fw + bw + rcx,
        tp=xt_f + xt_b + xt_rc,
        cp=cm.cp_f + cm.cp_b + rc_cp,
        ep=x_f + x_b,
        fwd=fwd,
        bwd=bwd,
        raw_comm=tp_f + tp_b + tp_rc + cp_raw + (e_f + e_b + rc_ep),
        hidden=(tp_f + tp_b + tp_rc) - (xt_f + xt_b + xt_rc) + (cp_hid - cp_net)
        + ep_hid - ep_net,
        hidden_cp_net=cp_net,
        attention=lc.attention, nongemm=lc.nongemm, wgrad=lc.wgrad, host=host_f + host_rc,
        host_ops=host_ops, hidden_ep_net=ep_net,
        ep_net_sm=cm.ep_a2a_net_sm if moe else 0.0)
