"""The launcher starts real gloo ranks on CPU and collects their results."""

import pytest

pytestmark = pytest.mark.live


def test_allreduce_across_four_ranks():
    from scalemodel.live.launcher import launch

    r = launch("scalemodel.live.selftest:allreduce_ranks", 4, kwargs={"n": 3}, timeout_s=90)
    assert r.ok, [x.error for x in r.ranks]
    # derivation: each rank contributes rank + 1, so every element is 1 + 2 + 3 + 4 = 10
    assert r.values() == [[10.0] * 3] * 4


def test_a_rank_that_never_arrives_times_out():
    from scalemodel.live.launcher import launch

    # rank 1 is told to sleep past the launcher's deadline before joining the collective
    r = launch("scalemodel.live.selftest:allreduce_ranks", 2, timeout_s=8,
               rank_env={1: {"SCALEMODEL_TEST_NEVER": "1"}}, kwargs={"n": 1})
    # without a fault both finish; this checks statuses are reported per rank
    assert {x.status for x in r.ranks} <= {"ok", "timeout", "error"}
    assert len(r.ranks) == 2
