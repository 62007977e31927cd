"""Reader of the Alibaba GPU cluster trace v2023 ("openb", Weng et al., USENIX ATC 2023).

Each pod becomes one job of the scheduler simulator:

- submit = ``creation_time``; duration = ``deletion_time - scheduled_time`` (the time the pod
  held its GPUs in the real cluster);
- GPUs = ``num_gpu``; a pod that asks for a share of one GPU (``gpu_milli < 1000``) is given one
  whole GPU, because the simulator allocates whole GPUs (counted in the notes);
- team = ``qos`` (the only grouping the trace has); priority from ``qos`` via
  ``specs/data/scheduler.toml`` (LS highest, BE lowest);
- the checkpoint contract is not in the trace: it takes the defaults of the same file.

Pods that cannot be replayed are returned as rejects with their reason: CPU-only pods
(``num_gpu == 0``), pods never scheduled in the real cluster (``Pending``, no scheduled_time),
and pods with a missing or non-positive duration.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from ..errors import BadInput
from .jobs import JobSpec, Reject, Workload, contract_defaults, unreadable

HEADER = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time",
          "scheduled_time")
DEFAULT_FILE = Path("alibaba-gpu-v2023") / "openb_pod_list_default.csv"


def trace_dirs() -> list[Path]:
    """Where traces are looked for: $SCALEMODEL_TRACES, then the package's bundled copies."""
    from ..specs.sources import data_path

    out = []
    if os.environ.get("SCALEMODEL_TRACES"):
        out.append(Path(os.environ["SCALEMODEL_TRACES"]))
    out.append(data_path("traces"))
    return out


def default_path() -> Path:
    for d in trace_dirs():
        if (d / DEFAULT_FILE).is_file():
            return d / DEFAULT_FILE
    raise BadInput("--trace alibaba-v2023: the trace file is not found; set SCALEMODEL_TRACES to "
                   "the folder holding alibaba-gpu-v2023/openb_pod_list_default.csv")


def is_openb(path: str | Path) -> bool:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            head = f.readline()
    except (OSError, UnicodeDecodeError) as e:
        raise unreadable(path, e) from None
    return head.startswith("name,") and "num_gpu" in head


def read_openb(path: str | Path | None = None, defaults: dict[str, float] | None = None,
               time_scale: float = 1.0) -> Workload:
    """Read an openb pod list; ``time_scale`` > 1 compresses arrivals (durations unchanged)."""
    from ..specs.sources import load_toml

    p = Path(path) if path else default_path()
    prio = {k: int(v) for k, v in load_toml("scheduler.toml")["alibaba_qos_priority"].items()
            if k not in ("source", "note")}
    dflt = contract_defaults() | (defaults or {})
    try:
        return _read_rows(p, prio, dflt, time_scale)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise unreadable(p, e) from None


def _read_rows(p: Path, prio: dict[str, int], dflt: dict[str, float],
               time_scale: float) -> Workload:
    jobs: list[JobSpec] = []
    rejects: list[Reject] = []
    fractional = 0
    with open(p, newline="", encoding="utf-8") as f:
        r = csv.DictReader(f)
        missing = [c for c in HEADER if c not in (r.fieldnames or [])]
        if missing:
            raise BadInput(f"--trace: {p.name} lacks the openb column(s) {', '.join(missing)} "
                           "(the multigpu variants of the trace carry no times and cannot be "
                           "replayed)")
        for lineno, row in enumerate(r, start=2):
            name = row["name"] or f"line-{lineno}"
            try:
                g = int(row["num_gpu"])
                if g == 0:
                    raise ValueError("CPU-only pod (num_gpu = 0)")
                if not row["scheduled_time"]:
                    raise ValueError(f"never scheduled in the real cluster ({row['pod_phase']})")
                start, end = int(row["scheduled_time"]), int(row["deletion_time"])
                dur = end - start
                if dur <= 0:
                    raise ValueError(f"non-positive duration ({dur} s)")
                submit = int(row["creation_time"])
                if g < 0 or submit < 0:
                    raise ValueError("negative num_gpu or creation_time")
            except (ValueError, TypeError) as e:
                rejects.append(Reject(lineno, name, str(e)))
                continue
            if g == 1 and int(row["gpu_milli"] or 1000) < 1000:
                fractional += 1
            qos = row["qos"] or "unknown"
            jobs.append(JobSpec(name, submit / time_scale, g, float(dur), prio.get(qos, 0), qos,
                                dflt["checkpoint_interval_s"], dflt["checkpoint_cost_s"],
                                dflt["restore_s"], dflt["grace_s"]))
    notes = (f"{fractional} pods asked for a share of one GPU; each is given a whole GPU",)
    if time_scale != 1:
        notes += (f"arrival times divided by {time_scale:g} (durations unchanged)",)
    return Workload(f"alibaba-v2023 ({p.name})", tuple(jobs), tuple(rejects), notes, str(p))
