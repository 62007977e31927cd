"""Activation offload to the host (Megatron-Core cpu_offloading through Transformer Engine),
derived by hand from the sources.

* Which rows offload (Llama 3.1 405B: v0.1.0rc4 GB200 fp8_cs TP2 FSDP 95 layers; v0.2.1-v0.5.0
  GB200 92, GB300 10; v0.6.0 none): Megatron-Bridge's Llama 3 70B presets (v0.1.0rc4 llama3_70b_llm_pretrain
  .yaml; v0.2.1 configs/llama3/workload_base_configs.py; v0.3.0-v0.5.0
  configs/llama/llama3_workload_base_configs.py; v0.6.0 perf_recipes/llama/gb200|gb300/llama3.py):
  FP8-CS, MBS 2, Megatron-FSDP, cpu_offloading_num_layers 40 on GB200 and 20 on GB300; the
  FP8-MX presets (PP4 VP5) set none.
* What leaves: Transformer Engine v2.8 cpu_offload.py offloads the tensors marked
  ``activation_offloading``: TE's linears / norms / attention mark what they save, and
  Megatron-Core core_v0.15.0 fusions/fused_bias_swiglu.py marks the fc1 output it keeps; so an
  offloaded layer sends its whole no-recompute set (Korthikanti et al. 2022 eq. 2 with sequence
  parallelism: s b h 34 / t + 5 a s^2 b / t, plus the two LayerNorms' fp32 mean and rstd,
  2 x 8 B per token split by t).
* When: AsyncDoubleBufferGroupOffloadHandler copies layer k's tensors on a d2h stream after its
  forward; the main stream waits for that copy at layer_window_map[k] = (L // N)(k + 1) - 1, so
  one copy hides under L // N layers' forward; the reload in the backward likewise under L // N
  layers' backward. The last copy is waited for at layer L - 1, so the peak holds L - N layers
  plus the larger of one layer and the output's activations.
* Host link: NVLink-C2C 900 GB/s bidirectional per Grace Blackwell superchip (one Grace, two
  GPUs): 450 GB/s each way, 225 GB/s per GPU when both copy.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.memory import offload_layer_bytes, static_model, training_bytes
from scalemodel.analytic.step.memory_terms import offload_exposed_time
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.frameworks import get_framework, offload_layers_of


@pytest.mark.parametrize("fw, gb300_70b, gb200_405b, gb300_405b", [
    ("nemo-25.09", 0, 95, 0),  # v0.1.0rc4: GB200 presets only
    ("nemo-25.11", 20, 92, 10), ("nemo-26.02", 20, 92, 10), ("nemo-26.04", 20, 92, 10),
    ("nemo-26.06", 20, 92, 10),
    ("nemo-26.08", 20, 0, 0),  # v0.6.0 perf_recipes: the 405B fp8cs functions offload none
])
def test_the_presets_offload_40_layers_on_gb200_and_20_on_gb300(fw, gb300_70b, gb200_405b,
                                                                gb300_405b):
    v = dict(get_framework(fw).values)
    assert offload_layers_of(v, "llama-3-70b", "gb200", "current") == 40
    assert offload_layers_of(v, "llama-3-70b", "gb300", "current") == gb300_70b
    assert offload_layers_of(v, "llama-3-405b", "gb200", "current") == gb200_405b
    assert offload_layers_of(v, "llama-3-405b", "gb300", "current") == gb300_405b
    assert offload_layers_of(v, "llama-3-70b", "gb300", "mxfp8") == 0  # PP4 VP5, no offload
    assert offload_layers_of(v, "llama-3-70b", "h100-sxm", "current") == 0
    assert offload_layers_of(v, "llama-3-8b", "gb200", "current") == 0


def test_the_2024_profile_offers_none():
    v = dict(get_framework("nemo-24.03").values)
    assert offload_layers_of(v, "llama-3-70b", "gb200", "current") == 0


def test_c2c_is_half_a_superchips_450_gb_s_each_way():
    for g in ("gb200", "gb300"):
        assert get_gpu(g).interconnect["host_bytes_per_s_per_direction"] == 900e9 / 2 / 2
    assert "host_bytes_per_s_per_direction" not in get_gpu("b200").interconnect


S, B, T = 2048, 1, 8


def _by_hand_layer(m) -> float:
    return (S * B * m.hidden * 34 / T + 5 * m.n_heads * S * S * B / T
            + 2 * 8 * S * B / T)  # two LayerNorms' fp32 mean and rstd, sequence-parallel


def test_an_offloaded_layer_sends_its_whole_stored_set():
    m = get_model("gpt3-175b")  # GPT-3 175B: h 12288, 96 heads, 4h MLP, dropout, LayerNorm
    got = float(offload_layer_bytes(static_model(m), S, B, T, True))
    assert got == pytest.approx(_by_hand_layer(m), rel=1e-12)


@pytest.mark.parametrize("n", [2, 24, 48])
def test_the_peak_keeps_l_minus_n_layers_and_the_larger_of_a_layer_and_the_output(n):
    m = get_model("gpt3-175b")
    sm = static_model(m)
    a = _by_hand_layer(m)
    out = 4 * S * B * m.hidden / T + 4 * S * B * m.vocab / T  # head input + fp32 logits
    kw = dict(tp=T, pp=1, dp=1, zero=0, rc=0, sp=True, micro_batch=B, seq_len=S)
    base = float(training_bytes(sm, **kw)["activations"])
    off = float(training_bytes(sm, **kw, offload_layers=n, offload_bytes=a)["activations"])
    assert base - off == pytest.approx((n - 1) * a + min(a, out), rel=1e-9)
    # under recompute (the recipes run none) nothing is offloaded
    kw["rc"] = 2
    assert float(training_bytes(sm, **kw, offload_layers=n, offload_bytes=a)["activations"]) \
        == float(training_bytes(sm, **kw)["activations"])


def _exposed(n: int, fwd_layer: float, bwd_layer: float, bytes_: float) -> float:
    L = 80
    c = SimpleNamespace(offload=np.array([float(n)]), m=SimpleNamespace(n_layers=L),
                        gpu=SimpleNamespace(interconnect={
                            "host_bytes_per_s_per_direction": 225e9}))
    st = SimpleNamespace(t_slow=np.array([L * (fwd_layer + bwd_layer)]), n_slow=np.array([L]),
                         fwd_mb=np.array([L * fwd_layer]), bwd_mb=np.array([L * bwd_layer]))
    mem = SimpleNamespace(offload_bytes=np.array([bytes_]))
    return float(offload_exposed_time(c, st, mem)[0])


def test_the_copy_hides_under_l_over_n_layers():
    # 4.5 GB per layer over 225 GB/s: 20 ms each way
    # N = 40 of 80: 2 layers' forward (2 x 8 ms = 16 ms) leave 4 ms per layer exposed, the
    # reload hides under 2 x 16 ms: 40 x 4 ms = 0.16 s per micro-batch
    assert _exposed(40, 8e-3, 16e-3, 4.5e9) == pytest.approx(40 * 4e-3, rel=1e-9)
    # N = 20: 4 layers' forward (32 ms) hide the 20 ms copy
    assert _exposed(20, 8e-3, 16e-3, 4.5e9) == 0.0
    # a 22.5 GB layer (a 100 ms copy): both ways exposed beyond 4 layers
    assert _exposed(20, 8e-3, 16e-3, 22.5e9) == pytest.approx(20 * ((0.1 - 0.032)
                                                                    + (0.1 - 0.064)), rel=1e-9)
