"""The serving validation loaders on bad input: a missing column or a malformed number is one
line and exit code 2 (validate --serving --file), and the published-measurement loader requires
each row's provenance columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.analytic.serving.validate import validate_published
from scalemodel.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "validation" / "serving_published.csv"


def _lines() -> tuple[str, list[str]]:
    body = [ln for ln in PUBLISHED.read_text().splitlines() if not ln.startswith("#")]
    return body[0], body[1:]


def _write(tmp_path: Path, head: str, rows: list[str]) -> Path:
    f = tmp_path / "validation" / "rows.csv"
    f.parent.mkdir(exist_ok=True)
    f.write_text("\n".join([head, *rows]) + "\n")
    return f


def _drop(head: str, row: str, col: str) -> tuple[str, str]:
    import csv
    import io

    names = head.split(",")
    vals = next(csv.reader(io.StringIO(row)))
    i = names.index(col)
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(vals[:i] + vals[i + 1:])
    return ",".join(names[:i] + names[i + 1:]), out.getvalue()


def _set(head: str, row: str, col: str, value: str) -> str:
    import csv
    import io

    vals = next(csv.reader(io.StringIO(row)))
    vals[head.split(",").index(col)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(vals)
    return out.getvalue()


def _mlperf_row() -> tuple[str, str]:
    head, rows = _lines()
    return head, next(r for r in rows if r.startswith("mlperf41-llama2-70b-offline-h200-x8,"))


def test_missing_column_one_line_exit_2(cli, tmp_path):
    head, row = _drop(*_mlperf_row(), "measured")
    rc, out, err = cli("validate", "--serving", "--file", str(_write(tmp_path, head, [row])))
    assert rc == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and "missing column" in line and "measured" in line, line


@pytest.mark.parametrize("col,value", [("measured", "31,302.7 tok/s"), ("tp", "two"),
                                       ("isl", "222.5"), ("max_batch", "-806"),
                                       ("measured", "0"), ("kv_fraction", "1.7")])
def test_bad_number_one_line_exit_2(cli, tmp_path, col, value):
    head, row = _mlperf_row()
    f = _write(tmp_path, head, [_set(head, row, col, value)])
    rc, out, err = cli("validate", "--serving", "--file", str(f))
    assert rc == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and repr(col) in line and "mlperf41-llama2-70b-offline-h200-x8" in line


def test_published_loader_requires_provenance_columns():
    head, row = _drop(*_mlperf_row(), "location")
    with pytest.raises(BadInput, match="missing column.*location"):
        validate_published("\n".join([head, row]), ROOT)


def test_a_priced_file_row_via_cli(cli, tmp_path):
    import json

    head, row = _mlperf_row()
    f = _write(tmp_path, head, [row])
    rc, out, err = cli("validate", "--serving", "--file", str(f), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["row_count"] == 1 and d["rows"][0]["dp"] == 8
    assert d["rows"][0]["measured"] == pytest.approx(31302.7)
