"""DeepSeek-V3's training layout fits without full recompute (issue 16).

Sources: the DeepSeek-V3 report (arXiv 2412.19437) Sec. 3.2.1 / Table 2 (DualPipe: 2x
parameters, PP + 1 micro-batches of activations), Sec. 3.2.3 (recompute of every RMSNorm and
the MLA up-projections), Sec. 3.3.3 (fp8 storage, already profile data); DeepSeek's DualPipe
repository (dualpipe/dualpipe.py, DualPipe.step) for the schedule's order of work; DeepSeek's
published training trace (deepseek-ai/profile-data train.json, source
deepseek-profile-data-train) for where the routing weight is multiplied: inside the routed
experts' SwiGLU (swiglu_forward_with_weight_..., swiglu_weight_backward_with_weight_...), so
no expert output is kept for it, only the fp32 weight.

Derivation by hand (config.json: h 7168, 128 heads, q_lora 1536, kv_lora 512, rope 64, nope
and v head dims 128, routed width 2048, one shared expert of 2048, 256 experts, top-8), bytes
per token of one MoE layer under the deepseek-hai-llm profile, fp8, flash attention, TP1:

  TP-replicated: two RMSNorms (2 h + 4 B rstd each) 28,680; the norms' outputs as kept: two
  fp8 copies for the q / kv down-projections 2 h, the router's 16-bit copy 2 h, the shared
  expert's fp8 copy h: 5 h = 35,840; the latents 2 (1536 + 512 + 64) = 4,224; fp32 router
  probabilities 4 x 256 = 1,024. Sum 69,768.
  TP-split: q 2 x 128 x 192 = 49,152; the attention output once in E5M6, 1.5 x 16,384 =
  24,576; per routed copy the fp8 dispatched input 7,168 + the fp8 SwiGLU input 2 x 2048 +
  the fp32 routing weight 4 = 11,268, x 8 = 90,144; the shared expert 5 B x 2048 = 10,240.
  Sum 174,112.
  K and V: 2 (128 x 192 + 128 x 128) = 81,920; the log-sum-exp 4 x 128 = 512.
  Recompute layernorm + mla_up_proj drops 2 x 2 h = 28,672 and 49,152 + 81,920 = 131,072.
  Stored: 69,768 + 174,112 + 81,920 + 512 - 28,672 - 131,072 = 166,568 B per token;
  at s = 4096, b = 1: 682,262,528 B per layer and micro-batch (before: the expert output kept
  at 2 h per routed copy instead of the 4 B weight, 8 x 14,332 = 114,656 B per token more).
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.memory import layer_act_coeffs, moe_saves
from scalemodel.analytic.planner import evaluate_layout, make_cluster, make_job
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import get_framework, job_settings
from scalemodel.specs.saved_tensors import kernel_saves

FW = "deepseek-hai-llm"
S, H = 4096, 7168
LN, MLA_UP = 5, 6  # layout.RECOMPUTE_MODULES order: core_attn, mlp, moe, moe_act,
#                    shared_experts, layernorm, mla_up_proj


def test_profile_states_the_trace_and_the_report():
    kw = moe_saves(FW, True)
    assert kw["moe_probs_in_act"] is True
    assert kw["moe_probs_source"] == "deepseek-profile-data-train"
    fw = get_framework(FW)
    assert "selective:layernorm+mla_up_proj" in fw.get("recompute_options")
    assert fw.sources["recompute_options"] == "deepseek-2024-v3-report"


def test_moe_layer_bytes_per_token():
    m = get_model("deepseek-v3")
    c = layer_act_coeffs(m, True, kernel_saves("fused", "flash", 1.0, "", **moe_saves(FW, True)))
    assert c.rep == pytest.approx(28680 + 5 * H + 4224 + 1024, abs=1e-9)
    assert c.split == pytest.approx(49152 + 24576 + 8 * (H + 2 * 2048 + 4) + 5 * 2048, abs=1e-9)
    assert c.kv == 81920 and c.lse == 512
    assert c.mods[LN] == (28672.0, 0.0, 0.0)
    assert c.mods[MLA_UP] == (0.0, 49152.0, 81920.0)
    stored = c.rep + c.split + c.kv + c.lse - sum(c.mods[LN]) - sum(c.mods[MLA_UP])
    assert stored == pytest.approx(166568, abs=1e-9)


def _dualpipe_peak_chunks(rank: int, pp: int, chunks: int) -> tuple[int, int]:
    """(chunk-0, chunk-1) micro-batches rank ``rank`` holds at its first peak, replaying
    DualPipe.step (dualpipe.py) steps 1 to 4: forwards add one, backwards free one; a paired
    forward and backward holds the new forward's chunk beside the one being freed. Chunk 0 is
    stage r on the first half of the ranks (stage pp - 1 - r on the second)."""
    half = pp // 2
    hr = min(rank, pp - 1 - rank)
    held = [0, 0]
    peak = (0, 0)

    def f(c):
        nonlocal peak
        held[c] += 1
        if sum(held) > sum(peak):
            peak = (held[0], held[1])

    def b(c):
        held[c] -= 1

    for _ in range((half - hr - 1) * 2):  # step 1: nF0
        f(0)
    for _ in range(hr + 1):  # step 2: nF0F1
        f(0), f(1)
    for _ in range(half - hr - 1):  # step 3: nB1W1F1
        b(1), f(1)
    for _ in range(chunks // 2 - pp + hr + 1):  # step 4: (F0 & B1), then (F1 & B0)
        f(0), b(1), f(1), b(0)
    return peak


def test_dualpipe_holds_pp_plus_one_chunks_on_every_rank():
    # Table 2 of the report: PP + 1; 120 micro-batches per step at the row's batch (15360 / 128)
    for rank in range(16):
        assert sum(_dualpipe_peak_chunks(rank, 16, 120)) == 17
    # rank 0 holds 16 micro-batches of stage 0 and one of stage 15; the middle ranks 9 and 8
    assert _dualpipe_peak_chunks(0, 16, 120) == (16, 1)
    assert _dualpipe_peak_chunks(7, 16, 120) == (9, 8)


def test_step_model_memory_of_the_reported_layout():
    m = get_model("deepseek-v3")
    fw, kern = job_settings(FW, "h800")
    assert kern["schedule"] == "dualpipe"
    job = make_job(m, seq_len=S, global_batch_seqs=15360, precision="fp8", **kern)
    lay = TrainLayout(tp=1, pp=16, dp=128, ep=64, etp=1, zero=1, micro_batch=1,
                      recompute="selective", recompute_modules=("layernorm", "mla_up_proj"))
    v = evaluate_layout(job, make_cluster("h800", 2048), lay).values
    # heaviest rank (first stage of the 1F1B split, 4 layers + embedding): dense parameters
    # 4 x (MLA 187,107,328 with its latent norms + shared expert 44,040,192 + router 1,835,008
    # and its 256-entry bias + norms 2 x 7168) + embedding 129,280 x 7168; routed experts
    # 4 layers x 4 of 256 / 64 x 3 x 7168 x 2048
    mla = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 16384 * 7168 + 2048
    assert mla == 187_107_328
    dense = 4 * (mla + 3 * 7168 * 2048 + 256 * 7168 + 256 + 2 * 7168) + 129_280 * 7168
    assert dense == 1_858_667_520
    assert 4 * 4 * 3 * 7168 * 2048 == 704_643_072
    p = 1_858_667_520 + 704_643_072
    assert float(v.mem_params) == pytest.approx(2 * 2 * p, rel=1e-12)  # two copies, bf16
    assert float(v.mem_grads) == pytest.approx(4 * p, rel=1e-12)  # fp32
    assert float(v.mem_optimizer) == pytest.approx((1_858_667_520 / 128 + 704_643_072 / 2) * 8,
                                                   rel=1e-12)
    a_layer = 166_568 * S
    work = (49152 + 81920) * S  # the up-projections' re-run, the larger module
    acts = (16 * 4 * a_layer + work) * 17 / 16
    assert float(v.mem_activations) == pytest.approx(acts, rel=1e-12)
    total = 4 * p + 4 * p + float(v.mem_optimizer) + acts
    assert float(v.memory_per_gpu_bytes) == pytest.approx(total, rel=1e-12)
    assert total == pytest.approx(70.4055e9, rel=1e-5)
    assert bool(v.fits)  # 78.43 GB usable on an H800 (3 communicators, 5% slack)
