"""TensorRT-LLM's release/1.2 perf-overview edition as out-of-sample rows of
validation/serving_published.csv (trtllm12-*, source trtllm-perf-overview-v12, added in session 18,
s18-newserve).

Source: docs/source/developer-guide/perf-overview.md of the release/1.2 edition (the page rendered at
nvidia.github.io/TensorRT-LLM/1.2.0/developer-guide/perf-overview.html; its tables read in the index's
stored copy, file id 53206213621). The cells below were typed from that page's tables (output
tokens per second per GPU); the request counts from its $num_requests table. No error bound is
asserted: nothing was set from these rows, they are priced with the nearest profile
(trtllm-1.0-bench) and reported as they fall (docs/serving.md, "Rows added in session 18")."""

from __future__ import annotations

import csv
import io
import tomllib
from pathlib import Path

import pytest

from scalemodel.analytic.serving.validate import validate_published

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "validation" / "serving_published.csv"
DATA = ROOT / "src" / "scalemodel" / "specs" / "data"
V12 = "trtllm-perf-overview-v12"

# (model, gpu, layout, n) -> {(isl, osl): output tokens/s/GPU}, as printed on the 1.2 page; blank
# cells are absent. Columns B300 / GB300 (marked beta on the page) and RTX 6000 are not rows.
CELLS = {
    ("l33-70b", "b200", "tp", 1): {(1024, 1024): 6943, (1024, 8192): 3270, (8192, 1024): 1347,
                                   (32768, 1024): 279},
    ("l33-70b", "gb200", "tp", 1): {(1024, 1024): 7576, (1024, 8192): 3856, (8192, 1024): 1593,
                                    (32768, 1024): 315},
    ("l33-70b", "h200", "tp", 2): {(1024, 1024): 2637, (1024, 8192): 1995, (8192, 1024): 544,
                                   (32768, 1024): 120},
    ("qwen3-30b", "b200", "tp", 1): {(1024, 1024): 26431, (1024, 8192): 13940,
                                     (1024, 32768): 4570, (8192, 1024): 5945,
                                     (32768, 1024): 1284},
    ("qwen3-30b", "gb200", "tp", 1): {(1024, 1024): 19682, (1024, 8192): 14916,
                                      (8192, 1024): 6450, (32768, 1024): 1398},
    ("qwen3-235b", "b200", "dep", 4): {(1024, 1024): 6423, (1024, 8192): 3881,
                                       (1024, 32768): 1216, (8192, 1024): 1518,
                                       (32768, 1024): 326},
    ("qwen3-235b", "gb200", "dep", 4): {(1024, 1024): 6777, (1024, 8192): 3955,
                                        (1024, 32768): 1240, (8192, 1024): 1575,
                                        (32768, 1024): 342},
    ("qwen3-235b", "h200", "dep", 4): {(1024, 1024): 3494, (1024, 8192): 1677,
                                       (8192, 1024): 679, (32768, 1024): 143},
    ("dsr1", "h200", "dep", 8): {(1024, 1024): 1724, (1024, 8192): 1335},
}
# the page's $num_requests per length pair (no 1000/1000 line in this edition)
REQUESTS = {(1024, 1024): 3000, (8192, 1024): 1500, (1024, 8192): 1500, (32768, 1024): 1000,
            (1024, 32768): 1000}
MODEL = {"l33-70b": "validation/models/llama-3.1-70b.json", "qwen3-30b": "qwen3-30b-a3b",
         "qwen3-235b": "qwen3-235b-a22b", "dsr1": "deepseek-v3"}


def _rows() -> dict[str, dict[str, str]]:
    text = "\n".join(ln for ln in CSV.read_text().splitlines() if not ln.startswith("#"))
    return {r["id"]: r for r in csv.DictReader(io.StringIO(text)) if r["source"] == V12}


def _header() -> str:
    return "\n".join(ln for ln in CSV.read_text().splitlines()
                     if ln.startswith("#") or ln.startswith("id,"))


def test_v12_rows_read_as_printed():
    rows = _rows()
    assert len(rows) == sum(len(c) for c in CELLS.values()) == 37
    for (m, g, lay, n), cells in CELLS.items():
        for (i, o), v in cells.items():
            r = rows[f"trtllm12-{m}-{g}-{lay}{n}-{i}-{o}"]
            assert float(r["measured"]) == v
            assert (int(r["isl"]), int(r["osl"]), int(r["tp"]), int(r["dp"])) == (i, o, n, 1)
            assert int(r["requests"]) == REQUESTS[(i, o)]
            assert (r["model"], r["gpu"], r["stream"]) == (MODEL[m], g, "max-load")
            assert r["precision"] == ("fp8" if g == "h200" else "fp4")
            # the page's unit: output tokens per second per GPU (input tokens not counted)
            assert r["metric"] == "output_tokens_per_s_per_gpu"
            assert r["engine"] == "trtllm-1.0-bench"  # the nearest profile; no 1.2 profile
            # the 1.2 commands set no --kv_cache_free_gpu_mem_fraction: trtllm-bench's 0.90
            assert float(r["kv_fraction"]) == pytest.approx(0.90)
            if lay == "dep":  # DEPn: --tp n --ep n with enable_attention_dp
                assert (int(r["ep"]), r["attention_dp"]) == (n, "1")
            else:
                assert not r.get("ep") and not r.get("attention_dp")


def test_source_known():
    keys = tomllib.loads((DATA / "sources_serving.toml").read_text())
    assert keys[V12]["url"].endswith("/1.2.0/developer-guide/perf-overview.html")
    assert keys[V12]["kind"] == "measurement" and keys[V12]["date"]


def test_kv_fraction_reaches_the_pool():
    """The row's 0.90 prices the pool, not the profile's 0.95 for published runs. Under
    f x (total - profile peak - non-torch) the pool is linear in f, so with the same row at
    0.95 the token capacity grows by 0.95 / 0.90 (to within one 32-token block per layer
    rounding: 0.1% here). Llama 3.3 70B on one B200 at 1024/1024."""
    rid = "trtllm12-l33-70b-b200-tp1-1024-1024"
    line = next(ln for ln in CSV.read_text().splitlines() if ln.startswith(rid + ","))
    other = line.replace(rid + ",", rid + "-kv095,", 1).replace(",0.90,", ",0.95,", 1)
    assert other != line
    rows, skipped = validate_published("\n".join([_header(), line, other]), ROOT)
    assert not skipped
    by = {r.id: r for r in rows}
    k90, k95 = by[rid].kv_capacity_tokens, by[rid + "-kv095"].kv_capacity_tokens
    assert k95 / k90 == pytest.approx(0.95 / 0.90, rel=2e-3)
    for r in rows:
        assert r.predicted > 0 and r.error == pytest.approx(r.predicted / r.measured - 1)
