"""Usage records from CSV or JSON Lines, parsed as data; bad lines come back with a reason.

Fields (CSV header, or JSON keys): ``id``, ``account``, ``sku``, ``start`` (ISO 8601, the event
time), ``end`` (optional), ``quantity`` (optional decimal string), ``count`` (optional whole
number, default 1), ``attributes`` (optional: a JSON object, or any text in CSV).
A record with ``end`` and no ``quantity`` is a time span: quantity = (end - start) in seconds
x count. A record with ``quantity`` is a point event at ``start``.

Encodings (what spreadsheet tools write): a byte-order mark decides (UTF-8 with BOM, as
Excel's "CSV UTF-8" writes; UTF-16 or UTF-32 with BOM, as "Unicode Text" writes, tab-separated);
without one the file must be UTF-8, or the encoding is declared (``--encoding cp1252`` for a
Windows "CSV" export, ``latin-1``). A file that is not UTF-8 is refused rather than guessed:
a wrong guess would change ids and account names without a sign. A CSV whose header has tabs
and no commas is read as tab-separated.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..errors import BadInput

FIELDS = ("id", "account", "sku", "start", "end", "quantity", "count", "attributes")

# (line number, raw record dict or None, error text, canonical payload text without the id)
Raw = tuple[int, dict[str, Any] | None, str, str]


ENCODINGS = ("auto", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "cp1252",
             "latin-1")
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def encoding_of(p: Path, declared: str = "auto") -> str:
    """The codec to read ``p`` with: its byte-order mark's, else the declared one (UTF-8 by
    default; a declared UTF-8 also takes a BOM)."""
    if declared not in ENCODINGS:
        raise BadInput(f"--encoding must be one of {', '.join(ENCODINGS)}, got {declared!r}")
    if declared not in ("auto", "utf-8"):
        return declared
    with open(p, "rb") as f:
        head = f.read(4)
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    return "utf-8"


def read_usage(path: str | Path, encoding: str = "auto") -> Iterable[Raw]:
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"--usage: no such file {str(p)!r}")
    if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return JsonlUsage(p, encoding_of(p, encoding))
    if p.suffix.lower() in (".csv", ".tsv", ".txt"):
        return CsvUsage(p, encoding_of(p, encoding))
    raise BadInput(f"--usage: {p.name} must end in .csv, .tsv or .jsonl")


class CsvUsage:
    """A CSV usage file. Iterating it yields :data:`Raw` tuples (one dict per record: what the
    reference engine reads); the engine's fast path (:mod:`scalemodel.billing.fast`) reads the
    file itself instead, without a dict or a payload per record."""

    def __init__(self, path: Path, encoding: str = "utf-8") -> None:
        from ..specs.bounds import bound

        self.path = path
        self.encoding = encoding
        csv.field_size_limit(int(bound("parse", "usage_field_bytes")))
        with self.open() as f:
            head = f.readline()
        self.delimiter = "\t" if "\t" in head and "," not in head else ","

    def open(self) -> Any:
        return open(self.path, newline="", encoding=self.encoding)

    def reader(self, f: Any) -> Iterator[list[str]]:
        return csv.reader(f, delimiter=self.delimiter)

    def __iter__(self) -> Iterator[Raw]:
        return _csv(self)


class JsonlUsage:
    """A JSON Lines usage file; iterating it yields :data:`Raw` tuples, as :class:`CsvUsage`."""

    def __init__(self, path: Path, encoding: str = "utf-8") -> None:
        self.path = path
        self.encoding = encoding

    def open(self) -> Any:
        return open(self.path, encoding=self.encoding)

    def __iter__(self) -> Iterator[Raw]:
        return _jsonl(self)


def csv_header(r: Iterator[list[str]], p: Path) -> list[str] | None:
    """The stripped column names of a CSV reader (None for an empty file); missing required
    columns are refused."""
    header = next(r, None)
    if header is None:
        return None
    cols = [h.strip() for h in header]
    missing = [c for c in ("id", "account", "sku", "start") if c not in cols]
    if missing:
        raise BadInput(f"--usage: {p.name} lacks column(s) {', '.join(missing)}; columns: "
                       f"{', '.join(FIELDS)}")
    return cols


def csv_rows(r: Any, n: int) -> Iterator[tuple[int, list[str] | None, str]]:
    """The rows after a CSV reader's header, each with the file line it starts on: (line, row,
    "") for a row of the header's ``n`` fields, (line, None, reason) for a malformed one; blank
    lines are skipped. (Both billing paths read through this, so they name the same lines.)"""
    prev = r.line_num
    for row in r:
        line = prev + 1
        prev = r.line_num  # a quoted field may span lines: the next row starts after them
        if len(row) == n:
            yield line, row, ""
        elif row:
            yield line, None, f"malformed CSV line {line}: {len(row)} fields, header has {n}"


def _csv(src: CsvUsage) -> Iterator[Raw]:
    with src.open() as f:
        r = src.reader(f)
        cols = csv_header(r, src.path)
        if cols is None:
            return
        rest = [i for i, c in enumerate(cols) if c != "id"]
        for line, row, bad in csv_rows(r, len(cols)):
            if row is None:
                yield line, None, bad, ""
                continue
            yield (line, dict(zip(cols, row, strict=True)), "",
                   "\x1f".join([row[i].strip() for i in rest]))


def json_line(text: str) -> Any:
    """One JSON Lines record, numbers with a point as Decimal; a line nested past what the
    parser can hold is malformed (JSONDecodeError), not a crash."""
    try:
        return json.loads(text, parse_float=Decimal)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep", text[:20], 0) from None


def _jsonl(src: JsonlUsage) -> Iterator[Raw]:
    with src.open() as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                d = json_line(text)
            except json.JSONDecodeError as e:
                yield line, None, f"malformed JSON on line {line}: {e.msg}", ""
                continue
            if not isinstance(d, dict):
                yield line, None, f"line {line} is not a JSON object", ""
                continue
            yield line, d, "", json.dumps({k: v for k, v in d.items() if k != "id"},
                                          sort_keys=True, default=str)


def write_usage_csv(records: list[dict[str, Any]], path: str | Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for rec in records:
            w.writerow([rec.get(k, "") for k in FIELDS])
