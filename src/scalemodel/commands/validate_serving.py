"""scalemodel validate --serving: the serving planner against published serving measurements
(validation/serving_runs.csv) and the KV capacities engines logged (validation/serving_kv.csv)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[3]
_RUNS = _ROOT / "validation" / "serving_runs.csv"
_KV = _ROOT / "validation" / "serving_kv.csv"


def _pct(x: float, sign: bool = True) -> str:
    return f"{100 * x:+.1f}%" if sign else f"{100 * x:.1f}%"


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
    from ..analytic.serving.validate import summary, validate_serving
    from ..derive import Headline, Report, Section, Table

    path = Path(args.file) if args.file else _RUNS
    rows, skipped = validate_serving(_read(path), path.resolve().parent.parent)
    s = summary(rows)
    table = tuple((r.id, r.model, f"{r.tp} x {r.gpu}", r.precision, f"{r.isl}/{r.osl}",
                   r.max_batch, round(r.measured), round(r.predicted), _pct(r.error))
                  for r in rows)
    sec = Section(
        f"Serving throughput, predicted vs measured ({len(rows)} rows)",
        headlines=(Headline("mean absolute error", 100 * s["mape"], "%"),
                   Headline("max absolute error", 100 * s["max_ape"], "%")),
        tables=(Table("by source", ("source", "rows", "mean |error|", "lowest", "highest"),
                      tuple((g["source"], g["rows"], _pct(g["mean_abs_error"], sign=False),
                             _pct(g["min_error"]), _pct(g["max_error"]))
                            for g in s["by_source"])),
                Table("rows", ("id", "model", "GPUs", "precision", "ISL/OSL", "max batch",
                               "measured", "predicted", "error"), table)),
        text="Each row is simulated with its engine profile (trtllm-bench's batch tuning, the "
             "engine's KV pool, its scheduler), layout, precision, lengths and request count; "
             "output tokens per second of the whole run are compared. Nothing is fitted to "
             "the rows.")
    data: dict[str, Any] = {"rows": [r.to_dict() for r in rows],
                            "skipped": [{"id": i, "reason": w} for i, w in skipped], **s}
    sections = [sec]
    if not args.file and _KV.is_file():
        from ..analytic.serving_kv_validation import validate_kv_rows

        kv_rows, kv_s = validate_kv_rows(_read(_KV), _KV.resolve().parent)
        data["kv"] = {"rows": [r.to_dict() for r in kv_rows], **kv_s}
        sections.append(Section(
            f"KV capacity the engine logged, predicted vs measured ({len(kv_rows)} rows)",
            headlines=(Headline("mean absolute error", 100 * kv_s["mape"], "%"),
                       Headline("rows within 3%", kv_s["within_3pct"]),
                       Headline("start / refuse right", f"{kv_s['start_matches']} of "
                                f"{kv_s['start_rows']}")),
            tables=(Table("rows", ("id", "engine", "model", "GPUs", "measured tokens",
                                   "predicted tokens", "error", "started", "predicted"),
                          tuple((r.id, f"{r.engine} {r.engine_version}", r.model,
                                 f"{r.tp} x {r.gpu}", r.measured_tokens or "-",
                                 r.predicted_tokens,
                                 _pct(r.error) if r.error is not None else "-",
                                 "yes" if r.measured_started else "no",
                                 "yes" if r.predicted_started else "no")
                                for r in kv_rows)),)))
    warnings = tuple(f"row {i} skipped: {w}" for i, w in skipped)
    draw = None
    if getattr(args, "plot", None) and rows:
        from ..report import plot as _plot

        def draw(out: str) -> None:
            _plot.errors_by_row(
                out, title=f"validate --serving: {len(rows)} rows, mean |error| "
                           f"{100 * s['mape']:.1f}%, max {100 * s['max_ape']:.1f}%",
                labels=[r.id for r in rows], errors=[r.error for r in rows],
                groups=[f"{r.model} tp{r.tp}" for r in rows])
    return Report("scalemodel validate --serving: serving planner", tuple(sections), data,
                  warnings=warnings, plot=draw)
