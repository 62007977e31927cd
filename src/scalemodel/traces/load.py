"""Read a directory of per-rank traces into one :class:`TraceSet`, saying what was skipped."""

from __future__ import annotations

import contextlib
import os
import statistics
from collections import Counter
from pathlib import Path

from ..errors import BadInput
from .fr import dump_to_view, looks_like_fr, rank_from_name, read_dump
from .model import RankView, TraceSet
from .owntrace import read_trace

MAX_FILES = 200_000
_IGNORED_SUFFIXES = (".stderr", ".stdout", ".log", ".txt", ".md", ".csv", ".png", ".svg")
RUN_GAP_S = 3600.0


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            out.append(Path(dirpath) / f)
            if len(out) > MAX_FILES:
                raise BadInput(f"DIR: more than {MAX_FILES:,} files under {root}; point at the "
                               "folder holding one run's dumps")
    return out


def load_dir(path: str | Path, fmt: str = "auto") -> TraceSet:
    root = Path(path)
    if not root.exists():
        raise BadInput(f"DIR: no such file or folder {str(root)!r}")
    if fmt not in ("auto", "fr", "trace"):
        raise BadInput(f"--format: choose auto, fr or trace, got {fmt!r}")
    traces: list[tuple[Path, RankView, dict, list[str]]] = []
    dumps: list[tuple[Path, dict, str]] = []
    skipped: list[tuple[str, str]] = []
    for p in _files(root):
        name = p.name
        if name.endswith(".jsonl"):
            v, head, probs, why = read_trace(p)
            if v is None:
                skipped.append((str(p), why))
            else:
                traces.append((p, v, head, probs))
            continue
        if name.endswith(_IGNORED_SUFFIXES) or name == "spec.json":
            continue
        try:
            with open(p, "rb") as f:
                first = f.read(64)
        except OSError as e:
            skipped.append((str(p), f"cannot read ({e.strerror})"))
            continue
        if looks_like_fr(first) is None:
            skipped.append((str(p), "not a Flight Recorder dump or scalemodel trace"))
            continue
        d, kind, why = read_dump(p)
        if d is None:
            skipped.append((str(p), why))
            continue
        dumps.append((p, d, kind))
    use_trace = fmt == "trace" or (fmt == "auto" and traces)
    if use_trace:
        if not traces:
            raise BadInput(f"DIR: no scalemodel traces (*.trace.jsonl) under {root}")
        ts = _from_traces(traces, skipped)
        if dumps:
            ts.notes.append(f"{len(dumps)} Flight Recorder dumps also present (analyse them with "
                            "--format fr)")
        return ts
    if not dumps:
        raise BadInput(f"DIR: no readable Flight Recorder dumps or scalemodel traces under {root}"
                       + (f" ({len(skipped)} files skipped, e.g. {skipped[0][0]}: "
                          f"{skipped[0][1]})" if skipped else ""))
    return _from_dumps(dumps, skipped)


def _from_traces(traces: list, skipped: list[tuple[str, str]]) -> TraceSet:
    runs = Counter(str(h.get("run_id", "")) for _, _, h, _ in traces)
    run, _ = runs.most_common(1)[0]
    ranks: dict[int, RankView] = {}
    notes: list[str] = []
    world = None
    members: dict[str, tuple[int, ...]] = {}
    for p, v, h, probs in traces:
        rid = str(h.get("run_id", ""))
        if rid != run:
            skipped.append((str(p), f"belongs to run {rid!r}; analysing run {run!r} "
                                     f"({runs[run]} files)"))
            continue
        if v.rank in ranks:
            skipped.append((str(p), f"a second trace for rank {v.rank} in run {run!r}"))
            continue
        ranks[v.rank] = v
        for pr in probs:
            notes.append(f"rank {v.rank}: {pr}")
        with contextlib.suppress(TypeError, ValueError):
            world = max(world or 0, int(h.get("world_size", 0)))
        for g, rs in (v.meta.get("groups") or h.get("groups") or {}).items():
            members[str(g)] = tuple(int(x) for x in rs)
    world = world or (max(ranks) + 1)
    labels = {g: g for v in ranks.values() for g in {r.group for r in v.records}}
    for g in labels:
        if g not in members:
            if g == "world":
                members[g] = tuple(range(world))
            else:
                members[g] = tuple(sorted(r for r, v in ranks.items()
                                          if any(x.group == g for x in v.records)))
    return TraceSet("scalemodel-trace", ranks, world, members, labels,
                    [v.path for v in ranks.values()], skipped, notes)


def _from_dumps(dumps: list, skipped: list[tuple[str, str]]) -> TraceSet:
    versions = Counter(str(d.get("version", "")) for _, d, _ in dumps)
    version, _ = versions.most_common(1)[0]
    ranks: dict[int, RankView] = {}
    notes: list[str] = []
    labels: dict[str, str] = {}
    cfg: dict[str, tuple[int, ...]] = {}
    for p, d, kind in sorted(dumps, key=lambda x: x[2] != "pickle"):
        r = rank_from_name(p)
        if r is None:
            skipped.append((str(p), "no rank number at the end of the file name"))
            continue
        if str(d.get("version", "")) != version:
            skipped.append((str(p), f"Flight Recorder format {d.get('version')!r} differs from "
                                    f"{version!r} of the other {versions[version]} dumps "
                                    "(a different torch version or run)"))
            continue
        if r in ranks:
            skipped.append((str(p), f"a second dump for rank {r} (kept {ranks[r].path})"))
            continue
        v, probs, lab, members = dump_to_view(d, r, str(p), f"fr-{kind}")
        ranks[r] = v
        labels.update(lab)
        for k, m in members.items():
            if len(m) > len(cfg.get(k, ())):
                cfg[k] = m
        notes.extend(f"rank {r}: {x}" for x in probs)
    if not ranks:
        raise BadInput("DIR: no usable Flight Recorder dump (see the skipped files)")
    # dumps far apart in time come from different runs: keep the larger cluster
    starts = {r: min((x.t_enter for x in v.records), default=None) for r, v in ranks.items()}
    known = [t for t in starts.values() if t is not None]
    if len(known) > 1:
        mid = statistics.median(known)
        for r, t in list(starts.items()):
            if t is not None and abs(t - mid) > RUN_GAP_S:
                skipped.append((ranks[r].path, f"recorded {abs(t - mid) / 3600:.1f} h away from "
                                               "the other dumps: a different run"))
                del ranks[r]
    world = max([len(m) for m in cfg.values()] + [max(ranks) + 1])
    if not any(cfg.values()):
        notes.append("world size unknown from the dumps (pg_config lists no ranks); assumed "
                     f"{world} = highest rank read + 1")
    members: dict[str, tuple[int, ...]] = {}
    seen_groups = {x.group for v in ranks.values() for x in v.records}
    for g in seen_groups:
        lab = labels.get(g, g)
        if g in cfg and cfg[g]:
            members[g] = cfg[g]
        elif "default_pg" in lab:
            members[g] = tuple(range(world))
            if g not in cfg and "" in cfg:
                notes.append(f"pg_config names no group {g!r} (torch 2.13 on gloo keys it ''); "
                             "its members were rebuilt from the dumps: all ranks")
        else:
            members[g] = tuple(sorted(r for r, v in ranks.items()
                                      if any(x.group == g for x in v.records)))
    return TraceSet("flight-recorder", ranks, world, members, labels,
                    [v.path for v in ranks.values()], skipped, notes)
