"""View of the training planner: ``plan train``'s report, shared with the worked answers.

:func:`train_report` is the whole report of ``plan train`` (the search result, the framework
profile it priced with and the best layout's traffic rows); :func:`plan_report` the planner's
part of it. :func:`planned_layout_section` is the hook for answers that end with a planned
layout (training-memory, fabric-map): it runs the planner and returns one Section plus JSON data.
"""

from __future__ import annotations

from typing import Any

from ..analytic.planner import (
    LAYOUT_KEYS,
    PlanResult,
    PlanRow,
    breakdown,
    derive_row,
    make_cluster,
    make_job,
    schedule_1f1b,
    search,
)
from ..derive import Headline, Report, Section, Table
from ..specs import get_model


def _lay(r: PlanRow) -> str:
    lay = r.layout
    s = f"TP{lay['tp']} PP{lay['pp']}"
    if lay["vpp"] > 1:
        s += f"x{lay['vpp']}"
    s += f" DP{lay['dp']}"
    if lay["cp"] > 1:
        s += f" CP{lay['cp']}"
    if lay["ep"] > 1:
        s += f" EP{lay['ep']}"
        if lay.get("etp", lay["tp"]) != lay["tp"]:
            s += f" ETP{lay['etp']}"
    rc = lay["recompute"]
    if lay.get("recompute_modules"):
        rc += f"({lay['recompute_modules']})"
    elif lay.get("recompute_layers"):
        rc += f"({lay['recompute_layers']}/chunk)"
    return s + f" Z{lay['zero']} mb{lay['micro_batch']} rc={rc}"


def row_json(r: PlanRow) -> dict[str, Any]:
    d = r.to_dict()
    lay = d.pop("layout")
    return {"layout": lay, **d}


def tier_table(res: PlanResult, r: PlanRow) -> Table:
    """Bytes each strategy moves per GPU per step, and on which fabric tier."""
    v = r.values
    rows = []
    for k, label in (("tp", "TP/SP collectives"), ("cp", "CP ring attention"),
                     ("ep", "EP all-to-all"), ("pp", "PP send/recv"),
                     ("dp", "DP gradients / ZeRO")):
        b = getattr(v, f"{k}_bytes")
        if b <= 0:
            continue
        tier = "NVLink" if getattr(v, f"{k}_intra") else f"scale-out ({res.cluster.inter.id})"
        exposed = getattr(v, f"{k}_s")
        rows.append((label, b / 1e9, tier, 1e3 * exposed))  # --json keeps seconds
    return Table("Traffic per GPU per step, by fabric tier",
                 ("strategy", "GB per GPU", "tier", "exposed (ms)"), tuple(rows))


def why_text(res: PlanResult) -> str:
    b, v = res.best, res.best.values
    lay = b.layout
    cl = res.cluster
    parts = [f"{_lay(b)} wins at {v.tokens_per_s:,.0f} tokens/s "
             f"({100 * v.mfu:.1f}% MFU, {v.memory_per_gpu_bytes / 1e9:.1f} GB per GPU)"]
    inside = lay["tp"] * lay["cp"] <= cl.nvlink_domain
    parts.append(
        f"TP{lay['tp']}" + (f" x CP{lay['cp']}" if lay["cp"] > 1 else "")
        + (" stays inside the NVLink domain, so the per-layer collectives run at NVLink speed"
           if inside else " spills over the NVLink domain, so per-layer traffic crosses the NICs"))
    if lay["pp"] > 1:
        parts.append(f"PP{lay['pp']} sends only one activation per micro-batch across the "
                     f"scale-out network; its bubble costs {v.bubble_s:.3g} s of "
                     f"{v.step_time_s:.3g} s")
    parts.append(f"DP{lay['dp']} with ZeRO-{lay['zero']} moves gradients once per step and "
                 f"hides all but {v.dp_s:.3g} s behind backward compute")
    if len(res.rows) > 1:
        r2 = res.rows[1]
        parts.append(f"the runner-up ({_lay(r2)}) is "
                     f"{100 * (1 - r2.values.tokens_per_s / v.tokens_per_s):.1f}% slower")
    return "; ".join(parts) + "."


def plan_sections(res: PlanResult) -> list[Section]:
    b = res.best
    v = b.values
    bd = breakdown(v)
    heads = (
        Headline("best layout", _lay(b)),
        Headline("step time", v.step_time_s, "s"),
        Headline("tokens/s", v.tokens_per_s, "token/s"),
        Headline("tokens/s per GPU", v.tokens_per_s_per_gpu, "token/s"),
        Headline("model TFLOP/s per GPU", v.tflops_per_gpu / 1e12, "TFLOP/s"),
        Headline("MFU (model FLOPs, no recompute)", v.mfu, "1"),
        Headline("HFU (with recompute)", v.hfu, "1"),
        Headline("memory per GPU", v.memory_per_gpu_bytes, "B"),
        Headline("layouts evaluated", res.candidates_evaluated, "1"),
    )
    brk = Table("Time per step (estimate between the bounds)", ("term", "seconds", "share"),
                tuple((k, x, x / v.step_time_s) for k, x in bd.items())
                + (("lower bound (all comm hidden)", v.lower_s, v.lower_s / v.step_time_s),
                   ("upper bound (no overlap)", v.upper_s, v.upper_s / v.step_time_s)))
    mem = Table("Memory per GPU (heaviest stage)", ("part", "GB"),
                (("weights", v.mem_params / 1e9), ("gradients", v.mem_grads / 1e9),
                 ("optimizer", v.mem_optimizer / 1e9),
                 ("activations", v.mem_activations / 1e9),
                 ("usable", v.capacity_bytes / 1e9)))
    top = Table("Next layouts", ("layout", "step s", "tokens/s", "MFU", "GB per GPU"),
                tuple((_lay(r), r.values.step_time_s, r.values.tokens_per_s,
                       r.values.mfu, r.values.memory_per_gpu_bytes / 1e9)
                      for r in res.rows[1:]))
    par = Table("Pareto front: throughput vs memory headroom",
                ("layout", "tokens/s", "headroom GB"),
                tuple((_lay(r), r.values.tokens_per_s,
                       (r.values.capacity_bytes - r.values.memory_per_gpu_bytes) / 1e9)
                      for r in res.pareto))
    stages = ", ".join(str(x) for x in res.stage_layers)
    text = (f"{res.valid:,} valid layouts of {res.candidates_evaluated:,} enumerated, "
            f"{res.fitting:,} fit in memory. Stage split (layers per stage): {stages}. "
            + why_text(res))
    return [
        Section(f"Plan: {res.job.model.id} on {res.cluster.n_gpus:,} x {res.cluster.gpu.id}",
                text=text, headlines=heads, tables=(brk, mem, tier_table(res, b), top, par)),
        Section("Derivation of the best layout", derivation=derive_row(res, b)),
    ]


def plan_data(res: PlanResult) -> dict[str, Any]:
    b = row_json(res.best)
    return {
        "model": res.job.model.id, "gpu": res.cluster.gpu.id, "gpus": res.cluster.n_gpus,
        "seq_len": res.job.seq_len, "global_batch_seqs": res.job.global_batch_seqs,
        "global_batch_tokens": res.job.tokens_per_step, "precision": res.job.precision,
        "best": b["layout"],
        **{k: b[k] for k in ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
                             "tflops_per_gpu", "mfu", "hfu", "memory_per_gpu_bytes",
                             "breakdown_s", "lower_bound_s", "upper_bound_s")},
        "stage_layers": list(res.stage_layers),
        "candidates_evaluated": res.candidates_evaluated,
        "valid_layouts": res.valid,
        "fitting_layouts": res.fitting,
        "rejected_by_rule": res.rejected,
        "top": [{**r["layout"], **{k: v for k, v in r.items() if k != "layout"}}
                for r in map(row_json, res.rows[1:])],
        "pareto": [{**r["layout"], "tokens_per_s": r["tokens_per_s"],
                    "memory_per_gpu_bytes": r["memory_per_gpu_bytes"]}
                   for r in map(row_json, res.pareto)],
    }


def plotter(res: PlanResult) -> Any:
    def draw(path: str) -> None:
        from ..report import plot

        rows = res.rows[:6]
        labels = [_lay(r) for r in rows]
        series: dict[str, list[float]] = {}
        for r in rows:
            for k, x in breakdown(r.values).items():
                series.setdefault(k, []).append(x)

        def bars(p: str) -> None:
            plot.bars(p, title=f"{res.job.model.id} on {res.cluster.n_gpus} x "
                      f"{res.cluster.gpu.id}: step time of the top layouts",
                      labels=labels, series=series, ylabel="seconds per step")

        def gantt(p: str) -> None:
            b = res.best
            pp = b.layout["pp"]
            m = min(int(b.values.microbatches), 4 * pp)
            ops = schedule_1f1b(pp, m, b.values.fwd_mb_s, b.values.bwd_mb_s)
            plot.gantt(p, title=f"1F1B schedule of {_lay(b)} (first {m} micro-batches"
                       + (f"; drawn without the {b.layout['vpp']}-way interleave"
                          if b.layout["vpp"] > 1 else "") + ")", ops=ops, stages=pp)

        plot.two_panels(path, bars, gantt)

    return draw


def plan_report(res: PlanResult, export: str | None = None,
                export_out: str | None = None) -> Report:
    sections = plan_sections(res)
    data = plan_data(res)
    if export:
        from ..report.export import export as do_export

        text = do_export(export, res)
        data["export"] = {"format": export, "text": text, "path": export_out}
        if export_out:
            from ..report.export import write_export

            write_export(export_out, text, executable=export == "slurm")
            sections.insert(1, Section(f"Export ({export})", text=(
                f"Written to {export_out} ({len(text.splitlines())} lines, as the framework "
                "reads it).")))
        else:
            sections.insert(1, Section(f"Export ({export})", text=(
                "The file below is printed as it is (never wrapped); --export-out PATH writes "
                "it to a file, and --json carries it as export.text."), verbatim=text))
    return Report(f"scalemodel plan train: {res.job.model.id}", tuple(sections), data,
                  plot=plotter(res))


def planned_layout_section(model: str, gpu: str, gpus: int, *, seq_len: int = 8192,
                           global_batch_tokens: int = 4 * 1024 * 1024,
                           heading: str = "A planned layout", **kw: Any
                           ) -> tuple[Section, dict[str, Any]]:
    """Run the planner for an answer and return (Section, data) explaining the winner: the job
    plan train prices for these inputs, with the default framework profile's settings
    (specs/frameworks.job_settings, as commands/plan.plan_job fills them)."""
    from ..specs.frameworks import job_settings

    m = get_model(model)
    precision, optimizer_id = kw.pop("precision", "bf16"), kw.pop("optimizer", None)
    cl = make_cluster(gpu, gpus, **kw)
    _, settings = job_settings(None, cl.gpu, model=m.id)
    job = make_job(m, seq_len=seq_len, global_batch_tokens=global_batch_tokens,
                   precision=precision, optimizer_id=optimizer_id, **settings)
    res = search(job, cl, {}, top=3)
    b = res.best
    sec = Section(heading, text=why_text(res),
                  headlines=(Headline("layout", ", ".join(f"{k}={b.layout[k]}"
                                                          for k in LAYOUT_KEYS)),
                             Headline("step time", b.values.step_time_s, "s"),
                             Headline("MFU", b.values.mfu, "1"),
                             Headline("memory per GPU", b.values.memory_per_gpu_bytes, "B")),
                  tables=(tier_table(res, b),))
    return sec, plan_data(res)


def train_report(res: PlanResult, fw: Any, traffic: Any, export: str | None = None,
                 export_out: str | None = None) -> Report:
    """``plan train``'s report: the planner's sections between the framework profile that
    filled the job's settings and the traffic rows of the best layout (the step model's,
    analytic/traffic.py step_traffic)."""
    from dataclasses import replace

    from ..analytic.traffic import traffic_json
    from .comm import step_traffic_table

    job = res.job
    rep = plan_report(res, export=export, export_out=export_out)
    rep.data["framework"] = fw.id
    rep.data["traffic"] = traffic_json(traffic)
    fp8 = ""
    if res.fp8_scaling:
        rep.data["fp8_scaling"] = res.fp8_scaling
        fp8 = f", fp8 scaling {res.fp8_scaling}"
    head = Section(f"Framework: {fw.id} ({fw.name} {fw.version})",
                   text=(f"attention {job.attention}, {job.kernels} elementwise kernels, "
                         f"gradient-accumulation fusion {'on' if job.grad_accum_fusion else 'off'}"
                         f", schedule {job.schedule}, EP overlap "
                         f"{'on' if job.ep_overlap else 'off'}{fp8} (flags override the profile; "
                         "scalemodel specs frameworks lists them)."))
    tail = Section("Traffic of the best layout", tables=(step_traffic_table(traffic),))
    warnings = tuple(rep.warnings)
    if job.seq_len > job.model.max_context:  # as memory warns (memory.memory_report)
        warnings += (f"--seq-len {job.seq_len:,} exceeds {job.model.id}'s "
                     f"max_position_embeddings {job.model.max_context:,}; computed anyway",)
    return replace(rep, sections=(head, *rep.sections, tail), warnings=warnings)


def batch_report(out: list[dict[str, Any]], path: str) -> Report:
    """``plan train --layouts FILE``: one row per layout of the file (--json: the rows)."""
    table = Table(f"{len(out):,} layouts from {path}",
                  ("row", "model", "GPUs", "layout", "step s", "MFU", "GB per GPU", "fits"),
                  tuple((d["row"], d["model"], d["gpus"],
                         ",".join(f"{k}={v}" for k, v in d["layout"].items()),
                         d["step_time_s"], d["mfu"], d["memory_per_gpu_bytes"] / 1e9,
                         "yes" if d["fits"] else "no") for d in out))
    return Report(f"scalemodel plan train --layouts: {len(out):,} layouts",
                  (Section("", tables=(table,)),), out)
