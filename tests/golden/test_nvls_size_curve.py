"""NVLS below its plateau, worked by hand from the measured nccl-tests log, and what it does to
the TP all-reduce of a decode iteration.

Source: aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/aws-batch/README.md
(commit 6752eb10), the all_reduce_perf log of one p5.48xlarge (8x H100 SXM on NVSwitch; the job
definition runs mpirun -np 8 -N 8, one node). Out-of-place times: 8,388,608 B in 84.29 us,
16,777,216 B in 124.0 us, 134,217,728 B in 592.8 us; peak busbw 483 GB/s at 16 GB, which only
NVLS reaches on 8 H100 (a ring carries at most ~370, validation/nccl_tests.csv h100-ring-8).

The plateau model alone (NCCL's NVLS latency L = 25 us, tuning.cc hwLat NVLink NVLS Simple, plus
S / 275 GB/s, 0.61 of the 450 GB/s line rate) gives 25 + 12.86e6 / 274.5e9 = 71.9 us at
12.86 MB; the log says ~107 us.

Which kernel TensorRT-LLM runs at these sizes: AllreducePlugin::selectImplementation
(cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp, stored version at commit 005b299b)
takes the custom one-shot kernel only below getMaxRequiredWorkspaceSize (8 MB for more than 2
ranks, customAllReduceUtils.h) and, at 5-8 ranks, only below 500 kB; everything larger is
ncclAllReduce. A Llama-3.1-70B decode batch of 785 tokens all-reduces 785 x 8192 x 2 B =
12,861,440 B, twice per layer: NCCL, hence NVLS on one HGX H100.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scalemodel.analytic.collectives import price_best
from scalemodel.analytic.planner import make_cluster
from scalemodel.specs import get_gpu

S_785 = 785 * 8192 * 2  # 12,861,440 B


def _nvls_8(nbytes: float) -> float:
    fab = make_cluster(get_gpu("h100-sxm"), 8).fabric
    r = price_best("all-reduce", np.array([float(nbytes)]), np.array([8.0]), np.array([8.0]),
                   fabric=fab)
    assert r.algorithm[0] == "in-switch"
    return float(np.asarray(r.time_s)[0])


@pytest.mark.parametrize("nbytes, measured_us", [
    (16_777_216, 124.0),
    (134_217_728, 592.8),
])
def test_eight_h100_reproduce_the_measured_times(nbytes, measured_us):
    assert _nvls_8(nbytes) * 1e6 == pytest.approx(measured_us, rel=0.01)


def test_a_decode_batch_between_the_measured_sizes():
    # log-log between the two measured sizes around it
    x = math.log2(S_785 / 8_388_608)  # 0.6165
    t_us = 84.29 * (124.0 / 84.29) ** x  # 106.9 us
    assert t_us == pytest.approx(106.9, abs=0.1)
    assert _nvls_8(S_785) * 1e6 == pytest.approx(t_us, rel=0.01)
    # the plateau model alone would have said 71.9 us
    assert pytest.approx(71.9, abs=0.1) == 25.0 + S_785 / (0.61 * 450e9) * 1e6


def test_the_plateau_is_unchanged():
    # 4 GB: 15,791 us measured (busbw 476 GB/s; nccl-tests#212's ~480)
    assert _nvls_8(4_294_967_296) * 1e6 == pytest.approx(15791.0, rel=0.01)
    # 16 GB, beyond the curve: latency + S / plateau
    assert _nvls_8(17_179_869_184) == pytest.approx(25e-6 + 17_179_869_184 / (0.61 * 450e9),
                                                    rel=1e-6)


def test_the_decode_iterations_tp_all_reduce():
    """Two all-reduces of B x h x 2 bytes per layer, 80 layers: 160 x 106.9 us = 17.1 ms of a
    785-sequence decode iteration of Llama-3.1-70B at TP 8 on H100."""
    from scalemodel.analytic.serving.engine import get_serving_engine, setup
    from scalemodel.analytic.serving.iteration import ServeLayout, precision
    from scalemodel.analytic.serving.service import iteration_model
    from scalemodel.specs import get_model

    root = Path(__file__).resolve().parents[2]
    m, g, lay, p = get_model(str(root / "validation/models/llama-3.1-70b.json")), get_gpu("h100-sxm"), ServeLayout(tp=8), \
        precision("fp8")
    eng = get_serving_engine("trtllm-0.17")
    kv = eng.default_kv_dtype(p)
    it = iteration_model(m, g, lay, p, kv, eng, setup(eng, m, g, lay, p, kv, 128, 4096))
    x = math.log2(S_785 / 8_388_608)
    per_call = 84.29e-6 * (124.0 / 84.29) ** x
    # the iteration tabulates the all-reduce on a geometric grid of token counts and reads
    # linearly in between: within 2% of the hand value
    assert m.n_layers * it.tables.allreduce[785] == pytest.approx(160 * per_call, rel=0.02)


def test_trtllm_gathers_the_logits_to_every_rank():
    """TensorRT-LLM's TensorRT models build the output head with gather_output=True
    (tensorrt_llm/models/llama/model.py, ColumnLinear(..., gather_output=True)), so every TP rank
    receives the whole logits row of every sampling sequence and samples it. Beyond a head that
    keeps vocab / tp columns per rank, a 785-sequence iteration of Llama-3.1-70B at TP 8 pays
    (a) the all-gather of 785 x 128,256 x 2 B = 201.3 MB (the gathered size) over 8 ranks and
    (b) sampling's 12 B per logit (serving.toml [sampling]) over the 7/8 of the row it now also
    holds: 785 x 128,256 x 7/8 x 12 B = 1.057 GB at 0.8 of 3.35 TB/s = 0.394 ms."""
    from scalemodel.analytic.serving.engine import get_serving_engine, setup
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.analytic.step.comm import collective_time

    root = Path(__file__).resolve().parents[2]
    from scalemodel.specs import get_model

    m, g, lay, p = get_model(str(root / "validation/models/llama-3.1-70b.json")), \
        get_gpu("h100-sxm"), ServeLayout(tp=8), precision("fp8")
    eng = get_serving_engine("trtllm-0.17")
    assert eng.logits_gather == "all_gather"
    kv = eng.default_kv_dtype(p)
    es = setup(eng, m, g, lay, p, kv, 128, 4096)
    cl = make_cluster(g, 8)
    kw = dict(max_tokens=max(es.token_budget, es.max_batch), max_seqs=es.max_batch,
              attention_kind=eng.attention_kind(g), overhead_s=0.0, cluster=cl)
    with_gather = build(m, g, lay, p, kv, logits_gather="all_gather", **kw).tables.head[785]
    without = build(m, g, lay, p, kv, logits_gather="none", **kw).tables.head[785]
    assert m.vocab == 128256
    gathered_bytes = 785 * 128256 * 2
    assert gathered_bytes == pytest.approx(201.3e6, rel=1e-3)
    sampling_s = 785 * 128256 * 7 / 8 * 12 / (0.8 * 3.35e12)
    assert sampling_s == pytest.approx(0.394e-3, rel=0.01)
    ag_s = float(collective_time("all_gather", float(gathered_bytes), 8.0, 8.0, cl))
    assert with_gather - without == pytest.approx(ag_s + sampling_s, rel=0.02)
