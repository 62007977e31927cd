"""The billing engine: records -> validated, deduplicated parts -> lines -> an invoice.

Order of operations (each step exact; money rounded once per line):

1. parse and validate each record; an unusable one goes to ``unbilled`` with its line and reason
   (unknown SKU, negative or malformed quantity, bad time, no price in effect);
2. deduplicate by id: the same id with the same payload counts once (``duplicates``); the same
   id with a different payload holds every version of that id in ``unbilled``;
3. split time spans at calendar-month boundaries (UTC); each part is billed in its own period,
   with its price version looked up at the part's start, and record-scope minimums and
   increments applied to the part;
4. aggregate per (period, account, SKU, price version); take the free allowance (earliest
   version first), period minimum and period increment; price (flat, graduated or volume);
   round the exact amount to minor units with the catalog's mode: one rounding per line;
5. with a ledger: parts already billed are skipped (counted as duplicates), usage of a period
   already billed lands as an adjustment (amount of old + new minus what was billed).

Every record read ends up billed, duplicate or unbilled: ``read = billed + duplicates +
unbilled`` is checked before the invoice is returned.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Context, Decimal, Inexact, InvalidOperation, Rounded, localcontext
from fractions import Fraction
from typing import Any

from ..errors import BadInput
from .catalog import Catalog, Sku
from .ledger import Ledger, totals_for
from .money import fmt_dec, fmt_minor, in_magnitude, magnitude_reason, round_minor
from .rating import ZERO, per_period, per_record, rate
from .usage import CsvUsage, JsonlUsage, Raw

_MICRO = Decimal("0.000001")


class _Bad(Exception):
    pass


@dataclass(frozen=True)
class Line:
    period: str
    account: str
    sku: str
    price_from: str
    adjustment: bool
    records: int
    quantity: Decimal  # new usage as recorded
    billed_quantity: Decimal  # after allowance, period minimum and increment
    unit_price: Decimal  # the price (or the last tier reached)
    price_per: Decimal
    amount_minor: int
    unrounded: Fraction
    exponent: int
    tiers: tuple[tuple[str, Decimal, Decimal], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = {"period": self.period, "account": self.account, "sku": self.sku,
             "price_from": self.price_from, "adjustment": self.adjustment,
             "records": self.records, "quantity": fmt_dec(self.quantity),
             "billed_quantity": fmt_dec(self.billed_quantity),
             "unit_price": fmt_dec(self.unit_price), "price_per": fmt_dec(self.price_per),
             "amount": fmt_minor(self.amount_minor, self.exponent),
             "amount_minor_units": self.amount_minor,
             "unrounded_amount": _frac_str(self.unrounded)}
        if self.tiers:
            d["tiers"] = [{"up_to": u, "quantity": fmt_dec(q), "unit_price": fmt_dec(p)}
                          for u, q, p in self.tiers]
        return d


def _frac_str(x: Fraction, digits: int = 12) -> str:
    """An exact amount for audit: exact when it terminates, else 12 decimals and '...'."""
    # enough digits for the whole part and the decimals (the default 28 overflow past 1e16)
    with localcontext(Context(prec=len(str(abs(x.numerator))) + digits + 2)):
        d = Decimal(x.numerator) / Decimal(x.denominator)
        q = d.quantize(Decimal(1).scaleb(-digits))
    return fmt_dec(q) if Fraction(q) == x else fmt_dec(q) + "..."


@dataclass(frozen=True)
class Invoice:
    currency: str
    exponent: int
    rounding: str
    period: str
    lines: tuple[Line, ...]
    unbilled: tuple[dict[str, Any], ...]
    duplicates: tuple[dict[str, Any], ...]
    deferred: tuple[dict[str, Any], ...]
    counts: dict[str, int]
    ledger: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def total_minor(self) -> int:
        return sum(ln.amount_minor for ln in self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {"currency": self.currency, "rounding": self.rounding, "period": self.period,
                "lines": [ln.to_dict() for ln in self.lines],
                "total": fmt_minor(self.total_minor, self.exponent),
                "total_minor_units": self.total_minor,
                "unbilled": list(self.unbilled), "duplicates": list(self.duplicates),
                "deferred": list(self.deferred), "counts": dict(self.counts),
                "ledger": self.ledger or None}


def _period_of(t: datetime) -> str:
    return f"{t.year:04d}-{t.month:02d}"


def _next_month(t: datetime) -> datetime:
    return datetime(t.year + (t.month == 12), t.month % 12 + 1, 1, tzinfo=UTC)


def _time(v: Any, field_: str) -> datetime:
    try:
        t = datetime.fromisoformat(str(v).strip())
    except ValueError:
        raise _Bad(f"{field_} {str(v)[:40]!r} is not an ISO 8601 time") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _decimal(v: Any, field_: str) -> Decimal:
    if isinstance(v, float | bool):
        raise _Bad(f"{field_} {v!r} is not a decimal string")
    try:
        d = v if isinstance(v, Decimal) else Decimal(str(v).strip())
    except InvalidOperation:
        raise _Bad(f"{field_} {str(v)[:40]!r} is not a decimal number") from None
    if not d.is_finite():
        raise _Bad(f"{field_} {v!r} is not finite")
    if not in_magnitude(d):
        raise _Bad(magnitude_reason(field_, v))
    return d


def _payload_hash(payload: str) -> str:
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


def _count(cv: Any) -> int:
    c = _decimal(cv, "count")
    if c != c.to_integral_value() or c < 1:
        raise _Bad(f"count must be a whole number of at least 1, got {cv!r}")
    return int(c)


def _parts(d: dict[str, Any], sku: Sku,
           starts: list[datetime]) -> list[tuple[str, int, Decimal, Decimal]]:
    """(period, price version, raw quantity, record-rounded quantity) per part of a record."""
    start = _time(d.get("start", ""), "start")
    end_v = d.get("end")
    end = _time(end_v, "end") if end_v not in (None, "") else None
    qv = d.get("quantity")
    cv = d.get("count")
    count = _count(cv) if cv not in (None, "") else 1
    if end is not None and end < start:
        raise _Bad("end is before start")
    spans: list[tuple[datetime, Decimal]] = []
    if qv not in (None, ""):
        q = _decimal(qv, "quantity")
        if q < 0:
            raise _Bad(f"negative quantity {qv!r} (corrections are separate credit lines)")
        spans.append((start, q))
    elif end is not None:
        cur = start
        while True:
            nxt = _next_month(cur)
            stop = end if end <= nxt else nxt
            td = stop - cur
            us = (td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds
            spans.append((cur, Decimal(us).scaleb(-6)))
            if stop == end:
                break
            cur = stop
    else:
        raise _Bad("needs a quantity, or an end time for a time span")
    out = []
    for t, q in spans:
        v = bisect_right(starts, t) - 1
        if v < 0:
            raise _Bad(f"no price of {sku.id!r} in effect at {t.isoformat()}")
        # record-scope minimum and increment apply to each instance, then x count
        out.append((_period_of(t), v, q * count, per_record(q, sku) * count))
    return out


def _month(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        t = datetime.strptime(text, "%Y-%m")
    except ValueError:
        raise BadInput(f"--period must be YYYY-MM (e.g. 2026-11), got {text!r}") from None
    return _period_of(t)


def bill(raws: Iterable[Raw], cat: Catalog, *, period: str | None = None,
         ledger: Ledger | None = None, strict: bool = False, fast: bool = True) -> Invoice:
    """Bill the records. Decimal arithmetic runs with 120 digits and traps any inexact
    result, so a sum or a product is never rounded silently (Python's default is 28 digits).

    A file from :func:`~scalemodel.billing.usage.read_usage` goes through the fast path
    (:mod:`scalemodel.billing.fast`), which gives the same invoice as the reference path
    below; ``fast=False`` forces the reference path (tests compare the two)."""
    with localcontext() as ctx:
        ctx.prec = 120
        ctx.traps[Inexact] = True
        ctx.traps[Rounded] = True
        if fast and isinstance(raws, CsvUsage | JsonlUsage):
            from .fast import bill_fast

            return bill_fast(raws, cat, _month(period), ledger, strict)
        if ledger is None:
            return _bill(raws, cat, period, ledger, strict)
        with ledger.transaction():  # reads and writes of the ledger: one serializable unit
            return _bill(raws, cat, period, ledger, strict)


def _bill(raws: Iterable[Raw], cat: Catalog, period: str | None, ledger: Ledger | None,
          strict: bool) -> Invoice:
    month = _month(period)
    unbilled: list[dict[str, Any]] = []
    dups: list[dict[str, Any]] = []
    deferred: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    conflict: set[str] = set()
    parsed: list[tuple[int, str, str, str, Sku, list]] = []
    read = 0

    def hold(rid: str, line: int, reason: str) -> None:
        if strict:
            raise BadInput(f"--strict: line {line}" + (f" (id {rid})" if rid else "")
                           + f": {reason}")
        unbilled.append({"id": rid, "line": line, "reason": reason})

    skus = cat.skus
    starts = {sid: [v.start for v in s.versions] for sid, s in skus.items()}
    for line, d, err, payload in raws:
        read += 1
        if d is None:
            hold("", line, err)
            continue
        rid = str(d.get("id", "") or "").strip()
        try:
            if not rid:
                raise _Bad("id is empty")
            account = str(d.get("account", "") or "").strip()
            if not account:
                raise _Bad("account is empty")
            sid = str(d.get("sku", "") or "").strip()
            sku = skus.get(sid)
            if sku is None:
                raise _Bad(f"unknown SKU {sid!r}")
            parts = _parts(d, sku, starts[sid])
        except (Inexact, Rounded, InvalidOperation):  # past 120 digits
            hold(rid, line, "quantity has more than 120 significant digits")
            continue
        except _Bad as e:
            hold(rid, line, str(e))
            continue
        h = _payload_hash(payload)
        prev = seen.get(rid)
        if prev is None:
            seen[rid] = h
            parsed.append((line, rid, h, account, sku, parts))
        elif prev == h:
            dups.append({"id": rid, "line": line, "reason": "same id and payload as an earlier "
                         "record"})
        else:
            conflict.add(rid)
            hold(rid, line, "duplicate id with a different payload (every version held)")

    known = ledger.parts() if ledger else {}
    lookup = (lambda r, p: known.get((r, p))) if known else None
    closed = ledger.closed() if ledger else {}
    for per, cur in closed.items():
        if cur and cur != cat.currency:
            raise BadInput(f"--ledger: period {per} was billed in {cur}, the catalog says "
                           f"{cat.currency}; one currency per ledger")
    groups: dict[tuple[str, str, str, int], list] = {}
    new_parts: list[tuple[str, str, str]] = []
    billed = 0
    for line, rid, h, account, sku, parts in parsed:
        if rid in conflict:
            hold(rid, line, "duplicate id with a different payload (every version held)")
            continue
        if _settle(parts, rid, line, h, account, sku.id, month, lookup, groups,
                   new_parts if ledger is not None else None, deferred, dups, hold):
            billed += 1
    lines, totals = _lines(groups, cat, month, closed, ledger)
    counts = {"read": read, "billed": billed, "duplicates": len(dups), "unbilled": len(unbilled)}
    if counts["billed"] + counts["duplicates"] + counts["unbilled"] != read:  # pragma: no cover
        raise AssertionError(f"records do not reconcile: {counts}")
    if ledger is not None:
        periods = sorted({k[0] for k in groups} | ({month} if month else set()))
        ledger.commit(new_parts, totals, periods, cat.currency)
    return Invoice(cat.currency, cat.exponent, cat.rounding, month or "all", tuple(lines),
                   tuple(unbilled), tuple(dups), tuple(deferred), counts)


def _add(groups: dict[tuple[str, str, str, int], list], key: tuple[str, str, str, int],
         q: Decimal, raw: Decimal) -> None:
    """Add one part to its (period, account, SKU, version) sums: [rounded, records, raw]."""
    g = groups.get(key)
    if g is None:
        groups[key] = [q, 1, raw]
    else:
        g[0] += q
        g[1] += 1
        g[2] += raw


def _settle(parts: list, rid: str, line: int, h: str, account: str, sid: str,
            month: str | None, lookup: Callable[[str, str], str | None] | None,
            groups: dict[tuple[str, str, str, int], list],
            new_parts: list[tuple[str, str, str]] | None, deferred: list[dict[str, Any]],
            dups: list[dict[str, Any]], hold: Callable[[str, int, str], None]) -> bool:
    """Settle one record's (period, version, raw, rounded) parts: bill the ones of ``month``
    or before that no ledger part already holds, defer the later ones, and say why a record
    with nothing billed now is a duplicate or held. True when some part is billed now.

    ``lookup(id, period)`` gives the payload hash a ledger billed that part with (None where
    no ledger has parts); ``new_parts`` collects what the ledger stores (None without one).
    The reference path and the fast path both settle records here."""
    new = already = clash = later = 0
    for per, v, raw, q in parts:
        if month is not None and per > month:
            later += 1
            deferred.append({"id": rid, "line": line, "period": per, "quantity": fmt_dec(raw)})
            continue
        if lookup is not None:
            k = lookup(rid, per)
            if k is not None:
                if k == h:
                    already += 1
                else:
                    clash += 1
                continue
        _add(groups, (per, account, sid, v), q, raw)
        if new_parts is not None:
            new_parts.append((rid, per, h))
        new += 1
    if new:
        return True
    if clash:
        hold(rid, line, "id already billed with a different payload (ledger)")
    elif already:
        dups.append({"id": rid, "line": line, "reason": "already billed (ledger)"})
    else:
        del deferred[len(deferred) - later:]  # this record's parts, just appended
        hold(rid, line, f"belongs to a later period ({parts[0][0]}); bill it with "
                        f"--period {parts[0][0]}")
    return False


def _allocate(cum: list[Decimal], free: Decimal, sku: Sku) -> list[Decimal]:
    """Billable quantity per price version: allowance taken earliest version first."""
    out = []
    left = free
    for q in cum:
        take = min(left, q)
        left -= take
        out.append(per_period(q - take, sku))
    return out


def _lines(groups: dict[tuple[str, str, str, int], list], cat: Catalog, month: str | None,
           closed: dict[str, str], ledger: Ledger | None) -> tuple[list[Line], list[tuple]]:
    by_sku: dict[tuple[str, str, str], dict[int, list]] = {}
    for (per, acct, sid, v), g in groups.items():
        by_sku.setdefault((per, acct, sid), {})[v] = g
    lines: list[Line] = []
    totals: list[tuple] = []
    for (per, acct, sid), vs in sorted(by_sku.items()):
        sku = cat.skus[sid]
        adjustment = per in closed or (month is not None and per < month)
        prev = totals_for(ledger, per, acct, sid) if per in closed else {}
        versions = sorted(set(vs) | set(prev))
        old_q = [prev.get(v, (ZERO, 0))[0] for v in versions]
        new_q = [old_q[k] + (vs[v][0] if v in vs else ZERO) for k, v in enumerate(versions)]
        old_b = _allocate(old_q, sku.free, sku)
        new_b = _allocate(new_q, sku.free, sku)
        for k, v in enumerate(versions):
            if v not in vs:
                continue
            ver = sku.versions[v]
            amount, marginal, tiers = rate(new_b[k], ver, sku)
            minor = round_minor(amount, cat.exponent, cat.rounding)
            prev_minor = prev.get(v, (ZERO, 0))[1]
            old_amount = rate(old_b[k], ver, sku)[0] if prev else Fraction(0)
            lines.append(Line(
                period=per, account=acct, sku=sid,
                price_from=ver.start.isoformat().replace("+00:00", "Z"),
                adjustment=adjustment, records=vs[v][1], quantity=vs[v][2],
                billed_quantity=new_b[k] - old_b[k], unit_price=marginal,
                price_per=sku.price_per, amount_minor=minor - prev_minor,
                unrounded=amount - old_amount, exponent=cat.exponent,
                tiers=tuple(tiers)))
            totals.append((per, acct, sid, v, str(new_q[k]), minor))
    return lines, totals
