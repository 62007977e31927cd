"""scalemodel comm bench on real gloo ranks: rows, the hand-made ring, clean-up on failure."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_bench_json_rows_and_ring_check(capsys, tmp_path):
    from scalemodel.cli import main

    prof = tmp_path / "prof.json"
    t0 = time.monotonic()
    rc = main(["comm", "bench", "--ranks", "4", "--backend", "gloo", "--max-bytes", "64KiB",
               "--iters", "2", "--save", str(prof), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and time.monotonic() - t0 < 30
    for r in d["rows"]:
        assert set(r) >= {"collective", "bytes", "time_s", "algbw_bytes_per_s",
                          "busbw_bytes_per_s"}
        assert r["time_s"] > 0
    rc_ = d["ring_check"]
    # derivation: 2(N-1)K/N with N = 4 and K = 1 MiB = 1,572,864 bytes, on every rank
    assert rc_["bytes_sent_per_rank"] == rc_["expected_bytes_per_rank"] == 2 * 3 * 2**20 / 4
    assert set(rc_["bytes_sent_each_rank"]) == {1572864}
    assert rc_["equal_to_all_reduce"]
    # the saved profile is usable by comm cost
    assert main(["comm", "cost", "--ranks", "4", "--bytes", "1MiB", "--profile", str(prof),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_s"] > 0


def test_a_failed_rank_stops_the_others_at_once():
    from scalemodel.live.comm_bench import run_bench

    t0 = time.monotonic()
    out = run_bench(3, sizes=[4096], collectives=["all-reduce"], iters=1, timeout_s=60,
                    fail_rank=1)
    lr = out["launch"]
    assert not lr.ok and lr.ranks[1].status == "error"
    assert all(r.status in ("aborted", "error", "ok") for r in lr.ranks)
    assert time.monotonic() - t0 < 30  # not the 60 s deadline


def _workers_under(folder: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if f"SCALEMODEL_LAUNCH_DIR={folder}".encode() in env:
            found.append(int(p.name))
    return found


def test_ctrl_c_leaves_no_orphans(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "scalemodel", "comm", "bench", "--ranks", "2",
                             "--max-bytes", "4MiB", "--iters", "50"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _workers_under(str(tmp_path)):
        time.sleep(0.2)
    assert _workers_under(str(tmp_path)), "workers never started"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    time.sleep(0.5)
    assert _workers_under(str(tmp_path)) == []
