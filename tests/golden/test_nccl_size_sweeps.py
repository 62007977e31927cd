"""Published nccl-tests size sweeps (validation/nccl_size_sweeps.csv) against the collective engine,
size by size: the regime between the small-message latency and the large-message plateau.

Sources (each row names its file at a commit):
- 8x A100 SXM, one node: stas00/ml-engineering network/README.md at commit 48b75ddc (2023-12-15),
  ``all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50``, the time column (us);
- 8x H100 SXM, one p5.48xlarge: aws-samples/awsome-distributed-training
  micro-benchmarks/nccl-tests/aws-batch/README.md at commit 6752eb10, the out-of-place time
  column. In sample: collectives.toml [in_switch_size_curve.nvlink4] is this log;
- 8x H200 SXM, one node: stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md at
  commit c53741b8, torch.distributed all_reduce_bench.py with NCCL 2.27.7, the busbw column.
  Out of sample for the NVLS curve (same NVLink 4 switch, another GPU, another NCCL and a
  per-call timer).

Tolerance 15%, as for the plateaus of nccl_tests.csv. Rows marked ``miss`` do not fit and stay
reported with the reason in their note; they are strict xfails, so a change that makes one fit
fails here until its status is updated. The size-by-size check itself runs in
test_nccl_tests_rows.py, over both files' rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli as _cli
from scalemodel.analytic.nccl_validate import load_rows

CSV = Path(__file__).resolve().parents[2] / "validation" / "nccl_size_sweeps.csv"
ROWS = load_rows(CSV)


def test_rows_name_a_file_at_a_commit():
    for r in ROWS:
        url = r["source_url"]
        assert url.startswith("https://github.com/") and "/blob/" in url, url
        commit = url.split("/blob/")[1].split("/")[0]
        assert len(commit) >= 8 and all(c in "0123456789abcdef" for c in commit), url


def test_the_a100_sweep_reads_off_its_busbw_column():
    """The A100 log prints time, algbw and busbw; the rows keep the time. Its busbw column is
    S / t x 2 (n - 1) / n (to the rounding of the printed time): 16 MiB in 276.6 us is 60.66 GB/s
    algbw, 106.2 GB/s busbw (printed 60.66 and 106.16); 16 GiB in 127,997 us is 234.9 GB/s busbw
    (printed 234.89)."""
    by = {int(r["bytes"]): float(r["measured"]) for r in ROWS if r["id"].startswith("a100-8-sweep")}
    assert 16_777_216 / (by[16_777_216] * 1e-6) / 1e9 == pytest.approx(60.66, abs=0.02)
    assert 16_777_216 / (by[16_777_216] * 1e-6) * 1.75 / 1e9 == pytest.approx(106.16, abs=0.05)
    assert 17_179_869_184 / (by[17_179_869_184] * 1e-6) * 1.75 / 1e9 == pytest.approx(234.89,
                                                                                       abs=0.01)


def test_comm_validate_reads_the_sweep_file(capsys):
    import json

    rc, out, _ = _cli(capsys, "comm", "validate", "--file", str(CSV), "--json")
    d = json.loads(out)
    assert rc == 0 and d["row_count"] == len(ROWS)
    row = next(r for r in d["rows"] if r["id"] == "a100-8-sweep-16gib")
    assert row["metric"] == "time_us" and row["measured"] == 127997.0
    assert row["error"] == pytest.approx(row["predicted"] / 127997.0 - 1)


def test_the_b200_nvls_fraction_from_its_8_gib_plateau():
    """collectives.toml [in_switch.nvlink5] algbw_fraction, from stas00/ml-engineering
    network/README.md at 744d01e1 (SHARP section): nccl-tests all-reduce at 8 GiB on one
    p6-b200.48xlarge, 8 GPUs, NCCL 2.27.7, 838.0 GB/s busbw with NVLS. busbw / (2 (n - 1) / n) =
    838.0 / 1.75 = 478.9 GB/s algbw over NVLink 5's 900 GB/s per direction = 0.532. The Hopper
    fraction it replaces (0.61, an assumption) read 959 GB/s, +14.5%; at 6 and 7 GPUs, out of
    this derivation, +17.4% and +15.8% (now +2.4% and +1.0%)."""
    from scalemodel.analytic.collectives import in_switch

    frac = 838.0 / 1.75 / 900.0
    assert frac == pytest.approx(0.532, abs=5e-4)
    assert in_switch("nvlink5")["algbw_fraction"] == pytest.approx(frac, abs=5e-4)
    assert pytest.approx(960.8, abs=0.1) == 0.61 * 900.0 * 1.75  # the old plateau, busbw
