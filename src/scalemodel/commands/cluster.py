"""scalemodel cluster: replay a job trace on a simulated GPU cluster under a scheduling policy."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    add_output,
    at_most,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)

POLICIES = ("fifo", "backfill", "gang", "topology", "preempt", "quota", "fragmentation",
            "naive")


def _quota(text: str) -> tuple[str, int]:
    team, sep, n = text.partition("=")
    try:
        v = int(n)
    except ValueError:
        v = -1
    if not sep or not team or v < 0:
        raise argparse.ArgumentTypeError(f"expected TEAM=GPUS (e.g. LS=512), got {text!r}")
    return team, v


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cluster", help="GPU cluster scheduler simulator: replay a trace under a policy",
        description="Event-driven replay of a job trace (the Alibaba GPU trace v2023, your CSV, "
        "or a synthetic large-training workload) on a cluster of nodes and racks, under one "
        "scheduling policy or all of them: utilisation, queueing delay, JCT, fragmentation, "
        "preemptions and lost work.")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.required = True
    for name, helptext in (("simulate", "run one policy"),
                           ("compare", "run every policy on the same workload")):
        q = s.add_parser(name, help=helptext, description=helptext)
        q.add_argument("--trace", default="alibaba-v2023",
                       help="alibaba-v2023 (bundled), synthetic, alibaba-mix (synthetic jobs with the "
                            "trace's job-size mix), or a CSV file: our format "
                            "(id,submit_s,gpus,duration_s[,priority,team,checkpoint_interval_s,"
                            "checkpoint_cost_s,restore_s,grace_s]) or an openb pod list")
        q.add_argument("--nodes", type=at_most(positive_int, 2**17, "a cluster size bound"),
                       default=128, help="nodes (default 128)")
        q.add_argument("--gpus-per-node", type=at_most(positive_int, 72, "an NVL72 rack is the largest "
                                                      "NVLink domain sold"), default=8,
                       help="GPUs per node = one NVLink domain (default 8)")
        q.add_argument("--nodes-per-rack", type=positive_int, default=None,
                       help="nodes per rack (default: scheduler.toml [topology])")
        q.add_argument("--spread-penalty", type=non_negative_float, default=None,
                       help="extra run time of a gang spread over racks, as a fraction "
                            "(default: scheduler.toml [topology])")
        if name == "simulate":
            q.add_argument("--policy", choices=POLICIES, default="backfill",
                           help="scheduling policy (default backfill)")
        q.add_argument("--quota", type=_quota, action="append", metavar="TEAM=GPUS",
                       help="nominal GPU quota of a team (quota policy; repeat per team; "
                            "default: equal shares)")
        q.add_argument("--no-borrow", action="store_true",
                       help="quota policy: teams may not borrow idle quota")
        q.add_argument("--backfill-depth", type=positive_int, default=100,
                       help="waiting jobs examined per scheduling pass (default 100)")
        g = q.add_argument_group("workload")
        g.add_argument("--jobs", type=positive_int, default=10000,
                       help="synthetic: number of jobs (default 10000)")
        g.add_argument("--seed", type=non_negative_int, default=0, help="synthetic: seed")
        g.add_argument("--load", type=positive_float, default=None,
                       help="synthetic: offered load, demanded/available GPU-time (default 0.9)")
        g.add_argument("--time-scale", type=positive_float, default=1.0,
                       help="divide the trace's arrival times by this (raise the load of a "
                            "real trace; default 1)")
        g.add_argument("--checkpoint-interval", type=non_negative_float, default=None,
                       help="seconds of work between checkpoints when the trace does not say "
                            "(default 1800; 0 = never)")
        g.add_argument("--checkpoint-cost", type=non_negative_float, default=None,
                       help="seconds to write one checkpoint (default 60)")
        g.add_argument("--restore", type=non_negative_float, default=None,
                       help="seconds to restart from a checkpoint (default 120)")
        g.add_argument("--grace", type=non_negative_float, default=None,
                       help="grace period before a preempted job must stop (default 0)")
        if name == "simulate":
            o = q.add_argument_group("exports")
            o.add_argument("--chrome-trace", metavar="FILE.json",
                           help="write every job run as a Chrome/Perfetto trace event")
            o.add_argument("--usage-out", metavar="FILE.csv",
                           help="write usage records (account = team) for scalemodel bill")
            o.add_argument("--sku", default="gpu-hour",
                           help="SKU written in --usage-out records (default gpu-hour)")
        add_output(q, plot=name == "simulate")
        q.set_defaults(run=run)


def _setup(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..sim.cluster.run import ClusterConfig, load_workload, topology_defaults

    topo = topology_defaults()
    cfg = ClusterConfig(
        nodes=args.nodes, gpus_per_node=args.gpus_per_node,
        nodes_per_rack=args.nodes_per_rack or int(topo["nodes_per_rack"]),
        spread_penalty=(args.spread_penalty if args.spread_penalty is not None
                        else topo["spread_penalty"]),
        backfill_depth=args.backfill_depth, borrowing=not args.no_borrow,
        quotas=tuple(args.quota or ()))
    contract = {k: v for k, v in (("checkpoint_interval_s", args.checkpoint_interval),
                                  ("checkpoint_cost_s", args.checkpoint_cost),
                                  ("restore_s", args.restore), ("grace_s", args.grace))
                if v is not None}
    wl = load_workload(args.trace, cfg.capacity, jobs=args.jobs, seed=args.seed, load=args.load,
                       time_scale=args.time_scale, contract=contract)
    if not wl.jobs:
        from ..errors import BadInput

        raise BadInput(f"--trace: {wl.name} has no usable job ({len(wl.rejects)} rejected)")
    return cfg, wl


def run(args: argparse.Namespace) -> Any:
    from ..sim.cluster import run as sr
    from ..views.cluster import compare_report, simulate_report

    cfg, wl = _setup(args)
    if args.action == "compare":
        return compare_report(wl, cfg, sr.compare(wl, cfg))
    record = bool(args.chrome_trace or args.usage_out or getattr(args, "plot", None))
    r = sr.run_policy(wl, args.policy, cfg, record=record)
    if args.chrome_trace:
        sr.write_chrome_trace(r, args.chrome_trace, cfg.gpus_per_node)
    if args.usage_out:
        sr.write_usage(r, wl, args.usage_out, args.sku)
    return simulate_report(wl, cfg, r)
