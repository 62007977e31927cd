"""KV-cache bytes against published figures and hand derivations."""

import pytest

from scalemodel.analytic.kv import kv_report, model_kv_bytes_per_token
from scalemodel.specs import get_gpu, get_model


@pytest.mark.parametrize(
    "model, expected",
    [
        # issue #2 ground truth; model_configs.csv (HF configs); the 405B and DeepSeek-V3 rows are
        # also in 'Insights into DeepSeek-V3' (arXiv:2505.09343), table of KV bytes per token
        ("llama-2-7b", 524_288),
        ("llama-3-70b", 327_680),
        ("llama-3-405b", 516_096),
        ("deepseek-v3", 70_272),
        ("qwen2.5-72b", 327_680),  # same paper: 327.680 KB
        ("llama-2-13b", 819_200),  # 2 x 40 layers x 40 heads x 128 x 2 B
        ("mixtral-8x7b", 131_072),  # 2 x 32 x 8 x 128 x 2 B
    ],
)
def test_bytes_per_token_bf16(model, expected):
    assert model_kv_bytes_per_token(get_model(model), "bf16") == expected


def test_cache_types_scale_by_element_size():
    m = get_model("llama-3-70b")
    assert model_kv_bytes_per_token(m, "fp8") == 163_840  # model_configs.csv fp8 column
    assert model_kv_bytes_per_token(m, "int4") == 81_920  # half a byte per element


def test_tp_splits_kv_heads_until_one_per_gpu():
    m = get_model("llama-3-70b")  # 8 K/V heads
    r8 = kv_report(m, tp=8)
    r16 = kv_report(m, tp=16)
    assert r8.kv_bytes_per_token_per_gpu == 327_680 / 8
    # TP16 > 8 heads: each head is replicated on 2 ranks, a rank still holds one whole head
    assert r16.kv_bytes_per_token_per_gpu == 327_680 / 8


def test_mla_latent_not_split_by_tp():
    # DeepSeek-V3: every TP rank holds the whole 576-element latent per layer
    r = kv_report(get_model("deepseek-v3"), tp=8)
    assert r.kv_bytes_per_token_per_gpu == 70_272


def test_capacity_by_hand():
    """vLLM-style budget: memory x utilization - weights - reserve, in whole 16-token blocks."""
    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    r = kv_report(m, gpu=g, context=8192, tp=1, reserve_bytes=0.0, utilization=0.9)
    hbm = 81_559 * 2**20  # nvidia-smi "81559MiB" on an H100 80GB HBM3 (sources.toml)
    assert g.hbm_bytes == hbm
    # meta-llama/Meta-Llama-3-8B: 8,030,261,248 parameters (Hugging Face safetensors metadata,
    # shown as 8.03B), x 2 bytes in bf16
    weights = 8_030_261_248 * 2
    budget = hbm * 0.9 - weights
    per_tok = 2 * 32 * 8 * 128 * 2  # 131,072 B
    tokens = int(budget // (per_tok * 16)) * 16
    assert r.max_tokens == tokens
    assert r.max_concurrent_sequences == tokens // 8192


def test_sequence_and_batch_totals():
    r = kv_report(get_model("llama-2-7b"), context=4096, batch=8)
    assert r.kv_bytes_per_sequence == 524_288 * 4096  # 2 GiB per 4k sequence
    assert r.kv_bytes_total == 524_288 * 4096 * 8
