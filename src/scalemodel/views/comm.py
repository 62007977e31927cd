"""Views of the step model's traffic rows (analytic/traffic.py): the one table that ``plan
train``, ``comm traffic``, the ``parallelism-traffic`` and ``fabric-map`` answers and the web
print, and the ``comm traffic`` report."""

from __future__ import annotations

from typing import Any


def _calls(x: float) -> Any:
    return int(x) if float(x).is_integer() else x


def step_traffic_table(rows: Any, title: str = "Per GPU, per optimizer step (the step model's "
                       "terms, as plan train prices them)") -> Any:
    """The traffic rows (analytic/traffic.py StepTraffic) as one table, in people's units (bytes
    scaled, ms); ``--json`` keeps bytes and seconds."""
    from ..derive import Table
    from ..units import fmt_bytes

    return Table(title,
                 ("strategy", "collective", "group", "tier", "bytes/call", "calls/step",
                  "bytes/step", "overlaps compute", "time/step (ms)", "exposed (ms)"),
                 tuple((r.name, r.collective, r.group_size, r.tier, fmt_bytes(r.bytes_per_call),
                        _calls(r.calls_per_step), fmt_bytes(r.bytes_per_step),
                        "yes" if r.overlappable else "no", 1e3 * r.time_per_step_s,
                        1e3 * r.exposed_s) for r in rows),
                 note="bytes: what one GPU sends; time/step: every call with nothing hidden; "
                      "exposed: what is left on the critical path after the overlap the "
                      "framework does")


def traffic_section(lt: Any, heading: str | None = None, title: str | None = None) -> Any:
    """One priced layout (analytic/traffic.py LayoutTraffic) as a report section."""
    from ..derive import Headline, Section

    lay, job, cl, v = lt.layout, lt.job, lt.cluster, lt.row.values
    fw = lt.framework
    return Section(
        heading or f"{lt.model}: {lay.describe()} ({lay.gpus} GPUs on {cl.gpu.id})",
        text=(f"Framework {fw.id} ({fw.name} {fw.version}). Sequence {job.seq_len:,}, "
              f"{job.global_batch_seqs:,} sequences per step, "
              f"{int(v.microbatches)} micro-batches per pipeline."),
        headlines=(Headline("communication left exposed per step", lt.exposed_s, "s"),
                   Headline("step time (plan train)", float(v.step_time_s), "s")),
        tables=(step_traffic_table(lt.rows, *((title,) if title else ())),))


def step_traffic_report(model: str, lay: Any, fw: Any, job: Any, cl: Any, row: Any, rows: Any,
                        title: str) -> Any:
    """``comm traffic``: the layout's rows and their totals."""
    from ..analytic.traffic import LayoutTraffic
    from ..derive import Report

    lt = LayoutTraffic(model, lay, fw, job, cl, row, tuple(rows))
    return Report(title, (traffic_section(lt),), lt.to_dict())
