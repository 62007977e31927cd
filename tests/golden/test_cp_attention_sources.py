"""Long-context attention priced from component sources (issue 16):

* cuDNN's and flash-attn 2.7.3's measured B200 rates (NVIDIA cudnn-frontend SDPA benchmark,
  benchmark/sdpa_benchmark_bf16_training at commit f937055, sdpa_benchmark_results_NVIDIA_B200.csv:
  B200, bf16, causal, head dim 128, 128 query / 8 KV heads, batch 1);
* Transformer Engine's backend choice on Blackwell (TE v2.0-main get_attention_backend: fused
  cuDNN attention preferred on compute capability 9.0 and later);
* torch's context_parallel merge and gradient accumulation as eager fp32 ops
  (torch/distributed/tensor/experimental/_attention.py), and torchtitan 9dec370's repeat_kv.
"""

from types import SimpleNamespace

import pytest

from scalemodel.analytic.planner import attention_efficiency
from scalemodel.analytic.step.attention import cp_merge_time, sdpa_kv_width
from scalemodel.specs import get_gpu
from scalemodel.specs.frameworks import get_framework, job_settings

B200_PEAK = 2250e12  # dense bf16, HGX B200 spec table (gpus.toml)
# the benchmark timed each call alone on an unthrottled B200 (a burst rate); a step keeps the
# B200's sustained share, MSMF 1426.4 / MAMF 1751.2 TFLOP/s (Bekman, all 8 GPUs busy)
B200_SUSTAINED = 1426.4 / 1751.2


@pytest.mark.parametrize("length, fwd, bwd", [
    # backend pyt_cudnn (cuDNN 9.10.2), rows of the CSV: fwd_tflops_per_sec, bwd_tflops_per_sec
    (8192, 1211.140, 945.440), (16384, 1358.566, 1074.499), (32768, 1435.072, 1132.387),
    (65536, 1428.973, 1074.456), (131072, 1348.674, 1037.897)])
def test_cudnn_b200_curve_is_the_benchmark_table(length, fwd, bwd):
    g = get_gpu("b200")
    assert g.peak_flop_per_s("bf16") == B200_PEAK
    k = B200_SUSTAINED
    assert attention_efficiency(g, length, kind="flash3") == pytest.approx(fwd / 2250 * k,
                                                                           rel=1e-3)
    assert attention_efficiency(g, length, kind="flash3", backward=True) == pytest.approx(
        bwd / 2250 * k, rel=1e-3)


def test_fa2_b200_curve_is_the_benchmark_table():
    # backend flash_attention (flash-attn 2.7.3): 445.212 forward, 366.011 backward at 131072
    g = get_gpu("b200")
    k = B200_SUSTAINED
    assert attention_efficiency(g, 131072) == pytest.approx(445.212 / 2250 * k, rel=1e-3)
    assert attention_efficiency(g, 131072, backward=True) == pytest.approx(366.011 / 2250 * k,
                                                                           rel=1e-3)


def test_transformer_engine_runs_cudnn_attention_on_blackwell():
    # TE 2.x: 'Disabling FlashAttention to give FusedAttention preference on Hopper+' for compute
    # capability >= (9, 0): B200 (10.0) runs cuDNN, the flash3 class, in every profile built on
    # megatron-core; Ampere keeps FlashAttention-2; NeMo 24.03 (TE 1.4) predates Blackwell
    assert get_framework("megatron-core").attention_for("blackwell")[0] == "flash3"
    for fid in ("megatron-core", "nemo-25.11", "nemo-26.04"):
        assert job_settings(fid, "b200")[1]["attention"] == "flash3"
    assert job_settings("megatron-core", "a100-sxm-80gb")[1]["attention"] == "flash"
    assert job_settings("nemo-24.03", "b200")[1]["attention"] == "flash"
    assert job_settings("torchtitan-2024-12", "b200")[1]["attention"] == "flash"


def _cand(fid: str) -> SimpleNamespace:
    # Llama 3 8B under CP on one rank: 32,768 local tokens, 32 query heads x 128, 8 KV heads
    return SimpleNamespace(job=SimpleNamespace(framework_id=fid), m=SimpleNamespace(kv_lora_rank=0),
                           ms=SimpleNamespace(qk_dim=4096.0, v_dim=4096.0, kv_dim=2 * 1024.0),
                           T=32768.0, tp=1.0, hbm=1e12)


def test_torch_cp_merge_bytes_derived_from_the_eager_ops():
    # forward, per output element of one extra step (fp32 running output, bf16 partial):
    # .to(float32) 2 read + 4 written; out - block_out 4 + 4 + 4; sigmoid(...) * diff 4 + 4;
    # out - product 4 + 4 + 4; per K/V element torch.cat for the next step 2 + 2
    fwd_out = (2 + 4) + (4 + 4 + 4) + (4 + 4) + (4 + 4 + 4)
    fwd_kv = 2 + 2
    # backward: grad_query += bf16 dq: 4 + 2 + 4 per q element; per dk/dv element: the bf16 half
    # added (10 bytes on half the elements), torch.cat rebuilding the fp32 tensor 4 + 4, torch.cat
    # of dk, dv to send 4 + 4, torch.cat of K, V 2 + 2
    bwd_q = 4 + 2 + 4
    bwd_kv = 10 / 2 + (4 + 4) + (4 + 4) + (2 + 2)
    assert (fwd_out, fwd_kv, bwd_q, bwd_kv) == (38, 4, 10, 25)
    mb = get_framework("torchtitan-2024-12").values["cp_merge_bytes"]
    assert mb == {"fwd_out": fwd_out, "fwd_kv": fwd_kv, "bwd_q": bwd_q, "bwd_kv": bwd_kv}
    c = _cand("torchtitan-2024-12")
    kv_w = 4096.0 + 4096.0  # repeat_kv: K and V carry all 32 heads
    assert sdpa_kv_width(c) == kv_w
    m_f, m_b = cp_merge_time(c)
    assert m_f == pytest.approx(32768 * (38 * 4096 + 4 * kv_w) / 1e12)
    assert m_b == pytest.approx(32768 * (10 * 4096 + 25 * kv_w) / 1e12)


def test_default_merge_stays_sixteen_bit():
    # planner.toml [attention] cp_merge_bytes = 6: read the partial, read and write the 16-bit
    # accumulator; output elements forward, dq, dk, dv backward, the model's 8 KV heads
    c = _cand("megatron-core")
    assert sdpa_kv_width(c) == 2048.0
    m_f, m_b = cp_merge_time(c)
    assert m_f == pytest.approx(6 * 32768 * 4096 / 1e12)
    assert m_b == pytest.approx(6 * 32768 * (4096 + 2048) / 1e12)


def test_torch_cp_exchange_bytes_per_step():
    # torchtitan-2024-12, Llama 3 8B, 131,072 tokens over CP4 (32,768 per rank, no TP), one layer:
    # K and V repeated to 32 heads: 2 B x 32,768 x (4,096 + 4,096) = 536,870,912 B per rank.
    # Forward: the all-gather brings the other 3 ranks' K/V; backward the same again; dK, dV in
    # fp32 go to the next rank after each of the 4 calls: 4 x 536,870,912 / 2 x 4 B.
    from scalemodel.analytic.planner import make_cluster, make_job, search
    from scalemodel.specs import get_model

    kv = 2 * 32768 * (4096 + 4096)
    per_layer = 2 * 3 * kv + 4 * (kv // 2 * 4)
    _, s = job_settings("torchtitan-2024-12", "h100-sxm-hbm2e-500w")
    job = make_job(get_model("llama-3-8b"), seq_len=131072, global_batch_seqs=2,
                   precision="fp8", **s)
    lay = {"tp": 1, "pp": 1, "dp": 2, "cp": 4, "ep": 1, "zero": 3, "vpp": 1,
           "micro_batch": 1, "recompute": "full"}
    best = search(job, make_cluster("h100-sxm-hbm2e-500w", 8), lay, top=0).best.values
    assert float(best.cp_bytes) == pytest.approx(32 * per_layer, rel=1e-9)
