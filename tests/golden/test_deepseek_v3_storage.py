"""DeepSeek-V3's low-precision storage (arXiv 2412.19437v2), read as data of the
deepseek-hai-llm profile (frameworks.toml, source deepseek-2024-v3-report).

Derivation by hand, DeepSeek-V3 config.json: hidden h = 7168, 128 heads of v_head_dim 128 (the
attention output o = 16384 elements per token), routed experts of width f_e = 2048, top_k 8.

* Sec. 3.3.3, Low-Precision Activation (1): the input of the Linear after attention is cached in
  E5M6 (12 bits = 1.5 B per element) and is the tensor the attention backward reads too. The
  default accounting keeps the 16-bit attention output for the fused attention backward (2 B)
  plus the Linear's own fp8 copy (fp8_saved_input 1 B): 3 B. One tensor at 1.5 B saves
  1.5 x 16384 = 24,576 B per token on every layer (dense and MoE).
* Sec. 3.3.3, Low-Precision Activation (2): the SwiGLU inputs in MoE are cached in FP8 and its
  output is recomputed. Default per routed copy and element of f_e: the 16-bit fc1 output (gate
  and up, 2 x 2 B) plus fc2's fp8 input (1 B) = 5 B; the report's: 2 x 1 B = 2 B. Saves
  3 x 2048 x 8 = 49,152 B per token on an MoE layer (the shared expert is left as it was).
  MoE layer: 24,576 + 49,152 = 73,728 B per token; at s = 4096, b = 1, TP1: 301,989,888 B.
* Sec. 3.3.3, Low-Precision Optimizer States: AdamW m and v in BF16 (2 + 2 B), master weights
  FP32 (4 B): K = 8 B per parameter instead of 12, so ZeRO-1's sharded states scale by 8 / 12;
  the gradients for batch accumulation in FP32: 4 B per local parameter, twice the bf16 weights.
* Sec. 3.2.3: EMA in CPU memory (no GPU bytes: none are counted), MTP's embedding and head shared
  on the same PP rank (mtp_embedding_copy = false, already data).
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.memory import (
    framework_optimizer,
    grad_buffer_bytes,
    layer_act_coeffs,
    memory_report,
    moe_saves,
)
from scalemodel.specs import get_gpu, get_model, optimizer
from scalemodel.specs.saved_tensors import kernel_saves

FW = "deepseek-hai-llm"
MOE_ACT_BIT = 3  # layout.RECOMPUTE_MODULES order: core_attn, mlp, moe, moe_act, ...


def _saves(with_report: bool):
    extra = moe_saves(FW, True) if with_report else {}
    extra.pop("moe_probs_in_act", None)
    extra.pop("moe_probs_source", None)
    return kernel_saves("fused", "flash", 1.0, "", **extra)


def test_profile_states_the_report_storage():
    kw = moe_saves(FW, True)
    assert kw["attn_out_kept"] == 1.5 and kw["attn_out_source"] == "deepseek-2024-v3-report"
    assert kw["moe_act_input"] == 1.0 and kw["moe_act_input_source"] == "deepseek-2024-v3-report"
    # fp8 storage: a bf16 run keeps the default accounting
    assert "attn_out_kept" not in moe_saves(FW, False)
    assert grad_buffer_bytes(FW) == (4.0, "deepseek-2024-v3-report")
    assert framework_optimizer(FW) == "adam-bf16"
    assert optimizer(framework_optimizer(FW)).bytes_per_param == 4 + 2 + 2
    assert framework_optimizer(FW, "adam") == "adam"  # --optimizer wins
    assert framework_optimizer("megatron-core") == "adam"


def test_layer_bytes_per_token():
    m = get_model("deepseek-v3")
    old_d, new_d = (layer_act_coeffs(m, False, _saves(x)) for x in (False, True))
    old_m, new_m = (layer_act_coeffs(m, True, _saves(x)) for x in (False, True))
    assert old_d.split - new_d.split == pytest.approx(24576, rel=1e-12)
    assert old_m.split - new_m.split == pytest.approx(24576 + 49152, rel=1e-12)
    for old, new in ((old_d, new_d), (old_m, new_m)):  # nothing else moves
        assert (old.rep, old.kv, old.lse) == (new.rep, new.kv, new.lse)
    # moe_act would drop fc2's input, which the report never keeps
    assert old_m.mods[MOE_ACT_BIT][1] == pytest.approx(8 * 2048 * 1.0)
    assert new_m.mods[MOE_ACT_BIT] == (0.0, 0.0, 0.0)


def test_memory_per_gpu_of_the_team_layout():
    m = get_model("deepseek-v3")
    lay = TrainLayout(tp=1, pp=16, dp=128, ep=64, zero=1, micro_batch=1, recompute="selective",
                      recompute_modules=("layernorm", "mla_up_proj"))
    kw = dict(seq_len=4096, gpu=get_gpu("h800"), framework=FW, precision="fp8",
              attention="flash")
    r = memory_report(m, lay, **kw).breakdown
    adam = memory_report(m, lay, optimizer_id="adam", **kw).breakdown
    assert r["grads"] == pytest.approx(2 * r["params"], rel=1e-12)  # fp32 vs bf16
    assert r["optimizer"] == pytest.approx(adam["optimizer"] * 8 / 12, rel=1e-12)
