"""NCCL's ring below its plateau on one 8x A100 node, worked by hand from the measured nccl-tests
log (collectives.toml [ring_size_curve.nvlink3]).

Source: stas00/ml-engineering network/README.md at commit 48b75ddc (2023-12-15), "Real network
throughput": ``all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50`` on one 8x A100 node. Times:
8 MiB 133.5 us, 16 MiB 276.6 us, 32 MiB 424.0 us, 16 GiB 127,997 us (busbw 234.89 GB/s). A100
has no NVLS, so NCCL's default there is a ring (nccl_tuner picks ring at every size above).

The plateau model: NCCL 2.21.5's ring/Simple latency on one node, baseLat 8.4 us + 2 (n - 1)
NVLink hops x 3.4 us = 8.4 + 14 x 3.4 = 56.0 us (tuning.cc, collectives.toml [nccl_tuner]), plus
W / B with W = 2 (n - 1) / n x S and B = 300 GB/s (NVLink 3 per direction, links.toml) x 0.80
(scale-up efficiency) = 240 GB/s. At 16 MiB: 56.0 + 1.75 x 16,777,216 / 240e9 = 56.0 + 122.3 =
178.3 us against 276.6 measured.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.analytic.collectives import make_fabric, price, price_best, ring_size_share

A100 = make_fabric("nvlink3", None, gpus_per_node=8)
L_SIMPLE = 8.4e-6 + 14 * 3.4e-6  # 56.0 us
B = 300e9 * 0.80


def _ring(nbytes: float, ranks: int = 8, proto: str = "simple", coll: str = "all-reduce",
          fabric=A100) -> float:
    r = price(coll, "ring", np.array([float(nbytes)]), np.array([float(ranks)]),
              np.array([float(ranks)]), fabric=fabric, proto=proto)
    return float(np.asarray(r.time_s)[0])


def test_the_plateau_model_alone_at_16_mib():
    assert pytest.approx(178.3e-6, rel=1e-3) == L_SIMPLE + 1.75 * 16_777_216 / B


@pytest.mark.parametrize("nbytes, measured_us", [
    (8_388_608, 133.5), (16_777_216, 276.6), (33_554_432, 424.0), (134_217_728, 1327.6),
    (1_073_741_824, 8203.9), (17_179_869_184, 127997.0),
])
def test_ring_simple_reproduces_the_measured_times(nbytes, measured_us):
    assert _ring(nbytes) * 1e6 == pytest.approx(measured_us, rel=1e-3)


def test_the_share_at_16_mib_by_hand():
    # q = W / ((t - L) B) = 1.75 x 16,777,216 / ((276.6 - 56.0) us x 240 GB/s) = 0.5546
    q = 1.75 * 16_777_216 / ((276.6e-6 - L_SIMPLE) * B)
    assert q == pytest.approx(0.5546, abs=1e-4)
    assert float(ring_size_share("all-reduce", 16_777_216.0, 8.0, 8.0, A100)) == pytest.approx(q)


def test_a_decode_batch_between_the_measured_sizes():
    """785 tokens x 8192 x 2 B = 12,861,440 B (a TP 8 decode batch of a 70B model): log-log
    between 8 and 16 MiB, t = 133.5 x (276.6 / 133.5) ** log2(S / 8 MiB) = 209.2 us; NCCL's pick
    there is ring/LL128 (latency 14 + 14 x 1.9 = 40.6 us, rate x 0.92), which the engine prices
    at the same share: 40.6 + 1.75 S / (0.92 x q x 240 GB/s)."""
    S = 785 * 8192 * 2
    x = math.log2(S / 8_388_608)
    t = 133.5e-6 * (276.6 / 133.5) ** x
    assert t == pytest.approx(209.2e-6, abs=0.1e-6)
    assert _ring(S) == pytest.approx(t, rel=1e-3)
    q = 1.75 * S / ((t - L_SIMPLE) * B)
    r = price_best("all-reduce", np.array([float(S)]), np.array([8.0]), np.array([8.0]), fabric=A100)
    assert (r.algorithm[0], r.protocol[0]) == ("ring", "ll128")
    assert float(r.time_s[0]) == pytest.approx(40.6e-6 + 1.75 * S / (0.92 * q * B), rel=1e-3)
    # before the curve: 40.6 + 1.75 S / (0.92 x 240 GB/s) = 142.5 us
    assert pytest.approx(142.5e-6, abs=0.1e-6) == 40.6e-6 + 1.75 * S / (0.92 * B)


def test_above_the_curve_the_measured_plateau_holds():
    # 32 GiB: the 16 GiB share, q16 = 1.75 x 16 GiB / ((127,997 - 56.0) us x 240 GB/s) = 0.9791
    q16 = 1.75 * 17_179_869_184 / ((127997e-6 - L_SIMPLE) * B)
    assert q16 == pytest.approx(0.9791, abs=1e-4)
    S = 2 ** 35
    assert _ring(S) == pytest.approx(L_SIMPLE + 1.75 * S / (q16 * B), rel=1e-6)


def test_below_the_curve_and_elsewhere_nothing_changes():
    # 4 MiB: below the curve (1-4 MiB read a flat ~101 us, the host launching 8 GPUs)
    assert _ring(4_194_304) == pytest.approx(L_SIMPLE + 1.75 * 4_194_304 / B, rel=1e-6)
    # 4 ranks, reduce-scatter, and H100 rings: no sweep, the plateau model as before
    # (4-rank ring/Simple latency 8.4 + 6 x 3.4 = 28.8 us)
    assert _ring(16_777_216, ranks=4) == pytest.approx(28.8e-6 + 1.5 * 16_777_216 / B, rel=1e-6)
    assert float(ring_size_share("reduce-scatter", 16_777_216.0, 8.0, 8.0, A100)) == 1.0
    h100 = make_fabric("nvlink4", None, gpus_per_node=8)
    assert float(ring_size_share("all-reduce", 16_777_216.0, 8.0, 8.0, h100)) == 1.0
    # across nodes (16 ranks on 2 nodes): the curve is one node's
    two = make_fabric("nvlink3", "hdr-200", gpus_per_node=8)
    assert float(ring_size_share("all-reduce", 16_777_216.0, 16.0, 8.0, two)) == 1.0
