"""View of the training-memory model: bytes per GPU under a layout, its breakdown, the
smallest layout that fits, and the per-layout tables the training-memory answer shows."""

from __future__ import annotations

from typing import Any


def fit_section(heading: str, text: str, headlines: tuple[Any, ...], fit: Any,
                derivation: Any = None) -> Any:
    """The smallest layout a --fit search found: its headlines and the candidates it ranked."""
    from ..derive import Section

    return Section(heading, text=text, headlines=headlines, tables=(fit.candidates,),
                   derivation=derivation)


def report(m: Any, gpu: Any, lay: Any, est: dict[str, Any], fit: Any, *, seq_len: int,
           optimizer_id: str, weight_dtype: str, grad_dtype: str | None) -> Any:
    """``scalemodel memory``: the per-GPU bytes ``est`` priced for ``lay`` (see the command's
    step_memory), with the --fit search in front when one ran."""
    from ..derive import Headline, Report, Section

    r = est["report"]
    b = est["breakdown"]
    heads = [
        Headline("per GPU", est["per_gpu_bytes"], "B"),
        Headline("  weights", b["params"], "B"),
        Headline("  gradients", b["grads"], "B"),
        Headline("  optimizer states", b["optimizer"], "B"),
        Headline("  activations", b["activations"], "B"),
    ]
    fits = None
    if r.capacity_bytes is not None:
        fits = bool(est["per_gpu_bytes"] <= r.capacity_bytes)
        heads.append(Headline(f"usable on {gpu.id}", r.capacity_bytes, "B"))
        heads.append(Headline("fits", fits))
    fw = est["framework"]
    sections = [Section(f"{m.id}: {lay.describe()} on {lay.gpus} GPU(s)",
                        text=f"Framework {fw.id} ({fw.name} {fw.version}); priced by "
                             f"{est['priced_by']}.", headlines=tuple(heads))]
    data = r.to_dict()
    data.update(per_gpu_bytes=est["per_gpu_bytes"], breakdown=b, fits=fits,
                priced_by=est["priced_by"], framework=fw.id, attention=est["attention"],
                kernels=est["kernels"], schedule=est["schedule"], global_batch=est["global_batch"])
    warnings = list(r.warnings)
    if fit is not None:
        data["min_gpus"] = fit.min_gpus
        data["min_layout"] = (fit.layout.as_dict() | {"gpus": fit.layout.gpus}) if fit.layout else None
        data["rows_evaluated"] = fit.rows_evaluated
        if fit.min_gpus is None:
            warnings.append(f"no layout of at most 65,536 {gpu.id} GPUs fits with these fixed flags")
            text = "Nothing fits; the report below is the layout as given."
        else:
            text = (f"{fit.min_gpus} x {gpu.id} is the smallest count that holds a training step "
                    f"({fit.rows_evaluated:,} layouts evaluated). Fewer GPUs leave some GPU over "
                    "its usable memory in every layout searched.")
        sections.insert(0, fit_section("Smallest layout that fits (--fit)", text,
                                       (Headline("min GPUs", fit.min_gpus, "1"),), fit))
    sections.append(Section("", derivation=r.derivation))
    return Report(f"scalemodel memory: {m.id}", tuple(sections), data, warnings=tuple(warnings),
                  plot=plotter(m, lay, seq_len=seq_len, microbatches=est["microbatches"],
                               optimizer_id=optimizer_id, weight_dtype=weight_dtype,
                               grad_dtype=grad_dtype))


def plotter(m: Any, lay: Any, *, seq_len: int, microbatches: int | None, optimizer_id: str,
            weight_dtype: str, grad_dtype: str | None) -> Any:
    """Stacked bars of the breakdown for each ZeRO stage and recompute mode at this layout."""

    def draw(path: str) -> None:
        from dataclasses import replace

        from ..analytic.memory import memory_report
        from ..report import plot

        labels, series = [], {"weights": [], "gradients": [], "optimizer": [], "activations": []}
        for z in (0, 1, 2, 3):
            for rc in ("none", "full"):
                r = memory_report(m, replace(lay, zero=z, recompute=rc), seq_len=seq_len,
                                  microbatches=microbatches, optimizer_id=optimizer_id,
                                  weight_dtype=weight_dtype, grad_dtype=grad_dtype)
                labels.append(f"ZeRO-{z} rc={rc}")
                for k, key in zip(series, ("params", "grads", "optimizer", "activations"), strict=True):
                    series[k].append(r.breakdown[key] / 1e9)
        plot.bars(path, title=f"{m.id} per-GPU memory, TP{lay.tp} PP{lay.pp} DP{lay.dp}",
                  labels=labels, series=series, ylabel="GB per GPU")

    return draw


def activations_table(rows: list[tuple[str, float, float]]) -> Any:
    """Activation bytes per layer and for all layers, one row per recompute mode."""
    from ..derive import Table
    from ..units import fmt_bytes

    return Table("activations without any parallelism",
                 ("recompute", "bytes per layer", "all layers + output layer"),
                 tuple((rc, fmt_bytes(pl), fmt_bytes(al)) for rc, pl, al in rows))


def breakdown_row(label: str, r: Any, capacity_bytes: float) -> tuple[Any, ...]:
    """One layout's memory report as a row of GB per GPU and whether it fits."""
    bd = r.breakdown
    return (label, bd["params"] / 1e9, bd["grads"] / 1e9, bd["optimizer"] / 1e9,
            bd["activations"] / 1e9, r.per_gpu_bytes / 1e9,
            "yes" if r.per_gpu_bytes <= capacity_bytes else "no")


def layouts_table(rows: list[tuple[Any, ...]], capacity_bytes: float,
                  capacity_hi: float | None = None) -> Any:
    """The breakdown rows of several layouts (``breakdown_row``) against the usable memory
    (a range where the layouts' communicators leave different amounts)."""
    from ..derive import Table

    usable = f"{capacity_bytes / 1e9:.1f} GB"
    if capacity_hi is not None and round(capacity_hi / 1e8) != round(capacity_bytes / 1e8):
        usable = f"{capacity_bytes / 1e9:.1f}-{capacity_hi / 1e9:.1f} GB by layout"
    return Table(f"GB per GPU (usable: {usable})",
                 ("layout", "weights", "grads", "optimizer", "activations", "total", "fits"),
                 tuple(rows))
