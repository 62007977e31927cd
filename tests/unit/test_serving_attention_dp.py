"""Attention data parallelism (TensorRT-LLM ``enable_attention_dp``, its perf-overview's DEPn
columns) in the serving iteration model: each values derived here from the model's config."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.iteration import (
    ServeLayout,
    build,
    check_layout,
    exchange_bytes,
    precision,
)
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model


def _it(model, lay, prec="fp8", kv="fp8", gpu="h200"):
    m, g = get_model(model), get_gpu(gpu)
    return build(m, g, lay, precision(prec), kv, max_tokens=2048, max_seqs=256,
                 attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, lay.tp))


def test_exchange_bytes_by_hand():
    # DeepSeek-V3 DEP8, 32 tokens on each of the 8 ranks, hidden 7168 (its config.json):
    # all-gather output 8 x 32 x 7168 x 1 B (FP8 activations) = 1,835,008 B; reduce-scatter
    # input 8 x 32 x 7168 x 2 B (16-bit expert outputs) = 3,670,016 B
    lay = ServeLayout(tp=8, ep=8, attention_dp=True)
    ag, rs = exchange_bytes(get_model("deepseek-v3"), precision("fp8"), lay, 32)
    assert float(ag) == 1_835_008
    assert float(rs) == 3_670_016


def test_attention_dp_rank_holds_every_kv_head_and_pays_no_all_reduce():
    # Qwen3-235B-A22B: 4 KV heads; under TP 8 each rank holds one KV head's share (min(8, 4) =
    # 4 ways), under attention DP every rank holds its own sequences' whole KV: the decode
    # read per context token is that of TP 1, i.e. 4x the TP-8 one
    tp8 = _it("qwen3-235b-a22b", ServeLayout(tp=8, ep=8))
    adp = _it("qwen3-235b-a22b", ServeLayout(tp=8, ep=8, attention_dp=True))
    tp1 = _it("qwen3-235b-a22b", ServeLayout(tp=1))
    assert adp.dec_s_per_ctx_token == pytest.approx(tp1.dec_s_per_ctx_token)
    assert adp.dec_s_per_ctx_token == pytest.approx(4 * tp8.dec_s_per_ctx_token)
    assert not np.any(adp.tables.allreduce)
    # the MoE layer carries the exchange instead: above its experts-only price
    assert adp.tables.moe[64] > 0


@pytest.mark.parametrize("model, lay, needle", [
    ("llama-3-8b", ServeLayout(tp=2, ep=1, attention_dp=True), "dense"),
    ("qwen3-235b-a22b", ServeLayout(tp=8, ep=4, attention_dp=True), "ep must equal tp"),
])
def test_bad_attention_dp_layouts(model, lay, needle):
    with pytest.raises(BadInput, match=needle):
        check_layout(get_model(model), lay)


def test_attention_dp_rank_memory_by_hand():
    # Qwen3-235B-A22B (config.json: hidden 4096, 94 layers, 64 query / 4 KV heads of 128,
    # 128 experts of intermediate 1536, vocab 151,936, untied head), BF16, attention DP over 8:
    # per layer attention 4096 x 8192 (q) + 2 x 4096 x 512 (k, v) + 8192 x 4096 (o) =
    # 71,303,168 whole, router 128 x 4096 = 524,288 whole, experts 128 x 3 x 4096 x 1536 /
    # 8 = 301,989,888; embedding and head 2 x 151,936 x 4096 = 1,244,659,712 whole
    from scalemodel.analytic.serving_memory import engine_kv_budget

    per_layer = 71_303_168 + 524_288 + 301_989_888
    params = 94 * per_layer + 1_244_659_712
    kv = engine_kv_budget(get_model("qwen3-235b-a22b"), get_gpu("h200"), tp=8,
                          weight_dtype="bf16", engine_id="trtllm-1.0-bench",
                          attention_dp=True)
    assert kv.weights_bytes == pytest.approx(2 * params, rel=1e-4)
    # the KV per token on a rank is every KV head's: 2 x 94 x 4 x 128 x 2 B = 192,512 B
    assert kv.bytes_per_token == pytest.approx(2 * 94 * 4 * 128 * 2)
