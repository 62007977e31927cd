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
    p.add_argument("--serving", action="store_true",
                   help="validate the serving planner instead (validation/serving_runs.csv, "
                        "and the engines' logged KV capacities)")
    add_output(p, plot=True)
    p.set_defaults(run=run)


def _pct(x: float, sign: bool = True) -> str:
    """A fraction as a percentage for people: -0.1509 -> '-15.1%'."""
    return f"{100 * x:+.1f}%" if sign else f"{100 * x:.1f}%"


def _metric(v: float, metric: str) -> Any:
    """MFU (a fraction) as a percentage; the other metrics keep their own units."""
    return _pct(v, sign=False) if metric == "mfu" else v


def run(args: argparse.Namespace) -> Any:
    from ..analytic.validate import summary, validate
    from ..derive import Headline, Report, Section, Table
    from ..errors import BadInput

    if getattr(args, "serving", False):
        from .validate_serving import run_serving

        return run_serving(args)
    path = Path(args.file) if args.file else _DEFAULT
    if not path.is_file():
        raise BadInput(f"--file: no such file {str(path)!r}")
    import csv

    from ..specs.bounds import read_bytes

    try:
        text = read_bytes(path, "--file").decode("utf-8")
        results, skipped = validate(text)
    except UnicodeDecodeError:
        raise BadInput(f"--file: {path} is not a text CSV") from None
    except csv.Error as e:
        raise BadInput(f"--file: {path} is not a usable CSV ({e})") from None
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
