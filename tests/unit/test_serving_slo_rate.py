"""MLPerf Server's figures as LoadGen defines them: the time per output token of a sample, and
the Server result (the highest Poisson rate whose run keeps p99 TTFT and TPOT within limits)
searched by ``slo_rate``; a validation row of that metric, and bad input."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.scheduler import SimResult
from scalemodel.analytic.serving.service import evaluate, meets_p99, slo_rate
from scalemodel.analytic.serving.streams import Stream
from scalemodel.analytic.serving.validate import validate_published
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model

ROOT = Path(__file__).resolve().parents[2]


def test_tpot_is_loadgens_time_to_output_token():
    # MLPerf LoadGen, loadgen/logging.cc AsyncLog::RecordSampleCompletion (read at
    # pgmpablo157321/inference 1e7eae1e, a fork of mlcommons/inference): a sample's time per
    # output token = (its latency - its first token latency) / (n_tokens - 1), n_tokens the
    # tokens the SUT reports (NVIDIA's v4.1 harness reports every generated token). By hand:
    # arrival 1.0 s, first token 1.3 s, last token 2.2 s, 4 tokens -> (1.2 - 0.3) / 3 = 0.3 s;
    # and 10 tokens arriving at 0.0 s, first at 0.5 s, last at 5.0 s -> (5.0 - 0.5) / 9 = 0.5 s
    r = SimResult(np.array([1.0, 0.0]), np.array([1.3, 0.5]), np.array([2.2, 5.0]),
                  np.array([100, 100]), np.array([4, 10]), 5.0, 1, 0, 2, 2.0, 0.0, 0.0)
    assert r.tpot_s == pytest.approx([0.3, 0.5])
    assert r.ttft_s == pytest.approx([0.3, 0.5])


def _small():
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("trtllm-mlperf-v41"), precision("fp8")
    return m, g, ServeLayout(1, 1), p, eng.default_kv_dtype(p), eng


def test_slo_rate_is_the_edge_of_the_limits():
    m, g, lay, p, kd, eng = _small()
    t0 = time.perf_counter()
    ttft, tpot = 0.5, 0.02
    s = slo_rate(m, g, lay, p, kd, eng, Stream("rate", 200, rate_per_s=20.0), 256, 64,
                 ttft_p99_s=ttft, tpot_p99_s=tpot, max_batch=256, rel_tol=0.04)
    assert meets_p99(s.result, ttft, tpot)
    assert s.result.ttft_p99_s <= ttft and s.result.tpot_p99_s <= tpot
    # just above the rate found, the limits fail (the search's bracket closed to 4 %)
    above = evaluate(m, g, lay, p, kd, eng, Stream("rate", 200, rate_per_s=s.rate_per_s * 1.05),
                     256, 64, max_batch=256)
    assert not meets_p99(above, ttft, tpot)
    # the first guess only starts the search: from far below, the same edge
    s2 = slo_rate(m, g, lay, p, kd, eng, Stream("rate", 200, rate_per_s=2.0), 256, 64,
                  ttft_p99_s=ttft, tpot_p99_s=tpot, max_batch=256, rel_tol=0.04)
    assert s2.rate_per_s == pytest.approx(s.rate_per_s, rel=0.09)
    assert time.perf_counter() - t0 < 10


def test_slo_rate_bad_input():
    m, g, lay, p, kd, eng = _small()
    with pytest.raises(BadInput, match="SLO limits must be positive"):
        slo_rate(m, g, lay, p, kd, eng, Stream("rate", 10, rate_per_s=1.0), 128, 16,
                 ttft_p99_s=0.0, tpot_p99_s=0.1)
    with pytest.raises(BadInput, match="first guess must be positive"):
        slo_rate(m, g, lay, p, kd, eng, Stream("rate", 10, rate_per_s=0.0), 128, 16,
                 ttft_p99_s=1.0, tpot_p99_s=0.1)


HEAD = ("id,source,url,date,engine,engine_version,model,gpu,tp,pp,precision,isl,osl,length_basis,"
        "requests,stream,rate,metric,measured,location,max_batch,slo_ttft_p99_s,slo_tpot_p99_s")


def _row(rid, stream="rate", slo="0.5,0.02"):
    return (f"{rid},src,u,2024,trtllm-mlperf-v41,v,llama-3-8b,h100-sxm,1,1,fp8,256,64,fixed,400,"
            f"{stream},20,slo_requests_per_s,10,loc,256,{slo}")


def test_slo_rows_priced_or_skipped_with_why():
    text = "\n".join([HEAD, _row("ok"), _row("no-limit", slo=","), _row("max", stream="max-load")])
    rows, skipped = validate_published(text, ROOT)
    (r,) = rows
    assert r.id == "ok" and r.metric == "slo_requests_per_s" and r.predicted > 0
    why = dict(skipped)
    assert "slo_ttft_p99_s" in why["no-limit"] and "is empty" in why["no-limit"]
    assert "needs stream rate" in why["max"]
