"""The early stop of a serving simulation whose p99 is sure to exceed an SLO limit
(scheduler.simulate stop_p99), used by the MLPerf Server rate search (service.slo_rate): it
must give the full run's verdict, and the search must find the same rate as with full runs."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.serving import service
from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.scheduler import p99_exceeded_after, policy, simulate
from scalemodel.analytic.serving.service import iteration_model, meets_p99, slo_rate
from scalemodel.analytic.serving.streams import Stream, draw
from scalemodel.specs import get_gpu, get_model


def test_exceeded_after_is_the_order_statistic_of_the_quantile():
    # numpy's default quantile of n sorted values is x_j + g (x_(j+1) - x_j), h = 0.99 (n - 1),
    # j = floor(h): by hand n = 200: h = 197.01, j = 197, so 200 - 197 = 3 values above L
    # put x_197 above L. The count is taken one high where h is a whole number (n = 101: h =
    # 99, j = 99, 2 values would do; 3 is returned), never low.
    assert p99_exceeded_after(200) == 3
    assert p99_exceeded_after(101) == 3
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 100, 101, 200, 1000, 4097):
        k = p99_exceeded_after(n)
        for _ in range(20):
            x = rng.uniform(0.0, 1.0, n)
            if k > n:  # n = 1: no count of one value decides it before the end
                continue
            L = 0.5 * (float(np.sort(x)[n - k - 1]) + float(np.sort(x)[n - k])) if k < n \
                else float(x.min()) - 1.0  # exactly k values above L
            assert np.count_nonzero(x > L) == k
            assert np.quantile(x, 0.99) > L  # k above the limit: the p99 exceeds it


def _case(rate: float, n: int = 300):
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("trtllm-mlperf-v41"), precision("fp8")
    lay = ServeLayout(1, 1)
    kd = eng.default_kv_dtype(p)
    es = setup(eng, m, g, lay, p, kd, 256, 64, max_batch=256)
    it = iteration_model(m, g, lay, p, kd, eng, es)
    a, i, o = draw(Stream("rate", n, rate_per_s=rate), 256, 64, m.max_context)
    return it, policy(eng, es), a, i, o


@pytest.mark.parametrize("rate", [10.0, 80.0, 160.0, 400.0, 2000.0])
def test_early_stop_gives_the_full_runs_verdict(rate):
    it, pol, a, i, o = _case(rate)
    ttft, tpot = 0.5, 0.02
    full = simulate(it, pol, a, i, o)
    ok = bool(np.quantile(full.ttft_s, 0.99) <= ttft and np.quantile(full.tpot_s, 0.99) <= tpot)
    cut = simulate(it, pol, a, i, o, stop_p99=(ttft, tpot))
    # a stopped run is a failing one; an unstopped run is the full run, to the bit
    assert not (cut.stopped and ok)
    if not cut.stopped:
        assert np.array_equal(cut.finish_s, full.finish_s, equal_nan=True)
        assert np.array_equal(cut.first_token_s, full.first_token_s, equal_nan=True)
    else:
        assert cut.iterations < full.iterations
    if rate >= 400.0:  # past the edge at these limits (p99 TTFT 0.83 s at 400/s): it stops
        assert cut.stopped and not ok


def test_search_with_early_stop_finds_the_full_runs_rate(monkeypatch):
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("trtllm-mlperf-v41"), precision("fp8")
    lay = ServeLayout(1, 1)
    kd = eng.default_kv_dtype(p)
    args = (m, g, lay, p, kd, eng, Stream("rate", 200, rate_per_s=20.0), 256, 64)
    kw = dict(ttft_p99_s=0.5, tpot_p99_s=0.02, max_batch=256, rel_tol=0.04)
    fast = slo_rate(*args, **kw)
    # the same search with every run to its end (the stop switched off)
    real = service._evaluate_built
    monkeypatch.setattr(service, "_evaluate_built",
                        lambda *a, **k: real(*a, **{**k, "stop_p99": None}))
    full = slo_rate(*args, **kw)
    assert fast.rate_per_s == full.rate_per_s and fast.runs == full.runs
    assert fast.result.requests_per_s == full.result.requests_per_s
    assert meets_p99(fast.result, 0.5, 0.02)
