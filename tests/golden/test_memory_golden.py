"""Training memory against Korthikanti et al. 2022 and the ZeRO paper."""

import pytest

from scalemodel.analytic.layout import TrainLayout as Layout
from scalemodel.analytic.memory import (
    act_per_layer,
    korthikanti_per_layer,
    memory_report,
    static_model,
    zero_state_bytes,
)
from scalemodel.specs import get_model

GPT3 = "gpt3-175b"  # MHA, plain 4h MLP, dropout: the layer the paper's equations describe


# Korthikanti et al. 2022, Table 2: activation bytes per layer, written out here (s, b, h, a, t)
TABLE_2 = {
    # (tp, sp, recompute): closed form
    (1, False, 0): lambda s, b, h, a, t: s * b * h * (34 + 5 * a * s / h),
    (8, False, 0): lambda s, b, h, a, t: s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
    (8, True, 0): lambda s, b, h, a, t: s * b * h / t * (34 + 5 * a * s / h),
    (8, True, 1): lambda s, b, h, a, t: s * b * h / t * 34,
    (4, False, 1): lambda s, b, h, a, t: s * b * h * (10 + 24 / t),
    (8, True, 2): lambda s, b, h, a, t: 2 * s * b * h / t,
    (1, False, 2): lambda s, b, h, a, t: 2 * s * b * h,
}


# The paper leaves out the norms' fp32 per-token statistics (LayerNorm keeps mean and rstd:
# 2 norms x 2 x 4 B = 16 B per token), which the model keeps; replicated like the norm inputs.
NORM_STATS = 16


@pytest.mark.parametrize("tp, sp, rc", sorted(TABLE_2))
def test_per_layer_activations_match_paper(tp, sp, rc):
    """Korthikanti et al. 2022: eq. 2 and Table 2 (TP, SP, selective, full recompute)."""
    m = get_model(GPT3)
    sm = static_model(m)
    s, b = 2048, 1
    got = float(act_per_layer(sm.dense, s, b, m.n_heads, m.n_kv_heads, tp, sp, rc, False))
    stats = NORM_STATS * s * b / (tp if sp else 1) if rc < 2 else 0.0
    want = TABLE_2[(tp, sp, rc)](s, b, m.hidden, m.n_heads, tp)
    assert got - stats == pytest.approx(want, rel=1e-12)
    # the library's closed forms (used by the answers) agree with the table too
    assert korthikanti_per_layer(s, b, m.hidden, m.n_heads, tp, sp,
                                 ["none", "selective", "full"][rc]) == pytest.approx(want, rel=1e-12)


def test_closed_form_written_out():
    # eq. 2 by hand for s=2048, b=1, h=12288, a=96: 34*s*h + 5*a*s^2
    s, h, a = 2048, 12288, 96
    assert korthikanti_per_layer(s, 1, h, a) == 34 * s * h + 5 * a * s * s


@pytest.mark.parametrize("zero, gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_figure_1(zero, gb):
    """Rajbhandari et al. 2020, Fig. 1: a 7.5B model, K = 12, N_d = 64 -> 120 / 31.4 / 16.6 / 1.9 GB."""
    w, g, o = zero_state_bytes(7.5e9, 0.0, 64, 64, zero, 2, 2, 12)
    assert float(w + g + o) / 1e9 == pytest.approx(gb, abs=0.05)


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    m = get_model("llama-2-7b")
    # Rajbhandari et al. 2020 Sec. 3.1: 16-bit weights and gradients, K = 12 (the default
    # profile keeps fp32 main gradients, so the paper's 16-bit gradient is asked for)
    r = memory_report(m, Layout(), seq_len=128, grad_dtype="bf16")
    b = r.breakdown
    assert (b["params"] + b["grads"] + b["optimizer"]) == 16 * 6_738_415_616
    # Megatron-Core's fp32 main_grad buffer (the default profile): 2 + 4 + 12 = 18
    b = memory_report(m, Layout(), seq_len=128).breakdown
    assert (b["params"] + b["grads"] + b["optimizer"]) == 18 * 6_738_415_616


def test_pipeline_first_stage_holds_p_microbatches():
    """Korthikanti Sec. 4.2.3: with 1F1B the first stage stores L layers' worth (p x L/p)."""
    m = get_model(GPT3)
    one = memory_report(m, Layout(tp=8, pp=1, recompute="selective"), seq_len=2048)
    staged = memory_report(m, Layout(tp=8, pp=8, recompute="selective"), seq_len=2048)
    per_layer = (34 * 2048 * 12288 + NORM_STATS * 2048) / 8  # selective + SP: 34 sbh / t
    work = 5 * 96 * 2048**2 / 8  # the recomputed layer's scores: 5 a s^2 b / t, once
    assert staged.breakdown["activations"] == pytest.approx(96 * per_layer + work, rel=1e-9)
    out = 4 * 2048 * 12288 / 8 + 4 * 2048 * 50257 / 8  # output layer on the single stage
    assert one.breakdown["activations"] == pytest.approx(96 * per_layer + out + work, rel=1e-9)


def test_interleaving_factor():
    m = get_model(GPT3)
    base = memory_report(m, Layout(tp=8, pp=8, recompute="selective"), seq_len=2048)
    inter = memory_report(m, Layout(tp=8, pp=8, vpp=4, recompute="selective"), seq_len=2048)
    # Korthikanti Sec. 4.2.3: x (1 + (p - 1) / (p m)) with m interleaved chunks; the working
    # set of the one layer being recomputed (its scores, 5 a s^2 b / t) is not in flight
    work = 5 * 96 * 2048**2 / 8
    assert inter.breakdown["activations"] - work == pytest.approx(
        (base.breakdown["activations"] - work) * (1 + 7 / 32), rel=1e-9)
