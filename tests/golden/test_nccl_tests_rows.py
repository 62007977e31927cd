"""Every published nccl-tests row of validation/nccl_tests.csv against the collective engine.

Each row names its source (the issue thread in ``source_url``) and the figure read off its table.
Tolerances, and why:
- 15% on large-message plateaus: the spread between published plateaus of one system (476 vs
  480 GB/s on HGX H100, 365-370 for 2..8 GPUs, 46-48 GB/s per NDR NIC) is a few percent, and
  the issue asks for 15%;
- 20% on two rows that are not plateaus: a "~200" read at 1 GiB (nccl-tests#149) and an
  all-to-all (nccl-tests#267) that the model prices without congestion;
- 25% on small-message times: the measured spread inside one row (24-32 us, 46-48 us,
  5.6-6.0 us) is up to +-14%, and NCCL's latency table is quantised per hop.
Rows marked ``miss`` do not fit and stay reported (docs/comm.md says why); they are strict
xfails, so a change that makes one fit fails here until its status is updated.
"""

from pathlib import Path

import pytest

from conftest import run_cli as _cli
from scalemodel.analytic.nccl_validate import load_rows, predict_row

ROWS = load_rows()


SWEEPS = load_rows(Path(__file__).resolve().parents[2] / "validation" / "nccl_size_sweeps.csv")


# both files' rows (this one's plateaus and small messages, nccl_size_sweeps.csv's size sweeps,
# whose own module says why) through the one check
@pytest.mark.parametrize("row", ROWS + SWEEPS, ids=[r["id"] for r in ROWS + SWEEPS])
def test_row_within_tolerance(row, request):
    if row["status"] == "miss":
        request.applymarker(pytest.mark.xfail(strict=True, reason=row["note"]))
    r = predict_row(row)
    assert abs(r.error) <= r.tolerance, (row["source_url"], r.predicted, r.measured)


def test_rows_name_a_published_source_and_the_issue_cases_are_in():
    # NVIDIA's repositories' issue threads, or NVIDIA's own GTC session (the all-to-all plateaus)
    assert all(r["source_url"].startswith(("https://github.com/NVIDIA/",
                                           "https://www.nvidia.com/en-us/on-demand/session/"))
               for r in ROWS)
    ids = {r["id"] for r in ROWS}
    # the rows issue 16 names: 2 nodes x 4 HDR NICs (NCCL runs ring), 2-node H100 (NVLSTree)
    assert {"a100-hdr4-2n-100", "h100-ndr-2n-309"} <= ids


@pytest.mark.parametrize("rid, algorithm", [
    # nccl-tests#100: NCCL's default on 2 HGX A100 with 4 HDR NICs runs ring (the old physical
    # minimum picked the tree and read +96%)
    ("a100-hdr4-2n-100", "ring"),
    # nccl-tests#309 / #319: NCCL's default on 2 HGX H100 nodes is NVLSTree
    ("h100-ndr-2n-309", "nvls-tree"),
    # nccl-tests#309: on 4 nodes the default reads like a ring (365.8 GB/s)
    ("h100-ndr-4n-309", "ring"),
    # nccl-tests#212: one HGX H100 runs NVLS
    ("h100-8-212", "in-switch"),
])
def test_the_algorithm_nccl_runs(rid, algorithm):
    row = next(r for r in ROWS if r["id"] == rid)
    assert predict_row(row).algorithm == algorithm


def test_comm_validate_json(capsys):
    import json

    rc, out, _ = _cli(capsys, "comm", "validate", "--json")
    d = json.loads(out)
    assert rc == 0 and d["row_count"] == len(ROWS)
    row = next(r for r in d["rows"] if r["id"] == "a100-hdr4-2n-100")
    # nccl-tests#100 measured 91 GB/s busbw; the row's error is the prediction against it
    assert row["measured"] == 91.0 and row["algorithm"] == "ring"
    assert row["error"] == pytest.approx(row["predicted"] / 91.0 - 1)
    assert d["within_tolerance"] == sum(r["within_tolerance"] for r in d["rows"])


@pytest.mark.parametrize("text, msg", [
    (None, "cannot read"),
    ("a,b\n1,2\n", "is not an nccl-tests rows CSV"),
    ("id,collective,algorithm,intra,nodes,ranks_per_node,bytes,metric,measured\n"
     "x,all-reduce,auto,nvlink4,1,8,1024,watts,3\n", "neither busbw_GBps nor latency_us"),
    ("id,collective,algorithm,intra,nodes,ranks_per_node,bytes,metric,measured\n"
     "x,all-reduce,auto,nvlink4,1,8,big,busbw_GBps,3\n", "is not a number"),
])
def test_comm_validate_bad_files_are_one_line_exit_2(capsys, tmp_path, text, msg):
    p = tmp_path / "rows.csv"
    if text is not None:
        p.write_text(text)
    rc, _, err = _cli(capsys, "comm", "validate", "--file", str(p))
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1
