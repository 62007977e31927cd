"""A training validation row's layout columns and model dimensions are checked as the CLI checks
them (s19-review): a value the planner cannot run is skipped with one reason naming the column,
never a traceback (zero=9 raised a KeyError in planner.check_offered) and never a row priced
as None without a reason (micro_batch 0, hidden -1 gave predicted None)."""

from __future__ import annotations

import pytest

from conftest import csv_text, validation_rows
from scalemodel.analytic.validate import validate


@pytest.mark.parametrize(("column", "value", "needle"), [
    ("zero", "9", "zero"),  # ZeRO stages are 0..3 (plan train --layout zero=9 is refused too)
    ("micro_batch", "0", "micro_batch"),
    ("vpp", "-2", "vpp"),
    ("hidden", "-1", "hidden"),
    ("layers", "-3", "layers"),
])
def test_bad_row_value_is_skipped_with_its_reason(column, value, needle):
    rows = validation_rows("training_runs.csv")
    assert not rows[0]["model"].strip()  # the row states its own dimensions
    results, skipped = validate(csv_text([dict(rows[0], **{column: value}), rows[1]]))
    assert [r.id for r in results] == [rows[1]["id"]]
    assert len(skipped) == 1 and skipped[0][0] == rows[0]["id"]
    assert needle in skipped[0][1]
