"""Speculative decoding in the iteration / scheduler model (analytic/serving/speculative.py,
iteration.py ``verify_gpu`` / ``draft_time``, scheduler.py's expected emissions).

Source of the expected-tokens formula: Leviathan, Kalman and Matias, "Fast Inference from
Transformers via Speculative Decoding" (ICML 2023), section 3.1: with each of k draft tokens
accepted independently with probability alpha, a run of the target emits
E = (1 - alpha^(k+1)) / (1 - alpha) tokens in expectation. The figures below are derived by
hand in the comments; none is copied from the code's output.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import published_serving_rows, zeroed_iteration
from conftest import run_cli as run
from scalemodel.analytic.serving.scheduler import SchedulerPolicy, simulate
from scalemodel.analytic.serving.speculative import (
    Speculation,
    alpha_from_length,
    expected_tokens,
    parse,
)
from scalemodel.errors import BadInput


def test_expected_tokens_k3_alpha07_by_hand():
    # sum_{i=0..3} 0.7^i = 1 + 0.7 + 0.49 + 0.343 = 2.533
    assert expected_tokens(3, 0.7) == pytest.approx(2.533, abs=1e-12)
    # (1 - 0.7^4) / (1 - 0.7) = (1 - 0.2401) / 0.3 = 2.533: the closed form is the same sum
    assert expected_tokens(3, 0.7) == pytest.approx((1 - 0.2401) / 0.3, abs=1e-12)
    assert expected_tokens(3, 0.0) == 1.0  # nothing accepted: the target's own token only
    assert expected_tokens(0, 0.9) == pytest.approx(1.0)  # no drafts: plain decoding


def test_acceptance_length_inverts_to_alpha():
    # a stated acceptance length of 2.533 tokens per step at k = 3 is alpha = 0.7
    assert alpha_from_length(3, 2.533) == pytest.approx(0.7, abs=1e-9)
    assert parse("k=3,al=2.533").alpha == pytest.approx(0.7, abs=1e-9)
    assert parse("k=2,alpha=0.5,draft=eagle") == Speculation(2, 0.5, "eagle")


# --- TPOT of one sequence at batch 1, with and without speculation --------------------------
# A real Llama-3-8B iteration model (32 layers, dense) with its tables replaced by known lines:
# per layer a T-token iteration costs a + b T (GEMM table), the head and sampling of S rows
# h0 + h1 S, every other table 0; decode attention per context token (all layers) m on the
# memory side and c on the compute side; an EAGLE head pass at T tokens d0 + d1 T, its attention
# dc per context token. No host time.
L = 32
A, B = 1e-4, 1e-6
H0, H1 = 2e-4, 1e-6
MEM, CMP = 3.2e-7, 3.2e-8
D0, D1, DC = 5e-5, 1e-6, 1e-8
ISL, OSL = 100, 11  # the prompt is in the KV cache (a decode pool): 10 decode tokens to emit


@pytest.fixture(scope="module")
def lines_model():
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.specs import get_gpu, get_model

    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    it = build(m, g, ServeLayout(tp=1), precision("bf16"), "bf16", max_tokens=64,
               max_seqs=8, attention_kind="flash3", overhead_s=0.0,
               cluster=make_cluster(g, 1))
    assert it.n_dense + it.n_moe == L
    tb = it.tables
    T = np.arange(tb.dense.size, dtype=np.float64)
    return zeroed_iteration(it, {"dense": A + B * T,
                                 "head": H0 + H1 * np.arange(tb.head.size, dtype=np.float64)},
                            dec_s_per_ctx_token=max(MEM, CMP), dec_mem_s=MEM, dec_cmp_s=CMP)


def _tpot(it, stretch):
    p = SchedulerPolicy(max_batch=1, token_budget=64, chunked_prefill=True, reserve="full",
                        block_tokens=16, kv_blocks=100)
    r = simulate(it, p, np.zeros(1), np.full(1, ISL), np.full(1, OSL), prefilled=True,
                 stretch=stretch)
    return float(r.tpot_s[0])


def test_tpot_batch1_without_speculation(lines_model):
    # each of the 10 steps: L (a + b) + (h0 + h1) + m (kv + 1), kv = 100 .. 109, so the mean
    # context is 100 + 5.5: TPOT = 32 x 1.01e-4 + 2.01e-4 + 3.2e-7 x 105.5 = 3.46676e-3 s
    want = L * (A + B) + (H0 + H1) + MEM * (ISL + 5.5)
    assert want == pytest.approx(3.46676e-3, rel=1e-12)
    assert _tpot(lines_model, stretch=False) == pytest.approx(want, rel=1e-9)
    assert _tpot(lines_model, stretch=True) == pytest.approx(want, rel=1e-9)


def test_tpot_batch1_with_speculation(lines_model):
    # k = 3 drafts, alpha = 0.5: E = 1 + 0.5 + 0.25 + 0.125 = 1.875 tokens per verify step.
    # Emitted after j steps: floor(1.875 j) = 1, 3, 5, 7, 9, 11 -> 10 tokens take 6 steps,
    # emitting 1, 2, 2, 2, 2, 1 (the last capped at the output length); the KV before each
    # step is 100, 101, 103, 105, 107, 109, so the contexts (kv + 1) sum to
    # 101 + 102 + 104 + 106 + 108 + 110 = 631.
    # A verify step: the target at k + 1 = 4 rows, L (a + 4 b) + (h0 + 4 h1) = 3.532e-3; its
    # attention max(m, 4 c) = m per context token; the EAGLE head's first pass at the 4
    # verified rows, d0 + 4 d1, and k - 1 = 2 passes at 1 row, 2 (d0 + d1): 1.56e-4; the
    # head's attention k dc per context token.
    # Total = 6 x (3.532e-3 + 1.56e-4) + (3.2e-7 + 3e-8) x 631 = 0.02234885 s over 10 tokens,
    # a TPOT of 2.234885 ms against 3.46676 ms without speculation.
    it = dataclasses.replace(lines_model, spec=Speculation(3, 0.5, "eagle"),
                             draft_pass=D0 + D1 * np.arange(64, dtype=np.float64),
                             draft_per_ctx=DC)
    step = L * (A + 4 * B) + (H0 + 4 * H1) + (D0 + 4 * D1) + 2 * (D0 + D1)
    want = (6 * step + (max(MEM, 4 * CMP) + 3 * DC) * 631) / (OSL - 1)
    assert want == pytest.approx(2.234885e-3, rel=1e-12)
    assert _tpot(it, stretch=False) == pytest.approx(want, rel=1e-9)
    # the one-move stretch prices the contexts at their expected mid-point (105.69 for 105.17)
    assert _tpot(it, stretch=True) == pytest.approx(want, rel=1e-3)
    # k = 0 drafts through the same path: plain decoding, to the last digit
    it0 = dataclasses.replace(it, spec=Speculation(0, 0.5, "eagle"))
    assert _tpot(it0, stretch=False) == pytest.approx(
        L * (A + B) + (H0 + H1) + MEM * (ISL + 5.5), rel=1e-9)


@pytest.mark.parametrize("text, needle", [
    ("k=3,alpha=1.0", "[0, 1)"),
    ("k=3,alpha=-0.1", "[0, 1)"),
    ("k=-1,alpha=0.5", "whole number >= 0"),
    ("k=3,al=4.5", "acceptance length"),
    ("k=3", "needs k=N and one of"),
    ("k=3,alpha=0.5,draft=medusa", "not one of"),
])
def test_bad_speculation_one_line(text, needle):
    with pytest.raises(BadInput, match=None) as e:
        parse(text)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("spec, needle", [
    ("k=3,alpha=1.5", "[0, 1)"),
    ("k=-2,alpha=0.5", ">= 0"),
    ("k=3,alpha=0.7,draft=model,model=llama-3-8b", "runs only"),  # vllm-v1: no draft model
    ("k=3,alpha=0.7", "no multi-token-prediction"),  # Llama 3 has no MTP module
])
def test_cli_bad_spec_exit_2(capsys, spec, needle):
    rc, out, err = run(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpus", "1",
                       "--layout", "tp=1,pp=1,dp=1", "--precision", "bf16", "--requests", "4",
                       "--concurrency", "1", "--max-batch", "1", "--spec", spec)
    assert rc == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and needle in line, line


def test_cli_eagle_speeds_up_one_user(capsys):
    import json

    def tpot(*extra):
        rc, out, err = run(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpus", "1",
                           "--layout", "tp=1,pp=1,dp=1", "--precision", "bf16", "--requests",
                           "2", "--concurrency", "1", "--max-batch", "1", "--isl", "512",
                           "--osl", "64", "--json", *extra)
        assert rc == 0, err
        d = json.loads(out)
        return d["tpot_s"]["p50"], d

    base, _ = tpot()
    fast, d = tpot("--spec", "k=3,alpha=0.7,draft=eagle")
    assert d["speculation"]["tokens_per_step"] == pytest.approx(2.533)
    # at batch 1 a step reads every weight once whatever its 4 rows: E = 2.53 tokens per step
    # for a step a little dearer than a plain one
    assert fast < base / 1.5


def test_published_mtp_rows_state_k_and_acceptance_length():
    # validation/serving_published.csv, TensorRT-LLM tech blog 1 ('Autoregressive MTP Layers'):
    # MTP 1-5 at acceptance lengths 1.92, 2.58, 2.82, 2.99, 3.01; the no-MTP row names none.
    # The measured length is the input: E of the parsed (k, alpha) gives it back.
    from scalemodel.analytic.serving.validate import row_speculation

    rows = {k: r for k, r in published_serving_rows().items()
            if k.startswith("trtllm-blog1-dsr1-b200-tp8ep4-mtp")}
    assert len(rows) == 6
    assert row_speculation(rows["trtllm-blog1-dsr1-b200-tp8ep4-mtp0"]) is None
    for k, al in [(1, 1.92), (2, 2.58), (3, 2.82), (4, 2.99), (5, 3.01)]:
        sp = row_speculation(rows[f"trtllm-blog1-dsr1-b200-tp8ep4-mtp{k}"])
        assert (sp.k, sp.drafter) == (k, "mtp")
        assert sp.tokens_per_step == pytest.approx(al, abs=1e-9)
    bad = dict(rows["trtllm-blog1-dsr1-b200-tp8ep4-mtp3"], length_basis="spec:k=3/al=9")
    with pytest.raises(BadInput, match="length_basis"):
        row_speculation(bad)


def test_cli_spec_with_attention_dp_is_refused(capsys):
    # the attention-DP lock-step (IterationModel.time_lockstep) prices each rank's own tokens
    # without the k drafts a verify step adds, so the pair is refused rather than priced wrong
    rc, out, err = run(capsys, "plan", "serve", "--model", "qwen3-30b-a3b", "--gpu", "h200",
                       "--gpus", "2", "--framework", "trtllm-1.0", "--layout",
                       "tp=2,pp=1,dp=1,ep=2,adp=1", "--precision", "fp8", "--requests", "4",
                       "--concurrency", "2", "--isl", "128", "--osl", "16", "--spec",
                       "k=2,alpha=0.6,draft=eagle")
    assert rc == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and "adp=1" in line, line
