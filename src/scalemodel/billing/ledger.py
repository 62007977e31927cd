"""The billing ledger in SQLite: which record parts were billed, and the running totals.

Tables: ``parts`` (record id, period, payload hash: what was billed), ``totals`` (per period,
account, SKU and price version: the record-rounded quantity and the amount in minor units
billed so far), ``closed`` (periods that have been billed). A period that is closed takes new
usage as an adjustment: the amount of (old + new) minus what was billed, so allowances, tiers
and period increments stay right across late records.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from ..errors import BadInput

SCHEMA = """
CREATE TABLE IF NOT EXISTS parts (id TEXT, period TEXT, hash TEXT, PRIMARY KEY (id, period));
CREATE TABLE IF NOT EXISTS totals (period TEXT, account TEXT, sku TEXT, version INTEGER,
    quantity TEXT, amount_minor INTEGER, PRIMARY KEY (period, account, sku, version));
CREATE TABLE IF NOT EXISTS closed (period TEXT PRIMARY KEY, at TEXT, currency TEXT);
"""


class Ledger:
    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if not p.parent.exists():
            raise BadInput(f"--ledger: folder {str(p.parent)!r} does not exist")
        try:
            self.db = sqlite3.connect(p)
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise BadInput(f"--ledger: {p} is not a usable SQLite ledger ({e})") from None

    def parts(self) -> dict[tuple[str, str], str]:
        return {(i, per): h for i, per, h in self.db.execute("SELECT id, period, hash FROM parts")}

    def closed(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT period, currency FROM closed"))

    def total(self, key: tuple[str, str, str, int]) -> tuple[Decimal, int]:
        row = self.db.execute("SELECT quantity, amount_minor FROM totals WHERE period=? AND "
                              "account=? AND sku=? AND version=?", key).fetchone()
        return (Decimal(row[0]), int(row[1])) if row else (Decimal(0), 0)

    def commit(self, parts: list[tuple[str, str, str]],
               totals: list[tuple[str, str, str, int, str, int]], periods: list[str],
               currency: str) -> None:
        now = datetime.now(UTC).isoformat()
        with self.db:
            self.db.executemany("INSERT INTO parts VALUES (?, ?, ?)", parts)
            # an amount past SQLite's 64-bit INTEGER is stored as its decimal text (read back
            # with int() like any other)
            self.db.executemany("INSERT OR REPLACE INTO totals VALUES (?, ?, ?, ?, ?, ?)",
                                [(*t[:5], t[5] if -2**63 <= t[5] < 2**63 else str(t[5]))
                                 for t in totals])
            self.db.executemany("INSERT OR IGNORE INTO closed VALUES (?, ?, ?)",
                                [(p, now, currency) for p in periods])

    def close(self) -> None:
        self.db.close()


def totals_for(ledger: Ledger | None, period: str, account: str,
               sku: str) -> dict[int, tuple[Decimal, int]]:
    """Billed totals of one (period, account, SKU), by price version."""
    if ledger is None:
        return {}
    rows = ledger.db.execute("SELECT version, quantity, amount_minor FROM totals WHERE period=? "
                             "AND account=? AND sku=?", (period, account, sku))
    return {int(v): (Decimal(q), int(a)) for v, q, a in rows}
