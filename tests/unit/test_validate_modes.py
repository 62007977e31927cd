"""validate --cv and --agreement (issue 16, items 2 and 3): the JSON keys the issue fixes, what
the figures mean, one-line bad input."""

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, csv_text, validation_rows
from conftest import run_cli as run

ROOT = Path(__file__).resolve().parents[2] / "validation"




def rows_file(tmp_path, ids, copies=()):
    """A validation CSV holding some rows of training_runs.csv, and ``copies`` of rows with some
    columns changed: (id of the row, its new columns)."""
    every = validation_rows("training_runs.csv")
    rows = [r for r in every if r["id"] in ids]
    rows += [dict(next(r for r in every if r["id"] == rid), **cols) for rid, cols in copies]
    f = tmp_path / "rows.csv"
    f.write_text(csv_text(rows))
    return f


def test_cv_json_keys_and_statement(capsys, tmp_path):
    f = rows_file(tmp_path, {"mpt-7b-h100", "mpt-7b-a100", "titan-llama2-13b"})
    rc, out, err = run(capsys, "validate", "--cv", "--file", str(f), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert {g["source"] for g in d["by_source"]} == {"mosaicml-llm-foundry-bench",
                                                    "torchtitan-performance"}
    assert sum(g["rows"] for g in d["by_source"]) == 3
    for g in d["by_source"]:
        assert set(g) >= {"source", "rows", "mean_abs_error", "cv_mean_abs_error"}
    # no planner constant rests on end-to-end runs (specs/evidence.py, checked in
    # test_planner_evidence.py), so leaving a source out re-derives nothing: out of sample ==
    # in sample, and the command says why
    assert d["end_to_end_constants"] == []
    assert "No constant is derived from end-to-end runs" in d["statement"]
    for g in d["by_source"]:
        assert g["cv_mean_abs_error"] == g["mean_abs_error"]
    # the source whose yamls set the llm-foundry profile's attention is named as cited
    mosaic = next(g for g in d["by_source"] if g["source"] == "mosaicml-llm-foundry-bench")
    assert any("attention" in c for c in mosaic["constants_citing_source"])


def test_agreement_json_keys_and_meaning(capsys, tmp_path):
    # mpt-7b-h100 as published (FSDP on 8 H100) and a copy whose team "chose" TP8 for a 7B model
    # on one node: TP8 adds two all-reduces (reduce-scatter + all-gather under SP) of the
    # activations per layer forward and backward that FSDP alone does not have, and leaves each
    # GEMM an eighth of its width, so the search must rank it below its own pick and name an
    # exposed-TP or compute term. llm-foundry of 2023 had no TP (frameworks.toml parallelisms,
    # llm-foundry-fsdp-2023), so the copy runs under torchtitan's profile, which has it; the same
    # copy under llm-foundry is skipped with the profile's reason
    f = rows_file(tmp_path, {"mpt-7b-h100", "titan-llama2-13b"},
                  [("mpt-7b-h100", {"id": "mpt-7b-h100-tp8", "tp": "8", "dp": "1", "zero": "",
                                    "framework": "torchtitan"}),
                   ("mpt-7b-h100", {"id": "mpt-7b-h100-tp8-foundry", "tp": "8", "dp": "1",
                                    "zero": ""})])
    d = cli_json(capsys, "validate", "--agreement", "--file", str(f))
    rows = {r["id"]: r for r in d["rows"]}
    assert set(rows) == {"mpt-7b-h100", "titan-llama2-13b", "mpt-7b-h100-tp8"}
    skipped = {s["id"]: s["reason"] for s in d["skipped"]}
    assert "tensor parallelism" in skipped["mpt-7b-h100-tp8-foundry"]
    for r in rows.values():
        assert set(r) >= {"id", "published_layout", "search_best", "speedup_predicted",
                          "rank_of_published", "keys_differ", "layout_class"}
        # the keys named are exactly those whose value differs between the two layouts
        assert all(r["published_layout"].get(k) != r["search_best"].get(k)
                   for k in r["keys_differ"])
        # the team's stated keys are kept in the layout priced for it
        assert all(r["published_layout"][k] == v for k, v in r["stated"].items())
        # rank 1 exactly when nothing in the free search is faster than the team's layout
        assert (r["rank_of_published"] == 1) == (r["speedup_predicted"] <= 1e-9)
        # the named term is the one the pick saves most
        saving = {k: r["published_breakdown_s"][k] - r["best_breakdown_s"][k]
                  for k in r["published_breakdown_s"]}
        if r["term"] != "none":
            assert r["term_saving_s"] == pytest.approx(max(saving.values()))
    tp8 = rows["mpt-7b-h100-tp8"]
    assert tp8["published_layout"]["tp"] == 8
    assert tp8["rank_of_published"] > 1 and tp8["speedup_predicted"] > 0.10
    assert tp8["term"] in ("tp_exposed", "compute")
    assert tp8["search_best"]["tp"] < 8
    n = len(d["rows"])
    # holding the stated recompute narrows the free grid, so its best is never faster
    held = [r for r in d["rows"] if r["speedup_recompute_held"] is not None]
    assert held and all(r["speedup_recompute_held"] <= r["speedup_predicted"] + 1e-9
                        for r in held)
    assert d["rows_stating_recompute"] == len(held)
    assert d["share_within_10pct_recompute_held"] == pytest.approx(
        sum(r["speedup_recompute_held"] <= 0.10 for r in held) / len(held))
    # by_class counts every row above 10% once
    assert sum(sum(t.values()) for t in d["by_class"].values()) == sum(
        r["speedup_predicted"] > 0.10 for r in d["rows"])
    assert d["share_within_10pct"] == pytest.approx(
        sum(r["speedup_predicted"] <= 0.10 for r in d["rows"]) / n)


def test_agreement_keeps_to_what_the_framework_offered(capsys, tmp_path):
    # Megatron-LM of 2021 had no context parallelism, no ZeRO and recomputed all or nothing
    # (frameworks.toml megatron-lm-2021: parallelisms tp / pp / vpp, recompute_options none /
    # full; Megatron-LM 3d718bfc megatron/arguments.py)
    f = rows_file(tmp_path, {"megatron-1.7b"})
    rc, out, err = run(capsys, "validate", "--agreement", "--file", str(f), "--json")
    assert rc == 0, err
    best = json.loads(out)["rows"][0]["search_best"]
    assert best["cp"] == 1 and best["zero"] == 0 and best["recompute"] in ("none", "full")


@pytest.mark.parametrize("argv, needle", [
    (("--rows", "mpt-7b-h100"), "only with --agreement"),
    (("--agreement", "--rows", "no-such-row"), "no row with id"),
    (("--agreement", "--cv"), "not allowed with"),
    (("--cv", "--plot", "x.png"), "not with --cv"),
    # s19-review2: a --rows that names no id ran the free search on every row (16 s) as if
    # --rows were not given
    (("--agreement", "--rows", ","), "--rows: no row id"),
    (("--agreement", "--rows", " "), "--rows: no row id"),
])
def test_modes_bad_input(capsys, argv, needle):
    rc, _, err = run(capsys, "validate", *argv)
    assert rc == 2 and needle in err


def test_agreement_class_of_a_disagreement():
    # the classes by hand, from two layouts of the SC21 1.7B row (examples/sc21/run_table_1.sh:
    # DP32, micro-batch 16, uniform recompute) against a pick that drops the recompute at
    # micro-batch 2: the keys changed are those two, and recompute comes first in the order
    from scalemodel.analytic.agreement import CLASS_ORDER, keys_differ, layout_class
    team = {"tp": 1, "pp": 1, "dp": 32, "cp": 1, "ep": 1, "etp": 1, "zero": 0, "vpp": 1,
            "micro_batch": 16, "recompute": "full"}
    pick = dict(team, micro_batch=2, recompute="none")
    assert keys_differ(team, pick) == ("micro_batch", "recompute")
    assert layout_class(keys_differ(team, pick)) == "recompute"
    # Qwen3-235B on H100 as NeMo 25.09 ran it (TP2 PP8 EP32 v4) against EP8 v3: EP before PP
    nemo = {"tp": 2, "pp": 8, "dp": 16, "ep": 32, "vpp": 4, "zero": 1, "micro_batch": 1,
            "recompute": "none"}
    assert layout_class(keys_differ(nemo, dict(nemo, ep=8, vpp=3))) == "ep"
    assert layout_class(keys_differ(nemo, dict(nemo, vpp=3))) == "pp"
    # a dense model's expert TP follows its TP (ep 1 on both sides): TP8 -> TP4 is a TP change
    dense = dict(team, tp=8, etp=8, dp=4)
    assert keys_differ(dense, dict(dense, tp=4, etp=4, dp=8)) == ("tp", "dp")
    assert layout_class(("tp", "dp")) == "tp_cp"
    # an absent key reads as its default (1; no recompute), so the same layout differs nowhere
    assert keys_differ({"tp": 1, "recompute": None}, {"recompute": "none"}) == ()
    assert layout_class(()) == "none"
    # every compared key belongs to exactly one class
    owned = [k for _, ks in CLASS_ORDER for k in ks]
    assert len(owned) == len(set(owned))


def test_agreement_ranks_over_both_phases_of_the_search():
    # The free search prices in two phases (planner._evaluate_two_phase): the grid of
    # layout_grid's columns (plain recompute modes: none, selective, full), then, for the layouts
    # that do not fit without recompute, the partial policies the profile lists (module sets,
    # block recompute of the fewest layers), which layout_grid holds apart in grid.partial. The
    # DeepSeek-V3 row (2048 H800, deepseek-hai-llm: recompute_options carry the report's
    # Sec. 3.2.3 set layernorm+mla_up_proj) picks such a second-phase row.
    # Derivation of the case: the team's layout is the pick's own keys with recompute=full. Full
    # recompute re-runs the whole forward of every layer in the backward; the pick's module set
    # re-runs only the norms and the MLA up-projections, everything else alike, and full holds
    # no more memory, so the team's layout fits and the pick is faster than it. The pick is then
    # one of the layouts counted above the team's: the rank is at least 2 + the layouts of the
    # first phase alone predicted faster (the count the grid alone gave, which missed the pick).
    from scalemodel.analytic.agreement import agree_row
    from scalemodel.analytic.planner import evaluate, layout_grid, search
    from scalemodel.analytic.validate import row_problem

    row = next(r for r in validation_rows("training_runs.csv") if r["id"] == "deepseek-v3")
    p = row_problem(row)
    free = search(p.job, p.cluster, {}, top=0)
    grid = layout_grid(p.job, p.cluster, {})
    code = free.best.layout.rc_code
    assert free.best.layout["recompute_modules"]
    assert code in grid.partial and code not in set(grid.cols["rc"].tolist())  # second phase
    keys = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch")
    team = dict(row, id="deepseek-v3-full", recompute="full",
                **{k: str(free.best.layout[k]) for k in keys})
    a = agree_row(team)
    assert a.search_best == free.best.layout.as_dict()
    assert a.published_layout["recompute"] == "full"
    assert a.keys_differ == ("recompute", "recompute_modules")
    assert a.speedup_predicted > 0
    first = evaluate(p.job, p.cluster, grid.cols)
    fits = np.asarray(first.fits, dtype=bool)
    thr = np.asarray(first.tokens_per_s)
    first_faster = int(np.count_nonzero(fits & (thr > a.published_tokens_per_s * (1 + 1e-9))))
    assert a.rank_of_published >= first_faster + 2
    # the layouts counted are those the search picked from: both phases, as it counts them
    assert a.fitting_layouts == free.fitting > int(np.count_nonzero(fits))
    # the rank read off the free search's own prices equals the grid priced once more
    from scalemodel.analytic.agreement import ranked_against

    assert (ranked_against(p.job, p.cluster, a.published_tokens_per_s, free)
            == ranked_against(p.job, p.cluster, a.published_tokens_per_s)
            == (a.rank_of_published - 1, a.fitting_layouts))
