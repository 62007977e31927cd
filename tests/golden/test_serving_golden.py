"""plan serve against TensorRT-LLM's published max-throughput table (v0.17 data,
docs/source/performance/perf-overview.md at commit 258c7540, validation/serving_runs.csv):
a spread of rows over models, GPUs, TP degrees and length pairs, each within the issue's
30% row bound. The whole table is `scalemodel validate --serving`."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.analytic.serving.validate import validate_serving

CSV = Path(__file__).resolve().parents[2] / "validation" / "serving_runs.csv"

# published output tokens/s (the table's "token throughput", trtllm-bench throughput)
ROWS = {
    "trtllm017-l31-8b-h100-sxm-tp1-128-2048": 21109.38,
    "trtllm017-l31-70b-h200-tp1-128-2048": 4165.68,
    "trtllm017-l31-70b-h100-sxm-tp4-1000-1000": 7430.99,
    "trtllm017-mixtral-8x7b-h100-sxm-tp2-128-2048": 22830.08,
    "trtllm017-l31-70b-a100-sxm-80gb-tp8-2048-2048": 2553.71,
    "trtllm017-l31-405b-h200-tp8-1000-1000": 3399.69,
}


@pytest.fixture(scope="module")
def results():
    rows, skipped = validate_serving(CSV.read_text(), CSV.parent.parent, only=set(ROWS))
    assert not skipped, skipped
    return {r.id: r for r in rows}


@pytest.mark.parametrize("rid", sorted(ROWS))
def test_published_row_within_30_percent(results, rid):
    r = results[rid]
    assert r.measured == pytest.approx(ROWS[rid])
    assert abs(r.predicted / ROWS[rid] - 1) <= 0.30, (r.predicted, ROWS[rid])


def test_unbundled_gpus_are_reported_not_dropped():
    # the table's GPUs are all bundled now (gh200 and l40s since 2026-12-02): a row on a GPU
    # with no spec is made by renaming one row's GPU
    text = CSV.read_text().replace(",l40s,L40S,", ",no-such-gpu,L40S,")
    rows, skipped = validate_serving(text, CSV.parent.parent,
                                     only={"trtllm017-l31-8b-l40s-tp1-128-128"})
    assert not rows and len(skipped) == 1 and "no-such-gpu" in skipped[0][1]


def test_every_row_of_the_table_is_priced():
    # gh200 (35 rows) and l40s (54 rows) were skipped until their specs were added: 373 of 373
    rows, skipped = validate_serving(CSV.read_text(), CSV.parent.parent,
                                     only={"trtllm017-l31-8b-gh200-tp1-128-128",
                                           "trtllm017-l31-70b-l40s-tp8-1000-1000"})
    assert not skipped, skipped
    assert {r.gpu for r in rows} == {"gh200", "l40s"}
