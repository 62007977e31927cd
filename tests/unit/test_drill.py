"""Drills: the JSON contract, determinism, grading, and answers checked by an independent formula."""

import json

import pytest

from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.study.drills import grade, make_drill, parse_typed, topics


def test_json_keys(capsys):
    assert main(["drill", "--topic", "kv-cache", "--seed", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr()[0])
    for k in ("prompt", "parameters", "answer", "unit", "tolerance"):
        assert k in d
    assert d["unit"] == "GB"


@pytest.mark.parametrize("seed", [3, 4, 17, 29])  # GQA bf16 and fp8; MLA (deepseek-v3) both
def test_kv_answer_by_independent_formula(seed):
    d = make_drill("kv-cache", seed).to_dict()
    p = d["parameters"]
    m = get_model(p["model"])
    e = {"bf16": 2, "fp8": 1}[p["kv_dtype"]]
    if m.attention == "mla":
        # MLA (DeepSeek-V2 paper, Sec. 2.1): one compressed latent of kv_lora_rank plus the
        # decoupled RoPE key of qk_rope_head_dim per layer and token, shared by all heads
        per_token = m.n_layers * (m.kv_lora_rank + m.qk_rope_head_dim) * e
    else:
        # 2 (K and V) x layers x KV heads x head dim x bytes
        per_token = 2 * m.n_layers * m.n_kv_heads * m.head_dim * e
    assert d["answer"] == pytest.approx(per_token * p["context"] * p["batch"] / 1e9)
    assert d["unit"] == "GB"


def test_kv_seeds_cover_both_attention_kinds():
    # the drill draws from every bundled model, so over enough seeds it asks about an MLA cache
    # (DeepSeek-V3) as well as per-head K/V caches; the seeds are a range, not picked ones
    kinds = {get_model(make_drill("kv-cache", s).to_dict()["parameters"]["model"]).attention
             for s in range(64)}
    assert "mla" in kinds and len(kinds) >= 2


def test_deterministic_in_seed():
    for t in topics():
        a, b = make_drill(t, 11), make_drill(t, 11)
        assert a.to_dict() == b.to_dict()


def test_grading_within_tolerance():
    d = make_drill("roofline", 5)
    assert grade(d, f"{d.answer * (1 + d.tolerance / 2)}").correct
    assert not grade(d, f"{d.answer * (1 + 2 * d.tolerance)}").correct
    assert parse_typed("42 %", "%") == 42 and parse_typed("1,024", "GB") == 1024
    assert parse_typed("2048 MB", "GB") == pytest.approx(2.048)
    with pytest.raises(BadInput):
        parse_typed("lots", "GB")


def test_answer_flag_grades(capsys):
    main(["drill", "--topic", "scale-scoping", "--seed", "2", "--json"])
    d = json.loads(capsys.readouterr()[0])
    assert main(["drill", "--topic", "scale-scoping", "--seed", "2", "--answer",
                 str(d["answer"]), "--json"]) == 0
    g = json.loads(capsys.readouterr()[0])["grade"]
    assert g["correct"] is True


def test_interactive_session(monkeypatch, capsys):
    d = make_drill("kv-cache", 7)
    answers = iter([str(d.answer), ""])
    monkeypatch.setattr("builtins.input", lambda: next(answers))
    assert main(["drill", "--topic", "kv-cache", "--seed", "7", "--count", "2"]) == 0
    out = capsys.readouterr()[0]
    assert "correct" in out and "1 of 1 correct" in out


def test_bad_topic_exit_2(capsys):
    assert main(["drill", "--topic", "nope"]) == 2
    assert capsys.readouterr()[1].count("\n") == 1
