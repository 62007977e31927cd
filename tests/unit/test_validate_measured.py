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
