"""View of the cluster scheduler simulator: one policy's replay, or every policy side by side."""

from __future__ import annotations

from typing import Any


def _intro(wl: Any, cfg: Any) -> str:
    where = (f"{cfg.nodes} nodes x {cfg.gpus_per_node} GPUs = {cfg.capacity:,} GPUs in racks of "
             f"{cfg.nodes_per_rack} nodes; a gang spread over racks runs "
             f"{cfg.spread_penalty:.0%} slower")
    intro = (f"{len(wl.jobs):,} jobs from {wl.name}; {len(wl.rejects):,} records not replayed "
             "(reasons in --json 'rejects'). " + " ".join(wl.notes))
    return intro + " " + where + "."


def compare_table(results: Any) -> Any:
    """One row per policy (``cluster compare`` and the cluster-scheduler answer)."""
    from ..derive import Table
    from ..sim.cluster import run as sr

    return Table("one row per policy", sr.COMPARE_COLUMNS, sr.compare_rows(results))


def compare_report(wl: Any, cfg: Any, results: Any) -> Any:
    """``cluster compare``: one row per policy on the same workload."""
    from ..derive import Report, Section

    sec = Section(f"All policies on {wl.name}", text=_intro(wl, cfg),
                  tables=(compare_table(results),))
    return Report("scalemodel cluster compare", (sec,),
                  {"workload": wl.name, "jobs": len(wl.jobs), "rejects_count": len(wl.rejects),
                   "results": [r.to_dict() for r in results]})


def simulate_report(wl: Any, cfg: Any, r: Any) -> Any:
    """``cluster simulate``: utilisation, queueing, JCT and fairness of one policy's replay."""
    from ..derive import Headline, Report, Section, Table
    from ..sim.cluster import run as sr

    heads = (Headline("offered load (demanded GPU-s / C x arrival window)",
                      f"{r.offered_load:.1%}"),
             Headline("utilisation over the arrival window", f"{r.utilization_arrivals:.1%}"),
             Headline("fragmentation over the arrival window (of capacity)",
                      f"{r.fragmentation_arrivals:.2%}"),
             Headline("arrival window / drain after it",
                      f"{r.arrival_window_s / 86400:.1f} / {r.drain_s / 86400:.1f} days"),
             Headline("utilisation during the drain", f"{r.utilization_drain:.1%}"),
             Headline("utilisation over the makespan (allocated / useful)",
                      f"{r.utilization:.1%} / {r.useful_utilization:.1%}"),
             Headline("JCT p50 / p99", f"{r.jct_p50_s:,.0f} s / {r.jct_p99_s:,.0f} s"),
             Headline("mean queueing delay", r.queue_delay_mean_s, "s"),
             Headline("fragmentation over the makespan", f"{r.fragmentation_mean:.2%}"),
             Headline("preemptions / lost GPU-hours", f"{r.preemptions:,} / "
                      f"{r.lost_gpu_hours:,.1f}"),
             Headline("jobs completed", f"{r.jobs_completed:,} of {r.jobs_in:,}"))
    size_rows = tuple((s.size_class, s.jobs, round(s.queue_delay_mean_s), round(s.jct_mean_s),
                       round(s.jct_p50_s), round(s.jct_p99_s)) for s in r.by_size)
    team_rows = tuple((t["team"], t["nominal_gpus"] if t["nominal_gpus"] is not None else "-",
                       round(t["allocated_gpu_s"] / 3600, 1), round(t["allocated_share"], 4),
                       round(t["demand_gpu_s"] / 3600, 1), round(t["queue_delay_mean_s"]),
                       t["preemptions"]) for t in r.teams)
    sections = (
        Section(f"{r.policy} on {wl.name}", text=_intro(wl, cfg), headlines=heads),
        Section("GPU time", derivation=sr.accounting(r),
                text="Checkpoint contract defaults: " + "; ".join(sr.contract_sources())),
        Section("By job size", tables=(Table(
            "completed jobs by GPU count", ("GPUs", "jobs", "queue delay mean (s)",
                                            "JCT mean (s)", "JCT p50 (s)", "JCT p99 (s)"),
            size_rows),)),
        Section("By team", text=f"Jain's fairness index of allocated share over entitled "
                f"share: {r.quota_fairness_jain:.3f} (1 = every team got its share).",
                tables=(Table("teams", ("team", "quota (GPUs)", "allocated GPU-h", "share",
                                        "demanded GPU-h", "queue delay mean (s)",
                                        "preemptions"), team_rows),)),
    )
    rep = Report(f"scalemodel cluster simulate --policy {r.policy}", sections, r.to_dict(),
                 plot=(lambda path: _plot_timeline(r, path)))
    return rep


def _plot_timeline(r: Any, path: str) -> None:
    from ..report.plot import cluster_timeline

    t0 = r.series[0][0]
    cluster_timeline(path, title=f"{r.policy} on {r.workload}: utilisation {r.utilization:.1%}, "
                                 f"fragmentation {r.fragmentation_mean:.1%}",
                     hours=[(t - t0) / 3600 for t, _, _ in r.series],
                     allocated=[a / r.capacity_gpus for _, a, _ in r.series],
                     unusable=[f / r.capacity_gpus for _, _, f in r.series])
