"""plan train --layouts FILE: many fixed layouts priced in one process.

Each row of a CSV (header = column names) or JSONL file (one object per line) is one complete
layout in plan train's keys (keys not given take their defaults: tp, pp, cp, ep 1, zero 0,
vpp 1, micro_batch 1, recompute none; dp follows from the GPU count) and may name its own
``model``, ``gpus``, ``global_batch`` (sequences) and ``seq_len``; the command line gives the
rest. Rows that share a model, GPU count, batch and sequence are priced together in one
vectorised pass of the step model. The file is read as data only.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

ROW_KEYS = ("model", "gpus", "global_batch", "seq_len")
MAX_ROWS = 1_000_000


def read_rows(path: str) -> list[dict[str, str]]:
    """The rows of a CSV or JSONL file as text values (BadInput names the line)."""
    from ..errors import BadInput
    from ..specs.sources import is_user_file

    if not is_user_file(path):
        raise BadInput(f"--layouts: no such file {path[:200]!r}")
    text = Path(path).read_text(encoding="utf-8")
    rows: list[dict[str, str]] = []
    if path.endswith(".jsonl") or text.lstrip().startswith("{"):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadInput(f"--layouts {path}: line {i} is not JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise BadInput(f"--layouts {path}: line {i} is not a JSON object")
            rows.append({str(k): ("" if v is None else str(v)) for k, v in obj.items()})
    else:
        reader = csv.DictReader(io.StringIO(text))
        for i, r in enumerate(reader, 2):
            if None in r:
                raise BadInput(f"--layouts {path}: line {i} has more fields than the header")
            rows.append({k.strip(): (v or "").strip() for k, v in r.items() if k})
    if not rows:
        raise BadInput(f"--layouts {path}: no rows")
    if len(rows) > MAX_ROWS:
        raise BadInput(f"--layouts {path}: {len(rows):,} rows, at most {MAX_ROWS:,}")
    return rows


def run_batch(args: argparse.Namespace) -> Any:
    from ..analytic.layout import KEY_NAMES, TrainLayout, parse_layout
    from ..analytic.planner import make_cluster
    from ..errors import BadInput
    from ..specs import get_model
    from ..views.plan import batch_report
    from .plan import PLAN_KEYS, plan_job

    rows = read_rows(args.layouts)
    groups: dict[tuple, list[tuple[int, TrainLayout]]] = {}
    for i, r in enumerate(rows, 1):
        extra = set(r) - set(KEY_NAMES) - set(ROW_KEYS) - {"mb"}
        if extra:
            raise BadInput(f"--layouts row {i}: unknown column {sorted(extra)[0]!r}; columns: "
                           f"{', '.join(PLAN_KEYS + ROW_KEYS)}")
        text = ",".join(f"{k}={v}" for k, v in r.items() if k not in ROW_KEYS and v != "")
        try:
            keys = parse_layout(text, PLAN_KEYS, "plan train")
            model = r.get("model") or args.model
            gpus, batch, seq = (_count(r, k) for k in ("gpus", "global_batch", "seq_len"))
            seq = seq or args.seq_len
        except (BadInput, ValueError) as e:
            raise BadInput(f"--layouts row {i}: {e}") from None
        tp, pp, cp = keys.get("tp", 1), keys.get("pp", 1), keys.get("cp", 1)
        if "dp" not in keys:
            n = gpus or args.gpus
            if n % (tp * pp * cp):
                raise BadInput(f"--layouts row {i}: tp x pp x cp = {tp * pp * cp} does not "
                               f"divide {n} GPUs")
            keys["dp"] = n // (tp * pp * cp)
        lay = TrainLayout.from_keys(keys)
        n = gpus or lay.gpus
        groups.setdefault((model, n, batch, seq), []).append((i, lay))
    out: list[dict[str, Any] | None] = [None] * len(rows)
    for (model, n, batch, seq), items in groups.items():
        m = get_model(model)
        job, fw = plan_job(args, m, args.gpu, seq_len=seq, global_batch=batch)
        cl = make_cluster(args.gpu, n, gpus_per_node=args.gpus_per_node,
                          nvlink_domain=args.nvlink_domain, inter=args.inter,
                          nics_per_gpu=args.nics_per_gpu)
        try:
            priced = _price(job, cl, [lay for _, lay in items])
        except BadInput as e:
            raise BadInput(_first_bad_row(items, job, n) or f"--layouts: {e}") from None
        head = {"model": m.id, "gpus": n, "seq_len": seq, "global_batch": job.global_batch_seqs,
                "framework": fw.id}
        for (i, _), d in zip(items, priced, strict=True):
            out[i - 1] = {"row": i, **head, **d}
    rep = batch_report(out, args.layouts)
    if getattr(args, "json", False):
        return _JsonLines(rep)
    return rep


def _count(r: dict[str, Any], key: str) -> int | None:
    """A row's ``key`` column as a count of at least 1; None where the row leaves it blank
    (the command line's value then holds). A 0 is refused, never read as blank."""
    from ..errors import BadInput

    v = r.get(key)
    if v is None or str(v).strip() == "":
        return None
    n = int(v)
    if n < 1:
        raise BadInput(f"column {key} must be at least 1, got {v}")
    return n


# the step model's terms a row of the output shows (PlanRow.to_dict reads these)
_TERMS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "hfu",
          "memory_per_gpu_bytes", "lower_s", "upper_s", "compute_s", "tp_s", "cp_s", "ep_s",
          "host_s", "pp_s", "dp_s", "bubble_s", "optimizer_s", "overlap_s", "fits")


def _price(job: Any, cl: Any, lays: list[Any]) -> list[dict[str, Any]]:
    """plan train's JSON row for each layout, from one vectorised pass of the step model."""
    from types import SimpleNamespace

    import numpy as np

    from ..analytic.planner import PlanRow, evaluate, layout_columns

    terms = evaluate(job, cl, layout_columns(job, cl, lays))
    n = len(lays)
    cols = {k: np.broadcast_to(np.asarray(getattr(terms, k)), (n,)).tolist() for k in _TERMS}
    out = []
    for j, lay in enumerate(lays):
        v = SimpleNamespace(**{k: cols[k][j] for k in _TERMS})
        out.append(PlanRow(lay, v).to_dict() | {"fits": bool(v.fits)})
    return out


def _first_bad_row(items: list[tuple[int, Any]], job: Any, n: int) -> str | None:
    """The first row of a group the layout rules refuse, named by its row in the file."""
    from ..analytic.layout import Context, check
    from ..errors import BadInput
    from ..specs.frameworks import edge_chunk_split

    ctx = Context(job.model, n, job.global_batch_seqs, job.seq_len, job.schedule,
                  edge_slots=2 if edge_chunk_split(job.framework_id, job.model.id) else 0,
                  framework_id=job.framework_id)
    for i, lay in items:
        try:
            check(lay, ctx)
        except BadInput as e:
            return f"--layouts row {i} ({job.model.id}, {n} GPUs): {e}"
    return None


class _JsonLines:
    """--json prints one JSON object per layout, one per line (JSONL)."""

    jsonl = True

    def __init__(self, rep: Any) -> None:
        self.rep = rep
        self.plot = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rep, name)
