"""plan serve --precision fp8 on a 16-bit checkpoint: the engine's quantizer keeps the output
head and the embeddings 16-bit (TensorRT Model Optimizer's default disabled quantizers,
sources_serving.toml modelopt-default-disabled-quantizers), so the weights on one GPU are

    W = P_linear * 1 B + (P_embedding + P_lm_head + P_norms) * 2 B + one fp32 scale per linear

(derivation written here, parameter counts from the model's own shape: Llama 3 70B, hidden 8192,
vocabulary 128,256, 80 layers; embedding and head 1.05e9 parameters each)."""

from __future__ import annotations

from scalemodel.analytic.params import count_params
from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.specs import get_gpu
from scalemodel.specs.model import get_model


def test_fp8_keeps_the_output_head_and_embeddings_16_bit():
    m = get_model("llama-3-70b")
    pc = count_params(m)
    norms = pc.final_norm + 2 * m.hidden * m.n_layers
    linear = pc.total - pc.embedding - pc.lm_head - norms
    assert pc.embedding == pc.lm_head == 128256 * 8192
    n_linears = 7 * m.n_layers  # q, k, v, o, gate, up, down
    expected = linear * 1 + (pc.embedding + pc.lm_head + norms) * 2 + 4 * n_linears
    es = setup(get_serving_engine("trtllm-0.17"), m, get_gpu("h100-sxm"), ServeLayout(tp=1),
               precision("fp8"), "fp8", 128, 128)
    assert abs(es.kv.weights_bytes - expected) / expected < 1e-6
    # the same checkpoint priced at one byte per parameter would be 2.1 GB lighter
    assert es.kv.weights_bytes - pc.total * 1 > 2.0e9
