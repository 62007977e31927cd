"""scalemodel reliability: failure budgets, checkpoint intervals and blast radius."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, positive_int, size_bytes


def _nonneg_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return v


def _pos_float(text: str) -> float:
    v = _nonneg_float(text)
    if v == 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return v


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=positive_int, default=16384, help="GPUs in the job (default 16384)")
    p.add_argument("--gpu", default="h100-sxm",
                   help="GPU model; picks the failure profile measured on it (default h100-sxm)")
    p.add_argument("--failure-profile", default=None,
                   help="llama3-h100 | meta-rsc1-a100 | meta-rsc2-a100 (default: by --gpu)")
    p.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs per host; host and network failures scale with hosts (default 8)")
    p.add_argument("--restart-s", type=_nonneg_float, default=600.0,
                   help="relaunch + reload after an interruption, seconds (default 600)")


def register(sub: Any) -> None:
    p = sub.add_parser("reliability", help="failure budget, checkpoint interval, blast radius",
                       description="How often a synchronous job is interrupted, how often to "
                       "checkpoint (Young, Daly, simulated goodput) and what each fault takes "
                       "down.")
    s = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    c = s.add_parser("checkpoint", help="job MTBF, Young/Daly interval, goodput (analytic and "
                     "Monte Carlo, exponential and Weibull failures)")
    _common(c)
    c.add_argument("--checkpoint-write-s", type=_pos_float, default=None,
                   help="seconds to write one checkpoint synchronously (or give --model)")
    c.add_argument("--model", default=None,
                   help="model id or config.json: checkpoint size = params x (weight + optimizer "
                        "bytes), written at --storage-bw")
    c.add_argument("--optimizer", default="adam", help="optimizer state kept (default adam)")
    c.add_argument("--dtype", default="bf16", help="weight precision (default bf16)")
    c.add_argument("--storage-bw", type=size_bytes, default=None,
                   help="storage write bandwidth in bytes/s, e.g. 2TB (default 2 TB/s, Llama 3)")
    c.add_argument("--requeue-s", type=_nonneg_float, default=0.0,
                   help="wait for the scheduler to re-admit the job after a failure (default 0)")
    c.add_argument("--interval-s", type=_pos_float, default=None,
                   help="checkpoint interval to evaluate (default: Daly's optimum)")
    c.add_argument("--mode", choices=("sync", "async", "in-memory"), default="sync",
                   help="how checkpoints are taken (default sync)")
    c.add_argument("--trials", type=int, default=200,
                   help="Monte Carlo trials per interval, 0 = no simulation (default 200)")
    c.add_argument("--weibull-shape", type=_pos_float, default=None,
                   help="shape k of Weibull inter-failure times for the second simulation "
                        "(default 0.7)")
    c.add_argument("--horizon-days", type=_pos_float, default=30.0,
                   help="simulated wall time per trial (default 30 days)")
    c.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_output(c, plot=True)
    c.set_defaults(run=run_checkpoint)

    b = s.add_parser("blast-radius", help="what each fault class stops, how long, what it costs")
    _common(b)
    b.add_argument("--layout", default="tp=8,pp=16,dp=128",
                   help="parallel layout, e.g. tp=8,pp=16,dp=128 (ep, cp also; product = --gpus)")
    b.add_argument("--order", default="tp-cp-ep-dp-pp",
                   help="rank order, fastest first (default Megatron's tp-cp-ep-dp-pp)")
    b.add_argument("--nodes-per-rack", type=positive_int, default=None, help="default 4")
    b.add_argument("--nodes-per-leaf", type=positive_int, default=None, help="default 32")
    b.add_argument("--racks-per-power-domain", type=positive_int, default=None, help="default 8")
    b.add_argument("--interval-s", type=_pos_float, default=None,
                   help="checkpoint interval for rework cost (default: Daly's at 60 s writes)")
    add_output(b)
    b.set_defaults(run=run_blast)


def run_checkpoint(args: argparse.Namespace) -> Any:
    from ..errors import BadInput
    from ..sim.checkpoint import checkpoint_study

    if args.trials < 0 or args.trials == 1 or args.trials > 100000:
        raise BadInput(f"--trials must be 0 or between 2 and 100000, got {args.trials}")
    st = checkpoint_study(
        gpus=args.gpus, gpu=args.gpu, profile=args.failure_profile,
        gpus_per_node=args.gpus_per_node, checkpoint_write_s=args.checkpoint_write_s,
        model=args.model, optimizer=args.optimizer, dtype=args.dtype, storage_bw=args.storage_bw,
        restart_s=args.restart_s, requeue_s=args.requeue_s, interval_s=args.interval_s,
        mode=args.mode, trials=args.trials, weibull_shape=args.weibull_shape,
        horizon_days=args.horizon_days, sweep=bool(getattr(args, "plot", None)), seed=args.seed)
    return checkpoint_report(st)


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


def run_blast(args: argparse.Namespace) -> Any:
    from ..sim.checkpoint import blast_study

    res, h, warnings = blast_study(
        gpus=args.gpus, layout=args.layout, order=args.order, gpu=args.gpu,
        profile=args.failure_profile, gpus_per_node=args.gpus_per_node,
        nodes_per_rack=args.nodes_per_rack, nodes_per_leaf=args.nodes_per_leaf,
        racks_per_power_domain=args.racks_per_power_domain, restart_s=args.restart_s,
        interval_s=args.interval_s)
    return blast_report(res, h, warnings)


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
