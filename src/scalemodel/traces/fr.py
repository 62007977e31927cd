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
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

from .model import CollRecord, RankView

MAX_DUMP_BYTES = 256 * 1024 * 1024
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


def rank_from_name(path: Path) -> int | None:
    m = _RANK_RE.search(path.name)
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


def dump_to_view(d: dict[str, Any], rank: int, path: str, fmt: str) -> tuple[RankView, list[str], dict[str, str], dict[str, tuple[int, ...]]]:
    """Normalise one dump. Returns the view, problems found, group labels, pg_config members."""
    v = RankView(rank=rank, path=path, fmt=fmt, meta={"version": str(d.get("version", "")),
                                                      "comm_lib_version": d.get("comm_lib_version")})
    problems: list[str] = []
    labels: dict[str, str] = {}
    entries = d.get("entries")
    if not isinstance(entries, list):
        return v, ["'entries' is not a list"], labels, {}
    bad = p2p = 0
    for e in entries:
        if not isinstance(e, dict):
            bad += 1
            continue
        try:
            if e.get("is_p2p"):
                p2p += 1
                continue
            prof = str(e.get("profiling_name", ""))
            op = prof.split(":", 1)[1] if ":" in prof else prof
            key, label = _group_key(e)
            labels[key] = label
            state = e.get("state")
            t_done = e.get("time_discovered_completed_ns") or None
            # NCCL records real progress; gloo (empty comm_lib_version) leaves every entry
            # "scheduled", so there completion is unknown
            completed = (state == "completed") if d.get("comm_lib_version") else None
            v.records.append(CollRecord(
                group=key, seq=int(e["collective_seq_id"]), op=op,
                sizes=_tup(e.get("input_sizes", ())), dtypes=_tup(e.get("input_dtypes", ())),
                t_enter=float(e.get("time_created_ns", 0)) / 1e9,
                t_exit=float(t_done) / 1e9 if t_done else None, completed=completed))
        except (KeyError, TypeError, ValueError):
            bad += 1
    if bad:
        problems.append(f"{bad} entries without a usable collective_seq_id/op were skipped")
    if p2p:
        problems.append(f"{p2p} point-to-point entries are not analysed (collectives only)")
    members: dict[str, tuple[int, ...]] = {}
    cfg = d.get("pg_config")
    if isinstance(cfg, dict):
        for name, c in cfg.items():
            if isinstance(c, dict):
                txt = str(c.get("ranks", ""))
                nums = tuple(int(x) for x in re.findall(r"-?\d+", txt))
                members[str(name)] = nums
    return v, problems, labels, members
