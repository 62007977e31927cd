"""The serving scheduler simulation on schedules worked out by hand (a constant iteration time
makes every event time whole iterations), and its one-move decode stretches against stepping
every iteration."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import serving_iteration, zeroed_iteration
from scalemodel.analytic.serving.scheduler import SchedulerPolicy, simulate


@pytest.fixture(scope="module")
def real_it():
    return serving_iteration()


@pytest.fixture(scope="module")
def one_second(real_it):
    """Every iteration costs exactly 1 s, whatever it holds."""
    return zeroed_iteration(real_it, overhead_s=1.0)


def pol(**kw):
    base = dict(max_batch=1024, token_budget=4096, chunked_prefill=True, reserve="full",
                block_tokens=16, kv_blocks=10_000)
    return SchedulerPolicy(**(base | kw))


def run(it, p, n, isl, osl, **kw):
    return simulate(it, p, np.zeros(n), np.full(n, isl), np.full(n, osl), **kw)


def test_all_prefill_in_one_iteration_then_decode(one_second):
    # 8 prompts of 100 tokens fit the 4096-token budget: iteration 1 prefills all of them and
    # emits their first tokens (t = 1 s); each needs 4 more tokens, one per iteration: t = 5 s
    r = run(one_second, pol(), 8, 100, 5)
    assert np.allclose(r.ttft_s, 1.0) and np.allclose(r.finish_s, 5.0)
    assert np.allclose(r.tpot_s, 1.0) and r.makespan_s == pytest.approx(5.0)


def test_max_batch_holds_back_the_second_wave(one_second):
    # max_batch 2: requests 0 and 1 run t = 0..3 s (prefill + 2 decode iterations); 2 and 3
    # are admitted in the 4th iteration: first tokens at 4 s, done at 6 s
    r = run(one_second, pol(max_batch=2), 4, 10, 3)
    assert list(r.first_token_s) == [1.0, 1.0, 4.0, 4.0]
    assert list(r.finish_s) == [3.0, 3.0, 6.0, 6.0]
    assert r.peak_batch == 2


def test_chunked_prefill_under_the_token_budget(one_second):
    # a 10-token prompt under a 4-token budget: chunks 4, 4, 2, the first token after the 3rd
    r = run(one_second, pol(token_budget=4), 1, 10, 1)
    assert r.first_token_s[0] == pytest.approx(3.0)


def test_prompt_beyond_budget_without_chunking_is_bad_input(one_second):
    from scalemodel.errors import BadInput

    with pytest.raises(BadInput):
        run(one_second, pol(token_budget=4, chunked_prefill=False), 1, 10, 1)


def test_on_demand_kv_preempts_and_everyone_finishes(one_second):
    # a pool of 12 one-token blocks: two 4-token prompts fit, but both growing to 4 + 5 tokens
    # do not, so the newest is preempted (recomputed later); no-evict admits one at a time
    r = run(one_second, pol(reserve="on_demand", block_tokens=1, kv_blocks=12), 2, 4, 6)
    assert r.preemptions >= 1 and np.isfinite(r.finish_s).all()
    f = run(one_second, pol(block_tokens=1, kv_blocks=12), 2, 4, 6)
    assert f.preemptions == 0 and f.peak_batch == 1 and np.isfinite(f.finish_s).all()


def test_closed_loop_concurrency(one_second):
    # 2 clients, 4 requests of 1 prefill + 2 decode iterations: two waves of 3 s each
    r = run(one_second, pol(), 4, 10, 3, concurrency=2)
    assert list(r.finish_s) == [3.0, 3.0, 6.0, 6.0]
    assert list(r.arrival_s) == [0.0, 0.0, 3.0, 3.0]


@pytest.mark.parametrize("reserve", ["full", "on_demand"])
def test_stretches_match_stepping(real_it, reserve):
    # decode-only stretches cost k times their mid-point iteration; the iteration time is
    # linear in the KV the decode tokens read, so the sum is exact
    p = pol(max_batch=64, token_budget=2048, reserve=reserve, kv_blocks=2000)
    a = run(real_it, p, 200, 300, 120)
    b = run(real_it, p, 200, 300, 120, stretch=False)
    assert a.iterations == b.iterations
    assert a.makespan_s == pytest.approx(b.makespan_s, rel=1e-9)
    assert np.allclose(a.finish_s, b.finish_s, rtol=1e-9)
