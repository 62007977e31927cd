"""scalemodel validate --serving: the serving planner against published serving measurements
(validation/serving_runs.csv, TensorRT-LLM's v0.17 table; validation/serving_published.csv, other
published runs, out of sample) and the KV capacities engines logged (validation/serving_kv.csv)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[3]
_RUNS = _ROOT / "validation" / "serving_runs.csv"
_KV = _ROOT / "validation" / "serving_kv.csv"
_PUBLISHED = _ROOT / "validation" / "serving_published.csv"


def _read(path: Path) -> str:
    from ..errors import BadInput
    from ..specs.bounds import read_bytes

    if not path.is_file():
        raise BadInput(f"--file: no such file {str(path)!r}")
    try:
        return read_bytes(path, "--file").decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--file: {path} is not a text CSV") from None


def run_serving(args: argparse.Namespace) -> Any:
    from ..analytic.serving.validate import summary, validate_published, validate_serving
    from ..views.serving import validation_report

    path = Path(args.file) if args.file else _RUNS
    rows, skipped = validate_serving(_read(path), path.resolve().parent.parent)
    kv = None
    if not args.file and _KV.is_file():
        from ..analytic.serving_kv_validation import validate_kv_rows

        kv = validate_kv_rows(_read(_KV), _KV.resolve().parent)
    published = None
    if not args.file and _PUBLISHED.is_file():
        p_rows, p_skipped = validate_published(_read(_PUBLISHED), _ROOT)
        published = (p_rows, p_skipped, summary(p_rows))
    return validation_report(rows, skipped, summary(rows), kv,
                             plot=bool(getattr(args, "plot", None)), published=published)
