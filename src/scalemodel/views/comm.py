"""Views of the collectives engine's results."""

from __future__ import annotations

from typing import Any


def traffic_report(r: Any, title: str) -> Any:
    from ..derive import Headline, Report, Section, Table

    rows = tuple((s.name, s.collective, s.group_size, s.tier, s.bytes_per_call, s.calls_per_step,
                  s.bytes_per_step, "yes" if s.overlappable else "no", s.algorithm,
                  s.time_per_call_s, s.time_per_step_s, f"{100 * s.latency_share:.0f}%")
                 for s in r.strategies)
    d = r.to_dict()
    tab = Table("Per GPU, per optimizer step",
                ("strategy", "collective", "group", "tier", "bytes/call (B)", "calls/step",
                 "bytes/step (B)", "overlaps compute", "algorithm", "time/call (s)",
                 "time/step (s)", "latency share"), rows,
                note="time/call from comm cost's automatic choice on that tier")
    lay = r.layout
    sec = Section(
        f"{r.model}: TP{lay.tp} PP{lay.pp} DP{lay.dp} CP{lay.cp} EP{lay.ep} "
        f"({lay.world} GPUs), ZeRO-{lay.zero}{', SP' if lay.sequence_parallel else ''}",
        text=f"Fabric: {r.fabric}. " + " ".join(r.notes),
        headlines=(Headline("communication on the critical path (not overlappable)",
                            d["exposed_time_per_step_s"], "s"),),
        tables=(tab,))
    return Report(title, (sec,), d)
