"""NeMo 24.03.01 (Transformer Engine 1.4) on Hopper: TE's default would pick cuDNN fused attention,
the release's launcher turns it off, so flash-attn 2.x runs (issue 16, sessions 15-16).

Source ``nemo-launcher-24-03-01-env``: NVIDIA/NeMo-Framework-Launcher tag 24.03.01,
launcher_scripts/conf/config.yaml (at the tag line 49 names nemo:24.01.01.framework; the
long-sequence page's 24.03.01.framework from b434fd3e, 2024-04-24, first in tag 24.05) line 68 ``NVTE_FUSED_ATTN: 0`` ("Disable cudnn FA until we've tested it
more"), exported into every job by nemo_launcher/core/stages.py; in from 562dcb45 (2024-02-13)
to a6490ffe (2024-07-15). TE 1.4 reads the variable at lines 2415-2430 below, before its sm90
preference, so the fused path is off and the rows are priced with the FlashAttention-2 class.

Source ``te-1-4-attention-backend``: NVIDIA/TransformerEngine tag v1.4 (commit 0fbc76af,
2024-03-07), transformer_engine/pytorch/attention.py, DotProductAttention:

* lines 2415-2430: ``use_flash_attention`` and ``use_fused_attention`` both start from
  ``NVTE_FLASH_ATTN`` / ``NVTE_FUSED_ATTN``, each defaulting to "1", on compute capability >= 8.0
  (NeMo v1.23.0 and v2.0.0rc0 set neither for GPT; only megatron_retro_model.py sets both to 0);
* lines 2811-2814: with context parallelism the fused path stays on when the backend is
  F16_arbitrary_seqlen;
* lines 2834-2839: "Select FusedAttention on sm90 and FlashAttention on others for performance":
  with both available and F16_arbitrary_seqlen chosen, compute capability (9, 0) drops
  FlashAttention.

transformer_engine/common/fused_attn/fused_attn.cpp at v1.4, lines 126-158: F16_arbitrary_seqlen
needs cuDNN >= 8.9.3 on sm80+, both lengths multiples of 64, head dim <= 128 and a multiple of 8,
no bias (or ALiBi / post-scale bias on sm90), a causal / padding / no mask, and an sbhd or bshd
layout; above 512 tokens it is the backend chosen. Llama 2 7B (head dim 4096 / 32 = 128, 32 query
= 32 KV heads, causal, no bias, Megatron-Core's sbhd tensors, bf16 attention even in an fp8 run,
16K-1024K tokens, every CP chunk S / 2cp a multiple of 64) meets each condition, so the long-context
H100 rows would have run cuDNN (the planner's ``flash3`` class) under TE's defaults alone.

The rate (source ``cudnn-frontend-torch-sdpa-h200``): NVIDIA cudnn-frontend
benchmark/benchmark_results.csv at 505fcfeb (benchmark_flash_attention.py on NGC PyTorch 24.03; the
benchmark README's sample output prints cuDNN backend version 90100, i.e. 9.1.0; an H200, the
GH100 die, clocks locked at 1,980 MHz, 700 W), columns "cudnn BF16", head dim 128, 16 heads,
causal: 16k 586.82 forward / 497.68 backward TFLOP/s, counted as the planner counts (4 B s^2 H d,
halved with the mask, backward 2.5x). The flash3 Hopper curve is the FlashAttention-2 curve
(FlashAttention-3 paper Fig. 5-6, 16k causal forward 335, unmasked backward 322, causal backward
322 x 335 / 370) times 1.84 / 1.74: 616.4 / 507.3 at 16k. Both are burst rates, so they compare
as they stand (the step then keeps the die's sustained share of either). The container's own
cuDNN 9.0 is not measured; it is taken at the 9.1.0 rate (assumption).
"""

import pytest

from scalemodel.analytic.step.attention import attention_efficiency
from scalemodel.specs import get_gpu
from scalemodel.specs.frameworks import get_framework, job_settings

PEAK = 989.4  # TFLOP/s dense bf16 of the GH100 die (gpus.toml)

# benchmark_results.csv at 505fcfeb, "cudnn BF16" columns, causal rows: length -> (fwd, bwd)
CUDNN_910_CAUSAL = {4096: (542.32, 443.60), 8192: (572.86, 463.54), 16384: (586.82, 497.68)}


def test_launcher_env_turns_cudnn_off_on_every_part():
    fw = get_framework("nemo-24.03")
    # NVTE_FUSED_ATTN=0 from the launcher: TE 1.4's sm90 preference for cuDNN never applies
    assert fw.attention_for("hopper")[0] == "flash"
    assert fw.attention_for("ampere")[0] == "flash"        # sm80 keeps flash-attn 2.x anyway
    assert fw.attention_for("ada") == ("flash", "")        # sm89 too, named (no Hopper fallback)
    assert fw.attention_for("blackwell")[0] == "flash"     # TE 1.4 predates sm100
    assert fw.sources["attention"] == "nemo-launcher-24-03-01-env"
    assert job_settings("nemo-24.03", "h100-sxm")[1]["attention"] == "flash"
    # the later release whose launcher enables cuDNN FA keeps the cuDNN class on Hopper
    assert get_framework("nemo-25.09").attention_for("hopper")[0] == "flash3"


def test_flash3_hopper_curve_is_cudnn_910_rate_at_16k():
    g = get_gpu("h100-sxm")
    burst = g.sustained_fraction  # undo the step's sustained share to compare burst with burst
    fwd = attention_efficiency(g, 16384, kind="flash3") / burst * PEAK
    bwd = attention_efficiency(g, 16384, kind="flash3", backward=True) / burst * PEAK
    # derivation from the curve's stated figures (kernels.toml fa2 / fa3 hopper)
    assert fwd == pytest.approx(335 * 1.84, rel=1e-3)
    assert bwd == pytest.approx(322 * 335 / 370 * 1.74, rel=1e-3)
    # the measured cuDNN 9.1.0 rate sits within 5% (forward) and 2% (backward) of that class
    meas_f, meas_b = CUDNN_910_CAUSAL[16384]
    assert meas_f / fwd == pytest.approx(0.952, abs=0.005)
    assert meas_b / bwd == pytest.approx(0.981, abs=0.005)
    # and is 1.7x the FlashAttention-2 class the profile priced before
    fa2_f = attention_efficiency(g, 16384) / burst * PEAK
    fa2_b = attention_efficiency(g, 16384, backward=True) / burst * PEAK
    assert meas_f / fa2_f == pytest.approx(1.75, abs=0.01)
    assert meas_b / fa2_b == pytest.approx(1.71, abs=0.01)
