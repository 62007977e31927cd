"""Billing input and output (issue 19): the encodings spreadsheet tools write, exact printing of
every Decimal at any size, values past the magnitude bound held with a reason (no crash).
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalemodel.billing.money import fmt_dec, fmt_minor
from scalemodel.cli import main

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "examples" / "billing" / "prices.toml"
USAGE = (ROOT / "examples" / "billing" / "usage.csv").read_text(encoding="utf-8")


def _bill(capsys, usage: Path, *extra: str, prices: Path = PRICES) -> tuple[int, dict | str]:
    rc = main(["bill", "--usage", str(usage), "--prices", str(prices), "--json", *extra])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else err)


@pytest.mark.parametrize("codec,sep", [("utf-8-sig", ","), ("utf-16", ","), ("utf-16", "\t"),
                                       ("utf-16-le", "\t")])
def test_spreadsheet_encodings_give_the_utf8_bill(tmp_path, capsys, codec, sep):
    plain = tmp_path / "plain.csv"
    plain.write_text(USAGE, encoding="utf-8")
    rc, ref = _bill(capsys, plain)
    assert rc == 0 and ref["counts"]["read"] > 0
    p = tmp_path / "u.csv"
    text = USAGE.replace(",", sep)
    # utf-16-le has no BOM of its own: Excel's "Unicode Text" writes one, as here
    p.write_bytes(("\ufeff" + text).encode(codec) if codec == "utf-16-le" else
                  text.encode(codec))
    rc, got = _bill(capsys, p)
    assert rc == 0, got
    assert got == ref


def test_a_bom_is_no_longer_a_missing_id_column(tmp_path, capsys):
    # the symptom: "lacks column(s) id" for a UTF-8 file with a BOM
    p = tmp_path / "u.csv"
    p.write_text(USAGE, encoding="utf-8-sig")
    rc, got = _bill(capsys, p)
    assert rc == 0 and got["counts"]["unbilled"] < got["counts"]["read"]


def test_cp1252_is_declared_not_guessed(tmp_path, capsys):
    lines = USAGE.splitlines(True)
    first = lines[1].split(",")
    first[1] = "caf\u00e9"  # an account name with a byte that is not UTF-8 in cp1252
    p = tmp_path / "u.csv"
    p.write_text(lines[0] + ",".join(first) + "".join(lines[2:]), encoding="cp1252")
    rc, err = _bill(capsys, p)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "--encoding cp1252" in err and "nothing was billed" in err
    rc, got = _bill(capsys, p, "--encoding", "cp1252")
    assert rc == 0
    assert "caf\u00e9" in {ln["account"] for ln in got["lines"]}


def _exact_minor_text(minor: int, exp: int) -> str:
    """Independent of the code under test: Fraction arithmetic printed digit by digit."""
    q, r = divmod(abs(Fraction(minor, 10**exp)), 1)
    digits = ""
    for _ in range(exp):
        r *= 10
        d, r = divmod(r, 1)
        digits += str(int(d))
    return ("-" if minor < 0 else "") + str(int(q)) + ("." + digits if exp else "")


@given(st.integers(-10**60, 10**60), st.integers(0, 6))
def test_fmt_minor_exact_at_any_size(minor, exp):
    assert fmt_minor(minor, exp) == _exact_minor_text(minor, exp)


@given(st.integers(-10**50, 10**50), st.integers(-60, 60))
def test_fmt_dec_exact_at_any_size(digits, e):
    x = Decimal((1 if digits < 0 else 0, tuple(int(c) for c in str(abs(digits))), e))
    s = fmt_dec(x)
    assert "E" not in s and "e" not in s
    assert Decimal(s) == x  # the text is the number, exactly (Decimal() of text is exact)
    if x == x.to_integral_value():
        assert "." not in s


def test_huge_line_amount_prints_exactly(tmp_path, capsys):
    # the issue: a line past about 26 digits crashed the formatter; a whole-number quantity
    # past 28 digits printed rounded. 10^40 + 1 tokens at 1.01 USD each: 101 x (10^40 + 1)
    # cents, written out by integer arithmetic here.
    prices = tmp_path / "p.toml"
    prices.write_text('currency = "USD"\n[sku.tok]\n[[sku.tok.prices]]\n'
                      'from = "2026-01-01T00:00:00Z"\nunit_price = "1.01"\n')
    q = 10**40 + 1
    usage = tmp_path / "u.csv"
    usage.write_text(f"id,account,sku,start,quantity\nr1,a,tok,2026-11-02T00:00:00Z,{q}\n")
    rc, got = _bill(capsys, usage, prices=prices)
    assert rc == 0, got
    minor = 101 * q
    ln = got["lines"][0]
    assert ln["quantity"] == str(q) and ln["billed_quantity"] == str(q)
    assert ln["amount_minor_units"] == minor
    assert ln["amount"] == f"{minor // 100}.{minor % 100:02d}"
    assert got["total"] == ln["amount"]
    rc = main(["bill", "--usage", str(usage), "--prices", str(prices)])  # the text report too
    assert rc == 0 and f"{minor // 100}.{minor % 100:02d}" in capsys.readouterr().out


@pytest.mark.parametrize("q", ["1E+999999", "1E-999999", "1" + "0" * 120])
def test_past_the_magnitude_bound_is_held_with_a_reason(tmp_path, capsys, q):
    usage = tmp_path / "u.csv"
    usage.write_text(f"id,account,sku,start,quantity\nr1,acme,tokens-in,2026-11-02T00:00:00Z,{q}\n"
                     "r2,acme,tokens-in,2026-11-02T00:00:00Z,5\n")
    rc, got = _bill(capsys, usage)
    assert rc == 0, got
    assert got["counts"] == {"read": 2, "billed": 1, "duplicates": 0, "unbilled": 1}
    assert "billing.magnitude_digits" in got["unbilled"][0]["reason"]


def test_price_past_the_magnitude_bound_is_one_line(tmp_path, capsys):
    prices = tmp_path / "p.toml"
    prices.write_text('currency = "USD"\n[sku.tok]\n[[sku.tok.prices]]\n'
                      'from = "2026-01-01T00:00:00Z"\nunit_price = "1E+5000"\n')
    usage = tmp_path / "u.csv"
    usage.write_text("id,account,sku,start,quantity\nr1,a,tok,2026-11-02T00:00:00Z,1\n")
    rc, err = _bill(capsys, usage, prices=prices)
    assert rc == 2 and "billing.magnitude_digits" in err and len(err.strip().splitlines()) == 1
