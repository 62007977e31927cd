"""Money without floats: Decimal from strings, exact products as Fractions, one rounding.

An amount is computed exactly (a :class:`fractions.Fraction` of the currency's major unit:
no precision limit, no silent rounding at 28 digits) and rounded once, per invoice line, to an
integer number of minor units with the stated mode.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import cache

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


@cache
def magnitude_digits() -> int:
    """Quantities, counts and prices lie below 10^N and are no finer than 10^-N
    (specs/data/bounds.toml billing.magnitude_digits)."""
    from ..specs.bounds import bound

    return int(bound("billing", "magnitude_digits"))


def in_magnitude(d: Decimal) -> bool:
    """Whether a finite Decimal is within :func:`magnitude_digits` (checked before any
    arithmetic: 1E+999999 is one digit, but its Fraction is a million-digit integer)."""
    n = magnitude_digits()
    e = d.as_tuple().exponent
    return not d or (isinstance(e, int) and e >= -n and d.adjusted() < n)


def magnitude_reason(field: str, text: object) -> str:
    n = magnitude_digits()
    return (f"{field} {str(text)[:40]!r} is past 10^{n} or finer than 10^-{n} (bound "
            "billing.magnitude_digits)")


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
    if not in_magnitude(d):
        raise BadInput(magnitude_reason(field, text))
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
    """Integer minor units as a decimal string with exactly ``exp`` decimals (integer digits
    moved, no Decimal context: exact at any size)."""
    sign = "-" if minor < 0 else ""
    ds = str(abs(minor))
    if exp <= 0:
        return sign + ds
    ds = ds.rjust(exp + 1, "0")
    return f"{sign}{ds[:-exp]}.{ds[-exp:]}"


def fmt_dec(x: Decimal | Fraction) -> str:
    """A quantity as a plain decimal string, exact at any size (no Decimal context, so nothing
    is rounded at 28 digits): a whole number without decimals (``100.00`` -> ``100``, ``1E+3``
    -> ``1000``), any other number with the decimals it was written with. A Fraction must
    have a finite decimal expansion."""
    if isinstance(x, Fraction):
        x = exact_decimal(x)
    if not x.is_finite():
        return str(x)
    sign, digits, e = x.as_tuple()
    ds = "".join(map(str, digits))
    assert isinstance(e, int)
    if e >= 0:
        whole, frac = ds + "0" * e, ""
    else:
        ds = ds.rjust(-e + 1, "0")
        whole, frac = ds[:e], ds[e:]
        if not frac.strip("0"):
            frac = ""
    whole = whole.lstrip("0") or "0"
    return ("-" if sign else "") + whole + ("." + frac if frac else "")


def exact_decimal(x: Fraction) -> Decimal:
    """The Decimal equal to ``x`` (built from its digits, no context); ValueError when the
    expansion does not terminate."""
    den = x.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        raise ValueError(f"{x} has no finite decimal expansion")
    k = max(twos, fives)
    n = x.numerator * 10**k // x.denominator
    return Decimal((1 if n < 0 else 0, tuple(int(c) for c in str(abs(n))), -k))
