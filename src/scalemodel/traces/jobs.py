"""Jobs of the cluster simulator: the input record and the documented CSV format.

The job table is what every trace reader here (our CSV, the Alibaba pod list) produces and what
the simulator (sim/cluster) replays, so it lives in the lower of the two rooms: traces never
imports sim.

A :class:`JobSpec` is one gang: ``gpus`` GPUs that start together or not at all, for
``duration_s`` seconds of work when placed compactly. Checkpoint terms (interval, cost,
restore, grace) form the job's preemption contract.

CSV format (header required, one job per line, ``#`` lines are comments)::

    id,submit_s,gpus,duration_s[,priority][,team][,checkpoint_interval_s]
      [,checkpoint_cost_s][,restore_s][,grace_s]

Missing optional columns take the defaults of ``specs/data/scheduler.toml``. Lines that cannot
be used (bad numbers, zero GPUs, non-positive duration) are returned as rejects with their line
number, never dropped silently.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput

REQUIRED = ("id", "submit_s", "gpus", "duration_s")
OPTIONAL = ("priority", "team", "checkpoint_interval_s", "checkpoint_cost_s", "restore_s",
            "grace_s")


@dataclass(frozen=True)
class JobSpec:
    id: str
    submit_s: float
    gpus: int
    duration_s: float
    priority: int = 0
    team: str = "default"
    checkpoint_interval_s: float = 0.0  # 0 = never checkpoints: a preempted job restarts from 0
    checkpoint_cost_s: float = 0.0
    restore_s: float = 0.0
    grace_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reject:
    """An input line the simulator could not use, with the reason."""

    line: int
    id: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.id, "reason": self.reason}


@dataclass(frozen=True)
class Workload:
    name: str
    jobs: tuple[JobSpec, ...]
    rejects: tuple[Reject, ...] = ()
    notes: tuple[str, ...] = ()
    # where the jobs came from: the file read, or for generated jobs the source key
    # (sources_scheduler.toml) of the generator's parameters
    source: str = ""


def contract_defaults() -> dict[str, float]:
    from ..specs.sources import load_toml

    d = load_toml("scheduler.toml")["checkpoint_contract"]
    return {k: float(d[k]["value"]) for k in ("checkpoint_interval_s", "checkpoint_cost_s",
                                              "restore_s", "grace_s")}


def _num(text: str, field: str, *, integer: bool = False) -> float:
    t = text.strip()
    try:
        v = int(t) if integer else float(t)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"{field} must be {kind}, got {t!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{field} must be finite, got {t!r}")
    return v


def unreadable(path: str | Path, e: Exception) -> BadInput:
    """One line for a trace file that cannot be read or decoded as UTF-8 CSV."""
    if isinstance(e, UnicodeDecodeError):
        why = f"is not UTF-8 text (it holds the byte 0x{e.object[e.start]:02x})"
    elif isinstance(e, csv.Error):
        why = f"is not valid CSV ({e})"
    else:
        why = f"cannot be read ({e.strerror or type(e).__name__})"
    return BadInput(f"--trace: {Path(path).name} {why}; expected a UTF-8 CSV file")


def read_jobs_csv(path: str | Path, defaults: dict[str, float] | None = None) -> Workload:
    """Read the documented job CSV; unusable lines come back as :class:`Reject`."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"--trace: no such file {str(p)!r} (or use alibaba-v2023 / synthetic)")
    dflt = contract_defaults() | (defaults or {})
    try:
        return _read_rows(p, dflt)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise unreadable(p, e) from None


def _read_rows(p: Path, dflt: dict[str, float]) -> Workload:
    jobs: list[JobSpec] = []
    rejects: list[Reject] = []
    with open(p, newline="", encoding="utf-8") as f:
        rows = csv.reader(line for line in f if not line.lstrip().startswith("#"))
        header = next(rows, None)
        if header is None:
            raise BadInput(f"--trace: {p} is empty; expected a header with {', '.join(REQUIRED)}")
        cols = [h.strip() for h in header]
        missing = [c for c in REQUIRED if c not in cols]
        if missing:
            raise BadInput(f"--trace: {p} lacks column(s) {', '.join(missing)}; required: "
                           f"{', '.join(REQUIRED)}; optional: {', '.join(OPTIONAL)}")
        idx = {c: i for i, c in enumerate(cols)}
        seen: set[str] = set()
        for lineno, row in enumerate(rows, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            jid = row[idx["id"]].strip() if len(row) > idx["id"] else ""
            try:
                if len(row) != len(cols):
                    raise ValueError(f"has {len(row)} fields, the header has {len(cols)}")
                if not jid:
                    raise ValueError("id is empty")
                if jid in seen:
                    raise ValueError("duplicate id")
                get = {c: row[i] for c, i in idx.items()}
                kw: dict[str, Any] = {}
                for c in ("checkpoint_interval_s", "checkpoint_cost_s", "restore_s", "grace_s"):
                    v = get.get(c, "").strip()
                    kw[c] = _num(v, c) if v else dflt[c]
                    if kw[c] < 0:
                        raise ValueError(f"{c} must be 0 or more")
                spec = JobSpec(
                    id=jid,
                    submit_s=_num(get["submit_s"], "submit_s"),
                    gpus=int(_num(get["gpus"], "gpus", integer=True)),
                    duration_s=_num(get["duration_s"], "duration_s"),
                    priority=int(_num(get["priority"], "priority", integer=True))
                    if get.get("priority", "").strip() else 0,
                    team=get.get("team", "").strip() or "default",
                    **kw,
                )
                if spec.gpus < 1:
                    raise ValueError("gpus must be at least 1")
                if spec.duration_s <= 0:
                    raise ValueError("duration_s must be positive")
                if spec.submit_s < 0:
                    raise ValueError("submit_s must be 0 or more")
            except ValueError as e:
                rejects.append(Reject(lineno, jid, str(e)))
                continue
            seen.add(jid)
            jobs.append(spec)
    return Workload(p.name, tuple(jobs), tuple(rejects), source=str(p))


def write_jobs_csv(jobs: tuple[JobSpec, ...] | list[JobSpec], path: str | Path) -> None:
    cols = REQUIRED + OPTIONAL
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for j in jobs:
            d = j.to_dict()
            w.writerow([d[c] for c in cols])
