"""MoE engines: invariants, CLI keys, bad input."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli_json
from conftest import run_cli as run
from scalemodel.analytic.moe_placement import lower_bound, place, read_loads_csv
from scalemodel.errors import BadInput
from scalemodel.sim.moe_routing import RouterConfig, capacity_overflow, simulate


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.integers(0, 3), st.integers(0, 10_000))
def test_placement_invariants(gpus, per_gpu_extra, layers_m1, seed):
    rng = np.random.default_rng(seed)
    e = gpus * 2
    slots = gpus * (2 + per_gpu_extra)
    w = rng.pareto(1.2, size=(layers_m1 + 1, e)) * 100
    r = place(w, slots=slots, gpus=gpus, nodes=1)
    for li, layer in enumerate(r.placement):
        flat = [x for g in layer for x in g]
        assert len(layer) == gpus and all(len(g) == slots // gpus for g in layer)
        assert sorted(set(flat)) == list(range(e))  # every expert has a replica
        assert r.per_layer["imbalance_after"][li] >= r.per_layer["lower_bound"][li] - 1e-9
        assert r.per_layer["imbalance_after"][li] <= r.per_layer["eplb_global"][li] + 1e-9


def test_lower_bound_uniform_is_one():
    assert lower_bound(np.ones(64), 64, 8) == pytest.approx(1.0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=40), st.floats(0.25, 4.0))
def test_capacity_overflow_bounds(load, cf):
    load = np.array(load, dtype=float)
    copies = int(load.sum())
    if copies == 0:
        return
    d, pad = capacity_overflow(load, cf, copies)
    assert 0 <= d <= 1 and 0 <= pad <= 1


def test_collapse_and_recovery_small():
    base = dict(experts=16, top_k=2, steps=150, tokens_per_step=1024, clusters=8)
    none = simulate(RouterConfig(balance="none", **base))
    bias = simulate(RouterConfig(balance="bias", **base))
    assert none.history[-1]["max_over_mean_load"] > none.history[0]["max_over_mean_load"]
    assert bias.max_over_mean_load < none.max_over_mean_load
    assert bias.load_entropy > none.load_entropy


def test_csv_parsing_header_and_errors():
    assert read_loads_csv("e0,e1\n1,2\n3,4\n").shape == (2, 2)
    with pytest.raises(BadInput, match="row 2, column 2"):
        read_loads_csv("1,2\n3,-1\n")
    with pytest.raises(BadInput, match="row 2 has 3 columns"):
        read_loads_csv("1,2\n3,4,5\n")
    with pytest.raises(BadInput, match="column 1"):
        read_loads_csv("1,2\nx,4\n")


def test_place_cli_json_keys(capsys, tmp_path):
    f = tmp_path / "loads.csv"
    f.write_text("\n".join(",".join(str((i * 7 + j * 13) % 50 + 1) for j in range(16))
                           for i in range(3)))
    d = cli_json(capsys, "moe", "place", "--loads", str(f), "--slots", "24", "--gpus", "8",
                 "--nodes", "2", "--groups", "4")
    for k in ("imbalance_before", "imbalance_after", "lower_bound", "placement"):
        assert k in d
    assert len(d["placement"]) == 3 and len(d["placement"][0]) == 8


def test_route_cli_json_keys(capsys):
    d = cli_json(capsys, "moe", "route", "--experts", "8", "--top-k", "2", "--steps", "20",
                 "--tokens", "256", "--balance", "aux")
    for k in ("load_entropy", "max_over_mean_load", "history", "dropped_fraction"):
        assert k in d
    assert len(d["history"]) == 20


@pytest.mark.parametrize("argv,needle", [
    (["moe", "route", "--experts", "4", "--top-k", "5"], "--top-k"),
    (["moe", "place", "--slots", "10", "--gpus", "4"], "--slots"),
    (["moe", "place", "--slots", "8", "--gpus", "4"], "fewer than"),
    (["moe", "place", "--slots", "18", "--gpus", "4"], "divisible"),
    (["moe", "place", "--slots", "16", "--gpus", "4"], "negative"),
    (["moe", "serve", "--model", "llama-3-8b"], "not a mixture-of-experts"),
    (["moe", "serve", "--dispatch", "magic"], "--dispatch"),
])
def test_bad_input_one_line_exit_2(capsys, tmp_path, argv, needle):
    f = tmp_path / "l.csv"
    f.write_text("1,2,3,4,5,6,7,8,9,10,11,12\n1,2,3,4,5,6,7,8,9,10,11,-1\n")
    if "place" in argv:
        argv = argv + ["--loads", str(f)]
        if needle == "fewer than":
            f.write_text("1," * 11 + "1\n")
        if needle in ("divisible", "--slots"):
            f.write_text("1,2,3,4\n")
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert err.count("\n") == 1 and needle in err


@pytest.mark.parametrize("argv,needle", [
    (["moe", "route", "--experts", "100000", "--steps", "1", "--tokens", "1"],
     "limits.route_experts"),
    (["moe", "route", "--tokens", "100000000", "--steps", "1"], "limits.route_tokens_per_step"),
    (["moe", "route", "--experts", "4096", "--tokens", "8192", "--steps", "1"],
     "limits.route_experts_x_tokens"),
    (["moe", "route", "--steps", "1000000", "--tokens", "1"], "limits.route_steps"),
    (["moe", "route", "--steps", "100000", "--tokens", "65536"], "limits.route_work"),
    (["moe", "route", "--clusters", "1000000000", "--steps", "1"], "limits.route_clusters"),
    (["moe", "route", "--seed", "-1", "--steps", "1"], "--seed"),
    (["moe", "place", "--slots", "1000000000", "--gpus", "4"], "limits.place_slots"),
    (["moe", "serve", "--draws", "1000000"], "limits.serve_draws"),
    (["moe", "serve", "--gpus-per-node", "100000"], "limits.serve_gpus_per_node"),
    (["moe", "serve", "--gpu", "mi300x", "--dtype", "bf16"], "interconnect.scale_up_link"),
    (["moe", "global", "--slots", "100000000"], "limits.global_slots"),
    (["moe", "global", "--slots", "289"], "divisible"),
    (["moe", "global", "--model", "llama-3-8b"], "not a mixture-of-experts"),
])
def test_unbounded_work_refused_one_line_exit_2(capsys, tmp_path, argv, needle):
    # every input that scales memory or time has a stated limit in moe.toml [limits.*]
    if "place" in argv:
        f = tmp_path / "l.csv"
        f.write_text("1,2,3,4\n")
        argv = argv + ["--loads", str(f)]
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert err.count("\n") == 1 and needle in err, err


def test_engine_limits_for_eval_tokens():
    with pytest.raises(BadInput, match="limits.route_eval_tokens"):
        simulate(RouterConfig(experts=4, steps=1, tokens_per_step=8), eval_tokens=10**9)
    with pytest.raises(BadInput, match="limits.route_dim"):
        simulate(RouterConfig(experts=4, steps=1, tokens_per_step=8, dim=10**6))


@pytest.mark.parametrize("kind,needle", [
    ("devnull", "is a character device, not a regular CSV file"),
    ("dir", "is a directory, not a regular CSV file"),
    ("empty", "is empty (0 bytes)"),
    ("missing", "no such file"),
    ("binary", "not a UTF-8 text CSV file"),
])
def test_loads_file_problems_named_precisely(capsys, tmp_path, kind, needle):
    path = {"devnull": "/dev/null", "dir": str(tmp_path), "missing": str(tmp_path / "nope.csv"),
            "empty": str(tmp_path / "empty.csv"), "binary": str(tmp_path / "bin.csv")}[kind]
    (tmp_path / "empty.csv").write_bytes(b"")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x01")
    rc, out, err = run(capsys, "moe", "place", "--loads", path, "--slots", "8", "--gpus", "4")
    assert rc == 2
    assert err.count("\n") == 1 and needle in err, err


def test_router_defaults_come_from_moe_toml():
    # published coefficients with their papers; the toy constants marked as assumptions
    from scalemodel.specs.sources import load_toml, source

    t = load_toml("moe.toml")["router"]
    cfg = RouterConfig()
    for name, key in (("aux_coef", "switch-transformer"), ("z_coef", "st-moe"),
                      ("gamma", "deepseek-v3-report")):
        assert t[name]["source"] == key and t[name]["kind"] == "published"
    assert (cfg.aux_coef, cfg.z_coef, cfg.gamma) == (1e-2, 1e-3, 1e-3)  # the papers' values
    for name in ("lr", "task_gain", "tau", "general", "noise", "decay", "centre_radius",
                 "mix_concentration", "init_scale"):
        assert t[name]["kind"] == "assumption" and t[name]["note"]
        assert source(t[name]["source"]).kind == "assumption"
        assert getattr(cfg, name) == t[name]["value"]


def test_serve_fabric_read_from_gpu_spec():
    # the in-node link and its rate, the NIC and its count come from gpus.toml / links.toml
    from scalemodel.analytic.moe_serving import fabric_spec, serving_fabric
    from scalemodel.specs import get_gpu

    h800 = get_gpu("h800")
    fs = fabric_spec(h800)
    assert (fs.intra_link, fs.inter_link, fs.nics_per_gpu) == ("nvlink4", "ndr-400", 1.0)
    fab = serving_fabric(h800, 8)
    assert fab.intra.bytes_per_s_per_direction == 200e9  # H800's NVLink, 400 GB/s both ways
    assert fab.intra.latency_s == 0.6e-6  # NCCL tuning.cc NVLink hwLat (links.toml)


def test_serve_without_scale_out_link_plans_one_node(tmp_path):
    from scalemodel.analytic.moe_serving import plan
    from scalemodel.specs import get_gpu, get_model

    p = tmp_path / "boxgpu.toml"
    p.write_text('[boxgpu]\nname = "box"\nhbm_bytes = 192e9\nhbm_bytes_per_s = 8e12\n'
                 '[boxgpu.flop_per_s]\nbf16 = 2.25e15\n'
                 '[boxgpu.interconnect]\nscale_up_link = "nvlink5"\n')
    r = plan(get_model("mixtral-8x7b"), get_gpu(str(p)), tpot_s=0.05, ttft_s=2.0,
             dtype_name="bf16", draws=8)
    for ph in (r.prefill, r.decode):
        assert ph is None or ph.extra["nodes"] == 1
    assert all(c["nodes"] == 1 for c in r.candidates["decode"])


def test_serve_cli_json_keys(capsys):
    d = cli_json(capsys, "moe", "serve", "--model", "mixtral-8x7b", "--gpu", "h100-sxm",
                 "--dtype", "bf16", "--draws", "16")
    for ph in ("prefill", "decode"):
        p = d[ph]
        for k in ("attention", "ep", "redundant_experts", "gpus", "tokens_per_s_per_gpu",
                  "tpot_p50_s", "tpot_p99_s", "alltoall_p99_s"):
            assert k in p
        assert set(p["attention"]) == {"tp", "dp"}
    assert d["decode"]["tpot_p99_s"] <= 0.05


# --- DeepSeek-V3 on H800 against DeepSeek's published production figures -----------------------
# Day-6 inference overview (deepseek-ai/open-infra-index, 202502OpenSourceWeek, "day_6_one_more_
# thing"; /work/shared/reference/moe_serving.md sec. 2): per 8-GPU H800 node, 73.7k input tokens/s
# in prefill, 56.3% of them on-disk KV-cache hits, and 14.8k output tokens/s in decode, at an
# average KV length of 4,989 tokens. Per GPU: 73,700 / 8 = 9,212 input tokens/s (of which
# 9,212 x (1 - 0.563) = 4,026 computed) and 14,800 / 8 = 1,850 output tokens/s.
#
# What the model can honestly claim: its layer times are roofline lower bounds at the stated
# efficiencies (moe.toml: eta_c GEMM, eta_m HBM) with perfect overlap, so its throughput must lie
# ABOVE what production computed, and BELOW an independent roofline derived here from the model's
# published shape (DeepSeek-V3 report: 37B activated parameters per token; HF config.json:
# 61 layers, 128 heads, q/k head dim 128 + 64, v head dim 128, MLA latent 512 + 64, hidden 7168,
# top-8, 58 MoE layers) and the H800's datasheet (FP8 1,978.9 TFLOP/s dense, 3.35 TB/s HBM;
# 400 Gb/s ConnectX-7 = 50 GB/s per GPU per direction).

DS_PREFILL_PER_GPU = 73_700 / 8
DS_PREFILL_COMPUTED_PER_GPU = DS_PREFILL_PER_GPU * (1 - 0.563)
DS_DECODE_PER_GPU = 14_800 / 8
V3_ACTIVE_PARAMS = 37e9
V3_LAYERS, V3_MOE_LAYERS, V3_HEADS, V3_QK, V3_V, V3_HIDDEN, V3_TOPK = 61, 58, 128, 192, 128, 7168, 8
V3_KV_BYTES_PER_TOKEN = 61 * (512 + 64) * 2  # MLA latent + RoPE key, BF16
H800_FP8, H800_HBM, NIC_BYTES_PER_S = 1978.9e12, 3.35e12, 400e9 / 8
CONTEXT = 4989  # Day-6 average KV length per output token


@pytest.fixture(scope="module")
def ds_plan():
    from scalemodel.analytic.moe_serving import constant, plan
    from scalemodel.specs import get_gpu, get_model

    r = plan(get_model("deepseek-v3"), get_gpu("h800"), tpot_s=0.05, ttft_s=2.0, draws=32,
             node_counts=(4, 8, 18))
    assert r.decode is not None and r.prefill is not None
    return r, constant("compute_efficiency")[0], constant("memory_efficiency")[0]


def test_serve_deepseek_prefill_between_published_and_compute_roofline(ds_plan):
    r, eta_c, _ = ds_plan
    x = r.prefill.tokens_per_s_per_gpu
    prompt = 4096  # plan()'s default prompt; causal attention scores half the square
    flop_per_token = 2 * V3_ACTIVE_PARAMS + V3_LAYERS * 2 * V3_HEADS * (V3_QK + V3_V) * prompt / 2
    roof = H800_FP8 * eta_c / flop_per_token  # 14.1k tokens/s at eta_c = 0.6
    # lower bound on time -> at least what production computed (cache hits cost no prefill)
    assert x >= DS_PREFILL_COMPUTED_PER_GPU
    # prefill at thousands of tokens per GPU is compute-bound with the all-to-all overlapped:
    # no faster than the FLOP roofline (5% for parameter counting: the 37B includes the
    # embedding, which is a lookup), and no more than 20% slower (the busiest GPU's extra routed
    # copies, the head); the window is 0.8 .. 1.05 of 14.1k, i.e. 1.2 .. 1.6x DeepSeek's 9,212
    assert 0.8 * roof <= x <= 1.05 * roof, (x, roof)


def test_serve_deepseek_decode_between_published_and_bandwidth_bounds(ds_plan):
    r, _, eta_m = ds_plan
    d = r.decode
    n, ep, gpn = d.tokens_per_gpu, d.ep, d.gpus // d.extra["nodes"]
    # lower bounds on one decode step of n sequences per GPU (perfect overlap): reading their KV
    # from HBM, and the per-expert all-to-all over one NIC (dispatch FP8 + 1/128 FP32 scales,
    # combine BF16; the copies for the (EP - p) / EP experts on other nodes)
    t_kv = n * CONTEXT * V3_KV_BYTES_PER_TOKEN / (H800_HBM * eta_m)
    t_nic = (V3_MOE_LAYERS * n * V3_TOPK * V3_HIDDEN * (1 + 4 / 128 + 2) * (ep - gpn) / ep
             / NIC_BYTES_PER_S)
    t_lb = max(t_kv, t_nic)
    assert d.tpot_p50_s >= t_lb
    # the model adds only the weight reads, the busiest GPU's received copies above the mean,
    # per-message latency and the NIC's efficiency: within 1.5x of the bound
    assert d.tpot_p50_s <= 1.5 * t_lb, (d.tpot_p50_s, t_kv, t_nic)
    # throughput: above production's 1,850 (lower-bound times) and below the KV-read ceiling
    # beta eta_m / (C b_kv) = 8.1k tokens/s that no batch size can pass
    assert d.tokens_per_s_per_gpu >= DS_DECODE_PER_GPU
    assert d.tokens_per_s_per_gpu <= H800_HBM * eta_m / (CONTEXT * V3_KV_BYTES_PER_TOKEN)
    assert d.tpot_p99_s >= d.tpot_p50_s


def test_global_cli_json(capsys):
    d = cli_json(capsys, "moe", "global")
    assert d["max_rtt_per_layer_hop_s"] == pytest.approx((0.05 - 0.03) / 58)
    ds = d["kv"]["deepseek-v3"]
    assert ds["kv_bytes_per_token"] == 70272  # MLA: 61 x 576 x 2 B (V3 config)
    # fetch beats recompute past the break-even length: check the arithmetic, at the prefill
    # rate plan serve's engine computes (every prompt token computed), not DeepSeek's
    # published 73.7k, which counts 56.3% cache hits
    x = d["prefill_rates"]["deepseek-v3"]["tokens_per_s_per_node"]
    assert d["prefill_rates"]["deepseek-v3"]["from"].startswith("plan serve")
    n = ds["breakeven_prefix_tokens"]
    assert 0.2 + n * 70272 / 12.5e9 == pytest.approx(n / x, rel=1e-9)
    pub = d["deepseek_published_prefill"]
    assert pub["computed"] == pytest.approx(73700 * (1 - 0.563))


def test_node_limited_dispatch_cheaper_than_per_expert_in_prefill():
    # the same layout priced with both kernel families: one copy per node over the NIC (with
    # DeepSeek-V3's 4-of-8 group limit and groups on nodes) moves fewer bytes than k copies
    from scalemodel.analytic.moe_serving import Knobs, _model, grid
    from scalemodel.specs import get_gpu, get_model

    mm = _model(get_model("deepseek-v3"), "bf16")
    out = {}
    for mode in ("node-limited", "per-expert"):
        kb = Knobs(gpu=get_gpu("h800"), weight_bytes=1.0, draws=16, dispatch=mode)
        g = grid(mm, kb, phase="prefill", ep=32, redundant=32, placement="groups-on-node",
                 tps=[1], sizes=[4096], context=4096, prompt=4096)
        out[mode] = float(np.median(g["a2a"]))
    assert out["node-limited"] < out["per-expert"]
