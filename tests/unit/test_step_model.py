"""The step model's structure (analytic/step/): short functions, typed terms, and one code path
for the search over many candidates and the evaluation of a single layout."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from scalemodel.analytic.planner import evaluate, layout_grid, make_cluster, make_job
from scalemodel.analytic.step import StepTerms
from scalemodel.specs import get_model

ANALYTIC = Path(__file__).resolve().parents[2] / "src" / "scalemodel" / "analytic"
MAX_LINES = 100  # the limit for a function of the step model or the planner


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_function_of_the_step_model_or_planner_is_long():
    files = sorted((ANALYTIC / "step").glob("*.py")) + [ANALYTIC / "planner.py"]
    assert len(files) > 5
    long = [f"{p.name}:{name} ({n} lines)" for p in files for name, n in _functions(p)
            if n > MAX_LINES]
    assert not long, "functions over 100 lines: " + ", ".join(long)


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES + 1))
    p = tmp_path / "long.py"
    p.write_text(f"def f():\n{body}\n")
    assert _functions(p) == [("f", MAX_LINES + 2)]


def test_step_terms_are_a_frozen_dataclass_of_named_fields():
    assert dataclasses.is_dataclass(StepTerms)
    assert StepTerms.__dataclass_params__.frozen
    names = StepTerms.names()
    assert len(names) == len(set(names)) and "step_time_s" in names and "dp_bytes" in names


@pytest.mark.parametrize("model,gpu,n,kw", [
    ("llama-3-8b", "h100-sxm", 32, {"seq_len": 4096, "global_batch_seqs": 64}),
    ("mixtral-8x7b", "a100-sxm-80gb", 64, {"seq_len": 4096, "global_batch_seqs": 128,
                                           "kernels": "eager"}),
])
def test_one_layout_prices_as_it_does_among_all_candidates(model, gpu, n, kw):
    # the search prices every candidate in one array pass; a single layout is an array of one:
    # the same code must give every term the same value either way
    job = make_job(get_model(model), **kw)
    cl = make_cluster(gpu, n)
    cols = layout_grid(job, cl).cols
    full = evaluate(job, cl, cols)
    rng = np.random.default_rng(15)
    for i in rng.choice(cols["tp"].size, size=5, replace=False):
        one = evaluate(job, cl, {k: v[i:i + 1] for k, v in cols.items()}).at(0)
        row = full.at(int(i))
        for name in StepTerms.names():
            assert getattr(one, name) == pytest.approx(getattr(row, name), rel=1e-12), name
