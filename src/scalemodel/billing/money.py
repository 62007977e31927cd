"""Money without floats: Decimal from strings, exact products as Fractions, one rounding.

An amount is computed exactly (a :class:`fractions.Fraction` of the currency's major unit:
no precision limit, no silent rounding at 28 digits) and rounded once, per invoice line, to an
integer number of minor units with the stated mode.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ..errors import BadInput

MODES = ("half-up", "half-even", "half-down", "up", "down")


def exponent(currency: str, declared: int | None = None) -> int:
    """ISO 4217 minor-unit exponent (USD 2, JPY 0, KWD 3), or the catalog's declared one."""
    from ..specs.sources import load_toml

    table = load_toml("billing.toml")["currencies"]
    if declared is not None:
        if not isinstance(declared, int) or not 0 <= declared <= 6:
            raise BadInput(f"prices: exponent must be a whole number 0-6, got {declared!r}")
        return declared
    if currency not in table or currency == "source":
        known = ", ".join(k for k in table if k != "source")
        raise BadInput(f"prices: currency {currency!r} has no known exponent; use one of {known} "
                       "or declare exponent = N in the catalog")
    return int(table[currency])


def dec(text: object, field: str) -> Decimal:
    """A Decimal from a string or an int; floats are refused (they are already rounded)."""
    if isinstance(text, bool | float):
        raise BadInput(f"{field}: write money and quantities as strings or integers, "
                       f"not floats ({text!r})")
    try:
        d = Decimal(str(text).strip())
    except InvalidOperation:
        raise BadInput(f"{field}: {text!r} is not a decimal number") from None
    if not d.is_finite():
        raise BadInput(f"{field}: {text!r} is not a finite number")
    return d


def round_minor(amount: Fraction, exp: int, mode: str) -> int:
    """Round an exact amount (major units) to integer minor units."""
    x = amount * 10**exp
    if x.denominator == 1:
        return x.numerator
    sign = -1 if x < 0 else 1
    a = abs(x)
    lo = math.floor(a)
    frac = a - lo
    half = Fraction(1, 2)
    if mode == "down":
        n = lo
    elif mode == "up" or frac > half:
        n = lo + 1
    elif frac < half:
        n = lo
    elif mode == "half-up":
        n = lo + 1
    elif mode == "half-down":
        n = lo
    elif mode == "half-even":
        n = lo if lo % 2 == 0 else lo + 1
    else:
        raise BadInput(f"rounding must be one of {', '.join(MODES)}, got {mode!r}")
    return sign * n


def fmt_minor(minor: int, exp: int) -> str:
    """Integer minor units as a decimal string with exactly ``exp`` decimals."""
    return str(Decimal(minor).scaleb(-exp).quantize(Decimal(1).scaleb(-exp)))


def fmt_dec(x: Decimal | Fraction) -> str:
    """A quantity as a plain decimal string (exact; a Fraction must have a finite expansion)."""
    if isinstance(x, Fraction):
        d = Decimal(x.numerator) / Decimal(x.denominator)
        return format(d.normalize(), "f") if d == d.to_integral_value() else format(d, "f")
    return format(x.normalize(), "f") if x == x.to_integral_value() else format(x, "f")
