"""NCCL's own cost model, as NCCL 2.21.5 evaluates it to choose an algorithm and a protocol.

NCCL does not measure anything when it picks how to run a collective: at start-up it builds a
table of (latency, bandwidth) for every (collective, algorithm, protocol) from the graphs its
topology search found, and for every call takes the pair with the least
``latency + bytes / bandwidth`` (src/graph/tuning.cc, ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``). This module restates that model over numpy arrays. Every constant is
in ``collectives.toml`` ([nccl_tuner], [nccl_search], [nccl_links]) with the file and tag it
comes from; the structure below follows the source's order of operations in our own words.

Three things are simplified and say so: the topology search is reduced to its bandwidth
arithmetic (channels x per-channel speed from NCCL's speed list, bounded by NCCL's own figures
for the GPU's links and NICs, then the channel duplication rule), the tree graph is taken equal
to the ring graph (balanced-tree pattern, no 0.85 penalty), and every node is assumed to put its
NICs on the GPUs' PCIe switches (LL128 stays enabled across nodes).

The model's *bandwidths* are NCCL's guesses, good for ranking; the times a user sees come from
the physical model in analytic/collectives.py, priced for the pair chosen here. The latency is
the same number in both: NCCL's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ..specs.sources import load_toml

if TYPE_CHECKING:
    from .collectives import Fabric

PROTO_INDEX = {"ll": 0, "ll128": 1, "simple": 2}
# the engine's algorithm names -> NCCL's
ALG_KEY = {"ring": "ring", "tree": "tree", "in-switch": "nvls", "nvls-tree": "nvls-tree"}
# collectives NCCL tunes, and which algorithms it allows for each (tuning.cc skips the rest)
TUNED: dict[str, tuple[str, ...]] = {
    "all-reduce": ("ring", "tree", "in-switch", "nvls-tree"),
    "reduce-scatter": ("ring",),
    "all-gather": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
}


@cache
def _data() -> dict[str, Any]:
    return load_toml("collectives.toml")


def tuner() -> dict[str, Any]:
    return _data()["nccl_tuner"]


def link_view(link_id: str) -> dict[str, Any]:
    """How NCCL's topology sees a link (generation, GB/s per GPU, latency row, LL128)."""
    links = _data()["nccl_links"]
    return links.get(link_id) or links["pcie4"]


@dataclass(frozen=True)
class Graph:
    """A channel layout NCCL's search found: ``channels`` x ``speed`` GB/s per rank."""

    channels: int
    speed: float

    @property
    def total(self) -> float:
        return self.channels * self.speed


def _speeds(sm90: bool, net: bool) -> list[float]:
    s = _data()["nccl_search"]
    return s[("speeds_inter" if net else "speeds_intra") + ("_sm90" if sm90 else "")]


@cache
def ring_graph(intra_gbps: float, sm90: bool, nics: int, nic_gbps: float, ranks: int = 1,
               path_gbps: float = math.inf) -> Graph:
    """Ring/tree graph: the most channels x speed the links allow (``nics`` = 0: one node).

    Inside a node every channel passes every GPU once, so channels x speed <= the GPU's NCCL
    link bandwidth. Across nodes each channel enters and leaves the node through a NIC, so a NIC
    carries floor(NIC GB/s / speed) channels, no channel runs faster than the GPU-NIC PCIe path
    (NCCL's maxBw), and a GPU forwards over NVLink only the channels that do not leave at it
    ((ranks - 1) / ranks of them). The search tries speeds from the fastest down to about half
    the best solution's and keeps the largest total; ties keep the faster speed.
    """
    s = _data()["nccl_search"]
    best = Graph(1, _speeds(sm90, nics > 0)[-1])
    found = False
    for sp in _speeds(sm90, nics > 0):
        if sp > intra_gbps or (nics and sp > min(nic_gbps, path_gbps)):
            continue
        if found and sp / best.speed <= 0.49:
            break
        share = (ranks - 1) / ranks if nics else 1.0
        ch = math.floor(intra_gbps / (sp * share) + 1e-9) if share > 0 else 10**6
        if nics:
            ch = min(ch, nics * math.floor(nic_gbps / sp + 1e-9))
        ch = min(ch, int(s["max_channels"]))
        if ch >= 1 and ch * sp > best.total + 1e-9:
            best, found = Graph(ch, sp), True
    # duplication: fast channels are split in two (more CTAs, same total)
    if best.speed < s["dup_min_speed"]:
        return best
    if sm90 and best.speed < s["dup_sm90_min_speed"] and best.channels > s["dup_sm90_max_channels"]:
        return best
    dup = min(2 * best.channels, int(s["max_channels"]))
    return Graph(dup, best.speed / math.ceil(dup / best.channels))


@cache
def nvls_graph(intra_gbps: float, ranks: int, nics: int, nic_gbps: float,
               path_gbps: float = math.inf) -> Graph:
    """NVLS graph: one channel per GPU of the node (one node) or per NIC head (several), at the
    fastest speed the node's NVLink (one node) or a NIC and its PCIe path (several) allow."""
    if nics == 0:
        sp = next((v for v in _speeds(True, False) if v * ranks <= intra_gbps + 1e-9),
                  _speeds(True, False)[-1])
        return Graph(ranks, sp)
    lim = min(nic_gbps, path_gbps) + 1e-9
    sp = next((v for v in _speeds(True, True) if v <= lim), _speeds(True, True)[-1])
    return Graph(min(nics, ranks), sp)


def _intra_gbps(fabric: Fabric) -> float:
    """NCCL's figure for the GPU's intra-node links, scaled when the GPU runs a reduced rate of
    the link (H800's NVLink, H100 PCIe's bridge: gpus.toml) as NCCL counts fewer links."""
    from ..errors import BadInput
    from ..specs.gpu import get_link

    v = link_view(fabric.intra.id)
    try:
        line = get_link(fabric.intra.id).bytes_per_s_per_direction
    except BadInput:  # a link built by hand: its rate is taken as NCCL's figure
        line = fabric.intra.bytes_per_s_per_direction
    return float(v["gbps_per_gpu"]) * fabric.intra.bytes_per_s_per_direction / line


def _nic_gbps(fabric: Fabric) -> float:
    return fabric.inter.bytes_per_s_per_direction / 1e9 if fabric.inter is not None else 0.0


def _graphs(fabric: Fabric, p: np.ndarray, multi: np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ring and NVLS graphs (channels, speed) per row, looked up by (several nodes, p)."""
    v = link_view(fabric.intra.id)
    table = _graph_table(_intra_gbps(fabric), _nic_gbps(fabric), float(fabric.nics_per_gpu),
                         bool(v["sm90_search"]), int(max(fabric.gpus_per_node, np.max(p, initial=1))),
                         float(v["pcie_gbps"]))
    cols = table[np.asarray(multi, dtype=int), np.clip(np.asarray(p, dtype=int), 1, None)]
    return cols[..., 0], cols[..., 1], cols[..., 2], cols[..., 3]


@cache
def _graph_table(intra_gbps: float, nic_gbps: float, nics_per_gpu: float, sm90: bool,
                 max_p: int, path_gbps: float) -> np.ndarray:
    """[one node / several nodes, ranks per node] -> ring channels, speed, NVLS channels, speed."""
    table = np.ones((2, max_p + 1, 4))
    for mv in (0, 1):
        for pv in range(1, max_p + 1):
            nics = max(1, round(nics_per_gpu * pv)) if mv else 0
            g = ring_graph(intra_gbps, sm90, nics, nic_gbps, pv, path_gbps)
            h = nvls_graph(intra_gbps, pv, nics, nic_gbps, path_gbps)
            table[mv, pv] = g.channels, g.speed, h.channels, h.speed
    return table


def _log2i(x: np.ndarray) -> np.ndarray:
    return np.floor(np.log2(np.maximum(x, 1.0)))


def latency_us(coll: str, alg: str, proto: str, S: np.ndarray, n: np.ndarray, p: np.ndarray,
               fabric: Fabric, channels: np.ndarray | None = None) -> np.ndarray:
    """NCCL's latency of one call, microseconds (ring plateau factor included)."""
    t = tuner()
    a, pi = ALG_KEY[alg], PROTO_INDEX[proto]
    N = np.ceil(n / p)
    multi = N > 1
    intra_hw = link_view(fabric.intra.id)["hw"]
    base = t["base_us"][a][pi]
    intra = t["hw_us"][intra_hw][a][pi]
    inter = t["hw_us"]["net"][a][pi]
    if a == "ring":
        if coll in ("broadcast", "reduce"):  # one pipelined chain: one hop's latency
            return base + np.where(multi, t["hw_us"]["net"]["ring"][pi], intra) + 0 * S
        nsteps = {"all-reduce": 2 * (n - 1)}.get(coll, n - 1)
        ninter = np.where(multi, 2 * N, 0.0) if coll == "all-reduce" else N - 1
        ov = t["net_overhead_us"][t["cpu"]] * (t["net_overhead_simple_factor"]
                                               if proto == "simple" else 1.0)
        intra_eff = np.where(multi, max(intra, ov), intra)
        lat = base + (nsteps - ninter) * intra_eff + ninter * inter
        if coll == "all-reduce" and proto == "simple":
            ch = channels if channels is not None else _graphs(fabric, p, multi)[0]
            plateau = multi & (S / (ch * n) >= 64)
            lat = np.where(plateau, lat * t["ring_plateau_latency_factor"], lat)
        return lat + 0 * S
    if a == "tree":
        return base + 2 * ((p - 1) * intra + _log2i(N) * inter) + 0 * S
    if a == "nvls":
        return intra + np.where(multi, inter, 0.0) + 0 * S
    return base + intra + 2 * _log2i(N) * inter + 0 * S  # nvls-tree


def bus_gbps(coll: str, alg: str, proto: str, S: np.ndarray, n: np.ndarray, p: np.ndarray,
             fabric: Fabric) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(NCCL's bus bandwidth for the pair, its ring/Simple bus bandwidth, ring channels), GB/s.

    The tree correction for medium sizes is applied here, as ncclTopoGetAlgoTime does."""
    t = tuner()
    v = link_view(fabric.intra.id)
    arch = v["arch"]
    N = np.ceil(n / p)
    multi = N > 1
    i2 = (np.minimum(N, 3) - 1).astype(int)
    rc, rs, nc, ns = _graphs(fabric, p, multi)
    G = rc * rs
    ll_nodes = np.asarray(t["ll_max_nodes"][t["cpu"]])
    ll_max = np.where(multi, ll_nodes[np.clip(i2 - 1, 0, 1)], t["ll_max_one_node"][arch])
    a = ALG_KEY[alg]
    if a == "ring":
        if proto == "ll":
            bus = np.minimum(ll_max, G * t["ring_ll"])
        elif proto == "ll128":
            f = np.where(n / N < 2, t["ring_ll128_one_rank_per_node"], t["ring_ll128"])
            cap = np.asarray(t["ring_ll128_per_channel"][arch])[i2]
            bus = np.minimum(G * f, rc * cap)
        else:
            bus = G
    elif a == "tree":
        tr = np.minimum(G * t["tree"], rc * np.asarray(t["tree_per_channel"][arch])[i2])
        if proto == "ll":
            bus = np.minimum(tr * t["tree_ll"], ll_max)
        elif proto == "ll128":
            f = np.where(multi, t["tree_ll128_nodes"], t["tree_ll128_one_node"])
            bus = np.minimum(tr * f, rc * np.asarray(t["tree_ll128_per_channel"][arch])[i2])
        else:
            bus = tr
        log_size = _log2i(np.floor(S / 64.0)).astype(int)
        tcf = np.asarray(t["tree_correction"][proto])
        bus = np.where(log_size < tcf.size, bus * tcf[np.clip(log_size, 0, tcf.size - 1)], bus)
    elif a == "nvls":
        bus = nc * ns
    else:  # nvls-tree: half the per-channel speed beyond 2 nodes
        bus = nc * np.where(N <= 2, ns, ns / 2)
    return bus + 0 * S, G + 0 * S, rc + 0 * S


def algbw_ratio(coll: str, alg: str, n: np.ndarray) -> Any:
    t = tuner()
    a = ALG_KEY[alg]
    if a == "ring":
        nsteps = {"all-reduce": 2 * (n - 1)}.get(coll, n - 1 if coll in ("reduce-scatter",
                                                                         "all-gather") else n)
        return n / np.maximum(nsteps, 1)
    return t["nvls_ratio"] if a in ("nvls", "nvls-tree") else t["tree_ratio"]


def enabled(coll: str, alg: str, proto: str, n: np.ndarray, p: np.ndarray,
            fabric: Fabric) -> np.ndarray:
    """Where NCCL would consider the pair (LL128 on NVLink only, NVLS on NVSwitch3+,
    multi-node NVLS only with CollNet/SHARP, NVLS-tree only across nodes)."""
    from .collectives import in_switch

    N = np.ceil(n / p)
    ok = np.ones(np.shape(n), dtype=bool) & (n > 1)
    if alg not in TUNED.get(coll, ()):
        return ok & False
    if proto == "ll128" and not link_view(fabric.intra.id)["ll128"]:
        ok &= False
    a = ALG_KEY[alg]
    if a in ("nvls", "nvls-tree") and proto != "simple":
        ok &= False
    nv = in_switch(fabric.intra.id)
    if a == "nvls":
        ok &= bool(nv)
        if nv:
            ok &= np.where(N > 1, bool(fabric.collnet and fabric.inter is not None
                                       and in_switch(fabric.inter.id)), n >= nv["min_ranks"])
    if a == "nvls-tree":
        ok &= bool(nv) & (N > 1)
    return ok


def model_time_s(coll: str, alg: str, proto: str, S: Any, n: Any, p: Any,
                 fabric: Fabric) -> np.ndarray:
    """NCCL's predicted seconds for one (algorithm, protocol): inf where NCCL would not run it.

    time = latency + bytes / algorithm bandwidth, with bandwidths in GB/s and latency in us as
    NCCL keeps them (ncclTopoGetAlgoTime, one operation per call)."""
    S, n, p = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(S, n, p))
    ok = enabled(coll, alg, proto, n, p, fabric)
    out = np.full(S.shape, np.inf)
    if not ok.any():
        return out
    Sm, nm, pm = S[ok], n[ok], p[ok]
    bus, _, ch = bus_gbps(coll, alg, proto, Sm, nm, pm, fabric)
    alg_bw = bus * algbw_ratio(coll, alg, nm)
    lat = latency_us(coll, alg, proto, Sm, nm, pm, fabric, channels=ch)
    with np.errstate(divide="ignore"):
        out[ok] = (lat + Sm / (1e3 * alg_bw)) * 1e-6
    return out


def relative_rate(coll: str, alg: str, proto: str, S: Any, n: Any, p: Any,
                  fabric: Fabric) -> np.ndarray:
    """NCCL's bus bandwidth for the pair over its ring/Simple bus bandwidth: the share of the
    physical link rate this (algorithm, protocol) reaches (protocol overheads, LL and per-channel
    caps, the tree's medium-size correction)."""
    S, n, p = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(S, n, p))
    if ALG_KEY.get(alg) in (None, "nvls", "nvls-tree") or alg not in TUNED.get(coll, ()):
        return np.ones(S.shape)
    bus, G, _ = bus_gbps(coll, alg, proto, S, np.maximum(n, 2.0), np.maximum(p, 1.0), fabric)
    return bus / G


def p2p_protocol(nbytes_per_peer: Any) -> np.ndarray:
    """Protocol of NCCL's point-to-point sends: LL up to the threshold, Simple above."""
    th = float(tuner()["p2p_ll_threshold_bytes"])
    return np.where(np.asarray(nbytes_per_peer, dtype=float) <= th, "ll", "simple")
