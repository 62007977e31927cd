"""Read PyTorch Flight Recorder dumps (pickle or JSON) without executing anything in them.

Pickled dumps are read by :class:`DataOnlyUnpickler`, a ``pickle.Unpickler`` whose
``find_class`` and ``persistent_load`` refuse everything: a pickle can only run code by naming
a callable (GLOBAL / STACK_GLOBAL / INST / OBJ / EXT* all go through ``find_class``, persistent
ids through ``persistent_load``), so with both refused the file can build nothing but dicts,
lists, tuples, strings, bytes, numbers, booleans and None. A dump that needs anything else is
reported as skipped. JSON dumps (``_dump_fr_trace_json``) are parsed with :mod:`json`.

Format notes (torch 2.13, gloo; see shared/data/fr_traces_gloo_torch2.13): entries carry
``pg_id``, ``process_group`` (name, desc), ``collective_seq_id``, ``profiling_name``
("gloo:all_reduce"), ``input_sizes``/``input_dtypes``, ``time_created_ns``; on gloo ``state``
stays "scheduled" and no start/finish times are recorded, so completion is unknown. ``pg_config``
may be keyed '' while entries name the group '0': groups are rebuilt from the entries.
The rank of a dump is the trailing integer of its file name (torch writes ``<prefix><rank>``).
Dumps are converted one at a time into shared columns (:class:`DumpColumns`) and then dropped.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import re
from array import array
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from ..specs.bounds import bound as _bound
from ..specs.bounds import depth_of
from .model import Columns

MAX_DUMP_BYTES = _bound("parse", "trace_bytes")  # specs/data/bounds.toml
_CACHE_MAX = 100_000
_MEMO_WAYS = 8
_RANK_RE = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")


class UnsafePickle(ValueError):
    pass


class DataOnlyUnpickler(pickle.Unpickler):
    """Refuses every global and persistent id: only plain data can come out."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        raise UnsafePickle(f"the pickle asks for {module}.{name}; only plain data is accepted")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("the pickle uses persistent ids; only plain data is accepted")


def load_data_pickle(raw: bytes) -> Any:
    return DataOnlyUnpickler(io.BytesIO(raw)).load()


def rank_from_name(path: Path | str) -> int | None:
    m = _RANK_RE.search(path.name if isinstance(path, Path) else os.path.basename(path))
    return int(m.group(1)) if m else None


def looks_like_fr(raw: bytes) -> str | None:
    """'pickle', 'json' or None by the first bytes."""
    if raw[:1] == b"\x80":
        return "pickle"
    head = raw[:64].lstrip()
    if head[:1] == b"{":
        return "json"
    return None


def read_dump(path: Path) -> tuple[dict[str, Any] | None, str, str]:
    """(dump dict, format, reason-if-skipped)."""
    try:
        size = path.stat().st_size
        if size > MAX_DUMP_BYTES:
            return None, "", f"larger than {MAX_DUMP_BYTES >> 20} MiB"
        raw = path.read_bytes()
    except OSError as e:
        return None, "", f"cannot read ({e.strerror})"
    return parse_dump(raw)


def parse_dump(raw: bytes) -> tuple[dict[str, Any] | None, str, str]:
    """(dump dict, format, reason-if-skipped) of a file's bytes."""
    kind = looks_like_fr(raw)
    if kind is None:
        return None, "", "neither a pickle nor a JSON object"
    try:
        d = load_data_pickle(raw) if kind == "pickle" else json.loads(raw)
    except UnsafePickle as e:
        return None, kind, f"refused: {e}"
    except (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError, TypeError,
            MemoryError, RecursionError, UnicodeDecodeError) as e:
        return None, kind, f"truncated or corrupt {kind} ({type(e).__name__}: {str(e)[:80]})"
    name = "pickle_depth" if kind == "pickle" else "json_depth"
    if depth_of(d, _bound("parse", name)) > _bound("parse", name):
        return None, kind, (f"nested more than {_bound('parse', name)} levels deep (bound "
                            f"parse.{name}); refused")
    if not isinstance(d, dict) or "entries" not in d:
        return None, kind, f"a {kind} file but not a Flight Recorder dump (no 'entries')"
    return d, kind, ""


def _tup(x: Any) -> Any:
    if isinstance(x, list | tuple):
        if all(isinstance(v, list | tuple) for v in x):  # the common [[n, m], ...] shape
            try:
                return tuple(tuple(v) for v in x) if all(
                    not isinstance(w, list | tuple) for v in x for w in v) else tuple(
                    _tup(v) for v in x)
            except TypeError:
                pass
        return tuple(_tup(v) for v in x)
    return x


def _group_key(e: dict[str, Any]) -> tuple[str, str]:
    pg = e.get("process_group") or ("", "")
    name = str(pg[0]) if len(pg) > 0 else ""
    desc = str(pg[1]) if len(pg) > 1 else ""
    pid = e.get("pg_id", "")
    key = name if name else f"pg_id={pid}"
    label = f"{name} ({desc})" if desc and desc != name else (name or f"unnamed group pg_id={pid}")
    return key, label


@dataclass
class DumpInfo:
    """What one dump contributed: its rows ``lo:hi`` in the :class:`DumpColumns` and the rest."""

    path: str
    kind: str  # "pickle" | "json"
    version: str
    version_repr: str
    rank: int | None
    lo: int
    hi: int
    problems: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # group key -> label
    members: dict[str, tuple[int, ...]] = field(default_factory=dict)  # pg_config ranks
    meta: dict[str, Any] = field(default_factory=dict)
    t_first: float | None = None  # earliest time_created of its collectives, seconds


_FIELDS = itemgetter("is_p2p", "process_group", "pg_id", "profiling_name", "input_sizes",
                     "input_dtypes", "collective_seq_id", "time_created_ns",
                     "time_discovered_completed_ns", "state")


def _fields(e: dict[str, Any]) -> tuple:
    """_FIELDS with the defaults for absent keys (no collective_seq_id: None, unusable)."""
    return (e.get("is_p2p"), e.get("process_group"), e.get("pg_id", ""),
            e.get("profiling_name", ""), e.get("input_sizes", ()), e.get("input_dtypes", ()),
            e.get("collective_seq_id"), e.get("time_created_ns", 0),
            e.get("time_discovered_completed_ns"), e.get("state"))


class DumpColumns:
    """Flattens the collectives of many dumps into shared columns, one dump at a time.

    A parsed dump (a dict of lists of dicts) is converted and can be dropped at once, so
    memory holds a few arrays instead of millions of small Python objects (which also keeps the
    garbage collector from re-scanning them after every few thousand allocations). Process
    groups and (op, sizes, dtypes) fingerprints are interned: ``groups[i]`` and ``fps[i]``.
    Times are kept in nanoseconds here and become seconds in :meth:`columns`.
    """

    def __init__(self) -> None:
        self.group, self.seq, self.fp = array("i"), array("q"), array("i")
        self.t_enter, self.t_exit, self.done = array("d"), array("d"), array("b")
        self.groups: list[str] = []
        self.fps: list[tuple] = []
        self._gid: dict[str, int] = {}
        # ((name, desc), pg_id) -> (group index, key, label), for string names and int ids
        self._gfast: dict[tuple, tuple[int, str, str]] = {}
        self._fid: dict[tuple, int] = {}  # (op, sizes, dtypes) -> index in fps
        self._ffast: dict[tuple, int] = {}  # (profiling name, repr sizes, repr dtypes) -> index
        self._ranks_txt: dict[str, tuple[int, ...]] = {}
        # (profiling name, len sizes, len dtypes) -> recently seen [sizes, dtypes, fingerprint]
        self._fmemo: dict[tuple, list[tuple]] = {}

    def __len__(self) -> int:
        return len(self.seq)

    def _group(self, e: dict[str, Any]) -> tuple[int, str, str]:
        key, label = _group_key(e)
        gi = self._gid.get(key)
        if gi is None:
            gi = self._gid[key] = len(self.groups)
            self.groups.append(key)
        return gi, key, label

    def _fingerprint(self, prof: str, sizes: Any, dtypes: Any) -> int:
        op = prof.split(":", 1)[1] if ":" in prof else prof
        canon = (op, _tup(sizes), _tup(dtypes))
        fi = self._fid.get(canon)  # TypeError where sizes hold a dict: the entry is unusable
        if fi is None:
            fi = self._fid[canon] = len(self.fps)
            self.fps.append(canon)
        return fi

    def _add_each(self, entries: list, has_state: bool,
                  labels: dict[str, str]) -> tuple[int, int]:
        """Entry by entry: usable collectives are appended, the rest counted (bad, p2p)."""
        gfast, ffast, fmemo = self._gfast, self._ffast, self._fmemo
        add_g, add_s, add_f = self.group.append, self.seq.append, self.fp.append
        add_t, add_x, add_d = self.t_enter.append, self.t_exit.append, self.done.append
        nan = math.nan
        bad = p2p = 0
        for e in entries:
            if not isinstance(e, dict):
                bad += 1
                continue
            try:
                try:  # one C call for the fields torch always writes
                    p2p_, pg, pid, prof, sizes, dts, seq, t, td, state = _FIELDS(e)
                except KeyError:  # some missing: their defaults
                    p2p_, pg, pid, prof, sizes, dts, seq, t, td, state = _fields(e)
                if p2p_:
                    p2p += 1
                    continue
                if (type(pg) is list or type(pg) is tuple) and len(pg) == 2 \
                        and type(pg[0]) is str and type(pg[1]) is str and type(pid) is int:
                    ck = (tuple(pg), pid)  # the common shape: name, desc, integer id
                    g = gfast.get(ck)
                    if g is None:
                        g = self._group(e)
                        if len(gfast) < _CACHE_MAX:
                            gfast[ck] = g
                else:
                    g = self._group(e)
                gi, key, label = g
                labels[key] = label
                fi = -1
                mk = (prof, len(sizes), len(dts)) if type(prof) is str \
                    and type(sizes) is list and type(dts) is list else None
                if mk is not None:
                    # a training loop repeats a few shapes: compare with those first (equal
                    # lists have equal fingerprints); repr below costs more than a compare
                    for c in fmemo.get(mk, ()):
                        if c[0] == sizes and c[1] == dts:
                            fi = c[2]
                            break
                if fi < 0:
                    # repr of plain data fixes its value: equal keys, equal fingerprints
                    fk = (prof if type(prof) is str else str(prof), repr(sizes), repr(dts))
                    fi = ffast.get(fk)
                    if fi is None:
                        fi = self._fingerprint(fk[0], sizes, dts)
                        if len(ffast) < _CACHE_MAX:  # bounded: hostile files make every key new
                            ffast[fk] = fi
                    if mk is not None and (mk in fmemo or len(fmemo) < _CACHE_MAX):
                        fmemo[mk] = [(sizes, dts, fi), *fmemo.get(mk, ())][:_MEMO_WAYS]
                seq = int(seq)
                t = float(t)
                tx = float(td) if td else nan
                add_s(seq)  # the only append that can fail (outside int64): first
            except (KeyError, TypeError, ValueError, OverflowError, RecursionError):
                bad += 1
                continue
            add_g(gi)
            add_f(fi)
            add_t(t)
            add_x(tx)
            add_d((state == "completed") if has_state else -1)
        return bad, p2p

    def add(self, d: dict[str, Any], rank: int | None, path: str, kind: str) -> DumpInfo:
        """Append one dump's collectives; entries that cannot be used are counted, not kept."""
        lo = len(self.seq)
        info = DumpInfo(path, kind, str(d.get("version", "")), repr(d.get("version")), rank, lo, lo,
                        meta={"version": str(d.get("version", "")),
                              "comm_lib_version": d.get("comm_lib_version")})
        entries = d.get("entries")
        if not isinstance(entries, list):
            info.problems.append("'entries' is not a list")
            return info
        # NCCL records real progress; gloo (empty comm_lib_version) leaves every entry
        # "scheduled", so there completion is unknown (-1)
        has_state = bool(d.get("comm_lib_version"))
        bad, p2p = self._add_each(entries, has_state, info.labels)
        info.hi = hi = len(self.seq)
        if hi > lo:
            info.t_first = min(self.t_enter[lo:hi]) / 1e9
        if bad:
            info.problems.append(f"{bad} entries without a usable collective_seq_id/op were "
                                 "skipped")
        if p2p:
            info.problems.append(f"{p2p} point-to-point entries are not analysed (collectives "
                                 "only)")
        cfg = d.get("pg_config")
        if isinstance(cfg, dict):
            for name, c in cfg.items():
                if isinstance(c, dict):
                    txt = str(c.get("ranks", ""))
                    nums = self._ranks_txt.get(txt)
                    if nums is None:
                        nums = self._ranks_txt[txt] = tuple(
                            int(x) for x in re.findall(r"-?\d+", txt))
                    info.members[str(name)] = nums
        return info

    def columns(self, kept: list[DumpInfo]) -> Columns:
        """The rows of the ``kept`` dumps, in that order, one dump per rank."""
        lo = np.array([k.lo for k in kept], dtype=np.int64)
        lens = np.array([k.hi - k.lo for k in kept], dtype=np.int64)
        starts = np.cumsum(lens) - lens
        idx = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(lo - starts, lens)

        def take(a: array, dt: Any) -> np.ndarray:
            return np.frombuffer(a, dtype=dt)[idx] if len(a) else np.zeros(0, dtype=dt)

        return Columns([k.rank for k in kept], lens, take(self.group, np.int32),
                       take(self.seq, np.int64), take(self.fp, np.int32),
                       take(self.t_enter, np.float64) / 1e9, take(self.t_exit, np.float64) / 1e9,
                       take(self.done, np.int8), list(self.groups), list(self.fps))
