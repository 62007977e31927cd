"""scalemodel validate: the planner against published, measured training runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import add_output

_DEFAULT = Path(__file__).resolve().parents[3] / "validation" / "training_runs.csv"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="planner predictions vs published training runs (validation/)",
        description="Predicts every row of validation/training_runs.csv with its published "
        "layout fixed (unstated keys searched) and compares with the measured figure (tokens/s "
        "per GPU where the source publishes it, else in the source's own FLOP convention); "
        "prints each error, the error by source and the mean / max absolute percentage error.")
    p.add_argument("--file", default=None, metavar="CSV",
                   help="validation CSV (default: the repository's validation/training_runs.csv)")
    # modes of the same rows (issue 16): out of sample, layout agreement
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--cv", action="store_true",
                      help="per source, the error with every constant derived from end-to-end "
                      "runs re-derived without that source's rows (or the statement that none is)")
    mode.add_argument("--serving", action="store_true",
                      help="validate the serving planner instead (validation/serving_runs.csv, "
                      "and the engines' logged KV capacities)")
    mode.add_argument("--agreement", action="store_true",
                      help="free search on every row that states its layout: where the team's "
                      "layout ranks, how much faster the pick is predicted and the term why")
    p.add_argument("--rows", default=None, metavar="ID,ID",
                   help="with --agreement: only these row ids")
    add_output(p, plot=True)
    p.set_defaults(run=run)


def _pct(x: float, sign: bool = True) -> str:
    """A fraction as a percentage for people: -0.1509 -> '-15.1%'."""
    return f"{100 * x:+.1f}%" if sign else f"{100 * x:.1f}%"


def _metric(v: float, metric: str) -> Any:
    """MFU (a fraction) as a percentage; the other metrics keep their own units."""
    return _pct(v, sign=False) if metric == "mfu" else v


def _read(args: argparse.Namespace) -> tuple[Path, str]:
    from ..errors import BadInput
    from ..specs.bounds import read_bytes

    path = Path(args.file) if args.file else _DEFAULT
    if not path.is_file():
        raise BadInput(f"--file: no such file {str(path)!r}")
    try:
        return path, read_bytes(path, "--file").decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--file: {path} is not a text CSV") from None


def _csv_guard(path: Path, fn: Any, *a: Any) -> Any:
    import csv

    from ..errors import BadInput

    try:
        return fn(*a)
    except csv.Error as e:
        raise BadInput(f"--file: {path} is not a usable CSV ({e})") from None


def run(args: argparse.Namespace) -> Any:
    from ..analytic.validate import summary, validate
    from ..derive import Headline, Report, Section, Table
    from ..errors import BadInput

    if getattr(args, "serving", False):
        from .validate_serving import run_serving

        return run_serving(args)
    if getattr(args, "rows", None) and not getattr(args, "agreement", False):
        raise BadInput("--rows: only with --agreement")
    if getattr(args, "plot", None) and (getattr(args, "cv", False)
                                        or getattr(args, "agreement", False)):
        raise BadInput("--plot: draws the errors of plain validate; not with --cv or --agreement")
    if getattr(args, "agreement", False):
        return _run_agreement(args)
    path, text = _read(args)
    results, skipped = _csv_guard(path, validate, text)
    if getattr(args, "cv", False):
        return _run_cv(results, skipped)
    s = summary(results)
    # people's units in the tables (errors and MFU as percentages); --json keeps fractions
    rows = tuple((r.id, r.model, f"{r.gpus} x {r.gpu}", r.metric, r.convention,
                  _metric(r.measured, r.metric), _metric(r.predicted, r.metric), _pct(r.error))
                 for r in results)
    by_source: dict[str, list[float]] = {}
    for r in results:
        by_source.setdefault(r.source or "(no source)", []).append(r.error)
    groups = [{"source": k, "rows": len(v), "mean_abs_error": sum(map(abs, v)) / len(v),
               "min_error": min(v), "max_error": max(v)} for k, v in by_source.items()]
    data = {"rows": [r.to_dict() for r in results], "skipped":
            [{"id": i, "reason": why} for i, why in skipped], "by_source": groups, **s}
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
    warnings = tuple(f"row {i} skipped: {why}" for i, why in skipped)
    draw = None
    if getattr(args, "plot", None) and results:
        from ..report import plot as _plot

        def draw(out: str) -> None:
            _plot.errors_by_row(
                out, title=f"scalemodel validate: {len(results)} runs, mean |error| "
                           f"{100 * s['mape']:.1f}%, max {100 * s['max_ape']:.1f}%",
                labels=[r.id for r in results], errors=[r.error for r in results],
                groups=[r.source for r in results])
    return Report("scalemodel validate: training planner", (sec,), data, warnings=warnings,
                  plot=draw)


def _run_cv(results: list[Any], skipped: list[tuple[str, str]]) -> Any:
    from ..analytic.validate import cross_validate, summary
    from ..derive import Headline, Report, Section, Table

    cv = cross_validate(results)
    s = summary(results)

    def pct(x: float | None) -> str:
        return "-" if x is None else _pct(x, sign=False)

    data = {"by_source": cv.by_source, "end_to_end_constants": cv.end_to_end_constants,
            "statement": cv.statement, "skipped": [{"id": i, "reason": why}
                                                   for i, why in skipped], **s}
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
    warnings = tuple(f"row {i} skipped: {why}" for i, why in skipped)
    return Report("scalemodel validate --cv: out of sample", (sec,), data, warnings=warnings)


def _run_agreement(args: argparse.Namespace) -> Any:
    from ..analytic.agreement import agreement
    from ..derive import Headline, Report, Section, Table

    path, text = _read(args)
    ids = [x.strip() for x in args.rows.split(",") if x.strip()] if args.rows else None
    a = _csv_guard(path, agreement, text, ids)

    def lay(d: dict[str, Any]) -> str:
        return " ".join(f"{k}{d[k]}" for k in ("tp", "pp", "dp", "cp", "ep") if d.get(k)) + \
            f" z{d.get('zero')} mb{d.get('micro_batch')} {d.get('recompute')}"

    data = a.to_dict()
    rows = tuple((r.id, lay(r.published_layout), lay(r.search_best),
                  _pct(r.speedup_predicted), f"{r.rank_of_published} of {r.fitting_layouts}",
                  r.term, f"{r.term_saving_s:.3g} s") for r in a.rows)
    sec = Section(
        f"Layout agreement ({len(a.rows)} runs that state their layout)",
        headlines=(Headline("team's layout within 10% of the search's best",
                            100 * a.share_within_10pct, "%"),
                   Headline("median predicted speedup of the pick", 100 * a.median_speedup, "%"),
                   Headline("rows where the team's layout ranks first", a.picks_published, "")),
        tables=(Table("runs", ("id", "team's layout", "search's pick", "pick faster by",
                               "team's rank", "term that differs most", "saved per step"),
                      rows),),
        text="Only the question is fixed (model, GPUs, batch, sequence, precision, framework "
             "profile, and the options the profile offers); the team's layout keeps its stated "
             "keys with the rest searched. A pick predicted much faster than a layout expert "
             "teams run points at a mispriced term.")
    warnings = tuple(f"row {i} skipped: {why}" for i, why in a.skipped)
    return Report("scalemodel validate --agreement: layout agreement", (sec,), data,
                  warnings=warnings)
