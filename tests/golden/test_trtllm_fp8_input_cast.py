"""The quantize before each FP8 GEMM as TensorRT-LLM's TensorRT engines run it
(frameworks.toml trtllm-0.17 fp8_input_cast_bytes, source trtllm-fp8linear-static-quantize).

Source: tensorrt_llm/quantization/layers.py, FP8Linear.forward / FP8RowLinear.forward (stored copy,
index file id 790827869): a 16-bit input is quantized with quantize(x, activation_scaling_factor,
'fp8'), the checkpoint's static per-tensor input scale. There is no amax pass, and with no backward
there is no transposed copy. That is one 2-byte read and one 1-byte write per element: 3 B. The
step model's training cast under the delayed recipe is 4 B (read 2, write 1, and 1 for the
transposed copy Transformer Engine keeps; planner.toml [nongemm] fp8_cast_bytes_delayed, source
te-fp8-primer).

Derivation for Llama 3.1 8B at TP 1 (hidden 4096, 32 query heads of 128, intermediate 14336): the
four GEMM inputs per token and layer are the QKV input (h), the output projection's input (32 x
128), the gate/up input (h) and the down projection's input (14336): 26,624 elements. At 3 B in
place of 4 B a layer saves 26,624 B per token of HBM traffic, at the memory-bound kernels' 0.8 of
the H100's 3.35 TB/s.
"""

import numpy as np
import pytest

from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, precision
from scalemodel.analytic.serving.service import iteration_model
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.frameworks import load_frameworks_file

MODEL = "validation/models/llama-3.1-8b.json"
ELEMENTS = 4096 + 32 * 128 + 4096 + 14336  # the four FP8 GEMM inputs per token and layer
HBM = 0.8 * 3.35e12  # planner.toml [gemm] hbm_efficiency x the H100 SXM datasheet bandwidth


def _nongemm(fw: str, cast: float | None) -> np.ndarray:
    from dataclasses import replace

    m, g = get_model(MODEL), get_gpu("h100-sxm")
    eng = replace(get_serving_engine(fw), fp8_input_cast_bytes=cast)
    lay, prec = ServeLayout(1, 1, 1, 1), precision("fp8")
    es = setup(eng, m, g, lay, prec, "fp8", 1000, 1000)
    return iteration_model(m, g, lay, prec, "fp8", eng, es).tables.nongemm


def test_trtllm_017_profile_states_three_bytes_with_its_source():
    eng = get_serving_engine("trtllm-0.17")
    assert eng.fp8_input_cast_bytes == 3.0
    assert eng.sources["fp8_input_cast_bytes"] == "trtllm-fp8linear-static-quantize"
    # the PyTorch-backend profiles were not read for it: no figure, the step model's cast
    assert get_serving_engine("trtllm-0.20").fp8_input_cast_bytes is None


def test_quantize_saves_one_byte_per_input_element():
    with_field = _nongemm("trtllm-0.17", 3.0)
    recipe = _nongemm("trtllm-0.17", None)
    T = np.array([1, 258, 2048])
    saved = recipe[T] - with_field[T]
    assert saved == pytest.approx(ELEMENTS * (4 - 3) * T / HBM, rel=1e-9)
    # 26,624 B per token and layer: 9.9 ns per token and layer, 0.32 us per token over 32 layers
    assert saved[0] * 32 == pytest.approx(0.318e-6, rel=0.01)


def test_bad_cast_width_is_one_clear_line(tmp_path):
    f = tmp_path / "fw.toml"
    f.write_text(
        '[profiles."my-trt"]\nkind = "serving"\nname = "mine"\nversion = "0.17"\n'
        'source = "trtllm-fp8linear-static-quantize"\nfp8_input_cast_bytes = 0\n'
        'fp8_input_cast_bytes_source = "trtllm-fp8linear-static-quantize"\n')
    with pytest.raises(BadInput, match="fp8_input_cast_bytes must be bytes per element > 0"):
        load_frameworks_file(str(f))
