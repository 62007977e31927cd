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
