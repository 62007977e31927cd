"""TensorRT-LLM's v0.19 max-throughput table (trtllm-bench on the PyTorch backend) as out-of-sample
rows of validation/serving_published.csv (trtllm019-*, source trtllm-perf-overview-v019, added in
session 19, s19-trt019).

Source: docs/source/performance/perf-overview.md at the v0.19.0 tag, rendered at
nvidia.github.io/TensorRT-LLM/0.19.0/performance/perf-overview.html. The NVIDIA repository is too
large to fetch here; the tables were read in the index's stored copy of the markdown (file id
2997649200, no commit named), matched to the 0.19.0 page by its opening text and the first 14
cells of its first table (Llama 3.3 70B FP4 on B200, 128/128, 128/2048 and 128/4096 at TP 1-8,
500/2000 at TP 1-2), which the index's copy of the rendered page shows.
The cells below were typed from that copy (Total Output Throughput, tokens/sec), the request
counts from its $num_requests table. No error bound is asserted: nothing was set from these rows,
they are priced with the nearest profile (trtllm-0.20) and reported as they fall (docs/serving.md,
s19-trt019)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from conftest import published_serving_rows
from scalemodel.analytic.serving.validate import validate_published

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "validation" / "serving_published.csv"
DATA = ROOT / "src" / "scalemodel" / "specs" / "data"
V019 = "trtllm-perf-overview-v019"


def _rows(source: str = V019) -> dict[str, dict[str, str]]:
    return published_serving_rows(source)


# cells as printed on the v0.19 page (tokens/sec): (model, gpu, tp, isl, osl)
CELLS = {
    # the first row of the page's first table, matched against the 0.19.0 rendered page (as are
    # 128/2048, 128/4096 and TP 1-2 of 500/2000)
    ("l33-70b", "b200", 1, 128, 128): 11253.28,
    ("l33-70b", "b200", 2, 128, 128): 17867.66,
    ("l33-70b", "b200", 4, 128, 128): 24944.50,
    ("l33-70b", "b200", 8, 128, 128): 27471.49,
    ("l33-70b", "b200", 2, 128, 4096): 8711.88,
    ("l33-70b", "b200", 2, 500, 2000): 10602.27,
    ("l33-70b", "b200", 8, 20000, 2000): 3167.30,
    ("l31-405b", "b200", 8, 2048, 128): 953.57,
    ("l31-8b", "h200", 1, 2048, 2048): 12022.38,
    ("l31-8b", "h100-sxm", 1, 128, 4096): 13640.35,
    ("l31-70b", "h200", 8, 128, 2048): 20750.58,
    ("l31-70b", "h100-sxm", 1, 2048, 2048): 357.98,
    ("l31-70b", "h100-sxm", 2, 20000, 2000): 408.43,
    ("l31-405b", "h200", 8, 1000, 1000): 3332.15,
    ("l31-405b", "h100-sxm", 8, 20000, 2000): 370.26,
}
# blank cells on the page: Llama 3.1 70B FP8 on one H100 at these length pairs
BLANK = [("l31-70b", "h100-sxm", 1, 128, 4096), ("l31-70b", "h100-sxm", 1, 500, 2000),
         ("l31-70b", "h100-sxm", 1, 20000, 2000)]
# the page's $num_requests per length pair (it has no 1024/2048 line)
REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500,
            (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000,
            (500, 2000): 3000, (20000, 2000): 1000}
MODEL = {"l33-70b": "validation/models/llama-3.1-70b.json",
         "l31-70b": "validation/models/llama-3.1-70b.json",
         "l31-8b": "validation/models/llama-3.1-8b.json", "l31-405b": "llama-3-405b"}


def _rid(m, g, tp, i, o):
    return f"trtllm019-{m}-{g}-tp{tp}-{i}-{o}"


def test_table_size_and_cells():
    rows = _rows()
    # non-blank cells counted on the page, eleven length pairs per column: 70B FP4 on B200 4 x 11,
    # 405B FP4 on B200 (TP 8 only) 11, 8B FP8 11 + 11, 70B FP8 H200 4 x 11 and H100 4 x 11 - 3,
    # 405B FP8 11 + 11
    assert len(rows) == 44 + 11 + 22 + 44 + 41 + 22 == 184
    for (m, g, tp, i, o), v in CELLS.items():
        r = rows[_rid(m, g, tp, i, o)]
        assert float(r["measured"]) == pytest.approx(v)
        assert (int(r["isl"]), int(r["osl"]), int(r["tp"]), int(r["pp"]), int(r["dp"])) == (
            i, o, tp, 1, 1)
        assert (r["model"], r["gpu"], r["stream"]) == (MODEL[m], g, "max-load")
        assert r["precision"] == ("fp4" if g == "b200" else "fp8")
        assert r["metric"] == "output_tokens_per_s"
    for key in BLANK:
        assert _rid(*key) not in rows
    for r in rows.values():
        pair = (int(r["isl"]), int(r["osl"]))
        if pair in REQUESTS:
            assert int(r["requests"]) == REQUESTS[pair]
        else:  # 1024/2048: the row says what it took
            assert pair == (1024, 2048)
            assert int(r["requests"]) == 1500 and "no 1024/2048 row" in r["notes"]
        # the nearest profile; the run's KV fraction and batch limits are the profile's
        # (0.95, trtllm-bench's tuning) since the page states no per-cell value
        assert r["engine"] == "trtllm-0.20"
        assert not r["kv_fraction"] and not r["max_batch"]


def test_a_distinct_edition():
    """The v0.19 cells are not the v0.20 edition's: the same cell on the two pages (Llama 3.3 70B
    FP4, B200 TP 1, 128/128) reads 11,253.28 at v0.19 and 10,994.48 at v0.20; the v0.19 FP8
    checkpoint is Llama 3.1 70B (v0.20: Llama 3.3 70B), and 405B FP4 has only TP 8 (v0.20: TP 4
    and 8)."""
    v019, v020 = _rows(), _rows("trtllm-perf-overview-v020")
    assert float(v019["trtllm019-l33-70b-b200-tp1-128-128"]["measured"]) == 11253.28
    assert float(v020["trtllm020-l33-70b-b200-tp1-128-128"]["measured"]) == 10994.48
    assert {r["model_name"] for r in v019.values() if r["precision"] == "fp8"
            and r["model"].endswith("70b.json")} == {"nvidia/Llama-3.1-70B-Instruct-FP8"}
    assert {int(r["tp"]) for r in v019.values() if r["model_name"].endswith("405B-Instruct-FP4")
            } == {8}


def test_source_known():
    keys = tomllib.loads((DATA / "sources_serving.toml").read_text())
    s = keys[V019]
    assert s["url"].endswith("/0.19.0/performance/perf-overview.html")
    assert s["kind"] == "measurement" and s["date"] and "2997649200" in s["title"]


def test_rows_priced_with_the_nearest_profile():
    """One cell of each section priced end to end (the full table runs in validate --serving)."""
    picks = {_rid("l33-70b", "b200", 2, 1000, 1000), _rid("l31-405b", "b200", 8, 5000, 500),
             _rid("l31-8b", "h200", 1, 128, 2048), _rid("l31-70b", "h100-sxm", 4, 2048, 128),
             _rid("l31-405b", "h200", 8, 128, 4096)}
    priced, skipped = validate_published(CSV.read_text(), ROOT, picks)
    assert not skipped
    assert {r.id for r in priced} == picks
    for r in priced:
        assert r.engine == "trtllm-0.20" and r.predicted > 0
        assert r.error == pytest.approx(r.predicted / r.measured - 1)
