"""The ledger under concurrency and crashes (issue 19): bills run in separate processes at the
same time give exactly the bills and ledger of running them one after the other, in some order;
a writer that cannot get the ledger gives up with one line; kill -9 at any point leaves a ledger
that a rerun completes.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalemodel.billing.catalog import load_catalog
from scalemodel.billing.engine import bill
from scalemodel.billing.ledger import Ledger
from scalemodel.billing.usage import read_usage
from scalemodel.errors import BadInput

SRC = str(Path(__file__).resolve().parents[2] / "src")
# one SKU: 1 cent a token past 100,000 free tokens per account and month (the case)
PRICES = """currency = "USD"
[sku.tok]
free = 100000
[[sku.tok.prices]]
from = "2026-01-01T00:00:00Z"
unit_price = "0.01"
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC}


def _write_tokens(path: Path, rows: list[tuple[str, str, str, int]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("id,account,sku,start,quantity\n")
        for rid, acct, start, q in rows:
            f.write(f"{rid},{acct},tok,{start},{q}\n")


def _start(usage: Path, prices: Path, ledger: Path, out: Path, period: str | None = None,
           delay: float = 0.0) -> subprocess.Popen:
    code = ("import sys, time; time.sleep(float(sys.argv[1])); from scalemodel.cli import main; "
            "raise SystemExit(main(sys.argv[2:]))")
    argv = [sys.executable, "-c", code, str(delay), "bill", "--usage", str(usage), "--prices",
            str(prices), "--ledger", str(ledger), "--json"]
    if period:
        argv += ["--period", period]
    return subprocess.Popen(argv, stdout=open(out, "w"), stderr=subprocess.PIPE, env=_env(),
                            text=True)


def _state(ledger: Path) -> tuple[list, list, list]:
    db = sqlite3.connect(ledger)
    try:
        # a kill between SQLite creating the file and the schema's commit leaves a file with no
        # tables: the ledger holds nothing, as after a kill before the open
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"parts", "totals", "closed"} <= names:
            return ([], [], [])
        return tuple(sorted(db.execute(q).fetchall()) for q in (
            "SELECT * FROM parts", "SELECT * FROM totals", "SELECT period, currency FROM closed"))
    finally:
        db.close()


def test_two_processes_one_account_lose_nothing(tmp_path):
    # The measurement: two files of 300,000 tokens each for one account, 100,000 free.
    # One after the other they bill 200,000 + 300,000 cents; the totals row holds 600,000.
    prices = tmp_path / "p.toml"
    prices.write_text(PRICES)
    files = []
    for k in range(2):
        rows = [(f"f{k}-{i}", "acct", "2026-11-02T00:00:00Z", 30) for i in range(10_000)]
        files.append(tmp_path / f"u{k}.csv")
        _write_tokens(files[-1], rows)
    ledger = tmp_path / "l.sqlite"
    procs = [_start(f, prices, ledger, tmp_path / f"o{k}.json") for k, f in enumerate(files)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    amounts = sorted(json.loads((tmp_path / f"o{k}.json").read_text())["total_minor_units"]
                     for k in range(2))
    assert amounts == [200_000, 300_000]
    parts, totals, _ = _state(ledger)
    assert len(parts) == 20_000
    assert [(t[4], t[5]) for t in totals] == [("600000", 500_000)]


def _random_files(rng: random.Random, d: Path, n: int) -> list[Path]:
    """n usage files over shared ids and accounts: repeats across files (already billed),
    conflicting payloads, two months (late usage becomes an adjustment)."""
    files = []
    for k in range(n):
        rows = []
        for _ in range(rng.randrange(200, 2000)):
            i = rng.randrange(3000)
            month = rng.choice(["2026-10", "2026-11"])
            q = rng.choice([1000, 50_000, 7, 120_000]) if rng.random() < 0.9 else i % 5
            rows.append((f"r{i}", f"a{i % 3}", f"{month}-0{1 + i % 9}T00:00:00Z", q))
        files.append(d / f"u{k}.csv")
        _write_tokens(files[-1], rows)
    return files


def _serial(files: list[Path], periods: list, prices: Path, ledger: Path) -> tuple:
    cat = load_catalog(prices)
    led = Ledger(ledger)
    out = []
    for f, per in zip(files, periods, strict=True):
        try:
            out.append(json.loads(json.dumps(
                bill(read_usage(f), cat, period=per, ledger=led).to_dict())))
        except BadInput as e:
            out.append(str(e))
    led.close()
    return out, _state(ledger)


@pytest.mark.parametrize("seed", [1, 2])
def test_four_processes_equal_some_serial_order(tmp_path, seed):
    rng = random.Random(seed)
    prices = tmp_path / "p.toml"
    prices.write_text(PRICES)
    files = _random_files(rng, tmp_path, 4)
    files[3] = files[rng.randrange(3)]  # the same file twice at once
    periods = [rng.choice([None, "2026-11", "2026-10"]) for _ in files]
    ledger = tmp_path / "l.sqlite"
    procs = [_start(f, prices, ledger, tmp_path / f"o{k}.json", per, rng.uniform(0, 0.3))
             for k, (f, per) in enumerate(zip(files, periods, strict=True))]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode in (0, 2) for p in procs), errs
    assert not any("Traceback" in e for e in errs), errs
    got = [json.loads((tmp_path / f"o{k}.json").read_text()) if p.returncode == 0
           else errs[k].strip().split("error: ", 1)[1] for k, p in enumerate(procs)]
    state = _state(ledger)
    # some order of the four, run one after the other, gives every bill and the ledger
    for k, order in enumerate(itertools.permutations(range(4))):
        ref = tmp_path / f"serial{k}.sqlite"
        bills, ref_state = _serial([files[i] for i in order], [periods[i] for i in order],
                                   prices, ref)
        if ref_state == state and all(bills[j] == got[i] for j, i in enumerate(order)):
            return
    pytest.fail("no serial order of the four bills reproduces the concurrent result")


def test_busy_ledger_gives_up_in_one_line(tmp_path):
    prices = tmp_path / "p.toml"
    prices.write_text(PRICES)
    usage = tmp_path / "u.csv"
    _write_tokens(usage, [("r1", "a", "2026-11-02T00:00:00Z", 5)])
    ledger = tmp_path / "l.sqlite"
    Ledger(ledger).close()
    holder = sqlite3.connect(ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        r = subprocess.run([sys.executable, "-m", "scalemodel", "bill", "--usage", str(usage),
                            "--prices", str(prices), "--ledger", str(ledger), "--ledger-wait",
                            "0.5"], capture_output=True, text=True, env=_env(), timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "busy" in r.stderr
    assert "nothing was billed" in r.stderr
    assert _state(ledger) == ([], [], [])


def test_kill_9_at_any_point_leaves_a_ledger_a_rerun_completes(tmp_path):
    prices = tmp_path / "p.toml"
    prices.write_text(PRICES)
    usage = tmp_path / "u.csv"
    _write_tokens(usage, [(f"r{i}", f"a{i % 7}", f"2026-11-{1 + i % 28:02d}T00:00:00Z",
                           1 + i % 9000) for i in range(60_000)])
    clean = tmp_path / "clean.sqlite"
    expected = _serial([usage], [None], prices, clean)[1]
    rng = random.Random(7)
    for k in range(4):
        ledger = tmp_path / f"l{k}.sqlite"
        p = _start(usage, prices, ledger, tmp_path / "o.json")
        time.sleep(rng.uniform(0.3, 2.5))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        st = _state(ledger) if ledger.exists() else ([], [], [])
        # all or nothing: the interrupted bill left either nothing or all of it
        assert st in (([], [], []), expected) or p.returncode == 0
        rerun = _serial([usage], [None], prices, ledger)[1]
        assert rerun == expected
