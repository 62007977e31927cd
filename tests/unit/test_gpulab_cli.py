"""scalemodel gpu: the JSON keys the issue fixes, and one-line bad-input errors (exit 2)."""

from __future__ import annotations

import json

import pytest

from conftest import cli_json as run_json
from scalemodel.cli import main


def test_occupancy_keys(capsys):
    d = run_json(capsys, "gpu", "occupancy", "--cc", "9.0", "--threads", "256", "--regs", "64",
                 "--smem", "16384")
    assert {"active_blocks_per_sm", "active_warps_per_sm", "occupancy", "limiter"} <= set(d)
    assert d["active_blocks_per_sm"] == 4 and d["limiter"] == "registers"
    g = run_json(capsys, "gpu", "occupancy", "--gpu", "h100-sxm", "--threads", "256", "--regs",
                 "64", "--smem", "16384")
    assert g["occupancy"] == d["occupancy"]


def test_access_keys(capsys):
    d = run_json(capsys, "gpu", "access", "--kernel", "transpose-padded", "--dtype", "float32",
                 "--tile", "32")
    ins = d["instructions"]
    assert [(i["space"], i["op"]) for i in ins] == [("global", "load"), ("shared", "store"),
                                                  ("shared", "load"), ("global", "store")]
    assert ins[0]["sectors_per_request"] == 4 and ins[0]["ideal_sectors_per_request"] == 4
    assert ins[2]["wavefronts_per_request"] == 1 and ins[2]["conflict_degree"] == 1
    s = run_json(capsys, "gpu", "access", "--stride", "32", "--space", "shared")
    assert s["instructions"][0]["conflict_degree"] == 32


def test_divergence_and_launch_keys(capsys):
    d = run_json(capsys, "gpu", "divergence", "--predicate", "threadIdx.x % 2 == 0", "--block",
                 "256")
    assert (d["warps"], d["divergent_warps"], d["simt_efficiency"]) == (8, 8, 0.5)
    la = run_json(capsys, "gpu", "launch", "--gpu", "h100-sxm", "--grid", "1000", "--block",
                  "256", "--regs", "32")
    # by hand: 8 warps/block; regs 32 -> 1024/warp, 16 warps per sub-partition -> 8 blocks;
    # warp cap 64/8 = 8 -> 8 blocks/SM x 132 SMs = 1056 slots; 1000 blocks -> 1 wave, 1000/1056
    assert la["blocks_per_sm"] == 8 and la["waves"] == 1
    assert la["tail_fraction"] == pytest.approx(1000 / 1056)


@pytest.mark.parametrize("argv", [
    ["gpu", "occupancy", "--cc", "9.0", "--threads", "1025"],
    ["gpu", "occupancy", "--cc", "9.0", "--regs", "256"],
    ["gpu", "occupancy", "--cc", "8.6", "--smem", "101377"],
    ["gpu", "occupancy", "--cc", "6.0"],
    ["gpu", "occupancy", "--gpu", "mi300x"],
    ["gpu", "divergence", "--predicate", "threadIdx.x %"],
    ["gpu", "divergence", "--predicate", "__import__('os').system('true')"],
    ["gpu", "access", "--kernel", "nope"],
    ["gpu", "access", "--kernel", "copy", "--dtype", "complex"],
    ["gpu", "access", "--index", "threadIdx.x / (threadIdx.x - threadIdx.x)"],
    ["gpu", "launch", "--grid", "10", "--block", "2048"],
    ["gpu", "launch", "--grid", "10", "--block", "0"],
])
def test_bad_input_one_line_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        rc = main(argv)
        raise SystemExit(rc)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err


def test_questions_answered(capsys):
    for q in ("gpu-hierarchy", "memory-hierarchy", "occupancy", "coalescing-transpose",
              "warp-divergence"):
        assert main(["answer", q, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["question"] == q
    from scalemodel.questions import build_answer

    r = build_answer("occupancy", {})
    assert 4 <= len(r.followups) <= 6


def test_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["gpu", "occupancy", "--cc", "9.0", "--plot", str(tmp_path / "o.png")]) == 0
    assert main(["answer", "coalescing-transpose", "--plot", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "o.png").stat().st_size > 0 and (tmp_path / "b.png").stat().st_size > 0
