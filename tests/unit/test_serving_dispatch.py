"""How a Poisson stream reaches dp replicas (frameworks.toml ``dispatch``; s16, issue 17).

Source of the one non-default rule: NVIDIA's MLPerf Inference v4.1 harness
(mlcommons/inference_results_v4.1 at a2f5d66, closed/NVIDIA/code/harness/harness_llm):
main_llm.cc ``DEFINE_int32(traffic_distribution_policy, 2, ...)``; llm_server.hpp
``enum trafficDistributionPolicy { roundRobin = 0, staticChop = 1, loadBalancing = 2 }``;
llm_server.cc ``getNextQueueIdx`` -> ``getLeastBusyIdx`` (min_element of
mNumInFlightTransactions, += 1 at dispatch, -= on QuerySamplesComplete)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import ServeLayout
from scalemodel.analytic.serving.service import dispatch_every
from scalemodel.analytic.serving.streams import Stream, draw


def test_profiles_record_the_harness_rule():
    assert get_serving_engine("trtllm-mlperf-v41").dispatch == "least_busy"
    # v5.1's llmlib Server dispatch was not read: the planner's default
    assert get_serving_engine("trtllm-mlperf-v51").dispatch == "random"
    assert get_serving_engine("trtllm-0.17").dispatch == "random"
    assert get_serving_engine("vllm-v1").dispatch == "random"


def test_dispatch_every_only_for_a_rate_stream_over_replicas():
    v41, v17 = get_serving_engine("trtllm-mlperf-v41"), get_serving_engine("trtllm-0.17")
    rate = Stream("rate", 100, rate_per_s=75.0)
    assert dispatch_every(ServeLayout(2, dp=4), v41, rate, 4) == 4
    assert dispatch_every(ServeLayout(2, dp=4), v17, rate, 4) == 1
    assert dispatch_every(ServeLayout(2, dp=1), v41, rate, 1) == 1
    assert dispatch_every(ServeLayout(2, dp=4), v41, Stream("max-load", 100), 4) == 1


def test_dealt_arrivals_are_erlang_gaps_of_the_share_rate():
    # a replica dealt every k-th arrival of a Poisson stream at k x r sees gaps that are sums of
    # k exponentials of mean 1 / (k r): mean 1 / r, coefficient of variation 1 / sqrt(k)
    # (Erlang-k); its own Poisson share at r has CV 1
    n, r, k = 40_000, 18.75, 4
    s = Stream("rate", n, rate_per_s=r, seed=3)
    own, _, _ = draw(s, 222, 290, 4096)
    dealt, i, o = draw(s, 222, 290, 4096, every=k)
    for a, cv in ((own, 1.0), (dealt, 1.0 / np.sqrt(k))):
        g = np.diff(a)
        assert a.size == n and a[0] == 0.0
        assert g.mean() == pytest.approx(1.0 / r, rel=0.02)
        assert g.std() / g.mean() == pytest.approx(cv, rel=0.03)
    assert (i == 222).all() and (o == 290).all()  # the lengths are drawn as before
