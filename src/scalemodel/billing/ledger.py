"""The billing ledger in SQLite: which record parts were billed, and the running totals.

Tables: ``parts`` (record id, period, payload hash: what was billed), ``totals`` (per period,
account, SKU and price version: the record-rounded quantity and the amount in minor units
billed so far), ``closed`` (periods that have been billed). A period that is closed takes new
usage as an adjustment: the amount of (old + new) minus what was billed, so allowances, tiers
and period increments stay right across late records.

Concurrency: a bill reads the ledger (parts, closed periods, totals) and writes it back inside
one ``BEGIN IMMEDIATE`` transaction (:meth:`Ledger.transaction`), so two processes billing
into one ledger never interleave: the second waits for the first to commit and then reads what
it wrote. The result is the one of running them one after the other. A writer waits at most
``wait_s`` seconds for the lock (SQLite's busy timeout) and then stops with one line, having
billed nothing. A crash (kill -9) inside the transaction leaves the ledger as it was before
it began: SQLite's rollback journal undoes the partial write on the next open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
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
DEFAULT_WAIT_S = 60.0


class Ledger:
    def __init__(self, path: str | Path, wait_s: float = DEFAULT_WAIT_S) -> None:
        p = Path(path)
        if not p.parent.exists():
            raise BadInput(f"--ledger: folder {str(p.parent)!r} does not exist")
        self.path = p
        self.wait_s = wait_s
        self.in_tx = False
        try:
            # autocommit mode: transactions are begun and ended explicitly (transaction())
            self.db = sqlite3.connect(p, timeout=wait_s, isolation_level=None)
            # a page cache of 64 MiB: a large bill's new parts stay in memory until the commit
            # instead of spilling to disk (each spill syncs the journal) mid-transaction
            self.db.execute("PRAGMA cache_size = -65536")
            with self.transaction():
                for stmt in SCHEMA.split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
        except sqlite3.DatabaseError as e:
            raise BadInput(f"--ledger: {p} is not a usable SQLite ledger ({e})") from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the ledger's write lock from the first read to the commit (serializable);
        anything raised inside rolls the whole bill back."""
        if self.in_tx:  # nested: the outer transaction covers it
            yield
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise BadInput(f"--ledger: {self.path} is busy: another bill held it for more "
                               f"than {self.wait_s:g} s (--ledger-wait); nothing was billed, "
                               "run again") from None
            raise
        self.in_tx = True
        try:
            yield
        except BaseException:
            self.in_tx = False
            self.db.execute("ROLLBACK")
            raise
        self.in_tx = False
        try:
            self.db.execute("COMMIT")
        except sqlite3.OperationalError as e:  # pragma: no cover - a reader held the lock
            self.db.execute("ROLLBACK")
            raise BadInput(f"--ledger: {self.path} could not be committed ({e}); nothing was "
                           "billed, run again") from None

    def parts(self) -> dict[tuple[str, str], str]:
        return {(i, per): h for i, per, h in self.db.execute("SELECT id, period, hash FROM parts")}

    def part(self, rid: str, period: str) -> str | None:
        """The payload hash billed for (id, period), or None."""
        row = self.db.execute("SELECT hash FROM parts WHERE id=? AND period=?",
                              (rid, period)).fetchone()
        return None if row is None else row[0]

    def has_parts(self) -> bool:
        return self.db.execute("SELECT 1 FROM parts LIMIT 1").fetchone() is not None

    def closed(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT period, currency FROM closed"))

    def total(self, key: tuple[str, str, str, int]) -> tuple[Decimal, int]:
        row = self.db.execute("SELECT quantity, amount_minor FROM totals WHERE period=? AND "
                              "account=? AND sku=? AND version=?", key).fetchone()
        return (Decimal(row[0]), int(row[1])) if row else (Decimal(0), 0)

    def add_parts(self, parts: list[tuple[str, str, str]]) -> None:
        """Record billed parts (inside :meth:`transaction`: undone if the bill fails)."""
        with self.transaction():
            self.db.executemany("INSERT INTO parts VALUES (?, ?, ?)", parts)

    def commit(self, parts: list[tuple[str, str, str]],
               totals: list[tuple[str, str, str, int, str, int]], periods: list[str],
               currency: str) -> None:
        now = datetime.now(UTC).isoformat()
        with self.transaction():
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
