"""Pure rating arithmetic: increments, minimums, allowances and tiers on exact decimals.

Quantities are :class:`~decimal.Decimal`; ``//`` and ``%`` on Decimals are exact, so an
increment is applied with integer arithmetic on the number of whole increments, never with a
float division. Amounts come back as exact Fractions; rounding to money happens once per line
(:func:`scalemodel.billing.money.round_minor`).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from .catalog import PriceVersion, Sku

ZERO = Decimal(0)


def increments(q: Decimal, inc: Decimal, rounding: str) -> Decimal:
    """``q`` as a whole number of increments, rounded up or down (``q >= 0``)."""
    whole, rest = divmod(q, inc)
    if rest and rounding == "up":
        whole += 1
    return whole * inc


def per_record(q: Decimal, sku: Sku) -> Decimal:
    """Record-scope minimum and increment (cloud style: each run or session on its own).

    A zero quantity stays zero: a minimum charges a session that happened, not one that did not.
    """
    if q <= 0:
        return ZERO
    if sku.minimum_scope == "record" and q < sku.minimum:
        q = sku.minimum
    if sku.increment_scope == "record":
        q = increments(q, sku.increment, sku.increment_rounding)
    return q


def per_period(q: Decimal, sku: Sku) -> Decimal:
    """Period-scope minimum and increment, applied to a period total after the allowance."""
    if q <= 0:
        return ZERO
    if sku.minimum_scope == "period" and q < sku.minimum:
        q = sku.minimum
    if sku.increment_scope == "period":
        q = increments(q, sku.increment, sku.increment_rounding)
    return q


def rate(q: Decimal, version: PriceVersion, sku: Sku) -> tuple[Fraction, Decimal, list[tuple]]:
    """Exact amount of ``q`` units: (amount, marginal unit price, per-tier breakdown)."""
    per = Fraction(sku.price_per)
    if version.unit_price is not None:
        return Fraction(q) * Fraction(version.unit_price) / per, version.unit_price, []
    tiers = version.tiers
    if sku.tiers_mode == "volume":
        for t in tiers:
            if t.up_to is None or q <= t.up_to:
                return Fraction(q) * Fraction(t.unit_price) / per, t.unit_price, \
                    [(str(t.up_to or "inf"), q, t.unit_price)]
    total = Fraction(0)
    lower = ZERO
    marginal = tiers[0].unit_price
    parts = []
    for t in tiers:
        if q <= lower:
            break
        upper = q if t.up_to is None else min(q, t.up_to)
        n = upper - lower
        if n > 0:
            total += Fraction(n) * Fraction(t.unit_price) / per
            parts.append((str(t.up_to or "inf"), n, t.unit_price))
            marginal = t.unit_price
        if t.up_to is None:
            break
        lower = t.up_to
    return total, marginal, parts
