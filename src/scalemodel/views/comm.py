"""Views of the collectives engine's results."""

from __future__ import annotations

from typing import Any


def traffic_report(r: Any, title: str) -> Any:
    from ..derive import Headline, Report, Section, Table
    from ..units import fmt_bytes

    # printed in people's units (bytes scaled, ms); --json keeps bytes and seconds
    rows = tuple((s.name, s.collective, s.group_size, s.tier, fmt_bytes(s.bytes_per_call),
                  s.calls_per_step, fmt_bytes(s.bytes_per_step),
                  "yes" if s.overlappable else "no", s.algorithm,
                  1e3 * s.time_per_call_s, 1e3 * s.time_per_step_s,
                  f"{100 * s.latency_share:.0f}%")
                 for s in r.strategies)
    d = r.to_dict()
    tab = Table("Per GPU, per optimizer step",
                ("strategy", "collective", "group", "tier", "bytes/call", "calls/step",
                 "bytes/step", "overlaps compute", "algorithm", "time/call (ms)",
                 "time/step (ms)", "latency share"), rows,
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


def step_traffic_table(rows: Any) -> Any:
    """The step model's traffic rows (analytic/traffic.py StepTraffic) as one table."""
    from ..derive import Table

    return Table("Per GPU, per optimizer step (the step model's terms, as plan train prices them)",
                 ("strategy", "collective", "group", "tier", "bytes/step (B)", "calls/step",
                  "time/step (s)", "exposed (s)"),
                 tuple((r.name, r.collective, r.group_size, r.tier, r.bytes_per_step,
                        r.calls_per_step, r.time_per_step_s, r.exposed_s) for r in rows),
                 note="time/step: every call with nothing hidden; exposed: what is left on the "
                      "critical path after the overlap the framework does")


def step_traffic_report(model: str, lay: Any, fw: Any, job: Any, cl: Any, row: Any, rows: Any,
                        title: str) -> Any:
    from ..derive import Headline, Report, Section

    exposed = sum(r.exposed_s for r in rows)
    data = {"model": model, "layout": lay.as_dict() | {"gpus": lay.gpus},
            "framework": fw.id, "seq_len": job.seq_len, "global_batch": job.global_batch_seqs,
            "microbatches": int(row.values.microbatches), "gpu": cl.gpu.id,
            "strategies": [r.to_dict() for r in rows],
            "exposed_time_per_step_s": exposed,
            "step_time_s": float(row.values.step_time_s)}
    sec = Section(
        f"{model}: {lay.describe()} ({lay.gpus} GPUs on {cl.gpu.id})",
        text=(f"Framework {fw.id} ({fw.name} {fw.version}). Sequence {job.seq_len:,}, "
              f"{job.global_batch_seqs:,} sequences per step, "
              f"{int(row.values.microbatches)} micro-batches per pipeline."),
        headlines=(Headline("communication left exposed per step", exposed, "s"),
                   Headline("step time (plan train)", float(row.values.step_time_s), "s")),
        tables=(step_traffic_table(rows),))
    return Report(title, (sec,), data)
