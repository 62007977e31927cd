"""Wide EP in the serving iteration model: which DeepEP mode an iteration pays (SGLang's
DeepEPMode.resolve under --deepep-mode auto: normal kernels when the batch holds prefill
tokens, low-latency kernels otherwise; source sglang-deepep-dispatcher), and the profile
checks of the deepep exchange."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import (
    ServeLayout,
    build,
    deepep_exchange_time,
    precision,
)
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model
from scalemodel.specs.frameworks import _adp_ok


def _it(mode: str = "auto"):
    m, g = get_model("deepseek-v3"), get_gpu("h100-sxm")
    ex = dict(get_serving_engine("sglang-0.4.6-deepep").adp_exchange(), deepep_mode=mode)
    lay = ServeLayout(16, 1, 16, 1, attention_dp=True)
    cl = make_cluster(g, 16)
    it = build(m, g, lay, precision("fp8"), "bf16", max_tokens=256, max_seqs=256,
               attention_kind="flash", overhead_s=0.0, cluster=cl, adp_exchange=ex)
    return it, m, g, lay, ex, cl


def test_auto_mode_decode_only_iteration_pays_low_latency_exchange():
    it, m, g, lay, ex, cl = _it()
    T = 128
    norm, ll = deepep_exchange_time(m, lay, np.array([float(T)]), ex, cl, g)
    mixed = it.dense_part(T, T)
    decode = it.dense_part(T, T, decode_only=True)
    # the two differ by the MoE layers' exchange only: n_moe x (low-latency - normal) at T
    assert decode - mixed == pytest.approx(it.n_moe * float(ll[0] - norm[0]), rel=1e-3)
    # the low-latency kernels send top_k rows a token where the normal ones send one a node:
    # at 2 nodes of 8 the low-latency call is the dearer one at this batch
    assert ll[0] > norm[0]
    # an iteration with a prefill chunk pays the normal one
    t_mixed = it.time(T, T, 0.0, np.array([16]), np.array([0]))
    t_dec = it.time(T, T, 0.0, np.zeros(0), np.zeros(0))
    assert t_dec - t_mixed == pytest.approx(decode - mixed - it.prefill_attention(
        np.array([16]), np.array([0])), rel=1e-3)


def test_pinned_modes_take_one_table():
    it_n = _it("normal")[0]
    it_l = _it("low_latency")[0]
    # one kernel whatever the batch: the decode-only table is the mixed one
    assert np.array_equal(it_n.tables.moe_ll, it_n.tables.moe)
    assert np.array_equal(it_l.tables.moe_ll, it_l.tables.moe)
    assert it_l.dense_part(128, 128) > it_n.dense_part(128, 128)


def test_deepep_exchange_profile_checks():
    ok = {"supported": True, "exchange": "deepep", "dispatcher": "deepep",
          "deepep_mode": "auto", "dispatch_bytes_per_element": 1.03125,
          "combine_bytes_per_element": 2, "ll_row_extra_bytes": 16}
    assert _adp_ok(ok)
    assert not _adp_ok({**ok, "deepep_mode": "fast"})
    assert not _adp_ok({**ok, "dispatcher": "nccl"})
    assert not _adp_ok({k: v for k, v in ok.items() if k != "ll_row_extra_bytes"})


def test_bad_mode_at_build_is_one_line():
    with pytest.raises(BadInput, match="deepep_mode"):
        _it("fast")
