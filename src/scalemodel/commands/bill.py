"""scalemodel bill: price usage records with exact money; nothing dropped, everything counted."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, positive_float


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bill", help="usage billing with exact decimal money, increments, tiers and a ledger",
        description="Prices usage records (CSV or JSON Lines) with a price catalog (TOML): "
        "decimal money from strings, one rounding per line, increments and minimums per record "
        "or per period, free allowances, graduated or volume tiers, effective-dated prices. "
        "Unknown SKUs, bad quantities and conflicting duplicates are listed as unbilled with "
        "their reason; the counts reconcile (read = billed + duplicates + unbilled).")
    p.add_argument("--usage", required=True, metavar="FILE.csv|FILE.jsonl",
                   help="usage records: id, account, sku, start, [end], [quantity], [count], "
                        "[attributes]")
    p.add_argument("--prices", required=True, metavar="FILE.toml", help="the price catalog")
    p.add_argument("--period", metavar="YYYY-MM",
                   help="bill this calendar month (UTC); earlier usage becomes adjustments, "
                        "later usage is deferred (default: every month found)")
    p.add_argument("--ledger", metavar="PATH",
                   help="SQLite ledger: re-runs bill nothing twice, late usage becomes an "
                        "adjustment (default: no ledger, a standalone bill)")
    p.add_argument("--ledger-wait", type=positive_float, default=60.0, metavar="SECONDS",
                   help="how long to wait for another bill holding the ledger before giving up "
                        "with nothing billed (default 60)")
    p.add_argument("--encoding", default="auto", metavar="CODEC",
                   help="the usage file's text encoding: auto (a byte-order mark decides: "
                        "UTF-8, UTF-16 or UTF-32; else UTF-8), utf-8, utf-8-sig, utf-16, "
                        "utf-16-le, utf-16-be, cp1252 (a Windows spreadsheet's plain CSV), "
                        "latin-1")
    p.add_argument("--strict", action="store_true",
                   help="refuse the whole bill at the first unusable record (exit 2)")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    import csv

    from ..billing.catalog import load_catalog
    from ..billing.engine import bill
    from ..billing.ledger import Ledger
    from ..billing.usage import read_usage
    from ..errors import BadInput
    from ..views.bill import bill_report

    cat = load_catalog(args.prices)
    ledger = Ledger(args.ledger, wait_s=args.ledger_wait) if args.ledger else None
    try:
        usage = read_usage(args.usage, args.encoding)
        inv = bill(usage, cat, period=args.period, ledger=ledger, strict=args.strict)
    except UnicodeError as e:
        codec = getattr(usage, "encoding", None) if "usage" in locals() else None
        at = (f" (byte {e.start}: {e.object[e.start:e.start + 1]!r})"
              if isinstance(e, UnicodeDecodeError) else "")
        hint = ("; a spreadsheet's plain CSV from Windows is --encoding cp1252"
                if codec in (None, "utf-8", "utf-8-sig") else "")
        shown = "UTF-8" if codec in (None, "utf-8", "utf-8-sig") else codec
        raise BadInput(f"--usage: {args.usage} is not {shown} text{at}{hint}; "
                       "nothing was billed") from None
    except csv.Error as e:
        raise BadInput(f"--usage: {args.usage} is not a usable CSV file ({e}); nothing was "
                       "billed") from None
    finally:
        if ledger is not None:
            ledger.close()
    return bill_report(inv)
