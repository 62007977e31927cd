"""Wide expert parallelism in the serving iteration model: one MoE layer's DeepEP dispatch and
combine, derived by hand from DeepEP's own published table.

Source: DeepEP V1 documentation, docs/legacy.md (deepseek-ai/DeepEP), "Low-latency kernels with
pure RDMA": H800 with one CX7 400 Gb/s NIC per GPU, 128 tokens per batch, hidden 7168, top-8,
FP8 dispatch and BF16 combine; and its "Normal kernels" table (EP32: 58 GB/s dispatch over
RDMA; intranode EP8: 153 GB/s over NVLink). The byte count is that of DeepEP
tests/test_low_latency.py at 567632dd: hidden + hidden / 128 x 4 + 16 bytes per dispatched
(token, expert) selection and hidden x 2 per combined one.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.serving.engine import get_serving_engine
from scalemodel.analytic.serving.iteration import ServeLayout, deepep_exchange_time
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model

H = 7168
FP8_ROW = H + H / 128 * 4 + 16  # 7408 B
BF16_ROW = 2 * H  # 14336 B
ROWS = 128 * 8  # 128 tokens x top-8 selections per rank
# DeepEP's table: EP -> (dispatch GB/s, dispatch us, combine GB/s, combine us)
TABLE = {8: (98, 77, 127, 114), 16: (63, 118, 74, 195), 32: (48, 155, 53, 273),
         64: (43, 173, 46, 314), 128: (39, 192, 39, 369), 256: (39, 194, 40, 360)}


def _exchange(gpu: str, ep: int, tokens: float):
    m = get_model("deepseek-v3")
    g = get_gpu(gpu)
    ex = get_serving_engine("sglang-0.4.6-deepep").adp_exchange()
    lay = ServeLayout(ep, 1, ep, 1, attention_dp=True)
    n, ll = deepep_exchange_time(m, lay, np.array([tokens]), ex, make_cluster(g, ep), g)
    return float(n[0]), float(ll[0])


@pytest.mark.parametrize("ep", sorted(TABLE))
def test_low_latency_layer_from_deepep_table(ep):
    d_gbs, d_us, c_gbs, c_us = TABLE[ep]
    # by hand: 1024 rows x 7408 B at the tabled dispatch rate + 1024 rows x 14336 B at the
    # tabled combine rate (the H800's NIC is the 50 GB/s the table was measured on); e.g. EP8:
    # 7,585,792 B / 98 GB/s = 77.4 us + 14,680,064 B / 127 GB/s = 115.6 us = 193.0 us
    hand = ROWS * FP8_ROW / (d_gbs * 1e9) + ROWS * BF16_ROW / (c_gbs * 1e9)
    _, ll = _exchange("h800", ep, 128.0)
    assert ll == pytest.approx(hand, rel=1e-9)
    # and the table's own latencies agree with its bandwidths to within its rounding (< 2.5%)
    assert ll == pytest.approx((d_us + c_us) * 1e-6, rel=0.025)


def test_normal_mode_layer_by_hand_ep32_h800():
    # DeepSeek-V3 over EP32 = 4 nodes of 8: node-limited routing (4 of 8 groups, two whole
    # groups a node) reaches 4 (1 - C(6,4) / C(8,4)) = 4 x 55/70 = 3.1429 nodes a token; the
    # network stage sends 4096 tokens x 7392 B (FP8 + a 4-byte scale per 128) x 3.1429 rows =
    # 95.16 MB at DeepEP's EP32 dispatch rate, 58 GB/s = 1.6407 ms; the NVLink stage receives
    # 4096 x 7392 B x 7.2668 GPUs reached (32 (1 - prod_{i<8} (248 - i) / (256 - i)): each GPU
    # holds 8 of the 256 experts)
    # = 220.0 MB at 153 GB/s = 1.4381 ms; the stages pipeline, so dispatch = 1.6407 ms.
    # Combine: 4096 x 14336 B x 3.1429 = 184.55 MB at 57 GB/s = 3.2378 ms (NVLink 426.7 MB at
    # 158 GB/s = 2.7007 ms). One layer: 4.8785 ms.
    nodes = 4 * 55 / 70
    miss = np.prod([(248 - i) / (256 - i) for i in range(8)])
    gpus = 32 * (1 - miss)
    row_d, row_c = H * (1 + 4 / 128), 2 * H
    disp = max(4096 * row_d * nodes / 58e9, 4096 * row_d * gpus / 153e9)
    comb = max(4096 * row_c * nodes / 57e9, 4096 * row_c * gpus / 158e9)
    normal, _ = _exchange("h800", 32, 4096.0)
    assert normal == pytest.approx(disp + comb, rel=1e-6)
    assert normal == pytest.approx(4.8785e-3, rel=1e-3)


def test_unknown_dispatcher_is_bad_input():
    m = get_model("deepseek-v3")
    g = get_gpu("h800")
    ex = dict(get_serving_engine("sglang-0.4.6-deepep").adp_exchange(), dispatcher="nope")
    with pytest.raises(BadInput, match="not priced"):
        deepep_exchange_time(m, ServeLayout(16, 1, 16, 1, attention_dp=True), np.array([1.0]),
                             ex, make_cluster(g, 16), g)
