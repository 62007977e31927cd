"""The Kineto reader on small hand-written traces: steps, compute, communication, exposure,
and the one-line errors for bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalemodel.errors import BadInput
from scalemodel.traces.kineto import overlap_per_step, read_kineto
from scalemodel.traces.load import load_dir
from scalemodel.traces.slow import analyse_slow

ROOT = Path(__file__).resolve().parents[2]


def _x(name, ts, dur, cat="cpu_op", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _gpu_rank(rank: int, world: int, steps: int, *, comp_us=600.0, nccl_us=300.0,
              overlap=True, slow_from: int | None = None, factor: float = 1.0) -> dict:
    """A GPU trace: per 1 ms step a compute kernel and an NCCL all-reduce kernel, the latter
    starting inside the compute (overlap) or after it."""
    ev, t = [], 0.0
    for s in range(steps):
        c = comp_us * (factor if slow_from is not None and s >= slow_from else 1.0)
        step_len = 10 + c + (0 if overlap else nccl_us) + 100  # exposed comm lengthens it
        ev.append(_x(f"ProfilerStep#{s}", t, step_len, cat="user_annotation"))
        ev.append(_x("ampere_bf16_gemm", t + 10, c, cat="kernel", tid=7))
        start = t + 10 + (c - nccl_us if overlap else c)
        ev.append(_x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage)", start,
                     nccl_us, cat="kernel", tid=20))
        t += step_len + 50
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank,
                                                      "world_size": world},
            "traceEvents": ev}


def _write(d: Path, traces: list[dict], gz: bool = False) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for tr in traces:
        r = tr["distributedInfo"]["rank"]
        if gz:
            (d / f"rank{r}.json.gz").write_bytes(gzip.compress(json.dumps(tr).encode()))
        else:
            (d / f"rank{r}.json").write_text(json.dumps(tr))
    return d


def test_exposed_communication_and_overlap(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(_gpu_rank(0, 1, 3)))
    v, info, why = read_kineto(p)
    assert why == "" and v is not None and info["world_size"] == 1
    assert [s for s, _, _ in v.steps] == [0, 1, 2]
    # compute 600 us per step, the 300 us NCCL kernel fully under it: nothing exposed
    assert sum(b - a for _, a, b in v.compute) == pytest.approx(3 * 600e-6)
    assert all(x.op == "all_reduce" and x.blocked_s == pytest.approx(0, abs=1e-12)
               for x in v.records)
    q = tmp_path / "s.json"
    q.write_text(json.dumps(_gpu_rank(0, 1, 3, overlap=False)))
    v2, _, _ = read_kineto(q)
    assert all(x.blocked_s == pytest.approx(300e-6) for x in v2.records)


def test_overlap_per_step_and_lost_overlap_verdict(tmp_path):
    # steps 0-5 overlap the all-reduce with compute, steps 6-11 do not: the same collective
    # time, all of it exposed
    def rank(r):
        a = _gpu_rank(r, 4, 6)
        b = _gpu_rank(r, 4, 6, overlap=False)
        shift = a["traceEvents"][-1]["ts"] + 2000
        for e in b["traceEvents"]:
            e["ts"] += shift
            if e["name"].startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{int(e['name'].split('#')[1]) + 6}"
        a["traceEvents"] += b["traceEvents"]
        return a
    d = _write(tmp_path / "run", [rank(r) for r in range(4)])
    ts = load_dir(d)
    assert ts.fmt == "kineto"
    ov = overlap_per_step(ts)[0]
    assert ov[2]["overlap"] == pytest.approx(1.0) and ov[8]["overlap"] == pytest.approx(0.0)
    r = analyse_slow(ts)
    assert r.verdict == "lost-overlap", r.evidence


def _two_phase_rank(r: int, before: tuple[float, bool], after: tuple[float, bool],
                    comp_us: float = 600.0) -> dict:
    """Six steps with an all-reduce of ``before`` = (duration us, starts mid-compute), then six
    with ``after``; the step lasts until both compute and the all-reduce have ended."""
    ev, t = [], 0.0
    for s in range(12):
        nccl_us, overlap = before if s < 6 else after
        start = t + 10 + (comp_us / 2 if overlap else comp_us)
        end = max(t + 10 + comp_us, start + nccl_us)
        ev.append(_x(f"ProfilerStep#{s}", t, end + 100 - t, cat="user_annotation"))
        ev.append(_x("ampere_bf16_gemm", t + 10, comp_us, cat="kernel", tid=7))
        ev.append(_x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage)", start,
                     nccl_us, cat="kernel", tid=20))
        t = end + 150
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r,
                                                      "world_size": 4}, "traceEvents": ev}


@pytest.mark.parametrize("before, after, verdict", [
    # the overlapped 280 us all-reduce turns synchronous and its span grows to 420 us (a
    # synchronous collective also waits for the last rank to arrive): 280 us stopped hiding,
    # 140 us were added, so the lost overlap is the larger part of the 420 us exposed
    ((280.0, True), (420.0, False), "lost-overlap"),
    # still overlapped, but the all-reduce takes 3x as long: the 280 us it hid stays hidden
    # (up to the 300 us of compute behind it) and the rest is the slower fabric
    ((280.0, True), (840.0, True), "fabric"),
    # never overlapped and 3x as long: fabric
    ((280.0, False), (840.0, False), "fabric"),
])
def test_lost_overlap_vs_fabric_splits_the_exposed_time(tmp_path, before, after, verdict):
    d = _write(tmp_path / "run", [_two_phase_rank(r, before, after) for r in range(4)])
    r = analyse_slow(load_dir(d))
    assert r.verdict == verdict, r.evidence


def test_straggler_from_gz_traces(tmp_path):
    tr = [_gpu_rank(r, 4, 12, slow_from=6 if r == 2 else None, factor=3.0) for r in range(4)]
    r = analyse_slow(load_dir(_write(tmp_path / "g", tr, gz=True)))
    assert (r.verdict, r.ranks) == ("straggler", (2,)), r.evidence


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"),
                                                    "PATH": "/usr/bin:/bin"})


def test_bad_input_is_one_line_exit_2(tmp_path):
    cases = {}
    d = tmp_path / "missing"
    _write(d, [_gpu_rank(r, 4, 4) for r in (0, 1, 3)])
    cases["missing"] = (d, "ranks [2] missing")
    d = tmp_path / "malformed"
    d.mkdir()
    (d / "rank0.json").write_text('{"traceEvents": [')
    cases["malformed"] = (d, "malformed JSON")
    d = tmp_path / "notkineto"
    d.mkdir()
    (d / "rank0.json").write_text('{"traceEvents": 5, "schemaVersion": 1}')
    cases["not"] = (d, "not a Kineto trace")
    d = tmp_path / "nosteps"
    _write(d, [{"distributedInfo": {"rank": 0, "world_size": 1},
                "traceEvents": [_x("aten::mm", 0, 5)]}])
    cases["nosteps"] = (d, "no ProfilerStep")
    for key, (path, msg) in cases.items():
        r = _cli("triage", "slow", str(path), "--format", "kineto")
        assert r.returncode == 2, (key, r.stdout, r.stderr)
        assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, (key, r.stderr)


def test_hang_on_kineto_traces_is_refused(tmp_path):
    d = _write(tmp_path / "k", [_gpu_rank(r, 2, 3) for r in range(2)])
    r = _cli("triage", "hang", str(d))
    assert r.returncode == 2 and "cannot show a hang" in r.stderr


def test_loader_refuses_world_size_mismatch(tmp_path):
    a, b = _gpu_rank(0, 2, 3), _gpu_rank(1, 3, 3)
    with pytest.raises(BadInput, match="disagree on world_size"):
        load_dir(_write(tmp_path / "m", [a, b]))
