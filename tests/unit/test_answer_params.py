"""Each question takes only the parameters it declares (questions/<id>.py PARAMS): `answer ID
--help` lists exactly those, any other flag is refused with one line and exit 2, and every
declared parameter moves the answer (its --json changes when the parameter does)."""

import json

import pytest

from scalemodel.cli import main
from scalemodel.questions import BANK, params_of

ANSWERED = [q.id for q in BANK if q.status == "answered"]
# output switches every question has (not parameters)
OUTPUT_FLAGS = {"-h", "--help", "--json", "--markdown", "--plot"}
# a cheaper classic scenario where the question trains or simulates at length; the parameter
# under test is varied against this base (same code path)
BASE = {"moe-routing": ["--tokens", "256", "--steps", "30"]}
# parameters that only apply to a fresh run of real processes (--live): tests/live
LIVE_ONLY = {("hang-triage", "ranks")}
# what the answer echoes of its inputs: not part of the answer itself
ECHO = ("parameters", "options")

# alternative values to try, by parameter name (the first one the question accepts is used)
BY_NAME = {
    "model": ["llama-2-7b", "mixtral-8x7b", "qwen3-30b-a3b", "llama-3-8b"],
    "gpu": ["a100-sxm-80gb", "h200", "h100-sxm"],
    "compare_model": ["llama-2-7b"],
    "dtype": ["fp8", "fp16", "float16", "bf16", "fp32"],
    "kv_dtype": ["fp8", "int4"],
    "optimizer": ["sgd", "adam-8bit"],
    "intra": ["nvlink5", "nvlink3", "pcie5"],
    "inter": ["hdr-200", "xdr-800", "roce-400"],
    "claim": ["trained a 7B model on 64 A100s for 300B tokens in 9 days"],
    "layout": ["tp=8,pp=4,dp=512", "tp8 pp8 zero1", "tp8 pp4 zero1"],
    "gpus": ["2048", "64", "512", "4096", "96"],
    "smem": ["49152", "100000"],
    "dp": ["8", "2"],
    "tokens": ["300B", "512"],
    "days": ["30"],
    "mfu": ["0.3"],
    "seq_len": ["8192", "2048"],
    "experts": ["32", "16"],
    "top_k": ["1", "4"],
    "skew": ["1.5", "0.5"],
}


def _candidates(p):
    if p.name in BY_NAME:
        return [v for v in BY_NAME[p.name] if v != p.default_text()]
    if p.choices:
        return [c for c in p.choices if c != p.default]
    d = p.default
    if isinstance(d, int | float) and not isinstance(d, bool):
        raw = [d * 2, d / 2, d + 1, d - 1] if p.kind in ("float", "bytes", "fraction") \
            else [d * 2, d // 2, d + 1, d - 1]
        ok = [v for v in raw if v != d and (p.lo is None or v >= p.lo)
              and (p.hi is None or v <= p.hi)]
        return [f"{v:g}" if isinstance(v, float) else str(v) for v in ok]
    return ["0.5", "2", "8"]


def _json(capsys, qid, *argv):
    try:
        rc = main(["answer", qid, *BASE.get(qid, []), *argv, "--json"])
    except SystemExit as e:  # argparse refuses a value: one line, exit 2
        rc = e.code
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


def _answer(d):
    return {k: v for k, v in d.items() if k not in ECHO}


_classic: dict = {}


def _cases():
    for qid in ANSWERED:
        for p in params_of(qid):
            if p.kind == "bool" or (qid, p.name) in LIVE_ONLY:  # real processes: tests/live
                continue
            if qid in BASE and p.flag in BASE[qid]:
                continue  # varied below against the full classic scenario's other values
            yield pytest.param(qid, p.name, id=f"{qid}:{p.flag}")


@pytest.mark.parametrize("qid, name", list(_cases()))
def test_every_declared_parameter_moves_the_answer(capsys, qid, name):
    p = next(x for x in params_of(qid) if x.name == name)
    if qid not in _classic:
        rc, d, err = _json(capsys, qid)
        assert rc == 0, err
        _classic[qid] = d
    tried = []
    for v in _candidates(p):
        rc, d, err = _json(capsys, qid, p.flag, v)
        if rc != 0:
            tried.append((v, err.strip()))
            continue
        assert d["parameters"][p.name] is not None
        assert _answer(d) != _answer(_classic[qid]), f"{p.flag} {v} did not change the answer"
        return
    pytest.fail(f"no alternative value of {p.flag} was accepted: {tried}")


def test_moe_routing_cost_parameters_move_the_answer(capsys):
    # tokens and steps are the cheap base above: vary each away from it
    rc, a, _ = _json(capsys, "moe-routing")
    for argv in (["--tokens", "128"], ["--steps", "20"]):
        assert main(["answer", "moe-routing", "--tokens", "256", "--steps", "30", *argv,
                     "--json"]) == 0
        b = json.loads(capsys.readouterr()[0])
        assert _answer(b) != _answer(a), argv


@pytest.mark.parametrize("qid", ANSWERED)
def test_help_lists_exactly_the_declared_parameters(capsys, qid):
    with pytest.raises(SystemExit) as e:
        main(["answer", qid, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr()[0]
    import re

    listed = set(re.findall(r"^\s+(--?[a-z][a-z0-9-]*)", out, re.M))
    assert listed - OUTPUT_FLAGS == {p.flag for p in params_of(qid)}
    assert "default: None" not in out and "(default None" not in out


def _all_flags():
    return {p.flag: p for q in ANSWERED for p in params_of(q)}


@pytest.mark.parametrize("qid", ANSWERED)
def test_a_flag_of_another_question_is_refused(capsys, qid):
    own = {p.flag for p in params_of(qid)}
    foreign = sorted(set(_all_flags()) - own)
    for flag in foreign[:3]:
        p = _all_flags()[flag]
        argv = [flag] if p.kind == "bool" else [flag, (_candidates(p) or ["1"])[0]]
        with pytest.raises(SystemExit) as e:
            main(["answer", qid, *argv])
        assert e.value.code == 2
        err = capsys.readouterr()[1]
        assert err.count("\n") == 1 and flag in err and "not a parameter" in err


@pytest.mark.parametrize("argv, needle", [
    # the overrides the review found silently ignored (issue 20)
    (["kv-cache", "--regs", "64"], "--regs is not a parameter of kv-cache"),
    (["kv-cache", "--ranks", "64", "--budget", "tight"], "--ranks is not a parameter"),
    (["hang-triage", "--ranks", "8"], "add --live"),
    (["blast-radius", "--gpus", "100"], "whole 8-GPU nodes"),
    (["blast-radius", "--gpus", "32768", "--layout", "tp=8,pp=4,dp=512"], "uses 16384 GPUs"),
    (["parallelism-traffic", "--gpus", "60"], "not a multiple"),
    (["moe-routing", "--model", "llama-3-70b"], "no routed experts"),
    (["kv-cache", "--tp", "0"], "between 1 and 1,024"),
    (["answer-nope"], "unknown question"),
])
def test_refused_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        raise SystemExit(main(["answer", *argv]))
    assert e.value.code == 2
    err = capsys.readouterr()[1]
    assert err.count("\n") == 1 and needle in err, err


def test_blast_radius_honours_the_layout(capsys):
    # the same layout as `reliability blast-radius --layout` (one parser), all its numbers too
    rc, d, err = _json(capsys, "blast-radius", "--layout", "tp=8,pp=4,dp=512")
    assert rc == 0, err
    assert main(["reliability", "blast-radius", "--gpus", "16384", "--layout",
                 "tp=8,pp=4,dp=512", "--json"]) == 0
    tool = json.loads(capsys.readouterr()[0])
    assert d["layout"] == tool["layout"] and d["gpus"] == 16384
    assert d["gpu_hours_per_month"] == tool["gpu_hours_per_month"]
    # 4 stages per pipeline: a rack (4 nodes x 8 GPUs = 32 ranks) holds tp groups of ranks that,
    # in Megatron's order tp-cp-ep-dp-pp, are 4 consecutive dp replicas of one stage
    rack = next(f for f in d["faults"] if f["component"] == "rack")
    assert rack["replicas_hit"] == 32 // 8


def test_blast_radius_gpus_keeps_pipeline_parallelism(capsys):
    rc, d, err = _json(capsys, "blast-radius", "--gpus", "32768")
    assert rc == 0, err
    # 32,768 = tp 8 x pp 16 x dp 256: the classic pipeline depth is kept, DP doubles
    assert set(d["layout"].split(",")) == {"tp=8", "pp=16", "dp=256"} and d["gpus"] == 32768


def test_parallelism_traffic_gpus_sets_dp(capsys):
    rc, d, err = _json(capsys, "parallelism-traffic", "--gpus", "64")
    assert rc == 0, err
    # tp 8 x pp 4 = 32 GPUs per replica, so 64 GPUs are 2 data-parallel replicas
    assert d["traffic"]["layout"]["dp"] == 2 and d["traffic"]["layout"]["gpus"] == 64
    rc, d16, _ = _json(capsys, "parallelism-traffic")
    assert d16["traffic"]["layout"]["dp"] == 16


def test_moe_routing_takes_the_model_router_shape(capsys):
    from scalemodel.specs import get_model

    rc, d, err = _json(capsys, "moe-routing", "--model", "qwen3-30b-a3b")
    assert rc == 0, err
    m = get_model("qwen3-30b-a3b")  # its config.json: 128 routed experts, 8 per token
    assert (m.n_experts, m.top_k) == (128, 8)
    assert d["options"]["experts"] == 128 and d["options"]["top_k"] == 8


def test_answer_json_lists_only_declared_parameters(capsys):
    rc, d, _ = _json(capsys, "kv-cache", "--tp", "4")
    assert set(d["parameters"]) == {p.name for p in params_of("kv-cache")}
    assert d["parameters"]["tp"] == 4 and "regs" not in d["options"]
