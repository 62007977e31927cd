"""A validation row whose published figure is not a positive number is skipped with one reason
naming the column (the other rows are still priced); nothing is dropped silently."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from scalemodel.analytic.validate import validate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", ""])
def test_bad_measured_is_skipped_with_its_reason(value):
    rows = list(csv.DictReader(io.StringIO((ROOT / "validation" / "training_runs.csv").read_text())))
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerow(dict(rows[0], measured=value))
    w.writerow(rows[1])
    results, skipped = validate(out.getvalue())
    assert [r.id for r in results] == [rows[1]["id"]]
    assert len(skipped) == 1 and skipped[0][0] == rows[0]["id"]
    assert "'measured' must be a positive number" in skipped[0][1]
