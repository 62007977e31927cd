"""Read a directory of per-rank traces into one :class:`TraceSet`, saying what was skipped."""

from __future__ import annotations

import contextlib
import os
import statistics
from collections import Counter
from pathlib import Path

from ..errors import BadInput
from .fr import MAX_DUMP_BYTES, DumpColumns, DumpInfo, looks_like_fr, parse_dump, rank_from_name
from .model import Columns, RankView, TraceSet
from .owntrace import read_trace

MAX_FILES = 200_000
_IGNORED_SUFFIXES = (".stderr", ".stdout", ".log", ".txt", ".md", ".csv", ".png", ".svg")
RUN_GAP_S = 3600.0
MAX_RANK = 1 << 24  # a larger trailing number in a file name is not a rank (16.7 M ranks)


def _files(root: Path) -> list[str]:
    if root.is_file():
        return [str(root)]
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            out.append(os.path.join(dirpath, f))
            if len(out) > MAX_FILES:
                raise BadInput(f"DIR: more than {MAX_FILES:,} files under {root}; point at the "
                               "folder holding one run's dumps")
    return out


def _read_fr(p: str) -> tuple[bytes | None, str]:
    """The bytes of a file that starts like a Flight Recorder dump, else (None, reason)."""
    too_big = f"larger than {MAX_DUMP_BYTES >> 20} MiB"
    try:
        fd = os.open(p, os.O_RDONLY)  # os-level reads: 16,384 files are read per triage
    except OSError as e:
        return None, f"cannot read ({e.strerror})"
    try:
        head = os.read(fd, 64)
        if looks_like_fr(head) is None:
            return None, "not a Flight Recorder dump or scalemodel trace"
        size = os.fstat(fd).st_size
        if size > MAX_DUMP_BYTES:
            return None, too_big
        parts, got = [head], len(head)
        while True:  # to the end, even if the file grew after fstat
            chunk = os.read(fd, max(size - got, 0) + 1)
            if not chunk:
                return b"".join(parts), ""
            parts.append(chunk)
            got += len(chunk)
            if got > MAX_DUMP_BYTES:
                return None, too_big
    except OSError as e:
        return None, f"cannot read ({e.strerror})"
    finally:
        os.close(fd)


def _is_kineto(p: str) -> bool:
    """A .json / .json.gz file whose first bytes hold a Chrome-trace key (torch.profiler)."""
    if not p.endswith((".json", ".json.gz")) or os.path.basename(p) == "spec.json":
        return False
    try:
        if p.endswith(".gz"):
            import gzip

            with gzip.open(p, "rb") as f:
                head = f.read(4096)
        else:
            with open(p, "rb") as f:
                head = f.read(4096)
    except (OSError, EOFError):
        return False
    return b'"traceEvents"' in head or b'"schemaVersion"' in head or b'"distributedInfo"' in head


def load_dir(path: str | Path, fmt: str = "auto", world_size: int | None = None) -> TraceSet:
    root = Path(path)
    if not root.exists():
        raise BadInput(f"DIR: no such file or folder {str(root)!r}")
    if fmt not in ("auto", "fr", "trace", "kineto"):
        raise BadInput(f"--format: choose auto, fr, trace or kineto, got {fmt!r}")
    if fmt in ("auto", "kineto"):
        files = _files(root)
        kin = [Path(p) for p in files if _is_kineto(p)]
        if fmt == "kineto" or (kin and not any(p.endswith(".jsonl") for p in files)):
            from .kineto import load_kineto

            if not kin:
                raise BadInput(f"DIR: no torch.profiler (Kineto) traces (*.json, *.json.gz with "
                               f"traceEvents) under {root}")
            return load_kineto(kin, [], world_size)
    traces: list[tuple[Path, RankView, dict, list[str]]] = []
    acc = DumpColumns()
    dumps: list[DumpInfo] = []
    skipped: list[tuple[str, str]] = []
    for p in _files(root):
        name = os.path.basename(p)
        if name.endswith(".jsonl"):
            v, head, probs, why = read_trace(Path(p))
            if v is None:
                skipped.append((p, why))
            else:
                traces.append((Path(p), v, head, probs))
            continue
        if name.endswith(_IGNORED_SUFFIXES) or name == "spec.json":
            continue
        raw, why = _read_fr(p)
        if raw is None:
            skipped.append((p, why))
            continue
        d, kind, why = parse_dump(raw)
        del raw
        if d is None:
            skipped.append((p, why))
            continue
        r = rank_from_name(name)
        if r is None or r > MAX_RANK:  # skipped below, in order; no rows needed
            dumps.append(DumpInfo(p, kind, str(d.get("version", "")), repr(d.get("version")),
                                  r, len(acc), len(acc)))
        else:
            dumps.append(acc.add(d, r, p, kind))  # the dump's dict is dropped after this
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
    return _from_dumps(acc, dumps, skipped)


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


def _split_reused_names(cols: Columns, members: dict[int, dict[str, tuple[int, ...]]],
                        labels: dict[str, str], notes: list[str]) -> dict[str, tuple[int, ...]]:
    """Each group's members from the dumps' pg_config, one group per (name, member set).

    torch names groups so that one name means one group in a run, but dumps from a launcher
    that names its groups itself (or files from several jobs) can use one name for different
    member sets, say every TP pair called "tp". Merging them would line up unrelated sequence
    numbers, so a rank whose pg_config gives such a name other members gets its rows moved to
    a group of their own, keyed "name [members]"."""
    seen: dict[str, set[tuple[int, ...]]] = {}
    for m in members.values():
        for k, v in m.items():
            if v:
                seen.setdefault(k, set()).add(v)
    reused = {k for k, v in seen.items() if len(v) > 1}
    cfg: dict[str, tuple[int, ...]] = {k: next(iter(v)) for k, v in seen.items() if k not in reused}
    if not reused:
        return cfg
    gid = {g: i for i, g in enumerate(cols.groups)}
    for i, r in enumerate(cols.order):
        lo, hi = int(cols.starts[i]), int(cols.starts[i + 1])
        for k in reused:
            m = members[r].get(k)
            if not m or k not in gid:
                continue
            key = f"{k} [{', '.join(map(str, m))}]"
            if key not in gid:
                gid[key] = len(cols.groups)
                cols.groups.append(key)
                labels[key] = f"{labels.get(k, k)} [{', '.join(map(str, m))}]"
                cfg[key] = m
            rows = cols.group[lo:hi]
            rows[rows == gid[k]] = gid[key]
    for k in sorted(reused):
        notes.append(f"the dumps give group name {k!r} {len(seen[k])} different member sets; "
                     "each set is analysed as a group of its own")
    return cfg


def _from_dumps(acc: DumpColumns, dumps: list[DumpInfo],
                skipped: list[tuple[str, str]]) -> TraceSet:
    versions = Counter(x.version for x in dumps)
    version, _ = versions.most_common(1)[0]
    ranks: dict[int, RankView] = {}
    info: dict[int, DumpInfo] = {}
    notes: list[str] = []
    labels: dict[str, str] = {}
    cfg: dict[str, tuple[int, ...]] = {}
    for x in sorted(dumps, key=lambda x: x.kind != "pickle"):
        r = x.rank
        if r is None:
            skipped.append((x.path, "no rank number at the end of the file name"))
            continue
        if r > MAX_RANK:
            skipped.append((x.path, f"the number {r} at the end of the file name is beyond "
                                    f"{MAX_RANK:,}, too large for a rank"))
            continue
        if x.version != version:
            skipped.append((x.path, f"Flight Recorder format {x.version_repr} differs from "
                                    f"{version!r} of the other {versions[version]} dumps "
                                    "(a different torch version or run)"))
            continue
        if r in ranks:
            skipped.append((x.path, f"a second dump for rank {r} (kept {ranks[r].path})"))
            continue
        ranks[r] = RankView(rank=r, path=x.path, fmt=f"fr-{x.kind}", meta=x.meta)
        info[r] = x
        labels.update(x.labels)
        notes.extend(f"rank {r}: {p}" for p in x.problems)
    if not ranks:
        raise BadInput("DIR: no usable Flight Recorder dump (see the skipped files)")
    # dumps far apart in time come from different runs: keep the larger cluster
    starts = {r: info[r].t_first for r in ranks}
    known = [t for t in starts.values() if t is not None]
    if len(known) > 1:
        mid = statistics.median(known)
        for r, t in list(starts.items()):
            if t is not None and abs(t - mid) > RUN_GAP_S:
                skipped.append((ranks[r].path, f"recorded {abs(t - mid) / 3600:.1f} h away from "
                                               "the other dumps: a different run"))
                del ranks[r]
        if not ranks:
            raise BadInput(f"DIR: the {len(known)} dumps were recorded hours apart with no run "
                           "holding most of them; point at one run's dumps")
    cols = acc.columns([info[r] for r in ranks])
    cfg = _split_reused_names(cols, {r: info[r].members for r in ranks}, labels, notes)
    for i, v in enumerate(ranks.values()):
        v.bind_rows(cols, int(cols.starts[i]), int(cols.starts[i + 1]))
    world = max([len(m) for m in cfg.values()] + [max(ranks) + 1])
    if not any(cfg.values()):
        notes.append("world size unknown from the dumps (pg_config lists no ranks); assumed "
                     f"{world} = highest rank read + 1")
    members: dict[str, tuple[int, ...]] = {}
    with_records = cols.group_ranks()
    for gi, have in with_records.items():
        g = cols.groups[gi]
        lab = labels.get(g, g)
        if g in cfg and cfg[g]:
            members[g] = cfg[g]
        elif "default_pg" in lab:
            members[g] = tuple(range(world))
            if g not in cfg and "" in cfg:
                notes.append(f"pg_config names no group {g!r} (torch 2.13 on gloo keys it ''); "
                             "its members were rebuilt from the dumps: all ranks")
        else:
            members[g] = have
    return TraceSet("flight-recorder", ranks, world, members, labels,
                    [v.path for v in ranks.values()], skipped, notes, cols)
