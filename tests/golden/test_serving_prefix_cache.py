"""The prefix cache in the serving scheduler on schedules worked out by hand.

Rules from source (frameworks.toml prefix_cache, sources_frameworks.toml):
- vLLM 0.9.2 V1 (vllm-v092-prefix-cache): get_computed_blocks caps the hit at num_tokens - 1
  (v1/core/kv_cache_manager.py line 175) and find_longest_cache_hit takes max_length //
  block_size whole blocks (v1/core/single_type_kv_cache_manager.py line 263): a P-token prefix
  of an L-token prompt hits 16 * min(P // 16, (L - 1) // 16) tokens; allocate_slots caches the
  blocks when it schedules them (kv_cache_manager.py line 292), so a request scheduled later in
  the same step hits ("scheduled").
- SGLang 0.4.6.post5 (sglang-0462-radix-cache): page_size 1, at most input_len - 1 tokens
  matched (schedule_batch.py 650-668), the radix tree updated after the prefill batch has run
  (scheduler_output_processor_mixin.py 85-94: "prefilled").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import cli_json, run_cli, serving_iteration
from scalemodel.analytic.serving.scheduler import SchedulerPolicy, simulate
from scalemodel.analytic.serving.streams import Stream, prefix_lengths

MS, ATT = 1e-3, 1e-6


class Linear:
    """A stand-in iteration model written out by hand: 1 ms per token of the iteration, plus
    1 us per (new token, cached token) pair of the prefill chunks' attention over the KV before
    them (the cached prefix included); decode context costs nothing."""

    spec = None  # no speculative decoding

    def time(self, T, n_logits, decode_ctx_sum, chunks, cached, max_ctx=None, n_decode=0):
        chunks, cached = np.asarray(chunks, float), np.asarray(cached, float)
        return MS * T + ATT * float((chunks * cached).sum())


@pytest.fixture(scope="module")
def one_second():
    """Every iteration costs 1 s (scheduling order only)."""
    class One:
        spec = None

        def time(self, *a, **kw):
            return 1.0
    return One()


def pol(**kw):
    base = dict(max_batch=1024, token_budget=4096, chunked_prefill=True, reserve="on_demand",
                block_tokens=16, kv_blocks=10_000, prefix_cache="scheduled")
    return SchedulerPolicy(**(base | kw))


def run(it, p, isl, osl, prefix, arrival=None, **kw):
    n = len(prefix)
    a = np.zeros(n) if arrival is None else np.asarray(arrival, float)
    return simulate(it, p, a, np.full(n, isl), np.full(n, osl),
                    prefix=np.asarray(prefix, np.int64), **kw)


def test_shared_prefix_cuts_prefill_tokens_and_ttft_by_hand():
    # 4 prompts of 1000 tokens queued at once, the first 600 shared, 2 output tokens each,
    # budget 4096 (all prefill in iteration 1). vLLM V1 rule, blocks of 16:
    #   r0 computes all 1000 and its 600 // 16 = 37 full prefix blocks (592 tokens) are cached
    #   as it is scheduled; r1..r3 hit 16 * min(37, 999 // 16 = 62) = 592 and compute 408 each.
    #   prefill tokens: 1000 + 3 * 408 = 2224 (without the prefix: 4000)
    #   iteration 1: 2224 tokens * 1 ms + attention 3 * 408 new x 592 cached * 1 us
    #              = 2.224 s + 0.724608 s = 2.948608 s: every first token then
    #   iteration 2: 4 decode tokens = 0.004 s: every request done
    it = Linear()
    with_p = run(it, pol(), 1000, 2, [600] * 4)
    none = run(it, pol(), 1000, 2, [0] * 4)
    t1 = 2224 * MS + 3 * 408 * 592 * ATT
    assert with_p.prefill_tokens == 2224 and with_p.prefix_hit_tokens == 3 * 592
    assert np.allclose(with_p.ttft_s, t1)
    assert np.allclose(with_p.finish_s, t1 + 4 * MS)
    assert none.prefill_tokens == 4000 and none.prefix_hit_tokens == 0
    assert np.allclose(none.ttft_s, 4000 * MS)


def test_prefix_cache_off_changes_nothing():
    it = Linear()
    a = run(it, pol(prefix_cache="off"), 1000, 2, [600] * 4)
    b = run(it, pol(), 1000, 2, [0] * 4)
    assert a.prefill_tokens == b.prefill_tokens == 4000
    assert np.array_equal(a.first_token_s, b.first_token_s)


@pytest.mark.parametrize("bs, isl, P, hit", [
    (16, 1000, 600, 592),    # floor(600 / 16) = 37 full blocks
    (16, 1000, 15, 0),       # less than one full block: nothing is cached
    (16, 1024, 1024, 1008),  # the whole prompt: (1024 - 1) // 16 = 63 blocks, the last recomputed
    (1, 1024, 1024, 1023),   # token granular (SGLang page_size 1): all but the last token
    (1, 1000, 600, 600),
])
def test_hit_is_whole_blocks_and_never_the_last_token(bs, isl, P, hit):
    r = run(Linear(), pol(block_tokens=bs), isl, 1, [P, P])
    assert r.prefix_hit_tokens == hit
    assert r.prefill_tokens == 2 * isl - hit


def test_prefilled_rule_hits_only_after_the_prefill_ran(one_second):
    # SGLang's rule, no chunking, budget 1000, 4 prompts of 1000 tokens sharing 600, 2 outputs:
    #   it 1: r0's whole prompt (1000 tokens) fills the budget;           r0 first token at 1
    #   it 2: r0 decodes (1), budget 999: r1 and r2 hit 600 (1000 - 1 > 600) and compute 400
    #         each; r3's 400 > 199 left waits;                  r1, r2 first at 2, r0 done at 2
    #   it 3: r1, r2 decode, r3 hits and computes 400;            r3 first at 3, r1, r2 done
    # Without the prefix a whole 1000-token prompt needs an iteration with no decode in it
    # (999 < 1000 left otherwise): r1 at 3 (decodes at 4), r2 at 5, r3 at 7.
    p = pol(prefix_cache="prefilled", block_tokens=1, token_budget=1000, chunked_prefill=False)
    r = run(one_second, p, 1000, 2, [600] * 4)
    assert list(r.first_token_s) == [1.0, 2.0, 2.0, 3.0]
    assert r.prefill_tokens == 1000 + 3 * 400
    none = run(one_second, p, 1000, 2, [0] * 4)
    assert list(none.first_token_s) == [1.0, 3.0, 5.0, 7.0]


def test_prefilled_rule_no_hit_within_the_same_batch(one_second):
    # the same 4 prompts under a 4096 budget all enter iteration 1 before the radix tree holds
    # r0's prompt: no hit (vLLM's rule hits there: test above)
    p = pol(prefix_cache="prefilled", block_tokens=1)
    r = run(one_second, p, 1000, 2, [600] * 4)
    assert r.prefix_hit_tokens == 0 and r.prefill_tokens == 4000


def test_shared_blocks_counted_once_in_the_pool(one_second):
    # 4 prompts of 336 tokens (21 blocks of 16), the first 320 (20 blocks) shared, 1 output,
    # a pool of 45 blocks. Without sharing a prompt takes 21 blocks: 2 fit per iteration
    # (42), two waves. With it r0 takes 21, of which 20 become the cached prefix, and r1..r3
    # hit 320 tokens and take 21 - 20 = 1 block each: 21 + 3 = 24 <= 45, one wave.
    p = pol(kv_blocks=45)
    shared = run(one_second, p, 336, 1, [320] * 4)
    alone = run(one_second, p, 336, 1, [0] * 4)
    assert shared.peak_batch == 4 and list(shared.first_token_s) == [1.0] * 4
    assert alone.peak_batch == 2 and list(alone.first_token_s) == [1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("other_isl, hits", [(80, 320), (160, 0)])
def test_unreferenced_prefix_stays_cached_until_the_pool_needs_it(one_second, other_isl, hits):
    # pool of 25 blocks of 16. t = 0: r0 (336 tokens, 320 shared) computes the prefix (20
    # blocks cached) and finishes at 1 s: the 25 blocks count as free, 20 of them the cached
    # prefix. t = 10: r1 shares nothing; t = 20: r2 shares the prefix.
    #   r1 of 80 tokens takes 5 blocks: 20 free blocks left, the prefix survives, r2 hits 320
    #   r1 of 160 tokens takes 10: only 15 left, the prefix's blocks were taken (evicted), and
    #   r2 computes its whole prompt
    n_isl = np.array([336, other_isl, 336])
    r = simulate(one_second, pol(kv_blocks=25), np.array([0.0, 10.0, 20.0]), n_isl,
                 np.ones(3, np.int64), prefix=np.array([320, 0, 320]))
    assert r.prefix_hit_tokens == hits
    assert r.prefill_tokens == int(n_isl.sum()) - hits


@pytest.fixture(scope="module")
def real_it():
    return serving_iteration()


@pytest.mark.parametrize("rule, reserve, blocks", [("scheduled", "on_demand", 600),
                                                    ("prefilled", "on_demand", 600),
                                                    ("scheduled", "full", 2000)])
def test_stretches_match_stepping_with_a_prefix(real_it, rule, reserve, blocks):
    # the one-move decode stretches must agree with stepping every iteration when the queue's
    # head would be admitted thanks to a prefix hit, and under eviction pressure
    p = pol(max_batch=64, token_budget=2048, reserve=reserve, kv_blocks=blocks,
            prefix_cache=rule)
    pfx = prefix_lengths(Stream("max-load", 200, prefix_tokens=256, prefix_share=0.5),
                         np.full(200, 300))
    a = run(real_it, p, 300, 120, pfx)
    b = run(real_it, p, 300, 120, pfx, stretch=False)
    assert a.prefix_hit_tokens > 0
    assert a.iterations == b.iterations and a.prefix_hit_tokens == b.prefix_hit_tokens
    assert np.allclose(a.finish_s, b.finish_s, rtol=1e-9)


def test_share_is_spread_evenly():
    # request j shares when floor((j + 1) f) > floor(j f): f = 0.5 -> j = 1, 3, 5, ...;
    # f = 0.25 -> j = 3, 7; a drawn prompt shorter than the prefix shares all of itself
    s = Stream("max-load", 8, prefix_tokens=100, prefix_share=0.5)
    assert list(prefix_lengths(s, np.full(8, 200))) == [0, 100] * 4
    s = dataclasses.replace(s, prefix_share=0.25)
    assert list(prefix_lengths(s, np.full(8, 200))) == [0, 0, 0, 100] * 2
    s = dataclasses.replace(s, prefix_share=1.0)
    assert list(prefix_lengths(s, np.array([50, 300]))) == [50, 100]


def test_plan_serve_with_a_prefix_counts_the_hits(capsys):
    # vllm-v1, 40 prompts of 512 tokens sharing their first 200: 200 // 16 = 12 blocks =
    # 192 tokens hit by each request after the first

    d = cli_json(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpu",
                 "h100-sxm", "--gpus", "1", "--layout", "tp=1,pp=1,dp=1",
                 "--precision", "fp8", "--isl", "512", "--osl", "16",
                 "--requests", "40", "--prefix-tokens", "200")
    assert d["prefix_cache"] == "scheduled" and d["prefix_hit_tokens"] == 39 * 192
    assert d["prefill_tokens_computed"] == 40 * 512 - 39 * 192


@pytest.mark.parametrize("argv, needle", [
    (["--isl", "512", "--prefix-tokens", "600"], "longer than the prompt"),
    (["--prefix-tokens", "100", "--prefix-share", "1.5"], "[0, 1]"),
    (["--prefix-tokens", "100", "--prefix-share", "-0.1"], "[0, 1]"),
    (["--prefix-tokens", "100", "--framework", "trtllm-1.0"], "not read"),
    (["--prefix-tokens", "100", "--disaggregated"], "not simulated"),
])
def test_bad_prefix_input_one_line_exit_2(capsys, argv, needle):
    rc, out, err = run_cli(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpus", "1",
                           "--requests", "20", *argv)
    assert rc == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and needle in line, line


@pytest.mark.parametrize("basis, want", [
    ("dist:sharegpt", (0, 1.0)),
    ("fixed; prefix:512/0.75 (a stated system prompt)", (512, 0.75)),
    ("prefix:1024/1", (1024, 1.0)),
])
def test_validation_rows_state_a_prefix_in_length_basis(basis, want):
    from scalemodel.analytic.serving.validate import row_prefix

    assert row_prefix({"id": "x", "length_basis": basis}) == want


def test_validation_row_with_a_malformed_prefix_is_bad_input():
    from scalemodel.analytic.serving.validate import row_prefix
    from scalemodel.errors import BadInput

    with pytest.raises(BadInput, match="prefix:TOKENS/SHARE"):
        row_prefix({"id": "x", "length_basis": "prefix:512"})


@pytest.mark.parametrize("seed", [2, 3])
def test_stretches_match_stepping_when_decode_growth_evicts_the_prefix(real_it, seed):
    # a pool barely above one request (1.2 x the largest), blocks of 32, SGLang's rule: a
    # cached prefix nobody refers to is taken by the running decodes' growth, after which the
    # queue's head (which no longer hits, nor has to leave the prefix's blocks alone) may fit;
    # a stretch must stop at that iteration as stepping does
    from scalemodel.analytic.serving.streams import lengths

    rng = np.random.default_rng(seed)
    n = 120
    isl = lengths(400, n, "uniform", 0.5, rng, 4000)
    osl = lengths(60, n, "uniform", 0.5, rng, 4000)
    pfx = prefix_lengths(Stream("max-load", n, prefix_tokens=486, prefix_share=0.5), isl)
    blocks = int(1.2 * int((-(-(isl + osl) // 32)).max()))
    p = pol(max_batch=64, token_budget=2048, block_tokens=32, kv_blocks=blocks,
            prefix_cache="prefilled")
    a = simulate(real_it, p, np.zeros(n), isl, osl, prefix=pfx)
    b = simulate(real_it, p, np.zeros(n), isl, osl, prefix=pfx, stretch=False)
    assert a.iterations == b.iterations and a.prefix_hit_tokens == b.prefix_hit_tokens
    assert np.allclose(a.finish_s, b.finish_s, rtol=1e-9)
