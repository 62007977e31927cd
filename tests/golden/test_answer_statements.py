"""Statements of the worked answers that must agree with their own numbers (issue 20, item 2).

Each expected value is derived in the test from the model's config, a datasheet or by hand."""

import numpy as np
import pytest

from scalemodel.analytic import roofline as rl
from scalemodel.questions import (
    fabric_map,
    memory_hierarchy,
    nccl_topology,
    parallelism_traffic,
    ring_allreduce,
    roofline,
    warp_divergence,
)
from scalemodel.specs import get_gpu, get_link, get_model


def _texts(rep):
    return " ".join((s.heading or "") + " " + (s.text or "") for s in rep.sections)


@pytest.mark.parametrize("batch, m", [(1024, 64), (16, 1)])
def test_fsdp_against_ddp_follows_the_micro_batches(batch, m):
    # llama-3-70b, tp8 pp4 dp16: micro-batches = batch / (dp x micro-batch) = batch / 16.
    # Gradients are reduced in fp32 (Megatron's main_grad, FSDP2's reduce_dtype float32), the
    # parameters gathered in bf16. DDP: one ring all-reduce per step, 2 (n-1)/n x 4 P bytes sent
    # per GPU. FSDP, per micro-batch: two all-gathers of the parameters, (n-1)/n x 2 x 2 P, and a
    # reduce-scatter of the gradients, (n-1)/n x 4 P: (n-1)/n x 8 P, so m times DDP's volume
    # (the textbook 1.5 m holds only when gradients travel in bf16).
    assert batch // 16 == m
    r = parallelism_traffic.build({"batch": batch})
    f = r.data["fsdp_vs_ddp"]
    assert f["micro_batches"] == m
    assert f["wire_ratio"] == pytest.approx(m, rel=1e-9)
    assert f"{m:,.1f}x the DDP volume on the wire" in r.followups[2][1]


def test_fabric_map_counts_both_tp_collectives():
    # one TP collective's gathered activation is b s h e = 1 x 4096 x 8192 x 2 = 67,108,864 B, of
    # which a ring sends (t-1)/t = 7/8 per GPU: 58,720,256 B. Per layer and micro-batch sequence
    # parallelism runs 4 collectives forward (2 all-gathers, 2 reduce-scatters) and 6 backward
    # (the mirror 4 and the two inputs re-gathered for the weight gradients; Korthikanti et al.
    # 2022, Sec. 4.2.2). The uneven split puts the output head (128,256 x 8,192 = 1.05e9
    # parameters, 1.23 layers of 0.855e9) on the last stage: 20 / 21 / 21 / 18 layers, so the
    # slowest stage runs 21. Calls: 10 x 21 x 64 micro-batches = 13,440; bytes 13,440 x 58,720,256
    # = 789.2 GB per GPU per step.
    per_call = 7 / 8 * 1 * 4096 * 8192 * 2
    calls = 10 * 21 * (1024 // 16)
    total = calls * per_call
    r = fabric_map.build({})
    assert r.data["bytes_per_step_by_family"]["TP"] == pytest.approx(total)
    assert r.data["most_bytes"] == "TP"
    assert "TP sends the most bytes (789.2 GB" in r.sections[0].text
    assert f"{calls:,} calls" in r.sections[0].text


def test_nccl_topology_reads_the_gpus_links():
    r = nccl_topology.build({"gpu": "a100-sxm-80gb"})
    s1, s2, s3 = r.sections[0], r.sections[1], r.sections[2]
    # A100 SXM: NVLink 3 and PCIe 4 (NVIDIA A100 datasheet); HDR 200 NICs
    assert "nvlink3 and its pcie4" in s1.text
    assert s1.tables[0].rows[0][0].startswith("nvlink3")
    assert s1.tables[0].rows[1][0].startswith("pcie4")
    assert s2.derivation["Bp"] == get_link("pcie4").bytes_per_s_per_direction
    assert s2.derivation["Bn"] == get_link("hdr-200").bytes_per_s_per_direction
    # the PXN table agrees with its text: each row's aggregated time over the direct one, and
    # the break-even overhead (t_agg - t_direct) / (messages saved): 4 nodes x 8 GPUs send
    # 32 - 8 = 24 network messages per rank directly, 4 - 1 = 3 aggregated
    for _, a, b, ratio, n_direct, n_aggr, even in s3.tables[0].rows:
        assert (n_direct, n_aggr) == (24, 3)
        assert ratio == pytest.approx(b / a)
        assert even == pytest.approx((b - a) / 21)
    slower = all(row[3] > 1 for row in s3.tables[0].rows)
    assert ("slower at every size" in s3.text) == slower
    assert "from what the model leaves out" in s3.text


def test_ring_allreduce_on_64_ranks_is_eight_nodes():
    r = ring_allreduce.build({"ranks": 64})
    assert r.data["nodes"] == 64 // 8
    t = _texts(r)
    assert "inside one 64-GPU node" not in t
    assert "on 64 GPUs over 8 nodes of 8" in t
    assert "inside one 8-GPU node" in _texts(ring_allreduce.build({"ranks": 8}))


def test_mla_decode_flops_follow_the_compressed_cache():
    # DeepSeek-V3 config.json: 128 heads, 61 layers, kv_lora_rank 512, qk_rope_head_dim 64.
    # Absorbed attention scores each cached token against 512 + 64 dims and sums 512-dim latents:
    # per token, per cached position, 2 x 128 x (576 + 512) x 61 FLOPs, against the
    # (512 + 64) x 2 B x 61 bf16 bytes the cache holds per position.
    m, gpu = get_model("deepseek-v3"), get_gpu("h100-sxm")
    a = rl.decode_step(gpu, m, batch=1, context=1024)
    b = rl.decode_step(gpu, m, batch=1, context=2048)
    per_pos_flops = 2 * 128 * (576 + 512) * 61
    per_pos_bytes = (512 + 64) * 2 * 61
    assert b.flops - a.flops == pytest.approx(1024 * per_pos_flops)
    assert b.bytes - a.bytes == pytest.approx(1024 * per_pos_bytes)
    assert per_pos_flops / per_pos_bytes == pytest.approx(241.8, abs=0.1)


def test_roofline_says_the_bytes_of_the_precision():
    assert "one byte per weight read (fp8)" in roofline.build({"dtype": "fp8"}).sections[2].text
    assert "two bytes per weight read (bf16)" in roofline.build({}).sections[2].text


@pytest.mark.parametrize("gpu, bw", [
    # gpu-benches gpu-l2-cache (h100_pcie.txt: 6.85-6.98 TB/s plateau, 10-33 MB data sets;
    # h200.txt: 9.7-9.9 TB/s, 10-40 MB; H100 SXM shares the H200's 132 SMs and 50 MB L2)
    ("h100-pcie", 6.9e12), ("h100-sxm", 9.8e12),
    # A100: 5,120 B/clk (A100 whitepaper) x 1.41 GHz boost
    ("a100-sxm-80gb", 5120 * 1.41e9),
])
def test_l2_bandwidth_is_quoted(gpu, bw):
    r = memory_hierarchy.build({"gpu": gpu})
    l2 = next(lv for lv in r.data["levels"] if lv["level"] == "L2")
    assert l2["bytes_per_s"] == pytest.approx(bw, rel=0.01)
    assert "not published" not in l2["sources"]


def _reduce(x, steps):
    x = list(x)
    for s, m in steps:
        for t in range(m):
            x[t] += x[t + s]
    return x[0]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 48, 96, 100, 255, 256, 1000, 1024])
def test_reductions_keep_every_element(n):
    vals = list(range(1, n + 1))
    assert _reduce(vals, warp_divergence.sequential_steps(n)) == n * (n + 1) // 2
    x = list(vals) + [0] * n
    for s in warp_divergence.interleaved_strides(n):
        for t in range(0, n, 2 * s):
            if t + s < n:
                x[t] += x[t + s]
    assert x[0] == n * (n + 1) // 2
    # halving down (s = n // 2 from 24: 24, 12, 6, 3, 1) loses an element at 48
    if n == 48:
        down, k = [], n
        while k > 1:
            down.append((k // 2, k // 2))
            k //= 2
        assert _reduce(vals, down) != n * (n + 1) // 2


def test_warp_divergence_48_by_hand():
    # sequential steps on 48: 24, 12, 6, 3, 1, 1 threads add (47 additions), each step issued by
    # one 32-lane warp: SIMT efficiency 47 / (6 x 32) = 0.2448
    r = warp_divergence.build({"block": 48})
    seq = r.data["reduction"]["sequential"]
    assert seq["simt_efficiency"] == pytest.approx(47 / (6 * 32), rel=1e-9)
    rows = r.sections[1].tables[1].rows
    assert [row[1] for row in rows] == [24, 12, 6, 3, 1, 1]
    assert np.sum([row[1] for row in rows]) == 47


def test_hang_triage_states_and_order():
    from scalemodel.questions import hang_triage

    r = hang_triage.build({})
    rows = r.sections[0].tables[0].rows
    # the recording: rank 3 takes the aux group first; ranks 0-2 block in world #6 until timeout
    states = {row[0]: row[1] for row in rows}
    assert states[3].startswith("culprit")
    assert all(states[k].startswith("hung") for k in (0, 1, 2))
    assert all(row[1] != "ok" for row in rows)
    order = r.sections[3].tables[0].rows
    assert [row[0] for row in order] == ["1", "2", "3", "4", "5", "6"]
    assert "world: seq 5, 6" in order[2][3]  # rank 3 stopped at world #5, the others at #6


def test_slowdown_triage_flags_ten_percent_workers():
    from scalemodel.questions import slowdown_triage

    r = slowdown_triage.build({})
    job1 = r.data["alibaba"]["job_1_norm.csv"]
    flagged = {w["worker"] for w in job1["per_rank"] if w["flagged"]}
    assert {"0", "1", "2"} <= flagged  # 8.5-11% slow for the whole run
    assert "3" not in flagged
    table = r.sections[2].tables[1]
    assert table.columns[1:3] == ("worker", "rank")


def test_checkpoint_budget_line_by_hand():
    import math

    from scalemodel.analytic.reliability import best_interval
    from scalemodel.questions import checkpoint_failures

    r = checkpoint_failures.build({})
    b = r.data["budget"]
    M = r.data["job_mtbf_s"]
    # Daly (2006): goodput = tau / (M e^(R/M) (e^((tau + delta)/M) - 1)) at the best tau;
    # lost GPU-hours = (1 - goodput) x 16,384 GPUs x 730.5 h
    for R, key in ((600.0, "automated"), (600.0 + 1800.0, "manual")):
        tau = best_interval(60.0, R, M)
        g = tau / (M * math.exp(R / M) * math.expm1((tau + 60.0) / M))
        assert b[f"goodput_{key}"] == pytest.approx(g, rel=1e-9)
        assert b[f"lost_gpu_hours_per_month_{key}"] == pytest.approx((1 - g) * 16384 * 730.5)
    assert b["straggler_gpu_hours_per_hour"] == pytest.approx(0.10 * 16384)


def test_blast_radius_shared_services_are_failure_domains():
    from scalemodel.questions import blast_radius

    r = blast_radius.build({})
    spofs = set(r.data["single_points_of_failure"])
    assert {"storage", "rendezvous", "subnet_manager", "dns_auth"} <= spofs
    rows = {f["component"]: f for f in r.data["faults"]}
    # rates from reliability.toml (stated assumptions): 1 and 2 per cluster-year
    assert rows["subnet_manager"]["rate_per_day"] == pytest.approx(1 / 365.25, rel=0.01)
    assert rows["dns_auth"]["rate_per_day"] == pytest.approx(2 / 365.25, rel=0.01)
    assert not rows["image_registry"]["stops_job"] and not rows["scheduler"]["stops_job"]
    text = next(a for q, a in r.followups if "single points" in q)
    assert "subnet manager" in text and "image registry" in text and "controller" in text


def test_register_tiling_low_occupancy_wins_by_hand():
    from scalemodel.questions import occupancy as occ_q

    # H100 (cc 9.0): 65,536 registers and 64 warps per SM, registers allocated per warp in
    # units of 256; shared memory 128 B = 32 words per clock per SM; 128 FP32 FMAs per clock.
    # 8x8 tile: 64 + 16 + 24 = 104 regs -> 104 x 32 = 3,328 per warp (13 x 256), x 8 warps =
    # 26,624 per 256-thread block -> 2 blocks = 16 warps = 25% occupancy; FMA rate
    # min(128, 32 x 8 / 2) = 128: the full peak. 4x4 tile: 16 + 8 + 24 = 48 regs -> 1,536 per
    # warp, 12,288 per block -> 5 blocks = 40 warps = 62.5%; min(128, 32 x 4 / 2) = 64: half.
    t = {x["tile"]: x for x in occ_q.build({}).data["register_tiling"]}
    assert t[8]["regs"] == 104 and t[8]["occupancy"] == pytest.approx(0.25)
    assert t[8]["fraction_of_fp32_peak"] == pytest.approx(1.0, rel=1e-3)
    assert t[4]["regs"] == 48 and t[4]["occupancy"] == pytest.approx(0.625)
    assert t[4]["fraction_of_fp32_peak"] == pytest.approx(0.5, rel=1e-3)
    assert t[8]["fraction_of_fp32_peak"] > t[2]["fraction_of_fp32_peak"]  # 25% beats 100%
