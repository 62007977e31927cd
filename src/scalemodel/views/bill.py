"""View of the billing engine: one invoice, its lines, what was not billed and why."""

from __future__ import annotations

from typing import Any


def bill_report(inv: Any) -> Any:
    from ..derive import Headline, Report, Section, Table

    d = inv.to_dict()
    c = inv.counts
    rows = tuple((ln["period"], ln["account"], ln["sku"] + (" (adj.)" if ln["adjustment"] else ""),
                  ln["price_from"][:10], ln["quantity"], ln["billed_quantity"],
                  f"{ln['unit_price']}/{ln['price_per']}", ln["amount"]) for ln in d["lines"])
    sections = [
        Section(f"Bill for {inv.period} in {inv.currency} (rounding {inv.rounding}, per line)",
                headlines=(Headline("total", f"{d['total']} {inv.currency}"),
                           Headline("total in minor units", d["total_minor_units"]),
                           Headline("records read / billed / duplicates / unbilled",
                                    f"{c['read']:,} / {c['billed']:,} / {c['duplicates']:,} / "
                                    f"{c['unbilled']:,}")),
                tables=(Table("lines", ("period", "account", "SKU", "price from", "quantity",
                                        "billed quantity", "unit price / per", "amount"), rows),)),
    ]
    if inv.unbilled:
        sections.append(Section("Unbilled (not priced, not lost)", tables=(Table(
            "", ("line", "id", "reason"),
            tuple((u["line"], u["id"], u["reason"]) for u in inv.unbilled[:50])),),
            text="" if len(inv.unbilled) <= 50 else
            f"first 50 of {len(inv.unbilled):,}; --json lists all"))
    if inv.deferred:
        sections.append(Section("Deferred to a later period", text=(
            f"{len(inv.deferred):,} parts of records fall after {inv.period}; they are billed "
            "when that period is.")))
    return Report("scalemodel bill", tuple(sections), d)
