"""Read scalemodel's own per-rank collective traces (JSONL written by traces.recorder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import CollRecord, RankView
from .recorder import FORMAT

MAX_TRACE_BYTES = 512 * 1024 * 1024


def read_trace(path: Path) -> tuple[RankView | None, dict[str, Any], list[str], str]:
    """(view, header, problems, reason-if-skipped). A torn last line is a problem, not fatal."""
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            return None, {}, [], f"larger than {MAX_TRACE_BYTES >> 20} MiB"
        text = path.read_text(errors="replace")
    except OSError as e:
        return None, {}, [], f"cannot read ({e.strerror})"
    lines = text.splitlines()
    if not lines:
        return None, {}, [], "empty file"
    try:
        head = json.loads(lines[0])
    except RecursionError:  # nested past the parser: refused like any deep file
        return None, {}, [], "first line is nested too deep (bound parse.json_depth)"
    except json.JSONDecodeError:
        return None, {}, [], "first line is not JSON"
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        return None, {}, [], f"not a {FORMAT} file (no header line)"
    try:
        rank = int(head["rank"])
    except (KeyError, TypeError, ValueError):
        return None, head, [], "header has no integer rank"
    v = RankView(rank=rank, path=str(path), fmt="scalemodel-trace", node=str(head.get("node", "")),
                 meta={"run_id": head.get("run_id", ""), "version": head.get("version")})
    problems: list[str] = []
    open_: dict[tuple[str, int], dict[str, Any]] = {}
    bad = 0
    for i, line in enumerate(lines[1:], start=2):
        try:
            ev = json.loads(line)
            kind = ev["ev"]
            if kind == "enter":
                open_[(str(ev["group"]), _seq(ev["seq"]))] = ev
            elif kind == "exit":
                k = (str(ev["group"]), _seq(ev["seq"]))
                en = open_.pop(k, None)
                if en is None:
                    bad += 1
                    continue
                v.records.append(_rec(en, float(ev["t"]), ev.get("blocked_s")))
            elif kind == "compute":
                v.compute.append((int(ev["step"]), float(ev["t0"]), float(ev["t1"])))
            elif kind == "step":
                v.steps.append((int(ev["step"]), float(ev["t0"]), float(ev["t1"])))
            elif kind == "groups":
                v.meta["groups"] = {str(k): [int(x) for x in rs]
                                    for k, rs in dict(ev["groups"]).items()}
            elif kind == "heartbeat":
                v.last_alive = float(ev["t"])
            elif kind == "error":
                v.error = str(ev.get("message", ""))
            elif kind == "end":
                v.finished = True
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError):
            if i == len(lines):
                problems.append("last line torn (the process stopped while writing it)")
            else:
                bad += 1
    for en in open_.values():  # entered, never left: pending at the end of the trace
        v.records.append(_rec(en, None, None))
    v.records.sort(key=lambda r: r.t_enter)
    if bad:
        problems.append(f"{bad} unreadable or unmatched lines skipped")
    return v, head, problems, ""


def _seq(x: Any) -> int:
    s = int(x)
    if not -(2**63) <= s < 2**63:
        raise ValueError("sequence number out of range")
    return s


def _rec(en: dict[str, Any], t_exit: float | None, blocked: Any) -> CollRecord:
    sizes = tuple(tuple(s) if isinstance(s, list) else s for s in en.get("sizes", ()))
    dt = en.get("dtype", "")
    return CollRecord(group=str(en["group"]), seq=int(en["seq"]), op=str(en["op"]), sizes=sizes,
                      dtypes=(dt,) if dt else (), t_enter=float(en["t"]), t_exit=t_exit,
                      completed=t_exit is not None,
                      blocked_s=float(blocked) if blocked is not None else None,
                      step=en.get("step"))
