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
- records are kept in one flat list (9 values each), so no container per record stays alive
  for the cyclic garbage collector to walk;
- duplicate ids are found in bulk once the file is read (a C-level count of the ids); only ids
  seen more than once have their payload built (CSV: from the row text kept; JSON: by parsing
  the line again) and compared, in reading order, as the reference does record by record. The
  payloads are compared as text (the reference compares a 96-bit hash of the same text); the
  hash is computed only when a ledger stores it;
- period names and month boundaries are cached per month.

Money is not touched here: lines are priced and rounded by the reference's ``_lines``.
"""

from __future__ import annotations

import csv
import json
from bisect import bisect_right
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal, Inexact, InvalidOperation, Rounded
from operator import itemgetter
from typing import Any

from ..errors import BadInput
from .catalog import Catalog
from .ledger import Ledger
from .rating import per_record
from .usage import FIELDS, CsvUsage, JsonlUsage, csv_header

_CACHE_MAX = 1 << 16  # entries per cache before it is emptied (bounded memory on odd inputs)
_DUP = "duplicate id with a different payload (every version held)"


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


def bill_fast(src: CsvUsage | JsonlUsage, cat: Catalog, month: str | None,
              ledger: Ledger | None, strict: bool) -> Any:
    """Bill a usage file; called by :func:`scalemodel.billing.engine.bill` inside its exact
    Decimal context."""
    from .engine import Invoice, _Bad, _count, _lines, _parts, _payload_hash, fmt_dec

    early: list[dict[str, Any]] = []  # records held while reading (line order)
    parsed: list[Any] = []  # 9 values per record: line, id, text, account, SKU id, then
    # (period, version, raw, rounded) of a one-part record, or (parts, 0, None, None)
    add = parsed.extend
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
                if not q.is_finite() or q < 0:
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

    fast_fail = (_Slow, _Bad, ValueError, TypeError, ArithmeticError)
    keep = ledger is not None  # every payload is needed (hashed into the ledger)
    if isinstance(src, CsvUsage):
        exact: dict[int, str] = {}  # line -> payload, for rows whose text cannot be split back
        with open(src.path, newline="", encoding="utf-8") as f:
            r = csv.reader(f)
            cols = csv_header(r, src.path) or []
            n = len(cols)
            n1 = n - 1
            col = {c: i for i, c in enumerate(cols)}  # a repeated name: the last wins
            # one C call takes the fields; an absent optional column reads a "" appended at n
            want = [col.get(c, n) for c in FIELDS[:7]]
            pad = n in want
            fields = itemgetter(*want)
            rest = [i for i, c in enumerate(cols) if c != "id"]
            restget = itemgetter(*rest) if rest else None  # >= 3 columns with a header
            strip = str.strip
            prev = r.line_num
            for row in r:
                line = prev + 1
                prev = r.line_num
                if len(row) != n:
                    if not row:
                        continue
                    early.append({"id": "", "line": line, "reason": f"malformed CSV line "
                                  f"{line}: {len(row)} fields, header has {n}"})
                    if strict:
                        break
                    continue
                if keep:  # a ledger stores every payload's hash: build it now
                    text = "\x1f".join(map(strip, restget(row)))
                else:  # the payload is taken from the row text for repeated ids only
                    text = "\x1f".join(row)
                    if text.count("\x1f") != n1:  # a field holds the separator itself
                        exact[line] = "\x1f".join([row[i].strip() for i in rest])
                if pad:
                    row.append("")
                rid, account, sid, st, ev, qv, cv = fields(row)
                rid = rid.strip()
                account = account.strip()
                sid = sid.strip()
                si = info.get(sid)
                if rid and account and si is not None:
                    try:
                        add((line, rid, text, account, sid, *one(si, st, ev, qv, cv)))
                        continue
                    except fast_fail:
                        pass
                parts = slow(dict(zip(cols, row[:n], strict=True)), rid, account, sid, line)
                if parts is not None:
                    add((line, rid, text, account, sid, parts, 0, None, None))
                elif strict:
                    break

        def payload(line: int, text: str) -> str:
            """What the reference hashes: the fields but id, stripped, joined by \\x1f."""
            if keep:
                return text
            p = exact.get(line)
            if p is None:
                f = text.split("\x1f")
                p = "\x1f".join([f[i].strip() for i in rest])
            return p
    else:
        # one decoder for every line: json.loads(text, parse_float=...) builds a new one per call
        decode = json.JSONDecoder(parse_float=Decimal).decode

        def loads(text: str) -> Any:
            if text.startswith("\ufeff"):  # json.loads refuses a BOM with its own message
                return json.loads(text, parse_float=Decimal)
            return decode(text)

        with open(src.path, encoding="utf-8") as f:
            for line, text in enumerate(f, start=1):
                if not text.strip():
                    continue
                try:
                    d = loads(text)
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
                if keep:
                    text = json.dumps({k: v for k, v in d.items() if k != "id"}, sort_keys=True,
                                      default=str)
                g = d.get
                rid = str(g("id", "") or "").strip()
                account = str(g("account", "") or "").strip()
                sid = str(g("sku", "") or "").strip()
                si = info.get(sid)
                if rid and account and si is not None:
                    st = g("start", "")
                    ev, qv, cv = _text(g("end")), _text(g("quantity")), _text(g("count"))
                    if type(st) is str and type(ev) is str and qv is not None \
                            and cv is not None:
                        try:
                            add((line, rid, text, account, sid, *one(si, st, ev, qv, cv)))
                            continue
                        except fast_fail:
                            pass
                parts = slow(d, rid, account, sid, line)
                if parts is not None:
                    add((line, rid, text, account, sid, parts, 0, None, None))
                elif strict:
                    break

        def payload(line: int, text: str) -> str:
            """What the reference hashes: the record but id, as sorted JSON."""
            if keep:
                return text
            d = loads(text)
            return json.dumps({k: v for k, v in d.items() if k != "id"}, sort_keys=True,
                              default=str)
    read = len(parsed) // 9 + len(early)

    # Duplicates, found in bulk (a C-level count of the ids) rather than one dict probe per
    # record: only ids seen more than once are looked at, in reading order, as the reference
    # does record by record. Same id, same payload: a duplicate; otherwise every version held.
    dups: list[dict[str, Any]] = []
    conflict: set[str] = set()
    repeats: set[int] = set()  # lines of the second and later versions of an id
    ids = parsed[1::9]
    multi = {k for k, m in Counter(ids).items() if m > 1}
    if multi:
        first: dict[str, str] = {}
        for k in [k for k, rid in enumerate(ids) if rid in multi]:
            rid = ids[k]
            line = parsed[9 * k]
            p = payload(line, parsed[9 * k + 2])
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
    unbilled = early

    def hold(rid: str, line: int, reason: str) -> None:
        if strict:
            raise BadInput(f"--strict: line {line}" + (f" (id {rid})" if rid else "")
                           + f": {reason}")
        unbilled.append({"id": rid, "line": line, "reason": reason})

    known = ledger.parts() if ledger else {}
    closed = ledger.closed() if ledger else {}
    for per, cur in closed.items():
        if cur and cur != cat.currency:
            raise BadInput(f"--ledger: period {per} was billed in {cur}, the catalog says "
                           f"{cat.currency}; one currency per ledger")
    deferred: list[dict[str, Any]] = []
    groups: dict[tuple[str, str, str, int], list] = {}
    new_parts: list[tuple[str, str, str]] = []
    billed = 0
    plain = month is None and not known  # nothing deferred, nothing billed before
    for line, rid, text, account, sid, p0, p1, p2, p3 in zip(*[iter(parsed)] * 9, strict=True):
        if multi and rid in multi:
            if line in repeats:
                continue  # a duplicate or a conflicting version: counted above
            if rid in conflict:
                hold(rid, line, _DUP)
                continue
        h = _payload_hash(payload(line, text)) if ledger is not None else ""
        if plain and p2 is not None:  # one part, billed now
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
            billed += 1
            continue
        parts = p0 if p2 is None else ((p0, p1, p2, p3),)
        new = already = clash = later = 0
        for per, v, raw, q in parts:
            if month is not None and per > month:
                later += 1
                deferred.append({"id": rid, "line": line, "period": per,
                                 "quantity": fmt_dec(raw)})
                continue
            if known:
                k = known.get((rid, per))
                if k is not None:
                    if k == h:
                        already += 1
                    else:
                        clash += 1
                    continue
            key = (per, account, sid, v)
            g = groups.get(key)
            if g is None:
                groups[key] = [q, 1, raw]
            else:
                g[0] += q
                g[1] += 1
                g[2] += raw
            if ledger is not None:
                new_parts.append((rid, per, h))
            new += 1
        if new:
            billed += 1
        elif clash:
            hold(rid, line, "id already billed with a different payload (ledger)")
        elif already:
            dups.append({"id": rid, "line": line, "reason": "already billed (ledger)"})
        else:
            del deferred[len(deferred) - later:]  # this record's parts, just appended
            hold(rid, line, f"belongs to a later period ({parts[0][0]}); bill it with "
                            f"--period {parts[0][0]}")
    del parsed
    lines, totals = _lines(groups, cat, month, closed, ledger)
    counts_ = {"read": read, "billed": billed, "duplicates": len(dups), "unbilled": len(unbilled)}
    if counts_["billed"] + counts_["duplicates"] + counts_["unbilled"] != read:  # pragma: no cover
        raise AssertionError(f"records do not reconcile: {counts_}")
    if ledger is not None:
        periods = sorted({k[0] for k in groups} | ({month} if month else set()))
        ledger.commit(new_parts, totals, periods, cat.currency)
    return Invoice(cat.currency, cat.exponent, cat.rounding, month or "all", tuple(lines),
                   tuple(unbilled), tuple(dups), tuple(deferred), counts_)
