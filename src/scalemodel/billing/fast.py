"""The fast path of the billing engine, for usage files (CSV or JSON Lines) as
:func:`scalemodel.billing.usage.read_usage` opens them (what ``scalemodel bill`` reads).

It bills exactly what the reference path (:func:`scalemodel.billing.engine._bill`) bills: the
same lines, amounts, quantity strings, unbilled reasons, duplicates, deferred parts and order.
A property test (``tests/unit/test_billing_fast.py``) checks the two give identical invoices
(and ledgers) on random files and catalogs. What makes it faster, and why each step is exact:

- CSV rows are read as lists with the ``csv`` module and fields taken by column index: no dict
  per record. JSON lines are parsed as the reference does; a field that is not plain text (or a
  whole number or decimal for quantity and count) goes to the reference code;
- the common record (valid fields, one calendar month, a price in effect) is handled by one
  small function; anything else (a bad field, a span across a month boundary, no price yet, an
  unknown SKU, a quantity of more than 120 digits) is handed to the reference code, which gives
  the record its parts or its reason, so every rule and message is the reference's own;
- the record-scope rounding (minimum, increment) is a pure function of (SKU, quantity), so its
  result is cached per SKU by the quantity text (point events) or by the exact span length as a
  ``timedelta`` (time spans). A cache hit returns the very Decimals the reference computes;
  the multiplication by ``count`` and the sums stay per record, as in the reference. Nothing is
  aggregated before the record-scope rounding, which applies to each record;
- it streams: the file is read twice and no record is kept. The first pass takes only the
  ids, as 64-bit hashes in one array (8 bytes a record), and sorts it: an id whose hash occurs
  once cannot be a duplicate, so the second pass prices its record at once, straight into the
  per-(period, account, SKU, version) sums. Records whose id hash repeats (true repeats, and
  the rare hash collision) are kept aside and settled once the file is read: same id and
  payload, a duplicate; otherwise every version held, as the reference does record by record.
  Memory is the hash array, the sums, the records kept aside and what the invoice lists
  (unbilled, duplicates, deferred parts), not the file. The lists the reference fills in
  reading order are filled in the same order: each phase's entries sorted by line (a stable
  sort), the reference's phases one after the other;
- the payloads are compared as text (the reference compares a 96-bit hash of the same text);
  the hash is computed only when a ledger stores it;
- with a ledger, each part is looked up by its key and new parts are written in batches, all
  inside the bill's one transaction (no table of every billed part is loaded);
- period names and month boundaries are cached per month.

Money is not touched here: lines are priced and rounded by the reference's ``_lines``.
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_right
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal, Inexact, InvalidOperation, Rounded
from operator import itemgetter
from typing import Any

from ..errors import BadInput
from .catalog import Catalog
from .ledger import Ledger
from .money import in_magnitude
from .rating import per_record
from .usage import FIELDS, CsvUsage, JsonlUsage, csv_header, csv_rows, json_line

_CACHE_MAX = 1 << 16  # entries per cache before it is emptied (bounded memory on odd inputs)
_DUP = "duplicate id with a different payload (every version held)"
_BATCH = 20_000  # ledger parts per INSERT batch


class _Slow(Exception):
    """The record is not the common case: the reference code decides it."""


def _month_info(ym: int) -> tuple[str, datetime]:
    """(period name, first instant of the next month) of month index ``ym = year * 12 + m - 1``."""
    y, m0 = divmod(ym, 12)
    ny, nm0 = divmod(ym + 1, 12)
    return f"{y:04d}-{m0 + 1:02d}", datetime(ny, nm0 + 1, 1, tzinfo=UTC)


def _text(v: Any) -> str | None:
    """A JSON value as the text the reference would parse as a number; None: not plain."""
    if v is None:
        return ""
    t = type(v)
    if t is str:
        return v
    if t is int or t is Decimal:
        return str(v)  # exactly what the reference parses (str of a Decimal round-trips)
    return None


def repeated_id_hashes(src: CsvUsage | JsonlUsage) -> set[int]:
    """Pass 1: the 64-bit hashes of the ids that occur more than once in the file (with the
    rare id whose hash collides with another's: harmless, it is only looked at closer)."""
    import numpy as np

    hashes = array("q")
    add = hashes.append
    with src.open() as f:
        if isinstance(src, CsvUsage):
            r = src.reader(f)
            cols = csv_header(r, src.path) or []
            n = len(cols)
            i = {c: k for k, c in enumerate(cols)}.get("id", 0)  # a repeated name: the last
            for row in r:
                if len(row) == n:
                    add(hash(row[i].strip()))
        else:
            decode = _decoder()
            for text in f:
                try:
                    d = decode(text)
                except ValueError:
                    continue
                if isinstance(d, dict):
                    add(hash(str(d.get("id", "") or "").strip()))
    if len(hashes) < 2:
        return set()
    h = np.frombuffer(hashes, dtype=np.int64)
    h.sort()  # in place, in the array's own buffer
    same = h[1:] == h[:-1]
    return set(np.unique(h[1:][same]).tolist())


def _decoder() -> Any:
    """One JSON decoder for every line (json.loads with parse_float builds one per call);
    nesting past the parser's limit reads as malformed, as in :func:`usage.json_line`."""
    plain = json.JSONDecoder(parse_float=Decimal).decode

    def decode(text: str) -> Any:
        if text.startswith("\ufeff"):  # json.loads refuses a BOM with its own message
            return json_line(text)
        try:
            return plain(text)
        except RecursionError:
            raise json.JSONDecodeError("nested too deep", text[:20], 0) from None

    return decode


def bill_fast(src: CsvUsage | JsonlUsage, cat: Catalog, month: str | None,
              ledger: Ledger | None, strict: bool) -> Any:
    """Bill a usage file; called by :func:`scalemodel.billing.engine.bill` inside its exact
    Decimal context. With a ledger, everything after the first pass (which reads only ids)
    runs inside the ledger's transaction."""
    repeated = repeated_id_hashes(src)
    if ledger is None:
        return _bill_stream(src, cat, month, None, strict, repeated)
    with ledger.transaction():
        return _bill_stream(src, cat, month, ledger, strict, repeated)


def _bill_stream(src: CsvUsage | JsonlUsage, cat: Catalog, month: str | None,
                 ledger: Ledger | None, strict: bool, repeated: set[int]) -> Any:
    from .engine import Invoice, _Bad, _count, _lines, _parts, _payload_hash, _settle

    early: list[dict[str, Any]] = []  # held while reading (the reference's first phase)
    later_held: list[dict[str, Any]] = []  # held while pricing (its second phase)
    aside: list[Any] = []  # records whose id hash repeats, 9 values each: line, id, payload,
    # account, SKU id, then (period, version, raw, rounded) of a one-part record, or
    # (parts, 0, None, None)
    skus = cat.skus
    starts = {sid: [v.start for v in s.versions] for sid, s in skus.items()}
    # per SKU: (Sku, version starts, first start, single version?, quantity cache, span cache)
    info = {sid: (s, starts[sid], starts[sid][0], len(starts[sid]) == 1, {}, {})
            for sid, s in skus.items()}
    counts: dict[str, int] = {}
    months: dict[int, tuple[str, datetime]] = {}
    fromiso = datetime.fromisoformat

    def one(si: tuple, st: str, ev: str, qv: str, cv: str) -> tuple:
        """(period, version, raw, rounded quantity) of a common record, as ``_parts`` gives
        them; raises for anything else."""
        sku, vstarts, s0, single, qcache, scache = si
        t = fromiso(st.strip())
        if t.tzinfo is not UTC:
            t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
        c = 1
        if cv:
            c = counts.get(cv)
            if c is None:
                c = counts[cv] = _count(cv)
                if len(counts) > _CACHE_MAX:
                    counts.clear()
        if ev:
            e = fromiso(ev.strip())
            if e.tzinfo is not UTC:
                e = e.replace(tzinfo=UTC) if e.tzinfo is None else e.astimezone(UTC)
            if e < t:
                raise _Slow
        ym = t.year * 12 + t.month - 1
        mi = months.get(ym)
        if mi is None:
            mi = months[ym] = _month_info(ym)
        if qv:
            x = qcache.get(qv)
            if x is None:
                q = Decimal(qv.strip())
                if not q.is_finite() or q < 0 or not in_magnitude(q):
                    raise _Slow
                if len(qcache) >= _CACHE_MAX:
                    qcache.clear()
                # x 1 as the reference's "x count": past 120 digits it traps here as there
                x = qcache[qv] = (q * 1, per_record(q, sku) * 1)
        elif ev:
            if e > mi[1]:
                raise _Slow  # crosses a month boundary: split by the reference
            td = e - t  # exact: the cache key
            x = scache.get(td)
            if x is None:
                us = (td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds
                q = Decimal(us).scaleb(-6)
                if len(scache) >= _CACHE_MAX:
                    scache.clear()
                x = scache[td] = (q * 1, per_record(q, sku) * 1)
        else:
            raise _Slow
        if single:
            if t < s0:
                raise _Slow
            v = 0
        else:
            v = bisect_right(vstarts, t) - 1
            if v < 0:
                raise _Slow
        if c == 1:
            return mi[0], v, x[0], x[1]
        return mi[0], v, x[0] * c, x[1] * c

    def slow(d: dict[str, Any], rid: str, account: str, sid: str, line: int) -> list | None:
        """The reference's checks and parts; None when the record is held."""
        try:
            if not rid:
                raise _Bad("id is empty")
            if not account:
                raise _Bad("account is empty")
            sku = skus.get(sid)
            if sku is None:
                raise _Bad(f"unknown SKU {sid!r}")
            return _parts(d, sku, starts[sid])
        except (Inexact, Rounded, InvalidOperation):  # past 120 digits
            early.append({"id": rid, "line": line,
                          "reason": "quantity has more than 120 significant digits"})
        except _Bad as err:
            early.append({"id": rid, "line": line, "reason": str(err)})
        return None

    # --- pricing (the reference's second phase), one record at a time ---
    lookup = ledger.part if ledger is not None and ledger.has_parts() else None
    closed = ledger.closed() if ledger else {}
    for per, cur in closed.items():
        if cur and cur != cat.currency:
            raise BadInput(f"--ledger: period {per} was billed in {cur}, the catalog says "
                           f"{cat.currency}; one currency per ledger")
    deferred: list[dict[str, Any]] = []
    later_dups: list[dict[str, Any]] = []
    groups: dict[tuple[str, str, str, int], list] = {}
    new_parts: list[tuple[str, str, str]] = []
    billed = 0
    plain = month is None and lookup is None  # nothing deferred, nothing billed before

    def hold(rid: str, line: int, reason: str) -> None:
        later_held.append({"id": rid, "line": line, "reason": reason})

    def flush() -> None:
        if ledger is not None and new_parts:
            ledger.add_parts(new_parts)
            new_parts.clear()

    def price(line: int, rid: str, text: str, account: str, sid: str, p0: Any, p1: Any,
              p2: Any, p3: Any) -> None:
        nonlocal billed
        h = _payload_hash(text) if ledger is not None else ""
        if plain and p2 is not None:  # one part, billed now: engine._add inline (the hot path)
            key = (p0, account, sid, p1)
            g = groups.get(key)
            if g is None:
                groups[key] = [p3, 1, p2]
            else:
                g[0] += p3
                g[1] += 1
                g[2] += p2
            if ledger is not None:
                new_parts.append((rid, p0, h))
                if len(new_parts) >= _BATCH:
                    flush()
            billed += 1
            return
        parts = p0 if p2 is None else ((p0, p1, p2, p3),)
        if _settle(parts, rid, line, h, account, sid, month, lookup, groups,
                   new_parts if ledger is not None else None, deferred, later_dups, hold):
            billed += 1
        if ledger is not None and len(new_parts) >= _BATCH:
            flush()

    n_records = 0

    def take(line: int, rid: str, text: str, account: str, sid: str, p0: Any, p1: Any,
             p2: Any, p3: Any) -> None:
        nonlocal n_records
        n_records += 1
        if repeated and hash(rid) in repeated:
            aside.extend((line, rid, text, account, sid, p0, p1, p2, p3))
        else:
            price(line, rid, text, account, sid, p0, p1, p2, p3)

    fast_fail = (_Slow, _Bad, ValueError, TypeError, ArithmeticError)
    keep = ledger is not None  # every payload is needed (hashed into the ledger)
    if isinstance(src, CsvUsage):
        with src.open() as f:
            r = src.reader(f)
            cols = csv_header(r, src.path) or []
            n = len(cols)
            col = {c: i for i, c in enumerate(cols)}  # a repeated name: the last wins
            # one C call takes the fields; an absent optional column reads a "" appended at n
            want = [col.get(c, n) for c in FIELDS[:7]]
            pad = n in want
            fields = itemgetter(*want)
            rest = [i for i, c in enumerate(cols) if c != "id"]
            restget = itemgetter(*rest) if rest else None  # >= 3 columns with a header
            strip = str.strip
            for line, row, bad in csv_rows(r, n):
                if bad:
                    early.append({"id": "", "line": line, "reason": bad})
                    if strict:
                        break
                    continue
                if pad:
                    row.append("")
                rid, account, sid, st, ev, qv, cv = fields(row)
                rid = rid.strip()
                # the payload the reference hashes: every field but id, stripped, joined by
                # \x1f; built only where it is compared or stored
                text = "\x1f".join(map(strip, restget(row))) if keep or (
                    repeated and hash(rid) in repeated) else ""
                account = account.strip()
                sid = sid.strip()
                si = info.get(sid)
                if rid and account and si is not None:
                    try:
                        take(line, rid, text, account, sid, *one(si, st, ev, qv, cv))
                        continue
                    except fast_fail:
                        pass
                parts = slow(dict(zip(cols, row[:n], strict=True)), rid, account, sid, line)
                if parts is not None:
                    take(line, rid, text, account, sid, parts, 0, None, None)
                elif strict:
                    break
    else:
        decode = _decoder()
        with src.open() as f:
            for line, text in enumerate(f, start=1):
                if not text.strip():
                    continue
                try:
                    d = decode(text)
                except json.JSONDecodeError as e:
                    early.append({"id": "", "line": line,
                                  "reason": f"malformed JSON on line {line}: {e.msg}"})
                    if strict:
                        break
                    continue
                if not isinstance(d, dict):
                    early.append({"id": "", "line": line,
                                  "reason": f"line {line} is not a JSON object"})
                    if strict:
                        break
                    continue
                g = d.get
                rid = str(g("id", "") or "").strip()
                # the payload the reference hashes: the record but id, as sorted JSON
                text = json.dumps({k: v for k, v in d.items() if k != "id"}, sort_keys=True,
                                  default=str) if keep or (repeated and hash(rid) in repeated) \
                    else ""
                account = str(g("account", "") or "").strip()
                sid = str(g("sku", "") or "").strip()
                si = info.get(sid)
                if rid and account and si is not None:
                    st = g("start", "")
                    ev, qv, cv = _text(g("end")), _text(g("quantity")), _text(g("count"))
                    if type(st) is str and type(ev) is str and qv is not None \
                            and cv is not None:
                        try:
                            take(line, rid, text, account, sid, *one(si, st, ev, qv, cv))
                            continue
                        except fast_fail:
                            pass
                parts = slow(d, rid, account, sid, line)
                if parts is not None:
                    take(line, rid, text, account, sid, parts, 0, None, None)
                elif strict:
                    break
    read = n_records + len(early)

    # The records set aside: same id, same payload: a duplicate (first phase); otherwise every
    # version held. Then each first version is priced, in reading order.
    dups: list[dict[str, Any]] = []
    conflict: set[str] = set()
    repeats: set[int] = set()  # lines of the second and later versions of an id
    ids = aside[1::9]
    multi = {k for k, m in Counter(ids).items() if m > 1}
    if multi:
        first: dict[str, str] = {}
        for k in [k for k, rid in enumerate(ids) if rid in multi]:
            rid = ids[k]
            line = aside[9 * k]
            p = aside[9 * k + 2]
            old = first.get(rid)
            if old is None:
                first[rid] = p
                continue
            repeats.add(line)
            if old == p:
                dups.append({"id": rid, "line": line, "reason": "same id and payload as an "
                             "earlier record"})
            else:
                conflict.add(rid)
                early.append({"id": rid, "line": line, "reason": _DUP})
    early.sort(key=itemgetter("line"))
    if strict and early:
        u = early[0]
        raise BadInput(f"--strict: line {u['line']}" + (f" (id {u['id']})" if u["id"] else "")
                       + f": {u['reason']}")
    for line, rid, text, account, sid, p0, p1, p2, p3 in zip(*[iter(aside)] * 9, strict=True):
        if rid in multi:
            if line in repeats:
                continue  # a duplicate or a conflicting version: counted above
            if rid in conflict:
                hold(rid, line, _DUP)
                continue
        price(line, rid, text, account, sid, p0, p1, p2, p3)
    aside.clear()
    later_held.sort(key=itemgetter("line"))
    if strict and later_held:
        u = later_held[0]
        raise BadInput(f"--strict: line {u['line']}" + (f" (id {u['id']})" if u["id"] else "")
                       + f": {u['reason']}")
    unbilled = early + later_held
    later_dups.sort(key=itemgetter("line"))
    dups += later_dups
    deferred.sort(key=itemgetter("line"))
    flush()
    lines, totals = _lines(groups, cat, month, closed, ledger)
    counts_ = {"read": read, "billed": billed, "duplicates": len(dups), "unbilled": len(unbilled)}
    if counts_["billed"] + counts_["duplicates"] + counts_["unbilled"] != read:  # pragma: no cover
        raise AssertionError(f"records do not reconcile: {counts_}")
    if ledger is not None:
        periods = sorted({k[0] for k in groups} | ({month} if month else set()))
        ledger.commit([], totals, periods, cat.currency)
    return Invoice(cat.currency, cat.exponent, cat.rounding, month or "all", tuple(lines),
                   tuple(unbilled), tuple(dups), tuple(deferred), counts_)
