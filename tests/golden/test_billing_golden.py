"""Billing against worked examples published by billing vendors (source named in each test)."""

from __future__ import annotations

from scalemodel.billing.catalog import parse_catalog
from scalemodel.billing.engine import bill

T = "2026-11-02T00:00:00Z"


def _one(sku: dict, qty: str, currency: str = "USD") -> tuple:
    cat = parse_catalog({"currency": currency, "sku": {"s": sku}})
    inv = bill([(2, {"id": "1", "account": "a", "sku": "s", "start": T, "quantity": qty}, "",
                 qty)], cat)
    return inv.lines[0], inv.total_minor


def test_stripe_decimal_amount_example():
    # Stripe docs, decimal amounts: 0.05 cents per MB, 30 MB -> 1.5 cents, rounded at the line
    # item level to 2 cents
    ln, total = _one({"prices": [{"from": "2026-01-01", "unit_price": "0.0005"}]}, "30")
    assert ln.unrounded * 100 == 1.5 and total == 2


def test_stripe_transform_quantity_example():
    # Stripe docs, transform_quantity: 150 minutes, divide_by 60, round up -> 3 hours
    ln, total = _one({"price_per": "60", "increment": "60", "increment_scope": "period",
                      "prices": [{"from": "2026-01-01", "unit_price": "1.00"}]}, "150")
    assert ln.billed_quantity == 180 and total == 300


def test_lago_package_with_free_units_example():
    # Lago docs, package charge: $5 per 100 units with 100 free units; 201 units cost $10
    ln, total = _one({"price_per": "100", "increment": "100", "increment_scope": "period",
                      "free": "100", "prices": [{"from": "2026-01-01", "unit_price": "5"}]}, "201")
    assert ln.billed_quantity == 200 and total == 1000
