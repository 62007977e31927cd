"""Expert placement: replicate hot experts into a fixed number of physical slots and place the
replicas on GPUs so that the busiest GPU is as close to the mean as possible.

Inputs are what DeepSeek's EPLB takes: a (layers x experts) table of estimated load per expert,
a number of physical slots P (a multiple of the GPU count G), G GPUs on N nodes and, optionally,
expert groups that must stay inside one node (group-limited routing).

Model (the same as EPLB's): an expert with r replicas has its tokens spread evenly over them, so
each replica carries w_e / r_e; a GPU's load is the sum over the m = P / G replicas it holds.
Imbalance = max GPU load / mean GPU load (1 is perfect).

Three things live here:

* ``eplb_rebalance``: EPLB's two policies (hierarchical and global) re-implemented in numpy
  from the description of its algorithm, as the baseline we must match or beat. Checked against
  the example in EPLB's README (tests/golden).
* ``place``: our planner. It keeps EPLB's replica counts (the D'Hondt/Jefferson rule, which
  minimises the largest replica) but improves the packing with a swap search that always
  lowers the busiest GPU (or node, for groups), and it starts the search from EPLB's own plans,
  so it is never worse than EPLB on the same input.
* ``lower_bound``: no plan with P slots can beat max(mean GPU load, t*), where t* is the
  smallest per-replica cap with sum_e ceil(w_e / t*) <= P (found by bisection, independent of
  the planner). With groups kept on nodes, the node holding the heaviest group also bounds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BadInput

# --- EPLB's building blocks, re-implemented --------------------------------------------------


def _lpt_cardinality(w: np.ndarray, n_bins: int) -> np.ndarray:
    """Greedy packing with exactly len(w)/n_bins items per bin: heaviest item first, each into
    the lightest bin that still has room (EPLB's ``balanced_packing``). Returns bin per item."""
    n = w.size
    per = n // n_bins
    if per == 1:
        return np.arange(n)
    order = np.argsort(-w, kind="stable")
    loads = np.zeros(n_bins)
    counts = np.zeros(n_bins, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    big = np.inf
    for i in order:
        masked = np.where(counts < per, loads, big)
        b = int(np.argmin(masked))
        out[i] = b
        loads[b] += w[i]
        counts[b] += 1
    return out


def _rank_in_bin(bins: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Position of each item inside its bin, in the order the LPT greedy filled it."""
    order = np.argsort(-w, kind="stable")
    rank = np.empty(bins.size, dtype=np.int64)
    seen: dict[int, int] = {}
    for i in order:
        b = int(bins[i])
        rank[i] = seen.get(b, 0)
        seen[b] = rank[i] + 1
    if bins.size and np.array_equal(bins, np.arange(bins.size)):
        rank[:] = 0
    return rank


def replicate(w: np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Jefferson/D'Hondt apportionment: one replica each, then every extra slot to the expert
    with the largest load per replica. Returns (logical expert per physical slot, count)."""
    n = w.size
    cnt = np.ones(n, dtype=np.int64)
    phy = list(range(n))
    for _ in range(slots - n):
        e = int(np.argmax(w / cnt))
        phy.append(e)
        cnt[e] += 1
    return np.asarray(phy, dtype=np.int64), cnt


def _eplb_layer(w: np.ndarray, slots: int, groups: int, nodes: int, gpus: int) -> np.ndarray:
    """EPLB for one layer: the logical expert held by each physical slot (slot s on GPU
    s // (slots / gpus)). ``groups = nodes = 1`` is the global policy."""
    n = w.size
    gsize = n // groups
    gpn = groups // nodes
    per_gpu = slots // gpus
    # step 1: groups onto nodes (LPT with cardinality), then renumber experts node by node
    gload = w.reshape(groups, gsize).sum(axis=1)
    gnode = _lpt_cardinality(gload, nodes)
    grank = _rank_in_bin(gnode, gload)
    log2mlog = ((gnode * gpn + grank) * gsize)[:, None] + np.arange(gsize)[None, :]
    log2mlog = log2mlog.reshape(-1)
    mlog2log = np.empty(n, dtype=np.int64)
    mlog2log[log2mlog] = np.arange(n)
    per_node_log = n // nodes
    per_node_phy = slots // nodes
    out = np.empty(slots, dtype=np.int64)
    for k in range(nodes):
        wl = w[mlog2log[k * per_node_log:(k + 1) * per_node_log]]
        # step 2: replicas inside the node
        phy2mlog, cnt = replicate(wl, per_node_phy)
        piece = (wl / cnt)[phy2mlog]
        # step 3: replicas onto the node's GPUs
        gpu_of = _lpt_cardinality(piece, gpus // nodes)
        rank = _rank_in_bin(gpu_of, piece)
        pos = gpu_of * per_gpu + rank
        node_slots = np.empty(per_node_phy, dtype=np.int64)
        node_slots[pos] = phy2mlog
        out[k * per_node_phy:(k + 1) * per_node_phy] = mlog2log[node_slots + k * per_node_log]
    return out


def eplb_rebalance(weight: np.ndarray, slots: int, groups: int, nodes: int, gpus: int,
                   policy: str = "auto") -> np.ndarray:
    """EPLB's plan, (layers x slots) logical expert ids. ``policy``: auto (hierarchical when
    groups % nodes == 0, as EPLB chooses), hierarchical or global."""
    w = np.asarray(weight, dtype=np.float64)
    if policy == "auto":
        policy = "hierarchical" if groups % nodes == 0 else "global"
    if policy == "global":
        groups = nodes = 1
    return np.stack([_eplb_layer(row, slots, groups, nodes, gpus) for row in w])


# --- our planner ---------------------------------------------------------------------------


def _gpu_loads(w: np.ndarray, phy: np.ndarray, gpus: int) -> np.ndarray:
    """Per-GPU load of a plan (one layer): slot s on GPU s // (slots / gpus)."""
    cnt = np.bincount(phy, minlength=w.size)
    piece = w[phy] / cnt[phy]
    return piece.reshape(gpus, -1).sum(axis=1)


def _swap_refine(piece: np.ndarray, bins: np.ndarray, n_bins: int,
                 max_iter: int = 4000) -> np.ndarray:
    """Lower the heaviest bin by swapping one of its items with an item of another bin, the swap
    that leaves the pair's larger load smallest; stop when no swap lowers it. Keeps every bin's
    item count. Returns the new bin of each item."""
    bins = bins.copy()
    loads = np.bincount(bins, weights=piece, minlength=n_bins)
    for _ in range(max_iter):
        a = int(np.argmax(loads))
        la = loads[a]
        mine = np.nonzero(bins == a)[0]
        other = np.nonzero(bins != a)[0]
        if other.size == 0:
            break
        delta = piece[mine][:, None] - piece[other][None, :]  # load moved out of a
        lb = loads[bins[other]][None, :]
        new_max = np.maximum(la - delta, lb + delta)
        ok = (delta > 0) & (new_max < la - 1e-12 * max(la, 1.0))
        if not ok.any():
            break
        new_max = np.where(ok, new_max, np.inf)
        i, j = np.unravel_index(int(np.argmin(new_max)), new_max.shape)
        ia, ib = mine[i], other[j]
        b = bins[ib]
        loads[a] -= delta[i, j]
        loads[b] += delta[i, j]
        bins[ia], bins[ib] = b, a
    return bins


def _refine_plan(w: np.ndarray, phy: np.ndarray, gpus: int, node_of_gpu: np.ndarray | None,
                 ) -> np.ndarray:
    """Swap-refine a plan's GPU packing (inside each node when ``node_of_gpu`` is given, so no
    replica changes node). Returns slots re-ordered GPU by GPU."""
    per = phy.size // gpus
    cnt = np.bincount(phy, minlength=w.size)
    piece = w[phy] / cnt[phy]
    gpu = np.repeat(np.arange(gpus), per)
    if node_of_gpu is None:
        gpu = _swap_refine(piece, gpu, gpus)
    else:
        for k in np.unique(node_of_gpu):
            gs = np.nonzero(node_of_gpu == k)[0]
            idx = np.nonzero(np.isin(gpu, gs))[0]
            local = np.searchsorted(gs, gpu[idx])
            local = _swap_refine(piece[idx], local, gs.size)
            gpu[idx] = gs[local]
    order = np.lexsort((-piece, gpu))
    return phy[order]


def _grouped_plan(w: np.ndarray, slots: int, groups: int, nodes: int, gpus: int) -> np.ndarray:
    """Groups onto nodes (LPT then swaps that lower the heaviest node), replicas inside each
    node (Jefferson), replicas onto the node's GPUs (LPT then swaps)."""
    n = w.size
    gsize = n // groups
    gload = w.reshape(groups, gsize).sum(axis=1)
    gnode = _lpt_cardinality(gload, nodes)
    if groups // nodes > 1:
        gnode = _swap_refine(gload, gnode, nodes)
    per_node_phy = slots // nodes
    gpn = gpus // nodes
    out = []
    for k in range(nodes):
        experts = (np.nonzero(gnode == k)[0][:, None] * gsize + np.arange(gsize)).reshape(-1)
        wl = w[experts]
        phy, cnt = replicate(wl, per_node_phy)
        piece = (wl / cnt)[phy]
        g = _lpt_cardinality(piece, gpn) if per_node_phy > gpn else np.arange(per_node_phy)
        g = _swap_refine(piece, g, gpn)
        order = np.lexsort((-piece, g))
        out.append(experts[phy[order]])
    return np.concatenate(out)


def _global_plan(w: np.ndarray, slots: int, gpus: int) -> np.ndarray:
    phy, cnt = replicate(w, slots)
    piece = (w / cnt)[phy]
    g = _lpt_cardinality(piece, gpus) if slots > gpus else np.arange(slots)
    g = _swap_refine(piece, g, gpus)
    return phy[np.lexsort((-piece, g))]


# --- bounds and traffic -----------------------------------------------------------------------


def replica_cap(w: np.ndarray, slots: int, iters: int = 60) -> float:
    """Smallest per-replica load t with sum_e ceil(w_e / t) <= slots (bisection)."""
    pos = w[w > 0]
    if pos.size == 0:
        return 0.0
    lo, hi = 0.0, float(pos.max())
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        need = np.ceil(pos / mid - 1e-12).sum() + (w.size - pos.size)
        if need <= slots:
            hi = mid
        else:
            lo = mid
    return hi


def lower_bound(w: np.ndarray, slots: int, gpus: int, nodes: int = 1, groups: int = 0,
                keep_groups: bool = False) -> float:
    """A lower bound on max GPU load / mean GPU load for any plan with these slots."""
    total = float(w.sum())
    if total <= 0:
        return 1.0
    mean = total / gpus
    lb = max(mean, replica_cap(w, slots)) / mean
    if keep_groups and groups:
        g = np.sort(w.reshape(groups, -1).sum(axis=1))
        q = groups // nodes
        heaviest_node = g[-1] + g[: q - 1].sum()  # the node holding the heaviest group
        lb = max(lb, heaviest_node / (total / nodes))
    return lb


def remote_nodes_per_token(w: np.ndarray, phy: np.ndarray, slot_node: np.ndarray, nodes: int,
                           top_k: int) -> float:
    """Expected number of other nodes one token's dispatch reaches, for a token on a random
    node choosing top_k experts independently in proportion to load, each copy going to one of
    the expert's replicas evenly (a deduplicating dispatcher sends one copy per node)."""
    total = float(w.sum())
    if total <= 0 or nodes <= 1:
        return 0.0
    cnt = np.bincount(phy, minlength=w.size)
    share = (w / total)[phy] / cnt[phy]  # probability that one pick lands on this slot
    q = np.bincount(slot_node, weights=share, minlength=nodes)  # one pick lands on node j
    touched = 1.0 - (1.0 - q) ** top_k
    # a token from node n reaches the other nodes j != n
    return float((touched.sum() * nodes - touched.sum()) / nodes)


# --- the result ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PlacementResult:
    """Expert placement for every layer. JSON keys fixed by the issue: imbalance_before,
    imbalance_after, lower_bound (means over layers) and placement (per layer, per GPU, the
    logical expert ids it holds)."""

    layers: int
    experts: int
    slots: int
    gpus: int
    nodes: int
    groups: int
    keep_groups_on_node: bool
    imbalance_before: float
    imbalance_after: float
    lower_bound: float
    eplb_hierarchical: float | None
    eplb_global: float | None
    per_layer: dict[str, list[float]]
    replicas: list[list[int]]
    placement: list[list[list[int]]]
    node_imbalance_before: float
    node_imbalance_after: float
    remote_nodes_per_token_before: float
    remote_nodes_per_token_after: float
    cross_node_bytes_per_token_after: float
    top_k: int
    hidden: int
    dispatch_bytes_per_element: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "extra"} | self.extra


def static_gpu(n_experts: int, gpus: int) -> np.ndarray:
    """The layout before balancing: expert e on GPU e // (E / G) when G divides E, otherwise
    round-robin (e mod G); no redundant experts."""
    e = np.arange(n_experts)
    return e // (n_experts // gpus) if n_experts % gpus == 0 else e % gpus


def validate(weight: np.ndarray, slots: int, gpus: int, nodes: int, groups: int,
             keep_groups: bool) -> None:
    from .moe_data import check_limit

    layers, e = weight.shape
    if e < 1 or layers < 1:
        raise BadInput("--loads: the table has no experts or no layers")
    check_limit("--loads: experts (columns)", e, "place_experts")
    check_limit("--slots", slots, "place_slots")
    check_limit("--slots x layers in --loads", slots * layers, "place_slots_x_layers")
    if slots < e:
        raise BadInput(f"--slots: {slots} physical slots is fewer than the {e} experts in --loads")
    if slots % gpus:
        raise BadInput(f"--slots: {slots} is not divisible by --gpus {gpus}; each GPU must hold "
                       "the same number of slots")
    if gpus % nodes:
        raise BadInput(f"--gpus: {gpus} is not divisible by --nodes {nodes}")
    if groups and e % groups:
        raise BadInput(f"--groups: {groups} does not divide the {e} experts")
    if keep_groups:
        if not groups:
            raise BadInput("--keep-groups-on-node needs --groups")
        if groups % nodes:
            raise BadInput(f"--keep-groups-on-node: --groups {groups} is not divisible by "
                           f"--nodes {nodes}, so whole groups cannot fill the nodes evenly")


def place(weight: np.ndarray, *, slots: int, gpus: int, nodes: int = 1, groups: int = 0,
          keep_groups: bool = False, top_k: int = 8, hidden: int = 7168,
          dispatch_bytes: float = 1.0) -> PlacementResult:
    """Plan every layer; compare with EPLB's policies on the same input."""
    w = np.asarray(weight, dtype=np.float64)
    validate(w, slots, gpus, nodes, groups, keep_groups)
    layers, e = w.shape
    per_gpu = slots // gpus
    gpn = gpus // nodes
    node_of_gpu = np.arange(gpus) // gpn
    hier_ok = bool(groups) and groups % nodes == 0
    before, after, lbs, eh, eg, nb, na, rb, ra = ([] for _ in range(9))
    placement, replicas = [], []
    sgpu = static_gpu(e, gpus)
    slot_node = np.repeat(np.arange(gpus), per_gpu) // gpn
    for row in w:
        mean = row.sum() / gpus if row.sum() > 0 else 1.0
        sl = np.bincount(sgpu, weights=row, minlength=gpus)
        before.append(float(sl.max() / mean) if row.sum() > 0 else 1.0)
        nb.append(float(np.bincount(node_of_gpu, weights=sl).max() / (mean * gpn))
                  if row.sum() > 0 else 1.0)
        cands = []
        if hier_ok:
            h = _eplb_layer(row, slots, groups, nodes, gpus)
            eh.append(float(_gpu_loads(row, h, gpus).max() / mean))
            cands.append(_refine_plan(row, h, gpus, node_of_gpu))
            cands.append(_grouped_plan(row, slots, groups, nodes, gpus))
        if not keep_groups:
            g = _eplb_layer(row, slots, 1, 1, gpus)
            eg.append(float(_gpu_loads(row, g, gpus).max() / mean))
            cands.append(_refine_plan(row, g, gpus, None))
            cands.append(_global_plan(row, slots, gpus))
        loads = [(_gpu_loads(row, c, gpus).max(), i) for i, c in enumerate(cands)]
        best = cands[min(loads)[1]]
        gl = _gpu_loads(row, best, gpus)
        after.append(float(gl.max() / mean))
        na.append(float(np.bincount(node_of_gpu, weights=gl).max() / (mean * gpn)))
        lbs.append(lower_bound(row, slots, gpus, nodes, groups, keep_groups))
        rb.append(remote_nodes_per_token(row, np.arange(e), sgpu // gpn, nodes, top_k))
        ra.append(remote_nodes_per_token(row, best, slot_node, nodes, top_k))
        placement.append(best.reshape(gpus, per_gpu).tolist())
        replicas.append(np.bincount(best, minlength=e).tolist())

    def mean_of(xs: list[float]) -> float | None:
        xs = [x for x in xs if x == x]
        return float(np.mean(xs)) if xs else None

    ra_mean = float(np.mean(ra))
    return PlacementResult(
        layers=layers, experts=e, slots=slots, gpus=gpus, nodes=nodes, groups=groups,
        keep_groups_on_node=keep_groups,
        imbalance_before=float(np.mean(before)), imbalance_after=float(np.mean(after)),
        lower_bound=float(np.mean(lbs)),
        eplb_hierarchical=mean_of(eh), eplb_global=mean_of(eg),
        per_layer={"imbalance_before": before, "imbalance_after": after, "lower_bound": lbs,
                   **({"eplb_hierarchical": eh} if eh else {}),
                   **({"eplb_global": eg} if eg else {}),
                   "remote_nodes_per_token": ra},
        replicas=replicas, placement=placement,
        node_imbalance_before=float(np.mean(nb)), node_imbalance_after=float(np.mean(na)),
        remote_nodes_per_token_before=mean_of(rb) or 0.0,
        remote_nodes_per_token_after=ra_mean,
        cross_node_bytes_per_token_after=ra_mean * hidden * dispatch_bytes * layers,
        top_k=top_k, hidden=hidden, dispatch_bytes_per_element=dispatch_bytes,
    )


# --- input ------------------------------------------------------------------------------------


def read_loads_csv(text: str, where: str = "--loads") -> np.ndarray:
    """Parse a loads table: one row per layer, one column per expert, non-negative numbers; an
    optional header row (any non-numeric first row). Errors name the row and column."""
    import csv
    import io
    import math

    rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if not rows:
        raise BadInput(f"{where}: the file has no rows (only blank lines)")

    def num(c: str) -> float | None:
        try:
            return float(c)
        except ValueError:
            return None

    start = 0
    if any(num(c.strip()) is None for c in rows[0]):
        start = 1  # a header row
    if start >= len(rows):
        raise BadInput(f"{where}: only a header row, no loads")
    width = len(rows[start])
    from .moe_data import check_limit

    check_limit(f"{where}: experts (columns)", width, "place_experts")
    out = np.empty((len(rows) - start, width))
    for i, r in enumerate(rows[start:]):
        line = i + start + 1
        if len(r) != width:
            raise BadInput(f"{where}: row {line} has {len(r)} columns, expected {width} "
                           "(one per expert)")
        for j, c in enumerate(r):
            v = num(c.strip())
            if v is None or not math.isfinite(v):
                raise BadInput(f"{where}: row {line}, column {j + 1}: {c.strip()!r} is not a "
                               "number")
            if v < 0:
                raise BadInput(f"{where}: row {line}, column {j + 1}: load {v:g} is negative")
            out[i, j] = v
    return out


def zipf_loads(layers: int, experts: int, s: float, *, tokens: int = 8192, top_k: int = 8,
               seed: int = 0) -> np.ndarray:
    """Synthetic loads: expert of popularity rank r gets share proportional to r^-s, a random
    permutation per layer (hot experts scattered over groups), counts sampled for
    tokens x top_k routing decisions (the recipe of the EPLB measurements we compare with)."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, experts + 1, dtype=np.float64) ** -s
    p /= p.sum()
    out = np.empty((layers, experts))
    for i in range(layers):
        perm = rng.permutation(experts)
        out[i, perm] = rng.multinomial(tokens * top_k, p)
    return out
