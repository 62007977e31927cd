"""Review findings of session 19 (s19-review) in the serving planner's figures, each with its
derivation or source beside it."""

from __future__ import annotations

import pytest

from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.service import evaluate
from scalemodel.analytic.serving.streams import Stream
from scalemodel.specs import get_gpu, get_model


def test_tpot_percentiles_leave_out_one_token_answers():
    # vLLM's benchmarks/benchmark_serving.py calculate_metrics: a request's TPOT, (latency -
    # TTFT) / (output_len - 1), enters the list its mean and percentiles are taken over only
    # where output_len > 1 (the zeros it keeps for one-token answers go to the goodput list
    # alone). Exponential output lengths of mean 2, rounded and clipped at 1, give a one-token
    # answer for every draw below 1.5: P = 1 - exp(-0.75) = 53% of the requests, so a median
    # taken over all of them is 0 s, which no decoding request has. Over the requests that
    # decode, the median lies between their fastest and slowest TPOT, beside their mean.
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("vllm-v1"), precision("fp8")
    s = Stream("max-load", 400, dist="exponential", seed=2)
    r = evaluate(m, g, ServeLayout(1), p, eng.default_kv_dtype(p), eng, s, 128, 2,
                 max_batch=64)
    assert r.tpot_p50_s > 0.0
    assert r.tpot_p50_s <= r.tpot_p99_s
    assert r.tpot_p50_s == pytest.approx(r.tpot_mean_s, rel=0.5)
