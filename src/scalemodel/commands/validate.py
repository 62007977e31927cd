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
                      "the out-of-sample validation/serving_published.csv, and the engines' "
                      "logged KV capacities)")
    mode.add_argument("--agreement", action="store_true",
                      help="free search on every row that states its layout: where the team's "
                      "layout ranks, how much faster the pick is predicted and the term why")
    p.add_argument("--rows", default=None, metavar="ID,ID",
                   help="with --agreement: only these row ids")
    add_output(p, plot=True)
    p.set_defaults(run=run)


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
    from ..analytic.validate import cross_validate, summary, validate
    from ..errors import BadInput
    from ..views.validate import cv_report, validation_report

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
        return cv_report(cross_validate(results), results, skipped, summary(results))
    return validation_report(results, skipped, summary(results),
                             plot=bool(getattr(args, "plot", None)))


def _run_agreement(args: argparse.Namespace) -> Any:
    from ..analytic.agreement import agreement
    from ..views.validate import agreement_report

    path, text = _read(args)
    ids = None
    if args.rows is not None:
        ids = [x.strip() for x in args.rows.split(",") if x.strip()]
        if not ids:
            from ..errors import BadInput

            raise BadInput(f"--rows: no row id in {args.rows!r}; give ids joined by ','")
    return agreement_report(_csv_guard(path, agreement, text, ids))
