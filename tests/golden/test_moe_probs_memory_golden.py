"""MoE routing weights applied inside the expert activation (Megatron-Core from core_v0.13.0).

Megatron-LM commit 2659630 ("Memory efficient token permutation"): the dispatchers permute the
routing probabilities with the tokens, the grouped experts multiply them in the activation
(weighted_bias_swiglu, which saves its input and the weights), and the unpermute runs without
probs. So a MoE layer no longer keeps each routed copy's expert output (2 B per element of h)
for the multiply, and keeps the weight instead (counted at 4 B, fp32, per routed copy).
Derivation, per token of one MoE layer: top_k x (2 h - 4) bytes fewer, on the TP-split side.
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.memory import layer_act_coeffs, moe_saves
from scalemodel.specs import get_model
from scalemodel.specs.saved_tensors import kernel_saves


@pytest.mark.parametrize("model", ["deepseek-v3", "qwen3-30b-a3b"])
def test_expert_output_not_kept_when_the_activation_applies_the_weights(model):
    m = get_model(model)
    old = layer_act_coeffs(m, True, kernel_saves("fused", "flash"))
    new = layer_act_coeffs(m, True, kernel_saves("fused", "flash", moe_probs_in_act=True))
    assert old.split - new.split == pytest.approx(m.top_k * (2 * m.hidden - 4), rel=1e-12)
    # dense layers have no routing weights
    assert (layer_act_coeffs(m, False, kernel_saves("fused", "flash")).split
            == layer_act_coeffs(m, False, kernel_saves("fused", "flash",
                                                       moe_probs_in_act=True)).split)
    # the selective "moe" module drops what the layer keeps, in both accountings
    moe_bit = 2  # layout.RECOMPUTE_MODULES order: core_attn, mlp, moe, ...
    assert old.mods[moe_bit][1] - new.mods[moe_bit][1] == pytest.approx(
        m.top_k * (2 * m.hidden - 4), rel=1e-12)


def test_profiles():
    # NeMo from 25.09 (Megatron-Bridge v0.1.0rc4 pins megatron-core 0.14); NeMo 24.03 and the
    # megatron-core profile (core_v0.12.0 and later) keep the unpermute's accounting
    for fid in ("nemo-25.09", "nemo-25.11", "nemo-26.04"):
        assert moe_saves(fid) == {"moe_probs_in_act": True,
                                  "moe_probs_source": "megatron-core-moe-probs-in-act"}
    for fid in ("nemo-24.03", "megatron-core", "torchtitan-2024-12"):
        assert moe_saves(fid)["moe_probs_in_act"] is False
