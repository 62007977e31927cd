"""Reader of per-rank torch.profiler (Kineto) Chrome traces for slowdown triage.

``torch.profiler.profile(...).export_chrome_trace(path)`` writes one JSON object per rank:
``traceEvents`` (complete events ``ph: "X"`` with ``ts``/``dur`` in microseconds, ``cat``,
``name``, ``pid``/``tid``, ``args``) and ``distributedInfo`` (``rank``, ``world_size``,
``backend``). Files may be gzip-compressed (``.json.gz``). From one trace this reader takes:

* **steps**: ``ProfilerStep#N`` spans (what ``prof.step()`` marks);
* **communication**: GPU traces: NCCL kernels (``cat`` kernel, name starting ``nccl``);
  CPU traces: the ``gloo:<op>`` spans gloo's worker threads record while they run a
  collective (or, without them, the ``c10d::<op>`` ops of the calling thread);
* **compute**: GPU traces: every other kernel; CPU traces: the CPU ops and
  ``record_function`` regions of the threads that are not gloo workers, those naming
  communication or waiting excluded;
* per collective, the **exposed** part: its time not covered by compute (the union of compute
  intervals), which is what the slowdown analysis calls time blocked on communication.

Overlap per step is then 1 - exposed / communication. The result is the same normalised
:class:`~scalemodel.traces.model.TraceSet` the slowdown analysis reads for scalemodel's own
traces, so straggler, fabric and lost-overlap verdicts come from one analysis
(``traces/slow.py``). HolisticTraceAnalysis reads the same format but needs CUDA kernels and
streams for its overlap figures and pulls in jupyterlab, pandas and plotly; this reader also
serves CPU (gloo) traces. Files are parsed as JSON data only.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput
from .model import CollRecord, RankView, TraceSet

MAX_BYTES = 1 << 30
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# annotations that name communication or waiting are not compute regions
_COMMISH = re.compile(r"nccl|gloo|c10d|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
                      r"broadcast|send|recv|barrier|wait", re.I)
_NCCL_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", re.I)
_OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
        "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv", "send": "send",
        "recv": "recv", "alltoall": "all_to_all", "all_reduce": "all_reduce",
        "all_gather": "all_gather", "reduce_scatter": "reduce_scatter", "alltoall_base": "all_to_all"}


def is_kineto_name(name: str) -> bool:
    return name.endswith((".json", ".json.gz")) and not name.endswith(("spec.json",))


def _load(path: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None, f"larger than {MAX_BYTES >> 20} MiB"
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        d = json.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        return None, f"cannot read ({e})"
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return None, f"malformed JSON ({e})"
    if not isinstance(d, dict) or not isinstance(d.get("traceEvents"), list):
        return None, "not a Kineto trace (no traceEvents list)"
    return d, ""


def _op(name: str) -> str:
    m = _NCCL_OP.search(name)
    key = (m.group(1) if m else name.split(":", 1)[-1].rstrip("_")).lower()
    return _OPS.get(key, key)


def _union(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _covered(a: float, b: float, cover: list[tuple[float, float]], starts: np.ndarray) -> float:
    """Length of [a, b] covered by the sorted, disjoint intervals ``cover``."""
    i = max(int(np.searchsorted(starts, a, side="right")) - 1, 0)
    tot = 0.0
    while i < len(cover) and cover[i][0] < b:
        lo, hi = max(a, cover[i][0]), min(b, cover[i][1])
        if hi > lo:
            tot += hi - lo
        i += 1
    return tot


def read_kineto(path: Path) -> tuple[RankView | None, dict[str, Any], str]:
    """(view, distributedInfo, reason-if-skipped) of one rank's trace."""
    d, why = _load(path)
    if d is None:
        return None, {}, why
    info = d.get("distributedInfo") if isinstance(d.get("distributedInfo"), dict) else {}
    rank = info.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        m = re.search(r"rank[_-]?(\d+)", path.name)
        if not m:
            return None, info, "no distributedInfo.rank and no rank number in the file name"
        rank = int(m.group(1))
    steps: list[tuple[int, float, float]] = []
    kernels, cpu_ops, gloo, c10d = [], [], [], []
    gloo_tids: set[Any] = set()
    for e in d["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        name, cat = e.get("name"), e.get("cat")
        ts, dur = e.get("ts"), e.get("dur")
        if not isinstance(name, str) or isinstance(ts, bool) or isinstance(dur, bool) \
                or not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or dur < 0:
            continue
        a, b = ts * 1e-6, (ts + dur) * 1e-6
        m = _STEP.match(name)
        if m:
            steps.append((int(m.group(1)), a, b))
        elif cat == "kernel":
            kernels.append((name, a, b, e.get("args") or {}))
        elif name.startswith("gloo:"):
            gloo.append((name, a, b, e.get("tid")))
            gloo_tids.add(e.get("tid"))
        elif cat == "cpu_op":
            if name.startswith("c10d::") or name == "record_param_comms":
                c10d.append((name, a, b, e.get("tid")))
            else:
                cpu_ops.append((a, b, e.get("tid")))
        elif cat == "user_annotation" and not _COMMISH.search(name):
            cpu_ops.append((a, b, e.get("tid")))  # record_function regions (forward, ...)
    if not steps:
        return None, info, "no ProfilerStep#N spans (call prof.step() once per training step)"
    if kernels:
        comm = [(_op(n), a, b) for n, a, b, _ in kernels if n.lower().startswith("nccl")]
        compute = [(a, b) for n, a, b, _ in kernels if not n.lower().startswith("nccl")]
        source = "GPU kernels (NCCL kernels as communication)"
    else:
        comm = [(_op(n), a, b) for n, a, b, _ in (gloo or c10d) if n != "record_param_comms"]
        compute = [(a, b) for a, b, tid in cpu_ops if tid not in gloo_tids]
        source = ("CPU ops; gloo worker spans as communication" if gloo
                  else "CPU ops; c10d ops as communication")
    cover = _union(compute)
    starts = np.array([c[0] for c in cover])
    steps.sort(key=lambda s: s[1])
    step_starts = np.array([s[1] for s in steps])

    def step_of(t: float) -> int | None:
        i = int(np.searchsorted(step_starts, t, side="right")) - 1
        return steps[i][0] if i >= 0 and t <= steps[i][2] else None

    v = RankView(rank=rank, path=str(path), fmt="kineto", node=str(d.get("host_name", "")),
                 finished=True, meta={"backend": info.get("backend"), "source": source})
    v.steps.extend(steps)
    for a, b in cover:
        s = step_of(a)
        if s is not None:
            v.compute.append((s, a, b))
    seq: dict[str, int] = {}
    for op, a, b in sorted(comm, key=lambda c: c[1]):
        k = seq.get(op, 0)
        seq[op] = k + 1
        exposed = (b - a) - _covered(a, b, cover, starts)
        v.records.append(CollRecord(group="kineto", seq=k, op=op, sizes=(), dtypes=(),
                                    t_enter=a, t_exit=b, completed=True,
                                    blocked_s=max(exposed, 0.0), step=step_of(a)))
    return v, info, ""


def load_kineto(paths: list[Path], skipped: list[tuple[str, str]],
                world_size: int | None = None) -> TraceSet:
    ranks: dict[int, RankView] = {}
    read: list[str] = []
    worlds: set[int] = set()
    notes: list[str] = []
    for p in paths:
        v, info, why = read_kineto(p)
        if v is None:
            skipped.append((str(p), why))
            continue
        if v.rank in ranks:
            skipped.append((str(p), f"rank {v.rank} already read from {ranks[v.rank].path}"))
            continue
        ranks[v.rank] = v
        read.append(str(p))
        ws = info.get("world_size")
        if isinstance(ws, int) and not isinstance(ws, bool) and ws > 0:
            worlds.add(ws)
    if not ranks:
        raise BadInput("DIR: no usable torch.profiler (Kineto) traces"
                       + (f" ({skipped[0][0]}: {skipped[0][1]})" if skipped else ""))
    if len(worlds) > 1:
        raise BadInput(f"DIR: the traces disagree on world_size ({sorted(worlds)}); mixed runs?")
    world = world_size or (worlds.pop() if worlds else None)
    if world is not None:
        missing = sorted(set(range(world)) - set(ranks))
        if missing:
            raise BadInput(f"DIR: Kineto traces of ranks {missing[:8]} missing (world size "
                           f"{world}, {len(ranks)} read); every rank's trace is needed")
    srcs = sorted({str(v.meta.get("source")) for v in ranks.values()})
    notes.append("Kineto traces: " + "; ".join(srcs))
    return TraceSet(fmt="kineto", ranks=ranks, world_size=world or len(ranks),
                    group_members={"kineto": tuple(sorted(ranks))},
                    group_labels={"kineto": "collectives in the traces"}, read=read,
                    skipped=skipped, notes=notes)


def overlap_per_step(ts: TraceSet) -> dict[int, dict[int, dict[str, float]]]:
    """rank -> step -> {comm_s, exposed_s, overlap}: the share of communication hidden."""
    out: dict[int, dict[int, dict[str, float]]] = {}
    for r, v in ts.ranks.items():
        per: dict[int, dict[str, float]] = {}
        for x in v.records:
            if x.step is None or x.t_exit is None:
                continue
            d = per.setdefault(x.step, {"comm_s": 0.0, "exposed_s": 0.0})
            d["comm_s"] += x.t_exit - x.t_enter
            d["exposed_s"] += x.blocked_s or 0.0
        for d in per.values():
            d["overlap"] = 1 - d["exposed_s"] / d["comm_s"] if d["comm_s"] > 0 else 0.0
        out[r] = per
    return out
