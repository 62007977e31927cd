"""billing: a usage bill right to the cent; the questions to ask first and what each answer does."""

from __future__ import annotations

import copy
from typing import Any

from ..billing.catalog import parse_catalog
from ..billing.engine import Invoice, bill
from ..derive import Headline, Report, Section, Table
from ..errors import BadInput
from .params import Param

PROMPT = (
    "Write the code that turns usage records into a bill: GPU time billed per minute, tokens "
    "per thousand, a price list that can change, records that arrive twice or name a SKU we do "
    "not sell. The money must be right to the cent. What do you ask before you write it?"
)

DEFAULTS: dict[str, Any] = {}

PARAMS: tuple[Param, ...] = ()

CATALOG: dict[str, Any] = {
    "currency": "USD", "rounding": "half-up",
    "sku": {
        "gpu-hour": {"unit": "second", "price_per": "3600", "increment": "60",
                     "increment_rounding": "up", "increment_scope": "record", "minimum": "60",
                     "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "2.49"}]},
        "tokens": {"unit": "token", "price_per": "1000", "increment": "1000",
                   "increment_rounding": "up", "increment_scope": "record",
                   "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "0.0025"}]},
    },
}

# (id, account, sku, start, end, quantity, count): a small worked example
RECORDS = (
    ("g1", "acme", "gpu-hour", "2026-11-03T10:00:00Z", "2026-11-03T10:00:30Z", "", "8"),
    ("g2", "acme", "gpu-hour", "2026-11-03T11:00:00Z", "2026-11-03T11:01:01Z", "", "8"),
    ("g3", "acme", "gpu-hour", "2026-11-30T23:50:00Z", "2026-12-01T00:10:00Z", "", "1"),
    ("t1", "acme", "tokens", "2026-11-04T09:00:00Z", "", "1001", ""),
    ("t1", "acme", "tokens", "2026-11-04T09:00:00Z", "", "1001", ""),
    ("x1", "acme", "tpu-hour", "2026-11-05T00:00:00Z", "2026-11-05T01:00:00Z", "", "1"),
)


def _raws(records: tuple[tuple[str, ...], ...]) -> list[tuple]:
    keys = ("id", "account", "sku", "start", "end", "quantity", "count")
    out = []
    for n, r in enumerate(records, start=2):
        d = dict(zip(keys, r, strict=True))
        out.append((n, d, "", "\x1f".join(r[1:])))
    return out


def _bill(cat: dict[str, Any], strict: bool = False, period: str = "2026-11") -> Invoice:
    return bill(_raws(RECORDS), parse_catalog(cat), period=period, strict=strict)


def _variant(**sku_changes: dict[str, Any]) -> dict[str, Any]:
    c = copy.deepcopy(CATALOG)
    for sid, ch in sku_changes.items():
        if sid == "catalog":
            c.update(ch)
        else:
            c["sku"][sid].update(ch)
    return c


def build(opts: dict[str, Any]) -> Report:
    base = _bill(CATALOG)
    cur = base.currency
    rows = tuple((ln.sku, ln.to_dict()["quantity"], ln.to_dict()["billed_quantity"],
                  ln.to_dict()["unit_price"] + "/" + ln.to_dict()["price_per"],
                  ln.to_dict()["unrounded_amount"], ln.to_dict()["amount"]) for ln in base.lines)
    try:
        _bill(CATALOG, strict=True)
        strict_msg = "accepted"
    except BadInput as e:
        strict_msg = f"refused: {e}"
    variants = [
        ("baseline: per-record increments (cloud style), half-up per line", CATALOG),
        ("increments on the period total instead (Stripe transform_quantity style)",
         _variant(**{"gpu-hour": {"increment_scope": "period", "minimum_scope": "period"},
                     "tokens": {"increment_scope": "period"}})),
        ("tokens rounded down to whole thousands (a 0-999 = 0 rule)",
         _variant(tokens={"increment_rounding": "down"})),
        ("per-second GPU billing after a 60 s minimum per run (AWS style)",
         _variant(**{"gpu-hour": {"increment": "1"}})),
        ("half-even (banker's) rounding per line", _variant(catalog={"rounding": "half-even"})),
        ("a free allowance of 1,000 tokens a month (taken before increments)",
         _variant(tokens={"free": "1000", "increment_scope": "period"})),
    ]
    vrows = []
    for label, cat in variants:
        inv = _bill(cat)
        vrows.append((label, inv.to_dict()["total"], inv.total_minor,
                      inv.total_minor - base.total_minor))
    clar = (
        "1. Increments: whole minutes (1K tokens) per record, or on the period total? Up or down?",
        "2. Minimums: a 60 s minimum per run (AWS, GCP) or per period, or none?",
        "3. Money: currency and its minor unit; rounding mode (half-up or half-even); per line or "
        "per invoice?",
        "4. Unknown SKUs, negative or malformed quantities: refuse the bill or hold them aside?",
        "5. Duplicates: is the record id an idempotency key? Same id, other payload: which wins?",
        "6. Time: points or spans? Billing period and its timezone; spans across the boundary?",
        "7. Prices: can they change inside a period; tiers (graduated or volume); free allowance?",
        "8. Late records: reopen a closed bill, or adjust on the next one?",
    )
    s1 = Section("1. Questions to ask before coding", text="\n".join(clar))
    s2 = Section(
        "2. The worked example, billed",
        text=(f"{len(RECORDS)} records: two 8-GPU runs of 30 s and 61 s, a 20-minute run across "
              "the month boundary, one call of 1,001 tokens (sent twice), and a SKU we do not "
              "sell. GPU-hour at $2.49 billed per started minute per GPU with a 60 s "
              "minimum; tokens at $0.0025 per started 1K."),
        headlines=(Headline("total", f"{base.to_dict()['total']} {cur}"),
                   Headline("total in cents", base.total_minor),
                   Headline("read / billed / duplicates / unbilled",
                            " / ".join(str(base.counts[k]) for k in
                                       ("read", "billed", "duplicates", "unbilled")))),
        tables=(Table("lines (one rounding each)", ("SKU", "quantity", "billed quantity",
                                                    "unit price / per", "exact amount",
                                                    "amount"), rows),
                Table("held aside", ("line", "id", "reason"),
                      tuple((u["line"], u["id"], u["reason"]) for u in base.unbilled)),
                Table("deferred to December", ("id", "period", "quantity (s)"),
                      tuple((x["id"], x["period"], x["quantity"]) for x in base.deferred))),
    )
    s3 = Section("3. How each answer changes the bill",
                 text=f"With --strict the same records are {strict_msg}",
                 tables=(Table("same records, one rule changed", ("rule", f"total ({cur})",
                                                                  "cents", "change (cents)"),
                               tuple(vrows)),))
    followups = (
        ("Why not floats?",
         "0.1 + 0.2 != 0.3 in binary; amounts here are Decimals from strings, multiplied "
         "exactly (as fractions) and rounded once per line, so the total is the sum of the lines "
         f"to the cent: {base.total_minor} cents."),
        ("Per line or per invoice rounding?",
         "Per line, like Stripe and Lago: each line is a number the customer can check; rounding "
         "per event would add up errors of up to half a cent per event."),
        ("What happens to the unknown SKU?",
         f"It is held in 'unbilled' with its line and reason ({len(base.unbilled)} here) and "
         "counted; it is never priced at zero. --strict refuses the bill instead."),
        ("A record arrives after the bill was sent?",
         "With --ledger the period is closed; the late record lands on the next bill as an "
         "adjustment: the price of (old + new usage) minus what was billed, so allowances and "
         "tiers stay right."),
        ("How do you know nothing was lost?",
         "The invoice reconciles counts: read = billed + duplicates + unbilled "
         f"({base.counts['read']} = {base.counts['billed']} + {base.counts['duplicates']} + "
         f"{base.counts['unbilled']}); a mismatch is an internal error."),
    )
    return Report("billing: a usage bill right to the cent", (s1, s2, s3),
                  {"invoice": base.to_dict(),
                   "variants": [{"rule": r[0], "total": r[1], "total_minor_units": r[2]}
                                for r in vrows]},
                  question=PROMPT,
                  assumptions=("one currency per bill (USD, 2 decimals)",
                               "periods are calendar months in UTC",
                               "a span's price version is the one in effect at its start"),
                  followups=followups)
