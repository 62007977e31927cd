"""Views of the reliability engine's results (checkpoint interval, blast radius)."""

from __future__ import annotations

from typing import Any


def checkpoint_report(st: Any, title: str = "") -> Any:
    from ..derive import Headline, Report, Section, Table
    from ..report.plot import curves

    r = st.result
    heads = [Headline("job MTBF", r.job_mtbf_s, "s"),
             Headline("interruptions per day", r.rate_per_day, "1/day"),
             Headline("Young's interval", r.young_interval_s, "s"),
             Headline("Daly's interval", r.daly_interval_s, "s"),
             Headline(f"goodput at {r.interval_s:,.0f} s ({r.mode})", r.goodput, "")]
    secs = [Section(f"Failure budget: {r.gpus:,} GPUs, profile {r.profile}", headlines=tuple(heads),
                    derivation=r.derivation)]
    if st.sim_exponential is not None:
        se, sw = st.sim_exponential, st.sim_weibull
        rows = [("exponential (Daly's model)", se.goodput, se.goodput_stderr, r.goodput,
                 se.failures_per_trial),
                (f"Weibull k={sw.shape:g}, same mean", sw.goodput, sw.goodput_stderr, float("nan"),
                 sw.failures_per_trial)]
        text = (f"{se.trials} simulated runs of {se.horizon_s / 86400:g} days each at the chosen "
                f"interval. With exponential failures the simulation and Daly's formula differ "
                f"by {abs(se.goodput - r.goodput) / r.goodput:.2%}. Weibull failures with k < 1 "
                "bunch after repairs, which the formula cannot express; the best interval "
                f"found by a simulated sweep is {st.weibull_best[0]:,.0f} s "
                f"(goodput {st.weibull_best[1]:.4f}).")
        secs.append(Section("Monte Carlo check", text=text, tables=(Table(
            "", ("failures", "simulated goodput", "std error", "analytic", "failures per run"),
            tuple(rows)),)))
    secs.append(Section("Sync, async and in-memory checkpoints", tables=(Table(
        "same write time and restart; stall = time training waits per checkpoint",
        ("mode", "stall s", "restart s", "Daly interval s", "goodput"), st.mode_rows),)))
    secs.append(Section("Scale", tables=(Table(
        "job MTBF falls as 1/N", ("GPUs", "job MTBF s", "Daly interval s", "goodput"),
        st.scale_rows),)))

    def plot(path: str) -> None:
        best = r.best_interval_s
        curves(path, title=f"Goodput vs checkpoint interval ({r.gpus:,} GPUs, MTBF "
               f"{r.job_mtbf_s / 3600:.2f} h, stall {r.stall_s:g} s, restart {r.restart_s:g} s)",
               xlabel="checkpoint interval tau (s)", ylabel="goodput (ETTR)",
               lines=[("Daly's model (exponential)", st.sweep_taus, st.sweep_analytic)],
               points=[("simulated, exponential", st.sweep_taus, st.sweep_sim),
                       ("simulated, Weibull", st.sweep_taus, st.sweep_sim_weibull)],
               marks=[(f"optimum {best:,.0f} s", best),
                      (f"Young {r.young_interval_s:,.0f} s", r.young_interval_s)], logx=True)

    return Report(title or f"scalemodel reliability checkpoint: {r.gpus:,} GPUs",
                  tuple(secs), st.to_dict(), warnings=st.warnings,
                  plot=plot if st.sweep_taus else None)


def blast_report(res: Any, h: Any, warnings: tuple[str, ...] = (), title: str = "") -> Any:
    from ..derive import Headline, Report, Section, Table

    rows = tuple((f.component, f.scope, f.replicas_hit, f.rate_per_day, f.detect_s, f.recovery_s,
                  f.gpu_hours_per_month, f.gpu_hours_per_month_spares,
                  f.gpu_hours_per_month_elastic) for f in res.faults)
    d = res.to_dict()
    heads = (Headline("job-stopping faults per day", d["job_stopping_rate_per_day"], "1/day"),
             Headline("GPU-hours lost per month", d["gpu_hours_per_month"], "GPU*h"),
             Headline("... with hot spares", d["gpu_hours_per_month_spares"], "GPU*h"),
             Headline("... with spares and elastic DP", d["gpu_hours_per_month_elastic"], "GPU*h"))
    text = (f"{res.gpus:,} GPUs, layout {res.layout}, rank order {res.order}; {h.gpus_per_node} "
            f"GPUs per node, {h.nodes_per_rack} nodes per rack, {h.nodes_per_leaf} nodes per "
            f"leaf, {h.racks_per_power_domain} racks per power domain. A synchronous job stops "
            "on every scope but 'none'. Single points of failure (stop the job whatever the "
            f"spares or elasticity): {', '.join(res.spofs) or 'none'}.")
    sec = Section("Blast radius per fault class", text=text, headlines=heads, tables=(Table(
        "cost = faults per month x (recovery + half a checkpoint interval) x GPUs stopped",
        ("fault", "scope", "DP replicas hit", "per day", "detect s", "recovery s",
         "GPU*h/month", "with spares", "spares + elastic DP"), rows),))
    return Report(title or f"scalemodel reliability blast-radius: {res.gpus:,} GPUs",
                  (sec, Section("", derivation=res.derivation)), d, warnings=warnings)
