"""View of hang and slowdown triage: verdicts, ranks at fault, per-rank tables, what was read."""

from __future__ import annotations

from typing import Any


def run_report(scenario: str, ranks: int, out: str, res: Any, verdicts: dict[str, Any]) -> Any:
    """``triage run``: how each rank of the real gloo job ended, and what triage reads from it."""
    from ..derive import Headline, Report, Section, Table

    rows = tuple((x.rank, x.status, round(x.wall_s, 2),
                  (x.value or {}).get("error", "") if isinstance(x.value, dict) else
                  x.error.splitlines()[-1][:120] if x.error else "") for x in res.ranks)
    data = {"scenario": scenario, "ranks": ranks, "out": out,
            "wall_s": res.wall_s, "rank_status": [
                {"rank": x.rank, "status": x.status, "returncode": x.returncode,
                 "wall_s": x.wall_s} for x in res.ranks], "analysis": verdicts}
    t = verdicts.get("trace", {})
    heads = (Headline("scenario", scenario), Headline("wall time", res.wall_s, "s"),
             Headline("hang verdict (scalemodel trace)", t.get("hang", {}).get("verdict", "-")),
             Headline("slow verdict (scalemodel trace)", t.get("slow", {}).get("verdict", "-")),
             Headline("hang verdict (Flight Recorder)",
                      verdicts.get("fr", {}).get("hang", {}).get("verdict", "-")))
    sec = Section(f"Real gloo run: {ranks} ranks, scenario {scenario}",
                  text=f"Traces in {out}/trace, Flight Recorder dumps in {out}/fr "
                  f"(pickle) and {out}/fr_json; triage them with `scalemodel triage hang "
                  f"{out}` or `scalemodel triage slow {out}`.", headlines=heads,
                  tables=(Table("ranks", ("rank", "status", "wall s", "last error"), rows),))
    return Report(f"scalemodel triage run: {scenario}", (sec,), data)


def _input_section(inp: dict) -> Any:
    from ..derive import Section, Table

    rows = tuple((s["path"], s["reason"]) for s in inp.get("skipped", ()))
    text = (f"format {inp.get('format')}, ranks read {inp.get('ranks_read')}, world size "
            f"{inp.get('world_size')}" + (f"; notes: {'; '.join(inp['notes'][:8])}"
                                           if inp.get("notes") else ""))
    return Section("What was read", text=text,
                   tables=(Table("skipped files", ("file", "reason"), rows),) if rows else ())


def hang_report(r: Any, where: str) -> Any:
    """``triage hang``: the verdict, the rank and collective at fault, and the evidence."""
    from ..derive import Headline, Report, Section, Table

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
    return Report(f"scalemodel triage hang: {where}", secs, r.to_dict())


def slow_report(r: Any, where: str) -> Any:
    """``triage slow``: straggler, fabric or lost overlap, with the scores behind it."""
    from ..derive import Headline, Report, Section, Table

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
    return Report(f"scalemodel triage slow: {where}", tuple(secs), r.to_dict())
