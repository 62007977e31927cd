"""fp8 scaling recipes: which recipe each profile and validation row is priced with, the flag,
and what plan train shows."""

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import run_cli as run
from scalemodel.analytic.step.config import fp8_scaling
from scalemodel.specs.frameworks import fp8_scaling_of, get_framework

ROOT = Path(__file__).resolve().parents[2]

# The recipe every fp8 row ran, as its source states it (not the code's output):
# * Megatron-LM / Megatron-Core without --fp8-recipe: delayed (arguments.py default);
# * NeMo 24.03 (TE 1.4): delayed, its only recipe;
# * Megatron-Bridge 25.11+ tables: FP8-CS / FP8 on H100 (the FP8_CS presets) -> current, FP8-MX
#   or MXFP8 on B200 -> mxfp8 (docs/performance-summary-archive.md at 067f987d);
# * the 25.09 DeepSeek-V3 H100 row: 1297 tokens/s goes with 338 model TFLOP/s (0.2606 TFLOP per
#   token, the model's figure); the blockwise run is the 330 in parentheses -> current;
# * torchtitan: torchao Float8Linear tensorwise dynamic scaling -> current;
# * llm-foundry 2023: TE 1.x delayed scaling; DeepSeek-V3's own run: 1x128 / 128x128 blocks.
EXPECTED = {
    "mpt-3b-h100-fp8": "delayed",
    "deepseek-v3": "blockwise",
    "nemo-llama3-8b-h100": "current",
    "nemo-llama3-70b-h100": "current",
    "nemo-llama31-405b-h100": "current",
    "nemo-deepseek-v3-h100": "current",
    "titan-llama3-8b-h200-32": "current",
    "titan-llama3-8b-h200-64": "current",
    "nemo-qwen3-30b-a3b-h100": "current",
    "nemo-qwen3-235b-a22b-h100": "current",
    "nemo-llama3-8b-b200": "current",
    "nemo-llama31-405b-b200": "current",
    "nemo-qwen3-30b-a3b-b200-2511": "mxfp8",
    "nemo-qwen3-235b-a22b-b200-64": "mxfp8",
    "nemo-llama3-70b-h100-gbs128": "current",
    "nemo-llama31-405b-h100-gbs512": "current",
    "nemo-qwen3-30b-a3b-h100-2511": "current",
    "nemo-qwen3-235b-a22b-h100-2511": "current",
    "nemo-qwen3-30b-a3b-h100-260201": "current",
    "nemo-qwen3-30b-a3b-b200-2604": "mxfp8",
    "nemo-qwen3-30b-a3b-b200-2602": "mxfp8",
    "nemo-qwen3-235b-a22b-b200-2604": "mxfp8",
    "nemo-deepseek-v3-b200-2604": "mxfp8",
    # session 18 (issue 16): the B200 rows added from the same archive at 067f987d. 25.11 and
    # 25.09 print FP8-CS and FP8-MX of one Llama layout side by side (the 25.09 table has no
    # precision column: main figure FP8-CS, the profile's reading; parentheses 32x32 MXFP8 by
    # the page's footnote), so those rows state fp8_recipe; the MoE B200 rows are labelled
    # FP8-MX / MXFP8
    "nemo-llama3-8b-b200-2511-mx": "mxfp8",
    "nemo-llama31-405b-b200-2511-mx": "mxfp8",
    "nemo-llama3-8b-b200-2509-cs": "current",
    "nemo-llama3-8b-b200-2509-mx": "mxfp8",
    "nemo-llama31-405b-b200-2509-cs": "current",
    "nemo-llama31-405b-b200-2509-mx": "mxfp8",
    "nemo-deepseek-v3-b200-c2604": "mxfp8",
    "nemo-qwen3-30b-a3b-b200-c2604": "mxfp8",
    "nemo-deepseek-v3-b200-260201": "mxfp8",
    "nemo-qwen3-30b-a3b-b200-260201": "mxfp8",
    "nemo-deepseek-v3-b200-2602": "mxfp8",
    "nemo-qwen3-235b-a22b-b200-2602": "mxfp8",
    "nemo-deepseek-v3-b200-2511": "mxfp8",
}


def _fp8_rows():
    for name in ("training_runs", "published_runs_2026", "published_runs_skills",
                 "published_runs_papers"):
        lines = [x for x in (ROOT / "validation" / f"{name}.csv").read_text().splitlines()
                 if not x.startswith("#")]
        for r in csv.DictReader(lines):
            if r.get("precision") == "fp8":
                yield r


def test_every_fp8_row_is_priced_with_the_recipe_it_ran():
    seen = set()
    for r in _fp8_rows():
        # a row's fp8_recipe column, where stated, is what validate prices (validate.py row_problem)
        job = SimpleNamespace(fp8_scaling=(r.get("fp8_recipe") or "").strip() or None,
                              framework_id=r["framework"] or None,
                              model=SimpleNamespace(id=r["model"] or r["id"]))
        got = fp8_scaling(job, r["gpu"])[0]
        fw = r["framework"]
        if r["id"] in EXPECTED:
            assert got == EXPECTED[r["id"]], r["id"]
            seen.add(r["id"])
        elif fw in ("nemo-24.03", "megatron-core", "nemo-24.07"):
            # long-sequence rows (no recipe named) and NeMo 1.x on TE 1.x (2024): DelayedScaling,
            # the only recipe there
            assert got == "delayed", r["id"]
        elif fw.startswith("torchtitan"):
            assert got == "current", r["id"]
        elif fw.startswith("nemo-2"):  # Megatron-Bridge H100 rows (FP8-CS presets)
            assert (got, r["gpu"]) == ("current", "h100-sxm"), r["id"]
        else:
            pytest.fail(f"{r['id']}: fp8 row of {fw} without an expected recipe")
    assert seen == set(EXPECTED)


def test_profile_defaults_and_entries():
    assert fp8_scaling_of(get_framework("megatron-core"), None, None) == (
        "delayed", "megatron-lm-fp8-recipe-arg")
    assert fp8_scaling_of(get_framework("nemo-25.09"), "llama-3-70b", "h100-sxm")[0] == "current"
    assert fp8_scaling_of(get_framework("nemo-25.09"), "deepseek-v3", "h100-sxm") == (
        "current", "megatron-bridge-dsv3-2509-perf-matrix")
    # NeMo 24.03 does not inherit 25.09's per-model entry
    assert fp8_scaling_of(get_framework("nemo-24.03"), "deepseek-v3", "h100-sxm")[0] == "delayed"
    assert fp8_scaling_of(get_framework("nemo-26.04"), "deepseek-v3", "b200")[0] == "mxfp8"
    assert fp8_scaling_of(get_framework("nemo-26.04"), "llama-3-8b", "b200")[0] == "current"


def test_flag_overrides_the_profile():
    job = SimpleNamespace(fp8_scaling="blockwise", framework_id="nemo-25.09",
                          model=SimpleNamespace(id="deepseek-v3"))
    assert fp8_scaling(job, "h100-sxm") == ("blockwise", "--fp8-recipe")


ARGS = ("--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "4096",
        "--global-batch", "64", "--layout", "tp=1,pp=1,dp=8,cp=1,micro_batch=1,recompute=none",
        "--precision", "fp8")


def _plan(capsys, *extra):
    rc, out, err = run(capsys, "plan", "train", *ARGS, *extra, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_plan_json_names_the_recipe_and_block_scaling_is_slower(capsys):
    d = _plan(capsys, "--framework", "nemo-25.11")
    assert d["fp8_scaling"] == "current"
    assert _plan(capsys, "--framework", "megatron-core")["fp8_scaling"] == "delayed"
    blk = _plan(capsys, "--framework", "nemo-25.11", "--fp8-recipe", "blockwise")
    assert blk["fp8_scaling"] == "blockwise"
    assert blk["step_time_s"] > d["step_time_s"]


def test_plan_derivation_shows_the_recipe(capsys):
    rc, out, err = run(capsys, "plan", "train", *ARGS, "--framework", "nemo-25.11",
                       "--fp8-recipe", "blockwise")
    assert rc == 0, err
    assert "fp8 scaling blockwise" in out and "fp8 recipe: blockwise" in out
    assert "k_scale = 0.8126" in out and "b_cast = 4.06" in out


@pytest.mark.parametrize("extra,needle", [
    (("--fp8-recipe", "mxfp8"), "no measured mxfp8"),
])
def test_unmeasured_recipe_one_line_exit_2(capsys, extra, needle):
    rc, _, err = run(capsys, "plan", "train", *ARGS, *extra)
    assert rc == 2 and needle in err and err.count("\n") == 1


def test_recipe_needs_fp8(capsys):
    rc, _, err = run(capsys, "plan", "train", "--model", "llama-3-8b", "--gpus", "8",
                     "--fp8-recipe", "current")
    assert rc == 2 and "needs --precision fp8" in err and err.count("\n") == 1


@pytest.mark.parametrize("extra,flag", [
    (("--framework", "megatron-core"), "--fp8-recipe delayed"),
    (("--framework", "nemo-25.11"), "--fp8-recipe tensorwise"),  # Megatron's name of current
    (("--framework", "nemo-25.11", "--fp8-recipe", "blockwise"), "--fp8-recipe blockwise"),
])
def test_megatron_export_runs_the_priced_recipe(capsys, tmp_path, extra, flag):
    out = tmp_path / "run.sh"
    rc, _, err = run(capsys, "plan", "train", *ARGS, *extra, "--export", "megatron",
                     "--export-out", str(out))
    assert rc == 0, err
    text = out.read_text()
    assert "--fp8-format hybrid" in text and flag in text
