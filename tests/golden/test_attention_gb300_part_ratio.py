"""GB300 attention against GB200, one cuDNN build (kernels.toml [attention_part.fa3.gb300]).

Source: NVIDIA cudnn-frontend commit fb682ce (2026-04-29), benchmark/sdpa_benchmark_training/
results/llama3.1/gb200/llama3.1_20260424_100750.csv and .../gb300/llama3.1_20260424_100757.csv
(cuDNN backend 9.22.0, frontend 1.21.1; bf16, 64 query / 8 KV heads, head dim 128, batch 2).
Rows read by hand (time_ms column, deterministic_bwd False):

  causal (top_left), 4,096 x 4,096:  GB200 fwd 0.391 ms, bwd 1.198 ms; GB300 fwd 0.323, bwd 1.101
  causal, 32,768 x 32,768:           GB200 fwd 21.692, bwd 71.756;    GB300 fwd 18.014, bwd 59.024
  unmasked (no_mask), 8,192:         GB200 fwd 2.483;                 GB300 fwd 2.181

Both parts have the Blackwell curve (measured on B200, cuDNN 9.10.2), the same 2,500 TF dense
bf16 peak and the same sustained share (0.815, B200's), so GB300's efficiency over GB200's at a
length is GB200's time over GB300's there (a part ratio, not a rate). B300 has no timing and
keeps the plain curve.
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.step.attention import attention_efficiency
from scalemodel.specs import get_gpu


def _ratio(length: float, **kw) -> float:
    gb300, gb200 = get_gpu("gb300"), get_gpu("gb200")
    assert gb300.sustained_fraction == gb200.sustained_fraction
    assert gb300.flop_per_s["bf16"] == gb200.flop_per_s["bf16"]
    return (attention_efficiency(gb300, length, kind="flash3", **kw)
            / attention_efficiency(gb200, length, kind="flash3", **kw))


def test_gb300_causal_4096_is_the_measured_time_ratio():
    assert _ratio(4096.0) == pytest.approx(0.391 / 0.323, rel=1e-9)  # 1.211
    assert _ratio(4096.0, backward=True) == pytest.approx(1.198 / 1.101, rel=1e-9)  # 1.088


def test_gb300_causal_32k_and_unmasked_8k():
    assert _ratio(32768.0) == pytest.approx(21.692 / 18.014, rel=1e-9)
    assert _ratio(32768.0, backward=True) == pytest.approx(71.756 / 59.024, rel=1e-9)
    assert _ratio(8192.0, causal=False) == pytest.approx(2.483 / 2.181, rel=1e-9)


def test_b300_has_no_timing_and_keeps_the_curve():
    b300, b200 = get_gpu("b300"), get_gpu("b200")
    assert b300.sustained_fraction == b200.sustained_fraction
    assert (attention_efficiency(b300, 4096.0, kind="flash3")
            == pytest.approx(attention_efficiency(b200, 4096.0, kind="flash3"), rel=1e-12))
