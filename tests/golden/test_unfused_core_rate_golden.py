"""The unfused attention core's score passes at the rate Korthikanti et al. 2022 measured.

Source: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198), Table 3 (the 22B GPT: h 6144, 64 heads, 48 layers, TP 8, micro-batch 4,
sequence 2048, vocabulary 51200) and Table 4 (one transformer layer of it on Selene's A100 80GB:
no recompute 7.7 ms forward / 11.9 ms backward; selective recompute 7.7 / 13.2 ms; with sequence
parallelism 7.2 / 11.8 and 7.2 / 13.1 ms). Selective recompute re-runs the core attention (Q K^T,
scale-mask-softmax, softmax dropout, attention over V; their Sec. 5) and nothing else in the
backward, so 13.2 - 11.9 = 13.1 - 11.8 = 1.3 ms is that core's forward, timed in a layer.
The core is Megatron-LM's unfused one, the code `megatron-lm-2021` prices (baddbmm, the fused
scale-mask-softmax kernel, torch dropout, bmm).
"""

import numpy as np
import pytest

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.planner import layout_columns, make_cluster, make_job
from scalemodel.analytic.step.attention import attention_terms
from scalemodel.analytic.step.candidates import candidates
from scalemodel.analytic.step.comm import layer_comm, layer_time
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.step.layers import dense_layer
from scalemodel.analytic.validate import row_model
from scalemodel.specs.frameworks import job_settings

A100_HBM = 2.039e12  # A100 SXM 80GB datasheet, bytes/s (gpus.toml)
CORE_FWD_S = 1.3e-3  # Table 4: 13.2 - 11.9 ms (and 13.1 - 11.8 ms with SP)
LAYER_FWD_S = 7.7e-3  # Table 4: baseline, no recompute, no SP


def _layer():
    m = row_model({"layers": "48", "hidden": "6144", "heads": "64", "kv_heads": "64",
                   "ffn": "24576", "vocab": "51200", "positions": "learned", "gated": "0",
                   "tied": "1", "seq_len": "2048", "id": "gpt-22b", "dropout": "1"})
    _, s = job_settings("megatron-lm-2021", "a100-sxm-80gb")
    job = make_job(m, seq_len=2048, global_batch_seqs=4, **s)
    cl = make_cluster("a100-sxm-80gb", 8)
    c = candidates(job, cl, layout_columns(job, cl, [TrainLayout(tp=8, micro_batch=4)]))
    a = attention_terms(c)
    return c, a, layer_time(c, dense_layer(c, a), layer_comm(c, a), False)


def test_rate_is_table_4s_core_less_its_two_batched_gemms():
    # Derivation. Per rank: 4 sequences x 64 / 8 heads = 32 products, each 2048 x 2048 scores,
    # head dim 6144 / 64 = 96: 32 x 2048^2 = 1.342e8 scores.
    scores = 32 * 2048**2
    # Q K^T (2048 x 96 @ 96 x 2048) and A V (2048 x 2048 @ 2048 x 96) are memory-bound: each moves
    # 2 bytes x (2048 x 96 x 2 + 2048^2) x 32 = 293.6 MB, 0.180 ms at the GEMM model's 0.8 of
    # 2.039 TB/s, against 2 x 2048^2 x 96 x 32 = 2.58e10 FLOPs, under 0.1 ms at 312 TFLOP/s x
    # 0.87. Their sum leaves the score passes 1.3 - 0.36 = 0.94 ms.
    bmm = 2 * (2 * (2048 * 96 * 2 + 2048**2) * 32) / (0.8 * A100_HBM)
    assert bmm == pytest.approx(0.360e-3, rel=0.01)
    # the passes: fused scale-mask-softmax 4 bytes a score, dropout 5 (planner.toml [nongemm])
    per_score = 4 + 5
    rate = per_score * scores / (CORE_FWD_S - bmm)  # 1.285 TB/s
    assert rate / A100_HBM == pytest.approx(0.630, abs=0.002)
    ng = constants()["nongemm"]
    assert ng["unfused_fwd_bytes_per_score"] + ng["unfused_dropout_fwd_bytes"] == per_score
    assert ng["unfused_score_hbm_efficiency"] == pytest.approx(rate / A100_HBM, abs=0.005)
    # Table 4 rounds to 0.1 ms: the difference lies in 1.2-1.4 ms, the fraction in 0.60-0.67
    lo = per_score * scores / (1.4e-3 - bmm) / A100_HBM
    hi = per_score * scores / (1.2e-3 - bmm) / A100_HBM
    assert lo < ng["unfused_score_hbm_efficiency"] < hi


def test_the_step_model_prices_the_measured_core():
    c, a, _ = _layer()
    core_f = float(np.asarray(a.core_f).ravel()[0])
    assert core_f == pytest.approx(CORE_FWD_S, rel=0.02)


def test_the_whole_layer_forward_against_table_4():
    # An independent check, not the figure the rate comes from: the whole layer forward (the
    # projections, the MLP, the norms, residuals and dropouts, the two TP all-reduces and the
    # core). The step model gives 7.49 ms against the measured 7.7 (-2.7%; at the assumed 0.8
    # for the score passes it gave 7.29, -5.3%). The backward is not compared: the 2022 code
    # overlaps the backward's TP all-reduce with the weight-gradient GEMM (their Sec. 6.2), which
    # megatron-lm-2021 (2021's code) does not.
    _, _, lt = _layer()
    fwd = float(np.asarray(lt.fwd).ravel()[0])
    assert fwd == pytest.approx(LAYER_FWD_S, rel=0.04)
