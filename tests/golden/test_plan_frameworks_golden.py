"""Golden checks of the framework-level terms of the step-time model: batched attention GEMMs,
eager-mode elementwise traffic, unfused gradient accumulation, sustained clocks, the attention
kernel kinds and the MoE dispatch under tensor parallelism. Each expected value is derived by
hand in the test from the constants' sources (planner.toml, gpus.toml)."""

import numpy as np
import pytest

from scalemodel.analytic.planner import (
    attention_core_time,
    constants,
    evaluate_one,
    gemm_ceiling,
    gemm_efficiency,
    make_cluster,
    make_job,
)
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.model import from_hf_config

# ZeRO-2 (Megatron-FSDP optim_grads): at ZeRO-1 the default profile's fp32 main gradients
# (unsharded, 4 B per parameter) and the activations need 80.7 GB of the H100's 80
LAYOUT = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 2, "vpp": 1, "micro_batch": 1,
          "recompute": "none"}


def _values(model="llama-3-8b", gpu="h100-sxm", n=8, seq=4096, batch=64, layout=None, **job):
    m = get_model(model) if isinstance(model, str) else model
    j = make_job(m, seq_len=seq, global_batch_seqs=batch, **job)
    return evaluate_one(j, make_cluster(gpu, n), layout or LAYOUT).values


def test_batched_gemm_shares_its_waves():
    # One head's score GEMM of a 2048-token sequence, head dim 96 (Megatron's 1.7B model):
    # 2048 x 2048 output = 16 x 16 = 256 tiles of 128 x 128 on 108 SMs -> 3 waves, 256 / 324 of
    # the slots busy. Run as one bmm over 16 sequences x 24 heads = 384 products: 98,304 tiles,
    # 911 waves, 98,304 / 98,388 busy. K = 96 pads to 128 in both cases (0.75). At the A100's
    # ceiling (0.869, its MAMF row) the single product's MMA time, 805 MFLOP / (312 TF x 0.869
    # x 0.926 x 0.75 x 256 / 324) = 5.4 us, is under its HBM time, 9.18 MB / (2.039 TB/s x 0.8)
    # = 5.6 us: one product is memory-bound, the batched launch compute-bound.
    g = get_gpu("a100-sxm-80gb")
    one = float(gemm_efficiency(np.float64(2048), np.float64(2048), np.float64(96), g))
    eta = gemm_ceiling(g) * g.sustained_fraction * 0.75
    t1_memory = 2 * (2048 * 96 + 96 * 2048 + 2048 * 2048) / (g.hbm_bytes_per_s * 0.8)
    t1_compute = 2 * 2048 * 2048 * 96 / (312e12 * eta * 256 / 324)
    assert t1_compute < t1_memory
    assert one == pytest.approx(2 * 2048 * 2048 * 96 / (t1_memory * 312e12), rel=1e-9)
    from scalemodel.analytic.planner import gemm_time

    peak = g.peak_flop_per_s("bf16")
    t = float(gemm_time(np.float64(2048), np.float64(2048), np.float64(96), g, peak, 2.0, 384.0))
    flops = 384 * 2 * 2048 * 2048 * 96
    t_compute = flops / (peak * eta * 98_304 / (911 * 108))
    t_memory = 384 * 2 * (2048 * 96 + 96 * 2048 + 2048 * 2048) / (g.hbm_bytes_per_s * 0.8)
    assert t == pytest.approx(max(t_compute, t_memory), rel=1e-9)


def test_gemms_run_at_the_rate_a_long_run_sustains():
    # The GEMM ceiling eta_0 (each GPU's, gpus.toml gemm_burst_efficiency) comes from short runs
    # (a burst). A training step is one long,
    # power-saturated run, so each GPU keeps only its sustained share:
    # - A100 (gpus.toml): the dense peak is quoted at the 1.41 GHz boost; it holds 1.305 GHz
    #   under dense math at 400 W (NVIDIA's HPL convention, glennklockwood.com/garden/peak-FLOPS).
    # - H100 / H200 / H800: measured directly, sustained (MSMF) over burst (MAMF) matmul TFLOPS on
    #   an H200 with all 8 GPUs busy, 698.6 / 823.9 = 0.848 (ml-engineering mamf-finder).
    # - B200: 1426.4 / 1751.2 = 0.815 (same source and protocol).
    a100, h100, h200, b200 = (get_gpu(g) for g in ("a100-sxm-80gb", "h100-sxm", "h200", "b200"))
    assert a100.sustained_fraction == pytest.approx(1.305 / 1.41)
    assert a100.sustained_basis == "clock"
    assert h100.sustained_fraction == pytest.approx(698.6 / 823.9, abs=5e-4)
    assert h200.sustained_fraction == h100.sustained_fraction
    assert h100.sustained_basis == "gemm"
    assert b200.sustained_fraction == pytest.approx(1426.4 / 1751.2, abs=5e-4)
    # a shape that fills whole waves on both GPUs: 108 x 132 tiles, K a multiple of 64. Each
    # GPU's burst ceiling is its own MAMF row (ml-engineering table at 744d01e): A100 SXM 271.2
    # of 312 TF = 0.869, H100 SXM 794.5 of 989.4 = 0.803
    M, N, K = np.float64(108 * 128), np.float64(132 * 128), np.float64(8192)
    assert gemm_ceiling(a100) == pytest.approx(271.2 / 312, abs=5e-4)
    assert gemm_ceiling(h100) == pytest.approx(794.5 / 989.4, abs=5e-4)
    assert float(gemm_efficiency(M, N, K, a100)) == pytest.approx(gemm_ceiling(a100) * 1.305 / 1.41)
    assert float(gemm_efficiency(M, N, K, h100)) == pytest.approx(gemm_ceiling(h100) * 0.848)
    # the H100 runs such a GEMM 989.4 x 0.803 x 0.848 / (312 x 0.869 x 0.9255) = 2.7x faster
    r = (float(gemm_efficiency(M, N, K, h100)) * 989.4e12) / (
        float(gemm_efficiency(M, N, K, a100)) * 312e12)
    assert r == pytest.approx(989.4 * 0.803 * 0.848 / (312 * 0.869 * 1.305 / 1.41), rel=1e-9)


def test_fp8_gemms_take_the_measured_fp8_over_bf16_efficiency():
    # ml-engineering's MAMF table, H100 SXM with torch 2.7.0+cu126: bf16 794.5 of 989 TFLOP/s,
    # fp8 1402.6 of 1979. fp8 reaches (1402.6 / 1979) / (794.5 / 989) = 0.882 of the bf16
    # efficiency; B200 (torch 2.7.1+cu128): (3432.5 / 4500) / (1745.0 / 2250) = 0.984.
    h100, b200, a100 = get_gpu("h100-sxm"), get_gpu("b200"), get_gpu("a100-sxm-80gb")
    assert h100.gemm_dtype_factor("fp8") == pytest.approx((1402.6 / 1979) / (794.5 / 989),
                                                           abs=5e-4)
    assert b200.gemm_dtype_factor("fp8") == pytest.approx((3432.5 / 4500) / (1745.0 / 2250),
                                                          abs=5e-4)
    assert h100.gemm_dtype_factor("bf16") == 1.0
    assert a100.gemm_dtype_factor("fp8") == 1.0  # not measured (and no fp8 path on A100)
    M, N, K = np.float64(108 * 128), np.float64(132 * 128), np.float64(8192)
    e16 = float(gemm_efficiency(M, N, K, h100, "bf16"))
    e8 = float(gemm_efficiency(M, N, K, h100, "fp8"))
    assert e8 == pytest.approx(0.882 * e16, rel=1e-9)


def test_a_gpu_file_rejects_a_sustained_ratio_outside_0_1():
    from scalemodel.errors import BadInput
    from scalemodel.specs.gpu import _build_gpu

    base = {"name": "x", "hbm_bytes": 1e9, "hbm_bytes_per_s": 1e12, "flop_per_s": {"bf16": 1e15}}
    for field in ("sustained_gemm_ratio", "fp8_gemm_ratio"):
        for bad in (0, 1.2, -0.5, "0.8", True):
            with pytest.raises(BadInput, match=field):
                _build_gpu("x", {**base, field: bad}, "test")
    assert _build_gpu("x", {**base, "sustained_gemm_ratio": 0.9}, "test").sustained_fraction == 0.9


def test_eager_mode_bytes_for_a_llama_layer():
    # Llama 3 8B (h 4096, 32 query / 8 KV heads of 128, SwiGLU 14336), micro-batch 1 x 4096
    # tokens, TP1. Extra bytes of eager mode per layer over the fused accounting
    # (planner.toml [nongemm] eager_*):
    #   2 RMSNorms  forward (36 - 4) h, backward (76 - 8) h
    #   rotary on Q (4096) and K (1024): forward (20 - 4), backward (20 - 8) per element
    #   SwiGLU over 14336: forward (10 - 6), backward (18 - 12) per element
    #   repeat_kv: 4 bytes per element of (kv 1024 + q 4096), forward and backward
    #   attention output made contiguous: 4 bytes per element of V width 4096, both ways
    h, q, kv, ffn, T = 4096, 4096, 1024, 14336, 4096
    fwd = 2 * 32 * h + 16 * (q + kv) + 4 * ffn + 4 * (kv + q) + 4 * q
    bwd = 2 * 68 * h + 12 * (q + kv) + 6 * ffn + 4 * (kv + q) + 4 * q
    per_layer = T * (fwd + bwd)
    g = get_gpu("h100-sxm")
    hbm = g.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    fused = _values(kernels="fused")
    eager = _values(kernels="eager")
    mb = 64 // 8  # micro-batches per step on each of the 8 data-parallel ranks
    expected = mb * 32 * per_layer / hbm
    assert eager.nongemm_s - fused.nongemm_s == pytest.approx(expected, rel=1e-9)
    assert eager.step_time_s > fused.step_time_s


def test_eager_mode_changes_nothing_without_rms_rope_or_gating():
    # a GPT-2-style model: LayerNorm, learned positions, GELU MLP, full multi-head attention;
    # only the attention-output copy remains
    g = get_gpu("h100-sxm")
    hbm = g.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    m = from_hf_config({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
                        "n_positions": 1024, "vocab_size": 50257}, "gpt2-small", where="test")
    assert not m.rope and not m.gated_mlp and m.norm == "layer"
    fused = _values(model=m, seq=1024, kernels="fused")
    eager = _values(model=m, seq=1024, kernels="eager")
    copy = 1024 * (4 + 4) * m.n_heads * m.head_dim  # bytes per layer per micro-batch
    assert eager.nongemm_s - fused.nongemm_s == pytest.approx(
        8 * m.n_layers * copy / hbm, rel=1e-9)


def test_unfused_gradient_accumulation_pass():
    # Without Megatron's gradient-accumulation fusion each micro-batch adds its 16-bit weight
    # gradient into the fp32 main gradient: 2 + 4 + 4 = 10 bytes per local parameter, 8 micro-
    # batches per step here (no pipeline, so no bubble share).
    g = get_gpu("h100-sxm")
    hbm = g.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    from scalemodel.analytic.params import count_params

    n = count_params(get_model("llama-3-8b")).total
    fused = _values()
    unfused = _values(grad_accum_fusion=False)
    assert unfused.step_time_s - fused.step_time_s == pytest.approx(
        8 * 10 * n / hbm, rel=1e-6)
    # ZeRO-3 reduce-scatters each micro-batch's gradients instead: no add pass
    z3 = dict(LAYOUT, zero=3)
    assert _values(layout=z3, grad_accum_fusion=False).step_time_s == pytest.approx(
        _values(layout=z3).step_time_s, rel=1e-12)


def test_attention_kinds_scale_the_fa2_curves():
    # planner.toml [attention]: Triton FlashAttention 1.8x the FlashAttention-2 time (the
    # geometric middle of the FA2 paper's 1.3-2.5x); FlashAttention-3 / cuDNN 616/335 = 1.84x
    # faster forward and 561/322 = 1.74x faster backward (FA3 paper, 16k tokens)
    g = get_gpu("h100-sxm")
    peak = g.peak_flop_per_s("bf16")
    f2, b2 = attention_core_time(1e12, 8192.0, 1.0, peak, g, "flash")
    ft, bt = attention_core_time(1e12, 8192.0, 1.0, peak, g, "triton")
    f3, b3 = attention_core_time(1e12, 8192.0, 1.0, peak, g, "flash3")
    assert (ft / f2, bt / b2) == (pytest.approx(1.8), pytest.approx(1.8))
    assert (f2 / f3, b2 / b3) == (pytest.approx(1.84), pytest.approx(1.74))


def test_flash3_needs_hopper():
    with pytest.raises(BadInput, match="hopper"):
        _values(gpu="a100-sxm-80gb", attention="flash3")


def test_moe_dispatch_sends_only_the_sequence_parallel_shard():
    # Mixtral 8x7B on two 8-GPU nodes, EP 4: with TP 2 and sequence parallelism each rank
    # dispatches half of the micro-batch's tokens, so the bytes it sends across the EP group
    # halve; top-2 copies, 16-bit activations, (ep - 1) / ep of them leave the rank, six
    # all-to-alls per layer (dispatch and combine: forward, its full recompute, backward).
    m = get_model("mixtral-8x7b")
    base = {"pp": 1, "cp": 1, "zero": 3, "vpp": 1, "micro_batch": 1, "recompute": "full"}
    v1 = _values(model="mixtral-8x7b", n=16, seq=4096, batch=32,
                 layout=dict(base, tp=1, dp=16, ep=4))
    v2 = _values(model="mixtral-8x7b", n=16, seq=4096, batch=32,
                 layout=dict(base, tp=2, dp=8, ep=4))
    per_layer_tp1 = 6 * 3 / 4 * 2 * 4096 * 2 * m.hidden
    mb1, mb2 = 32 // 16, 32 // 8
    assert v1.ep_bytes == pytest.approx(mb1 * m.n_layers * per_layer_tp1)
    assert v2.ep_bytes == pytest.approx(mb2 * m.n_layers * per_layer_tp1 / 2)


def test_op_level_recompute_keeps_every_other_matmul():
    # torchtitan's selective "op" policy on a Llama 3 8B block: matmuls in call order are
    # wq, wk, wv, wo, w1, w3, w2; the 1st, 3rd, 5th and 7th outputs (q 4096, v 1024, w1 14336,
    # w2 4096) and the attention output (4096) are kept besides the block input (4096), all in
    # 16 bits: 2 x (4096 + 4096 + 1024 + 4096 + 14336 + 4096) = 63,488 bytes per token per
    # layer at TP 1. Recomputed in the backward: wk, wo, w3 -> 2 h (1024 + 4096 + 14336) FLOPs
    # per token per layer, plus the elementwise kernels.
    from scalemodel.analytic.memory import act_per_layer, layer_act_coeffs

    m = get_model("llama-3-8b")
    c = layer_act_coeffs(m, False)
    per_token = float(act_per_layer(c, 4096, 1, m.n_heads, m.n_kv_heads, 1, True, 3,
                                    False)) / 4096
    assert per_token == 63_488
    # planned under torchtitan, the framework that offers the op policy (its recompute_options)
    v = _values(layout=dict(LAYOUT, zero=3, recompute="op"), framework_id="torchtitan")
    v0 = _values(layout=dict(LAYOUT, zero=3, recompute="none"), framework_id="torchtitan")
    tokens = 64 * 4096
    extra = 2 * 4096 * (1024 + 4096 + 14336) * 32 * tokens
    assert v.hw_flops - v0.model_flops == pytest.approx(extra, rel=1e-12)
    assert v.step_time_s > v0.step_time_s
    assert v.memory_per_gpu_bytes < v0.memory_per_gpu_bytes


def test_op_level_recompute_rejects_moe_and_mla():
    for model in ("mixtral-8x7b", "deepseek-v3"):
        with pytest.raises(BadInput, match="op-level"):
            _values(model=model, n=64, layout=dict(LAYOUT, dp=64, zero=3, recompute="op"),
                    framework_id="torchtitan")


def test_dualpipe_bubble_and_memory():
    # DeepSeek-V3 report, Table 2: 1F1B bubble (PP - 1)(F + B); DualPipe (PP/2 - 1)(F&B + B - 3W)
    # with two copies of the parameters and PP + 1 micro-batches of activations. Here F&B is
    # taken as F + B (the overlapped pair's compute) and W as the forward GEMM time (a weight-
    # gradient GEMM has the forward GEMM's shape and FLOPs). Llama 3 8B, PP 4, 8 micro-batches.
    lay = dict(LAYOUT, pp=4, dp=2, zero=1)
    one = _values(layout=lay)
    dual = _values(layout=lay, schedule="dualpipe")
    t_mb, f, w = dual.t_slow_s, dual.fwd_mb_s, dual.w_mb_s
    b = t_mb - f
    assert 0 < w < f < t_mb
    assert dual.bubble_s == pytest.approx((4 / 2 - 1) * (f + 2 * b - 3 * w), rel=1e-9)
    assert one.bubble_s == pytest.approx(3 * one.t_slow_s, rel=1e-9)
    assert dual.bubble_s < one.bubble_s
    assert dual.mem_params == pytest.approx(2 * one.mem_params, rel=1e-9)
    assert dual.mem_activations == pytest.approx(one.mem_activations * 5 / 4, rel=1e-9)


def test_dualpipe_needs_even_stages():
    with pytest.raises(BadInput, match="DualPipe"):
        _values(layout=dict(LAYOUT, pp=2, dp=4, vpp=2, zero=1), schedule="dualpipe")


def test_moe_layers_with_ep_keep_only_the_attention_tp_collectives():
    # Megatron-Core's all-to-all dispatcher with sequence parallelism: the MoE block's tokens move
    # by the EP dispatch and the expert-TP gather, not by the MLP block's TP all-gather /
    # reduce-scatter; so an all-MoE model (Mixtral) with EP > 1 runs half of a layer's TP
    # collectives (the attention block's), with EP = 1 all of them.
    base = {"tp": 2, "pp": 1, "cp": 1, "zero": 3, "vpp": 1, "micro_batch": 1,
            "recompute": "none"}
    v1 = _values(model="mixtral-8x7b", n=16, seq=4096, batch=32, layout=dict(base, dp=8, ep=1))
    v2 = _values(model="mixtral-8x7b", n=16, seq=4096, batch=32, layout=dict(base, dp=8, ep=2))
    assert v2.tp_bytes == pytest.approx(0.5 * v1.tp_bytes, rel=1e-12)
    assert v2.tp_raw_s == pytest.approx(0.5 * v1.tp_raw_s, rel=1e-12)
    assert v2.step_time_s <= v2.upper_s * (1 + 1e-12)


def test_every_bundled_gpu_has_a_sustained_share_and_dtype_factor_in_0_1():
    from scalemodel.specs import gpu_ids

    for gid in gpu_ids():
        g = get_gpu(gid)
        assert 0 < g.sustained_fraction <= 1, gid
        for dt in ("bf16", "fp8"):
            assert 0 < g.gemm_dtype_factor(dt) <= 1, (gid, dt)
        if g.sustained_gemm_ratio:
            assert g.sustained_basis == "gemm"
            assert g.source_of("sustained_gemm_ratio") != g.source_of(""), gid
        if g.fp8_gemm_ratio:
            assert g.source_of("fp8_gemm_ratio") != g.source_of(""), gid


def test_fp8_training_keeps_the_output_head_in_bf16():
    # planner.toml [nongemm] fp8_bf16_modules: the output head stays bf16 in fp8 training
    # (DeepSeek-V3 report Sec. 3.3; torchtitan's Float8 filter_fqns = "output"). So what a larger
    # vocabulary adds to the compute time is the same in bf16 and in fp8 training: only the head
    # GEMMs and the loss grow with it.
    import dataclasses

    m = get_model("llama-3-8b")
    grow = {}
    for prec in ("bf16", "fp8"):
        t = [_values(dataclasses.replace(m, vocab=v), precision=prec, seq=4096,
                     batch=8).compute_s for v in (128_256, 256_512)]
        grow[prec] = t[1] - t[0]
    assert grow["bf16"] > 0
    assert grow["fp8"] == pytest.approx(grow["bf16"], rel=1e-9)


def test_derivation_names_the_sustained_share_and_the_fp8_factor():
    from scalemodel.analytic.planner import derive_row, make_cluster, search

    def steps(gpu, precision):
        job = make_job(get_model("llama-3-8b"), seq_len=4096, global_batch_seqs=64,
                       precision=precision)
        res = search(job, make_cluster(gpu, 8), {"tp": 1, "pp": 1}, top=0)
        return {s["symbol"]: s for s in derive_row(res, res.best).to_dict()["steps"]
                if s.get("symbol")}

    h = steps("h100-sxm", "fp8")
    assert h["f_clk"]["value"] == pytest.approx(0.848)
    assert h["k_fp8"]["value"] == pytest.approx(0.882)
    assert "mamf" in h["f_clk"]["source"].lower()
    assert "k_fp8" not in steps("h100-sxm", "bf16")
    a = steps("a100-sxm-80gb", "bf16")
    assert a["f_clk"]["value"] == pytest.approx(1.305 / 1.41)
    mi = steps("mi300x", "bf16")  # no measurement: 1 assumed, and said so
    assert mi["f_clk"]["value"] == 1.0 and "assum" in mi["f_clk"]["source"].lower()
