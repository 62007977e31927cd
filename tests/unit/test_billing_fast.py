"""The fast CSV path of the billing engine gives the very invoice of the reference path.

Random catalogs (flat or tiered prices, several versions, record or period increments and
minimums, allowances, currencies, rounding modes) and random CSV files (spans across month
boundaries, counts, decimals, duplicates, conflicting ids, unknown SKUs, bad times and
quantities, malformed and multi-line rows, odd headers) are billed both ways; the invoices must
be equal field by field, including order, reasons and quantity strings, with and without a
period, strict mode and a ledger.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalemodel.billing.catalog import parse_catalog
from scalemodel.billing.engine import bill
from scalemodel.billing.ledger import Ledger
from scalemodel.billing.usage import CsvUsage, JsonlUsage, read_usage
from scalemodel.errors import BadInput

BASE = datetime(2026, 10, 20, tzinfo=UTC)

decimal_text = st.sampled_from(["1", "60", "0.5", "1000", "3600", "0.001", "7", "2.50"])
money = st.sampled_from(["0", "0.0015", "2.49", "1.99", "3", "150.5", "0.0305", "0.004"])


@st.composite
def catalogs(draw):
    skus = {}
    for sid in draw(st.lists(st.sampled_from(["gpu", "tok", "cpu"]), min_size=1, max_size=3,
                             unique=True)):
        versions = []
        froms = draw(st.lists(st.sampled_from(["2026-01-01T00:00:00Z", "2026-11-15T00:00:00Z",
                                                "2026-10-25T12:00:00+02:00",
                                                "2026-12-01T00:00:00Z"]),
                              min_size=1, max_size=3, unique=True))
        for fr in froms:
            if draw(st.booleans()):
                versions.append({"from": fr, "unit_price": draw(money)})
            else:
                b = draw(st.sampled_from(["10", "1000", "5000"]))
                versions.append({"from": fr, "tiers": [{"up_to": b, "unit_price": draw(money)},
                                                       {"up_to": "inf",
                                                        "unit_price": draw(money)}]})
        skus[sid] = {"price_per": draw(decimal_text), "increment": draw(decimal_text),
                     "increment_rounding": draw(st.sampled_from(["up", "down"])),
                     "increment_scope": draw(st.sampled_from(["record", "period"])),
                     "minimum": draw(st.sampled_from(["0", "60", "0.5", "1000"])),
                     "minimum_scope": draw(st.sampled_from(["record", "period"])),
                     "free": draw(st.sampled_from(["0", "0", "100", "2.5"])),
                     "tiers_mode": draw(st.sampled_from(["graduated", "volume"])),
                     "prices": versions}
    cur = draw(st.sampled_from(["USD", "JPY", "KWD"]))
    mode = draw(st.sampled_from(["half-up", "half-even", "half-down", "up", "down"]))
    return parse_catalog({"currency": cur, "rounding": mode, "sku": skus})


def _time(draw, t: datetime) -> str:
    form = draw(st.integers(0, 7))
    if form == 0:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    if form == 1:
        return t.isoformat()
    if form == 2:  # same instant, another offset
        return t.astimezone(timezone(timedelta(hours=2))).isoformat()
    if form == 3:  # naive: taken as UTC
        return t.replace(tzinfo=None).isoformat()
    if form == 4:
        return " " + t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") + " "
    if form == 5:
        return t.strftime("%Y-%m-%d")
    if form == 6:
        return draw(st.sampled_from(["yesterday", "", "2026-13-01", "  "]))
    return t.strftime("%Y-%m-%dT%H:%M:%S+00:00")


@st.composite
def records(draw, skus):
    start = BASE + timedelta(seconds=draw(st.integers(-400 * 86400, 75 * 86400)),
                             microseconds=draw(st.sampled_from([0, 0, 0, 250000, 7])))
    rid = draw(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "", " h "]))
    acct = draw(st.sampled_from(["x", "y", " x", "", "z"]))
    sku = draw(st.sampled_from([*skus, *skus, "nope", f" {skus[0]} "]))
    kind = draw(st.integers(0, 5))
    end = qty = cnt = ""
    if kind <= 2:  # a span
        dur = draw(st.sampled_from([0, 1, 30, 59, 60, 61, 3599, 7200, 86400 * 3, 86400 * 40,
                                    -5]))
        end = _time(draw, start + timedelta(seconds=dur, microseconds=draw(
            st.sampled_from([0, 0, 1, 500000]))))
        cnt = draw(st.sampled_from(["", "1", "8", "2.0", "0", "1.5", "x", " 3 "]))
    else:
        qty = draw(st.sampled_from(["0", "1", "999", "1000", "1001", "2.50", "0.1", "-5", "1e3",
                                    "abc", "NaN", "Infinity", " 7 ", "20000", "0.00",
                                    "9" * 130, str(2**53 + 1)]))
        cnt = draw(st.sampled_from(["", "", "1", "4"]))
        if draw(st.integers(0, 5)) == 0:
            end = _time(draw, start + timedelta(seconds=draw(st.sampled_from([10, -10]))))
    attrs = draw(st.sampled_from(["", "", "gpu=h100", '{"a": 1}', "multi\nline", "sep\x1fin",
                                  "comma, \"quoted\""]))
    return {"id": rid, "account": acct, "sku": sku, "start": _time(draw, start), "end": end,
            "quantity": qty, "count": cnt, "attributes": attrs}


@st.composite
def usage_files(draw, cat):
    skus = sorted(cat.skus)
    cols = ["id", "account", "sku", "start", "end", "quantity", "count", "attributes"]
    variant = draw(st.integers(0, 4))
    if variant == 1:
        cols = draw(st.permutations(cols))
    elif variant == 2:
        cols = [c for c in cols if c not in draw(st.sets(st.sampled_from(
            ["end", "quantity", "count", "attributes"])))]
    elif variant == 3:
        cols = [*cols, "region"]
    rows: list = []
    for _ in range(draw(st.integers(0, 30))):
        roll = draw(st.integers(0, 19))
        if rows and roll == 0:
            rows.append(draw(st.sampled_from(rows)))  # an exact repeat
        elif roll == 1:
            rows.append("short")  # a malformed line
        elif roll == 2:
            rows.append("blank")
        else:
            rec = draw(records(skus))
            rec["region"] = draw(st.sampled_from(["eu", "us "]))
            rows.append([rec.get(c, "") for c in cols])
    return cols, rows


def write(path, cols, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([c if k % 3 else f" {c} " for k, c in enumerate(cols)])
        for row in rows:
            if row == "short":
                f.write("q,x,gpu\r\n")
            elif row == "blank":
                f.write("\r\n")
            else:
                w.writerow(row)


def write_jsonl(path, cols, rows, draw):
    """The same records as JSON Lines: empty fields left out or null, whole numbers as JSON
    numbers, decimals as JSON numbers (parsed as Decimal), plus broken and non-object lines."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            if row == "short":
                f.write(draw(st.sampled_from(['{"id": "q", "account"\n', "[1, 2]\n",
                                              '"text"\n'])))
                continue
            if row == "blank":
                f.write("\n")
                continue
            d = {}
            for c, v in zip(cols, row, strict=True):
                style = draw(st.integers(0, 3))
                if v == "" and style == 0:
                    continue
                if v == "" and style == 1:
                    d[c] = None
                elif c in ("quantity", "count", "id") and style == 2 and v.isdigit():
                    d[c] = int(v)
                elif c in ("quantity", "count") and style == 3 and v.replace(".", "", 1).isdigit():
                    d[c] = json.loads(v, parse_float=Decimal)
                else:
                    d[c] = v
            text = json.dumps(d, default=str)
            if "quantity" in d and isinstance(d["quantity"], Decimal):
                text = text.replace(f'"quantity": "{d["quantity"]}"', f'"quantity": {d["quantity"]}')
            f.write(text + "\n")


def both(path, cat, **kw):
    """(fast, reference): an invoice dict, or the BadInput message."""
    out = []
    for fast in (True, False):
        try:
            out.append(bill(read_usage(path), cat, fast=fast, **kw).to_dict())
        except BadInput as e:
            out.append(f"BadInput: {e}")
    return out


# FAST_EXAMPLES=400 for a longer search than the default 60
PROPS = settings(max_examples=int(os.environ.get("FAST_EXAMPLES", "60")), deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


@PROPS
@given(st.data())
def test_fast_path_equals_reference(tmp_path, data):
    cat = data.draw(catalogs())
    cols, rows = data.draw(usage_files(cat))
    p = tmp_path / "u.csv"
    write(p, cols, rows)
    assert isinstance(read_usage(p), CsvUsage)
    (tmp_path / "x.jsonl").touch()
    assert isinstance(read_usage(tmp_path / "x.jsonl"), JsonlUsage)
    period = data.draw(st.sampled_from([None, None, "2026-10", "2026-11", "2026-12"]))
    strict = data.draw(st.integers(0, 5)) == 0
    fast, ref = both(p, cat, period=period, strict=strict)
    assert fast == ref
    j = tmp_path / "u.jsonl"
    write_jsonl(j, cols, rows, data.draw)
    fast, ref = both(j, cat, period=period, strict=strict)
    assert fast == ref


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_fast_path_equals_reference_with_ledger(tmp_path_factory, data):
    cat = data.draw(catalogs())
    d = tmp_path_factory.mktemp("led")
    files = []
    for k in range(2):
        cols, rows = data.draw(usage_files(cat))
        write(d / f"u{k}.csv", cols, rows)
        files.append(d / f"u{k}.csv")
    periods = [data.draw(st.sampled_from(["2026-10", "2026-11", None])), "2026-12"]
    results = {}
    for fast in (True, False):
        led = Ledger(d / f"l{fast}.sqlite")
        runs = []
        for f, per in zip(files + files[:1], periods + ["2026-12"], strict=True):
            try:
                runs.append(bill(read_usage(f), cat, period=per, ledger=led,
                                 fast=fast).to_dict())
            except BadInput as e:
                runs.append(str(e))
        led.close()
        db = sqlite3.connect(d / f"l{fast}.sqlite")
        tables = [sorted(db.execute(f"SELECT * FROM {t}").fetchall())
                  for t in ("parts", "totals")]
        db.close()
        results[fast] = (runs, tables)
    assert results[True] == results[False]


def test_fast_path_is_taken_and_matches_on_the_example(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples" / "billing"
    from scalemodel.billing.catalog import load_catalog

    cat = load_catalog(root / "prices.toml")
    fast, ref = both(root / "usage.csv", cat, period="2026-11")
    assert fast == ref and fast["counts"]["read"] > 0


@pytest.mark.parametrize("text", ["", "id,account,sku,start\n"])
def test_fast_path_empty_files(tmp_path, text):
    p = tmp_path / "u.csv"
    p.write_text(text)
    cat = parse_catalog({"currency": "USD", "sku": {"s": {"prices": [
        {"from": "2026-01-01T00:00:00Z", "unit_price": "1"}]}}})
    fast, ref = both(p, cat)
    assert fast == ref and fast["counts"]["read"] == 0


def test_fast_path_jsonl_bom_and_numbers(tmp_path):
    cat = parse_catalog({"currency": "USD", "sku": {"s": {"increment": "0.5", "prices": [
        {"from": "2026-01-01T00:00:00Z", "unit_price": "1.25"}]}}})
    p = tmp_path / "u.jsonl"
    p.write_text('\ufeff{"id": 1, "account": "a", "sku": "s", "start": "2026-11-02", '
                 '"quantity": 1}\n'
                 '{"id": 2, "account": "a", "sku": "s", "start": "2026-11-02", "quantity": 0.7,'
                 ' "count": 3}\n'
                 '{"id": 3, "account": "a", "sku": "s", "start": "2026-11-02", "quantity": true}\n'
                 '{"id": 2, "account": "a", "sku": "s", "start": "2026-11-02", "quantity": 0.70,'
                 ' "count": 3}\n', encoding="utf-8")
    fast, ref = both(p, cat)
    assert fast == ref
    # the BOM (what spreadsheet tools write) is taken off: record 1 is billed; 0.7 and 0.70
    # are different payloads of id 2 (both held); a boolean quantity is refused
    assert fast["counts"] == {"read": 4, "billed": 1, "duplicates": 0, "unbilled": 3}
    # held while reading (lines 3, 4), then the first version of id 2 when pricing
    assert [(u["line"], u["id"]) for u in fast["unbilled"]] == [(3, "3"), (4, "2"), (2, "2")]
