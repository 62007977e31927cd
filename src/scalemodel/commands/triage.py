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
    from ..derive import Headline, Report, Section, Table
    from ..errors import BadInput
    from ..live.triage_run import run_scenario
    from ..traces.hang import analyse_hang
    from ..traces.load import load_dir
    from ..traces.slow import analyse_slow

    res = run_scenario(args.scenario, args.ranks, args.out, steps=args.steps,
                       fault_step=args.fault_step, fault_rank=args.fault_rank,
                       ranks_per_node=args.ranks_per_node, pg_timeout_s=args.pg_timeout_s)
    rows = tuple((x.rank, x.status, round(x.wall_s, 2),
                  (x.value or {}).get("error", "") if isinstance(x.value, dict) else
                  x.error.splitlines()[-1][:120] if x.error else "") for x in res.ranks)
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
    data = {"scenario": args.scenario, "ranks": args.ranks, "out": args.out,
            "wall_s": res.wall_s, "rank_status": [
                {"rank": x.rank, "status": x.status, "returncode": x.returncode,
                 "wall_s": x.wall_s} for x in res.ranks], "analysis": verdicts}
    t = verdicts.get("trace", {})
    heads = (Headline("scenario", args.scenario), Headline("wall time", res.wall_s, "s"),
             Headline("hang verdict (scalemodel trace)", t.get("hang", {}).get("verdict", "-")),
             Headline("slow verdict (scalemodel trace)", t.get("slow", {}).get("verdict", "-")),
             Headline("hang verdict (Flight Recorder)",
                      verdicts.get("fr", {}).get("hang", {}).get("verdict", "-")))
    sec = Section(f"Real gloo run: {args.ranks} ranks, scenario {args.scenario}",
                  text=f"Traces in {args.out}/trace, Flight Recorder dumps in {args.out}/fr "
                  f"(pickle) and {args.out}/fr_json; triage them with `scalemodel triage hang "
                  f"{args.out}` or `scalemodel triage slow {args.out}`.", headlines=heads,
                  tables=(Table("ranks", ("rank", "status", "wall s", "last error"), rows),))
    return Report(f"scalemodel triage run: {args.scenario}", (sec,), data)


def _input_section(inp: dict) -> Any:
    from ..derive import Section, Table

    rows = tuple((s["path"], s["reason"]) for s in inp.get("skipped", ()))
    text = (f"format {inp.get('format')}, ranks read {inp.get('ranks_read')}, world size "
            f"{inp.get('world_size')}" + (f"; notes: {'; '.join(inp['notes'][:8])}"
                                           if inp.get("notes") else ""))
    return Section("What was read", text=text,
                   tables=(Table("skipped files", ("file", "reason"), rows),) if rows else ())


def run_hang(args: argparse.Namespace) -> Any:
    from ..derive import Headline, Report, Section, Table
    from ..errors import BadInput
    from ..traces.hang import analyse_hang
    from ..traces.load import load_dir

    ts = load_dir(args.dir, args.format, args.world_size)
    if ts.fmt == "kineto":
        raise BadInput("DIR: torch.profiler (Kineto) traces time finished work and cannot show a "
                       "hang; use Flight Recorder dumps or scalemodel traces (--format fr/trace)")
    r = analyse_hang(ts, args.world_size)
    heads = (Headline("verdict", r.verdict), Headline("rank(s) at fault", ", ".join(map(str, r.ranks)) or "-"),
             Headline("process group", r.group_label or r.group or "-"),
             Headline("sequence number", r.seq if r.seq is not None else "-"),
             Headline("collective (majority)", r.op or "-"))
    rows = tuple((p["rank"], p["records"], p["last_op"], p["last_group"], p["last_seq"],
                  p["last_completed"], p["finished"]) for p in r.per_rank)
    secs = (Section("Hang triage", text="\n".join(f"- {e}" for e in r.evidence), headlines=heads),
            Section("", tables=(Table("per rank", ("rank", "collectives", "last op", "group",
                                                   "seq", "completed", "clean end"), rows),)),
            _input_section(r.input))
    return Report(f"scalemodel triage hang: {args.dir}", secs, r.to_dict())


def run_slow(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from ..derive import Headline, Report, Section, Table
    from ..traces.load import load_dir
    from ..traces.slow import analyse_slow, analyse_step_table

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
    heads = (Headline("verdict", r.verdict), Headline("rank(s)", ", ".join(map(str, r.ranks)) or "-"))
    keys = [k for k in (r.per_rank[0] if r.per_rank else {}) if k not in ("node",)]
    rows = tuple(tuple(p.get(k) for k in keys) for p in r.per_rank)
    secs = [Section("Slowdown triage", text="\n".join(f"- {e}" for e in r.evidence),
                    headlines=heads),
            Section("", tables=(Table("per rank (seconds; z = robust z of compute or lateness)",
                                      tuple(keys), rows),
                                Table("per node (max robust z)", ("node", "z"),
                                      tuple(r.scores.get("per_node", {}).items())),))]
    if r.input.get("format") != "step-time-csv":
        secs.append(_input_section(r.input))
    return Report(f"scalemodel triage slow: {args.dir}", tuple(secs), r.to_dict())
