"""Attention data parallelism (TensorRT-LLM ``enable_attention_dp``, its perf-overview's DEPn
columns) in the serving iteration model: each values derived here from the model's config."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import (
    ServeLayout,
    build,
    check_layout,
    exchange_bytes,
    precision,
)
from scalemodel.analytic.serving.search import layouts
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model


def _adp(engine="trtllm-1.0"):
    return get_serving_engine(engine).attention_dp


def _it(model, lay, prec="fp8", kv="fp8", gpu="h200"):
    m, g = get_model(model), get_gpu(gpu)
    return build(m, g, lay, precision(prec), kv, max_tokens=2048, max_seqs=256,
                 attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, lay.tp),
                 adp_exchange=_adp() if lay.attention_dp else None)


# The exchange as TensorRT-LLM 1.0.0rc4 runs it (tensorrt_llm/_torch/modules/fused_moe/
# fused_moe_cutlass.py at commit 000a01de, CutlassFusedMoE.forward_chunk): each rank routes its
# own T tokens (k int32 expert ids and k float32 weights per token, asserted at lines 213-214),
# quantizes the hidden states first for FP8 per-tensor (line 230) or NVFP4 (lines 248-253, one
# 1-byte scale per 16 values), not for DeepSeek's FP8 block scales (line 233), all-gathers
# [x, x_sf, ids, weights] over the n ranks (line 269) and reduce-scatters the 16-bit fused-MoE
# output back (line 183). Shapes from the models' config.json files.
@pytest.mark.parametrize("model, prec, per_token", [
    # DeepSeek-V3 / R1 (hidden 7168, top 8, FP8 128 x 128 block scales): 7168 x 2 B unquantized
    # + 8 x (4 + 4) B = 14,400 B
    ("deepseek-v3", "fp8", 7168 * 2 + 8 * 8),
    # DeepSeek NVFP4: 7168 x 0.5 B + 7168 / 16 x 1 B scales + 64 B = 4,096 B
    ("deepseek-v3", "fp4", 7168 // 2 + 7168 // 16 + 8 * 8),
    # Qwen3-235B-A22B (hidden 4096, top 8), a 16-bit checkpoint ModelOpt quantizes per tensor:
    # 4096 x 1 B + 64 B = 4,160 B
    ("qwen3-235b-a22b", "fp8", 4096 + 8 * 8),
])
def test_exchange_bytes_by_hand(model, prec, per_token):
    # DEP8, 32 tokens on each of the 8 ranks: the all-gather's output holds all 8 x 32 tokens;
    # the reduce-scatter's input is 8 x 32 x hidden 16-bit outputs
    m = get_model(model)
    lay = ServeLayout(tp=8, ep=8, attention_dp=True)
    ag, rs = exchange_bytes(m, precision(prec), lay, 32, _adp())
    assert float(ag) == 8 * 32 * per_token
    assert float(rs) == 8 * 32 * m.hidden * 2
    if model == "deepseek-v3" and prec == "fp8":
        assert float(ag) == 3_686_400 and float(rs) == 3_670_016


def test_exchange_is_the_engines_data():
    # the profile field is what prices it: TensorRT-LLM 1.0 reads the form above; 0.17's
    # TensorRT path has none; SGLang's exchange was not read, so it is refused, not borrowed
    a = _adp("trtllm-1.0")
    assert (a["exchange"], a["route_bytes_per_expert"], a["output_bytes"]) == (
        "allgather_reducescatter", 8, 2)
    assert _adp("trtllm-1.0-bench") == a
    for eng, needle in [("trtllm-0.17", "has no attention data parallelism"),
                        ("vllm-v1", "has no attention data parallelism"),
                        ("sglang", "was not read")]:
        with pytest.raises(BadInput, match=needle):
            get_serving_engine(eng).adp_exchange()
    assert _adp("sglang")["supported"] is True


def test_search_offers_attention_dp_where_the_engine_runs_it():
    m = get_model("qwen3-235b-a22b")
    on = layouts(m, 8, 8, {}, exact=True, adp_ok=True)
    off = layouts(m, 8, 8, {}, exact=True, adp_ok=False)
    assert ServeLayout(8, 1, 8, 1, attention_dp=True) in on
    assert ServeLayout(4, 1, 4, 2, attention_dp=True) in on
    assert not any(x.attention_dp for x in off)
    assert set(off) <= set(on) and len(on) > len(off)
    # never at tp 1 (nothing to split), never for a dense model, and adp=0 turns it off
    assert not any(x.attention_dp and x.tp == 1 for x in on)
    assert not any(x.attention_dp for x in layouts(get_model("llama-3-8b"), 8, 8, {},
                                                    exact=True, adp_ok=True))
    assert not any(x.attention_dp for x in layouts(m, 8, 8, {"adp": 0}, exact=True,
                                                    adp_ok=True))


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


@pytest.mark.parametrize("table, ok", [
    ({"supported": True, "exchange": "allgather_reducescatter", "route_bytes_per_expert": 8,
      "output_bytes": 2, "dispatch_16bit": ["fp8_block"]}, True),
    ({"supported": True, "exchange": "unread"}, True),
    ({"supported": False, "exchange": "unread"}, True),
    # an exchange the iteration model does not price, a read form missing its bytes, a bad kind
    ({"supported": True, "exchange": "alltoall"}, False),
    ({"supported": True, "exchange": "allgather_reducescatter"}, False),
    ({"supported": True, "exchange": "allgather_reducescatter", "route_bytes_per_expert": 8,
      "output_bytes": 2, "dispatch_16bit": ["int4"]}, False),
    ({"exchange": "unread"}, False),
])
def test_profile_field_is_checked(table, ok):
    from scalemodel.specs.frameworks import SERVING_FIELDS

    check, _ = SERVING_FIELDS["attention_dp"]
    assert check(table) is ok


# The fused MoE op on the gathered rows (fused_moe_cutlass.py at commit 000a01de,
# CutlassFusedMoE.forward_chunk lines 255-275: allgather of [x, x_sf, ids, weights], then
# torch.ops.trtllm.fused_moe(x, ...) with x of sum(all_rank_num_tokens) rows, its output
# reduce-scattered by forward at line 330); the finalize kernel (finalizeMoeRoutingKernel,
# cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu) runs one block per original row
# (blockIdx.x = original_row, gridDim.x = num_rows) and writes each row's h outputs.
def test_gathered_permute_bytes_by_hand():
    from scalemodel.analytic.serving.iteration import gathered_permute_bytes

    m = get_model("qwen3-235b-a22b")  # hidden 4096, top 8
    lay = ServeLayout(tp=8, ep=8, attention_dp=True)
    # 32 tokens on each of 8 ranks, FP8 activations (1 B): 256 gathered tokens, each with
    # 8 / 8 = 1 copy to this rank's experts on average: expand reads and writes 1 row, finalize
    # reads 1 and writes 1: 4 x 256 x 4096 = 4,194,304 B (a rank alone: (3 x 8 + 1) x 32 x 4096
    # = 3,276,800 B)
    assert float(gathered_permute_bytes(m, precision("fp8"), lay, 32)) == 4 * 256 * 4096
    assert 4 * 256 * 4096 == 4_194_304
    # DEP4: 8 / 4 = 2 copies a gathered token: (3 x 2 + 1) x 4 x 32 x 4096 = 3,670,016 B
    lay4 = ServeLayout(tp=4, ep=4, attention_dp=True)
    assert float(gathered_permute_bytes(m, precision("fp8"), lay4, 32)) == 3_670_016


def test_gathered_permute_is_the_lockstep_shared_part():
    # the all-gather form sizes the permutation by the ranks' tokens together: it leaves the
    # rank's own part (moe - moe_shared: attention, router, shared experts) and joins
    # moe_shared. DeepEP's form (SGLang) dispatches each rank's own tokens, so its rank keeps
    # the (3 k + 1) T h of its own copies in the own part. The own parts are otherwise the same
    # GEMMs, so their difference is that term alone, at the GEMM model's HBM rate
    # (gpus.toml h200 HBM x constants gemm.hbm_efficiency): (3 x 8 + 1) x T x 4096 x 1 B
    from scalemodel.analytic.step.config import constants

    m, g = get_model("qwen3-235b-a22b"), get_gpu("h200")
    lay = ServeLayout(tp=8, ep=8, attention_dp=True)

    def own(engine):
        it = build(m, g, lay, precision("fp8"), "fp8", max_tokens=2048, max_seqs=256,
                   attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, 8),
                   adp_exchange=_adp(engine))
        return it.tables.moe - it.tables.moe_shared

    hbm = g.hbm_bytes_per_s * float(constants()["gemm"]["hbm_efficiency"])
    d = own("sglang-0.4.6-deepep") - own("trtllm-1.0")
    for T in (1, 64, 512):
        assert d[T] == pytest.approx(25 * T * 4096 / hbm, rel=1e-9)
