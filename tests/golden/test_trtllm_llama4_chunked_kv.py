"""Llama 4's chunked-attention layers in TensorRT-LLM's KV cache (trtllm-0.20 profile,
``chunked_attention_kv = "full_context"``).

Source (key trtllm-llama4-chunked-kv): TensorRT-LLM tensorrt_llm/_torch/pyexecutor/
resource_manager.py KVCacheManager (stored commits d2a5560a and 001541ba): with
kv_cache_config.max_attention_window unset, max_attention_window_vec = [max_seq_len], one window
for every layer; trtllm-bench's get_settings (0171265e) builds kv_cache_config with the dtype only.
So the KV pool is sized as if every layer were a full-attention layer. The model reader prices
the chunked layers as one 8,192-token window (specs/model.py, Llama 4), which another engine's
pool (here trtllm-1.0, without the field) keeps.

Derivation, Llama 4 Maverick (validation/serving_models/llama-4-maverick.json: 48 layers, 8 KV
heads of 128, NoPE on every fourth layer, chunks of 8,192 on the other 36) at TP 8, FP8 KV,
max_seq_len = 20,000 + 2,000 = 22,000:

    KV heads per GPU           = ceil(8 / 8) = 1
    bytes per token per GPU    = 2 (K, V) * 48 * 1 * 128 * 1 B = 12,288 B       (full context)
    one-chunk window           = 12,288 * (12 * 22,000 + 36 * 8,192) / (48 * 22,000)
                               = 12,288 * 558,912 / 1,056,000 = 6,503.7 B      (mean per token)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from scalemodel.analytic.serving_memory import engine_kv_budget
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.frameworks import get_engine

ROOT = Path(__file__).resolve().parents[2]
MAVERICK = ROOT / "validation" / "serving_models" / "llama-4-maverick.json"

FULL = 2 * 48 * 1 * 128 * 1.0
WINDOW = FULL * (12 * 22_000 + 36 * 8_192) / (48 * 22_000)


def _kv(engine: str, m=None):
    m = m or get_model(str(MAVERICK))
    return engine_kv_budget(m, get_gpu("h200"), tp=8, weight_dtype="fp8", kv_dtype="fp8",
                            engine_id=engine, max_model_len=22_000, max_num_seqs=384,
                            max_num_batched_tokens=20_384)


def test_reader_marks_the_chunked_layers():
    m = get_model(str(MAVERICK))
    assert m.sliding_kind == "chunk"
    assert m.sliding_window == 8_192 and m.n_sliding_layers == 36


def test_profile_field_and_source():
    fw = get_engine("trtllm-0.20")
    assert fw.get("chunked_attention_kv") == "full_context"
    assert fw.sources["chunked_attention_kv"] == "trtllm-llama4-chunked-kv"


def test_trtllm_020_keeps_the_whole_context_on_every_layer():
    r = _kv("trtllm-0.20")
    assert r.bytes_per_token == pytest.approx(FULL)
    assert "chunked-attention layers" in str(r.derivation.to_dict())


def test_an_engine_without_the_field_keeps_one_chunk():
    assert _kv("trtllm-1.0").bytes_per_token == pytest.approx(WINDOW, rel=1e-9)


def test_a_sliding_window_model_is_left_alone():
    # the field speaks of chunked local attention only: a real sliding window keeps its bound
    m = replace(get_model(str(MAVERICK)), sliding_kind="window")
    assert _kv("trtllm-0.20", m).bytes_per_token == pytest.approx(WINDOW, rel=1e-9)


def test_kv_report_prices_the_sequence_as_the_engine_keeps_it():
    # kv --framework: the per-sequence line and the pool agree on the engine's view.
    # Whole model: 2 * 48 * 8 * 128 * 1 B = 98,304 B per token; 22,000 tokens = 2.163 GB
    from scalemodel.analytic.kv import kv_report

    m = get_model(str(MAVERICK))
    r = kv_report(m, gpu=get_gpu("h200"), context=22_000, tp=8, kv_dtype="fp8",
                  weight_dtype="fp8", engine="trtllm-0.20")
    assert r.kv_bytes_per_sequence == pytest.approx(98_304 * 22_000)
    assert r.sliding_layers == 0
