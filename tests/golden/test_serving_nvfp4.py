"""plan serve --precision fp4: NVFP4 W4A4 on Blackwell (sources_serving.toml nvidia-nvfp4-format).

Derivations written here:

* storage: a block of 16 values is 16 x 4 bits of E2M1 plus one 8-bit E4M3 scale = 72 bits, so
  4.5 bits = 0.5625 B per value (the per-tensor FP32 scale is one number per linear);
* a 16-bit checkpoint quantized by the engine keeps the output head, the embeddings and the
  norms 16-bit (as for fp8, modelopt-default-disabled-quantizers), so one GPU holds
  W = P_linear * 0.5625 B + (P_embedding + P_lm_head + P_norms) * 2 B;
* compute: the B200 datasheet lists 9,000 TFLOP/s dense FP4 and 4,500 dense FP8 (gpus.toml);
  the FP4 GEMM takes the bf16 curve's efficiency times the measured fp4/bf16 ratio, the FP8 one
  the measured fp8/bf16 ratio 0.984, so a compute-bound FP4 GEMM takes
  4500 x 0.984 / (9000 x k_fp4) of the FP8 one's time;
* k_fp4 (source vllm-pr-20646-nvfp4-gemm-b200, vLLM PR 20646's 'Before' table on a B200, N =
  6144, K = 4096): at M = 4096 / 8192 / 16384 torch bf16 runs 1365.255495 / 1420.966950 /
  1360.143047 TFLOP/s and the CUTLASS NVFP4 GEMM without its quantization 3645.594842 /
  3778.760919 / 3904.329097; each against its dense peak (9000 and 2250 TF) the NVFP4 share over
  the bf16 share is fp4 / (4 bf16) = 0.6676 / 0.6648 / 0.7176, mean 0.683;
* decode attention on B200 reads the KV once per KV head: Llama 2 70B, 80 layers x 8 KV heads x
  128 x (K, V) x 1 B (FP8 KV) = 163,840 B per token over 7.7 TB/s at the planner's 0.8 HBM
  efficiency (planner.toml [gemm]).
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.params import count_params
from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.engine import get_serving_engine, setup
from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu
from scalemodel.specs.model import get_model


def test_nvfp4_is_four_and_a_half_bits_per_value():
    p = precision("fp4")
    assert p.weight_bytes == pytest.approx((16 * 4 + 8) / 16 / 8)
    assert p.activation_bytes == pytest.approx(0.5625)
    assert p.gemm_dtype == "fp4"
    assert p.kv_dtype == "fp8"
    assert get_serving_engine("trtllm-0.17").default_kv_dtype(p) == "fp8"


def test_fp4_checkpoint_keeps_head_and_embeddings_16_bit():
    m = get_model("llama-2-70b")
    pc = count_params(m)
    norms = pc.final_norm + 2 * m.hidden * m.n_layers
    linear = pc.total - pc.embedding - pc.lm_head - norms
    expected = linear * 0.5625 + (pc.embedding + pc.lm_head + norms) * 2
    es = setup(get_serving_engine("trtllm-0.17"), m, get_gpu("b200"), ServeLayout(tp=1),
               precision("fp4"), "fp8", 222, 274)
    assert es.kv.weights_bytes == pytest.approx(expected, rel=1e-6)
    # about 39.7 GB for the 69e9-parameter model, against 69.2e9 B at FP8
    assert 39e9 < es.kv.weights_bytes < 40.5e9


def _it(prec):
    m, g = get_model("llama-2-70b"), get_gpu("b200")
    return build(m, g, ServeLayout(1, 1, 1), precision(prec), "fp8", max_tokens=8192,
                 max_seqs=1024, attention_kind="flash", overhead_s=0.0,
                 cluster=make_cluster(g, 1))


def test_b200_fp4_gemm_ratio_from_the_measured_table():
    # vLLM PR 20646, 'Before', B200, N = 6144, K = 4096: (M, torch bf16, nvfp4-noquant) TFLOP/s
    table = [(4096, 1365.255495, 3645.594842), (8192, 1420.966950, 3778.760919),
             (16384, 1360.143047, 3904.329097)]
    ratios = [(fp4 / 9000) / (bf16 / 2250) for _, bf16, fp4 in table]
    assert [round(r, 4) for r in ratios] == [0.6676, 0.6648, 0.7176]
    g = get_gpu("b200")
    assert g.fp4_gemm_ratio == pytest.approx(sum(ratios) / 3, abs=5e-4)
    assert g.gemm_dtype_factor("fp4") == g.fp4_gemm_ratio
    assert g.source_of("fp4_gemm_ratio").startswith("vLLM pull request 20646")


def test_fp4_gemm_at_the_datasheet_rate_times_the_measured_ratio():
    it4, it8 = _it("fp4"), _it("fp8")
    T = 8192  # compute-bound: the GEMMs' compute side equals their time
    assert it4.tables.dense[T] == pytest.approx(it4.tables.dense_c[T])
    assert it4.tables.dense_c[T] / it8.tables.dense_c[T] == pytest.approx(
        4500 * 0.984 / (9000 * 0.683), rel=1e-9)
    # one decode token reads the linear weights at 0.5625 B (memory side), vs 1 B at FP8: a
    # layer's weights h (h + 2 kv) + h^2 + 2 h ffn + ffn h over 7.7 TB/s at 0.8 efficiency
    h, kv, ffn = 8192, 1024, 28672
    read = (h * (h + 2 * kv) + h * h + 2 * h * ffn + ffn * h) / (7.7e12 * 0.8)
    assert it8.tables.dense[1] == pytest.approx(read, rel=0.01)
    # at FP4 the reads bound it from below; at the measured FP4 rate the tile-padded compute
    # side of the thinnest GEMM (one 128-row tile over the SMs) comes a few percent above its
    # 0.5625 B read (3.3% at B200's own burst ceiling, gemm_burst_efficiency 0.776)
    assert read * 0.5625 <= it4.tables.dense[1] <= 1.05 * read * 0.5625


def test_blackwell_decode_attention_reads_the_kv_at_hbm_speed():
    it = _it("fp4")
    assert it.dec_bound == "memory (KV read)"
    assert it.dec_s_per_ctx_token == pytest.approx(80 * 8 * 128 * 2 * 1 / (7.7e12 * 0.8))


def test_fp4_refused_without_an_fp4_tensor_core_path():
    m = get_model("llama-2-70b")
    with pytest.raises(BadInput, match="fp4 tensor-core path"):
        setup(get_serving_engine("trtllm-0.17"), m, get_gpu("h100-sxm"), ServeLayout(tp=2),
              precision("fp4"), "fp8", 222, 274)


def test_trtllm_bench_tuning_sizes_an_nvfp4_engine_at_half_a_byte():
    # tuning.py calc_engine_setting: engine = params x BYTES_PER_ELEM[NVFP4] (0.5), KV per token
    # 2 x 80 layers x max(1, 8) heads x 128 x 1 B (FP8 KV); requests = (memory - engine) x 0.95
    # / (KV per token x (ISL + OSL)); finetune_setting rounds the batch up to 256 above 1024
    # requests and the tokens min(bs x (1 + ISL / OSL), 32768) up to 256 below 4096 (at least
    # 2048), to 512 below 8192, else to 1024
    import math

    from scalemodel.analytic.serving.engine import trtllm_bench_limits

    m, g = get_model("llama-2-70b"), get_gpu("b200")
    P = count_params(m).total
    reqs = (g.hbm_bytes - P * 0.5) * 0.95 / (2 * 80 * 8 * 128 * 1.0 * (222 + 274))
    raw_bs = min(reqs, 4096)
    bs = 256 * math.ceil(raw_bs / 256)
    raw_tok = min(raw_bs * (1 + 222 / 274), 32768)
    if raw_tok < 4096:
        tok = max(2048, 256 * math.ceil(raw_tok / 256))
    elif raw_tok < 8192:
        tok = 512 * math.ceil(raw_tok / 512)
    else:
        tok = 1024 * math.ceil(raw_tok / 1024)
    assert 1024 <= raw_bs < 4096
    assert trtllm_bench_limits(m, g, ServeLayout(), precision("fp4"), 1.0, 222, 274) == (bs, tok)


def test_fp4_kv_dtype_is_the_engines():
    # TensorRT-LLM quantizes the KV with the checkpoint (FP8); vLLM's --kv-cache-dtype 'auto'
    # keeps the model's 16-bit dtype whatever the weights (source vllm-cache-dtype-auto)
    p = precision("fp4")
    assert get_serving_engine("trtllm-1.0").default_kv_dtype(p) == "fp8"
    assert get_serving_engine("vllm-v1").default_kv_dtype(p) == "bf16"
