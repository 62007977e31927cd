"""The price catalog (TOML): SKUs with units, increments, minimums, allowances, tiers and
effective-dated price versions.

    currency = "USD"            # ISO 4217; exponent from specs/data/billing.toml or `exponent`
    rounding = "half-up"        # half-up | half-even | half-down | up | down (per line)

    [sku.gpu-hour]
    unit = "second"             # what one unit of quantity is; start/end records give seconds
    price_per = 3600            # unit_price is for this many units (default 1)
    increment = 60              # bill whole multiples of this many units (default 1)
    increment_rounding = "up"   # up | down
    increment_scope = "record"  # record (each record, cloud style) | period (the period total)
    minimum = 60                # least quantity billed (default 0)
    minimum_scope = "record"    # record | period
    free = 0                    # free units per account and period, taken before increments
    tiers_mode = "graduated"    # graduated | volume (only with tiers)

    [[sku.gpu-hour.prices]]
    from = "2026-01-01T00:00:00Z"   # effective from (inclusive); versions sorted by it
    unit_price = "2.50"             # a string: a float would already be rounded
    # or tiers = [{ up_to = "1000", unit_price = "3.00" }, { up_to = "inf", unit_price = "2.50" }]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..errors import BadInput
from .money import MODES, dec, exponent


@dataclass(frozen=True)
class Tier:
    up_to: Decimal | None  # inclusive upper bound in units; None = no bound
    unit_price: Decimal


@dataclass(frozen=True)
class PriceVersion:
    start: datetime
    unit_price: Decimal | None
    tiers: tuple[Tier, ...] = ()


@dataclass(frozen=True)
class Sku:
    id: str
    unit: str
    price_per: Decimal
    increment: Decimal
    increment_rounding: str
    increment_scope: str
    minimum: Decimal
    minimum_scope: str
    free: Decimal
    tiers_mode: str
    versions: tuple[PriceVersion, ...]

    def version_at(self, t: datetime) -> int:
        """Index of the price version in effect at ``t`` (-1 if none yet)."""
        k = -1
        for i, v in enumerate(self.versions):
            if v.start <= t:
                k = i
            else:
                break
        return k


@dataclass(frozen=True)
class Catalog:
    currency: str
    exponent: int
    rounding: str
    skus: dict[str, Sku]
    source: str = ""


def parse_time(text: str, field: str) -> datetime:
    """ISO 8601; a time without an offset is taken as UTC."""
    try:
        t = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise BadInput(f"{field}: {text!r} is not an ISO 8601 time") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _choice(d: dict[str, Any], key: str, allowed: tuple[str, ...], default: str, where: str) -> str:
    v = d.get(key, default)
    if v not in allowed:
        raise BadInput(f"prices: {where}.{key} must be one of {', '.join(allowed)}, got {v!r}")
    return v


def _nonneg(d: dict[str, Any], key: str, default: str, where: str, positive: bool = False) -> Decimal:
    v = dec(d.get(key, default), f"prices: {where}.{key}")
    if v < 0 or (positive and v == 0):
        raise BadInput(f"prices: {where}.{key} must be {'positive' if positive else '0 or more'}, "
                       f"got {v}")
    return v


def parse_catalog(data: dict[str, Any], source: str = "") -> Catalog:
    cur = data.get("currency")
    if not isinstance(cur, str) or not cur:
        raise BadInput("prices: 'currency' (an ISO 4217 code such as USD) is required")
    exp = exponent(cur, data.get("exponent"))
    rounding = _choice(data, "rounding", MODES, "half-up", "catalog")
    skus: dict[str, Sku] = {}
    table = data.get("sku")
    if not isinstance(table, dict) or not table:
        raise BadInput("prices: no [sku.<id>] table found")
    for sid, s in table.items():
        w = f"sku.{sid}"
        if not isinstance(s, dict):
            raise BadInput(f"prices: {w} must be a table")
        versions = []
        for k, p in enumerate(s.get("prices", [])):
            pw = f"{w}.prices[{k}]"
            if "from" not in p:
                raise BadInput(f"prices: {pw}.from (effective date) is required")
            start = parse_time(p["from"], f"prices: {pw}.from")
            tiers: list[Tier] = []
            for n, tr in enumerate(p.get("tiers", [])):
                up = str(tr.get("up_to", "inf"))
                bound = None if up.lower() == "inf" else dec(up, f"prices: {pw}.tiers[{n}].up_to")
                price = dec(tr.get("unit_price"), f"prices: {pw}.tiers[{n}].unit_price")
                if price < 0:
                    raise BadInput(f"prices: {pw}.tiers[{n}].unit_price must not be negative")
                tiers.append(Tier(bound, price))
            if tiers:
                bounds = [t.up_to for t in tiers]
                if bounds[-1] is not None or any(b is None for b in bounds[:-1]):
                    raise BadInput(f"prices: {pw}.tiers: only the last tier may be open "
                                   "(up_to = \"inf\") and it must be")
                if any(a >= b for a, b in zip(bounds[:-2], bounds[1:-1], strict=True)):
                    raise BadInput(f"prices: {pw}.tiers: up_to must increase")
                versions.append(PriceVersion(start, None, tuple(tiers)))
            else:
                if "unit_price" not in p:
                    raise BadInput(f"prices: {pw} needs unit_price or tiers")
                up = dec(p["unit_price"], f"prices: {pw}.unit_price")
                if up < 0:
                    raise BadInput(f"prices: {pw}.unit_price must not be negative")
                versions.append(PriceVersion(start, up))
        if not versions:
            raise BadInput(f"prices: {w} has no [[{w}.prices]] entry")
        versions.sort(key=lambda v: v.start)
        if len({v.start for v in versions}) != len(versions):
            raise BadInput(f"prices: {w} has two price versions with the same 'from'")
        skus[sid] = Sku(
            id=sid, unit=str(s.get("unit", "unit")),
            price_per=_nonneg(s, "price_per", "1", w, positive=True),
            increment=_nonneg(s, "increment", "1", w, positive=True),
            increment_rounding=_choice(s, "increment_rounding", ("up", "down"), "up", w),
            increment_scope=_choice(s, "increment_scope", ("record", "period"), "record", w),
            minimum=_nonneg(s, "minimum", "0", w),
            minimum_scope=_choice(s, "minimum_scope", ("record", "period"), "record", w),
            free=_nonneg(s, "free", "0", w),
            tiers_mode=_choice(s, "tiers_mode", ("graduated", "volume"), "graduated", w),
            versions=tuple(versions))
    return Catalog(cur, exp, rounding, skus, source)


def load_catalog(path: str | Path) -> Catalog:
    from ..specs.sources import read_user_toml

    return parse_catalog(read_user_toml(path, "--prices"), str(path))
