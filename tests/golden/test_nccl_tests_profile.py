# ruff: noqa: UP031  (the tables are printed with the C printf layouts nccl-tests uses)
"""comm cost --profile on nccl-tests output: the reader across format versions and the fit.

Tables are printed here with the printf layouts nccl-tests used (NVIDIA/nccl-tests
src/common.cu before 51af557 (2022) and at 7bd5758 (2024), src/util.cu at HEAD (2026)) and
times from a stated alpha-beta law, so the fit must return that alpha and beta; one fixture is
real published text (tests/fixtures/nccl_tests/SOURCES.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalemodel.errors import BadInput
from scalemodel.traces.nccl_tests import parse_nccl_tests, profile_from_nccl_tests

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "nccl_tests"
ALPHA, BETA = 20e-6, 1 / 150e9  # 20 us per call, 150 GB/s
SIZES = [2**k for k in range(10, 31, 2)]


def _t_us(S: int) -> float:
    return (ALPHA + BETA * S) * 1e6


def _rank_lines(n: int) -> str:
    return "".join(f"#  Rank {r:2d} Group  0 Pid  1234 on node device {r:2d} [0x00] NVIDIA H100\n"
                   for r in range(n))


def table_2021(coll: str, n: int, redop: bool = True) -> str:
    """Per-test header of 2021 nccl-tests (all_gather prints no redop column)."""
    pre = "# %10s  %12s  %8s" + ("  %6s" if redop else "")
    names = ("size", "count", "type") + (("redop",) if redop else ())
    out = f"# nThread 1 nGpus {n} minBytes 1024 maxBytes 1073741824 step: 4(factor)\n"
    out += "#\n# Using devices\n" + "".join(
        f"#   Rank {r:2d} Pid  4242 on host device {r:2d} [0x07] Tesla V100\n" for r in range(n))
    out += "#\n" + pre % names + "  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n" % (
        "time", "algbw", "busbw", "error", "time", "algbw", "busbw", "error")
    for S in SIZES:
        t = _t_us(S)
        vals = (S, S // 4, "float") + (("sum",) if redop else ())
        side = "  %7.2f  %6.2f  %6.2f  %5.0le" % (t, S / t / 1e3, S / t / 1e3, 0.0)
        out += ("%12li  %12li  %8s" + ("  %6s" if redop else "")) % vals + side + side + "\n"
    return out + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 50.0\n#\n"


def table_2024(coll_prog: str, n: int) -> str:
    out = f"# Collective test starting: {coll_prog}\n# nThread 1 nGpus {n} minBytes 1024\n"
    out += "#\n# Using devices\n" + _rank_lines(n) + "#\n"
    out += "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n" % (
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong")
    for S in SIZES:
        t = _t_us(S)
        side = "  %7.2f  %6.2f  %6.2f  %6s" % (t, S / t / 1e3, S / t / 1e3, "N/A")
        out += "%12li  %12li  %8s  %6s  %6s" % (S, S // 2, "bfloat16", "none", "-1") + side * 2 + "\n"
    return out + "# Out of bounds values : 0 OK\n#\n"


def table_2026_per_iter(n: int) -> str:
    out = "# nccl-tests version 2.17.1\n# nThread 1 nGpus 1 minBytes 1024\n#\n" + _rank_lines(n)
    cols = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "i_min",
            "i_max", "i_p99", "i_cv%", "time", "algbw", "busbw", "#wrong", "i_min", "i_max",
            "i_p99", "i_cv%")
    out += "#\n# " + "  ".join(cols) + "\n"
    for S in SIZES:
        t = _t_us(S)
        side = "  %7.2f  %6.2f  %6.2f  %6i  %7.2f  %7.2f  %7.2f  %7.2f" % (
            t, S / t / 1e3, S / t / 1e3, 0, t * 0.98, t * 1.05, t * 1.04, 1.5)
        out += "%12li  %12li  %8s  %6s  %6s" % (S, S // 4, "float", "sum", "-1") + side * 2 + "\n"
    return out + "# Collective test concluded: reduce_scatter_perf\n"


def _check_fit(prof: dict, coll: str, n: int) -> None:
    c = prof["collectives"][coll]
    assert prof["world_size"] == n and prof["backend"] == "nccl"
    # times are printed to 0.01 us, so the fit returns the law to that rounding
    assert c["alpha_s"] == pytest.approx(ALPHA, rel=2e-3)
    assert c["beta_s_per_byte"] == pytest.approx(BETA, rel=2e-4)
    assert c["points"] == len(SIZES)


def test_2021_layout_with_and_without_redop():
    _check_fit(profile_from_nccl_tests(table_2021("all-reduce", 8), "all_reduce_perf.log"),
               "all-reduce", 8)
    # all_gather_perf printed no redop column then; the collective comes from the file name
    prof = profile_from_nccl_tests(table_2021("all-gather", 4, redop=False), "x.log", "all-gather")
    _check_fit(prof, "all-gather", 4)


def test_2024_layout_named_by_the_starting_line():
    _check_fit(profile_from_nccl_tests(table_2024("alltoall_perf", 16), "run.txt"),
               "all-to-all", 16)


def test_2026_per_iteration_columns_named_by_the_concluded_line():
    _check_fit(profile_from_nccl_tests(table_2026_per_iter(8), "run.txt"), "reduce-scatter", 8)


def test_concatenated_outputs_give_one_profile_per_collective():
    text = table_2024("broadcast_perf", 8) + table_2024("sendrecv_perf", 8)
    prof = profile_from_nccl_tests(text, "both.txt")
    assert set(prof["collectives"]) == {"broadcast", "send-recv"}


def test_real_published_head_parses_and_is_too_short_to_fit():
    text = (FIX / "all_reduce_perf_rtx4090_issue1530.txt").read_text()
    r = parse_nccl_tests(text, "f", "all-reduce")
    assert r.world_size == 8 and len(r.rows) == 1
    row = r.rows[0]
    assert (row.bytes, row.count, row.dtype, row.redop) == (8, 2, "float", "sum")
    assert row.time_s == pytest.approx(42.56e-6) and row.in_place_time_s is None
    with pytest.raises(BadInput, match="at least two sizes"):
        profile_from_nccl_tests(text, "f", "all-reduce")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"),
                                                    "PATH": "/usr/bin:/bin"})


def test_comm_cost_reads_nccl_tests_output(tmp_path):
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(table_2024("all_reduce_perf", 8))
    r = _cli("comm", "cost", "--collective", "all-reduce", "--bytes", "1GiB", "--ranks", "8", "--profile", str(p),
             "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["time_s"] == pytest.approx(ALPHA + BETA * 2**30, rel=1e-3)
    assert d["profile_backend"] == "nccl" and "nccl-tests" in d["profile_source"]


@pytest.mark.parametrize("text, msg", [
    ("hello\nworld\n", "neither a scalemodel comm profile"),
    ("# nThread 1 nGpus 2\n# size count type redop time algbw busbw error\n"
     "1024 256 float sum abc 0.1 0.1 0\n2048 512 float sum 1.0 2.0 2.0 0\n", "at least two sizes"),
    ("# size count type redop time algbw busbw error\n1024 256 float sum 1 1 1 0\n"
     "2048 512 float sum 2 1 1 0\n", "rank count is unknown"),
    ("{not json", "is not JSON"),
])
def test_bad_profiles_are_one_line_exit_2(tmp_path, text, msg):
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(text)
    r = _cli("comm", "cost", "--collective", "all-reduce", "--bytes", "1MiB", "--profile", str(p))
    assert r.returncode == 2, r.stdout
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
