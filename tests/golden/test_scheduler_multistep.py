"""vLLM V0's default scheduler with multi-step scheduling (analytic/serving/scheduler.py
``_simulate_v0``; engine profile ``vllm-0.6.0-multistep``: prefill_alone, host_iters_per_schedule).

Source: the vLLM 0.6.0 wheel (vllm-0.6.0-cp38-abi3-manylinux1_x86_64, commit 32e7db25):
core/scheduler.py _schedule_default 885-983 admits waiting prompts whole first and schedules
decodes only when no prefill was (917-921); a prefill schedule has 0 lookahead slots (1432-1443)
so it lasts one step; a decode schedule gets num_scheduler_steps - 1 lookahead slots
(arg_utils.py 919-922) and is replayed without calling the scheduler until its steps are spent
(llm_engine.py 1500-1504); the GPU advances the whole frozen batch every step
(worker/multi_step_model_runner.py 380-391); tokens past max_tokens are dropped
(engine/output_processor/multi_step.py 143-148); a request finished mid-batch is answered then
(llm_engine.py 1334-1357).

Hand derivation, n = 4 steps per decode schedule, every step (prefill or decode) costing exactly
G = 1 s on the GPU, no host time. Requests: A arrives at 0 (100 prompt tokens, 3 output), B at
0.5 (100, 6), C at 2.5 (100, 2).

  t 0-1  prefill step, A alone (B has not arrived when the scheduler is called at 0):
         A's first token at 1.
  t 1-2  scheduler call: B waits, so a prefill step of B alone; A's decode stalls.
         B's first token at 2 (TTFT 1.5).
  t 2-6  decode schedule of {A, B}, 4 steps ending 3, 4, 5, 6. A needs 2 more tokens: its last
         at 4 (finish 4); it keeps its slot and is computed at steps 3 and 4 (2 dropped
         tokens). B gets 4 tokens (5 of 6). C, arrived at 2.5, waits for the boundary at 6.
  t 6-7  scheduler call: C waits, prefill step of C alone (B stalls); C's first token at 7
         (TTFT 4.5).
  t 7-11 decode schedule of {B, C}: B and C each need 1 token, both answered at 8; the other 3
         steps compute both and drop their tokens.

So: finish A 4, B 8, C 8; makespan 8 s (the run ends with the last answer); iterations
1 + 1 + 4 + 1 + 4 = 11; sequence-steps 1 + 1 + 8 + 1 + 8 = 19 (mean batch 19 / 11);
TPOT A (4 - 1) / 2 = 1.5, B (8 - 2) / 5 = 1.2, C (8 - 7) / 1 = 1.

With n = 1 (V0 without multi-step) the same stream runs: prefill A (to 1), prefill B (to 2),
decode {A, B} (to 3), C waiting at the call at 3: prefill C (to 4), decode {A, B, C} (to 5:
A's 3rd and C's 2nd token, both finish), then B alone to 6, 7, 8: finishes A 5, B 8, C 5.
"""


import numpy as np
import pytest

from conftest import gpu_bound_iteration
from scalemodel.analytic.serving.scheduler import SchedulerPolicy, policy, simulate

G = 1.0


@pytest.fixture(scope="module")
def gpu_one_second():
    """A real iteration model whose every iteration costs exactly G on the GPU (all tables zero
    but the per-layer elementwise kernels', G / n_layers each; no attention, no host time)."""
    return gpu_bound_iteration(G)


def run(it, steps):
    p = SchedulerPolicy(max_batch=256, token_budget=8192, chunked_prefill=False,
                        reserve="on_demand", block_tokens=16, kv_blocks=10_000,
                        prefill_alone=True, steps_per_schedule=steps)
    return simulate(it, p, np.array([0.0, 0.5, 2.5]), np.full(3, 100), np.array([3, 6, 2]))


def test_multistep_admits_at_boundaries_and_holds_finished_slots(gpu_one_second):
    r = run(gpu_one_second, 4)
    assert np.allclose(r.first_token_s, [1, 2, 7])
    assert np.allclose(r.ttft_s, [1, 1.5, 4.5])
    assert np.allclose(r.finish_s, [4, 8, 8])
    assert np.allclose(r.tpot_s, [1.5, 1.2, 1.0])
    assert r.makespan_s == pytest.approx(8.0)
    assert r.iterations == 11
    assert r.mean_batch == pytest.approx(19 / 11)


def test_single_step_v0_prefill_stalls_decodes(gpu_one_second):
    r = run(gpu_one_second, 1)
    assert np.allclose(r.first_token_s, [1, 2, 4])
    assert np.allclose(r.finish_s, [5, 8, 5])
    assert r.makespan_s == pytest.approx(8.0)


def test_profiles_give_the_policy():
    from types import SimpleNamespace

    from scalemodel.analytic.serving.engine import get_serving_engine

    es = SimpleNamespace(max_batch=256, token_budget=8192, chunked_prefill=False,
                         kv=SimpleNamespace(block_size=16, blocks=1000))
    ms = policy(get_serving_engine("vllm-0.6.0-multistep"), es)
    assert ms.prefill_alone and ms.steps_per_schedule == 10
    # V0 without multi-step: prefill steps alone (0.6.5 / 0.7.3 _schedule_default), one step
    v0 = policy(get_serving_engine("vllm-v0"), es)
    assert v0.prefill_alone and v0.steps_per_schedule == 1
    # with chunked prefill on (V0 above a 32K context) _schedule_chunked_prefill mixes them
    ch = policy(get_serving_engine("vllm-v0"), SimpleNamespace(**{**vars(es),
                                                                  "chunked_prefill": True}))
    assert not ch.prefill_alone and ch.steps_per_schedule == 1
    assert not policy(get_serving_engine("vllm-v1"), es).prefill_alone
    # the AMD MLPerf harness's num_scheduler_steps 11 spreads host time only (its scheduler
    # was not read)
    amd = policy(get_serving_engine("vllm-rocm-mlperf-v51"), es)
    assert amd.steps_per_schedule == 1


def test_chunked_prefill_with_v0_rules_is_refused(gpu_one_second):
    from scalemodel.errors import BadInput

    p = SchedulerPolicy(max_batch=8, token_budget=512, chunked_prefill=True, reserve="full",
                        block_tokens=16, kv_blocks=1000, prefill_alone=True,
                        steps_per_schedule=4)
    with pytest.raises(BadInput):
        simulate(gpu_one_second, p, np.zeros(1), np.full(1, 10), np.full(1, 2))


def test_a_short_kv_pool_preempts_and_still_answers_every_request(gpu_one_second):
    """Bookkeeping under recompute preemption: with 40 blocks of 16 tokens (640 tokens) for 40
    requests of up to 300 + 200 tokens, decode schedules (10 slots a sequence each) run short and
    preempt; every request must still get its first token, then its last, in that order, and
    the run must end at the last answer."""
    rng = np.random.default_rng(1)
    n = 40
    isl, osl = rng.integers(10, 300, n), rng.integers(1, 200, n)
    p = SchedulerPolicy(max_batch=64, token_budget=2048, chunked_prefill=False,
                        reserve="on_demand", block_tokens=16, kv_blocks=40,
                        prefill_alone=True, steps_per_schedule=10)
    r = simulate(gpu_one_second, p, np.sort(rng.uniform(0, 5, n)), isl, osl)
    assert r.preemptions > 0
    assert np.isfinite(r.first_token_s).all() and np.isfinite(r.finish_s).all()
    assert (r.finish_s >= r.first_token_s).all()
    assert r.makespan_s == pytest.approx(r.finish_s.max() - r.arrival_s.min())
