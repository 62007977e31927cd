"""Billing engine: the edge cases of docs/billing.md, each worked by hand."""

from __future__ import annotations

import copy
from decimal import Decimal
from fractions import Fraction

import pytest

from scalemodel.billing.catalog import parse_catalog
from scalemodel.billing.engine import bill
from scalemodel.billing.ledger import Ledger
from scalemodel.billing.money import round_minor
from scalemodel.billing.usage import read_usage
from scalemodel.errors import BadInput

KEYS = ("id", "account", "sku", "start", "end", "quantity", "count")

CAT = {"currency": "USD", "sku": {
    "sec": {"price_per": "3600", "increment": "60", "minimum": "60",
            "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "3.60"}]},
    "tok": {"price_per": "1000", "increment": "1000",
            "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "0.002"}]},
}}


def raws(*rows):
    return [(n, dict(zip(KEYS, r, strict=False)), "", "\x1f".join(r[1:]))
            for n, r in enumerate(rows, start=2)]


def cat(**kw):
    c = copy.deepcopy(CAT)
    for sid, ch in kw.items():
        if sid == "top":
            c.update(ch)
        else:
            c["sku"][sid].update(ch)
    return parse_catalog(c)


T = "2026-11-02T00:00:00Z"


def span(i, secs, sku="sec", count="1", start="2026-11-02T00:00:00"):
    from datetime import datetime, timedelta

    s = datetime.fromisoformat(start)
    return (i, "a", sku, s.isoformat() + "Z", (s + timedelta(seconds=secs)).isoformat() + "Z",
            "", count)


@pytest.mark.parametrize("secs,billed", [(0, 0), (1, 60), (60, 60), (61, 120), (3600, 3600)])
def test_minute_increments_per_record(secs, billed):
    inv = bill(raws(span("r", secs)), cat())
    assert inv.lines[0].billed_quantity == billed
    # $3.60 per hour = 0.1 cent per second
    assert inv.total_minor == round_minor(Fraction(billed) / 1000, 2, "half-up")


@pytest.mark.parametrize("tokens,blocks_up,blocks_down", [(999, 1, 0), (1000, 1, 1), (1001, 2, 1)])
def test_token_blocks(tokens, blocks_up, blocks_down):
    r = raws(("t", "a", "tok", T, "", str(tokens)))
    assert bill(r, cat()).lines[0].billed_quantity == 1000 * blocks_up
    down = bill(r, cat(tok={"increment_rounding": "down"}))
    assert down.lines[0].billed_quantity == 1000 * blocks_down


def test_half_cent_rounding_modes():
    # 2,500 tokens rounded up to 3,000 x $0.002/1K = $0.006 -> 1 cent either way;
    # 5 blocks of 1K at $0.001 = $0.005: half-up 1 cent, half-even 0 cents
    r25 = raws(("t", "a", "tok", T, "", "2500"))
    for mode in ("half-up", "half-even"):
        inv = bill(r25, cat(top={"rounding": mode}))
        assert inv.lines[0].billed_quantity == 3000 and inv.total_minor == 1
    r = raws(("t", "a", "tok", T, "", "5000"))
    c = {"tok": {"prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "0.001"}]}}
    assert bill(r, cat(**c)).total_minor == 1
    assert bill(r, cat(top={"rounding": "half-even"}, **c)).total_minor == 0


def test_rounding_is_per_line_not_per_event():
    # three accounts of $0.004 each: three lines of 0 cents (an invoice-level rounding would
    # give 1 cent); three events on one account: one line of $0.012 -> 1 cent
    c = {"tok": {"increment": "1", "prices": [{"from": "2026-01-01T00:00:00Z",
                                                "unit_price": "0.004"}]}}
    per_acct = raws(*[(f"t{k}", f"acct{k}", "tok", T, "", "1000") for k in range(3)])
    inv = bill(per_acct, cat(**c))
    assert [ln.amount_minor for ln in inv.lines] == [0, 0, 0] and inv.total_minor == 0
    one = raws(*[(f"t{k}", "a", "tok", T, "", "1000") for k in range(3)])
    assert bill(one, cat(**c)).total_minor == 1


def test_currency_exponents():
    r = raws(("t", "a", "tok", T, "", "1000"))
    jpy = cat(top={"currency": "JPY"}, tok={"prices": [{"from": "2026-01-01T00:00:00Z",
                                                         "unit_price": "150.5"}]})
    inv = bill(r, jpy)
    assert inv.total_minor == 151 and inv.to_dict()["total"] == "151"
    kwd = cat(top={"currency": "KWD"}, tok={"prices": [{"from": "2026-01-01T00:00:00Z",
                                                         "unit_price": "0.0305"}]})
    inv = bill(r, kwd)
    assert inv.total_minor == 31 and inv.to_dict()["total"] == "0.031"


def test_duplicates_same_and_different_payload():
    r = raws(("a1", "a", "tok", T, "", "1000"), ("a1", "a", "tok", T, "", "1000"),
             ("b1", "a", "tok", T, "", "1000"), ("b1", "a", "tok", T, "", "2000"))
    inv = bill(r, cat())
    assert inv.counts == {"read": 4, "billed": 1, "duplicates": 1, "unbilled": 2}
    assert {u["line"] for u in inv.unbilled} == {4, 5}
    assert inv.lines[0].quantity == 1000


def test_unknown_sku_negative_malformed_and_strict():
    r = raws(("a", "a", "gpu-x", T, "", "1"), ("b", "a", "tok", T, "", "-5"),
             ("c", "a", "tok", T, "", "1e"), ("d", "a", "tok", "yesterday", "", "1"),
             ("e", "a", "tok", T, "", "10"))
    inv = bill(r, cat())
    reasons = [u["reason"] for u in inv.unbilled]
    assert "unknown SKU" in reasons[0] and "negative" in reasons[1]
    assert "decimal" in reasons[2] and "ISO 8601" in reasons[3]
    assert inv.counts["billed"] == 1 and inv.total_minor == 0  # 10 tokens -> 1K x 0.002
    with pytest.raises(BadInput, match="line 2"):
        bill(r, cat(), strict=True)


def test_span_split_at_month_boundary_and_deferred():
    r = raws(("x", "a", "sec", "2026-11-30T23:30:00Z", "2026-12-01T00:30:00Z", "", "1"))
    nov = bill(r, cat(), period="2026-11")
    assert nov.lines[0].quantity == 1800 and nov.deferred[0]["period"] == "2026-12"
    both = bill(r, cat())
    assert [(ln.period, ln.quantity) for ln in both.lines] == [("2026-11", 1800), ("2026-12", 1800)]
    later = bill(raws(("y", "a", "sec", "2026-12-02T00:00:00Z", "2026-12-02T00:01:00Z", "", "1")),
                 cat(), period="2026-11")
    assert later.counts["unbilled"] == 1 and "later period" in later.unbilled[0]["reason"]


def test_price_change_mid_period():
    c = {"sec": {"prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "3.60"},
                            {"from": "2026-11-15T00:00:00Z", "unit_price": "7.20"}]}}
    r = raws(span("a", 3600, start="2026-11-10T00:00:00"), span("b", 3600, start="2026-11-20T00:00:00"))
    inv = bill(r, cat(**c))
    assert [ln.amount_minor for ln in inv.lines] == [360, 720]
    before = raws(span("z", 60, start="2025-12-31T23:00:00"))
    assert "no price" in bill(before, cat(**c)).unbilled[0]["reason"]


def test_large_quantities_stay_exact():
    # 2^53 + 1 tokens: a float would lose the +1; the product has more than 28 digits
    q = 2**53 + 1
    c = {"tok": {"increment": "1", "price_per": "1",
                 "prices": [{"from": "2026-01-01T00:00:00Z",
                             "unit_price": "0.0000000000000000000000000001"}]}}
    inv = bill(raws(("t", "a", "tok", T, "", str(q))), cat(**c))
    assert inv.lines[0].unrounded == Fraction(q, 10**28)
    big = {"tok": {"increment": "1", "price_per": "1",
                   "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "1.01"}]}}
    inv = bill(raws(("t", "a", "tok", T, "", str(10**30 + 1))), cat(**big))
    assert inv.total_minor == (10**30 + 1) * 101


def test_free_allowance_exact_and_one_over():
    c = {"tok": {"free": "5000", "increment_scope": "period"}}
    assert bill(raws(("t", "a", "tok", T, "", "5000")), cat(**c)).total_minor == 0
    inv = bill(raws(("t", "a", "tok", T, "", "5001")), cat(**c))
    assert inv.lines[0].billed_quantity == 1000 and inv.total_minor == 0  # $0.002 -> 0 cents
    c["tok"]["prices"] = [{"from": "2026-01-01T00:00:00Z", "unit_price": "0.01"}]
    assert bill(raws(("t", "a", "tok", T, "", "5001")), cat(**c)).total_minor == 1


def test_tiers_graduated_and_volume():
    tiers = [{"up_to": "1000", "unit_price": "2"}, {"up_to": "inf", "unit_price": "1"}]
    c = {"tok": {"increment": "1", "price_per": "1000",
                 "prices": [{"from": "2026-01-01T00:00:00Z", "tiers": tiers}]}}
    r = raws(("t", "a", "tok", T, "", "3000"))
    assert bill(r, cat(**c)).total_minor == 200 + 200  # 1000 at $2/1K + 2000 at $1/1K
    c["tok"]["tiers_mode"] = "volume"
    assert bill(r, cat(**c)).total_minor == 300  # all 3000 at $1/1K


def test_ledger_idempotent_and_late_adjustment(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    c = {"tok": {"free": "1000", "increment_scope": "period"}}
    first = raws(("a", "a", "tok", T, "", "1500"))
    inv1 = bill(first, cat(**c), period="2026-11", ledger=led)
    assert inv1.total_minor == 0 and inv1.lines[0].billed_quantity == 1000  # 500 -> 1K
    again = bill(first, cat(**c), period="2026-11", ledger=led)
    assert again.lines == () and again.counts["duplicates"] == 1
    late = raws(("a", "a", "tok", T, "", "1500"), ("b", "a", "tok", T, "", "99000"))
    inv3 = bill(late, cat(**c), period="2026-12", ledger=led)
    ln = inv3.lines[0]
    # November now holds 100,500 tokens: 99,500 over the allowance -> 100 blocks -> $0.20,
    # of which 1 block ($0.002 -> 0 cents) was billed: the adjustment is 20 cents
    assert ln.adjustment and ln.period == "2026-11" and ln.amount_minor == 20
    assert ln.billed_quantity == 99000
    led.close()


def test_malformed_csv_line_number(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("id,account,sku,start,quantity\n"
                 "a,acct,tok,2026-11-02T00:00:00Z,1000\n"
                 "b,acct,tok\n"
                 "c,acct,tok,2026-11-02T00:00:00Z,1000\n")
    inv = bill(read_usage(p), cat())
    assert inv.unbilled[0]["line"] == 3 and "malformed CSV line 3" in inv.unbilled[0]["reason"]
    assert inv.counts == {"read": 3, "billed": 2, "duplicates": 0, "unbilled": 1}


def test_jsonl_numbers_are_decimal(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_text('{"id": 1, "account": "a", "sku": "tok", "start": "2026-11-02", '
                 '"quantity": 0.1}\n{"id": 2, "account"\n')
    inv = bill(read_usage(p), cat(tok={"increment": "0.1", "price_per": "1"}))
    assert inv.lines[0].quantity == Decimal("0.1")
    assert "malformed JSON on line 2" in inv.unbilled[0]["reason"]


def test_catalog_refuses_float_prices():
    bad = copy.deepcopy(CAT)
    bad["sku"]["tok"]["prices"][0]["unit_price"] = 0.1
    with pytest.raises(BadInput, match="not floats"):
        parse_catalog(bad)
    bad = copy.deepcopy(CAT)
    bad["currency"] = "XYZ"
    with pytest.raises(BadInput, match="exponent"):
        parse_catalog(bad)
