"""Figures for the answers that do not draw their own: each is read from the answer's ``data``
(the numbers ``--json`` prints), so the picture and the tables cannot disagree.

``attach(qid, report)`` returns the report with ``plot`` set (a callable(path) for ``--plot FILE``
and the web's inline SVG, which draws through report/svg.py without matplotlib). A figure
function returns None when the data it needs is absent (the answer then has no figure).
Quantities are plotted in people's units (GB, ms, %); the data stays in base units.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

Draw = Callable[[str], Any]


def _short(label: str, n: int = 22) -> str:
    head = label.split(" (")[0]
    return head if len(head) <= n else head[: n - 1] + "."


def _bars(title: str, labels: list[str], series: dict[str, list[float]], ylabel: str) -> Draw:
    """A bar chart (stacked when ``series`` has several entries) of numbers already computed."""

    def draw(path: str) -> Any:
        from ..report import plot

        return plot.bars(path, title=title, labels=labels, series=series, ylabel=ylabel)
    return draw


def _kv_cache(d: dict[str, Any]) -> Draw | None:
    rows = d.get("mitigations") or []
    return _bars("KV cache per token, by attention layout and cache type",
                 [_short(r["layout"]) for r in rows],
                 {"KB per token": [r["kv_bytes_per_token"] / 1e3 for r in rows]},
                 "KB per token (1 KB = 1e3 B)") if rows else None


def _training_memory(d: dict[str, Any]) -> Draw | None:
    b, lay = d.get("breakdown"), d.get("min_layout") or {}
    name = f"tp{lay.get('tp', 1)} pp{lay.get('pp', 1)} dp{lay.get('dp', 1)}"
    return _bars("Bytes per GPU at the smallest layout that fits", [name],
                 {k: [v / 1e9] for k, v in b.items()}, "GB per GPU") if b else None


def _strategies_bars(title: str, strategies: list[dict[str, Any]]) -> Draw | None:
    return _bars(title, [_short(s["name"]) for s in strategies],
                 {"GB per GPU per step": [s["bytes_per_step"] / 1e9 for s in strategies]},
                 "GB sent per GPU per step") if strategies else None


def _parallelism_traffic(d: dict[str, Any]) -> Draw | None:
    return _strategies_bars("Bytes each parallelism sends per step",
                            (d.get("traffic") or {}).get("strategies") or [])


def _ring_allreduce(d: dict[str, Any]) -> Draw | None:
    sw = d.get("sweep") or {}
    sizes, rows = sw.get("sizes") or [], sw.get("rows") or []
    if not sizes or not rows:
        return None

    def draw(path: str) -> Any:
        from ..report import plot

        lines = [(str(r[0]), [s / 1e6 for s in sizes], [t * 1e3 for t in r[1:]]) for r in rows
                 if len(r) == len(sizes) + 1]
        return plot.curves(path, title=f"All-reduce time by algorithm on {d['nodes']} nodes",
                           xlabel="message size (MB)", ylabel="time (ms)", lines=lines,
                           logx=True, logy=True)
    return draw


def _fabric_map(d: dict[str, Any]) -> Draw | None:
    fam = d.get("bytes_per_step_by_family")
    if not fam:
        return _strategies_bars("Bytes per step by parallelism",
                                (d.get("traffic") or {}).get("strategies") or [])
    return _bars("Bytes per GPU per step by parallelism (all its collectives)", list(fam),
                 {"GB": [v / 1e9 for v in fam.values()]}, "GB per GPU per step")


def _nccl_topology(d: dict[str, Any]) -> Draw | None:
    rows = d.get("intra_links") or []
    return _bars("All-reduce bus bandwidth inside one node, by link",
                 [_short(r["link"]) for r in rows],
                 {"busbw": [r["busbw_bytes_per_s"] / 1e9 for r in rows]},
                 "bus bandwidth (GB/s)") if rows else None


def _moe_latency_layout(d: dict[str, Any]) -> Draw | None:
    cands = (d.get("candidates") or {}).get("decode") or []
    cands = [c for c in cands if c.get("latency_p99_s") and c.get("tokens_per_s_per_gpu")]
    if not cands:
        return None

    def draw(path: str) -> Any:
        from ..report import plot

        ok = [c for c in cands if c.get("meets_sla")]
        bad = [c for c in cands if not c.get("meets_sla")]
        pts = [(name, [c["tokens_per_s_per_gpu"] for c in cs],
                [c["latency_p99_s"] * 1e3 for c in cs]) for name, cs in
               (("meets the SLA", ok), ("misses the SLA or does not fit", bad)) if cs]
        return plot.curves(path, title="Decode layouts: throughput against p99 step latency",
                           xlabel="tokens/s per GPU", ylabel="p99 per-token latency (ms)",
                           lines=[("TPOT SLA", [min(c["tokens_per_s_per_gpu"] for c in cands),
                                                max(c["tokens_per_s_per_gpu"] for c in cands)],
                                   [d["tpot_sla_s"] * 1e3] * 2)],
                           points=pts, logx=True)
    return draw


def _moe_global_serving(d: dict[str, Any]) -> Draw | None:
    kv = d.get("kv") or {}
    if not kv:
        return None

    def draw(path: str) -> Any:
        from ..report import plot

        lines = []
        for m, k in kv.items():
            xs = k["prefix_tokens"]
            lines.append((f"{m}: fetch over the WAN", xs, [t * 1e3 for t in k["fetch_s"]]))
            lines.append((f"{m}: recompute", xs, [t * 1e3 for t in k["recompute_s"]]))
        return plot.curves(path, title="A remote prefix's KV: fetch it or recompute it",
                           xlabel="prefix tokens", ylabel="time (ms)", lines=lines, logx=True,
                           logy=True)
    return draw


def _moe_routing(d: dict[str, Any]) -> Draw | None:
    aux = (d.get("runs") or {}).get("aux") or {}
    sweep = aux.get("capacity_sweep") or []
    if not sweep:
        return None

    def draw(path: str) -> Any:
        from ..report import plot

        cf = [c["capacity_factor"] for c in sweep]
        return plot.curves(path, title="Capacity factor: dropped tokens against padding "
                           "(auxiliary-loss router)", xlabel="capacity factor",
                           ylabel="share of routed copies (%)",
                           lines=[("dropped", cf, [100 * c["dropped_fraction"] for c in sweep]),
                                  ("padding", cf, [100 * c["padding_fraction"] for c in sweep])])
    return draw


def _memory_hierarchy(d: dict[str, Any]) -> Draw | None:
    lv = [x for x in d.get("levels") or [] if x.get("latency_ns") and x.get("capacity_bytes")]
    if not lv:
        return None

    def draw(path: str) -> Any:
        from ..report import plot

        return plot.curves(path, title="Capacity against latency, registers to the network",
                           xlabel="capacity (bytes)", ylabel="latency (ns)", lines=[],
                           points=[(x["level"], [x["capacity_bytes"]], [x["latency_ns"]])
                                   for x in lv], logx=True, logy=True)
    return draw


def _warp_divergence(d: dict[str, Any]) -> Draw | None:
    cases = d.get("cases") or []
    return _bars("SIMT efficiency by branch condition",
                 [" && ".join(c["predicates"]) or "(none)" for c in cases],
                 {"active lanes": [100 * c["simt_efficiency"] for c in cases]},
                 "active lanes per issued instruction (%)") if cases else None


def _blast_radius(d: dict[str, Any]) -> Draw | None:
    faults = [f for f in d.get("faults") or [] if f.get("gpu_hours_per_month", 0) > 0]
    return _bars(f"GPU-hours lost per month by fault class, {d.get('gpus', 0):,} GPUs",
                 [f["component"] for f in faults],
                 {"thousand GPU-hours": [f["gpu_hours_per_month"] / 1e3 for f in faults]},
                 "thousand GPU-hours per month (no spares)") if faults else None


def _cluster_scheduler(d: dict[str, Any]) -> Draw | None:
    rows = d.get("synthetic") or []
    return _bars(f"Synthetic workload on {rows[0]['capacity_gpus']:,} GPUs: utilisation by policy",
                 [r["policy"] for r in rows],
                 {"utilisation": [100 * r["utilization"] for r in rows]},
                 "GPU utilisation (%)") if rows else None


def _slowdown_triage(d: dict[str, Any]) -> Draw | None:
    runs = {n: r.get("per_rank") or [] for n, r in (d.get("runs") or {}).items()}
    if not any(runs.values()):
        return None

    def draw(path: str) -> Any:
        from ..report import plot

        lines = [(n, [p["rank"] for p in pr], [p["step_s"] / p["step_ref_s"] for p in pr])
                 for n, pr in runs.items() if pr and all(p["step_ref_s"] > 0 for p in pr)]
        return plot.curves(path, title="Each rank's step time against its healthy steps, per run",
                           xlabel="rank", ylabel="step time / healthy step time", lines=lines)
    return draw


def _billing(d: dict[str, Any]) -> Draw | None:
    vs = d.get("variants") or []
    cur = (d.get("invoice") or {}).get("currency", "")
    return _bars("The same usage billed under each rule", [_short(v["rule"], 26) for v in vs],
                 {"total": [v["total_minor_units"] / 100 for v in vs]},
                 f"invoice total ({cur})".replace(" ()", "")) if vs else None


FIGURES: dict[str, Callable[[dict[str, Any]], Draw | None]] = {
    "kv-cache": _kv_cache,
    "training-memory": _training_memory,
    "parallelism-traffic": _parallelism_traffic,
    "ring-allreduce": _ring_allreduce,
    "fabric-map": _fabric_map,
    "nccl-topology": _nccl_topology,
    "moe-latency-layout": _moe_latency_layout,
    "moe-global-serving": _moe_global_serving,
    "moe-routing": _moe_routing,
    "memory-hierarchy": _memory_hierarchy,
    "warp-divergence": _warp_divergence,
    "blast-radius": _blast_radius,
    "cluster-scheduler": _cluster_scheduler,
    "slowdown-triage": _slowdown_triage,
    "billing": _billing,
}


def attach(qid: str, rep: Any) -> Any:
    """``rep`` with its figure: its own where the question draws one, else one from FIGURES."""
    if getattr(rep, "plot", None) is not None or qid not in FIGURES:
        return rep
    data = rep.data if isinstance(rep.data, dict) else {}
    draw = FIGURES[qid](data)
    return rep if draw is None else dataclasses.replace(rep, plot=draw)
