"""The launcher starts real gloo ranks on CPU and collects their results."""

import pytest

pytestmark = pytest.mark.live


def test_allreduce_across_four_ranks():
    from scalemodel.live.launcher import launch

    r = launch("scalemodel.live.selftest:allreduce_ranks", 4, kwargs={"n": 3}, timeout_s=90)
    assert r.ok, [x.error for x in r.ranks]
    # derivation: each rank contributes rank + 1, so every element is 1 + 2 + 3 + 4 = 10
    assert r.values() == [[10.0] * 3] * 4


def test_a_rank_that_skips_the_collective_leaves_the_others_stuck():
    from scalemodel.live.launcher import launch

    # the deadline covers start-up too (three torch imports and the gloo rendezvous), which a
    # loaded machine stretches past 10 s; the group's own 5 s timeout fails the waiting ranks
    # soon after rank 2 leaves, so the test still ends in seconds on an idle machine
    r = launch("scalemodel.live.selftest:allreduce_ranks", 3, timeout_s=60, pg_timeout_s=5,
               kwargs={"n": 1, "skip_rank": 2})
    assert r.ranks[2].status == "ok" and r.ranks[2].value == []
    # ranks 0 and 1 wait in all_reduce for rank 2: killed at the deadline or failed by gloo
    assert all(x.status in ("timeout", "error") for x in r.ranks[:2])
    assert not r.ok
