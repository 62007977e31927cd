"""The engine's host loop per iteration (analytic/serving/iteration.py ``with_host``; engine
profiles' host_s_per_iter / host_s_per_seq / host_overlap in specs/data/frameworks.toml).

Derivation (no model output is copied here). TensorRT-LLM's PyTorch executor of the v0.20 era
(tensorrt_llm/_torch/pyexecutor/py_executor.py ``_executor_loop_overlap`` at commit 0082febc of
the fork dominicshanshan/TensorRT-LLM) does, per pass: schedule batch n, launch its forward and
an asynchronous sample, then process batch n - 1 on the host (wait for its sampler event, update
the requests, send responses, free resources). In steady state the host's work H for one
iteration runs while the GPU runs the other, so a pass takes max(G, H): the GPU waits only when
H > G. A loop that waits for the GPU before its host work (vLLM V1 without --async-scheduling:
EngineCore.step schedules, executes, applies the output in turn; TensorRT-LLM 0.5's
gptSessionBenchmark with its shouldStopSync after every step) takes G + H.

vLLM 0.6.0's V0 loop with --num-scheduler-steps n (the v0.6.0 post ran n = 10; wheel
vllm-0.6.0, commit 32e7db25: engine/llm_engine.py 1500-1504 calls Scheduler.schedule only when
the cached schedule has no steps left, worker/multi_step_model_runner.py 380-391 advances the
inputs on the GPU for the other steps) does one scheduler call and its input preparation per n
iterations: with that work H not overlapped, an iteration takes G + H / n on average.

The stream below: 8 requests of 100 prompt tokens and 5 output tokens, all queued at once, a
4096-token budget: iteration 1 prefills the 8 prompts together (each emits its first token),
then 4 decode iterations of the 8 sequences, 5 iterations in all, each with 8 sequences
sampling. Every iteration's GPU work is made exactly G = 1 s; the host takes
H = 0.25 s + s_seq x 8.
"""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import gpu_bound_iteration, sourced_field, user_profile_refusal
from scalemodel.analytic.serving.scheduler import SchedulerPolicy, simulate

G = 1.0  # GPU seconds of every iteration
H0 = 0.25  # host seconds per iteration
N_SEQ = 8


@pytest.fixture(scope="module")
def gpu_one_second():
    """A real iteration model whose every iteration costs exactly G on the GPU: all tables
    zero but the memory-bound kernels', which hold G / n_layers per layer for any token count
    (dense_part = n_layers x G / n_layers), no attention, no host time."""
    return gpu_bound_iteration(G)


def _with_host(it, s_seq: float, overlap: bool, **kw):
    """``it`` with the host loop H = H0 + s_seq x (sequences sampling) an iteration, run beside
    the GPU's work (``overlap``) or after it; ``kw`` other fields replaced."""
    return dataclasses.replace(it, host_s_per_iter=H0, host_s_per_seq=s_seq, host_overlap=overlap,
                               **kw)


def run(it):
    p = SchedulerPolicy(max_batch=1024, token_budget=4096, chunked_prefill=True, reserve="full",
                        block_tokens=16, kv_blocks=10_000)
    n = N_SEQ
    return simulate(it, p, np.zeros(n), np.full(n, 100), np.full(n, 5))


def test_gpu_alone_takes_one_second_per_iteration(gpu_one_second):
    r = run(gpu_one_second)
    assert r.makespan_s == pytest.approx(5 * G)


def test_overlapped_host_shorter_than_gpu_is_hidden(gpu_one_second):
    # H = 0.25 + 0.05 x 8 = 0.65 s < G: max(G, H) = 1 s per iteration, 5 s in all
    r = run(_with_host(gpu_one_second, 0.05, True))
    assert r.makespan_s == pytest.approx(5 * 1.0)
    assert np.allclose(r.ttft_s, 1.0)


def test_host_not_overlapped_adds(gpu_one_second):
    # G + H = 1 + 0.65 = 1.65 s per iteration: first tokens at 1.65 s, done at 8.25 s
    r = run(_with_host(gpu_one_second, 0.05, False))
    assert np.allclose(r.ttft_s, 1.65)
    assert r.makespan_s == pytest.approx(5 * 1.65)


def test_overlapped_host_longer_than_gpu_sets_the_pace(gpu_one_second):
    # s_seq = 0.2: H = 0.25 + 1.6 = 1.85 s > G: the GPU waits, 1.85 s per iteration
    r = run(_with_host(gpu_one_second, 0.2, True))
    assert np.allclose(r.tpot_s, 1.85)
    assert r.makespan_s == pytest.approx(5 * 1.85)


def test_overhead_s_alone_prices_as_before(gpu_one_second):
    # the former single field: host time the GPU always waits for, added (1 + 0.5 s)
    it = dataclasses.replace(gpu_one_second, overhead_s=0.5)
    assert run(it).makespan_s == pytest.approx(5 * 1.5)
    # and on top of an overlapped loop: max(1, 0.65) + 0.5
    assert run(_with_host(gpu_one_second, 0.05, True, overhead_s=0.5)).makespan_s == pytest.approx(5 * 1.5)


def test_steady_state_search_takes_the_same_host_loop(gpu_one_second):
    # the search's steady-state estimate (search.py _steady): decode only, a full batch of
    # 64, no per-sequence host cost: every iteration max(G, H) with H = 1.5 s > G -> TPOT 1.5 s
    from scalemodel.analytic.serving.search import _steady

    es = SimpleNamespace(kv=SimpleNamespace(max_tokens=1e9), max_batch=64, token_budget=4096)
    it = dataclasses.replace(gpu_one_second, host_s_per_iter=1.5, host_overlap=True)
    tok_s, _, tpot = _steady(it, es, 100, 50, "full", None, decode_only=True)
    assert tpot == pytest.approx(1.5)
    assert tok_s == pytest.approx(64 / 1.5)
    it = dataclasses.replace(gpu_one_second, host_s_per_iter=0.5, host_overlap=True)
    assert _steady(it, es, 100, 50, "full", None, decode_only=True)[2] == pytest.approx(G)


def test_multi_step_spreads_one_scheduler_calls_host_work(gpu_one_second):
    # one call's H = 0.25 + 0.05 x 8 = 0.65 s over n = 5 iterations, not overlapped:
    # G + H / 5 = 1 + 0.13 = 1.13 s per iteration, first tokens at 1.13 s, done at 5.65 s
    r = run(_with_host(gpu_one_second, 0.05, False, host_iters_per_schedule=5))
    assert np.allclose(r.ttft_s, 1.13)
    assert r.makespan_s == pytest.approx(5 * 1.13)
    # overlapped, H / 5 = 0.37 s < G is hidden: 1 s per iteration (s_seq 0.2: H = 1.85 s)
    assert run(_with_host(gpu_one_second, 0.2, True, host_iters_per_schedule=5)).makespan_s == pytest.approx(5 * G)


def test_vllm_profiles_state_their_scheduler_steps():
    from scalemodel.analytic.serving.engine import get_serving_engine

    # EngineArgs.num_scheduler_steps = 1 (0.6.5 engine/arg_utils.py line 158): one call a step
    assert get_serving_engine("vllm-v0").host_iters_per_schedule == 1
    # the post's --num-scheduler-steps 10
    e = get_serving_engine("vllm-0.6.0-multistep")
    assert e.host_iters_per_schedule == 10
    assert e.sources["host_iters_per_schedule"] == "vllm-v060-engine-loop"
    assert e.version == "0.6.0"


def test_bad_host_iters_per_schedule_in_a_user_profile(tmp_path):
    msg = user_profile_refusal(tmp_path, sourced_field("host_iters_per_schedule", "0"))
    assert "host_iters_per_schedule" in msg and "integer >= 1" in msg


@pytest.mark.parametrize("fid,overlap,source", [
    ("trtllm-0.20", True, "trtllm-020-py-executor-overlap"),
    ("trtllm-1.0", True, "trtllm-overlap-scheduler-docs"),
    ("sglang", True, "sglang-v04-overlap-scheduler"),
    ("vllm-v1", False, "vllm-pr-19970-async-scheduling"),
    ("trtllm-0.5", False, "trtllm-050-benchmarks"),
    ("vllm-v0", False, "vllm-v065-engine-loop"),
    ("vllm-0.6.0-multistep", False, "vllm-v060-engine-loop"),
])
def test_engine_profiles_say_how_their_loop_overlaps(fid, overlap, source):
    from scalemodel.analytic.serving.engine import get_serving_engine

    e = get_serving_engine(fid)
    assert e.host_overlap is overlap
    assert e.sources["host_overlap"] == source
    # no host time is priced without a measurement of it at the profile's version
    assert e.host_s_per_iter == 0.0 and e.host_s_per_seq == 0.0 and e.overhead_s == 0.0


# SGLang 0.3.0's host time per iteration (profile sglang-0.3.0). Source
# wuklab-scheduling-overhead-2024: WukLab's post of 2024-09-10 timed SGLang v0.2.13 (its
# forward_step and forward_decode_batch are 0.3.0's: source sglang-v030-tp-worker) on Llama 3 8B,
# one A100, ShareGPT, 300 requests at once. Figure 11 (WukLab/wuklab_sysml
# static/images/scheduling_overhead/SGLang_A100.svg_1.svg, matplotlib output) draws the y axis
# with 0 ms at y = 384.48 pt and 50 ms at y = 105.969609 pt; the ShareGPT bar's forward segment
# runs from 384.48 to 217.875084 and its schedule segment from 217.875084 to 205.843435, so
# schedule = (217.875084 - 205.843435) x 50 / (384.48 - 105.969609) = 2.160 ms and forward =
# (384.48 - 217.875084) x 50 / (384.48 - 105.969609) = 29.91 ms; the figure's own label,
# 6.7%, is 2.16 / (29.91 + 2.16).
WUKLAB_MS_PER_PT = 50.0 / (384.48 - 105.969609)
WUKLAB_SGLANG_8B_SHAREGPT_S = (217.875084 - 205.843435) * WUKLAB_MS_PER_PT / 1000.0


def test_sglang_030_profile_takes_the_measured_host_time_per_step():
    from scalemodel.analytic.serving.engine import get_serving_engine

    sched_s = WUKLAB_SGLANG_8B_SHAREGPT_S
    assert round(sched_s * 1000.0, 2) == 2.16
    forward_s = (384.48 - 217.875084) * WUKLAB_MS_PER_PT / 1000.0
    assert round(forward_s * 1000.0, 2) == 29.91
    assert round(100.0 * sched_s / (forward_s + sched_s), 1) == 6.7
    e = get_serving_engine("sglang-0.3.0")
    assert e.version == "0.3.0"
    assert e.host_s_per_iter == pytest.approx(WUKLAB_SGLANG_8B_SHAREGPT_S, abs=5e-6)
    assert e.sources["host_s_per_iter"] == "wuklab-scheduling-overhead-2024"
    assert e.host_s_per_seq == 0.0
    # 0.3.0's tp_worker.py forward_decode_batch waits for the sampled ids (tolist) and checks
    # every request before it launches the next step: no overlap, one step per host pass
    assert e.host_overlap is False and e.sources["host_overlap"] == "sglang-v030-tp-worker"
    assert e.host_iters_per_schedule == 1
    # what it inherits stays the 0.4.x profile's (0.3.0's ServerArgs agree: sglang-v030-wheel)
    base = get_serving_engine("sglang")
    assert (e.block_size, e.max_num_seqs, e.chunked_prefill, e.prefix_cache) == (
        base.block_size, base.max_num_seqs, base.chunked_prefill, base.prefix_cache)


def test_sglang_030_host_time_adds_to_every_iteration(gpu_one_second):
    # not overlapped, one host pass per iteration: G + 0.00216 s each, 5 iterations
    from scalemodel.analytic.serving.engine import get_serving_engine

    e = get_serving_engine("sglang-0.3.0")
    it = dataclasses.replace(gpu_one_second, host_s_per_iter=e.host_s_per_iter,
                             host_s_per_seq=e.host_s_per_seq, host_overlap=e.host_overlap,
                             host_iters_per_schedule=e.host_iters_per_schedule)
    r = run(it)
    assert np.allclose(r.ttft_s, G + 0.00216, atol=1e-5)
    assert r.makespan_s == pytest.approx(5 * (G + 0.00216), abs=5e-5)
