"""Golden figures of the claim checker, each from a published source or a derivation here."""

import math

import pytest

from scalemodel.analytic.claims import Claim, check_claim
from scalemodel.analytic.params import count_params
from scalemodel.specs import get_model


def test_interruptions_scale_by_gpu_days_from_llama3():
    # Llama 3 (arXiv 2407.21783, Sec. 3.3.4): 419 unexpected interruptions in 54 days on 16,384
    # H100s, i.e. 419 / (16,384 x 54) = 4.736e-4 per GPU-day. A different window, 8,192 GPUs for
    # 27 days = 221,184 GPU-days (a quarter of 884,736), expects 419 / 4 = 104.75 interruptions.
    c = check_claim(Claim("llama-3-405b", 8192, "h100-sxm", 4e12, 27))
    expected = 419 / (16384 * 54) * 8192 * 27
    assert expected == pytest.approx(104.75)
    assert c.expected_interruptions == pytest.approx(expected)
    # mean time between interruptions 27 d x 86,400 / 104.75 = 22,270 s; Young (1974):
    # tau = sqrt(2 delta M) with delta = 60 s gives sqrt(2 x 60 x 22,270) = 1,635 s
    mtbi = 27 * 86400 / expected
    assert round(mtbi) == 22270
    assert c.mean_time_between_interruptions_s == pytest.approx(mtbi)
    assert c.checkpoint_interval_s == pytest.approx(math.sqrt(2 * 60 * mtbi))
    assert round(c.checkpoint_interval_s) == 1635


def test_mfu_by_hand():
    # Derivation written here: 6 N D / (n * peak * T), H100 SXM dense bf16 peak 989.4 TFLOP/s
    # (NVIDIA H100 datasheet, sparse 1,979 TFLOP/s halved).
    n_params = count_params(get_model("llama-3-70b")).total
    tokens, gpus, days = 1.4e12, 1024, 17
    expected = 6 * n_params * tokens / (gpus * 989.4e12 * days * 86400)
    c = check_claim(Claim("llama-3-70b", gpus, "h100-sxm", tokens, days))
    assert c.implied_mfu == pytest.approx(expected, rel=1e-12)
    assert 0.39 < c.implied_mfu < 0.41  # in the published 38-43% band of Llama 3 (Table 4)
    assert c.verdict == "plausible"
    assert c.tokens_per_s_per_gpu == pytest.approx(tokens / (days * 86400) / gpus)


def test_resume_line_from_the_issue_is_implausible():
    # "a 70B model on 512 H100s for 2T tokens in 10 days": 6 * 70e9 * 2e12 = 8.4e23 FLOP over
    # 512 * 989.4e12 * 864,000 s = 4.38e23 FLOP at 100% MFU: the line needs 192% MFU.
    c = check_claim(Claim("70B", 512, "h100-sxm", 2e12, 10))
    assert c.implied_mfu == pytest.approx(8.4e23 / (512 * 989.4e12 * 864000), rel=1e-12)
    assert c.verdict == "implausible"
