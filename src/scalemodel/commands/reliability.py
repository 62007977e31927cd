"""scalemodel reliability: failure budgets, checkpoint intervals and blast radius."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    MAX_GPUS,
    MAX_SECONDS,
    add_output,
    at_most,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    size_bytes,
)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=at_most(positive_int, MAX_GPUS, "a cluster size bound"), default=16384, help="GPUs in the job (default 16384)")
    p.add_argument("--gpu", default="h100-sxm",
                   help="GPU model; picks the failure profile measured on it (default h100-sxm)")
    p.add_argument("--failure-profile", default=None,
                   help="llama3-h100 | meta-rsc1-a100 | meta-rsc2-a100 (default: by --gpu)")
    p.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs per host; host and network failures scale with hosts (default 8)")
    p.add_argument("--restart-s", type=at_most(non_negative_float, MAX_SECONDS, "seconds"), default=600.0,
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
    c.add_argument("--checkpoint-write-s", type=at_most(positive_float, MAX_SECONDS, "seconds"), default=None,
                   help="seconds to write one checkpoint synchronously (or give --model)")
    c.add_argument("--model", default=None,
                   help="model id or config.json: checkpoint size = params x (weight + optimizer "
                        "bytes), written at --storage-bw")
    c.add_argument("--optimizer", default="adam", help="optimizer state kept (default adam)")
    c.add_argument("--dtype", default="bf16", help="weight precision (default bf16)")
    c.add_argument("--storage-bw", type=size_bytes, default=None,
                   help="storage write bandwidth in bytes/s, e.g. 2TB (default 2 TB/s, Llama 3)")
    c.add_argument("--requeue-s", type=at_most(non_negative_float, MAX_SECONDS, "seconds"), default=0.0,
                   help="wait for the scheduler to re-admit the job after a failure (default 0)")
    c.add_argument("--interval-s", type=at_most(positive_float, MAX_SECONDS, "seconds"), default=None,
                   help="checkpoint interval to evaluate (default: Daly's optimum)")
    c.add_argument("--mode", choices=("sync", "async", "in-memory"), default="sync",
                   help="how checkpoints are taken (default sync)")
    c.add_argument("--trials", type=int, default=200,
                   help="Monte Carlo trials per interval, 0 = no simulation (default 200)")
    c.add_argument("--weibull-shape", type=positive_float, default=None,
                   help="shape k of Weibull inter-failure times for the second simulation "
                        "(default 0.7)")
    c.add_argument("--horizon-days", type=positive_float, default=30.0,
                   help="simulated wall time per trial (default 30 days)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    add_output(c, plot=True)
    c.set_defaults(run=run_checkpoint)

    b = s.add_parser("blast-radius", help="what each fault class stops, how long, what it costs")
    _common(b)
    b.add_argument("--layout", default="tp=8,pp=16,dp=128",
                   help="parallel layout in plan train's keys, e.g. tp=8,pp=16,dp=128 (cp, ep also; ep is drawn from dp: tp x pp x dp x cp = --gpus)")
    b.add_argument("--order", default="tp-cp-ep-dp-pp",
                   help="rank order, fastest first (default Megatron's tp-cp-ep-dp-pp)")
    b.add_argument("--nodes-per-rack", type=positive_int, default=None, help="default 4")
    b.add_argument("--nodes-per-leaf", type=positive_int, default=None, help="default 32")
    b.add_argument("--racks-per-power-domain", type=positive_int, default=None, help="default 8")
    b.add_argument("--interval-s", type=at_most(positive_float, MAX_SECONDS, "seconds"), default=None,
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
    from ..views.reliability import checkpoint_report

    return checkpoint_report(st)


def run_blast(args: argparse.Namespace) -> Any:
    from ..sim.checkpoint import blast_study

    res, h, warnings = blast_study(
        gpus=args.gpus, layout=args.layout, order=args.order, gpu=args.gpu,
        profile=args.failure_profile, gpus_per_node=args.gpus_per_node,
        nodes_per_rack=args.nodes_per_rack, nodes_per_leaf=args.nodes_per_leaf,
        racks_per_power_domain=args.racks_per_power_domain, restart_s=args.restart_s,
        interval_s=args.interval_s)
    from ..views.reliability import blast_report

    return blast_report(res, h, warnings)


