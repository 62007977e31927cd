"""Drills for all 24 questions (issue 20, item 4): each topic's answer re-derived here from the
drill's parameters, a right answer graded right, a wrong one wrong, and a classic mistake named."""

import math

import pytest

from scalemodel.analytic.params import count_params
from scalemodel.questions import BANK
from scalemodel.specs import get_gpu, get_link, get_model
from scalemodel.study.drills import all_mistakes, grade, make_drill, topics

SEED = 7


def _by_hand(topic, p, d):
    """The answer from the parameters, by the textbook formula (None: checked elsewhere)."""
    if topic == "parallelism-traffic":
        n = p["gpus"]
        return 2 * (n - 1) / n * 2 * p["params"] / 1e9
    if topic == "ring-allreduce":
        N = p["ranks"]
        return 2 * (N - 1) / N * p["bytes"] / get_link(p["link"]).bytes_per_s_per_direction * 1e3
    if topic == "fabric-map":  # 4 + 6 TP collectives per layer (Korthikanti 2022, with the
        # weight-gradient inputs re-gathered), each sending 7/8 of one gathered activation
        m = get_model(p["model"])
        calls = 10 * p["layers_slowest_stage"] * p["micro_batches"]
        return calls * 7 / 8 * p["seq_len"] * m.hidden * 2 / 1e9
    if topic == "nccl-topology":
        n = p["ranks"]
        return p["bytes"] / (p["time_ms"] / 1e3) * 2 * (n - 1) / n / 1e9
    if topic == "roce-vs-ib":
        return p["bytes"] / (get_link(p["link"]).bytes_per_s_per_direction * p["efficiency"]) * 1e3
    if topic == "moe-latency-layout":
        m, n = get_model(p["model"]), p["ep"]
        return p["tokens"] * m.top_k * m.hidden * 2 * (n - 1) / n / 1e6
    if topic == "moe-global-serving":
        m = get_model(p["model"])
        return m.n_moe_layers * m.n_experts * p["expert_params"] / p["gpus"] / 1e9
    if topic == "moe-routing":
        return math.ceil(p["capacity_factor"] * p["tokens"] * p["k"] / p["experts"])
    if topic == "gpu-hierarchy":  # resident blocks per SM come from the occupancy engine
        return math.ceil(p["blocks"] / (get_gpu(p["gpu"]).sm_count * p["blocks_per_sm"]))
    if topic == "memory-hierarchy":
        g = get_gpu(p["gpu"])
        return g.hbm_bytes_per_s * p["latency_cycles"] / g.boost_clock_hz / g.sm_count / 1e3
    if topic == "coalescing-transpose":  # aligned base: a gap of >= 32 B puts each lane alone
        gap = p["stride"] * p["elem_bytes"]
        return 32 if gap >= 32 else gap
    if topic == "warp-divergence":  # both sides one instruction; a warp with both issues twice
        k, b = int(p["predicate"].split("%")[1].split("==")[0]), p["block"]
        warps = b // 32
        divergent = warps if k <= 32 else b // k
        return 100 * b / (32 * (warps + divergent))
    if topic == "billing":
        inc = p["increment_s"]
        return sum(math.ceil(t / inc) * inc for t in p["durations_s"]) / 3600 * p["rate"] * p["gpus"]
    if topic == "blast-radius":
        return p["tp"] * p["pp"] * p["dp"]
    if topic == "checkpoint-failures":
        return math.sqrt(2 * p["delta_s"] * p["mtbf_gpu_h"] * 3600 / p["gpus"]) / 60
    if topic == "hang-triage":
        return p["counts"].index(min(p["counts"]))
    if topic == "slowdown-triage":
        return p["step_ms"] * (1 + p["slow_percent"] / 100)
    if topic == "cluster-scheduler":
        return sum(f for f in p["free"] if f < 8)
    if topic in ("scale-scoping", "resume-walk"):
        N = count_params(get_model(p["model"])).total
        peak = get_gpu(p["gpu"]).peak_flop_per_s("bf16")
        if topic == "scale-scoping":
            return 6 * N * p["tokens"] / (p["gpus"] * peak * p["mfu"]) / 86400
        return 100 * 6 * N * p["tokens"] / (p["gpus"] * peak * p["days"] * 86400)
    if topic == "roofline":
        if "M" not in p:
            g = get_gpu(p["gpu"])
            return g.peak_flop_per_s("bf16") / g.hbm_bytes_per_s
        M, N, K = p["M"], p["N"], p["K"]
        return 2 * M * N * K / (2 * (M * K + K * N + M * N))
    return None  # kv-cache, training-memory (test_drill.py), occupancy (NVIDIA calculator tests)


def test_every_question_has_a_drill():
    assert topics() == [q.id for q in BANK]


def test_distinct_topics_draw_distinct_drills():
    prompts = [make_drill(t, SEED).prompt for t in topics()]
    assert len(set(prompts)) == len(prompts)
    assert make_drill("scale-scoping", 2).unit != make_drill("resume-walk", 2).unit


@pytest.mark.parametrize("topic", [q.id for q in BANK])
def test_topic_grades_right_wrong_and_a_named_mistake(topic):
    d = make_drill(topic, SEED)
    assert d.topic == topic and d.answer == d.answer  # not NaN
    want = _by_hand(topic, d.parameters, d)
    if want is not None:
        assert d.answer == pytest.approx(want, rel=1e-6)
    g = grade(d, repr(d.answer))
    assert g.correct and g.diagnosis is None
    wrong = grade(d, repr(d.answer * 3.7 + 1))
    assert not wrong.correct
    mistakes = all_mistakes(d)
    own = [m for m in mistakes if m in d.mistakes]
    assert own, f"{topic}: no classic mistake of its own applies at seed {SEED}"
    m = own[0]
    first_same = next(x for x in mistakes if math.isclose(x.value, m.value, rel_tol=0.01))
    gm = grade(d, repr(m.value))
    assert not gm.correct
    assert gm.diagnosis == first_same.name


@pytest.mark.parametrize("typed, name", [
    # kv-cache, seed 7: GQA model; K without V is half, GiB is x 1e9 / 2^30
    ("half", "K without V"), ("gib", "GiB for GB (2^30 vs 1e9)"), ("bits", "bits for bytes")])
def test_kv_classic_mistakes(typed, name):
    d = make_drill("kv-cache", 7)
    v = {"half": d.answer / 2, "gib": d.answer * 1e9 / 2**30, "bits": 8 * d.answer}[typed]
    assert grade(d, repr(v)).diagnosis == name


def test_percentage_as_fraction_is_named():
    d = make_drill("resume-walk", 3)
    assert grade(d, repr(d.answer / 100)).diagnosis == "a percentage given as a fraction"


def test_kv_drill_for_deepseek_names_the_latent():
    # seed 19 draws deepseek-v3: its cache is the 512-dim latent + the 64-dim RoPE key per layer
    # and token (DeepSeek-V2 Sec. 2.1), 61 x 576 x 2 B = 70,272 B per token in bf16
    d = make_drill("kv-cache", 19)
    p = d.parameters
    assert p["model"] == "deepseek-v3"
    assert "latent of 512" in d.prompt and "RoPE key of 64" in d.prompt
    e = {"bf16": 2, "fp8": 1}[p["kv_dtype"]]
    assert d.answer == pytest.approx(61 * (512 + 64) * e * p["context"] * p["batch"] / 1e9)


def test_ring_allreduce_bad_topic_lists_real_topics(capsys):
    from scalemodel.cli import main

    assert main(["drill", "--topic", "ring-allreduce", "--seed", "1", "--json"]) == 0
    assert main(["drill", "--topic", "ring-allreduc", "--seed", "1"]) == 2
    err = capsys.readouterr()[1]
    assert "ring-allreduce" in err and err.count("\n") == 1


def test_gpu_hierarchy_draws_only_launchable_blocks():
    """Seed 21 drew 1,024 threads x 128 registers: 131,072 registers a block against a 65,536-entry
    file (Hopper and Ampere datasheets), so no block is resident and the wave count divided by
    zero (found by the web fuzz test through /api/drill). Every draw must launch, and its waves
    follow the textbook ceil(G / (n_sm b))."""
    for seed in range(300):
        d = make_drill("gpu-hierarchy", seed)
        p = d.parameters
        assert p["threads"] * p["regs"] <= 65536
        assert p["blocks_per_sm"] >= 1
        assert d.answer == _by_hand("gpu-hierarchy", p, d)


def test_every_topic_draws_without_error_across_seeds():
    for topic in topics():
        for seed in range(25):
            d = make_drill(topic, seed)
            assert d.answer == d.answer, (topic, seed)  # not NaN
