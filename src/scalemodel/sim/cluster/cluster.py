"""Cluster state and placement: nodes of G GPUs (one NVLink domain each), racks of nodes.

Free GPUs are kept per node and indexed by their count (``bucket[c]`` is the set of nodes with
exactly ``c`` free GPUs) so that a fit is found in O(G) and fragmentation is a sum over G
buckets. Racks keep the set of their wholly free nodes for topology-aware placement.

Placement rules shared by every strategy (a gang is all-or-nothing):

- a job of at most G GPUs runs on one node (a pod is never split);
- a larger job takes ``gpus // G`` whole nodes, plus one node with ``gpus % G`` free GPUs.

Strategies: ``spread`` (the naive one: a job of at most G GPUs goes to a node with the most free
GPUs, as Kubernetes' default LeastAllocated scoring spreads pods; larger jobs as ``pack``),
``pack`` (best fit on nodes, whole nodes in free-list order), ``topology`` (best
fit, and a multi-node job inside the rack that fits it most tightly; spread over the fewest
racks otherwise), ``fgd`` (the node whose use fragments the free GPUs least for the expected
job sizes, after Weng et al. 2023).
"""

from __future__ import annotations

from itertools import islice

Placement = list[tuple[int, int]]  # (node, gpus)


class Cluster:
    __slots__ = ("nodes", "gpn", "npr", "free", "bucket", "rack_of", "rack_full", "free_total",
                 "capacity", "n_racks")

    def __init__(self, nodes: int, gpus_per_node: int, nodes_per_rack: int) -> None:
        self.nodes, self.gpn, self.npr = nodes, gpus_per_node, nodes_per_rack
        self.capacity = nodes * gpus_per_node
        self.free = [gpus_per_node] * nodes
        self.bucket: list[set[int]] = [set() for _ in range(gpus_per_node + 1)]
        self.bucket[gpus_per_node] = set(range(nodes))
        self.rack_of = [n // nodes_per_rack for n in range(nodes)]
        self.n_racks = (nodes + nodes_per_rack - 1) // nodes_per_rack
        self.rack_full: list[set[int]] = [set() for _ in range(self.n_racks)]
        for n in range(nodes):
            self.rack_full[self.rack_of[n]].add(n)
        self.free_total = self.capacity

    # --- bookkeeping ------------------------------------------------------------------------
    def _set(self, node: int, new: int) -> None:
        old = self.free[node]
        self.bucket[old].discard(node)
        self.bucket[new].add(node)
        if old == self.gpn:
            self.rack_full[self.rack_of[node]].discard(node)
        if new == self.gpn:
            self.rack_full[self.rack_of[node]].add(node)
        self.free[node] = new

    def take(self, placement: Placement) -> None:
        for node, g in placement:
            if g > self.free[node]:
                raise AssertionError(f"node {node}: taking {g} GPUs, {self.free[node]} free")
            self._set(node, self.free[node] - g)
            self.free_total -= g

    def give(self, placement: Placement) -> None:
        for node, g in placement:
            if self.free[node] + g > self.gpn:
                raise AssertionError(f"node {node}: returning more GPUs than it has")
            self._set(node, self.free[node] + g)
            self.free_total += g

    def racks(self, placement: Placement) -> int:
        return len({self.rack_of[n] for n, _ in placement})

    def unusable_for(self, gpus: int) -> int:
        """Free GPUs on nodes that cannot host (a piece of) a job of ``gpus`` GPUs."""
        s = min(gpus, self.gpn)
        return sum(c * len(self.bucket[c]) for c in range(1, s))

    # --- feasibility without placing (used by preemption) ------------------------------------
    def fits_with(self, gpus: int, extra: dict[int, int]) -> bool:
        """Would a job of ``gpus`` fit if ``extra[node]`` more GPUs were free on those nodes?"""
        gpn = self.gpn
        free = self.free
        if gpus <= gpn:
            if any(self.bucket[c] for c in range(gpus, gpn + 1)):
                return True
            return any(free[n] + e >= gpus for n, e in extra.items())
        k, rem = divmod(gpus, gpn)
        full = len(self.bucket[gpn]) + sum(1 for n, e in extra.items()
                                           if free[n] < gpn and free[n] + e >= gpn)
        if full < k:
            return False
        if rem == 0 or full > k:
            return True
        # exactly k whole nodes: the remainder needs another node with rem free
        if any(self.bucket[c] for c in range(rem, gpn)):
            return True
        return any(rem <= free[n] + e < gpn for n, e in extra.items())


# --- placement strategies ------------------------------------------------------------------

def _best_fit_node(cl: Cluster, g: int, upto: int | None = None) -> int | None:
    for c in range(g, (upto if upto is not None else cl.gpn) + 1):
        b = cl.bucket[c]
        if b:
            return next(iter(b))
    return None


def place_pack(cl: Cluster, g: int, ctx: object = None) -> Placement | None:
    gpn = cl.gpn
    if g <= gpn:
        n = _best_fit_node(cl, g)
        return None if n is None else [(n, g)]
    k, rem = divmod(g, gpn)
    full = cl.bucket[gpn]
    if len(full) < k:
        return None
    rem_node = _best_fit_node(cl, rem, gpn - 1) if rem else None
    if rem and rem_node is None:
        if len(full) < k + 1:
            return None
        nodes = list(islice(full, k + 1))
        return [(n, gpn) for n in nodes[:k]] + [(nodes[k], rem)]
    out = [(n, gpn) for n in islice(full, k)]
    if rem:
        out.append((rem_node, rem))  # type: ignore[arg-type]
    return out


def place_topology(cl: Cluster, g: int, ctx: object = None) -> Placement | None:
    """One node if it fits; else one rack (the tightest that fits); else the fewest racks."""
    gpn = cl.gpn
    if g <= gpn:
        # best fit on the node; among equal fits prefer racks with the fewest whole free nodes,
        # so that whole racks stay free for large gangs (a bounded look at 32 candidates)
        for c in range(g, gpn + 1):
            b = cl.bucket[c]
            if b:
                if c < gpn:
                    return [(next(iter(b)), g)]
                best = min(islice(b, 32), key=lambda n: len(cl.rack_full[cl.rack_of[n]]))
                return [(best, g)]
        return None
    k, rem = divmod(g, gpn)
    need = k + (1 if rem else 0)
    if len(cl.bucket[gpn]) < k:
        return None
    # a rack holding the whole gang: k whole nodes plus a remainder node inside the rack
    best_r, best_free = -1, 1 << 30
    for r in range(cl.n_racks):
        nf = len(cl.rack_full[r])
        if nf >= need and nf < best_free:
            best_r, best_free = r, nf
    if best_r >= 0:
        rf = cl.rack_full[best_r]
        if rem:
            # prefer a partly free node of the same rack for the remainder
            lo = best_r * cl.npr
            part = [n for n in range(lo, min(lo + cl.npr, cl.nodes)) if rem <= cl.free[n] < gpn]
            if part:
                rn = min(part, key=lambda n: cl.free[n])
                return [(n, gpn) for n in islice(rf, k)] + [(rn, rem)]
        nodes = list(islice(rf, need))
        return [(n, gpn) for n in nodes[:k]] + ([(nodes[k], rem)] if rem else [])
    # spread: take whole nodes from the racks with the most whole free nodes first
    order = sorted(range(cl.n_racks), key=lambda r: -len(cl.rack_full[r]))
    nodes: list[int] = []
    for r in order:
        nodes.extend(islice(cl.rack_full[r], k - len(nodes)))
        if len(nodes) == k:
            break
    out = [(n, gpn) for n in nodes]
    if rem:
        rn = _best_fit_node(cl, rem, gpn - 1)
        if rn is None:
            taken = set(nodes)
            rn = next((n for n in cl.bucket[gpn] if n not in taken), None)
            if rn is None:
                return None
        out.append((rn, rem))
    return out


def fgd_delta(gpn: int, size_weights: list[float], c: int, g: int) -> float:
    """Change of expected fragmentation of one node when ``g`` of its ``c`` free GPUs are used.

    A node's fragmentation for a job of size s is its free GPUs when fewer than s are free
    (they cannot host that job), else 0; the expectation weighs sizes by the workload
    (``size_weights[s]``, s = 1..G; multi-node jobs count as s = G).
    """
    def frag(f: int) -> float:
        return f * sum(size_weights[s] for s in range(f + 1, gpn + 1))

    return frag(c - g) - frag(c)


class FgdContext:
    """Size distribution of the workload, and the precomputed deltas per (free, size)."""

    def __init__(self, gpn: int, sizes: list[int]) -> None:
        w = [0.0] * (gpn + 1)
        for s in sizes:
            w[min(s, gpn)] += 1
        tot = sum(w) or 1.0
        self.weights = [x / tot for x in w]
        self.delta = [[fgd_delta(gpn, self.weights, c, g) if g <= c else 0.0
                       for g in range(gpn + 1)] for c in range(gpn + 1)]


def place_fgd(cl: Cluster, g: int, ctx: FgdContext | None = None) -> Placement | None:
    gpn = cl.gpn
    if ctx is None or g > gpn:
        if g > gpn and ctx is not None:
            k, rem = divmod(g, gpn)
            if rem == 0 or len(cl.bucket[gpn]) < k:
                return place_pack(cl, g)
            pl = place_pack(cl, g - rem) if k else []
            if pl is None:
                return None
            taken = {n for n, _ in pl}
            cands = [c for c in range(rem, gpn + 1)
                     if cl.bucket[c] and (c < gpn or len(cl.bucket[gpn]) > k)]
            if not cands:
                return None
            c = min(cands, key=lambda c: (ctx.delta[c][rem], c))
            n = next(n for n in cl.bucket[c] if n not in taken)
            return pl + [(n, rem)]
        return place_pack(cl, g)
    best_c, best_d = -1, 0.0
    for c in range(g, gpn + 1):
        if cl.bucket[c]:
            d = ctx.delta[c][g]
            if best_c < 0 or d < best_d - 1e-12:
                best_c, best_d = c, d
    if best_c < 0:
        return None
    return [(next(iter(cl.bucket[best_c])), g)]


def place_spread(cl: Cluster, g: int, ctx: object = None) -> Placement | None:
    """Worst fit: the node with the most free GPUs (spreads load, strands GPUs)."""
    if g > cl.gpn:
        return place_pack(cl, g)
    for c in range(cl.gpn, g - 1, -1):
        b = cl.bucket[c]
        if b:
            return [(next(iter(b)), g)]
    return None


STRATEGIES = {"spread": place_spread, "pack": place_pack, "topology": place_topology, "fgd": place_fgd}
