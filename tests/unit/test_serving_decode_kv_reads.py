"""How many times an engine's generation kernel reads the KV cache per decode token, derived from
the kernels' loop structure (engine profiles' ``decode_kv_reads``)."""

from __future__ import annotations

import pytest

from conftest import sourced_field, user_profile_refusal
from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import (
    ServeLayout,
    build,
    decode_kv_read_factor,
    precision,
)
from scalemodel.specs import get_gpu, get_model


def _it(model, gpu, tp, reads):
    m, g = get_model(model), get_gpu(gpu)
    return build(m, g, ServeLayout(tp), precision("fp8"), "fp8", max_tokens=4096, max_seqs=64,
                 attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, tp),
                 decode_kv_reads=reads)


def test_masked_mha_of_trtllm_0_5_reads_each_kv_head_once_per_query_head():
    # TensorRT-LLM 0.5.0 decoderMaskedMultiheadAttentionLaunch.h: grid = (num_heads, batch,
    # seq_len_tile); decoderMaskedMultiheadAttentionTemplate.h: block hi loads K and V of head
    # hi_kv = hi / (num_heads / num_kv_heads) for every cached timestep. Llama 2 70B (64 query
    # heads, 8 KV heads, d_h 128, 80 layers) at TP 4: a rank runs 16 query-head blocks per
    # sequence, each loading one KV head's K and V: per (sequence, cached token, layer)
    # 16 x 128 x 2 x 1 B (FP8 KV) = 4,096 B, where a grouped kernel (XQA) loads the rank's 2 KV
    # heads once: 2 x 128 x 2 x 1 B = 512 B.
    m = get_model("llama-2-70b")
    assert (m.n_heads, m.n_kv_heads, m.head_dim, m.n_layers) == (64, 8, 128, 80)
    mmha_bytes, grouped_bytes = 16 * 128 * 2 * 1, 2 * 128 * 2 * 1
    assert decode_kv_read_factor(m, 4, "query_head") == mmha_bytes / grouped_bytes
    assert decode_kv_read_factor(m, 4, "kv_head") == 1.0
    # H100 SXM 3.35 TB/s at the planner's 0.8 HBM efficiency (planner.toml [gemm]), 80 layers
    it = _it("llama-2-70b", "h100-sxm", 4, "query_head")
    assert it.dec_s_per_ctx_token == pytest.approx(80 * mmha_bytes / (3.35e12 * 0.8))
    assert it.dec_bound == "memory (KV read)"
    assert _it("llama-2-70b", "h100-sxm", 4, "kv_head").dec_s_per_ctx_token == pytest.approx(
        80 * grouped_bytes / (3.35e12 * 0.8))


def test_read_factor_past_the_kv_heads_and_for_mha():
    # TP 16 on 8 KV heads: each rank holds one (replicated) KV head and 4 query heads -> 4 loads
    m70 = get_model("llama-2-70b")
    assert decode_kv_read_factor(m70, 16, "query_head") == 4.0
    # multi-head attention (Llama 2 7B: 32 query heads, 32 KV heads): one block per head either way
    m7 = get_model("llama-2-7b")
    assert m7.n_heads == m7.n_kv_heads
    assert decode_kv_read_factor(m7, 1, "query_head") == 1.0


def test_engine_profiles_name_their_decode_kernel():
    assert get_serving_engine("trtllm-0.5").decode_kv_reads == "query_head"
    for fid in ("trtllm-0.17", "trtllm-1.0", "vllm-v1", "vllm-v0", "sglang"):
        eng = get_serving_engine(fid)
        assert eng.decode_kv_reads == "kv_head"
        assert "decode_kv_reads" in eng.sources


def test_bad_decode_kv_reads_in_a_user_profile(tmp_path):
    msg = user_profile_refusal(tmp_path, sourced_field("decode_kv_reads", '"per_warp"'))
    assert "decode_kv_reads" in msg and "query_head" in msg
