"""A validation row whose published figure is not a positive number is skipped with one reason
naming the column (the other rows are still priced); nothing is dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import csv_text, validation_rows
from scalemodel.analytic.validate import validate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", ""])
def test_bad_measured_is_skipped_with_its_reason(value):
    rows = validation_rows("training_runs.csv")
    results, skipped = validate(csv_text([dict(rows[0], measured=value), rows[1]]))
    assert [r.id for r in results] == [rows[1]["id"]]
    assert len(skipped) == 1 and skipped[0][0] == rows[0]["id"]
    assert "'measured' must be a positive number" in skipped[0][1]


def _row(convention: str) -> dict:
    return next(r for r in validation_rows("training_runs.csv")
                if r["convention"].strip() == convention)


@pytest.mark.parametrize("convention, metric", [
    ("tokens", "mfu"),               # was compared as tokens/s per GPU against an MFU
    ("tokens", "tflops_per_gpu"),    # the same, against TFLOP/s
    ("megatron_eq3", "tokens_per_s_per_gpu"),  # was refused by a message listing this metric
])
def test_metric_that_its_convention_cannot_give_is_skipped_with_its_reason(convention, metric):
    """s19-review2: the convention decides what is predicted (analytic/validate.py
    predicted_metric: 'tokens' gives tokens/s per GPU, a FLOP convention TFLOP/s or MFU), so a
    metric column naming another quantity is a bad row, not one to compare across units."""
    row = _row(convention)
    results, skipped = validate(csv_text([dict(row, metric=metric)]))
    assert not results and len(skipped) == 1
    assert "metric" in skipped[0][1] and convention in skipped[0][1]


def test_every_bundled_row_names_a_metric_its_convention_gives():
    for name in ("training_runs.csv", "published_runs_2026.csv"):
        results, skipped = validate((ROOT / "validation" / name).read_text())
        assert not [s for s in skipped if "metric" in s[1]], name
