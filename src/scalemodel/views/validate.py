"""``validate``: the training planner against published runs, out of sample (``--cv``) and the
layout agreement (``--agreement``). The serving rows (``--serving``) are views/serving.py's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _pct(x: float, sign: bool = True) -> str:
    """A fraction as a percentage for people: -0.1509 -> '-15.1%'."""
    return f"{100 * x:+.1f}%" if sign else f"{100 * x:.1f}%"


def _metric(v: float, metric: str) -> Any:
    """MFU (a fraction) as a percentage; the other metrics keep their own units."""
    return _pct(v, sign=False) if metric == "mfu" else v


def _skipped(skipped: Any) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """Skipped rows for --json and as warnings."""
    return ([{"id": i, "reason": why} for i, why in skipped],
            tuple(f"row {i} skipped: {why}" for i, why in skipped))


def _errors_plot(title: str, rows: Sequence[Any], s: dict[str, Any],
                 group: Callable[[Any], str]) -> Callable[[str], None]:
    """A validation's ``--plot``: each row's signed error, one colour per ``group(row)``; the
    title goes on with the mean and max absolute error of the summary ``s``."""
    from ..report import plot as _plot

    def draw(out: str) -> None:
        _plot.errors_by_row(
            out, title=f"{title}, mean |error| {100 * s['mape']:.1f}%, max "
                       f"{100 * s['max_ape']:.1f}%",
            labels=[r.id for r in rows], errors=[r.error for r in rows],
            groups=[group(r) for r in rows])
    return draw


def validation_report(results: list[Any], skipped: list[tuple[str, str]], s: dict[str, Any],
                      plot: bool = False) -> Any:
    """Plain ``validate``: each row's error, the error by source, mean and max (``s``: summary)."""
    from ..derive import Headline, Report, Section, Table

    # people's units in the tables (errors and MFU as percentages); --json keeps fractions
    rows = tuple((r.id, r.model, f"{r.gpus} x {r.gpu}", r.metric, r.convention,
                  _metric(r.measured, r.metric), _metric(r.predicted, r.metric), _pct(r.error))
                 for r in results)
    by_source: dict[str, list[float]] = {}
    for r in results:
        by_source.setdefault(r.source or "(no source)", []).append(r.error)
    groups = [{"source": k, "rows": len(v), "mean_abs_error": sum(map(abs, v)) / len(v),
               "min_error": min(v), "max_error": max(v)} for k, v in by_source.items()]
    skip_data, warnings = _skipped(skipped)
    data = {"rows": [r.to_dict() for r in results], "skipped": skip_data, "by_source": groups,
            **s}
    sec = Section(
        f"Predicted vs measured ({len(results)} runs)",
        headlines=(Headline("mean absolute error", 100 * s["mape"], "%"),
                   Headline("max absolute error", 100 * s["max_ape"], "%")),
        tables=(Table("by source", ("source", "rows", "mean |error|", "lowest", "highest"),
                      tuple((g["source"], g["rows"], _pct(g["mean_abs_error"], sign=False),
                             _pct(g["min_error"]), _pct(g["max_error"])) for g in groups)),
                Table("runs", ("id", "model", "GPUs", "metric", "convention", "measured",
                               "predicted", "error"), rows)),
        text="Each row keeps its published layout; keys the source does not state are "
             "searched. Tokens per second per GPU are compared where the source publishes "
             "them, otherwise the source's own figure in its own FLOP convention.")
    draw = _errors_plot(f"scalemodel validate: {len(results)} runs", results, s,
                        lambda r: r.source) if plot and results else None
    return Report("scalemodel validate: training planner", (sec,), data, warnings=warnings,
                  plot=draw)


def cv_report(cv: Any, results: list[Any], skipped: list[tuple[str, str]],
              s: dict[str, Any]) -> Any:
    """``validate --cv``: per source, the error with end-to-end-derived constants left out."""
    from ..derive import Headline, Report, Section, Table

    def pct(x: float | None) -> str:
        return "-" if x is None else _pct(x, sign=False)

    skip_data, warnings = _skipped(skipped)
    data = {"by_source": cv.by_source, "end_to_end_constants": cv.end_to_end_constants,
            "statement": cv.statement, "skipped": skip_data, **s}
    sec = Section(
        f"Out of sample, by source ({len(results)} runs)",
        headlines=(Headline("mean absolute error", 100 * s["mape"], "%"),
                   Headline("constants derived from end-to-end runs",
                            len(cv.end_to_end_constants), "")),
        tables=(Table("leave one source out", ("source", "rows", "mean |error|",
                                               "mean |error|, constants re-derived without it",
                                               "constants citing the source"),
                      tuple((g["source"], g["rows"], pct(g["mean_abs_error"]),
                             pct(g["cv_mean_abs_error"]),
                             len(g["constants_citing_source"])) for g in cv.by_source)),),
        text=cv.statement + ". The evidence behind every constant: docs/planner.md, "
             "'Evidence behind every constant'.")
    return Report("scalemodel validate --cv: out of sample", (sec,), data, warnings=warnings)


def _layout(d: dict[str, Any]) -> str:
    v = f" v{d['vpp']}" if (d.get("vpp") or 1) > 1 else ""  # virtual stages, when interleaved
    return " ".join(f"{k}{d[k]}" for k in ("tp", "pp", "dp", "cp", "ep") if d.get(k)) + \
        f" z{d.get('zero')}{v} mb{d.get('micro_batch')} {d.get('recompute')}"


def agreement_report(a: Any) -> Any:
    """``validate --agreement``: where each team's published layout ranks in a free search."""
    from ..derive import Headline, Report, Section, Table

    data = a.to_dict()
    rows = tuple((r.id, _layout(r.published_layout), _layout(r.search_best),
                  _pct(r.speedup_predicted), f"{r.rank_of_published} of {r.fitting_layouts}",
                  r.term, f"{r.term_saving_s:.3g} s", " ".join(r.keys_differ) or "-")
                 for r in a.rows)
    sec = Section(
        f"Layout agreement ({len(a.rows)} runs that state their layout)",
        headlines=(Headline("team's layout within 10% of the search's best",
                            100 * a.share_within_10pct, "%"),
                   Headline("median predicted speedup of the pick", 100 * a.median_speedup, "%"),
                   Headline("rows where the team's layout ranks first", a.picks_published, ""),
                   Headline("diagnostic: within 10% with the stated recompute held",
                            100 * a.share_within_10pct_recompute_held, "%"),
                   *(Headline(f"rows above 10%, class {c}", sum(t.values()), "")
                     for c, t in a.by_class.items())),
        tables=(Table("runs", ("id", "team's layout", "search's pick", "pick faster by",
                               "team's rank", "term that differs most", "saved per step",
                               "keys the pick changes"),
                      rows),),
        text="Only the question is fixed (model, GPUs, batch, sequence, precision, framework "
             "profile, and the options the profile offers); the team's layout keeps its stated "
             "keys with the rest searched. A pick predicted much faster than a layout expert "
             "teams run points at a mispriced term.")
    warnings = tuple(f"row {i} skipped: {why}" for i, why in a.skipped)
    return Report("scalemodel validate --agreement: layout agreement", (sec,), data,
                  warnings=warnings)
