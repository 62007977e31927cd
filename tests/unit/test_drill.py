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
    # the KV formula, written here: 2 (K and V) x layers x KV heads x head dim x bytes x tokens
    p = d["parameters"]
    m = get_model(p["model"])
    e = {"bf16": 2, "fp8": 1}[p["kv_dtype"]]
    if m.attention != "mla":
        kv = 2 * m.n_layers * m.n_kv_heads * m.head_dim * e * p["context"] * p["batch"]
        assert d["answer"] == pytest.approx(kv / 1e9) and d["unit"] == "GB"


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
