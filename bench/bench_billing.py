"""Benchmark: bill N usage records (default 1,000,000; target under 10 s on 2 cores; at
10,000,000 records the peak memory target is 300 MB).

    PYTHONPATH=src python bench/bench_billing.py [--records N] [--ledger] [--reference]
        [--jsonl]

Prints the wall and CPU time of the bill and the process's peak resident memory (ru_maxrss,
which covers writing the file too: that part streams and stays small).

Writes a CSV of synthetic records (time spans and token counts, 1% duplicates, a few unknown
SKUs and bad quantities) to a temporary folder, then times read + validate + dedupe + split +
rate + round, and with --ledger the SQLite commit as well. A CSV file goes through the engine's
fast path; --reference forces the reference path (same invoice, for comparison); --jsonl writes
the same records as JSON Lines.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalemodel.billing.catalog import load_catalog  # noqa: E402
from scalemodel.billing.engine import bill  # noqa: E402
from scalemodel.billing.ledger import Ledger  # noqa: E402
from scalemodel.billing.usage import read_usage  # noqa: E402

PRICES = Path(__file__).resolve().parents[1] / "examples" / "billing" / "prices.toml"


def make(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    base = datetime(2026, 11, 1, tzinfo=UTC)
    with open(path, "w", encoding="utf-8") as f:
        f.write("id,account,sku,start,end,quantity,count,attributes\n")
        last = ""
        for i in range(n):
            if last and rng.random() < 0.005:  # an exact duplicate (a retried send)
                f.write(last)
                continue
            acct = f"acct-{rng.randrange(500)}"
            s = base + timedelta(seconds=rng.randrange(30 * 86400))
            r = rng.random()
            rid = f"r{i - 1 if r < 0.005 and i else i}"  # same id, other payload
            if r < 0.6:
                e = s + timedelta(seconds=rng.randrange(1, 7200))
                last = f"{rid},{acct},gpu-hour,{s.isoformat()},{e.isoformat()},,8,\n"
            elif r < 0.9995:
                last = f"{rid},{acct},tokens-in,{s.isoformat()},,{rng.randrange(1, 20000)},,\n"
            else:
                last = f"{rid},{acct},tpu-hour,{s.isoformat()},,-5,,\n"
            f.write(last)


def to_jsonl(path: Path) -> Path:
    """The same records as JSON Lines (empty CSV fields left out)."""
    import csv as csv_mod
    import json

    out = path.with_suffix(".jsonl")
    with open(path, newline="", encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
        for row in csv_mod.DictReader(f):
            g.write(json.dumps({k: v for k, v in row.items() if v}) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--ledger", action="store_true")
    ap.add_argument("--reference", action="store_true", help="force the reference path")
    ap.add_argument("--jsonl", action="store_true", help="the same records as JSON Lines")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        csv = Path(d) / "usage.csv"
        make(csv, a.records)
        if a.jsonl:
            csv = to_jsonl(csv)
        cat = load_catalog(PRICES)
        led = Ledger(Path(d) / "ledger.sqlite") if a.ledger else None
        t, c = time.perf_counter(), time.process_time()
        inv = bill(read_usage(csv), cat, ledger=led, fast=not a.reference)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        path = "reference" if a.reference else "fast"
        print(f"records: {a.records:,}  {csv.suffix[1:]} ({path} path)  ledger: {bool(led)}  "
              f"wall: {wall:.2f} s  cpu: {cpu:.2f} s ({a.records / wall:,.0f} records/s)")
        print(f"lines: {len(inv.lines):,}  total: {inv.to_dict()['total']} {inv.currency}  "
              f"counts: {inv.counts}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(f"peak resident memory: {peak:,.0f} MiB")
        if led:
            t = time.perf_counter()
            inv2 = bill(read_usage(csv), cat, ledger=led, fast=not a.reference)
            print(f"re-run with the ledger: {time.perf_counter() - t:.2f} s, "
                  f"total {inv2.to_dict()['total']}, counts {inv2.counts}")
            led.close()


if __name__ == "__main__":
    main()
