"""SGLang's two-batch overlap (TBO) of a prefill iteration under attention DP with DeepEP,
worked by hand from the engine's source.

Source: SGLang 0.4.7 as released on PyPI (the first release with TBO; the LMSYS post of
2025-05-05 ran pre-release main with --enable-two-batch-overlap): operations_strategy.py
``_compute_moe_deepseek_blog_prefill`` (lines 80-106: yields after dispatch_a and after
combine_a, the shared expert before combine_b, tbo_delta_stages 0, DeepGEMM on
multi_processor_count - DeepEPConfig.num_sms SMs), operations.py
``execute_overlapped_operations`` (23-50: A's stage, then B's), two_batch_overlap.py
``_split_array_by_half_sum`` (47-63). DeepEP deep_ep/buffer.py at 04b06f7a: Buffer.num_sms = 20.
H100 SXM: 132 SMs (gpus.toml, NVIDIA H100 datasheet).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import (
    beside_comm,
    split_half_sum,
    tbo_layers_time,
)
from scalemodel.specs.frameworks import SERVING_FIELDS


@pytest.mark.parametrize(("lengths", "cut"), [
    ([1024] * 16, 8),  # 8 x 1024 | 8 x 1024
    ([4096] * 4, 2),
    ([300, 100, 100], 1),  # 300 | 200 (diff 100); 400 | 100 (300) is worse: stop at 1
    ([100, 100, 300], 2),  # 100 | 400 (300), 200 | 300 (100): cut at 2
    ([5000], 0),  # one sequence: micro-batch A empty (the engine still runs TBO)
])
def test_split_at_half_sum(lengths, cut):
    assert split_half_sum(lengths) == cut


def test_compute_beside_a_comm_kernel():
    # a call holding s = 1/4 of the SMs for c = 4 s: 6 s of work ends at max(c, w + s c) = 7 s;
    # 2 s of work (less than (1 - s) c = 3 s) ends at 2 / 0.75 = 2.667 s; nothing running: w
    assert beside_comm(10.0, 6.0, 14.0, 0.25) == pytest.approx(17.0)
    assert beside_comm(10.0, 2.0, 14.0, 0.25) == pytest.approx(10.0 + 2.0 / 0.75)
    assert beside_comm(10.0, 2.0, 9.0, 0.25) == pytest.approx(12.0)


def _tbo_alike(n_layers: int, *stages: float) -> float:
    """tbo_layers_time with micro-batches A and B alike: ``stages`` are one micro-batch's
    a_dg, a_ot, e_dg, e_ot, s_dg, dispatch, combine seconds, then the SM share."""
    *per_batch, sm_share = stages
    return tbo_layers_time(n_layers, *((x, x) for x in per_batch), sm_share)


def test_one_layer_compute_bound_by_hand():
    # per micro-batch: attention 2, experts 3, shared 1, dispatch 1, combine 1 (no SM share)
    # compute stream: A1 [0, 2] -> dispatch A [2, 3]; B1 [2, 4] -> dispatch B [4, 5];
    # A2 [4, 7] (A's dispatch done at 3) -> combine A [7, 8]; B2 [7, 10] -> combine B [10, 11];
    # A3 shared [10, 11], combine A already done; B3 shared [11, 12], waits for 11: done at 12.
    # Run back to back the same work takes 2 (2 + 3 + 1 + 1 + 1) = 16
    t = _tbo_alike(1, 2.0, 0.0, 3.0, 0.0, 1.0, 1.0, 1.0, 0.0)
    assert t == pytest.approx(12.0)


def test_one_layer_comm_bound_by_hand():
    # attention 1, experts 1, no shared, dispatch 4, combine 4: the communication stream runs
    # back to back after A's attention: dispatch A [1, 5], B [5, 9], combine A [9, 13], B [13,
    # 17]; the layer ends with B's combine at 17 = 1 + 4 x 4
    t = _tbo_alike(1, 1.0, 0.0, 1.0, 0.0, 0.0, 4.0, 4.0, 0.0)
    assert t == pytest.approx(17.0)


def test_two_layers_chain_stage_three_into_next_stage_one():
    # the compute-bound layer above twice: layer 2's A stage starts with A's shared expert
    # (layer 1) at 10 -> 11, then A's attention 11 -> 13, dispatch A [13, 14]; B: shared
    # 13 -> 14 (combine B done at 11), attention 14 -> 16, dispatch B [16, 17]; A2 16 -> 19,
    # combine A [19, 20]; B2 19 -> 22, combine B [22, 23]; A3 22 -> 23; B3 23 -> 24, waits 23:
    # 24 = 2 x 12
    t = _tbo_alike(2, 2.0, 0.0, 3.0, 0.0, 1.0, 1.0, 1.0, 0.0)
    assert t == pytest.approx(24.0)


def test_sm_share_slows_only_the_kernels_beside_a_call():
    # 2 s of attention kernels that share the SMs: A1 has no call beside it (2 s); B1 runs
    # beside A's dispatch (1 s, holding 1/4 of the SMs), so its 2 s end at 2 + 0.25 x 1 = 2.25 s
    # after its start: B1 [2, 4.25], dispatch B [4.25, 5.25]; A2 (DeepGEMM, own SMs) [4.25,
    # 7.25] -> combine A [7.25, 8.25]; B2 [7.25, 10.25] -> combine B [10.25, 11.25]; A3
    # [10.25, 11.25]; B3 [11.25, 12.25]
    t = _tbo_alike(1, 0.0, 2.0, 3.0, 0.0, 1.0, 1.0, 1.0, 0.25)
    assert t == pytest.approx(12.25)


def test_profile_reads_the_engine_and_deepep_defaults():
    eng = get_serving_engine("sglang-0.4.6-deepep")
    # --enable-two-batch-overlap on the prefill launch; DeepEP's Buffer.num_sms = 20 (no
    # --deepep-config existed before sglang PR 6257 of 2025-05-13)
    assert eng.two_batch_overlap == {"prefill": "sglang_prefill", "comm_sms": 20}
    assert eng.sources["two_batch_overlap"] == "sglang-047-two-batch-overlap"


def test_profile_field_rejects_unread_modes():
    ok, _ = SERVING_FIELDS["two_batch_overlap"]
    assert ok({"prefill": "sglang_prefill", "comm_sms": 20})
    assert ok({"prefill": "off", "comm_sms": 0})
    assert not ok({"prefill": "decode", "comm_sms": 20})
    assert not ok({"prefill": "sglang_prefill"})
    assert not ok({"prefill": "sglang_prefill", "comm_sms": -2})


def test_deepgemm_parts_take_the_sms_deepep_leaves():
    # the overlapped layers' DeepGEMM kernels run on 132 - 20 = 112 of the H100's SMs: a
    # compute-bound expert GEMM at 8,192 tokens a micro-batch takes 132 / 112 = 1.1786 x its
    # compute side; with comm_sms 0 the parts add up to the layer's tables without overlap
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.specs import get_gpu, get_model

    m, g = get_model("deepseek-v3"), get_gpu("h100-sxm")
    eng = get_serving_engine("sglang-0.4.6-deepep")
    lay = ServeLayout(32, 1, 32, 1, attention_dp=True)

    def parts(sms: int):
        return build(m, g, lay, precision("fp8"), "bf16", max_tokens=8192, max_seqs=8,
                     attention_kind="flash", overhead_s=0.0, cluster=make_cluster(g, 32),
                     adp_exchange=eng.adp_exchange(),
                     tbo={"prefill": "sglang_prefill", "comm_sms": sms})

    it0, it20 = parts(0), parts(20)
    i = 8192
    p0, p20, t0 = it0.tbo, it20.tbo, it0.tables
    assert p20.sm_share == pytest.approx(20 / 132)
    assert p20.e_dg[i] == pytest.approx(p0.e_dg[i] * 132 / 112, rel=1e-9)
    assert p20.a_ot[i] == p0.a_ot[i]
    parts = p0.a_dg[i] + p0.a_ot[i] + p0.e_dg[i] + p0.e_ot[i] + p0.s_dg[i]
    assert parts == pytest.approx(t0.moe[i] - (p0.dispatch[i] + p0.combine[i]) + t0.nongemm[i],
                                  rel=1e-6)
    assert np.all(p0.dispatch[1:] > 0) and np.all(p0.combine[1:] > p0.dispatch[1:])
