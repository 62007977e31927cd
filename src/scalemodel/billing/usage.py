"""Usage records from CSV or JSON Lines, parsed as data; bad lines come back with a reason.

Fields (CSV header, or JSON keys): ``id``, ``account``, ``sku``, ``start`` (ISO 8601, the event
time), ``end`` (optional), ``quantity`` (optional decimal string), ``count`` (optional whole
number, default 1), ``attributes`` (optional: a JSON object, or any text in CSV).
A record with ``end`` and no ``quantity`` is a time span: quantity = (end - start) in seconds
x count. A record with ``quantity`` is a point event at ``start``.
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


def read_usage(path: str | Path) -> Iterable[Raw]:
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"--usage: no such file {str(p)!r}")
    if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return JsonlUsage(p)
    if p.suffix.lower() == ".csv":
        return CsvUsage(p)
    raise BadInput(f"--usage: {p.name} must end in .csv or .jsonl")


class CsvUsage:
    """A CSV usage file. Iterating it yields :data:`Raw` tuples (one dict per record: what the
    reference engine reads); the engine's fast path (:mod:`scalemodel.billing.fast`) reads the
    file itself instead, without a dict or a payload per record."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[Raw]:
        return _csv(self.path)


class JsonlUsage:
    """A JSON Lines usage file; iterating it yields :data:`Raw` tuples, as :class:`CsvUsage`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[Raw]:
        return _jsonl(self.path)


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


def _csv(p: Path) -> Iterator[Raw]:
    with open(p, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        cols = csv_header(r, p)
        if cols is None:
            return
        n = len(cols)
        rest = [i for i, c in enumerate(cols) if c != "id"]
        prev = r.line_num
        for row in r:
            line = prev + 1
            prev = r.line_num
            if len(row) != n:
                if not row:
                    continue
                yield (line, None, f"malformed CSV line {line}: {len(row)} fields, header has {n}",
                       "")
                continue
            yield (line, dict(zip(cols, row, strict=True)), "",
                   "\x1f".join([row[i].strip() for i in rest]))


def _jsonl(p: Path) -> Iterator[Raw]:
    with open(p, encoding="utf-8") as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                d = json.loads(text, parse_float=Decimal)
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
