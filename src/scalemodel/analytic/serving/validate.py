"""The serving planner against published serving measurements (validation/serving_runs.csv):
every row is simulated with its engine profile, layout, precision, lengths and stream, and the
predicted figure compared with the measured one. Nothing is fitted to the rows."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...errors import BadInput

REQUIRED = ("id", "source", "engine", "model", "gpu", "tp", "pp", "precision", "isl", "osl",
            "requests", "stream", "metric", "measured")
METRICS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")


@dataclass(frozen=True)
class ServingRow:
    id: str
    source: str
    engine: str
    model: str
    gpu: str
    tp: int
    pp: int
    precision: str
    isl: int
    osl: int
    metric: str
    measured: float
    predicted: float
    error: float  # predicted / measured - 1
    max_batch: int
    token_budget: int
    kv_capacity_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _model(ref: str, base: Path) -> Any:
    from ...specs import get_model

    if ref.endswith(".json") and not Path(ref).is_absolute():
        return get_model(str(base / ref))
    return get_model(ref)


def validate_serving(text: str, base: Path, only: set[str] | None = None
                     ) -> tuple[list[ServingRow], list[tuple[str, str]]]:
    """(results, skipped rows with the reason) of a serving validation CSV; ``base`` is the
    folder model paths are relative to."""
    from ...specs import get_gpu
    from .engine import get_serving_engine
    from .iteration import ServeLayout, precision
    from .service import evaluate
    from .streams import Stream

    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    rd = csv.DictReader(io.StringIO("\n".join(lines)))
    missing = [k for k in REQUIRED if k not in (rd.fieldnames or [])]
    if missing:
        raise BadInput(f"serving validation CSV: missing column(s) {', '.join(missing)}")
    out: list[ServingRow] = []
    skipped: list[tuple[str, str]] = []
    for row in rd:
        rid = row["id"]
        if only and rid not in only:
            continue
        try:
            if row["metric"] not in METRICS:
                raise BadInput(f"metric {row['metric']!r} is not one of {', '.join(METRICS)}")
            gpu = get_gpu(row["gpu"])
            m = _model(row["model"], base)
            eng = get_serving_engine(row["engine"])
            prec = precision(row["precision"])
            lay = ServeLayout(int(row["tp"]), int(row["pp"]))
            stream = Stream(row["stream"] if row["stream"] != "max-load" else "max-load",
                            int(row["requests"]))
            r = evaluate(m, gpu, lay, prec, eng.default_kv_dtype(prec), eng, stream,
                         int(row["isl"]), int(row["osl"]))
        except BadInput as e:
            skipped.append((rid, str(e)))
            continue
        except ValueError as e:
            skipped.append((rid, f"unreadable field ({e})"))
            continue
        meas = float(row["measured"])
        pred = float(getattr(r, row["metric"]))
        out.append(ServingRow(rid, row["source"], eng.id, m.id, gpu.id, lay.tp, lay.pp,
                              prec.name, int(row["isl"]), int(row["osl"]), row["metric"], meas,
                              pred, pred / meas - 1, r.max_batch, r.token_budget,
                              r.kv_capacity_tokens))
    return out, skipped


def summary(rows: list[ServingRow]) -> dict[str, Any]:
    errs = [abs(r.error) for r in rows]
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r.source, []).append(r.error)
    return {"row_count": len(rows), "mape": sum(errs) / len(errs) if errs else float("nan"),
            "max_ape": max(errs) if errs else float("nan"),
            "by_source": [{"source": k, "rows": len(v), "mean_abs_error":
                           sum(map(abs, v)) / len(v), "min_error": min(v), "max_error": max(v)}
                          for k, v in by.items()]}
