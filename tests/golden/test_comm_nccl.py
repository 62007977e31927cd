"""The collective model against published nccl-tests plateaus and NCCL's own tuning model.

Every expected value below is a measurement someone published (URL beside it) or a number
worked out by hand from NCCL's tuning table (src/graph/tuning.cc, commit b6475625). The model
uses one stated efficiency per link kind (0.80 NVLink, 0.96 NIC), not a fit per system; the issue
asks for the large-message plateaus within 15%.
"""

import pytest

from scalemodel.analytic.collectives import collective_cost, make_fabric, make_group, price_best

GiB = 2.0**30
TOL = 0.15


def busbw(intra, inter, ranks, per_node, nbytes=4 * GiB, algorithm="auto", nics=1.0, rate=None,
          collective="all-reduce"):
    fab = make_fabric(intra, inter, gpus_per_node=max(per_node, 1), nics_per_gpu=nics,
                      intra_bytes_per_s=rate)
    g = make_group(ranks, fab, per_node)
    return collective_cost(collective, nbytes, g, fab, algorithm=algorithm)


@pytest.mark.parametrize(
    "intra, rate, ranks, algorithm, published_gbps, url",
    [
        # HGX H100, NCCL_ALGO=RING, 2-8 GPUs flat at 365-370 GB/s
        ("nvlink4", None, 8, "ring", 367.5, "https://github.com/NVIDIA/nccl/issues/1455"),
        ("nvlink4", None, 4, "ring", 367.5, "https://github.com/NVIDIA/nccl/issues/1455"),
        # HGX H100 default (NVLS): maintainer says ~480 busbw; a user's 476
        ("nvlink4", None, 8, "auto", 480.0, "https://github.com/NVIDIA/nccl-tests/issues/212"),
        ("nvlink4", None, 8, "auto", 476.0, "https://github.com/NVIDIA/nccl-tests/issues/290"),
        # NVLS busbw growing with GPU count: 370 (4), 420 (5), 440 (6), 460 (7)
        ("nvlink4", None, 4, "in-switch", 370.0, "https://github.com/NVIDIA/nccl/issues/1455"),
        ("nvlink4", None, 5, "in-switch", 420.0, "https://github.com/NVIDIA/nccl/issues/1455"),
        ("nvlink4", None, 6, "in-switch", 440.0, "https://github.com/NVIDIA/nccl/issues/1455"),
        ("nvlink4", None, 7, "in-switch", 460.0, "https://github.com/NVIDIA/nccl/issues/1455"),
        # HGX H200 (same NVLink4), default, NCCL 2.20.3: ~475
        ("nvlink4", None, 8, "auto", 475.0, "https://github.com/NVIDIA/nccl-tests/issues/272"),
        # DGX A100 (NVLink3, no NVLS): 232.54
        ("nvlink3", None, 8, "auto", 232.54, "https://github.com/NVIDIA/nccl-tests/issues/175"),
        # HGX H800 with NVLink cut to 200 GB/s per direction: 215 (default)
        ("nvlink4", 200e9, 8, "auto", 215.0, "https://github.com/NVIDIA/nccl/issues/1374"),
    ],
)
def test_single_node_all_reduce_plateaus(intra, rate, ranks, algorithm, published_gbps, url):
    r = busbw(intra, None, ranks, ranks, algorithm=algorithm, rate=rate)
    assert r.busbw_bytes_per_s / 1e9 == pytest.approx(published_gbps, rel=TOL), url


@pytest.mark.parametrize(
    "intra, inter, nodes, nics, published_gbps, url",
    [
        # 4x HGX H100, 8x 400G IB per node: 365.84
        ("nvlink4", "ndr-400", 4, 1.0, 365.84, "https://github.com/NVIDIA/nccl-tests/issues/309"),
        # 2x HGX H100 8x CX-7, NCCL_ALGO=RING: up to ~396
        ("nvlink4", "ndr-400", 2, 1.0, 396.0, "https://github.com/NVIDIA/nccl-tests/issues/319"),
        # DGX A100 with 8x HDR 200G, multi-node: 192 (NVIDIA measured)
        ("nvlink3", "hdr-200", 2, 1.0, 192.0, "https://github.com/NVIDIA/nccl/issues/812"),
        # 2x HGX A100 with 4x CX-6 200G per node (half a NIC per GPU): 91
        ("nvlink3", "hdr-200", 2, 0.5, 91.0, "https://github.com/NVIDIA/nccl-tests/issues/100"),
    ],
)
def test_multi_node_ring_plateaus(intra, inter, nodes, nics, published_gbps, url):
    r = busbw(intra, inter, nodes * 8, 8, algorithm="ring", nics=nics)
    assert r.busbw_bytes_per_s / 1e9 == pytest.approx(published_gbps, rel=TOL), url


def test_rule_of_thumb_per_nic():
    # ~24 GB/s per 200G NIC and ~48 GB/s per 400G NIC, one rank per node (nccl-tests#119, #319)
    for link, gbps in (("hdr-200", 24.0), ("ndr-400", 48.0)):
        r = busbw("nvlink4", link, 8, 1, algorithm="ring")
        assert r.busbw_bytes_per_s / 1e9 == pytest.approx(gbps, rel=0.05)


def test_alltoall_single_nic_bound_is_an_upper_bound():
    # 6x HGX H100 over 8x 400G RoCE: alltoall busbw 48-49 GB/s per NIC (nccl-tests#267).
    # Our direct all-to-all posts every message at once with no congestion: a lower bound on
    # time, so its busbw must not fall below the measurement, and stays within 20% of it.
    r = busbw("nvlink4", "roce-400", 48, 8, nbytes=48 * 2.0**24, algorithm="direct",
              collective="all-to-all")
    got = r.busbw_bytes_per_s / 1e9
    assert 48.5 <= got <= 48.5 * 1.2


def test_two_node_tree_moves_half_the_ring_bytes_over_the_nics():
    # nccl-tests#196: on exactly 2 nodes the tree sends about S per node over the NICs where a
    # ring sends about 2S, so tree busbw "exceeds" the NIC limit. Derivation: two trees of 2
    # nodes, each half the data up and down: S per node; ring: 2(n-1)/n S ~ 2S per node.
    fab = make_fabric("nvlink4", "ndr-400")
    g = make_group(16, fab, 8)
    tree = collective_cost("all-reduce", 4 * GiB, g, fab, algorithm="tree")
    ring = collective_cost("all-reduce", 4 * GiB, g, fab, algorithm="ring")
    assert tree.inter_bytes_per_rank * 8 == pytest.approx(4 * GiB)
    assert ring.inter_bytes_per_rank * 8 == pytest.approx(2 * 15 / 16 * 4 * GiB)


@pytest.mark.parametrize(
    "algorithm, protocol, ranks, per_node, expected_us",
    [
        # worked by hand from tuning.cc's table at v2.21.5-1 (ab2b89c4): baseLat + hops x hwLat
        ("ring", "ll", 8, 8, 6.6 + 14 * 0.6),  # 15.0 us
        ("tree", "ll", 8, 8, 6.8 + 2 * 7 * 0.6),  # 15.2 us
        ("in-switch", "simple", 8, 8, 25.0),  # NVLS: one NVLink hwLat, no base (23 in 2.20.3)
        ("ring", "simple", 8, 8, 8.4 + 14 * 3.4),  # 56 us
        ("tree", "ll", 128, 8, 6.8 + 2 * (7 * 0.6 + 4 * 5.0)),  # 55.2 us at 16 nodes
    ],
)
def test_small_message_latency_matches_nccl_tuning_model(algorithm, protocol, ranks, per_node,
                                                         expected_us):
    fab = make_fabric("nvlink4", "ndr-400")
    c = price_best("all-reduce", 0.0, ranks, per_node, fabric=fab, algorithms=(algorithm,),
                   protocols=(protocol,))
    assert float(c.latency_s) * 1e6 == pytest.approx(expected_us, rel=1e-9)
