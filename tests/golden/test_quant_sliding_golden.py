"""Sliding-window KV and quantized weight bytes, each against a derivation written here or a
published file size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalemodel.analytic.kv import kv_report
from scalemodel.analytic.roofline import decode_step
from scalemodel.analytic.weights import weight_bytes
from scalemodel.specs import from_hf_config, get_gpu, get_model
from scalemodel.specs.sources import data_path

FIX = Path(__file__).parent.parent / "fixtures" / "hf_configs"


def test_gemma2_kv_counts_sliding_layers_window_bounded():
    m = get_model(str(FIX / "gemma-2-9b.json"))
    # per layer per token: K and V, 8 heads of 256, bf16 = 2 * 8 * 256 * 2 = 8192 B
    per_layer_tok = 2 * 8 * 256 * 2
    r = kv_report(m, context=8192)
    # 21 global layers keep 8192 tokens, 21 sliding layers keep their 4096-token window
    assert r.kv_bytes_per_sequence == per_layer_tok * (21 * 8192 + 21 * 4096)
    assert r.sliding_window == 4096 and r.sliding_layers == 21
    # within the window every layer keeps every token
    assert kv_report(m, context=2048).kv_bytes_per_sequence == per_layer_tok * 42 * 2048


def test_gemma2_capacity_uses_window_bounded_bytes():
    m = get_model(str(FIX / "gemma-2-9b.json"))
    gpu = get_gpu("h100-sxm")
    full = from_hf_config({**json.loads((FIX / "gemma-2-9b.json").read_text()),
                           "sliding_window": None}, "g2-full", "test")
    a = kv_report(m, gpu=gpu, context=8192)
    b = kv_report(full, gpu=gpu, context=8192)
    # 42 * 8192 vs 21 * 8192 + 21 * 4096 token-layers per sequence, 4/3 less KV: the same
    # budget holds 4/3 the sequences, to within whole blocks and sequences
    assert a.kv_budget_bytes_per_gpu == b.kv_budget_bytes_per_gpu
    assert a.max_concurrent_sequences == pytest.approx(4 / 3 * b.max_concurrent_sequences, abs=1)


def test_decode_reads_window_bounded_kv():
    m = get_model(str(FIX / "gemma-2-9b.json"))
    p = decode_step(get_gpu("h100-sxm"), m, batch=8, context=8192)
    p1 = decode_step(get_gpu("h100-sxm"), m, batch=1, context=8192)
    # bytes grow by one sequence's window-bounded KV per added sequence
    kv_seq = 2 * 8 * 256 * 2 * (21 * 8192 + 21 * 4096)
    assert p.bytes - p1.bytes == pytest.approx(7 * kv_seq)


def _llama2_7b(quant: dict) -> dict:
    cfg = json.loads(data_path("models/llama-2-7b.json").read_text())
    return {**cfg, "quantization_config": quant}


def test_gptq_llama2_7b_matches_the_published_file_size():
    # TheBloke/Llama-2-7B-GPTQ (main branch: 4 bits, group 128, no act-order), README "Provided
    # files" table: 3.90 GB. Derivation: per linear (n_in -> n_out) qweight n_in n_out / 2 B,
    # per group of 128 inputs one fp16 scale and one 4-bit zero per output, g_idx 4 B per input;
    # embedding and head stay fp16.
    q = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "sym": True,
         "true_sequential": True, "quant_method": "gptq"}
    m = from_hf_config(_llama2_7b(q), "l2-gptq", "test")
    h, f, L, V = 4096, 11008, 32, 32000
    shapes = [(h, h)] * 4 + [(h, f)] * 2 + [(f, h)]
    lin = sum(i * o / 2 + o * (i / 128) * (2 + 0.5) + 4 * i for i, o in shapes)
    expected = L * (lin + 2 * h * 2) + 2 * V * h * 2 + h * 2
    wb = weight_bytes(m, 2.0)
    assert wb.total == pytest.approx(expected)
    assert wb.total == pytest.approx(3.90e9, rel=0.015)


def test_awq_and_w8a8_and_fp8_per_module():
    h, f, L, V = 4096, 11008, 32, 32000
    lin_params = L * (4 * h * h + 3 * h * f)
    rest = 2 * V * h + L * 2 * h + h  # embedding, head, norms
    awq = from_hf_config(_llama2_7b({"bits": 4, "group_size": 128, "quant_method": "awq",
                                     "version": "gemm", "zero_point": True}), "a", "t")
    # AWQ: 0.5 B per weight + per 128 inputs an fp16 scale and a 4-bit zero per output row
    assert weight_bytes(awq, 2.0).total == pytest.approx(
        lin_params * (0.5 + 2.5 / 128) + rest * 2)
    w8 = {"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"],
                                        "weights": {"num_bits": 8, "strategy": "channel",
                                                    "symmetric": True, "type": "int"},
                                        "input_activations": {"num_bits": 8, "strategy": "token",
                                                              "dynamic": True, "type": "int"}}}}
    m8 = from_hf_config(_llama2_7b(w8), "w", "t")
    # int8 weights, one bf16 scale per output row of each linear
    rows = L * (h + 2 * h + h + 2 * f + h)  # q, k, v, o, gate, up, down outputs
    assert weight_bytes(m8, 2.0).total == pytest.approx(lin_params + rows * 2 + rest * 2)
    # the same with lm_head not ignored: the head becomes int8 with 32000 row scales
    m8h = from_hf_config(_llama2_7b({**w8, "ignore": []}), "w", "t")
    assert weight_bytes(m8h, 2.0).total - weight_bytes(m8, 2.0).total == pytest.approx(
        -V * h + V * 2)
    # DeepSeek-V3 as published: fp8 with 128 x 128 block scales (fp32) on every linear
    ds = get_model("deepseek-v3")
    wb = weight_bytes(ds, 2.0)
    assert wb.total < 0.55 * weight_bytes(ds.with_overrides(quant=None), 2.0).total


def test_ignored_modules_stay_unquantized():
    q = {"bits": 4, "group_size": 128, "quant_method": "awq", "zero_point": True,
         "modules_to_not_convert": ["layers.0."]}
    m = from_hf_config(_llama2_7b(q), "a", "t")
    wb = weight_bytes(m, 2.0)
    full_layer = (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096) * 2
    assert wb.layers[0].total == pytest.approx(full_layer)
    assert wb.layers[1].total < 0.3 * full_layer


def test_kv_capacity_and_decode_read_the_quantized_bytes():
    q = {"bits": 4, "group_size": 128, "quant_method": "awq", "zero_point": True}
    m = from_hf_config(_llama2_7b(q), "a", "t")
    r = kv_report(m, gpu=get_gpu("h100-sxm"))
    assert r.weights_bytes == pytest.approx(weight_bytes(m, 2.0).total)
    plain = kv_report(get_model("llama-2-7b"), gpu=get_gpu("h100-sxm"))
    assert r.kv_budget_bytes_per_gpu - plain.kv_budget_bytes_per_gpu == pytest.approx(
        plain.weights_bytes_per_gpu - r.weights_bytes_per_gpu)
    p = decode_step(get_gpu("h100-sxm"), m, batch=1, context=1)
    # batch 1: the bytes are the matmul weights (all but the embedding table) plus one token of KV
    wb = weight_bytes(m, 2.0)
    assert p.bytes == pytest.approx(wb.total - wb.embedding + 2 * 32 * 4096 * 2)
