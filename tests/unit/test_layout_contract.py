"""One layout, one price: plan train, memory, comm traffic and plan train --layouts agree on the
same layout (issue 15), every layout key is honoured or refused in one line, and the layout and
framework inputs fail in one line."""

import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import cli_json, frameworks_file_refusal, one_line_refusal
from conftest import run_cli as run
from scalemodel.analytic.layout import KEY_NAMES, Context, TrainLayout, check, parse_layout
from scalemodel.errors import BadInput
from scalemodel.specs import get_model


def text(lay: dict) -> str:
    return ",".join(f"{k}={'/'.join(map(str, v)) if isinstance(v, list | tuple) else int(v) if isinstance(v, bool) else v}"
                    for k, v in lay.items())


# --- the same layout in every command ---------------------------------------------------------

MODELS = ("llama-3-8b", "llama-3-70b", "mixtral-8x7b", "qwen3-30b-a3b")


@st.composite
def jobs(draw):
    mid = draw(st.sampled_from(MODELS))
    m = get_model(mid)
    lay = TrainLayout(
        tp=draw(st.sampled_from((1, 2, 4, 8))), pp=draw(st.sampled_from((1, 2, 4))),
        dp=draw(st.sampled_from((1, 2, 4, 8))), cp=draw(st.sampled_from((1, 2))),
        ep=draw(st.sampled_from((1, 2, 4, 8))) if m.is_moe else 1,
        zero=draw(st.integers(0, 3)), vpp=draw(st.sampled_from((1, 2))),
        micro_batch=draw(st.sampled_from((1, 2))),
        recompute=draw(st.sampled_from(("none", "selective", "full"))))
    if m.is_moe and draw(st.booleans()):
        lay = lay.with_(etp=1)
    seq = draw(st.sampled_from((2048, 4096)))
    batch = draw(st.sampled_from((64, 128, 256)))
    return mid, lay, seq, batch


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs())
def test_memory_traffic_and_step_agree_across_commands(capsys, case):
    mid, lay, seq, batch = case
    m = get_model(mid)
    try:
        check(lay, Context(m, lay.gpus, batch, seq))
    except BadInput:
        assume(False)
    common = ("--model", mid, "--seq-len", str(seq), "--global-batch", str(batch))
    keys = text(lay.as_dict())
    mem = cli_json(capsys, "memory", *common, "--layout", keys)
    traffic = cli_json(capsys, "comm", "traffic", *common, "--layout", keys)
    rc, out, err = run(capsys, "plan", "train", *common, "--gpus", str(lay.gpus), "--layout",
                       keys, "--json")
    if rc == 2:  # the planner refuses a pinned layout that does not fit; memory agrees
        assert "does not fit" in err
        assert mem["fits"] is False and mem["per_gpu_bytes"] > mem["capacity_bytes"]
        return
    plan = json.loads(out)
    assert plan["best"] == lay.as_dict()
    assert mem["per_gpu_bytes"] == plan["memory_per_gpu_bytes"]
    assert traffic["strategies"] == plan["traffic"]
    assert traffic["step_time_s"] == plan["step_time_s"]
    assert mem["framework"] == traffic["framework"] == plan["framework"] == "megatron-core"


def test_layouts_file_rows_equal_single_plans(capsys, tmp_path):
    rows = [dict(tp=8, pp=2, zero=1, recompute="selective"), dict(tp=4, pp=1, zero=3),
            dict(tp=2, pp=4, vpp=2, zero=1, micro_batch=2, recompute="full")]
    csv = tmp_path / "l.csv"
    cols = ("tp", "pp", "zero", "vpp", "micro_batch", "recompute")
    csv.write_text(",".join(cols) + "\n" + "".join(
        ",".join(str(r.get(c, "")) for c in cols) + "\n" for r in rows))
    jl = tmp_path / "l.jsonl"
    jl.write_text("".join(json.dumps(r | {"model": "llama-3-70b", "gpus": 64}) + "\n"
                          for r in rows))
    base = ("plan", "train", "--model", "llama-3-70b", "--gpus", "64", "--seq-len", "4096")
    for f in (csv, jl):
        rc, out, err = run(capsys, *base, "--layouts", str(f), "--json")
        assert rc == 0, err
        got = [json.loads(line) for line in out.splitlines()]
        assert [g["row"] for g in got] == [1, 2, 3]
        for g in got:
            one = cli_json(capsys, *base, "--layout", text(g["layout"]))
            assert g["step_time_s"] == one["step_time_s"]
            assert g["memory_per_gpu_bytes"] == one["memory_per_gpu_bytes"]


@pytest.mark.parametrize("body, needle", [
    ("tp,pp\n8,9\n", "row 1"),             # pp 9 does not divide 64 GPUs
    ("tp,color\n8,red\n", "unknown column 'color'"),
    ("tp\nx\n", "whole number"),
    ("{\"tp\": 8}\n{oops\n", "line 2 is not JSON"),
    ("", "no rows"),
    # s19-review2: a 0 in a row's gpus or seq_len was read as absent ("0 or the command
    # line's"), so the row was priced on --gpus 64 / --seq-len 8192 without a word
    ("tp,pp,gpus\n8,1,0\n", "gpus"),
    ("tp,pp,seq_len\n8,1,0\n", "seq_len"),
    ("tp,pp,gpus\n8,1,-8\n", "gpus"),
    ("tp,pp,global_batch\n8,1,0\n", "global_batch"),
])
def test_layouts_file_bad_input_is_one_line(capsys, tmp_path, body, needle):
    f = tmp_path / ("l.jsonl" if body.startswith("{") else "l.csv")
    f.write_text(body)
    rc, out, err = run(capsys, "plan", "train", "--gpus", "64", "--layouts", str(f))
    assert one_line_refusal(rc, out, err) and needle in err, err


# --- every key, every command ------------------------------------------------------------------

# mixtral-8x7b on 64 GPUs: a base layout and, per key, a layout that differs in that key (other
# keys move only where the GPU count forces them)
BASE = dict(tp=2, pp=2, dp=16, cp=1, ep=8, etp=2, zero=1, vpp=1, micro_batch=1,
            recompute="none", stages=(16, 16))
CHANGED = {
    "tp": dict(tp=4, dp=8),
    "pp": dict(pp=4, dp=8, stages=(8, 8, 8, 8)),
    "dp": dict(dp=8, ep=4),
    "cp": dict(cp=2, dp=8),
    "ep": dict(ep=4),
    "etp": dict(etp=1),
    "zero": dict(zero=2),
    "vpp": dict(vpp=2, stages=None),
    "micro_batch": dict(micro_batch=2),
    "recompute": dict(recompute="full"),
    # against the same mode without the key (BASE_FOR): Megatron-Core's selective default
    # (core_attn) and full recompute of every layer
    "recompute_modules": dict(recompute="selective", recompute_modules=("moe_act",)),
    "recompute_layers": dict(recompute="full", recompute_layers=2),
    "sp": dict(sp=False),
    "stages": dict(stages=(15, 17)),
}
BASE_FOR = {"recompute_modules": dict(recompute="selective"),
            "recompute_layers": dict(recompute="full")}
COMMANDS = {
    "plan": ("plan", "train"),
    "memory": ("memory",),
    "traffic": ("comm", "traffic"),
}


def _numbers(cmd: str, d: dict) -> object:
    if cmd == "plan":
        return (d["step_time_s"], d["memory_per_gpu_bytes"], d["traffic"])
    if cmd == "memory":
        return (d["per_gpu_bytes"], d["breakdown"])
    return (d["strategies"], d["step_time_s"])


def test_every_key_is_listed():
    assert set(CHANGED) == set(KEY_NAMES)


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
@pytest.mark.parametrize("key", sorted(CHANGED))
def test_every_layout_key_is_honoured_or_refused(capsys, cmd, key):
    def argv(lay):
        gpus = lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"]
        extra = ("--gpus", str(gpus)) if cmd == "plan" else ()
        keys = {k: v for k, v in lay.items() if v is not None}
        return (*COMMANDS[cmd], "--model", "mixtral-8x7b", "--seq-len", "4096",
                "--global-batch", "256", *extra, "--layout", text(keys), "--json")

    base = BASE | BASE_FOR.get(key, {})  # sp is on unless the layout says sp=0
    rc0, out0, err0 = run(capsys, *argv(base))
    assert rc0 == 0, err0
    rc1, out1, err1 = run(capsys, *argv(base | CHANGED[key]))
    if rc1 == 0:
        assert _numbers(cmd, json.loads(out1)) != _numbers(cmd, json.loads(out0))
    else:
        assert one_line_refusal(rc1, out1, err1), err1
        assert key in err1 or key.replace("_", "-") in err1


# --- the parser and the rules ----------------------------------------------------------------


@pytest.mark.parametrize("text, needle", [
    ("tp=x", "whole number"), ("foo=1", "unknown key 'foo'"), ("zero=4", "0, 1, 2, 3"),
    ("recompute=sometimes", "recompute must be one of"), ("tp", "key=value"),
    ("tp=2,tp=4", "given twice"), ("sp=maybe", "1 or 0"), ("stages=4/x", "layer counts"),
    ("recompute=selective:bogus", "module names"), ("recompute=none:2", "take a value"),
    ("recompute=selective:mlp,recompute_modules=mlp", "given twice"),
])
def test_parse_layout_errors_name_the_key(text, needle):
    with pytest.raises(BadInput, match=needle):
        parse_layout(text)


def test_recompute_one_value_form_equals_its_keys():
    """``recompute=selective:mla_up_proj+mlp`` (the form of a profile's recompute_options and a
    validation row's recompute column) sets the same keys as writing them out."""
    assert (parse_layout("tp=2,recompute=selective:mla_up_proj+mlp")
            == parse_layout("tp=2,recompute=selective,recompute_modules=mlp+mla_up_proj"))
    assert parse_layout("recompute=full:2") == {"recompute": "full", "recompute_layers": 2}
    with pytest.raises(BadInput, match="cannot take recompute modules"):
        parse_layout("recompute=selective:mlp", allowed=("tp", "recompute"))


def test_rules_name_themselves():
    m = get_model("llama-3-70b")
    ctx = Context(m, 64, 512, 4096)
    for lay, rule in ((TrainLayout(tp=3, dp=21), "gpu count"), (TrainLayout(tp=8, dp=8, ep=2),
                      "divisibility"), (TrainLayout(tp=8, dp=8, micro_batch=3), "batch"),
                      (TrainLayout(tp=8, pp=8, zero=1), "zero")):
        with pytest.raises(BadInput, match=f"rule {rule}:"):
            check(lay, ctx)
    with pytest.raises(BadInput, match="rule divisibility: tp must divide the 64 attention"):
        check(TrainLayout(tp=6, dp=8), Context(m, 48, 512, 4096))
    # a valid layout returns its micro-batches per pipeline: 512 / (8 x 1)
    assert check(TrainLayout(tp=8, dp=8), ctx) == 64


# --- framework profiles ----------------------------------------------------------------------


def test_specs_frameworks_json(capsys):
    d = cli_json(capsys, "specs", "frameworks")
    ids = {i["id"] for i in d["items"]}
    assert {"megatron-core", "megatron-lm-2021", "torchtitan", "llm-foundry", "deepspeed"} <= ids
    for i in d["items"]:
        assert i["kind"] in ("training", "serving") and i["version"] and i["source"]
        assert set(i["fields"]) <= set(i["sources"])  # every field carries its source
    assert [i["id"] for i in d["items"] if i["default"]] == ["megatron-core"]


@pytest.mark.parametrize("body, needle", [
    ('[profiles.x]\nkind = "training"\nname = "x"\nversion = "1"\nsource = "deepspeed-config"\n'
     'kernels = "fused"\n', "kernels has no kernels_source"),
    ('[profiles.x]\nkind = "training"\nname = "x"\nversion = "1"\nsource = "deepspeed-config"\n'
     'speed = 3\nspeed_source = "deepspeed-config"\n', "unknown field 'speed'"),
    ('[profiles.x]\nkind = "training"\nname = "x"\nversion = "1"\nsource = "nowhere"\n',
     "not a known source"),
    ('[profiles.x]\nkind = "batch"\nname = "x"\nversion = "1"\nsource = "deepspeed-config"\n',
     "training or serving"),
    ('[profiles.x]\nkind = "training"\nname = "x"\nversion = "1"\nsource = "deepspeed-config"\n'
     'kernels = "turbo"\nkernels_source = "deepspeed-config"\n', "fused or eager"),
])
def test_profile_file_errors_are_one_line(tmp_path, body, needle):
    assert re.search(needle, frameworks_file_refusal(tmp_path, body))


@pytest.mark.parametrize("argv", [("plan", "train"), ("memory",), ("comm", "traffic")])
def test_unknown_framework_is_one_line(capsys, argv):
    rc, out, err = run(capsys, *argv, "--framework", "nope")
    assert one_line_refusal(rc, out, err) and "megatron-core" in err


@pytest.mark.parametrize("key", sorted(CHANGED))
def test_blast_radius_honours_or_refuses_every_key(capsys, key):
    """reliability blast-radius places ranks: tp, pp, dp, cp, ep move the answer (ep is drawn
    from dp, so tp x pp x dp x cp stays the GPU count); the other keys are refused in one line."""
    base = dict(tp=8, pp=4, dp=32, cp=1, ep=1)
    changed = {"tp": dict(tp=4, dp=64), "pp": dict(pp=8, dp=16), "dp": dict(dp=16, pp=8),
               "cp": dict(cp=2, dp=16), "ep": dict(ep=8)}.get(key)
    argv = ("reliability", "blast-radius", "--gpus", "1024", "--json", "--layout")
    d0 = cli_json(capsys, *argv[:-2], "--layout", text(base))
    if changed is None:
        rc, out, err = run(capsys, *argv, text(base | {key: CHANGED[key][key]}))
        assert one_line_refusal(rc, out, err) and "cannot use this key" in err
        return
    d1 = cli_json(capsys, *argv[:-2], "--layout", text(base | changed))
    assert d1["layout"] != d0["layout"]
    # the answer moves, not only its label: the faults' scopes or the replicas they take down
    # (with ep > 1 one expert group's ep replicas stop together)
    assert ([(f["scope"], f["replicas_hit"]) for f in d1["faults"]]
            != [(f["scope"], f["replicas_hit"]) for f in d0["faults"]])


def test_memory_reads_the_models_recipe_as_plan_train_does(capsys):
    """s19-review2: ``memory`` and ``plan train --layout`` price one layout with the same job.
    frameworks.toml [profiles."nemo-25.11"] inherits nemo-25.09's moe_recipes, whose entry for
    qwen3-30b-a3b on h100-sxm sets a2a_overlap = true (Megatron-Bridge's performance recipe for
    that model and GPU); specs/frameworks.job_settings applies it only when told the model id.
    plan train passes it, so its EP A2A overlap adds a warmup chunk of activations on the
    pipeline (analytic/memory.py pp_extra_warmup); ``memory`` must hold the same bytes, not the
    profile-wide a2a_overlap = false."""
    common = ("--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--seq-len", "4096",
              "--global-batch", "512", "--framework", "nemo-25.11", "--layout",
              "tp=1,pp=2,dp=8,cp=1,ep=8,etp=1,zero=2,vpp=8,micro_batch=2,"
              "recompute=selective:moe_act+layernorm")
    plan = cli_json(capsys, "plan", "train", "--gpus", "16", *common)
    mem = cli_json(capsys, "memory", *common)
    assert mem["priced_by"].startswith("the step model plan train uses")
    assert mem["per_gpu_bytes"] == plan["memory_per_gpu_bytes"]


@pytest.mark.parametrize("cmd", [("plan", "train", "--gpus", "8"), ("memory",),
                                 ("memory", "--fit")])
def test_cp_needs_two_cp_equal_chunks_of_the_sequence(capsys, cmd):
    """s19-review2: the head-tail causal split that the step model prices by default
    (frameworks.toml cp_load_balance = true; step/attention.py: rank r holds chunks r and
    2cp-1-r) cuts the sequence into 2 x cp equal chunks. Megatron-Core core_v0.16.1
    (55ac7082) megatron/core/utils.py get_batch_on_this_cp_rank views the sequence dimension as
    (2 * cp_size, S // (2 * cp_size)), which fails unless 2 cp divides S. S = 4098 with cp = 2:
    4098 % 2 == 0 but 4098 % 4 == 2, so that layout cannot run and is refused in one line."""
    common = ("--model", "llama-3-8b", "--seq-len", "4098", "--global-batch", "64")
    rc, out, err = run(capsys, *cmd, *common, "--layout", "cp=2")
    assert one_line_refusal(rc, out, err), err
    assert "2 x cp" in err  # memory.validate_layout (--fit) words it as the rule does
    # S = 4096: 4096 % 4 == 0, the same layout runs
    ok = cli_json(capsys, *cmd, "--model", "llama-3-8b", "--seq-len", "4096",
                  "--global-batch", "64", "--layout", "cp=2")
    assert ok


def test_the_search_never_picks_a_cp_the_sequence_cannot_split_in_two_cp(capsys):
    # S = 4098 = 2 x 2049: no cp > 1 splits it into 2 cp equal chunks
    d = cli_json(capsys, "plan", "train", "--model", "llama-3-8b", "--gpus", "8", "--seq-len",
                 "4098", "--global-batch", "64", "--top", "10")
    assert d["best"]["cp"] == 1 and all(r["cp"] == 1 for r in d["top"])
