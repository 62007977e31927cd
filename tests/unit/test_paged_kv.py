"""The paged-KV simulator: hand-derived small cases and the vLLM paper's ranges."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.errors import BadInput
from scalemodel.sim.paged_kv import Workload, compare, simulate, synthetic_workload


def one(p, o, arrival=0):
    return Workload(np.array([p]), np.array([o]), np.array([arrival]))


def test_single_request_by_hand():
    # p = 1, o = 3, max_len = 4: lengths over its 3 resident steps are 1, 2, 3 -> 6 token-steps.
    # contiguous reserves 4 slots for 3 steps = 12 -> waste 1 - 6/12 = 0.5
    c = simulate(one(1, 3), capacity_tokens=4, policy="contiguous", max_len=4)
    assert (c.used_token_steps, c.allocated_token_steps) == (6, 12)
    assert c.waste_fraction == pytest.approx(0.5)
    # paged, 2-token blocks: ceil(1/2)*2 + ceil(2/2)*2 + ceil(3/2)*2 = 2 + 2 + 4 = 8 -> 0.25
    p = simulate(one(1, 3), capacity_tokens=4, policy="paged", max_len=4, block_tokens=2)
    assert p.allocated_token_steps == 8
    assert p.waste_fraction == pytest.approx(0.25)
    assert p.steps == c.steps == 3


def test_contiguous_admits_pool_over_max_len():
    # pool of 10 slots, max_len 4: two requests at a time; four equal requests take two rounds
    w = Workload(np.array([1] * 4), np.array([3] * 4), np.zeros(4, dtype=int))
    c = simulate(w, capacity_tokens=10, policy="contiguous", max_len=4)
    assert c.peak_running == 2
    assert c.steps == 6


def test_preemption_when_blocks_run_out():
    # 2 blocks of 2 tokens; two requests start with one block each and both need a second
    w = Workload(np.array([2, 2]), np.array([2, 2]), np.zeros(2, dtype=int))
    p = simulate(w, capacity_tokens=4, policy="paged", max_len=4, block_tokens=2)
    assert p.preemptions >= 1
    assert p.output_tokens == 4


def test_vllm_paper_ranges():
    """Kwon et al. 2023: earlier systems waste 60-80% of KV memory; paging under 4%."""
    w = synthetic_workload(5000, prompt_mean=256, output_mean=256, max_len=2048, seed=3)
    r = compare(w, capacity_tokens=60_000, max_len=2048)
    assert 0.6 <= r.contiguous.waste_fraction <= 0.9
    assert r.paged.waste_fraction < 0.04
    assert r.concurrency_gain > 2


@settings(max_examples=25, deadline=None)
@given(st.integers(20, 300), st.integers(0, 10_000), st.sampled_from([1, 8, 16, 32]))
def test_paging_never_wastes_more_and_serves_everything(n, seed, blk):
    w = synthetic_workload(n, prompt_mean=64, output_mean=64, max_len=512, seed=seed)
    r = compare(w, capacity_tokens=4096, max_len=512, block_tokens=blk)
    assert r.paged.used_token_steps == r.contiguous.used_token_steps  # same tokens, same lengths
    assert r.paged.waste_fraction <= r.contiguous.waste_fraction + 1e-12
    assert r.paged.output_tokens == r.contiguous.output_tokens == int(w.output.sum())


def test_bad_inputs():
    with pytest.raises(BadInput):
        synthetic_workload(0)
    with pytest.raises(BadInput):
        simulate(one(1, 3), capacity_tokens=2, policy="contiguous", max_len=4)
    with pytest.raises(BadInput):
        simulate(one(1, 3), capacity_tokens=8, policy="lru", max_len=4)
