"""The EP straggler from expert load imbalance (analytic/step/imbalance.py).

Source of the routing: Megatron-Core's router (megatron/core/transformer/moe/router.py
TopKRouter.forward) replaces the gating logits by random normal ones when
moe_router_force_load_balancing is on (moe_utils.py RandomSTE), then runs its ordinary top-k or
group-limited selection; the Megatron-Bridge performance benchmarks set it (source
megatron-core-force-load-balancing). The tests simulate that routing with numpy, independently
of the closed form, and compare."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster, make_job, search
from scalemodel.analytic.step import comm, layers
from scalemodel.analytic.step.imbalance import ep_straggler, expected_max_normal, rank_violation
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import job_settings


def _simulate(E, k, ep, N, G=0, g=0, trials=20, seed=0):
    """Mean over trials of max_rank / mean - 1 for one layer of N tokens routed from random
    logits: sigmoid scores (DeepSeek-V3's score function; softmax orders the experts the same);
    group-limited routing scores each group by the sum of its top k / g experts, keeps the g
    best groups and takes the top-k of their experts (Megatron-Core moe_utils
    group_limited_topk). Experts sit on the ranks in order, E / ep each."""
    rng = np.random.default_rng(seed)
    n = E // ep
    vs = []
    for _ in range(trials):
        s = 1.0 / (1.0 + np.exp(-rng.standard_normal((N, E), dtype=np.float32)))
        if G:
            gs = np.sort(s.reshape(N, G, E // G), axis=-1)[:, :, -(k // g):].sum(-1)
            keep = np.argpartition(-gs, g - 1, axis=1)[:, :g]
            mask = np.zeros((N, G), bool)
            np.put_along_axis(mask, keep, True, 1)
            s = np.where(np.repeat(mask, E // G, 1), s, -1.0)
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        load = np.bincount((top // n).ravel(), minlength=ep)
        vs.append(load.max() / load.mean() - 1.0)
    return float(np.mean(vs)), float(np.std(vs) / math.sqrt(trials))


def test_expected_maximum_of_normals_closed_forms():
    # E[max of 2] = 1 / sqrt(pi); E[max of 3] = 3 / (2 sqrt(pi)) (order statistics of normals)
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-6)
    assert expected_max_normal(1) == 0.0


@pytest.mark.parametrize("E,k,ep", [(128, 8, 8), (128, 8, 32)])
def test_plain_top_k_matches_the_simulated_router(E, k, ep):
    # Qwen3 MoE: 128 experts, top-8; EP8 and EP32 as the Megatron-Bridge rows run them
    sim, se = _simulate(E, k, ep, 8192)
    assert rank_violation(E, k, ep, 8192) == pytest.approx(sim, abs=3 * se + 0.05 * sim)


def test_group_limited_routing_inside_one_group():
    # DeepSeek-V3: 256 experts in 8 groups, a token's 8 experts in 4 of them; at EP64 a rank's
    # 4 experts lie inside one 32-expert group: the closed form (uniform draw inside the picked
    # groups) agrees with the simulation to its sampling error
    sim, se = _simulate(256, 8, 64, 8192, 8, 4)
    assert rank_violation(256, 8, 64, 8192, 8, 4) == pytest.approx(sim, abs=3 * se + 0.05 * sim)
    # at EP8 a rank is a whole group: the picked groups' top values spread a token's experts
    # more evenly than a uniform draw, so the closed form is an upper bound there
    sim8, _ = _simulate(256, 8, 8, 8192, 8, 4)
    v8 = rank_violation(256, 8, 8, 8192, 8, 4)
    assert sim8 < v8 < 1.35 * sim8


def test_spread_falls_as_one_over_root_tokens():
    # the derivation: v = z_ep sqrt(Var X / N ep / (ep - 1)) / E[X]
    assert rank_violation(128, 8, 8, 4 * 8192) == pytest.approx(
        rank_violation(128, 8, 8, 8192) / 2, rel=1e-9)
    assert rank_violation(128, 8, 1, 8192) == 0.0


def _job(fid, gpu, model="qwen3-30b-a3b"):
    m = get_model(model)
    _, s = job_settings(fid, gpu, model=m.id)
    return m, make_job(m, seq_len=4096, global_batch_seqs=512, precision="fp8", **s)


def test_routing_belongs_to_the_profile():
    # the NeMo benchmark profiles force-balance; Megatron-Core's default and DeepSeek's own
    # framework route with the trained router, whose per-micro-batch EP-rank spread no source
    # read here measures: no straggler priced (v = 0)
    for fid, gpu, want in (("nemo-25.11", "h100-sxm", True), ("nemo-26.04", "b200", True),
                           ("megatron-core", "h100-sxm", False),
                           ("deepseek-hai-llm", "h800", False)):
        m, job = _job(fid, gpu, "deepseek-v3" if fid == "deepseek-hai-llm" else "qwen3-30b-a3b")
        c = SimpleNamespace(job=job, m=m, ep=np.array([8.0]), etp=np.array([1.0]),
                            T=np.array([4096.0]), tp=np.array([1.0]))
        v = float(ep_straggler(c)[0])
        assert (v > 0) == want
        if want:
            # each of the 8 ranks routes 4096 tokens: N = 32768
            assert v == pytest.approx(rank_violation(128, 8, 8, 8 * 4096), rel=1e-12)


_LAYOUT = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 8, "etp": 1, "zero": 1, "vpp": 1,
           "micro_batch": 1, "recompute": "none"}


def test_the_straggler_reaches_the_expert_and_dispatch_terms(monkeypatch):
    # a hypothetical v = 0.5: the step grows, and the growth is the experts' and the EP
    # collectives' (attention and the dense parts are untouched)
    m, job = _job("nemo-25.11", "b200")
    cl = make_cluster("b200", 8)
    base = search(job, cl, _LAYOUT, top=0).best.values
    half = lambda c: 0.5 + 0.0 * np.asarray(c.ep, dtype=np.float64)  # noqa: E731
    monkeypatch.setattr(layers, "ep_straggler", half)
    monkeypatch.setattr(comm, "ep_straggler", half)
    slow = search(job, cl, _LAYOUT, top=0).best.values
    assert float(slow.step_time_s) > float(base.step_time_s)
    assert float(slow.attention_s) == pytest.approx(float(base.attention_s), rel=1e-9)
    assert float(slow.ep_s) > float(base.ep_s)
    assert float(slow.compute_s) > float(base.compute_s)
