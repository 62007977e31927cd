"""ring-allreduce: derive 2(N-1)K/N, why it is near optimal, and where trees win."""

from __future__ import annotations

from typing import Any

from ..analytic.collectives import (
    ALGORITHMS,
    collective_cost,
    crossover,
    make_fabric,
    make_group,
    price_best,
)
from ..derive import Derivation, Headline, Report, Section, Table
from ..units import fmt_bytes, fmt_rate, fmt_time
from .params import Param

PROMPT = (
    "Derive the cost of a ring all-reduce: how many bytes does each rank send, how many steps "
    "does it take, and why is that close to the best any algorithm can do? When does a tree "
    "beat the ring, and at what message size?"
)

DEFAULTS = {"ranks": 8, "bytes": 2.0**30, "intra": "nvlink4", "inter": "ndr-400", "nodes": 16,
            "gpus_per_node": 8}

PARAMS: tuple[Param, ...] = (
    Param("ranks", "int", DEFAULTS["ranks"], "ranks in the all-reduce", "ranks", lo=2, hi=131072),
    Param("bytes", "bytes", DEFAULTS["bytes"], "all-reduce size (1GiB, 256MB)", "B", lo=1),
    Param("intra", "str", DEFAULTS["intra"], "link inside a node (a links.toml id)"),
    Param("inter", "str", DEFAULTS["inter"], "NIC between nodes (a links.toml id)"),
    Param("nodes", "int", DEFAULTS["nodes"], "nodes of the multi-node comparison", "nodes", lo=1, hi=16384),
    Param("gpus_per_node", "int", DEFAULTS["gpus_per_node"], "GPUs per node (NVLink domain)", "GPUs", lo=1, hi=1024),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    n, S = int(o["ranks"]), float(o["bytes"])
    fab = make_fabric(o["intra"], o["inter"], gpus_per_node=int(o["gpus_per_node"]))
    one_node = make_group(n, fab, min(n, fab.gpus_per_node))
    # the N ranks fill nodes of gpus_per_node: one node only when N fits in it
    n_nodes = -(-n // one_node.ranks_per_node)
    where = (f"inside one {n}-GPU node" if n_nodes == 1 else
             f"on {n} GPUs over {n_nodes} nodes of {one_node.ranks_per_node}")
    over = (fab.intra.id if n_nodes == 1 or fab.inter is None else
            f"{fab.intra.id} inside the nodes and {fab.inter.id} between them")

    d = Derivation("ring all-reduce = reduce-scatter + all-gather")
    d.given("ranks", "N", n, "1")
    d.given("buffer per rank", "K", S, "B")
    d.calc("chunk each rank owns", "c", "K / N", "B")
    d.calc("reduce-scatter steps (pass a chunk right, add the one from the left)", "k_rs",
           "N - 1", "1")
    d.calc("all-gather steps (pass the finished chunks around)", "k_ag", "N - 1", "1")
    d.calc("bytes each rank sends", "W", "(k_rs + k_ag) * c", "B")
    d.calc("the same, closed form", "W2", "2 * (N - 1) * K / N", "B")
    d.calc("lower bound for any algorithm (Patarasuk & Yuan 2009)", "W_min",
           "2 * (N - 1) / N * K", "B", bound="lower")

    r = collective_cost("all-reduce", S, one_node, fab, algorithm="ring", proto="simple")
    s1 = Section(
        "1. Bytes and steps of the ring",
        text=("Cut the buffer into N chunks. In N-1 steps every rank sends one chunk to its right "
              "neighbour and adds the chunk arriving from its left; after them each rank holds "
              "one fully reduced chunk. N-1 more steps circulate the finished chunks. Every rank "
              "sends 2(N-1) chunks of K/N bytes, and all links are busy at every step, so the "
              "time is set by one link's bandwidth, independent of N for large K."),
        derivation=d)
    s1b = Section(f"   Priced {where} ({over})", headlines=(
        Headline("time", r.time_s, "s"), Headline("busbw", r.busbw_bytes_per_s, "B/s"),
        Headline("bandwidth-only lower bound at line rate", r.lower_bound_time_s, "s")),
        derivation=r.derivation)

    s2 = Section(
        "2. Why it is near optimal",
        text=(f"Each rank's contribution must leave it, and each rank must receive everyone "
              f"else's contribution to its result: Patarasuk and Yuan prove no algorithm that "
              f"combines data at the endpoints sends fewer than 2(N-1)K/N bytes from some rank. "
              f"The ring sends exactly that, over neighbour links only, with no contention. What "
              f"it loses is latency: 2(N-1) sequential steps. Here the ring's "
              f"{fmt_time(r.time_s)} is {r.time_s / r.lower_bound_time_s:.2f}x the line-rate "
              f"bound of {fmt_time(r.lower_bound_time_s)}, the gap being the stated "
              + (f"{fab.intra.id} efficiency ({r.efficiency_intra:g})" if n_nodes == 1 else
                 f"{fab.inter.id if fab.inter else fab.intra.id} efficiency "
                 f"({r.efficiency_inter:g}) on the slowest hop")
              + f" and {fmt_time(r.latency_s)} of step latency. "
              "Switch-side reduction (NVLS, SHARP) is the only way below the bound: the switch, "
              "not the ranks, does the adding."))

    nodes = int(o["nodes"])
    big = make_group(nodes * fab.gpus_per_node, fab, fab.gpus_per_node)
    x_big = crossover("all-reduce", "tree", "ring", big.ranks, fab, big.ranks_per_node)
    x_one = crossover("all-reduce", "tree", "ring", n, fab, one_node.ranks_per_node)
    sizes = [2.0**k for k in range(10, 35, 4)]
    rows = []
    for alg in ALGORITHMS["all-reduce"]:
        c = price_best("all-reduce", sizes, big.ranks, big.ranks_per_node, fabric=fab,
                       algorithms=(alg,))
        rows.append((alg, *[t for t in c.time_s]))
    tab = Table(f"all-reduce time (s) on {nodes} nodes x {fab.gpus_per_node} GPUs, best protocol",
                ("algorithm", *[fmt_bytes(s) for s in sizes]), tuple(rows))
    xs = ", ".join(fmt_bytes(x) for x in x_big) or "none in 1 B - 1 TiB"
    s3 = Section(
        "3. Where trees win: the crossover, found from the model",
        text=(f"A ring's latency grows with 2(N-1) steps; NCCL's double binary tree needs about "
              f"2 log2(nodes) network steps but moves ~2K per rank. On {big.ranks} GPUs "
              f"({nodes} nodes) tree and ring cross at {xs}: below it the tree's fewer steps win, "
              f"above it the ring's fewer bytes do. "
              + (f"Inside one {n}-GPU node, where NCCL runs the tree as a chain, the crossings "
                 "are at " if n_nodes == 1 else f"For the {n} ranks asked about ({n_nodes} nodes "
                 f"of {one_node.ranks_per_node}), the crossings are at ")
              + f"{', '.join(fmt_bytes(x) for x in x_one) or 'none'}."),
        tables=(tab,))
    lat8 = price_best("all-reduce", 1024.0, big.ranks, big.ranks_per_node, fabric=fab,
                      algorithms=("ring",))
    tree8 = price_best("all-reduce", 1024.0, big.ranks, big.ranks_per_node, fabric=fab,
                       algorithms=("tree",))
    followups = (
        ("What is busbw and why does nccl-tests report it?",
         f"algbw x 2(N-1)/N: it undoes the ring's extra traffic so the number compares with the "
         f"link rate at any N. Here busbw {fmt_rate(r.busbw_bytes_per_s)} vs a "
         f"{fmt_rate(fab.intra.bytes_per_s_per_direction)} line."),
        ("How long does a 1 KiB all-reduce take on the big cluster?",
         f"ring {fmt_time(float(lat8.time_s))} vs tree {fmt_time(float(tree8.time_s))}: "
         "latency-bound, so steps matter, not bytes."),
        ("What does recursive halving/doubling buy?",
         "The same 2(N-1)K/N bytes in 2 log2 N steps (Rabenseifner), but partners change every "
         "step, so it needs a full-bisection network and power-of-two N (else an extra step)."),
        ("How can busbw exceed the NVLink line rate?",
         "With NVLS the switch adds the data; each GPU sends K once, not 2(N-1)K/N; measured "
         "~480 GB/s busbw on 8 x H100 vs 450 GB/s line rate (nccl-tests#212)."),
        ("Does the ring hold on gloo/CPU?",
         "Yes in bytes: scalemodel comm bench builds it from send/recv and counts exactly "
         "2(N-1)K/N per rank; the time is dominated by process scheduling, not bandwidth."),
    )
    data = {"question": "ring-allreduce", "options": o, "ring": r.to_dict(), "nodes": n_nodes,
            "crossover_bytes_multi_node": x_big, "crossover_bytes_one_node": x_one,
            "sweep": {"sizes": sizes, "rows": [list(x) for x in rows]}}
    return Report(f"ring-allreduce: {n} ranks, {fmt_bytes(S)}", (s1, s1b, s2, s3), data,
                  question=PROMPT,
                  assumptions=(f"Fabric: {fab.describe()}.",
                               "Latencies and protocol factors from NCCL's tuning model; "
                               "efficiencies stated once per link kind, not fitted."),
                  followups=followups)
