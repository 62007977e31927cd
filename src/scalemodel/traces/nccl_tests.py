"""Reader of nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
alltoall_perf, broadcast_perf, reduce_perf, sendrecv_perf).

The tables these programs print have changed over the years (NVIDIA/nccl-tests src/common.cu
and, from 2025, src/util.cu): before mid-2022 each test printed its own header, with a
``redop`` column only for reductions and an ``error`` column after each side; later versions
print one header for all tests with ``redop`` and ``root`` always present and ``#wrong`` (or
``N/A`` without validation); some builds add ``copybw``, per-iteration statistics (``i_min``
... ``i_cv%``) or a timestamp; ``-C`` reports ``cputime`` instead of ``time``. So the reader
does not assume one layout: it takes the column names from the table's own header line
(``#  size  count  type ...``) and finds, for each side (out-of-place first, then in-place),
the time (microseconds) and bandwidth columns by name. A file may hold several tables
(several programs' output concatenated); each is named by the ``Collective test starting:`` /
``concluded:`` lines newer versions print, else by the program name on a line of the file,
else by the file name. The rank count comes from the ``Rank N ...`` device lines, else from
``nThread x nGpus``.

Parsing is on text only; a data row the reader cannot use is reported with its reason.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from ..errors import BadInput

PROGRAMS = {
    "all_reduce_perf": "all-reduce", "all_gather_perf": "all-gather",
    "reduce_scatter_perf": "reduce-scatter", "alltoall_perf": "all-to-all",
    "broadcast_perf": "broadcast", "reduce_perf": "reduce", "sendrecv_perf": "send-recv",
}
_PROG_RE = re.compile(r"\b(" + "|".join(PROGRAMS) + r")\b")
_RANK_RE = re.compile(r"^#\s*Rank\s+(\d+)\b")
_THREADS_RE = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_TIME_COLS = ("time", "cputime")


@dataclass(frozen=True)
class NcclRow:
    collective: str
    bytes: int
    count: int
    dtype: str
    redop: str
    time_s: float  # out-of-place
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    in_place_time_s: float | None


@dataclass(frozen=True)
class NcclTestsResult:
    rows: tuple[NcclRow, ...]
    world_size: int
    format: str  # which header layout was read (the column names joined)
    skipped: tuple[str, ...] = field(default_factory=tuple)  # unusable rows, with reasons
    avg_busbw_bytes_per_s: float | None = None


def looks_like_nccl_tests(text: str) -> bool:
    return any(_header(line) is not None for line in text.splitlines()[:400])


def _header(line: str) -> list[str] | None:
    if not line.startswith("#"):
        return None
    cols = line[1:].split()
    if len(cols) >= 5 and cols[0] == "size" and cols[1] == "count" and any(
            c in _TIME_COLS for c in cols):
        return cols
    return None


def _sides(cols: list[str]) -> list[dict[str, int]]:
    """Column positions of time, algbw and busbw for each side, in header order."""
    sides: list[dict[str, int]] = []
    for i, c in enumerate(cols):
        if c in _TIME_COLS:
            sides.append({"time": i})
        elif sides and c in ("algbw", "busbw") and c not in sides[-1]:
            sides[-1][c] = i
    return [s for s in sides if {"time", "algbw", "busbw"} <= set(s)]


def parse_nccl_tests(text: str, where: str, default_collective: str | None = None) -> NcclTestsResult:
    """All tables of one nccl-tests output file; BadInput when none can be used."""
    lines = text.splitlines()
    named = _PROG_RE.search(where.replace("/", " "))
    if named:
        default_collective = PROGRAMS[named.group(1)]
    ranks: set[int] = set()
    threads_gpus = None
    for line in lines:
        m = _RANK_RE.match(line)
        if m:
            ranks.add(int(m.group(1)))
        t = _THREADS_RE.search(line)
        if t and threads_gpus is None:
            threads_gpus = int(t.group(1)) * int(t.group(2))
    world = len(ranks) if ranks else threads_gpus
    if not world:
        raise BadInput(f"--profile: {where}: no 'Rank N' device lines and no 'nThread/nGpus' "
                       "line, so the rank count is unknown")
    # name each table: the nearest program name before its header, else after it, else default
    names = [(i, PROGRAMS[m.group(1)]) for i, line in enumerate(lines)
             if (m := _PROG_RE.search(line))]
    rows: list[NcclRow] = []
    skipped: list[str] = []
    formats: list[str] = []
    avg = None
    cols: list[str] | None = None
    sides: list[dict[str, int]] = []
    coll = default_collective
    for i, line in enumerate(lines):
        s = line.strip()
        h = _header(s)
        if h is not None:
            cols, sides = h, _sides(h)
            if not sides:
                raise BadInput(f"--profile: {where}:{i + 1}: table header has no time / algbw / "
                               "busbw columns")
            before = [n for j, n in names if j < i]
            after = [n for j, n in names if j > i]
            coll = before[-1] if before else (after[0] if after else default_collective)
            if coll is None:
                raise BadInput(f"--profile: {where}: cannot tell which collective the table at "
                               f"line {i + 1} measured (no {'/'.join(PROGRAMS)} name in the "
                               "file or its name)")
            formats.append(" ".join(h))
            continue
        if s.startswith("# Avg bus bandwidth"):
            with contextlib.suppress(IndexError, ValueError):
                avg = float(s.split(":", 1)[1].split()[0]) * 1e9
            continue
        if not s or s.startswith("#") or not s[0].isdigit() or cols is None:
            continue
        tok = s.split()
        first = sides[0]
        need = max(first.values()) + 1
        if len(tok) < need:
            skipped.append(f"line {i + 1}: {len(tok)} fields, the header needs {need}")
            continue
        try:
            nbytes, count = int(tok[0]), int(tok[1])
            t_us = float(tok[first["time"]])
            alg, bus = float(tok[first["algbw"]]), float(tok[first["busbw"]])
        except ValueError:
            skipped.append(f"line {i + 1}: a size, count, time or bandwidth is not a number")
            continue
        ip = None
        if len(sides) > 1 and len(tok) > sides[1]["time"]:
            try:
                ip = float(tok[sides[1]["time"]]) * 1e-6
            except ValueError:
                ip = None
        if nbytes <= 0 or not t_us > 0:
            skipped.append(f"line {i + 1}: size {nbytes} B at {t_us} us carries no per-byte time")
            continue
        rows.append(NcclRow(coll or "", nbytes, count, tok[2] if len(tok) > 2 else "",
                            tok[3] if "redop" in cols else "", t_us * 1e-6, alg * 1e9, bus * 1e9,
                            ip))
    if not formats:
        raise BadInput(f"--profile: {where} holds no nccl-tests table (no '# size count type ... "
                       "time algbw busbw' header line)")
    if not rows:
        raise BadInput(f"--profile: {where}: the nccl-tests tables hold no usable rows"
                       + (f" ({skipped[0]})" if skipped else ""))
    return NcclTestsResult(tuple(rows), int(world), " | ".join(dict.fromkeys(formats)),
                           tuple(skipped), avg)


def profile_from_nccl_tests(text: str, where: str,
                            default_collective: str | None = None) -> dict:
    """A calibration profile (the same fit ``comm bench --save`` writes) from nccl-tests output."""
    from ..analytic.calibration import build_profile

    r = parse_nccl_tests(text, where, default_collective)
    rows = [{"collective": x.collective, "bytes": x.bytes, "time_s": x.time_s} for x in r.rows]
    counts = {c: sum(1 for x in r.rows if x.collective == c) for c in {x.collective for x in r.rows}}
    too_few = sorted(c for c, n in counts.items() if n < 2)
    if too_few and len(too_few) == len(counts):
        raise BadInput(f"--profile: {where}: a fit needs at least two sizes; "
                       f"{', '.join(too_few)} has one")
    meta = {"source": f"nccl-tests output {where}", "format": r.format,
            "skipped_rows": list(r.skipped) + [f"{c}: one size only, not fitted" for c in too_few],
            "timing": "out-of-place time column"}
    return build_profile(rows, backend="nccl", world_size=r.world_size, meta=meta)
