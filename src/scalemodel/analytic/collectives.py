"""Collective cost models: alpha-beta-gamma per algorithm, priced per tier of a cluster.

One table of formulas (``FORMULAS``) is the model. Each entry is a list of steps written in
symbols; the vectorised path evaluates them over numpy arrays (thousands of queries at once, for
the planner), and the worked answer for one query evaluates the *same* strings through
:class:`~scalemodel.derive.Derivation` with ``check=`` so the two paths cannot drift apart.

Symbols (docs/comm.md, "Symbols"):

==========  =====================================================================
``S``       operation size in bytes, nccl-tests convention (all-reduce: the buffer on each
            rank; reduce-scatter: the full input; all-gather: the full output; all-to-all:
            the per-rank buffer; broadcast/reduce/send-recv: the buffer)
``n``       ranks in the group; ``p`` ranks of the group per node; ``N = n / p`` nodes
``Bi``      effective per-GPU rate inside a node (line rate x efficiency x protocol factor)
``Bo``      effective per-GPU rate across nodes (NIC line rate x NICs per GPU x efficiency
            x protocol factor / oversubscription slowdown)
``Bs``      in-switch (NVLS) algorithm rate (its plateau x ``q_s``, the share a measured size
            curve keeps below the plateau); ``Bso`` in-network (SHARP) algorithm rate
``ai, ao``  per-step latency inside a node / across nodes; ``a0`` launch latency per call
``L``       NCCL's latency of one call (tuning model); ``g`` reduction seconds per byte
``k``       steps; ``W`` bytes sent by the busiest rank; ``Wi``/``Wo`` of them inside/across
==========  =====================================================================

Three placements ("cases") have their own formulas: ``intra`` (the group fits in one node),
``inter`` (one rank per node: every step crosses the network) and ``mixed`` (p > 1 ranks on
each of N > 1 nodes). Transfers that NCCL pipelines across tiers (ring, chain, tree) take the
maximum of the tier times; phased algorithms (recursive halving/doubling, hierarchical,
binomial tree, pairwise) add them.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field, replace
from functools import cache, reduce
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput, close_matches
from ..specs.gpu import LinkSpec, get_link
from ..specs.sources import cite, load_toml
from . import nccl_tuner

COLLECTIVES: tuple[str, ...] = (
    "all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce", "all-to-all", "send-recv",
)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("ring", "tree", "rhd", "hierarchical", "in-switch", "nvls-tree"),
    "reduce-scatter": ("ring", "rhd"),
    "all-gather": ("ring", "rhd"),
    "broadcast": ("ring", "tree"),
    "reduce": ("ring", "tree"),
    "all-to-all": ("direct", "pairwise", "hierarchical"),
    "send-recv": ("direct",),
}
ALGORITHM_LABELS = {
    "ring": "ring",
    "tree": "tree (double binary tree across nodes, chain inside a node, as NCCL)",
    "rhd": "recursive halving/doubling (Rabenseifner; nearest partners first)",
    "hierarchical": "hierarchical 2-D (inside the node, then across nodes on each rail)",
    "in-switch": "in-switch reduction (NVLS inside the NVLink domain, SHARP across nodes)",
    "nvls-tree": "NVLS tree (NVLS inside each node, a tree between the nodes' NIC heads)",
    "direct": "direct (all messages posted at once)",
    "pairwise": "pairwise exchange (n-1 rounds)",
}
PROTOCOLS: tuple[str, ...] = ("ll", "ll128", "simple")
# what NCCL itself implements (ring, tree, NVLS, NVLS-tree, NVLS+CollNet for all-reduce; rings
# elsewhere; grouped send/recv for all-to-all): the "auto" choice picks among these with NCCL's
# own tuning model (analytic/nccl_tuner.py); the others are shown beside
NCCL_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("ring", "tree", "in-switch", "nvls-tree"),
    "reduce-scatter": ("ring",),
    "all-gather": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all-to-all": ("direct",),
    "send-recv": ("direct",),
}

# nccl-tests busbw / algbw factor (PERFORMANCE.md), as a formula in n
BUSBW_FACTOR = {
    "all-reduce": "2 * (n - 1) / n",
    "reduce-scatter": "(n - 1) / n",
    "all-gather": "(n - 1) / n",
    "all-to-all": "(n - 1) / n",
    "broadcast": "1",
    "reduce": "1",
    "send-recv": "1",
}
# the least a rank must send (all-reduce: Patarasuk and Yuan 2009, Theorem 1)
LOWER_BOUND = {
    "all-reduce": "2 * (n - 1) / n * S",
    "reduce-scatter": "(n - 1) / n * S",
    "all-gather": "(n - 1) / n * S",
    "all-to-all": "(n - 1) / n * S",
    "broadcast": "S",
    "reduce": "S",
    "send-recv": "S",
}
REDUCING = {"all-reduce", "reduce-scatter", "reduce"}

# ------------------------------------------------------------------------------------------
# The formulas. Each step: (name, symbol, formula, unit). Every list defines k, W, t_lat, t_bw
# and t_red; t = t_lat + max(t_bw, t_red) is added by the engine.
# ------------------------------------------------------------------------------------------
_Steps = tuple[tuple[str, str, str, str], ...]


def _ring_like(k: str, w: str, red: str, *, inter_k: str) -> dict[str, _Steps]:
    """A pipelined ring/chain: every rank sends ``w``; across nodes, a node's traffic leaves
    through the NICs of its p GPUs while (p-1)/p of each GPU's traffic stays on NVLink."""
    return {
        "intra": (
            ("steps", "k", k, "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by each rank", "W", w, "B"),
            ("transfer time", "t_bw", "W / Bi", "s"),
            ("reduction time", "t_red", red, "s"),
        ),
        "inter": (
            ("steps", "k", k, "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by each rank", "W", w, "B"),
            ("transfer time", "t_bw", "W / Bo", "s"),
            ("reduction time", "t_red", red, "s"),
        ),
        "mixed": (
            ("steps", "k", k, "1"),
            ("steps that cross nodes", "k_o", inter_k, "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by each rank", "W", w, "B"),
            ("of them inside the node", "Wi", "W * (p - 1) / p", "B"),
            ("leaving the node, per GPU", "Wo", "W / p", "B"),
            ("transfer time (tiers pipelined: the slower one)", "t_bw", "max(Wi / Bi, Wo / Bo)",
             "s"),
            ("reduction time", "t_red", red, "s"),
        ),
    }


def _phased(ki: str, ko: str, wi: str, wo: str, red: str, k1: str, w1: str) -> dict[str, _Steps]:
    """Phases inside then across nodes (times add). ``k1``/``w1``: the one-tier forms in n."""
    one = lambda a, b: (  # noqa: E731
        ("steps", "k", k1, "1"),
        ("latency", "t_lat", f"a0 + k * {a}", "s"),
        ("bytes sent by each rank", "W", w1, "B"),
        ("transfer time", "t_bw", f"W / {b}", "s"),
        ("reduction time", "t_red", red, "s"),
    )
    return {
        "intra": one("ai", "Bi"),
        "inter": one("ao", "Bo"),
        "mixed": (
            ("steps inside the node", "k_i", ki, "1"),
            ("steps across nodes", "k_o", ko, "1"),
            ("steps", "k", "k_i + k_o", "1"),
            ("latency", "t_lat", "a0 + k_i * ai + k_o * ao", "s"),
            ("bytes sent inside the node", "Wi", wi, "B"),
            ("bytes sent across nodes", "Wo", wo, "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (phases add)", "t_bw", "Wi / Bi + Wo / Bo", "s"),
            ("reduction time", "t_red", red, "s"),
        ),
    }


_E = "min(1, n - 2 ** floor(log2(n)))"  # 1 when n is not a power of two (MPICH's extra step)

FORMULAS: dict[tuple[str, str], dict[str, _Steps]] = {
    ("all-reduce", "ring"): _ring_like("2 * (n - 1)", "2 * (n - 1) / n * S",
                                       "(n - 1) / n * S * g", inter_k="2 * N"),
    ("all-reduce", "tree"): {
        "intra": (
            ("steps (a chain inside the node: up, then down)", "k", "2 * (n - 1)", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by a middle rank of the chain", "W", "S * min(2, n - 1)", "B"),
            ("transfer time", "t_bw", "W / Bi", "s"),
            ("reduction time", "t_red", "S * g", "s"),
        ),
        "inter": (
            ("steps (two trees of depth log2 n, up and down)", "k", "2 * ceil(log2(n))", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by the busiest rank (inner in one tree, leaf in the other)", "W",
             "S * min(2, n / 2)", "B"),
            ("transfer time", "t_bw", "W / Bo", "s"),
            ("reduction time", "t_red", "S * g", "s"),
        ),
        "mixed": (
            ("steps", "k", "2 * (p - 1) + 2 * ceil(log2(N))", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes a GPU sends along the chain inside its node", "Wi", "S * min(2, p - 1)", "B"),
            ("bytes a node sends to other nodes (both trees)", "Wn", "S * min(2, N / 2)", "B"),
            ("of them through each GPU's NIC", "Wo", "Wn / p", "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (pipelined: the slower tier)", "t_bw", "max(Wi / Bi, Wo / Bo)", "s"),
            ("reduction time", "t_red", "S * g", "s"),
        ),
    },
    ("all-reduce", "rhd"): _phased(
        "2 * ceil(log2(p))", "2 * ceil(log2(N))",
        "2 * (p - 1) / p * S", f"2 * (N - 1) / N * S / p + {_E} * S",
        "(n - 1) / n * S * g",
        "2 * ceil(log2(n))", f"2 * (n - 1) / n * S + {_E} * S"),
    ("all-reduce", "hierarchical"): {
        "mixed": (
            ("steps inside the node (reduce-scatter + all-gather)", "k_i", "2 * (p - 1)", "1"),
            ("steps across nodes (ring all-reduce of S/p on each rail)", "k_o", "2 * (N - 1)",
             "1"),
            ("steps", "k", "k_i + k_o", "1"),
            ("latency", "t_lat", "a0 + k_i * ai + k_o * ao", "s"),
            ("bytes sent inside the node", "Wi", "2 * (p - 1) / p * S", "B"),
            ("bytes sent across nodes", "Wo", "2 * (N - 1) / N * S / p", "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (phases add)", "t_bw", "Wi / Bi + Wo / Bo", "s"),
            ("reduction time", "t_red", "(n - 1) / n * S * g", "s"),
        ),
    },
    ("all-reduce", "in-switch"): {
        "intra": (
            ("steps (to the switch and back)", "k", "2", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by each rank", "W", "S", "B"),
            ("transfer time", "t_bw", "S / Bs", "s"),
            ("reduction time (done in the switch)", "t_red", "0", "s"),
        ),
        "inter": (
            ("steps (to the switch tree and back)", "k", "2", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent by each rank", "W", "S", "B"),
            ("transfer time", "t_bw", "S / Bso", "s"),
            ("reduction time (done in the switches)", "t_red", "0", "s"),
        ),
        "mixed": (
            ("steps", "k", "4", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes sent inside the node", "Wi", "S", "B"),
            ("bytes sent across nodes (S/p per GPU through SHARP)", "Wo", "S / p", "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (phases add)", "t_bw", "S / Bs + Wo / Bso", "s"),
            ("reduction time (done in the switches)", "t_red", "0", "s"),
        ),
    },
    ("all-reduce", "nvls-tree"): {
        "mixed": (
            ("steps (to the switch and back, then up and down the tree of nodes)", "k",
             "2 + 2 * floor(log2(N))", "1"),
            ("latency (NCCL's tuning model)", "t_lat", "L", "s"),
            ("bytes each GPU sends to the NVLink switch", "Wi", "S", "B"),
            ("bytes a node sends to other nodes (both trees)", "Wn", "S * min(2, N / 2)", "B"),
            ("of them through each GPU's NIC", "Wo", "Wn / p", "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (pipelined: the slower tier)", "t_bw", "max(S / Bs, Wo / Bo)", "s"),
            ("reduction time (done in the switch)", "t_red", "0", "s"),
        ),
    },
    ("reduce-scatter", "ring"): _ring_like("n - 1", "(n - 1) / n * S", "(n - 1) / n * S * g",
                                           inter_k="N - 1"),
    ("all-gather", "ring"): _ring_like("n - 1", "(n - 1) / n * S", "0", inter_k="N - 1"),
    ("reduce-scatter", "rhd"): _phased(
        "ceil(log2(p))", "ceil(log2(N))", "(p - 1) / p * S", f"(N - 1) / N * S / p + {_E} * S",
        "(n - 1) / n * S * g", "ceil(log2(n))", f"(n - 1) / n * S + {_E} * S"),
    ("all-gather", "rhd"): _phased(
        "ceil(log2(p))", "ceil(log2(N))", "(p - 1) / p * S", f"(N - 1) / N * S / p + {_E} * S",
        "0", "ceil(log2(n))", f"(n - 1) / n * S + {_E} * S"),
    ("broadcast", "ring"): _ring_like("n - 1", "S", "0", inter_k="N - 1"),
    ("reduce", "ring"): _ring_like("n - 1", "S", "S * g", inter_k="N - 1"),
    ("broadcast", "tree"): _phased(
        "ceil(log2(p))", "ceil(log2(N))", "k_i * S", "k_o * S", "0", "ceil(log2(n))", "k * S"),
    ("reduce", "tree"): _phased(
        "ceil(log2(p))", "ceil(log2(N))", "k_i * S", "k_o * S", "k * S * g", "ceil(log2(n))",
        "k * S"),
    ("all-to-all", "direct"): {
        "intra": (
            ("steps (posted together)", "k", "n - 1", "1"),
            ("latency (one round)", "t_lat", "a0 + ai", "s"),
            ("bytes sent by each rank", "W", "(n - 1) / n * S", "B"),
            ("transfer time", "t_bw", "W / Bi", "s"),
            ("reduction time", "t_red", "0", "s"),
        ),
        "inter": (
            ("steps (posted together)", "k", "n - 1", "1"),
            ("latency (one round)", "t_lat", "a0 + ao", "s"),
            ("bytes sent by each rank", "W", "(n - 1) / n * S", "B"),
            ("transfer time", "t_bw", "W / Bo", "s"),
            ("reduction time", "t_red", "0", "s"),
        ),
        "mixed": (
            ("steps (posted together)", "k", "n - 1", "1"),
            ("latency (one round)", "t_lat", "a0 + ao", "s"),
            ("bytes to peers in the node", "Wi", "(p - 1) / n * S", "B"),
            ("bytes to peers on other nodes", "Wo", "(n - p) / n * S", "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (both tiers at once)", "t_bw", "max(Wi / Bi, Wo / Bo)", "s"),
            ("reduction time", "t_red", "0", "s"),
        ),
    },
    ("all-to-all", "pairwise"): _phased(
        "p - 1", "n - p", "(p - 1) / n * S", "(n - p) / n * S", "0", "n - 1", "(n - 1) / n * S"),
    ("all-to-all", "hierarchical"): {
        "mixed": (
            ("steps inside the node", "k_i", "p - 1", "1"),
            ("steps across nodes (aggregated per rail)", "k_o", "N - 1", "1"),
            ("steps", "k", "k_i + k_o", "1"),
            ("latency", "t_lat", "a0 + k_i * ai + k_o * ao", "s"),
            ("bytes moved to the rail GPU or the local peer", "Wi",
             "((n - p) * (p - 1) / p + (p - 1)) / n * S", "B"),
            ("bytes sent across nodes", "Wo", "(n - p) / n * S", "B"),
            ("bytes sent by each rank", "W", "Wi + Wo", "B"),
            ("transfer time (phases add)", "t_bw", "Wi / Bi + Wo / Bo", "s"),
            ("reduction time", "t_red", "0", "s"),
        ),
    },
    ("send-recv", "direct"): {
        "intra": (
            ("steps", "k", "1", "1"),
            ("latency", "t_lat", "a0 + ai", "s"),
            ("bytes sent", "W", "S", "B"),
            ("transfer time", "t_bw", "S / Bi", "s"),
            ("reduction time", "t_red", "0", "s"),
        ),
        "inter": (
            ("steps", "k", "1", "1"),
            ("latency", "t_lat", "a0 + ao", "s"),
            ("bytes sent", "W", "S", "B"),
            ("transfer time", "t_bw", "S / Bo", "s"),
            ("reduction time", "t_red", "0", "s"),
        ),
    },
}

# which protocol latency column an algorithm uses, and how its cross-node traffic spreads
_FAMILY = {"tree": "tree"}  # NCCL's tree column only for the all-reduce tree
_ALL_PAIRS = {"rhd", "direct", "pairwise"}  # traffic to far nodes: oversubscription bites


# ------------------------------------------------------------------------------------------
# numpy evaluation of the formula strings
# ------------------------------------------------------------------------------------------


def _nmax(*a: Any) -> Any:
    return reduce(np.maximum, a)


def _nmin(*a: Any) -> Any:
    return reduce(np.minimum, a)


_NP_FUNCS = {"ceil": np.ceil, "floor": np.floor, "log2": np.log2, "min": _nmin, "max": _nmax,
             "sqrt": np.sqrt, "exp": np.exp}
_NP_OPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide,
           ast.Pow: np.power}


@cache
def _parse(formula: str) -> ast.AST:
    return ast.parse(formula, mode="eval").body


def np_eval(formula: str, env: dict[str, Any]) -> Any:
    """Evaluate a formula of the same small language as derive.evaluate over numpy arrays."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.BinOp):
            return _NP_OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return _NP_FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"unsupported element in {formula!r}")  # pragma: no cover

    with np.errstate(divide="ignore", invalid="ignore"):
        return ev(_parse(formula))


# ------------------------------------------------------------------------------------------
# constants and the fabric
# ------------------------------------------------------------------------------------------


@cache
def _consts() -> dict[str, Any]:
    return load_toml("collectives.toml")


def efficiency(kind: str) -> tuple[float, str]:
    """(efficiency, citation) for a link kind: scale-up, scale-out or host."""
    t = _consts()["efficiency"].get(kind) or _consts()["efficiency"]["scale-up"]
    return float(t["value"]), cite(t["source"])


def alltoall_efficiency(kind: str) -> tuple[float, str] | None:
    """(efficiency, citation) of NCCL's all-to-all (per-peer p2p send / receive) on a link kind
    (collectives.toml [efficiency_alltoall]), or None where only the ring figure is recorded."""
    t = _consts().get("efficiency_alltoall", {}).get(kind)
    return (float(t["value"]), cite(t["source"])) if t else None


def intra_efficiency(coll: str, fabric: Fabric, nccl_p2p: bool = True) -> tuple[float, str]:
    """(efficiency, citation) inside a node for ``coll``: NCCL's all-to-all plateau on links
    that record one (``nccl_p2p``: the collective runs as NCCL's p2p kernel, not a dispatch
    kernel's own copies), else the link kind's ring figure; a user's --efficiency-intra wins."""
    if fabric.efficiency_intra is not None:
        return fabric.efficiency_intra, "user"
    kind = _link_kind(fabric.intra)
    a2a = alltoall_efficiency(kind) if coll == "all-to-all" and nccl_p2p else None
    return a2a if a2a else efficiency(kind)


def inter_efficiency(coll: str, fabric: Fabric, nccl_p2p: bool = True) -> tuple[float, str]:
    """(efficiency, citation) of the NICs for ``coll``: NCCL's all-to-all keeps its measured
    share of the NIC rate on links that record one (``nccl_p2p``: NCCL's p2p kernel and proxies
    drive the NICs, not a dispatch kernel's own RDMA), else the link kind's ring figure; a user's
    --efficiency-inter wins. 0 without NICs."""
    if fabric.inter is None:
        return 0.0, ""
    if fabric.efficiency_inter is not None:
        return fabric.efficiency_inter, "user"
    kind = _link_kind(fabric.inter)
    a2a = alltoall_efficiency(kind) if coll == "all-to-all" and nccl_p2p else None
    return a2a if a2a else efficiency(kind)


def protocol(name: str) -> dict[str, Any]:
    t = _consts()["protocols"].get(name)
    if t is None:
        raise BadInput(f"--protocol: unknown protocol {name!r}; choose auto, {', '.join(PROTOCOLS)}")
    return t


def in_switch(link_id: str) -> dict[str, Any] | None:
    """The in-switch reduction a link offers (NVLS, SHARP), or None."""
    return _consts()["in_switch"].get(link_id)


def in_switch_size_curve(link_id: str) -> dict[str, Any] | None:
    """The measured time-by-size curve of a link's in-switch reduction (collectives.toml
    [in_switch_size_curve]), or None."""
    return _consts().get("in_switch_size_curve", {}).get(link_id)


def in_switch_size_share(link_id: str, S: Any, lat_s: Any) -> Any:
    """Share of the plateau rate a link's in-switch reduction keeps at size ``S``: inside the
    measured sizes the rate is what the measured time leaves after the call's latency,
    S / (t(S) - L), over the plateau (``algbw_fraction`` x the link's line rate), never above
    1; t(S) is read log-log between the measured sizes. Outside the curve, or for a link
    without one, 1."""
    S = np.asarray(S, dtype=float)
    cv, nv = in_switch_size_curve(link_id), in_switch(link_id)
    if not cv or not nv:
        return np.ones_like(S)
    from ..specs import get_link

    xb = np.log(np.asarray(cv["bytes"], dtype=float))
    tb = np.log(np.asarray(cv["time_us"], dtype=float) * 1e-6)
    plateau = get_link(link_id).bytes_per_s_per_direction * float(nv["algbw_fraction"])
    lS = np.log(np.maximum(S, 1.0))
    t = np.exp(np.interp(lS, xb, tb))
    share = S / (np.maximum(t - lat_s, 1e-12) * plateau)
    inside = (lS >= xb[0]) & (lS <= xb[-1])
    return np.where(inside, np.minimum(share, 1.0), 1.0)


def ring_size_curve(link_id: str) -> dict[str, Any] | None:
    """The measured time-by-size curve of NCCL's ring on a scale-up link (collectives.toml
    [ring_size_curve]), or None."""
    return _consts().get("ring_size_curve", {}).get(link_id)


def ring_size_share(coll: str, S: Any, n: Any, p: Any, fabric: Fabric) -> Any:
    """Share of the ring's plateau rate NCCL keeps at size ``S`` inside one node, from a measured
    nccl-tests sweep (collectives.toml [ring_size_curve]): the ring/Simple transfer time at the
    plateau, W / B with W = 2 (n - 1) / n x S and B = line rate x efficiency, over what the
    measured time t(S) leaves after NCCL's ring/Simple latency L, i.e. W / ((t - L) B), at most 1.
    t(S) is read log-log between the measured sizes; above the largest size the largest size's
    share holds (the measured plateau), below the smallest size the share is 1. Only the
    collective and the rank count the sweep measured, one node; 1 everywhere else."""
    S, n, p = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(S, n, p))
    cv = ring_size_curve(fabric.intra.id)
    if not cv or coll != cv["collective"]:
        return np.ones_like(S)
    with np.errstate(divide="ignore", invalid="ignore"):
        sel = (np.ceil(n / p) <= 1) & (n == float(cv["ranks"]))
    if not sel.any():
        return np.ones_like(S)
    xb = np.log(np.asarray(cv["bytes"], dtype=float))
    tb = np.log(np.asarray(cv["time_us"], dtype=float) * 1e-6)
    lS = np.log(np.maximum(S, 1.0))
    # above the largest size the share is taken at the largest size (the measured plateau holds)
    Sq = np.minimum(S, float(cv["bytes"][-1]))
    t = np.exp(np.interp(np.log(np.maximum(Sq, 1.0)), xb, tb))
    lat = nccl_tuner.latency_us(coll, "ring", "simple", Sq, n, p, fabric) * 1e-6
    rate = (fabric.intra.bytes_per_s_per_direction * fabric.eff_intra
            * nccl_tuner.relative_rate(coll, "ring", "simple", Sq, n, p, fabric))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 2.0 * (n - 1.0) / n * Sq / (np.maximum(t - lat, 1e-12) * rate)
    inside = sel & (lS >= xb[0])
    return np.where(inside, np.minimum(share, 1.0), 1.0)


def pcie_host_spec(host_id: str) -> dict[str, Any]:
    """A PCIe host layout of collectives.toml [pcie_hosts] (BadInput for an unknown id)."""
    hosts = _consts()["pcie_hosts"]
    if host_id not in hosts:
        raise BadInput(f"--pcie-host: unknown PCIe host {host_id!r}; choose one of "
                       f"{', '.join(sorted(hosts))}")
    return hosts[host_id]


@cache
def pcie_ring_factor(host_id: str, ranks: int, gpu_link: str) -> float:
    """Fraction of a GPU's own PCIe x16 rate that a ring over ``ranks`` GPUs of a PCIe host
    keeps, from where its hops go (NCCL 2.21.5, src/graph/paths.cc and search.cc).

    GPUs are packed switch by switch and socket by socket and the ring visits them in that
    order, as NCCL's search finds it. A hop between two GPUs under one PCIe switch runs
    peer-to-peer when the GPUs allow peer access; every other hop is sent through the CPU
    (NCCL's default P2P level stops at PATH_PXB on Intel CPUs: ncclTopoCheckP2p; the SHM
    transport, or an AMD host's P2P through the root complex). On an Intel host a GPU-to-GPU
    hop typed PATH_PHB loads each PCIe link it crosses with 6/5 of its bandwidth
    (INTEL_P2P_OVERHEAD in topo.h, applied by followPath in search.cc; a hop across sockets,
    PATH_SYS, is not charged it there). Each GPU link carries one hop each way, a switch's
    uplink every hop that leaves or enters the switch through the CPU. The link between the
    sockets is not priced: NCCL's figure for it is a search-time estimate that a measurement
    exceeds (docs/comm.md, "PCIe hosts")."""
    h = pcie_host_spec(host_id)
    p = int(ranks)
    if p < 2:
        return 1.0
    per_sw = max(1, int(h["gpus_per_switch"]))
    per_socket = max(per_sw, int(h["gpus_per_socket"]))
    over = float(_consts()["pcie_p2p_overhead"][str(h["cpu_vendor"])]["factor"])
    gpu = get_link(gpu_link).bytes_per_s_per_direction
    up_rate = get_link(str(h["uplink"])).bytes_per_s_per_direction if per_sw > 1 else math.inf
    up_out: dict[int, float] = {}
    up_in: dict[int, float] = {}
    gpu_load = 0.0
    for i in range(p):
        j = (i + 1) % p
        sw_i, sw_j = i // per_sw, j // per_sw
        sock_i, sock_j = i // per_socket, j // per_socket
        if sw_i == sw_j and h["peer_access"]:
            w, via_cpu = 1.0, False              # PATH_PIX / PXB, peer-to-peer in the switch
        elif sock_i == sock_j:
            w, via_cpu = over, True              # PATH_PHB through the CPU's root complex
        else:
            w, via_cpu = 1.0, True               # PATH_SYS between the sockets
        gpu_load = max(gpu_load, w)
        if via_cpu:
            up_out[sw_i] = up_out.get(sw_i, 0.0) + w
            up_in[sw_j] = up_in.get(sw_j, 0.0) + w
    rate = gpu / gpu_load
    for load in (*up_out.values(), *up_in.values()):
        rate = min(rate, up_rate / load)
    return min(1.0, rate / gpu)


def _shm_hop(h: dict[str, Any], sw_i: int, sw_j: int) -> bool:
    """Whether NCCL 2.21.5 sends a GPU hop of host ``h`` through host memory (SHM transport):
    always without peer access; past a PCIe switch on hosts whose CPU holds P2P to PATH_PXB
    (Intel: paths.cc ncclTopoCheckP2p; AMD keeps PATH_SYS and runs P2P through the CPU)."""
    if not h["peer_access"]:
        return True
    return sw_i != sw_j and str(h["cpu_vendor"]) != "amd"


@cache
def shm_memory_rate(host_id: str, ranks: int) -> float:
    """Most bytes/s one hop of a ring over ``ranks`` GPUs of a PCIe host carries when its SHM
    hops share the host's memory (inf without a memory figure or without SHM hops).

    NCCL 2.21.5's SHM transport (src/transport/shm.cc, direct mode by default) has the sender's
    kernel store each byte into a host buffer the receiving rank opened and the receiver's
    kernel load it back: ``host_bytes_per_byte`` (2) bytes of memory traffic per byte, on the
    receiver's socket. All hops of a ring run at one rate, so the socket that receives the most
    SHM hops sets it: rate = memory peak per socket / (2 x SHM hops it receives). The peak is a
    datasheet figure (channels x MT/s x 8 B), not a sustained one: the bound is an upper bound
    on the rate. GPUs are packed switch by switch and socket by socket, as pcie_ring_factor.
    The hops counted are the ring's; on a host where every hop is SHM (no peer access) each GPU
    receives at the per-GPU rate whatever the pattern, so trees and the all-to-all read the
    same bound."""
    h = pcie_host_spec(host_id)
    hm = _consts().get("host_memory", {}).get(h.get("host_memory", ""))
    mem = hm["bytes_per_s_per_socket"] if hm else None
    p = int(ranks)
    if mem is None or p < 2:
        return math.inf
    per_sw = max(1, int(h["gpus_per_switch"]))
    per_socket = max(per_sw, int(h["gpus_per_socket"]))
    per_byte = float(_consts()["shm_transport"]["host_bytes_per_byte"])
    load: dict[int, float] = {}
    for i in range(p):
        j = (i + 1) % p
        if _shm_hop(h, i // per_sw, j // per_sw):
            load[j // per_socket] = load.get(j // per_socket, 0.0) + per_byte
    if not load:
        return math.inf
    return float(mem) / max(load.values())


def _link_kind(link: LinkSpec) -> str:
    return link.kind if link.kind in ("scale-up", "scale-out", "host") else "scale-up"


@dataclass(frozen=True)
class Fabric:
    """Nodes of ``gpus_per_node`` GPUs joined by ``intra`` links, and NICs on a leaf-spine.

    ``nics_per_gpu`` rails per GPU (1 on HGX/DGX H100); ``oversubscription`` is the leaf's
    down:up bandwidth ratio; ``nodes_per_leaf`` nodes share a leaf (per rail).
    """

    intra: LinkSpec
    inter: LinkSpec | None = None
    gpus_per_node: int = 8
    nics_per_gpu: float = 1.0
    oversubscription: float = 1.0
    nodes_per_leaf: int = 32
    efficiency_intra: float | None = None  # None: the stated value for the link kind
    efficiency_inter: float | None = None
    reduce_bytes_per_s: float | None = None
    # NCCL's CollNet (IB SHARP plugin) loaded and enabled: off by default, as in NCCL, so
    # multi-node NVLS+SHARP is only considered when a user says the fabric runs it
    collnet: bool = False
    # the PCIe host the GPUs of a node sit in (collectives.toml [pcie_hosts]); only read when
    # the intra link is a host (PCIe) link: None keeps the GPU's own x16 link as the only limit
    pcie_host: str | None = None

    @property
    def eff_intra(self) -> float:
        return self.efficiency_intra or efficiency(_link_kind(self.intra))[0]

    @property
    def eff_inter(self) -> float:
        if self.inter is None:
            return 0.0
        return self.efficiency_inter or efficiency(_link_kind(self.inter))[0]

    @property
    def gamma_s_per_byte(self) -> float:
        rate = self.reduce_bytes_per_s or float(_consts()["reduction"]["bytes_per_s"])
        return 1.0 / rate

    def describe(self) -> str:
        s = f"{self.gpus_per_node} GPUs per node on {self.intra.id}"
        if self.inter is not None:
            s += (f", {self.nics_per_gpu:g} x {self.inter.id} NIC per GPU, leaf-spine "
                  f"{self.oversubscription:g}:1 with {self.nodes_per_leaf} nodes per leaf")
        return s


def make_fabric(intra: str = "nvlink4", inter: str | None = "ndr-400", *, gpus_per_node: int = 8,
                nics_per_gpu: float = 1.0, oversubscription: float | None = None,
                nodes_per_leaf: int | None = None, efficiency_intra: float | None = None,
                efficiency_inter: float | None = None,
                intra_bytes_per_s: float | None = None, collnet: bool = False,
                pcie_host: str | None = None) -> Fabric:
    """A fabric from link ids of links.toml (BadInput for unknown ids or nonsense values).

    ``intra_bytes_per_s`` replaces the intra link's per-direction rate for GPUs that run a
    reduced variant of it (H800's NVLink, from gpus.toml).
    """
    fab = _consts()["fabric"]
    if gpus_per_node < 1:
        raise BadInput(f"--gpus-per-node must be at least 1, got {gpus_per_node}")
    if nics_per_gpu <= 0:
        raise BadInput(f"--nics-per-gpu must be positive, got {nics_per_gpu}")
    osub = float(fab["oversubscription"] if oversubscription is None else oversubscription)
    if osub < 1:
        raise BadInput(f"--oversubscription is down:up bandwidth and must be >= 1, got {osub}")
    npl = int(fab["nodes_per_leaf"] if nodes_per_leaf is None else nodes_per_leaf)
    if npl < 1:
        raise BadInput(f"--nodes-per-leaf must be at least 1, got {npl}")
    for name, e in (("--efficiency-intra", efficiency_intra), ("--efficiency-inter",
                                                               efficiency_inter)):
        if e is not None and not 0 < e <= 1:
            raise BadInput(f"{name} must be in (0, 1], got {e}")
    lk = _get_link(intra, "--intra")
    if pcie_host is not None:
        pcie_host_spec(pcie_host)  # BadInput for an unknown id
    if intra_bytes_per_s:
        lk = replace(lk, bytes_per_s_per_direction=float(intra_bytes_per_s))
    return Fabric(
        intra=lk,
        inter=_get_link(inter, "--inter") if inter else None,
        gpus_per_node=gpus_per_node, nics_per_gpu=nics_per_gpu, oversubscription=osub,
        nodes_per_leaf=npl, efficiency_intra=efficiency_intra, efficiency_inter=efficiency_inter,
        collnet=collnet, pcie_host=pcie_host,
    )


def _get_link(name: str, flag: str) -> LinkSpec:
    try:
        return get_link(name)
    except BadInput as e:
        raise BadInput(str(e).replace("--link", flag)) from None


# ------------------------------------------------------------------------------------------
# the vectorised engine
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostArrays:
    """Prices of many queries of one collective; every field an array of the broadcast shape."""

    collective: str
    algorithm: np.ndarray  # algorithm name per query (object array)
    protocol: np.ndarray
    time_s: np.ndarray
    latency_s: np.ndarray
    transfer_s: np.ndarray
    reduce_s: np.ndarray
    steps: np.ndarray
    bytes_sent_per_rank: np.ndarray
    intra_bytes_per_rank: np.ndarray
    inter_bytes_per_rank: np.ndarray
    algbw_bytes_per_s: np.ndarray
    busbw_bytes_per_s: np.ndarray
    lower_bound_bytes_per_rank: np.ndarray
    applicable: np.ndarray


def _case_masks(n: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    N = np.ceil(n / p)
    intra = N <= 1
    inter = (~intra) & (p <= 1)
    return intra, inter, ~(intra | inter)


def _env(coll: str, alg: str, proto: str, S: Any, n: Any, p: Any, fabric: Fabric,
         nccl_p2p: bool = True) -> dict[str, Any]:
    """Numeric symbol table for one (algorithm, protocol) over arrays of S, n, p. ``nccl_p2p``
    False prices an all-to-all's NVLink wire at the ring efficiency (a dispatch kernel's copies,
    whose own measured rate bounds them elsewhere) instead of NCCL's all-to-all plateau."""
    N = np.ceil(n / p)
    fam = _FAMILY.get(alg, "ring") if coll == "all-reduce" else "ring"
    pr = protocol(proto)
    ki = _link_kind(fabric.intra)
    L = fabric.nodes_per_leaf
    with np.errstate(divide="ignore", invalid="ignore"):
        if alg in _ALL_PAIRS or (alg == "hierarchical" and coll == "all-to-all"):
            c = np.where(N > L, (N - L) / np.maximum(N - 1, 1), 0.0)
        else:
            c = np.where(N > L, 1.0 / L, 0.0)
    slow = np.maximum(1.0, fabric.oversubscription * c)
    tuned = alg in nccl_tuner.TUNED.get(coll, ())
    f = (nccl_tuner.relative_rate(coll, alg, proto, S, n, p, fabric) if tuned
         else pr["bandwidth_factor"])
    env: dict[str, Any] = {
        "S": S, "n": n, "p": p, "N": N, "g": fabric.gamma_s_per_byte, "f_proto": f,
        "Bi": f * np.minimum(fabric.intra.bytes_per_s_per_direction
                             * intra_efficiency(coll, fabric, nccl_p2p)[0]
                             * _host_factor(fabric, p), _shm_rate(fabric, p)),
        "ai": float(pr[f"{fam}_step_s"][ki]),
        "a0": float(pr["base_s"][fam]),
        "slow": slow,
    }
    if fabric.inter is not None:
        env["Bo"] = (fabric.inter.bytes_per_s_per_direction * fabric.nics_per_gpu
                     * inter_efficiency(coll, fabric, nccl_p2p)[0] * f) / slow
        env["ao"] = float(pr[f"{fam}_step_s"]["scale-out"])
    else:
        env["Bo"] = np.nan
        env["ao"] = np.nan
    if tuned:
        env["L"] = nccl_tuner.latency_us(coll, alg, proto, S, n, np.maximum(p, 1.0), fabric) * 1e-6
    if coll == "all-reduce" and alg == "ring" and ring_size_curve(fabric.intra.id):
        env["q_r"] = ring_size_share(coll, S, n, np.maximum(p, 1.0), fabric)
        env["Bi"] = env["Bi"] * env["q_r"]
    if alg in ("in-switch", "nvls-tree"):
        nv, sh = in_switch(fabric.intra.id), in_switch(fabric.inter.id) if fabric.inter else None
        env["a0"] = 0.0
        env["q_s"] = in_switch_size_share(fabric.intra.id, S, env.get("L", 0.0))
        env["Bs"] = ((fabric.intra.bytes_per_s_per_direction * nv["algbw_fraction"] * env["q_s"])
                     if nv else np.nan)
        env["Bso"] = (fabric.inter.bytes_per_s_per_direction * fabric.nics_per_gpu  # type: ignore[union-attr]
                      * sh["algbw_fraction"]) if sh else np.nan
    return env


def _host_factor(fabric: Fabric, p: Any) -> Any:
    """The PCIe host's ring factor per row (1 without a host or on a scale-up link)."""
    if fabric.pcie_host is None or _link_kind(fabric.intra) != "host":
        return 1.0
    pa = np.asarray(p, dtype=float)
    vals = {int(v): pcie_ring_factor(fabric.pcie_host, int(v), fabric.intra.id)
            for v in np.unique(pa)}
    return np.vectorize(lambda v: vals[int(v)], otypes=[float])(pa) if pa.ndim else vals[int(pa)]


def _shm_rate(fabric: Fabric, p: Any) -> Any:
    """The host-memory bound of the SHM hops per row, B/s (inf without a host, on a scale-up
    link or where the host states no memory figure)."""
    if fabric.pcie_host is None or _link_kind(fabric.intra) != "host":
        return math.inf
    pa = np.asarray(p, dtype=float)
    vals = {int(v): shm_memory_rate(fabric.pcie_host, int(v)) for v in np.unique(pa)}
    return np.vectorize(lambda v: vals[int(v)], otypes=[float])(pa) if pa.ndim else vals[int(pa)]


def _applicable(coll: str, alg: str, n: np.ndarray, p: np.ndarray, fabric: Fabric) -> np.ndarray:
    intra, inter, mixed = _case_masks(n, p)
    cases = FORMULAS[(coll, alg)]
    ok = np.zeros(np.shape(n), dtype=bool)
    for name, mask in (("intra", intra), ("inter", inter), ("mixed", mixed)):
        if name in cases:
            ok |= mask
    if fabric.inter is None:
        ok &= intra
    if coll == "send-recv":
        ok &= n == 2
    elif alg not in ("ring", "direct"):
        ok &= n >= 2
    if alg == "in-switch":
        nv = in_switch(fabric.intra.id)
        sh = in_switch(fabric.inter.id) if fabric.inter is not None else None
        ok &= np.where(intra, bool(nv) and True, True)
        if nv:
            ok &= np.where(intra, n >= nv["min_ranks"], True)
        ok &= np.where(inter | mixed, bool(sh) and fabric.collnet, True)
        ok &= np.where(mixed, bool(nv), True)
    if alg == "nvls-tree":
        ok &= bool(in_switch(fabric.intra.id))
    return ok


def price(collective: str, algorithm: str, nbytes: Any, ranks: Any, ranks_per_node: Any = None,
          *, fabric: Fabric, proto: str = "simple", nccl_p2p: bool = True) -> CostArrays:
    """Price ``collective`` with one algorithm and protocol over arrays (broadcast together).

    ``ranks_per_node`` defaults to packing: min(ranks, gpus_per_node). Queries the algorithm
    cannot run (tree on one rank, in-switch without NVLS/SHARP, ...) get ``applicable`` False and
    an infinite time. One rank costs nothing.
    """
    _check_names(collective, algorithm)
    if algorithm in ("in-switch", "nvls-tree"):
        proto = "simple"  # NVLS and SHARP run the Simple protocol only
    S, n = np.broadcast_arrays(np.asarray(nbytes, dtype=float), np.asarray(ranks, dtype=float))
    if ranks_per_node is None:
        p = np.minimum(n, float(fabric.gpus_per_node))
    else:
        p = np.broadcast_to(np.asarray(ranks_per_node, dtype=float), S.shape)
    S, n, p = (np.array(x, dtype=float) for x in np.broadcast_arrays(S, n, p))
    shape = S.shape
    S, n, p = S.ravel(), n.ravel(), p.ravel()
    if np.any(n < 1):
        raise BadInput("--ranks must be at least 1")
    if np.any(p < 1) or np.any(p > np.maximum(n, 1)) or np.any(p > fabric.gpus_per_node):
        raise BadInput(f"ranks per node must be between 1 and min(ranks, gpus per node = "
                       f"{fabric.gpus_per_node})")
    out = {k: np.full(S.shape, np.nan) for k in ("t_lat", "t_bw", "t_red", "k", "W", "Wi", "Wo")}
    ok = _applicable(collective, algorithm, n, p, fabric)
    env = _env(collective, algorithm, proto, S, n, p, fabric, nccl_p2p)
    masks = dict(zip(("intra", "inter", "mixed"), _case_masks(n, p), strict=True))
    for case, steps in FORMULAS[(collective, algorithm)].items():
        m = masks[case] & ok
        if not m.any():
            continue
        e = {k: (v[m] if isinstance(v, np.ndarray) and v.shape == S.shape else v)
             for k, v in env.items()}
        for _name, sym, formula, _unit in steps:
            e[sym] = np_eval(formula, e) * np.ones(int(m.sum()))
        for k in out:
            if k in e:
                out[k][m] = e[k]
        if case == "intra":
            out["Wi"][m], out["Wo"][m] = e["W"], 0.0
        elif case == "inter":
            out["Wi"][m], out["Wo"][m] = 0.0, e["W"]
    one = n == 1
    for k in out:
        out[k][one & ok] = 0.0
    t = out["t_lat"] + np.maximum(out["t_bw"], out["t_red"])
    t[~ok] = np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(t > 0, S / t, np.inf)
        busbw = algbw * np_eval(BUSBW_FACTOR[collective], {"n": n})
    lb = np_eval(LOWER_BOUND[collective], {"n": n, "S": S}) * np.ones(S.shape)

    def r(a: np.ndarray) -> np.ndarray:
        return np.asarray(a).reshape(shape)

    return CostArrays(
        collective=collective,
        algorithm=np.full(shape, algorithm, dtype=object),
        protocol=np.full(shape, proto, dtype=object),
        time_s=r(t), latency_s=r(out["t_lat"]), transfer_s=r(out["t_bw"]),
        reduce_s=r(out["t_red"]), steps=r(out["k"]), bytes_sent_per_rank=r(out["W"]),
        intra_bytes_per_rank=r(out["Wi"]), inter_bytes_per_rank=r(out["Wo"]),
        algbw_bytes_per_s=r(algbw), busbw_bytes_per_s=r(busbw),
        lower_bound_bytes_per_rank=r(lb), applicable=r(ok),
    )


def candidates(collective: str) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs the auto choice compares for a collective."""
    out = []
    for alg in ALGORITHMS[collective]:
        for pr in (("simple",) if alg in ("in-switch", "nvls-tree") else PROTOCOLS):
            out.append((alg, pr))
    return out


def price_best(collective: str, nbytes: Any, ranks: Any, ranks_per_node: Any = None, *,
               fabric: Fabric, algorithms: tuple[str, ...] | None = None,
               protocols: tuple[str, ...] | None = None, nccl_p2p: bool = True) -> CostArrays:
    """NCCL's choice for every query, priced by the physical model.

    The (algorithm, protocol) is the one NCCL's own tuning model (analytic/nccl_tuner.py)
    predicts fastest, as NCCL picks it; point-to-point collectives take NCCL's size threshold
    between LL and Simple. ``algorithms`` defaults to what NCCL implements; a tuple naming
    textbook algorithms (recursive halving/doubling, hierarchical, pairwise) lets them compete
    on the physical model's times instead, since NCCL has no model of them. ``nccl_p2p`` False:
    an all-to-all's NVLink wire at the ring efficiency (see :func:`intra_efficiency`).
    """
    algorithms = algorithms or NCCL_ALGORITHMS[collective]
    pairs = [(alg, pr) for alg, pr in candidates(collective)
             if alg in algorithms and (not protocols or pr in protocols)]
    tuned = nccl_tuner.TUNED.get(collective, ())
    if len(pairs) > 1 and tuned and {a for a, _ in pairs} <= set(tuned):
        return _price_tuned(collective, pairs, nbytes, ranks, ranks_per_node, fabric)
    if len(pairs) > 1 and {a for a, _ in pairs} == {"direct"}:
        return _price_tuned(collective, pairs, nbytes, ranks, ranks_per_node, fabric, p2p=True,
                            nccl_p2p=nccl_p2p)
    priced = [price(collective, alg, nbytes, ranks, ranks_per_node, fabric=fabric, proto=pr,
                    nccl_p2p=nccl_p2p) for alg, pr in pairs]
    if len(priced) == 1:
        return priced[0]
    times = np.stack([c.time_s for c in priced])
    key = _selection_key(collective, pairs, priced, nbytes, ranks, ranks_per_node, fabric)
    pick = np.argmin(key, axis=0)  # first minimum wins ties, in candidate order
    return CostArrays(collective, **{
        f: np.choose(pick, [getattr(c, f) for c in priced])
        for f in CostArrays.__dataclass_fields__ if f != "collective"
    } | {"time_s": np.choose(pick, list(times))})


def _price_tuned(collective: str, pairs: list[tuple[str, str]], nbytes: Any, ranks: Any,
                 ranks_per_node: Any, fabric: Fabric, p2p: bool = False,
                 nccl_p2p: bool = True) -> CostArrays:
    """NCCL's model picks a pair per query (point-to-point: its LL/Simple size threshold); the
    physical model then prices each query once, with its pick (queries no pair applies to, one
    rank, take the first pair: 0 s or inf)."""
    S, n, p = _query_arrays(nbytes, ranks, ranks_per_node, fabric)
    shape = S.shape
    S, n, p = S.ravel(), n.ravel(), p.ravel()
    if p2p:
        want = nccl_tuner.p2p_protocol(S / np.maximum(n, 1.0) if collective == "all-to-all"
                                       else S)
        key = np.stack([np.where(want == pr, 0.0, np.inf) for _, pr in pairs])
    else:
        key = np.stack([np.where(_applicable(collective, a, n, np.maximum(p, 1.0), fabric),
                                 nccl_tuner.model_time_s(collective, a, pr, S, n, p, fabric),
                                 np.inf) for a, pr in pairs])
    pick = np.where(np.isfinite(key).any(axis=0), np.argmin(key, axis=0), 0)
    fields = [f for f in CostArrays.__dataclass_fields__ if f != "collective"]
    out: dict[str, np.ndarray] = {f: np.empty(S.shape, dtype=object if f in (
        "algorithm", "protocol") else (bool if f == "applicable" else float)) for f in fields}
    for i, (a, pr) in enumerate(pairs):
        m = pick == i
        if not m.any():
            continue
        c = price(collective, a, S[m], n[m], p[m], fabric=fabric, proto=pr, nccl_p2p=nccl_p2p)
        for f in fields:
            out[f][m] = getattr(c, f)
    return CostArrays(collective, **{f: v.reshape(shape) for f, v in out.items()})


def _query_arrays(nbytes: Any, ranks: Any, ranks_per_node: Any, fabric: Fabric,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    S, n = np.broadcast_arrays(np.asarray(nbytes, dtype=float), np.asarray(ranks, dtype=float))
    p = (np.minimum(n, float(fabric.gpus_per_node)) if ranks_per_node is None
         else np.asarray(ranks_per_node, dtype=float))
    S, n, p = (np.array(x, dtype=float) for x in np.broadcast_arrays(S, n, p))
    return S, n, p


def _selection_key(collective: str, pairs: list[tuple[str, str]], priced: list[CostArrays],
                   nbytes: Any, ranks: Any, ranks_per_node: Any, fabric: Fabric) -> np.ndarray:
    """What the choice minimises, per candidate and query: NCCL's model time where NCCL tunes
    the collective, NCCL's protocol threshold for point-to-point, else the physical time."""
    phys = np.stack([c.time_s for c in priced])
    algs = {a for a, _ in pairs}
    tuned = nccl_tuner.TUNED.get(collective, ())
    if tuned and algs <= set(tuned):
        S, n, p = _query_arrays(nbytes, ranks, ranks_per_node, fabric)
        key = np.stack([np.where(c.applicable, nccl_tuner.model_time_s(
            collective, a, pr, S, n, p, fabric), np.inf) for (a, pr), c in zip(pairs, priced,
                                                                              strict=True)])
        none = ~np.isfinite(key).any(axis=0)
        return np.where(none, phys, key)
    if algs == {"direct"} and collective in ("all-to-all", "send-recv"):
        S, n, _ = _query_arrays(nbytes, ranks, ranks_per_node, fabric)
        per_peer = S / np.maximum(n, 1.0) if collective == "all-to-all" else S
        want = nccl_tuner.p2p_protocol(per_peer)
        key = np.stack([np.where(want == pr, phys[i], np.inf) for i, (_, pr) in enumerate(pairs)])
        none = ~np.isfinite(key).any(axis=0)
        return np.where(none, phys, key)
    return phys


def price_many(collectives: Any, nbytes: Any, ranks: Any, ranks_per_node: Any = None, *,
               fabric: Fabric, algorithm: Any = "auto") -> CostArrays:
    """Mixed queries: arrays of collective names (and algorithms, or "auto") priced in groups."""
    colls = np.asarray(collectives, dtype=object)
    S, n, c = np.broadcast_arrays(np.asarray(nbytes, float), np.asarray(ranks, float), colls)
    p = (np.minimum(n, float(fabric.gpus_per_node)) if ranks_per_node is None
         else np.broadcast_to(np.asarray(ranks_per_node, float), S.shape))
    algs = np.broadcast_to(np.asarray(algorithm, dtype=object), S.shape)
    fields = [f for f in CostArrays.__dataclass_fields__ if f != "collective"]
    out = {f: np.empty(S.shape, dtype=object if f in ("algorithm", "protocol") else
                       (bool if f == "applicable" else float)) for f in fields}
    for coll in np.unique(c):
        for alg in np.unique(algs[c == coll]):
            m = (c == coll) & (algs == alg)
            if alg == "auto":
                r = price_best(coll, S[m], n[m], p[m], fabric=fabric)
            else:
                r = price(coll, alg, S[m], n[m], p[m], fabric=fabric)
            for f in fields:
                out[f][m] = getattr(r, f)
    return CostArrays("mixed", **out)


def _check_names(collective: str, algorithm: str) -> None:
    if collective not in ALGORITHMS:
        hint = close_matches(collective, list(COLLECTIVES)) or ", ".join(COLLECTIVES)
        raise BadInput(f"--collective: unknown collective {collective!r}; did you mean: {hint}?")
    if algorithm not in ALGORITHMS[collective]:
        raise BadInput(f"--algorithm: {algorithm!r} does not apply to {collective}; choose auto, "
                       f"{', '.join(ALGORITHMS[collective])}")


# ------------------------------------------------------------------------------------------
# one query, worked: validation, derivation, reasons for the choice
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Where a group's ranks sit: n ranks, p of them on each of N nodes."""

    ranks: int
    ranks_per_node: int

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.ranks_per_node)

    @property
    def case(self) -> str:
        if self.nodes == 1:
            return "intra"
        return "inter" if self.ranks_per_node == 1 else "mixed"


def make_group(ranks: int, fabric: Fabric, ranks_per_node: int | None = None) -> Group:
    if ranks < 1:
        raise BadInput(f"--ranks must be at least 1, got {ranks}")
    p = ranks_per_node if ranks_per_node is not None else min(ranks, fabric.gpus_per_node)
    if not 1 <= p <= min(ranks, fabric.gpus_per_node):
        raise BadInput(f"--ranks-per-node must be between 1 and min(ranks, gpus per node) = "
                       f"{min(ranks, fabric.gpus_per_node)}, got {p}")
    if ranks % p:
        raise BadInput(f"--ranks {ranks} does not fill nodes of {p} ranks evenly; use a multiple "
                       f"of {p} (or set --ranks-per-node)")
    g = Group(ranks, p)
    if g.nodes > 1 and fabric.inter is None:
        raise BadInput(f"{ranks} ranks at {p} per node span {g.nodes} nodes; give --inter LINK "
                       "for the network between nodes")
    return g


def check_size(collective: str, nbytes: float, ranks: int, elem_bytes: float) -> str:
    """BadInput for sizes that cannot be split; returns a note on padding when one applies."""
    if nbytes < 0 or not math.isfinite(nbytes):
        raise BadInput(f"--bytes must be a non-negative size, got {nbytes}")
    if nbytes % elem_bytes:
        raise BadInput(f"--bytes {nbytes:.0f} is not a whole number of {elem_bytes:g}-byte "
                       f"elements; round it to {math.ceil(nbytes / elem_bytes) * elem_bytes:.0f}")
    unit = ranks * elem_bytes
    if collective in ("reduce-scatter", "all-gather", "all-to-all") and nbytes % unit:
        padded = math.ceil(nbytes / unit) * unit
        raise BadInput(
            f"--bytes {nbytes:.0f} does not split into {ranks} equal shards of whole "
            f"{elem_bytes:g}-byte elements; NCCL takes a per-rank count, so pad the buffer to "
            f"{padded:.0f} bytes ({padded / ranks:.0f} per rank)")
    if collective == "all-reduce" and nbytes % unit:
        chunk = math.ceil(nbytes / unit) * elem_bytes
        return (f"{nbytes:.0f} bytes do not split into {ranks} equal chunks: a ring moves chunks "
                f"of up to {chunk:.0f} bytes (the last one shorter), as NCCL does; the model "
                "prices the exact size")
    return ""


def why_not(collective: str, algorithm: str, group: Group, fabric: Fabric) -> str:
    """Why an algorithm does not apply to this group ('' if it does)."""
    n, case = group.ranks, group.case
    if collective == "send-recv" and n != 2:
        return "send/recv is between exactly 2 ranks"
    if n == 1 and algorithm not in ("ring", "direct"):
        return f"{algorithm} needs at least 2 ranks"
    if case not in FORMULAS[(collective, algorithm)]:
        return {"intra": "the group fits in one node, so there is no second tier",
                "inter": "one rank per node leaves no tier inside the node",
                "mixed": "not defined for groups spanning nodes"}[case]
    if algorithm == "in-switch":
        nv = in_switch(fabric.intra.id)
        sh = in_switch(fabric.inter.id) if fabric.inter is not None else None
        if case in ("intra", "mixed") and not nv:
            return f"{fabric.intra.id} has no in-switch reduction (NVLS needs NVSwitch3 or later)"
        if case == "intra" and n < nv["min_ranks"]:  # type: ignore[index]
            return f"NVLS needs at least {nv['min_ranks']} ranks"  # type: ignore[index]
        if case in ("inter", "mixed") and not sh:
            name = fabric.inter.id if fabric.inter else "no inter link"
            return f"{name} has no in-network reduction (SHARP is InfiniBand only)"
        if case in ("inter", "mixed") and not fabric.collnet:
            return ("across nodes NVLS needs NCCL's CollNet (IB SHARP plugin), off by default "
                    "(--collnet turns it on)")
    if algorithm == "nvls-tree" and not in_switch(fabric.intra.id):
        return f"{fabric.intra.id} has no NVLS (NVLS-tree needs NVSwitch3 or later)"
    return ""


@dataclass(frozen=True)
class CollectiveCost:
    """One priced query, with its derivation and the alternatives it was chosen from."""

    collective: str
    algorithm: str
    protocol: str
    nbytes: float
    ranks: int
    ranks_per_node: int
    nodes: int
    time_s: float
    latency_s: float
    transfer_s: float
    reduce_s: float
    steps: float
    bytes_sent_per_rank: float
    intra_bytes_per_rank: float
    inter_bytes_per_rank: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    lower_bound_bytes_per_rank: float
    lower_bound_time_s: float
    efficiency_intra: float
    efficiency_inter: float
    chosen_by: str  # "user" or "auto"
    reasons: tuple[str, ...] = ()
    alternatives: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    derivation: Derivation | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "derivation"}
        d["reasons"], d["alternatives"], d["notes"] = (list(self.reasons),
                                                       list(self.alternatives), list(self.notes))
        if self.derivation is not None:
            d["derivation"] = self.derivation.to_dict()
        return d


def _scalar(c: CostArrays, f: str) -> Any:
    v = getattr(c, f)
    return v.item() if hasattr(v, "item") else v


def lower_bound_time(collective: str, nbytes: float, group: Group, fabric: Fabric) -> float:
    """Bytes the busiest rank must send over the line rate of the tiers it crosses."""
    lb = float(np_eval(LOWER_BOUND[collective], {"n": group.ranks, "S": nbytes}))
    bi = fabric.intra.bytes_per_s_per_direction
    if group.case == "intra":
        return lb / bi
    bo = fabric.inter.bytes_per_s_per_direction * fabric.nics_per_gpu  # type: ignore[union-attr]
    if group.case == "inter":
        return lb / bo
    p = group.ranks_per_node
    return max(lb * (p - 1) / p / bi, lb / (p * bo))


def collective_cost(collective: str, nbytes: float, group: Group, fabric: Fabric, *,
                    algorithm: str = "auto", proto: str = "auto",
                    elem_bytes: float = 2.0) -> CollectiveCost:
    """Price one collective on a group, choosing the algorithm/protocol when asked ("auto")."""
    if collective not in ALGORITHMS:
        _check_names(collective, "ring")
    if algorithm != "auto":
        _check_names(collective, algorithm)
        reason = why_not(collective, algorithm, group, fabric)
        if reason:
            raise BadInput(f"--algorithm {algorithm} does not apply to {collective} on "
                           f"{group.ranks} ranks ({group.ranks_per_node} per node): {reason}")
    if proto != "auto":
        protocol(proto)
    size_note = check_size(collective, nbytes, group.ranks, elem_bytes)
    n, p = group.ranks, group.ranks_per_node
    rows = []
    costs: dict[tuple[str, str], CostArrays] = {}
    for alg, pr in candidates(collective):
        if algorithm != "auto" and alg != algorithm:
            continue
        if proto != "auto" and pr != proto and alg not in ("in-switch", "nvls-tree"):
            continue
        why = why_not(collective, alg, group, fabric)
        if why:
            rows.append({"algorithm": alg, "protocol": pr, "time_s": None, "why_not": why})
            continue
        c = price(collective, alg, nbytes, n, p, fabric=fabric, proto=pr)
        costs[(alg, pr)] = c
        nccl_t = (float(nccl_tuner.model_time_s(collective, alg, pr, float(nbytes), n, p, fabric))
                  if alg in nccl_tuner.TUNED.get(collective, ()) else None)
        rows.append({"algorithm": alg, "protocol": pr, "time_s": float(c.time_s),
                     "busbw_bytes_per_s": float(c.busbw_bytes_per_s), "why_not": "",
                     "nccl_model_time_s": nccl_t if nccl_t is None or math.isfinite(nccl_t)
                     else None})
    for r in rows:
        r["in_nccl"] = r["algorithm"] in NCCL_ALGORITHMS[collective]
    priced = [r for r in rows if r["time_s"] is not None
              and (algorithm != "auto" or r["in_nccl"])]
    if not priced:
        raise BadInput(f"no algorithm applies to {collective} on {n} ranks with these options")
    pairs = [(r["algorithm"], r["protocol"]) for r in priced]
    tuned = nccl_tuner.TUNED.get(collective, ())
    if tuned and {a for a, _ in pairs} <= set(tuned):
        key = np.array([r["nccl_model_time_s"] if r["nccl_model_time_s"] is not None
                        else np.inf for r in priced])
        if not np.isfinite(key).any():
            key = np.array([r["time_s"] for r in priced])
    else:
        key = _selection_key(collective, pairs, [costs[q] for q in pairs], float(nbytes), n, p,
                             fabric)
    best = priced[int(np.argmin(np.ravel(key)))]
    c = costs[(best["algorithm"], best["protocol"])]
    reasons = _reasons(best, priced, rows, algorithm, proto)
    notes = [size_note] if size_note else []
    if n == 1:
        notes.append("one rank has nothing to exchange: the collective is a local copy (0 s here)")
    if collective == "all-reduce" and best["algorithm"] in ("in-switch", "nvls-tree"):
        notes.append("the switch adds the data, so each rank sends S once: busbw can exceed the "
                     "line rate and the 2(n-1)/n lower bound does not bind (nccl-tests#212)")
    lbt = lower_bound_time(collective, nbytes, group, fabric)
    d = derive_cost(collective, best["algorithm"], best["protocol"], nbytes, group, fabric, c)
    return CollectiveCost(
        collective=collective, algorithm=best["algorithm"], protocol=best["protocol"],
        nbytes=float(nbytes), ranks=n, ranks_per_node=p, nodes=group.nodes,
        time_s=_scalar(c, "time_s"), latency_s=_scalar(c, "latency_s"),
        transfer_s=_scalar(c, "transfer_s"), reduce_s=_scalar(c, "reduce_s"),
        steps=_scalar(c, "steps"), bytes_sent_per_rank=_scalar(c, "bytes_sent_per_rank"),
        intra_bytes_per_rank=_scalar(c, "intra_bytes_per_rank"),
        inter_bytes_per_rank=_scalar(c, "inter_bytes_per_rank"),
        algbw_bytes_per_s=_scalar(c, "algbw_bytes_per_s"),
        busbw_bytes_per_s=_scalar(c, "busbw_bytes_per_s"),
        lower_bound_bytes_per_rank=_scalar(c, "lower_bound_bytes_per_rank"),
        lower_bound_time_s=lbt, efficiency_intra=intra_efficiency(collective, fabric)[0],
        efficiency_inter=inter_efficiency(collective, fabric)[0],
        chosen_by="auto" if (algorithm == "auto" or proto == "auto") else "user",
        reasons=tuple(reasons), alternatives=tuple(rows), notes=tuple(notes), derivation=d,
    )


def _reasons(best: dict[str, Any], priced: list[dict[str, Any]], rows: list[dict[str, Any]],
             algorithm: str, proto: str) -> list[str]:
    from ..units import fmt_time

    out = []
    if algorithm == "auto" or proto == "auto":
        others = sorted((r for r in priced if r is not best), key=lambda r: r["time_s"])
        tuned = [r for r in priced if r.get("nccl_model_time_s") is not None]
        if best.get("nccl_model_time_s") is not None:
            out.append(f"{best['algorithm']}/{best['protocol']} has the least time in NCCL "
                       f"{nccl_tuner.tuner()['version']}'s own tuning model, "
                       f"{fmt_time(best['nccl_model_time_s'])}, so NCCL runs it; the physical "
                       f"model prices it at {fmt_time(best['time_s'])}")
            others = sorted((r for r in tuned if r is not best),
                            key=lambda r: r["nccl_model_time_s"])
            if others:
                r = others[0]
                out.append(f"runner-up in NCCL's model {r['algorithm']}/{r['protocol']}: "
                           f"{fmt_time(r['nccl_model_time_s'])} "
                           f"({r['nccl_model_time_s'] / best['nccl_model_time_s']:.2f}x); "
                           f"physical {fmt_time(r['time_s'])}")
        elif best["algorithm"] == "direct":
            th = nccl_tuner.tuner()["p2p_ll_threshold_bytes"]
            out.append(f"{best['algorithm']}/{best['protocol']}: {fmt_time(best['time_s'])}; "
                       "NCCL does not tune point-to-point: it sends with LL up to "
                       f"NCCL_P2P_LL_THRESHOLD ({th:.0f} bytes per peer), Simple above")
        else:
            out.append(f"{best['algorithm']}/{best['protocol']} has the lowest predicted time, "
                       f"{fmt_time(best['time_s'])} (NCCL has no model of the textbook "
                       "algorithms, so the physical model decides)")
            if others:
                r = others[0]
                out.append(f"next {r['algorithm']}/{r['protocol']}: {fmt_time(r['time_s'])} "
                           f"({r['time_s'] / best['time_s']:.2f}x)")
        for r in rows:
            if r["why_not"] and r["protocol"] in ("simple",):
                out.append(f"{r['algorithm']} not considered: {r['why_not']}")
        if algorithm == "auto":
            out.append("auto chooses among the algorithms NCCL implements; the textbook ones "
                       "(rhd, hierarchical, pairwise) are priced beside them for comparison")
    else:
        out.append("algorithm and protocol given by the user")
    return out


def derive_cost(collective: str, algorithm: str, proto: str, nbytes: float, group: Group,
                fabric: Fabric, check: CostArrays | None = None) -> Derivation:
    """The worked arithmetic of one query: the same formula strings the vectorised path uses."""
    n, p = group.ranks, group.ranks_per_node
    env = _env(collective, algorithm, proto, np.array(float(nbytes)), np.array(float(n)),
               np.array(float(p)), fabric)
    d = Derivation(f"{collective}, {ALGORITHM_LABELS[algorithm]}, protocol {proto}")
    pr = protocol(proto)
    d.given("operation size (nccl-tests convention)", "S", float(nbytes), "B")
    d.given("ranks in the group", "n", n, "1")
    d.given("ranks per node", "p", p, "1")
    d.calc("nodes spanned", "N", "ceil(n / p)", "1")
    if n == 1:
        d.note("one rank: nothing crosses a link, the time is zero")
        return d
    case = group.case
    tuned = algorithm in nccl_tuner.TUNED.get(collective, ())
    f_src = cite("nccl-2-21-5-tuning") if tuned else cite(pr["source"])
    f_note = ("NCCL's bus bandwidth for this algorithm and protocol over its ring/Simple one "
              "(protocol factor, LL and per-channel caps, tree size correction)") if tuned else ""
    if case in ("intra", "mixed") or algorithm == "in-switch":
        lk = fabric.intra
        d.given(f"{lk.id} line rate per GPU, one direction", "Bline_i",
                lk.bytes_per_s_per_direction, "B/s", source=lk.source_of("bytes_per_s_per_direction"))
        if algorithm in ("in-switch", "nvls-tree") and case != "inter":
            nv = in_switch(lk.id)
            d.given(f"{nv['mechanism']} algorithm bandwidth / line rate", "f_s",
                    nv["algbw_fraction"], "1", source=cite(nv["source"]), note=nv.get("note", ""))
            cv = in_switch_size_curve(lk.id)
            if cv:
                d.given(f"share of that rate at this size (nccl-tests on {cv['ranks']} ranks: "
                        "S / (t - L) over the plateau, at most 1)", "q_s", float(env["q_s"]), "1",
                        source=cite(cv["source"]), note=cv.get("note", ""))
                d.calc("in-switch rate", "Bs", "Bline_i * f_s * q_s", "B/s",
                       check=float(env["Bs"]))
            else:
                d.calc("in-switch rate", "Bs", "Bline_i * f_s", "B/s")
        else:
            eff, src = intra_efficiency(collective, fabric)
            what = ("NCCL's all-to-all plateau on" if collective == "all-to-all"
                    and alltoall_efficiency(_link_kind(lk)) and fabric.efficiency_intra is None
                    else "efficiency of")
            d.given(f"{what} {lk.kind} links (Simple protocol)", "e_i", eff, "1", source=src)
            d.given(f"{proto} protocol bandwidth factor", "f_proto", float(env["f_proto"]), "1",
                    source=f_src, note=f_note)
            if fabric.pcie_host is not None and _link_kind(lk) == "host":
                h = pcie_host_spec(fabric.pcie_host)
                d.given(f"share of the x16 rate a ring keeps in PCIe host {fabric.pcie_host}",
                        "h_i", pcie_ring_factor(fabric.pcie_host, int(p), lk.id), "1",
                        source=cite(h["source"]), note=h.get("note", ""))
                m_shm = shm_memory_rate(fabric.pcie_host, int(p))
                if math.isfinite(m_shm):
                    hm = _consts()["host_memory"][h["host_memory"]]
                    m_sock = float(hm["bytes_per_s_per_socket"])
                    d.given(f"host-memory peak per socket, {hm['name']}", "M_sock", m_sock, "B/s",
                            source=cite(hm["source"]), note=hm.get("note", ""))
                    st = _consts()["shm_transport"]
                    d.given("host-memory bytes per byte of an SHM hop (store + load, direct mode)",
                            "c_shm", float(st["host_bytes_per_byte"]), "1", source=cite(st["source"]))
                    d.given("most SHM hops received on one socket", "k_shm",
                            m_sock / m_shm
                            / float(st["host_bytes_per_byte"]), "1")
                    d.calc("host-memory bound of one hop (peak: an upper bound on the rate)",
                           "M_shm", "M_sock / (c_shm * k_shm)", "B/s", check=m_shm)
                    d.calc("effective rate inside a node", "Bi",
                           "min(Bline_i * e_i * h_i, M_shm) * f_proto", "B/s", check=float(env["Bi"]))
                else:
                    d.calc("effective rate inside a node", "Bi", "Bline_i * e_i * f_proto * h_i",
                           "B/s", check=float(env["Bi"]))
            elif "q_r" in env and float(env["q_r"]) != 1.0:
                cv = ring_size_curve(lk.id)
                d.given(f"share of the ring's rate at this size (nccl-tests on {cv['ranks']} "
                        "ranks: W / ((t - L) B) with NCCL's ring/Simple L, at most 1)", "q_r",
                        float(env["q_r"]), "1", source=cite(cv["source"]), note=cv.get("note", ""))
                d.calc("effective rate inside a node", "Bi", "Bline_i * e_i * f_proto * q_r",
                       "B/s", check=float(env["Bi"]))
            else:
                d.calc("effective rate inside a node", "Bi", "Bline_i * e_i * f_proto", "B/s",
                       check=float(env["Bi"]))
            if not tuned:
                d.given(f"per-step latency on {lk.kind} ({proto})", "ai", env["ai"], "s",
                        source=cite("nccl-tuning-cc"))
    if case in ("inter", "mixed"):
        lk = fabric.inter  # type: ignore[assignment]
        d.given(f"{lk.id} line rate per NIC, one direction", "Bline_o",
                lk.bytes_per_s_per_direction, "B/s", source=lk.source_of("bytes_per_s_per_direction"))
        d.given("NICs per GPU (rails)", "r", fabric.nics_per_gpu, "1")
        if algorithm == "in-switch":
            sh = in_switch(lk.id)
            d.given(f"{sh['mechanism']} algorithm bandwidth / line rate", "f_so",
                    sh["algbw_fraction"], "1", source=cite(sh["source"]), note=sh.get("note", ""))
            d.calc("in-network rate per GPU", "Bso", "Bline_o * r * f_so", "B/s")
        else:
            eff, src = inter_efficiency(collective, fabric)
            what = ("NCCL's all-to-all share of the NIC rate on" if collective == "all-to-all"
                    and alltoall_efficiency(_link_kind(lk)) and fabric.efficiency_inter is None
                    else "efficiency of")
            d.given(f"{what} {lk.kind} links (Simple protocol)", "e_o", eff, "1", source=src)
            if "f_proto" not in d.env:
                d.given(f"{proto} protocol bandwidth factor", "f_proto", float(env["f_proto"]),
                        "1", source=f_src, note=f_note)
            d.given("oversubscription slowdown for this pattern", "slow", float(env["slow"]), "1",
                    note=f"leaf-spine {fabric.oversubscription:g}:1, {fabric.nodes_per_leaf} "
                         "nodes per leaf")
            d.calc("effective rate across nodes, per GPU", "Bo",
                   "Bline_o * r * e_o * f_proto / slow", "B/s", check=float(env["Bo"]))
            if not tuned:
                d.given(f"per-step latency on the network ({proto})", "ao", env["ao"], "s",
                        source=cite("nccl-tuning-cc"))
    if tuned:
        d.given(f"latency of one call in NCCL {nccl_tuner.tuner()['version']}'s tuning model",
                "L", float(env["L"]), "s", source=cite("nccl-2-21-5-tuning"),
                note="base latency + hops x per-hop latency of each link type (ring: 1.4x "
                     "across nodes for Simple all-reduce; NVLS: one switch hop)")
    else:
        d.given("launch latency per call", "a0", env["a0"], "s", source=cite("nccl-tuning-cc"))
    if collective in REDUCING:
        d.given("reduction time per byte (1 / reduce rate)", "g", fabric.gamma_s_per_byte, "s/B",
                source=cite(_consts()["reduction"]["source"]), note=_consts()["reduction"]["note"])
    else:
        d.given("no reduction in this collective", "g", 0.0, "s/B")
    src = {"all-reduce": "thakur-2005-mpich"}.get(collective, "thakur-2005-mpich")
    if algorithm in ("tree", "nvls-tree"):
        src = "sanders-2009-two-tree"
    for name, sym, formula, unit in FORMULAS[(collective, algorithm)][case]:
        chk = {"k": check.steps, "W": check.bytes_sent_per_rank, "t_lat": check.latency_s,
               "t_bw": check.transfer_s, "t_red": check.reduce_s}.get(sym) if check else None
        if sym == "t_red" and collective not in REDUCING:
            chk = None
        d.calc(name, sym, formula, unit, check=None if chk is None else float(chk),
               source=cite(src) if sym == "W" else "")
    d.calc("time (reduction overlaps the transfer)", "t", "t_lat + max(t_bw, t_red)", "s",
           check=None if check is None else float(check.time_s))
    d.calc("algorithm bandwidth", "algbw", "S / t", "B/s")
    d.calc("bus bandwidth (nccl-tests factor)", "busbw", f"algbw * {BUSBW_FACTOR[collective]}",
           "B/s", source=cite("nccl-tests-performance-md"))
    d.calc("least bytes any algorithm must send per rank", "W_min", LOWER_BOUND[collective], "B",
           source=cite("patarasuk-yuan-2009") if collective == "all-reduce" else "", bound="lower")
    return d


def crossover(collective: str, alg_a: str, alg_b: str, ranks: int, fabric: Fabric,
              ranks_per_node: int | None = None, *, lo: float = 1.0, hi: float = 2.0**40,
              ) -> list[float]:
    """Sizes (bytes) where the best-protocol times of two algorithms cross, found numerically."""
    p = ranks_per_node or min(ranks, fabric.gpus_per_node)
    sizes = np.logspace(np.log2(lo), np.log2(hi), 2049, base=2.0)

    def t(alg: str, s: np.ndarray) -> np.ndarray:
        return price_best(collective, s, ranks, p, fabric=fabric, algorithms=(alg,)).time_s

    diff = t(alg_a, sizes) - t(alg_b, sizes)
    if not np.all(np.isfinite(diff)):
        return []
    sign = np.sign(diff)
    idx = np.nonzero(sign[:-1] * sign[1:] < 0)[0]
    out = []
    for i in idx:
        # narrow the bracket with a log-spaced grid per round (one vector call per algorithm
        # instead of a scalar bisection): 256x narrower each round, to 1e-13 relative
        a, b = sizes[i], sizes[i + 1]
        while b / a - 1 > 1e-13:
            grid = np.geomspace(a, b, 257)
            d = t(alg_a, grid) - t(alg_b, grid)
            same = np.nonzero(np.sign(d) == sign[i])[0]
            k = int(same[-1]) if same.size else 0
            if k >= grid.size - 1:  # no sign change inside (rounding): keep the bracket's end
                break
            a, b = float(grid[k]), float(grid[k + 1])
        out.append(math.sqrt(a * b))
    return out
