"""The one place that turns base-unit floats into text for people, and text into numbers.

Values inside scalemodel are plain floats in base units (bytes, seconds, FLOP, bytes/s). Memory
capacities are shown in decimal GB with the binary GiB beside them, so the two are never mixed
silently; bandwidths and rates are decimal (GB/s, TFLOP/s) as vendors print them.
"""

from __future__ import annotations

import math
import re

from .errors import BadInput

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4


def fmt_count(x: float) -> str:
    """A count with thousands separators (integers) or 4 significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "unbounded"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.4g}" if abs(x) >= 1 else f"{x:.4g}"


def fmt_bytes(x: float) -> str:
    """Bytes as decimal and binary units side by side above 1 kB, e.g. '140 GB (130.4 GiB)'."""
    if x is None or math.isnan(x):
        return "n/a"
    a = abs(x)
    if a < 1000:
        return f"{x:,.0f} B" if float(x).is_integer() else f"{x:.3g} B"
    for dec, bin_, name_d, name_b in (
        (1e12, TiB, "TB", "TiB"),
        (1e9, GiB, "GB", "GiB"),
        (1e6, MiB, "MB", "MiB"),
        (1e3, KiB, "kB", "KiB"),
    ):
        if a >= dec:
            return f"{x / dec:,.4g} {name_d} ({x / bin_:,.4g} {name_b})"
    return f"{x} B"  # pragma: no cover


def _scaled(x: float, unit: str, prefixes: tuple[tuple[float, str], ...]) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "unbounded"
    for scale, p in prefixes:
        if abs(x) >= scale:
            return f"{x / scale:,.4g} {p}{unit}"
    return f"{x:.4g} {unit}"


_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_rate(x: float, unit: str = "B/s") -> str:
    """Decimal SI prefixes: 3.35e12 B/s -> '3.35 TB/s'."""
    return _scaled(x, unit, _SI)


def fmt_flops(x: float) -> str:
    return _scaled(x, "FLOP", _SI)


def fmt_time(x: float) -> str:
    """Seconds in the unit that reads best (ns ... days)."""
    if x is None or math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "unbounded"
    a = abs(x)
    if a >= 86400 * 2:
        return f"{x / 86400:.3g} days"
    if a >= 3600 * 2:
        return f"{x / 3600:.3g} h"
    if a >= 120:
        return f"{x / 60:.3g} min"
    if a >= 1:
        return f"{x:.3g} s"
    if a >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{x * 1e6:.3g} µs"
    return f"{x * 1e9:.3g} ns"


def fmt_value(x: float, unit: str) -> str:
    """Format a value by its unit string as used in derivation steps."""
    if unit == "B":
        return fmt_bytes(x)
    if unit in ("B/s", "FLOP/s", "token/s", "req/s"):
        return fmt_rate(x, unit)
    if unit == "FLOP":
        return fmt_flops(x)
    if unit == "s":
        return fmt_time(x)
    if unit == "%":
        return f"{x:.3g} %"
    if unit in ("1", ""):
        return fmt_count(x)
    return f"{fmt_count(x)} {unit}"


# --- parsing ---------------------------------------------------------------------------------

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1e3,
    "kb": 1e3,
    "m": 1e6,
    "mb": 1e6,
    "g": 1e9,
    "gb": 1e9,
    "t": 1e12,
    "tb": 1e12,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
}


def parse_size(text: str, field: str = "size") -> float:
    """'80GiB' -> 85899345920.0; '4k' -> 4000.0; '1e9' -> 1e9 (decimal unless 'i' is given)."""
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise BadInput(
            f"{field}: cannot read {text!r}; use a number with an optional unit "
            "(B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    value = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(value):
        raise BadInput(f"{field}: {text!r} is not a finite size")
    return value


_TOKENS = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmM]?)\s*$")


def parse_tokens(text: str, field: str = "tokens") -> int:
    """A token count: '8192', '8k' (= 8192), '128k' (= 131072), '1M' (= 1048576).

    Context lengths are conventionally binary ('128k context' means 131072 tokens).
    """
    m = _TOKENS.match(str(text))
    if not m:
        raise BadInput(f"{field}: cannot read {text!r}; use a whole number such as 8192 or 8k")
    scale = {"": 1, "k": 1024, "m": 1024**2}[m.group(2).lower()]
    value = float(m.group(1)) * scale
    if not value.is_integer():
        raise BadInput(f"{field}: {text!r} is not a whole number of tokens")
    return int(value)
