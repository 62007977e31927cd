"""CLI: JSON keys fixed by the issue, and bad input as one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalemodel.cli import main

ROOT = Path(__file__).resolve().parents[2]
PRICES = str(ROOT / "examples" / "billing" / "prices.toml")
USAGE = str(ROOT / "examples" / "billing" / "usage.csv")


def test_cluster_json_keys(capsys):
    assert main(["cluster", "simulate", "--trace", "synthetic", "--jobs", "200", "--nodes", "8",
                 "--policy", "preempt", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("utilization", "useful_utilization", "jct_p50_s", "jct_p99_s",
              "queue_delay_mean_s", "fragmentation_mean", "preemptions", "lost_gpu_hours",
              "jobs_completed"):
        assert k in d


def test_bill_json_keys_and_money_strings(capsys):
    assert main(["bill", "--usage", USAGE, "--prices", PRICES, "--period", "2026-11",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["currency"] == "USD" and isinstance(d["total"], str)
    assert isinstance(d["total_minor_units"], int)
    for ln in d["lines"]:
        for k in ("sku", "quantity", "billed_quantity", "unit_price", "amount"):
            assert isinstance(ln[k], str)
    assert set(d["counts"]) >= {"read", "billed", "duplicates", "unbilled"}
    assert all({"id", "reason"} <= set(u) for u in d["unbilled"])
    assert sum(ln["amount_minor_units"] for ln in d["lines"]) == d["total_minor_units"]


@pytest.mark.parametrize("argv", [
    ["cluster", "simulate", "--policy", "random"],
    ["cluster", "simulate", "--trace", "/nonexistent.csv"],
    ["cluster", "simulate", "--nodes", "0"],
    ["cluster", "simulate", "--quota", "teamA"],
    ["cluster", "simulate", "--trace", "synthetic", "--load", "-1"],
    ["bill", "--usage", USAGE, "--prices", "/nonexistent.toml"],
    ["bill", "--usage", "/nonexistent.csv", "--prices", PRICES],
    ["bill", "--usage", USAGE, "--prices", PRICES, "--period", "November"],
    ["bill", "--usage", USAGE, "--prices", PRICES, "--strict"],
])
def test_bad_input_one_line_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        rc = main(argv)
        raise SystemExit(rc)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1


def test_bad_price_file(tmp_path, capsys):
    p = tmp_path / "p.toml"
    p.write_text('currency = "USD"\n[sku.a]\n[[sku.a.prices]]\nfrom = "2026-01-01"\n'
                 'unit_price = 0.1\n')
    assert main(["bill", "--usage", USAGE, "--prices", str(p)]) == 2
    assert "float" in capsys.readouterr().err


def test_answers_build():
    from scalemodel.questions import build_answer

    r = build_answer("billing", {})
    assert r.followups and r.data["invoice"]["total"] == "1.42"
