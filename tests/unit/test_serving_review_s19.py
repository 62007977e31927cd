"""Review findings of session 19 (s19-review) in the serving planner's figures, each with its
derivation or source beside it."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.serving.disagg import Link, simulate_pair
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.search import screen, simulate_candidate
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


def _pools(eng_id: str = "vllm-v1", isl: int = 256, osl: int = 2):
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng = get_serving_engine(eng_id)
    lays = [ServeLayout(1)]
    pre = screen(m, g, eng, lays, ["fp8"], [None], [64], isl, 1, None, None)
    dec = screen(m, g, eng, lays, ["fp8"], [None], [64], isl, osl, None, None,
                 decode_only=True)
    return m, eng, pre[0], dec[0]


def test_disaggregated_latency_carries_the_kv_transfer():
    # The client's tokens come from the decode pool, which starts a request once its KV has
    # arrived (Dynamo's SGLang disaggregation page, fern/pages/backends/sglang/
    # sglang-disaggregation.md, read in the fork wxsms/dynamo at 7ca6a56: "KV received, start
    # decode", then "Decode -->> Client: Stream output token"; disagg.plan screens TTFT the
    # same way, the prefill estimate plus the transfer). By hand: a link of 5 s latency and
    # 1 GB/s moves a 256-token prompt's KV (Llama 3 8B under vllm-v1's default KV dtype for an
    # fp8 checkpoint, bf16: 32 layers x 2 x 8 heads x 128 x 2 B = 131,072 B/token, 33.6 MB)
    # in 5 + 0.0336 s, so every request's first token reaches its user at least 5.0336 s
    # after arrival (TTFT), while its second token is one decode step later (milliseconds
    # for a batch of 64 on an H100). Before the fix the 5 s were in neither TTFT nor TPOT:
    # TTFT stopped at the prefill pool and TPOT started at the decode pool's arrival.
    m, eng, p, d = _pools()
    link = Link("slow", 1e9, 5.0)
    r = simulate_pair(p, d, m, eng, Stream("max-load", 64), 256, 2, link)
    x = 5.0 + 256 * 131_072 / 1e9
    assert p.kv_dtype == "bf16"
    assert r.ttft_p50_s >= x and r.ttft_mean_s >= x
    assert r.tpot_p99_s < 0.5
    # the whole answer: its span covers the transfer once
    assert r.extra["makespan_s"] >= x


def test_plan_serve_simulates_a_candidate_as_validate_does():
    # One model per quantity: a configuration the search simulates (simulate_candidate, the
    # figures plan serve prints) and the same configuration through service.evaluate (the one
    # validate --serving runs) see the same stream. NVIDIA's MLPerf v4.1 harness deals a
    # Poisson stream to the least-busy of its dp inference groups (the trtllm-mlperf-v41
    # profile's dispatch = least_busy; sources in tests/unit/test_serving_dispatch.py), so each
    # of dp = 2 replicas sees every second arrival (service.dispatch_every). Before the fix the
    # search drew each replica's own Poisson stream instead.
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng = get_serving_engine("trtllm-mlperf-v41")
    p = precision("fp8")
    s = Stream("rate", 400, rate_per_s=40.0, seed=1)
    c = screen(m, g, eng, [ServeLayout(1, dp=2)], ["fp8"], [None], [64], 256, 64, 40.0,
               None)[0]
    a = simulate_candidate(c, m, eng, s, 256, 64)
    b = evaluate(m, g, ServeLayout(1, dp=2), p, c.kv_dtype, eng, s, 256, 64, max_batch=64)
    assert a.ttft_p99_s == pytest.approx(b.ttft_p99_s, rel=1e-12)
    assert a.tpot_p99_s == pytest.approx(b.tpot_p99_s, rel=1e-12)
    assert a.output_tokens_per_s == pytest.approx(b.output_tokens_per_s, rel=1e-12)
    assert np.isfinite(a.ttft_p99_s)


@pytest.mark.parametrize(("column", "value"), [
    ("osl", "0"),  # trtllm_bench_limits divided by it: a ZeroDivisionError traceback
    ("isl", "0"),  # was priced as a run of empty prompts
    ("requests", "0"),  # was priced as one request (the share's max(1, ...))
    ("tp", "0"),
    ("dp", "0"),
])
def test_serving_row_count_below_one_is_one_line_exit_2(capsys, tmp_path, column, value):
    # plan serve refuses --isl 0, --osl 0, --requests 0 and tp=0 at the flag (at least 1);
    # a validation row stating them is bad input the same way: one line naming the column
    import csv
    import io
    from pathlib import Path

    from conftest import run_cli

    src = Path(__file__).resolve().parents[2] / "validation" / "serving_runs.csv"
    text = "\n".join(ln for ln in src.read_text().splitlines() if not ln.startswith("#"))
    rows = list(csv.DictReader(io.StringIO(text)))
    row = dict(rows[0], model="llama-3-8b", requests="40")
    row[column] = value
    f = tmp_path / "rows.csv"
    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    rc, out, err = run_cli(capsys, "validate", "--serving", "--file", str(f), "--json")
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"'{column}'" in lines[0] and "at least 1" in lines[0]


def test_zero_draft_tokens_is_no_speculation():
    # speculative.py: a verify step emits E = sum_{i=0..k} alpha^i tokens, so k = 0 drafts give
    # E = 1 and a step that verifies nothing: the plain decode step. --spec k=0 (accepted by
    # speculative.check, k >= 0) must therefore price exactly what no --spec prices; before the
    # fix it took the verify path, which skips the CUDA-graph padding of a decode step
    from dataclasses import replace

    from scalemodel.analytic.serving.speculative import Speculation

    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("vllm-v1"), precision("fp8")
    k0 = replace(eng, speculation=Speculation(0, 0.5, "eagle"))
    assert k0.speculation.tokens_per_step == 1.0
    s = Stream("max-load", 200)
    a = evaluate(m, g, ServeLayout(1), p, eng.default_kv_dtype(p), eng, s, 512, 128)
    b = evaluate(m, g, ServeLayout(1), p, eng.default_kv_dtype(p), k0, s, 512, 128)
    assert b.output_tokens_per_s == pytest.approx(a.output_tokens_per_s, rel=1e-12)
    assert b.tpot_p50_s == pytest.approx(a.tpot_p50_s, rel=1e-12)


def test_disaggregated_with_a_closed_loop_is_refused(capsys):
    # disagg.simulate_pair draws the stream's arrivals for the prefill pool: a concurrency
    # stream's are all 0 (streams.draw), so the split ran as max load (200 requests queued at
    # once) and, at 8,878 output tokens/s against 1,807 for the aggregated layout at 4 in
    # flight (llama-3-8b, 2 x H100, before the fix), was picked as the best on a load it was
    # never given. The closed loop across two pools is not simulated: one line, exit 2.
    from conftest import run_cli

    rc, out, err = run_cli(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpus", "2",
                           "--requests", "50", "--concurrency", "4", "--disaggregated",
                           "--json")
    assert rc == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--concurrency" in lines[0] and "--disaggregated" in lines[0]


@pytest.mark.parametrize(("draft", "needle"), [
    ("nope", "unknown model 'nope'"),
    # Mixtral's 32,000-token vocabulary against Llama 3's 128,256 (their config.json files)
    ("mixtral-8x7b", "vocabulary"),
])
def test_a_draft_model_the_target_cannot_take_is_named(capsys, draft, needle):
    # iteration._draft_model refuses both, but inside the search's screen a candidate's
    # BadInput only drops the candidate, so every one went and the line read "no layout of
    # llama-3-8b ... fits in memory": the reason is now said before the search
    from conftest import run_cli

    rc, out, err = run_cli(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpus", "1",
                           "--requests", "20", "--framework", "trtllm-1.0", "--spec",
                           f"k=2,alpha=0.6,draft=model,model={draft}", "--json")
    assert rc == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "fits in memory" not in lines[0]


def test_a_closed_loop_is_not_multiplied_over_idle_replicas():
    # C clients in a closed loop have C requests in flight, wherever they run. service splits
    # them over dp replicas as ceil(C / dp) each and multiplied one replica's figures by dp,
    # so C = 1 on dp = 8 read as 8 requests in flight (plan serve --concurrency 1 --gpus 8
    # picked tp=1 dp=8 at 8 x one stream's 324 output tokens/s). By hand: one client's requests
    # run one at a time, each alone on an idle replica, so the deployment emits one stream's
    # tokens whatever dp is: the same output tokens/s (and requests/s) as that replica with
    # that client, and the same TPOT.
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("vllm-v1"), precision("fp8")
    kd = eng.default_kv_dtype(p)
    s = Stream("concurrency", 16, concurrency=1)
    one = evaluate(m, g, ServeLayout(1), p, kd, eng, s, 512, 128, max_batch=64)
    eight = evaluate(m, g, ServeLayout(1, dp=8), p, kd, eng, s, 512, 128, max_batch=64)
    assert eight.output_tokens_per_s == pytest.approx(one.output_tokens_per_s, rel=1e-9)
    assert eight.requests_per_s == pytest.approx(one.requests_per_s, rel=1e-9)
    assert eight.tpot_p50_s == pytest.approx(one.tpot_p50_s, rel=1e-9)
    # and where dp divides C, each replica's share is exact: 8 clients on dp = 2 are 4 each
    s8 = Stream("concurrency", 64, concurrency=8)
    two = evaluate(m, g, ServeLayout(1, dp=2), p, kd, eng, s8, 512, 128, max_batch=64)
    half = evaluate(m, g, ServeLayout(1), p, kd, eng, Stream("concurrency", 32, concurrency=4),
                    512, 128, max_batch=64)
    assert two.output_tokens_per_s == pytest.approx(2 * half.output_tokens_per_s, rel=1e-9)


def test_max_load_of_fewer_requests_than_replicas():
    # the same accounting under max load: 4 requests on dp = 8 replicas run one each on 4
    # replicas, the other 4 idle, so the deployment emits 4 times what one replica emits
    # running one request alone (the share was multiplied by dp = 8 before)
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    eng, p = get_serving_engine("vllm-v1"), precision("fp8")
    kd = eng.default_kv_dtype(p)
    eight = evaluate(m, g, ServeLayout(1, dp=8), p, kd, eng, Stream("max-load", 4), 512, 128,
                     max_batch=64)
    one = evaluate(m, g, ServeLayout(1), p, kd, eng, Stream("max-load", 1), 512, 128,
                   max_batch=64)
    assert eight.output_tokens_per_s == pytest.approx(4 * one.output_tokens_per_s, rel=1e-9)
    assert eight.requests_per_s == pytest.approx(4 * one.requests_per_s, rel=1e-9)
