"""Scheduler simulator: policies, invariants, readers and exports."""

from __future__ import annotations

import json

import pytest

from scalemodel.errors import BadInput
from scalemodel.sim.cluster.cluster import (
    Cluster,
    FgdContext,
    place_fgd,
    place_pack,
    place_topology,
)
from scalemodel.sim.cluster.policies import NAMES, get_policy
from scalemodel.sim.cluster.run import (
    ClusterConfig,
    load_workload,
    run_policy,
    write_chrome_trace,
    write_usage,
)
from scalemodel.sim.cluster.workload import generate
from scalemodel.traces.jobs import JobSpec, Workload, read_jobs_csv


def _sim(wl, policy, nodes=8, gpn=8, npr=4, **kw):
    cfg = ClusterConfig(nodes=nodes, gpus_per_node=gpn, nodes_per_rack=npr, **kw)
    return run_policy(wl, policy, cfg, record=True, check=True)


@pytest.mark.parametrize("policy", NAMES)
def test_every_policy_completes_and_conserves_gpu_time(policy):
    wl = generate(300, 64, seed=3)
    r = _sim(wl, policy)
    assert r.jobs_completed == 300
    assert r.allocated_gpu_s == pytest.approx(r.useful_gpu_s + r.lost_gpu_s
                                              + r.spread_overhead_gpu_s, rel=1e-9)
    assert r.capacity_gpu_s == pytest.approx(r.allocated_gpu_s + r.idle_gpu_s, rel=1e-9)
    assert 0 < r.useful_utilization <= r.utilization <= 1
    # every job's work is done exactly once: useful time is the demanded GPU-seconds
    assert r.useful_gpu_s == pytest.approx(sum(j.gpus * j.duration_s for j in wl.jobs), rel=1e-9)


def test_placement_rules():
    cl = Cluster(4, 8, 2)
    assert place_pack(cl, 9) is not None and len(place_pack(cl, 9)) == 2
    cl.take([(0, 5)])
    pl = place_pack(cl, 3)
    assert pl == [(0, 3)]  # best fit: the node with exactly 3 free
    pl = place_topology(cl, 16)
    assert pl is not None and cl.racks(pl) == 1  # rack 1 holds two whole nodes
    cl.take(pl)
    assert place_topology(cl, 16) is None  # only one whole node left
    assert cl.unusable_for(8) == 3  # node 0 has 3 free GPUs, too few for an 8-GPU job
    ctx = FgdContext(8, [1, 1, 2, 8])
    cl2 = Cluster(2, 8, 2)
    cl2.take([(0, 7)])
    assert place_fgd(cl2, 1, ctx) == [(0, 1)]  # fills the almost-full node, keeps node 1 whole


def test_preempt_respects_priority_only():
    jobs = (JobSpec("lo", 0, 64, 1000, priority=0), JobSpec("hi", 10, 64, 100, priority=1),
            JobSpec("lo2", 20, 64, 100, priority=0))
    r = _sim(Workload("t", jobs), "preempt")
    assert r.preemptions == 1  # hi preempts lo; lo2 never preempts anyone


def test_grace_period_saves_the_work():
    jobs = (JobSpec("lo", 0, 64, 1000, checkpoint_interval_s=100, checkpoint_cost_s=5,
                    restore_s=10, grace_s=20),
            JobSpec("hi", 250, 64, 100, priority=1))
    r = _sim(Workload("t", jobs), "preempt")
    # lo keeps running 20 s of grace, saves during the last 5 s: lost = the save only
    assert r.lost_gpu_s == pytest.approx(64 * 5 + 64 * 10)  # save + restore on restart


def test_quota_borrow_and_reclaim():
    jobs = (JobSpec("a1", 0, 64, 1000, team="a"), JobSpec("b1", 10, 32, 100, team="b"))
    cfg = ClusterConfig(nodes=8, gpus_per_node=8, nodes_per_rack=4, quotas=(("a", 32), ("b", 32)))
    r = run_policy(Workload("t", jobs), "quota", cfg, check=True)
    assert r.preemptions == 1  # b reclaims its quota from a's borrowed GPUs
    cfg = ClusterConfig(nodes=8, gpus_per_node=8, nodes_per_rack=4, borrowing=False,
                        quotas=(("a", 32), ("b", 32)))
    r = run_policy(Workload("t", jobs), "quota", cfg, check=True)
    assert r.jobs_completed == 1 and any("quota" in x.reason for x in r.rejects)


def test_oversized_job_reported_not_dropped():
    r = _sim(Workload("t", (JobSpec("big", 0, 1000, 10), JobSpec("ok", 0, 8, 10))), "fifo")
    assert r.jobs_completed == 1
    assert [x.id for x in r.rejects] == ["big"]


def test_csv_reader_reports_bad_lines(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_text("id,submit_s,gpus,duration_s,team\n"
                 "a,0,8,100,x\n"
                 "b,zero,8,100,x\n"
                 "c,0,0,100,x\n"
                 "a,5,8,100,x\n"
                 "d,0,8\n")
    wl = read_jobs_csv(p)
    assert [j.id for j in wl.jobs] == ["a"]
    assert [(r.line, r.id) for r in wl.rejects] == [(3, "b"), (4, "c"), (5, "a"), (6, "d")]
    assert "duplicate" in wl.rejects[2].reason


def test_csv_missing_column(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_text("id,gpus\n")
    with pytest.raises(BadInput, match="submit_s"):
        read_jobs_csv(p)


def test_alibaba_trace_counts():
    wl = load_workload("alibaba-v2023", 1024)
    # README of the trace: 8,152 pods, 1,088 of them CPU-only (num_gpu = 0)
    assert len(wl.jobs) + len(wl.rejects) == 8152
    assert sum("CPU-only" in r.reason for r in wl.rejects) == 1088
    assert max(j.gpus for j in wl.jobs) == 8


def test_exports(tmp_path):
    wl = generate(50, 64, seed=1)
    r = _sim(wl, "backfill")
    ct = write_chrome_trace(r, tmp_path / "t.json", 8)
    evs = json.loads(ct.read_text())["traceEvents"]
    assert len(evs) == 50 and all(e["ph"] == "X" for e in evs)
    us = write_usage(r, wl, tmp_path / "u.csv", "gpu-hour")
    assert len(us.read_text().splitlines()) == 51


def test_policy_names():
    with pytest.raises(BadInput):
        get_policy("random")
