"""The planner's overlap terms: compute slowdown beside collectives, MoE dispatch and overlap."""

import numpy as np
import pytest

from scalemodel.analytic.planner import (
    breakdown,
    dispatch_copies,
    make_cluster,
    make_job,
    search,
)
from scalemodel.specs import get_model


def test_node_limited_dispatch_from_the_config():
    # DeepSeek-V3 (config: n_group 8, topk_group 4; report Sec. 3.2.2): a token reaches at most
    # 4 nodes, but Megatron-Core's all-to-all dispatcher still sends one row per (token, expert)
    # pair, top_k = 8 of them, across domains or not; the 4-node bound pays only with a
    # per-destination dispatcher (tests/unit/test_moe_dispatch_recipes.py)
    m = get_model("deepseek-v3")
    assert m.expert_groups == 8 and m.groups_per_token == 4
    assert float(dispatch_copies(m, 64, 8)) == m.top_k
    assert float(dispatch_copies(m, 8, 8)) == m.top_k
    # Mixtral 8x7B (bundled; config has no expert groups): every one of its top-2 copies
    mix = get_model("mixtral-8x7b")
    assert mix.top_k == 2
    assert float(dispatch_copies(mix, 8, 1)) == 2


def _deepseek(ep_overlap: bool):
    m = get_model("deepseek-v3")
    # the report's final batch (15360: 120 micro-batches per pipeline); with 1920 (15 of them)
    # fewer micro-batches than the 16 stages leave combined 1F1B nothing to pair. DeepSeek's own
    # framework (deepseek-hai-llm): Megatron-Core refuses the EP overlap with full recompute
    # (tests/unit/test_moe_preprocess_overlap.py), DeepSeek's runs recompute inside it
    job = make_job(m, seq_len=4096, global_batch_seqs=15360, precision="fp8",
                   ep_overlap=ep_overlap, framework_id="deepseek-hai-llm")
    cl = make_cluster("h800", 2048)
    lay = {"tp": 1, "pp": 16, "dp": 128, "cp": 1, "ep": 64, "zero": 1, "vpp": 1,
           "micro_batch": 1, "recompute": "full"}
    return search(job, cl, lay, top=0).best.values


def test_ep_overlap_hides_all_to_all_and_costs_slowdown():
    plain, over = _deepseek(False), _deepseek(True)
    assert over.ep_s < plain.ep_s
    assert over.overlap_s > plain.overlap_s
    assert over.step_time_s < plain.step_time_s
    assert over.lower_s <= over.step_time_s <= over.upper_s


@pytest.mark.parametrize("model,gpus,seq", [("llama-3-8b", 64, 8192), ("llama-3-70b", 512, 4096)])
def test_breakdown_sums_to_step(model, gpus, seq):
    m = get_model(model)
    job = make_job(m, seq_len=seq, global_batch_tokens=4 * 1024 * 1024)
    res = search(job, make_cluster("h100-sxm", gpus), {}, top=3)
    for r in res.rows:
        v = r.values
        assert sum(breakdown(v).values()) == pytest.approx(v.step_time_s, rel=1e-9)
        # the slowdown is sigma (Lee et al. 2025: 18.9%) of hidden communication, never more
        # than the communication that could have been exposed
        hidden_max = v.upper_s - v.lower_s
        assert 0 <= v.overlap_s <= 0.189 * hidden_max + 1e-12
        assert np.isfinite(v.step_time_s)


def test_fabric_map_ends_with_a_planned_layout():
    from scalemodel.questions import fabric_map

    rep = fabric_map.build({})
    assert rep.sections[-1].heading.startswith("3. The planner's layout")
    best = rep.data["planned_layout"]["best"]
    assert best["tp"] * best["pp"] * best["dp"] * best["cp"] == 8 * 4 * 16


def test_the_answers_planned_layout_is_plan_trains(capsys):
    """s19-review2: the answers' section headed '(scalemodel plan train)' (training-memory,
    fabric-map: views/plan.planned_layout_section) prices the job plan train prices for the
    same model, GPUs, sequence and batch: the default framework profile's kernels
    (frameworks.toml megatron-core: flash3 attention on Hopper). It built its Job with
    make_job's bare defaults (attention flash), so llama-3-70b on 64 H100 read 64.42 s per
    step where plan train reads 59.52 s for the same layout."""
    from conftest import cli_json
    from scalemodel.views.plan import planned_layout_section

    _, d = planned_layout_section("llama-3-70b", "h100-sxm", 64, seq_len=8192,
                                  global_batch_tokens=4 * 1024 * 1024)
    plan = cli_json(capsys, "plan", "train", "--model", "llama-3-70b", "--gpu", "h100-sxm",
                    "--gpus", "64", "--seq-len", "8192", "--global-batch-tokens", "4194304")
    assert d["best"] == plan["best"]
    assert d["step_time_s"] == plan["step_time_s"]
    assert d["memory_per_gpu_bytes"] == plan["memory_per_gpu_bytes"]
