"""Engine KV capacities against what the engines logged (validation/serving_kv.csv).

Each row is one engine start that a user logged in a public issue: the engine and its version,
the GPU (and the device total the engine printed, where it did), the checkpoint, TP, the
max_model_len and memory fraction given, and what the engine then printed: KV blocks or tokens,
and whether it started at all. :func:`validate_kv_rows` predicts each row with
:func:`~scalemodel.analytic.serving_memory.engine_kv_budget` and compares: KV tokens (relative
error) where the engine allocated a pool, and start / refuse for every row.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..specs import GPUSpec, get_gpu, get_model
from .serving_memory import engine_kv_budget

GIB = 2**30
NEED = ("id", "source_url", "engine", "engine_version", "gpu", "model", "tp", "max_model_len",
        "started")
DEFAULT_DIR = Path(__file__).resolve().parents[3] / "validation"


@dataclass(frozen=True)
class KVRowResult:
    """One logged engine start, predicted (tokens per replica; errors as fractions)."""

    id: str
    source_url: str
    engine: str
    engine_version: str
    model: str
    gpu: str
    tp: int
    max_model_len: int
    measured_tokens: int | None  # None: the log gives no pool size
    predicted_tokens: int
    error: float | None  # predicted / measured - 1 (None without a measured pool)
    measured_started: bool
    predicted_started: bool
    predicted_kv_gib: float
    measured_kv_gib: float | None
    lacks: str

    @property
    def start_matches(self) -> bool:
        return self.measured_started == self.predicted_started

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, start_matches=self.start_matches)


def _num(row: dict[str, str], key: str, kind: type = float) -> Any:
    v = (row.get(key) or "").strip()
    if not v:
        return None
    try:
        return kind(float(v)) if kind is int else kind(v)
    except ValueError:
        raise BadInput(f"row {row.get('id', '?')}: column {key!r} must be a number, got {v!r}") from None


def _gpu(row: dict[str, str]) -> tuple[GPUSpec, float | None]:
    """The row's GPU (a bundled id, or any name when the row gives the engine's logged total)."""
    total = _num(row, "total_gib")
    gid = row["gpu"].strip()
    try:
        g = get_gpu(gid)
    except BadInput:
        if total is None:
            raise
        g = GPUSpec(id=gid, name=gid, hbm_bytes=total * GIB, hbm_bytes_per_s=0.0, flop_per_s={})
    return g, (total * GIB if total is not None else None)


def predict_kv_row(row: dict[str, str], base_dir: Path | None = None) -> KVRowResult:
    base = base_dir or DEFAULT_DIR
    mpath = row["model"].strip()
    m = get_model(str(base / mpath) if mpath.endswith(".json") else mpath)
    g, total = _gpu(row)
    started = row["started"].strip().lower()
    if started not in ("yes", "no"):
        raise BadInput(f"row {row.get('id', '?')}: started must be yes or no, got {started!r}")
    r = engine_kv_budget(
        m, g, tp=_num(row, "tp", int) or 1, pp=_num(row, "pp", int) or 1,
        weight_dtype=(row.get("weight_dtype") or "bf16").strip() or "bf16",
        kv_dtype=(row.get("kv_dtype") or "").strip() or None, engine_id=row["engine"].strip(),
        util=_num(row, "util"), max_model_len=_num(row, "max_model_len", int),
        max_num_seqs=_num(row, "max_num_seqs", int),
        max_num_batched_tokens=_num(row, "max_num_batched_tokens", int), total_bytes=total)
    blocks = _num(row, "logged_blocks", int)
    tokens = _num(row, "logged_tokens", int)
    if tokens is None and blocks is not None:
        tokens = blocks * r.block_size
    err = r.max_tokens / tokens - 1 if tokens else None
    kv = _num(row, "logged_kv_gib")
    return KVRowResult(
        id=row["id"], source_url=row["source_url"], engine=r.engine,
        engine_version=row["engine_version"], model=m.id, gpu=g.id, tp=r.tp,
        max_model_len=r.max_model_len, measured_tokens=tokens, predicted_tokens=r.max_tokens,
        error=err, measured_started=started == "yes", predicted_started=r.fits,
        predicted_kv_gib=r.kv_budget_bytes / GIB, measured_kv_gib=kv, lacks=r.lacks)


def read_kv_rows(text: str) -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        raise BadInput("the serving KV validation file holds no rows")
    missing = [k for k in NEED if k not in rows[0]]
    if missing:
        raise BadInput(f"the serving KV validation file lacks columns: {', '.join(missing)}")
    return rows


def kv_summary(results: list[KVRowResult]) -> dict[str, Any]:
    errs = [abs(r.error) for r in results if r.error is not None]
    return {
        "row_count": len(results),
        "capacity_rows": len(errs),
        "mape": sum(errs) / len(errs) if errs else float("nan"),
        "max_ape": max(errs) if errs else float("nan"),
        "within_3pct": sum(e <= 0.03 for e in errs),
        "start_rows": len(results),
        "start_matches": sum(r.start_matches for r in results),
        "by_engine": {e: {"rows": len(v), "mape": (sum(abs(r.error) for r in v if r.error is not None)
                                                  / max(1, sum(r.error is not None for r in v)))}
                      for e, v in _group(results).items()},
    }


def _group(results: list[KVRowResult]) -> dict[str, list[KVRowResult]]:
    out: dict[str, list[KVRowResult]] = {}
    for r in results:
        out.setdefault(r.engine, []).append(r)
    return out


def validate_kv_rows(text: str, base_dir: Path | None = None
                     ) -> tuple[list[KVRowResult], dict[str, Any]]:
    """(results, summary) for the CSV text of a serving KV validation file; a row the engine
    model cannot price is bad input naming the row."""
    results = []
    for row in read_kv_rows(text):
        try:
            results.append(predict_kv_row(row, base_dir))
        except BadInput as e:
            raise BadInput(f"serving KV row {row.get('id', '?')}: {e}") from None
    s = kv_summary(results)
    return results, s


__all__ = ["KVRowResult", "kv_summary", "predict_kv_row", "read_kv_rows", "validate_kv_rows"]
