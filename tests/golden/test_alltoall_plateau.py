"""NCCL's all-to-all inside one NVLink domain against NVIDIA's published nccl-tests plateaus.

Source: NVIDIA GTC 2025 session S72583, slide 13 "All-to-all Communication Bandwidth" (reproduced
in stas00/ml-engineering network/images/all-to-all-bw-2025.png at commit 744d01e1), "NCCL Tests
Alltoall Bus Bandwidth in GB/s": 8 GPUs on NVLink3 (A100) 210, NVLink4 (H100) 320, NVLink5
(B200) 640; 32 GPUs of a GB200 NVL72 640. Derivation of the constant, written here: 320 / 450
GB/s per direction = 0.711, 640 / 900 = 0.711, 210 / 300 = 0.700. The rings keep their own
figure (NCCL maintainer, nccl-tests#212: about 370 of 450 GB/s effective, 0.80), and so does
the wire under a per-destination dispatch kernel (DeepEP's own NVLink rate bounds it).
"""

import json

import pytest

from conftest import run_cli as _cli
from scalemodel.analytic.collectives import make_fabric, price_best
from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.step.comm import collective_time

GIB4 = 4.0 * 2**30


@pytest.mark.parametrize("link, ranks, slide_busbw_gbps", [
    ("nvlink3", 8, 210.0),   # DGX A100
    ("nvlink4", 8, 320.0),   # DGX H100
    ("nvlink5", 8, 640.0),   # DGX B200
    ("nvlink5", 32, 640.0),  # 32 GPUs of one GB200 NVL72 domain
])
def test_alltoall_plateau_matches_the_slide(link, ranks, slide_busbw_gbps):
    fab = make_fabric(link, None, gpus_per_node=max(ranks, 8))
    c = price_best("all-to-all", GIB4, ranks, ranks, fabric=fab)
    # 3%: the slide's bars are whole numbers; A100's 0.700 is 1.5% under the H100 / B200 0.711
    assert float(c.busbw_bytes_per_s) / 1e9 == pytest.approx(slide_busbw_gbps, rel=0.03)


def test_rings_keep_the_ring_efficiency():
    # nccl-tests#212: non-all-reduce ring collectives reach ~370 GB/s busbw on 8 H100; the
    # model's 0.80 x 450 = 360 GB/s must not move with the all-to-all figure
    fab = make_fabric("nvlink4", None)
    ag = price_best("all-gather", GIB4, 8, 8, fabric=fab)
    assert float(ag.busbw_bytes_per_s) / 1e9 == pytest.approx(360.0, rel=0.01)


def test_step_model_reads_the_same_price_and_the_dispatch_wire_keeps_the_ring_figure():
    cl = make_cluster("b200", 8)
    S = 134217728.0  # 4096 tokens x top-8 x hidden 2048 x 2 bytes: Qwen3-30B-A3B, EP8, MBS 1
    engine = float(price_best("all-to-all", S, 8, 8, fabric=cl.fabric).time_s)
    nccl = float(collective_time("all_to_all", S, 8, 8, cl))
    wire = float(collective_time("all_to_all_wire", S, 8, 8, cl))
    assert nccl == pytest.approx(engine, rel=1e-12)
    # same latency, bandwidth terms in the ratio of the efficiencies 0.80 / 0.711
    lat = 8.4e-6 + 3.4e-6  # NCCL tuning.cc ring/Simple base + one NVLink step (collectives.toml)
    assert (nccl - lat) / (wire - lat) == pytest.approx(0.80 / 0.711, rel=1e-6)


def test_user_efficiency_intra_wins(capsys):
    rc, out, _ = _cli(capsys, "comm", "cost", "--collective", "all-to-all", "--intra", "nvlink4",
                      "--bytes", "4GiB", "--efficiency-intra", "0.8", "--json")
    assert rc == 0
    d = json.loads(out)
    # 0.80 x 450 GB/s = 360 GB/s, less the latency's share at 4 GiB (< 0.1%)
    assert d["efficiency_intra"] == 0.8
    assert d["busbw_bytes_per_s"] / 1e9 == pytest.approx(360.0, rel=0.002)


def test_moe_serve_prices_the_deepep_nvlink_wire_as_the_step_model_does():
    # one quantity, one price: moe serve's node-limited (DeepEP normal kernels) stage inside one
    # node and the training step model's kernel_nvlink_stage, both the ring-efficiency wire
    # floored by DeepEP's measured NVLink rate (review of session 18: moe_serving took NCCL's
    # all-to-all plateau for the wire)
    from scalemodel.analytic.moe_serving import alltoall_time_s
    from scalemodel.analytic.step.comm import kernel_nvlink_stage

    cl = make_cluster("h100-sxm", 8)
    up = cl.fabric.intra.bytes_per_s_per_direction
    S = 134217728.0
    for call in ("dispatch", "combine"):
        serve = float(alltoall_time_s(S, 1.0, 8, cl.fabric, mode="node-limited",
                                      calls=(call,)).ravel()[0])
        step = float(kernel_nvlink_stage("deepep", cl, up, S, 8, call))
        assert serve == pytest.approx(step, rel=1e-9), call
