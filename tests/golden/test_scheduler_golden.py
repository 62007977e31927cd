"""Scheduler simulator against schedules derived by hand (the derivation is in each test)."""

from __future__ import annotations

import pytest

from scalemodel.sim.cluster.run import ClusterConfig, run_policy
from scalemodel.traces.jobs import JobSpec, Workload

CFG = ClusterConfig(nodes=2, gpus_per_node=8, nodes_per_rack=2)


def _jct(policy, jobs):
    r = run_policy(Workload("t", jobs), policy, CFG, record=True, check=True)
    return r, {jid: end for jid, _s, end, *_ in r.segments}


JOBS = (JobSpec("j1", 0, 8, 100), JobSpec("j2", 1, 16, 100), JobSpec("j3", 2, 8, 50))


def test_fifo_head_blocks():
    # j1 runs 0-100 on one node; j2 needs both nodes: 100-200; j3 waits behind it: 200-250
    r, end = _jct("fifo", JOBS)
    assert end == {"j1": 100, "j2": 200, "j3": 250}
    assert r.queue_delay_mean_s == pytest.approx((0 + 99 + 198) / 3)


def test_easy_backfill_fills_the_hole():
    # EASY (Mu'alem & Feitelson 2001): j2's reservation is t = 100; j3 (2 + 50 = 52 <= 100)
    # starts at once on the free node without delaying j2
    _, end = _jct("backfill", JOBS)
    assert end == {"j1": 100, "j2": 200, "j3": 52}


def test_preemption_loses_work_since_last_checkpoint():
    # lo (16 GPUs, 1000 s, checkpoint every 100 s, restore 10 s) starts at 0. hi arrives at 250:
    # lo has done 250 s, saved 200 s, loses 50 s x 16 GPUs = 800 GPU-s. hi runs 250-350;
    # lo restarts at 350: 10 s restore + 800 s left -> ends at 1160 and pays 160 GPU-s restore.
    jobs = (JobSpec("lo", 0, 16, 1000, checkpoint_interval_s=100, restore_s=10),
            JobSpec("hi", 250, 16, 100, priority=1))
    r, end = _jct("preempt", jobs)
    assert end["hi"] == 350 and end["lo"] == 1160
    assert r.preemptions == 1
    assert r.lost_gpu_s == pytest.approx(800 + 160)
    assert r.lost_gpu_hours == pytest.approx(960 / 3600)
    # capacity 16 x 1160; allocated 16 x (250 + 100 + 810)
    assert r.utilization == pytest.approx(1.0)


def test_fragmentation_measure():
    # one 4-GPU job on node 0 (4 of 8 free there); an 8-GPU head waits for node 1's job: the
    # 4 free GPUs of node 0 are unusable for it -> fragmentation 4/16 while it waits
    jobs = (JobSpec("a", 0, 4, 100), JobSpec("b", 0, 8, 200), JobSpec("c", 1, 8, 10))
    r, end = _jct("fifo", jobs)
    assert end == {"a": 100, "b": 200, "c": 110}
    # c waits 1..100 (99 s) with 4 of 16 GPUs unusable; makespan 200
    assert r.fragmentation_mean == pytest.approx(99 * 4 / (16 * 200))
