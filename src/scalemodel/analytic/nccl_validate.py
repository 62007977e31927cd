"""The collective model against published nccl-tests rows (validation/nccl_tests.csv).

Each row is one published measurement (issue thread URL beside it) with the fabric it ran on,
the algorithm NCCL was told to use (``auto``: NCCL's own choice) and the figure read off the
table: the bus bandwidth of a large-message plateau or the time of a small message. The
prediction goes through the same engine every planner term uses (``collective_cost``): NCCL's
tuning model picks the algorithm and protocol, the physical model prices it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput

ROWS_CSV = Path(__file__).resolve().parents[3] / "validation" / "nccl_tests.csv"


@dataclass(frozen=True)
class RowResult:
    id: str
    hardware: str
    collective: str
    asked: str  # the algorithm NCCL was told to use, or "auto"
    algorithm: str  # what the model runs
    protocol: str
    metric: str  # busbw_GBps, latency_us or time_us
    measured: float
    predicted: float
    error: float  # predicted / measured - 1
    tolerance: float
    status: str  # "fit": expected within tolerance; "miss": a reported row that does not fit
    source_url: str
    note: str

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.tolerance

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["within_tolerance"] = self.within
        return d


def load_rows(path: str | Path | None = None) -> list[dict[str, str]]:
    p = Path(path) if path else ROWS_CSV
    try:
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise BadInput(f"--file: cannot read {p}: {e.strerror or e}") from None
    need = {"id", "collective", "algorithm", "intra", "nodes", "ranks_per_node", "bytes",
            "metric", "measured"}
    if not rows or not need <= set(rows[0]):
        raise BadInput(f"--file: {p} is not an nccl-tests rows CSV (columns "
                       f"{', '.join(sorted(need))} are required)")
    return rows


def _num(row: dict[str, str], key: str, default: float | None = None) -> float | None:
    v = (row.get(key) or "").strip()
    if not v:
        return default
    try:
        return float(v)
    except ValueError:
        raise BadInput(f"row {row.get('id', '?')}: {key} {v!r} is not a number") from None


def predict_row(row: dict[str, str]) -> RowResult:
    """Price one published row with the engine's automatic (or the forced) choice."""
    from .collectives import collective_cost, make_fabric, make_group

    nodes = int(_num(row, "nodes", 1) or 1)
    rpn = int(_num(row, "ranks_per_node", 8) or 8)
    inter = (row.get("inter") or "").strip() or None
    fab = make_fabric(row["intra"], inter if nodes > 1 else None,
                      gpus_per_node=rpn if nodes > 1 else max(rpn, 8),
                      nics_per_gpu=_num(row, "nics_per_gpu", 1.0) or 1.0,
                      intra_bytes_per_s=_num(row, "intra_bytes_per_s"),
                      pcie_host=(row.get("pcie_host") or "").strip() or None)
    grp = make_group(nodes * rpn, fab, rpn)
    r = collective_cost(row["collective"], float(_num(row, "bytes") or 0), grp, fab,
                        algorithm=row.get("algorithm") or "auto")
    metric = row["metric"]
    if metric == "busbw_GBps":
        pred = r.busbw_bytes_per_s / 1e9
    elif metric in ("latency_us", "time_us"):  # time_us: the time column of a size sweep
        pred = r.time_s * 1e6
    else:
        raise BadInput(f"row {row['id']}: metric {metric!r} is neither busbw_GBps nor latency_us "
                       "(nor time_us)")
    meas = float(_num(row, "measured") or 0)
    return RowResult(row["id"], row.get("hardware", ""), row["collective"],
                     row.get("algorithm") or "auto", r.algorithm, r.protocol, metric, meas, pred,
                     pred / meas - 1, float(_num(row, "tolerance", 0.15) or 0.15),
                     (row.get("status") or "fit").strip(), row.get("source_url", ""),
                     row.get("note", ""))


def validate_rows(path: str | Path | None = None) -> list[RowResult]:
    return [predict_row(r) for r in load_rows(path)]
