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
    """The worked example of questions/billing.py, priced by hand from its own RECORDS/CATALOG.

    GPU-hour at $2.49 per 3,600 GPU-s, each GPU billed per started minute, 60 s minimum:
      g1: 8 GPUs x 30 s -> 8 x 60 s  =   480 GPU-s
      g2: 8 GPUs x 61 s -> 8 x 120 s =   960 GPU-s
      g3: 1 GPU 23:50-00:10, the November part only = 600 GPU-s
      2,040 GPU-s x 2.49 / 3600 = $1.411 -> $1.41 (half-up, one rounding per line)
    tokens at $0.0025 per started 1K: 1,001 tokens (the duplicate t1 counted once) -> 2,000
      2 x 0.0025 = $0.005 -> $0.01 (half-up)
    total $1.42; the tpu-hour record is an unknown SKU and stays unbilled.
    """
    from decimal import ROUND_HALF_UP, Decimal

    from scalemodel.questions import build_answer

    cent = Decimal("0.01")
    gpu_s = 8 * 60 + 8 * 120 + 600
    gpu = (Decimal(gpu_s) * Decimal("2.49") / 3600).quantize(cent, ROUND_HALF_UP)
    tok = (2 * Decimal("0.0025")).quantize(cent, ROUND_HALF_UP)
    assert (gpu_s, gpu, tok) == (2040, Decimal("1.41"), Decimal("0.01"))
    r = build_answer("billing", {})
    inv = r.data["invoice"]
    lines = {ln["sku"]: ln for ln in inv["lines"]}
    assert lines["gpu-hour"]["billed_quantity"] == str(gpu_s)
    assert lines["tokens"]["billed_quantity"] == "2000"
    assert r.followups and inv["total"] == str(gpu + tok) == "1.42"


OPENB_HEAD = b"name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
OURS_HEAD = b"id,submit_s,gpus,duration_s\n"


@pytest.mark.parametrize("body", [
    b"\xff\xfe not text\n",                                  # not UTF-8 in the header
    OPENB_HEAD + b"p1,1,1000,LS,0,10,\xff\n",                # openb, bad byte in a row
    OURS_HEAD + b"a,0,1,5\nb,1,1,\xe9\n",                    # our format, bad byte in a row
    OURS_HEAD + b'a,0,1,"' + b"x" * 200_000 + b'"\n',        # csv.Error: field over the limit
])
def test_bad_trace_file_one_line_exit_2(tmp_path, body, capsys):
    p = tmp_path / "bad.csv"
    p.write_bytes(body)
    assert main(["cluster", "simulate", "--trace", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--trace: bad.csv" in err
    assert "Traceback" not in err


def test_unreadable_trace_is_bad_input(tmp_path):
    from scalemodel.errors import BadInput
    from scalemodel.traces.alibaba_gpu import is_openb, read_openb
    from scalemodel.traces.jobs import read_jobs_csv

    d = tmp_path / "dir.csv"
    d.mkdir()                       # open() on a folder raises an OSError, even for root
    for f in (is_openb, read_openb):
        with pytest.raises(BadInput, match="cannot be read"):
            f(d)
    with pytest.raises(BadInput, match="no such file"):
        read_jobs_csv(d)


@pytest.mark.parametrize("suffix, body", [
    (".csv", b"id,account,sku,start,end,quantity\n\xff\xfe,bad\n"),
    (".jsonl", b'{"id": "a", "account": "x", "sku": "gpu-hour", "quantity": "1"}\n\xff\n'),
])
def test_usage_that_is_not_utf8_is_one_line(tmp_path, capsys, suffix, body):
    p = tmp_path / f"usage{suffix}"
    p.write_bytes(body)
    assert main(["bill", "--usage", str(p), "--prices", PRICES]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err
