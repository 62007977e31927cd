"""Attention-DP ranks in lock-step (analytic/serving/scheduler.py ``adp_assign`` and
``simulate_lockstep``, iteration.py ``IterationModel.time_lockstep``).

Source (TensorRT-LLM's PyTorch executor, tensorrt_llm/_torch/pyexecutor/
executor_request_queue.py, index file id 903912077; the same rule in the other stored versions
read): every iteration each rank all-gathers its count of unfinished requests and the sum of
their prompt lengths; rank 0's waiting queue (broadcast, so the same on every rank) gives up to
n x max_num_active_requests minus the unfinished ones. ``_schedule_attention_dp_requests`` sets
expected = max(ceil((unfinished + new) / n), the largest rank's count);
``_balance_requests_across_ranks`` sorts the new requests by prompt length, longest first, and
pops each onto the rank at the top of a heap of (prompt tokens, count, rank) over the ranks
under ``expected``, pushing the rank back while it stays under. ``_pad_attention_dp_dummy_request``
(py_executor.py) gives a rank with no request a one-token dummy generation request, so it
still joins every MoE layer's collectives. CutlassFusedMoE (fused_moe_cutlass.py at 000a01de,
1.0.0rc4) gathers ``all_rank_num_tokens`` rows unpadded unless ``use_dp_padding``, which the
Qwen3 and DeepSeek modules of that era leave off on Hopper and B200 with the CUTLASS FP8 path.

So in one iteration each rank's own work (attention, dense layers, router, shared experts,
head) ends when its own tokens are done, each MoE layer waits for the slowest rank, and the
experts and the exchange run once on all ranks' rows: t = max_r own(T_r) + shared(sum_r T_r).

The synthetic iteration model below makes that exact by hand: a = 1 ms of own work per token,
b = 2 ms of expert work per token of the per-rank mean (all tables zero but these), no
attention, no host time: t = a max_r T_r + b mean_r T_r, an idle rank counted as T = 1.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import zeroed_iteration
from scalemodel.analytic.serving.scheduler import (
    SchedulerPolicy,
    adp_assign,
    simulate,
    simulate_lockstep,
)

A = 1e-3  # own seconds per token of a rank
B = 2e-3  # expert + exchange seconds per token, at the ranks' mean tokens


def test_assignment_by_hand():
    # ranks' unfinished requests [2, 0, 1, 0] holding [200, 0, 100, 0] prompt tokens; new
    # prompts [50, 300, 300, 10]: expected = max(ceil(7 / 4), 2) = 2, so rank 0 is full and the
    # heap holds (0, 0, r1), (100, 1, r2), (0, 0, r3). Longest first (stable): #1 (300) -> r1,
    # which goes back as (300, 1); #2 (300) -> r3, back as (300, 1); #0 (50) -> r2 (100 tokens
    # is now the fewest), which reaches 2 and leaves; #3 (10) -> r1 (300, 1, r1 before r3).
    assert adp_assign([2, 0, 1, 0], [200, 0, 100, 0], [50, 300, 300, 10]) == [2, 1, 3, 1]


def test_equal_prompts_go_round_the_ranks():
    # all ranks empty, 5 equal prompts over 2 ranks: expected = 3; ties fall to the lower rank
    # first, then the rank with fewer tokens: r0, r1, r0, r1, r0
    assert adp_assign([0, 0], [0, 0], [100] * 5) == [0, 1, 0, 1, 0]


@pytest.fixture(scope="module")
def it_ab():
    """A real attention-DP iteration model (Qwen3-235B-A22B, DEP2 on H200), its tables replaced
    so that own work is A per token and the experts B per token of the ranks' mean."""
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.specs import get_gpu, get_model

    m, g = get_model("qwen3-235b-a22b"), get_gpu("h200")
    lay = ServeLayout(tp=2, ep=2, attention_dp=True)
    it = build(m, g, lay, precision("fp8"), "fp8", max_tokens=1024, max_seqs=64,
               attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, 2),
               adp_exchange=get_serving_engine("trtllm-1.0").attention_dp)
    tb = it.tables
    M = np.arange(tb.dense.size, dtype=np.float64)
    L, n_moe = m.n_layers, m.n_moe_layers
    z = {"nongemm": A * M / L}  # every layer's own work: L x A T / L = A T (the head's: 0)
    z["moe"] = B * M / n_moe  # of which the shared part (all of it here)
    z["moe_shared"] = B * M / n_moe
    # TensorRT-LLM's exchange has no decode-only mode: its low-latency tables equal these
    z["moe_ll"], z["moe_shared_ll"] = z["moe"], z["moe_shared"]
    return zeroed_iteration(it, z)


def test_lockstep_time_by_hand(it_ab):
    # 4 ranks' tokens [8, 0, 2, 2]; the idle rank runs the 1-token dummy: own max 8 A, experts
    # at the mean (8 + 1 + 2 + 2) / 4 = 3.25 tokens: 8 ms + 6.5 ms = 14.5 ms. Priced as equal
    # ranks of the mean batch (the model before the lock-step): (A + B) x 3.25 = 9.75 ms.
    T = np.array([8, 0, 2, 2])
    t = it_ab.time_lockstep(T, T, np.zeros(4), [], [])
    assert t == pytest.approx(8 * A + 3.25 * B)


def test_padded_gather_takes_the_largest_rank(it_ab):
    # an engine that pads every rank's rows to the largest (use_dp_padding): the experts and
    # the exchange see 4 x 8 rows, B x 8 per rank: 8 A + 8 B = 24 ms
    T = np.array([8, 0, 2, 2])
    it = dataclasses.replace(it_ab, adp_gather_padding=True)
    assert it.time_lockstep(T, T, np.zeros(4), [], []) == pytest.approx(8 * A + 8 * B)


def test_profile_records_the_engines_schedule():
    # TensorRT-LLM 1.0's reading (frameworks.toml attention_dp_schedule, source
    # trtllm-adp-request-balance): the heap rule, the dummy request, no padding on this path
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.errors import BadInput

    s = get_serving_engine("trtllm-1.0-bench").adp_schedule()
    assert s == {"assign": "prompt_tokens_under_count", "idle": "dummy_generation",
                 "gather_padding": False}
    with pytest.raises(BadInput, match="not read"):
        get_serving_engine("sglang").adp_schedule()


def _pol(max_batch=2, budget=1024):
    return SchedulerPolicy(max_batch=max_batch, token_budget=budget, chunked_prefill=True,
                           reserve="full", block_tokens=16, kv_blocks=10_000)


def test_equal_ranks_at_max_load_match_one_rank(it_ab):
    # 4 requests of 100 prompt and 3 output tokens, all at t = 0, 2 ranks of max_batch 2:
    # r0 gets #0, #2 and r1 #1, #3 (equal prompts go round). Each rank: iteration 1 prefills
    # its 2 prompts (200 tokens, first tokens out), iterations 2 and 3 decode 2 each.
    # t = (A + B) x 200 + 2 x (A + B) x 2 = 0.612 s, the same as one rank with 2 of them alone.
    r = simulate_lockstep(it_ab, _pol(), 2, np.zeros(4), np.full(4, 100), np.full(4, 3))
    assert r.makespan_s == pytest.approx((A + B) * 200 + 2 * (A + B) * 2)
    one = simulate(it_ab, _pol(), np.zeros(2), np.full(2, 100), np.full(2, 3))
    assert r.makespan_s == pytest.approx(one.makespan_s)


def test_unequal_prompts_wait_for_the_longest(it_ab):
    # prompts 300 and 100, 2 output tokens, max_batch 1: expected 1, longest first: 300 -> r0,
    # 100 -> r1. Iteration 1: T = [300, 100]: 300 A + 200 B = 0.7 s; iteration 2 decodes one
    # each: A + B. Ranks taken as equal would price 200 (A + B) + (A + B) = 0.603 s.
    r = simulate_lockstep(it_ab, _pol(max_batch=1), 2, np.zeros(2), np.array([300, 100]),
                          np.full(2, 2))
    assert r.makespan_s == pytest.approx(300 * A + 200 * B + A + B)


@pytest.mark.parametrize("stretch", [True, False])
def test_a_prefill_on_one_rank_stalls_the_others(it_ab, stretch):
    # request #0 (prompt 100, output 3) at t = 0, #1 (100, 3) at t = 0.2 s. #0 -> r0 (both
    # empty, r0 first). Iteration 1: r0 prefills 100, r1 runs the dummy (1 token):
    # 100 A + 50.5 B = 0.201 s. #1 has arrived: -> r1 (expected max(ceil(2 / 2), 1) = 1, r0
    # full). Iteration 2: r0 decodes 1 token while r1 prefills 100: 0.201 s again, t = 0.402.
    # Iteration 3: both decode (A + B), #0 done at 0.405; iteration 4: r1 decodes, r0 the dummy,
    # #1 done at 0.408. #0's time per output token is (0.405 - 0.201) / 2 = 0.102 s, not the
    # A + B = 3 ms of its own decode steps: it waited for r1's prefill.
    r = simulate_lockstep(it_ab, _pol(), 2, np.array([0.0, 0.2]), np.full(2, 100),
                          np.full(2, 3), stretch=stretch)
    p = 100 * A + 50.5 * B
    assert r.first_token_s == pytest.approx([p, 2 * p])
    assert r.finish_s == pytest.approx([2 * p + (A + B), 2 * p + 2 * (A + B)])
    assert r.tpot_s[0] == pytest.approx((p + A + B) / 2)


def test_reserve_on_demand_is_refused(it_ab):
    from scalemodel.errors import BadInput

    pol = dataclasses.replace(_pol(), reserve="on_demand")
    with pytest.raises(BadInput, match="guaranteed-no-evict"):
        simulate_lockstep(it_ab, pol, 2, np.zeros(2), np.full(2, 10), np.full(2, 2))


def test_real_model_equal_ranks_at_max_load_match_one_rank():
    # Qwen3-235B-A22B DEP4 on H200 (TensorRT-LLM 1.0's exchange): 64 equal requests all queued
    # at t = 0 go 16 to each rank (equal prompts go round), every rank then runs the same
    # batches, so the lock-step's max over the ranks is each rank's own time, and the makespan
    # is that of one rank with 16 of them: the DEPn rows of serving_published.csv (fixed
    # lengths, every request queued at once) take no lock-step cost.
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.specs import get_gpu, get_model

    m, g = get_model("qwen3-235b-a22b"), get_gpu("h200")
    lay = ServeLayout(tp=4, ep=4, attention_dp=True)
    it = build(m, g, lay, precision("fp8"), "fp8", max_tokens=2048, max_seqs=16,
               attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, 4),
               adp_exchange=get_serving_engine("trtllm-1.0").attention_dp)
    pol = _pol(max_batch=16, budget=2048)
    four = simulate_lockstep(it, pol, 4, np.zeros(64), np.full(64, 512), np.full(64, 16))
    one = simulate(it, pol, np.zeros(16), np.full(16, 512), np.full(16, 16))
    assert four.makespan_s == pytest.approx(one.makespan_s, rel=1e-12)
    assert four.iterations == one.iterations


def test_decode_pool_ranks(it_ab):
    # a disaggregated decode pool (prompts arrive with their KV, first token already out, so 2
    # decode tokens each): requests of 100 cached and 3 output tokens at t = 0 and t = 2.5 ms
    # on 2 ranks. #0 -> r0 and decodes from iteration 1 (r1 runs the dummy): A + B = 3 ms an
    # iteration. #1 arrives during iteration 1 and goes to r1 (r0 is at the target of 1); as in
    # the one-rank scheduler, a sequence admitted into a running iteration decodes from the
    # next one. So iteration 2 decodes #0 (done at 6 ms), iterations 3 and 4 decode #1 (r0
    # runs the dummy): done at 12 ms.
    r = simulate(it_ab, _pol(), np.array([0.0, 0.0025]), np.full(2, 100), np.full(2, 3),
                 prefilled=True, ranks=2)
    assert r.finish_s == pytest.approx([2 * (A + B), 4 * (A + B)])
    # the same two requests on one rank alone: the same rule, the same times
    one = simulate(it_ab, _pol(), np.array([0.0, 0.0025]), np.full(2, 100), np.full(2, 3),
                   prefilled=True)
    assert one.finish_s == pytest.approx([2 * (A + B), 4 * (A + B)])


# SGLang 0.4.6 (source sglang-046-dp-attention-schedule, read in the PyPI wheel
# sglang-0.4.6-py3-none-any.whl): server_args.py line 108 load_balance_method = "round_robin";
# managers/data_parallel_controller.py 231-236 round_robin_scheduler sends each request, as the
# event loop receives it (246-258), to workers[round_robin_counter] and advances the counter mod
# dp_size, whatever the ranks hold; managers/scheduler.py 1514-1525 all-gathers every rank's
# token count each iteration and gives a rank with nothing to run an idle batch, which
# schedule_batch.py 1332-1343 (prepare_for_idle) builds with empty input_ids: zero tokens.


def test_round_robin_ignores_the_ranks_load():
    # 3 ranks, 4 requests handed out before (counter 4 mod 3 = 1); rank 0 holds 5 requests of
    # 5,000 tokens, the others none: the next 4 go to ranks 1, 2, 0, 1 all the same
    assert adp_assign([5, 0, 0], [5000, 0, 0], [10, 20, 30, 40], rule="round_robin",
                      dealt=4) == [1, 2, 0, 1]


def test_empty_idle_batch_by_hand(it_ab):
    # ranks' tokens [8, 0, 2, 2] with SGLang's idle batch of no tokens: own max 8 A, experts at
    # the mean (8 + 0 + 2 + 2) / 4 = 3 tokens: 8 ms + 6 ms = 14 ms (TensorRT-LLM's one-token
    # dummy: 14.5 ms, test_lockstep_time_by_hand)
    T = np.array([8, 0, 2, 2])
    it = dataclasses.replace(it_ab, adp_idle="empty_batch")
    assert it.time_lockstep(T, T, np.zeros(4), [], []) == pytest.approx(8 * A + 3 * B)


def test_round_robin_prefill_pool_by_hand(it_ab):
    # a prefill pool (osl 1) under SGLang's on-demand reserve: prompts [300, 100, 100] at t = 0
    # on 2 ranks, max_batch 4. Round robin: #0 -> r0, #1 -> r1, #2 -> r0, so one iteration runs
    # T = [400, 100]: 400 A + 250 B = 0.9 s, and every request is done (its one token out).
    # TensorRT-LLM's rule on the same requests: expected ceil(3 / 2) = 2; 300 -> r0, then the
    # two 100s -> r1 (fewest tokens): T = [300, 200], 300 A + 250 B = 0.8 s.
    isl, osl = np.array([300, 100, 100]), np.ones(3, np.int64)
    pol = dataclasses.replace(_pol(max_batch=4), reserve="on_demand", adp_assign="round_robin")
    it = dataclasses.replace(it_ab, adp_idle="empty_batch")
    r = simulate_lockstep(it, pol, 2, np.zeros(3), isl, osl)
    assert r.makespan_s == pytest.approx(400 * A + 250 * B)
    trt = simulate_lockstep(it_ab, _pol(max_batch=4), 2, np.zeros(3), isl, osl)
    assert trt.makespan_s == pytest.approx(300 * A + 250 * B)


def test_sglang_profile_and_its_ranks():
    from scalemodel.analytic.serving.engine import get_serving_engine
    from scalemodel.analytic.serving.iteration import ServeLayout
    from scalemodel.analytic.serving.service import adp_ranks

    eng = get_serving_engine("sglang-0.4.6-deepep")
    assert eng.adp_schedule() == {"assign": "round_robin", "idle": "empty_batch",
                                  "gather_padding": False}
    lay = ServeLayout(tp=4, ep=4, attention_dp=True)
    # the on-demand reserve (retraction) is simulated in lock-step only where nothing decodes
    assert adp_ranks(lay, eng, 1) == 4
    assert adp_ranks(lay, eng, 100) == 1
    assert adp_ranks(lay, get_serving_engine("trtllm-1.0-bench"), 100) == 4
