"""scalemodel triage: run faulty torch.distributed jobs, and triage hung or slow runs."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, finite_float, positive_int

SCENARIOS = ("healthy", "dead-rank", "hang", "op-mismatch", "size-mismatch", "order-mismatch",
             "straggler", "slow-link", "lost-overlap")


def register(sub: Any) -> None:
    p = sub.add_parser("triage", help="hang and slowdown triage from per-rank traces",
                       description="Find the rank and collective behind a hang, or tell a "
                       "straggler from a fabric problem or lost overlap, from PyTorch Flight "
                       "Recorder dumps (pickle or JSON, read without executing them) or "
                       "scalemodel's own per-rank collective traces.")
    s = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    r = s.add_parser("run", help="launch a real gloo job with an injected fault; leaves traces")
    r.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    r.add_argument("--ranks", type=positive_int, default=4, help="processes (2-16, default 4)")
    r.add_argument("--out", required=True, help="folder for traces and dumps")
    r.add_argument("--steps", type=positive_int, default=12, help="training steps (default 12)")
    r.add_argument("--fault-step", type=positive_int, default=5, help="first faulty step (default 5)")
    r.add_argument("--fault-rank", type=int, default=-1, help="rank at fault (default: the last)")
    r.add_argument("--ranks-per-node", type=positive_int, default=2,
                   help="ranks labelled as one node in the traces (default 2)")
    r.add_argument("--pg-timeout-s", type=finite_float, default=4.0,
                   help="collective timeout of the process group (default 4)")
    add_output(r)
    r.set_defaults(run=run_job)
    for name, fn, hlp in (("hang", run_hang, "verdict, rank(s), group, sequence number, op"),
                          ("slow", run_slow, "straggler, fabric or lost overlap, with scores")):
        h = s.add_parser(name, help=hlp)
        h.add_argument("dir", metavar="DIR", help="folder (or file) with per-rank traces/dumps"
                       + ("; a CSV of per-worker step times also works" if name == "slow" else ""))
        h.add_argument("--format", choices=("auto", "fr", "trace", "kineto"), default="auto",
                       help="which records to read when several exist (default: scalemodel "
                            "traces, else torch.profiler/Kineto traces, else Flight Recorder)")
        h.add_argument("--world-size", type=positive_int, default=None,
                       help="ranks the job had (default: from the files; gloo dumps may not say)")
        if name == "slow":
            h.add_argument("--baseline", metavar="DIR", default=None,
                           help="a healthy run to compare against (default: the run's own "
                                "steps before the slowdown)")
        add_output(h)
        h.set_defaults(run=fn)


def run_job(args: argparse.Namespace) -> Any:
    from ..errors import BadInput
    from ..live.triage_run import run_scenario
    from ..traces.hang import analyse_hang
    from ..traces.load import load_dir
    from ..traces.slow import analyse_slow
    from ..views.triage import run_report

    res = run_scenario(args.scenario, args.ranks, args.out, steps=args.steps,
                       fault_step=args.fault_step, fault_rank=args.fault_rank,
                       ranks_per_node=args.ranks_per_node, pg_timeout_s=args.pg_timeout_s)
    verdicts = {}
    for fmt in ("trace", "fr"):
        try:
            ts = load_dir(args.out, fmt)
        except BadInput as e:  # a run may leave no dumps of one kind
            verdicts[fmt] = {"error": str(e)}
            continue
        h = analyse_hang(ts, args.ranks)
        entry: dict[str, Any] = {"hang": {"verdict": h.verdict, "ranks": list(h.ranks),
                                          "group": h.group, "seq": h.seq, "op": h.op}}
        try:
            sl = analyse_slow(ts)
            entry["slow"] = {"verdict": sl.verdict, "ranks": list(sl.ranks)}
        except BadInput as e:  # a hung run has too few steps to time
            entry["slow"] = {"error": str(e)}
        verdicts[fmt] = entry
    return run_report(args.scenario, args.ranks, args.out, res, verdicts)


def run_hang(args: argparse.Namespace) -> Any:
    from ..errors import BadInput
    from ..traces.hang import analyse_hang
    from ..traces.load import load_dir
    from ..views.triage import hang_report

    ts = load_dir(args.dir, args.format, args.world_size)
    if ts.fmt == "kineto":
        raise BadInput("DIR: torch.profiler (Kineto) traces time finished work and cannot show a "
                       "hang; use Flight Recorder dumps or scalemodel traces (--format fr/trace)")
    r = analyse_hang(ts, args.world_size)
    return hang_report(r, args.dir)


def run_slow(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from ..traces.load import load_dir
    from ..traces.slow import analyse_slow, analyse_step_table
    from ..views.triage import slow_report

    if Path(args.dir).is_file() and args.dir.endswith(".csv"):
        r = analyse_step_table(args.dir)
    else:
        base = load_dir(args.baseline, args.format, args.world_size) if args.baseline else None
        ts = load_dir(args.dir, args.format, args.world_size)
        r = analyse_slow(ts, base)
        if ts.fmt == "kineto":
            from ..traces.kineto import overlap_per_step

            ov = overlap_per_step(ts)
            r.input["overlap_per_step"] = {str(rk): {str(st): d for st, d in sorted(v.items())}
                                           for rk, v in sorted(ov.items())}
    return slow_report(r, args.dir)
