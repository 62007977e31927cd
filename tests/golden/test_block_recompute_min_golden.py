"""Block recompute of the fewest layers that fit (issue 16, s18-recomputen): the profile option
``full:min``.

Source of the semantics: Megatron-Core core_v0.16.1 megatron/core/transformer/transformer_block.py
``_checkpointed_forward``: with ``recompute_method == 'block'`` the loop over the block's own
layers (``num_layers_per_pipeline_rank = len(self.layers)``, one virtual chunk per
TransformerBlock) checkpoints layer ``l`` when ``l < recompute_num_layers`` and runs the others
plainly, so N counts layers per model chunk, any N from 1 up (the same loop at core_r0.8.0).
A layer checkpointed this way keeps only its 16-bit input, 2 h bytes a token (TP 1, so no
sequence-parallel split), and recomputes everything else in the backward.

Expected values are derived in the tests from the per-token saved bytes of a Llama 3 70B layer
under TE's fp8 autocast (derived by hand in test_llama3_70b_gb300_260201_mx.py) and the 1F1B
micro-batches in flight on stage 0 (p of them); the memory the code reports for the all-layers
policy and the capacity are the two figures the derivation starts from.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scalemodel.analytic.layout import TrainLayout, recompute_spec
from scalemodel.analytic.planner import evaluate_layout, search
from scalemodel.analytic.validate import read_rows, row_problem
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs.frameworks import framework_ids, get_framework

ROW = "nemo-llama3-70b-gb300-260201-mx"  # 64 GB300, MXFP8, TP1 PP4 MBS2, VP n/a
CSV = Path(__file__).resolve().parents[2] / "validation" / "published_runs_nvl72.csv"


def _problem():
    rows = {r["id"]: r for r in read_rows(CSV.read_text())}
    return row_problem(rows[ROW])


def _uneven_problem():
    """The row's job and cluster under the megatron-core profile, whose split balances the
    output head (step/shapes.split_extras: 1.23 layers on the last stage) instead of the NeMo
    recipe's even 20 a stage: Llama 3 70B on pp 4 takes (20, 21, 21, 18) (see below)."""
    from dataclasses import replace
    from types import SimpleNamespace

    p = _problem()
    return SimpleNamespace(job=replace(p.job, framework_id="megatron-core"), cluster=p.cluster)


def _layer_saving_bytes() -> float:
    """Bytes stage 0 stops holding per layer it recomputes: p = 4 micro-batches of 2 x 8192
    tokens in flight, each token's no-recompute set (test_llama3_70b_gb300_260201_mx.py) less
    the 2 h bytes of the layer input a checkpointed layer keeps."""
    h, q, kv, f, a = 8192, 8192, 1024, 28672, 64
    per_token = (2 * (2 * h + 4) + 2 * 1 * h + 2 * q + 2 * (2 * kv) + (2 + 1) * q + 4 * a
                 + 4 * f + 1 * f)
    return 4 * (2 * 8192) * (per_token - 2 * h)


@pytest.mark.parametrize("zero", [1, 3])
def test_the_fewest_layers_follow_from_the_per_layer_bytes(zero):
    p = _problem()
    base = TrainLayout(tp=1, pp=4, dp=16, zero=zero, micro_batch=2)
    full = evaluate_layout(p.job, p.cluster, base.with_(recompute="full")).values
    cap, m_all = float(full.capacity_bytes), float(full.memory_per_gpu_bytes)
    d = _layer_saving_bytes()  # 14.51 GB per layer
    assert d == pytest.approx(14.51e9, rel=1e-3)
    # stage 0 holds 20 layers; recomputing N of them holds (20 - N) d more than all 20:
    # M(N) = M(20) + (20 - N) d <= capacity  ->  N >= 20 - (capacity - M(20)) / d
    want = math.ceil(20 - (cap - m_all) / d)
    assert want == {1: 9, 3: 4}[zero]
    for n, fits in ((want, True), (want - 1, False)):
        v = evaluate_layout(p.job, p.cluster, base.with_(recompute="full", recompute_layers=n))
        assert float(v.values.memory_per_gpu_bytes) == pytest.approx(m_all + (20 - n) * d,
                                                                     rel=2e-3)
        assert bool(v.values.fits) is fits
    # the search (the nemo profile offers full:min) takes exactly that N for this layout
    fixed = {**p.stated, "zero": zero}
    best = search(p.job, p.cluster, fixed, top=0).best
    assert best.layout.recompute == "full" and best.layout.recompute_layers == want
    # and it is faster than recomputing every layer, which was the search's pick before
    assert float(best.values.tokens_per_s) > float(full.tokens_per_s)


def test_only_block_recompute_frameworks_offer_it():
    """megatron-core and megatron-core-0.8 state it (recompute_options); the NeMo and
    Megatron-Bridge profiles extend megatron-core and inherit it; the others list their own
    options: the 2021 Megatron-LM (none, full), torchtitan (its op policy; layer AC is every
    k-th layer, not a block), DeepSpeed and llm-foundry (none, full), DeepSeek's own profile."""
    offers = {f for f in framework_ids()
              if "full:min" in get_framework(f).values.get("recompute_options", ())}
    assert {"megatron-core", "megatron-core-0.8"} <= offers
    nemo = [f for f in framework_ids() if f.startswith(("nemo-", "mbridge-"))]
    assert nemo and set(nemo) <= offers
    for f in framework_ids():
        if f in offers:
            assert get_framework(f).sources["recompute_options"] in (
                "megatron-core-recompute-modules", "megatron-lm-args")
    for f in ("megatron-lm-2021", "torchtitan", "deepspeed"):
        if f in framework_ids():
            assert f not in offers


def test_explicit_n_still_works():
    assert recompute_spec("full:3") == {"recompute": "full", "recompute_layers": 3}
    p = _problem()
    best = search(p.job, p.cluster, {**p.stated, "zero": 1, "recompute": "full",
                                     "recompute_layers": 12}, top=0).best
    assert best.layout.recompute_layers == 12


def _cli(args):
    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code
    return rc


# The planner's split of Llama 3 70B (80 layers; the output head and loss cost 1.23 layers on
# the last chunk under megatron-core, step/shapes.split_extras) is the one with the lightest
# heaviest chunk (memory.chunk_partition): on 4 stages a load of 21 holds 21 + 21 + 21 + 19
# (21 less the head's 1.23, rounded down) = 82 >= 80 layers (at 20.23 the stages hold at most
# 20 + 20 + 20 + 19 = 79), and the 2 spare layers come off the first and the last stage:
# (20, 21, 21, 18), so a chunk holds at most 21 (the old bound, ceil(80 / 4) = 20, refused N = 21).
# On 20 chunks (pp 4, vpp 5) a load of 4 holds 19 x 4 + 2 = 78 < 80 layers, so the load is 5;
# the surplus comes off the first and last chunk, then the middle ones from the front, which
# leaves the two chunks before the last with 5 layers (ceil(80 / 20) = 4 refused N = 5).
@pytest.mark.parametrize("layout, needle", [
    ("tp=8,pp=4,recompute=full:30", "N must be 1 to 21"),
    ("tp=8,pp=4,recompute=full:22", "N must be 1 to 21"),
    ("tp=8,pp=4,vpp=5,recompute=full:6", "N must be 1 to 5"),
    ("tp=8,recompute=full:81", "N must be 1 to 80"),
    ("tp=8,stages=26/18/18/18,recompute=full:27", "N must be 1 to 26"),  # its first stage
    ("tp=8,pp=4,recompute=full:0", "at least 1"),
    ("tp=8,pp=4,recompute=full:min", "search option of a framework profile"),
    ("tp=8,pp=4,recompute=full:two", "whole number"),
])
def test_bad_layer_counts_are_one_line(capsys, layout, needle):
    rc = _cli(["plan", "train", "--model", "llama-3-70b", "--gpus", "64", "--gpu", "h100-sxm",
               "--layout", layout])
    out, err = capsys.readouterr()
    assert rc == 2 and not out and err.count("\n") == 1 and needle in err


def test_full_min_is_refused_outside_a_profile():
    with pytest.raises(BadInput, match="search option"):
        recompute_spec("full:min")
    assert recompute_spec("full:min", search=True)["recompute"] == "full"


def _largest_stage_per_chunk(job, cols):
    """Per row, the layers per model chunk of the split's largest stage: the range of N the
    brute force walks (at and above it every stage re-runs all of its layers, which is
    recompute=full). The split is the given ``stages`` columns where the grid carries them,
    else the planner's split per row (memory.stage_partition with the framework's extras)."""
    import numpy as np

    from scalemodel.analytic.memory import stage_partition
    from scalemodel.analytic.step.shapes import split_extras

    L = job.model.n_layers
    if "n_first" in cols:
        top = np.maximum(np.maximum(cols["n_first"], cols["n_mid"]), cols["n_last"])
        return np.where(cols["pp"] == 1, L, -(-top // cols["vpp"]))
    extra = split_extras(job.model, job.framework_id)
    return np.array([L if p == 1 else -(-max(stage_partition(L, int(p), vpp=int(v), **extra))
                                          // int(v))
                     for p, v in zip(cols["pp"], cols["vpp"], strict=True)], dtype=np.int64)


def _brute_force(p, fixed):
    """(layouts that do not fit without recompute, the fewest N found, the brute force's):
    every N from 1 to the largest stage's layers per chunk less one, priced by the whole step
    model, the fewest that fits (0 where none does)."""
    import numpy as np

    from scalemodel.analytic.layout import recompute_code
    from scalemodel.analytic.planner import layout_grid
    from scalemodel.analytic.step import memory_terms as mt
    from scalemodel.analytic.step.model import evaluate

    cols = layout_grid(p.job, p.cluster, fixed).cols
    none = evaluate(p.job, p.cluster, cols)
    sel = np.flatnonzero((cols["rc"] == 0) & ~np.asarray(none.fits))
    sub = {k: v[sel] for k, v in cols.items()}
    (found,) = mt.fewest_block_layers(p.job, p.cluster, sub)  # no MTP: one split
    span = np.maximum(_largest_stage_per_chunk(p.job, sub) - 1, 0)
    rows = np.repeat(np.arange(sel.size), span)
    start = np.repeat(np.cumsum(span) - span, span)
    n = 1 + np.arange(rows.size) - start
    every = {k: v[rows] for k, v in sub.items()}
    every["rc"] = recompute_code("full", layers=n)
    fits = np.asarray(evaluate(p.job, p.cluster, every).fits, dtype=bool)
    want = np.zeros(sel.size, dtype=np.int64)
    for i in range(sel.size):
        f = np.flatnonzero(fits[rows == i])
        want[i] = f[0] + 1 if f.size else 0
    return sub, found, want


@pytest.mark.parametrize("at_once", [1 << 14, 0])  # every N of the chord's misses at once / bisection
def test_the_fewest_n_is_the_step_models_fewest(monkeypatch, at_once):
    """Against brute force: every N from 1 to the largest stage's layers per chunk less one,
    priced by the whole step model, for every layout of the row's free grid that does not fit
    without recompute; the fewest that fits is the one found (0 where none does), under the
    row's NeMo profile (an even split) and megatron-core's, whose pp = 4 layouts take the
    uneven (20, 21, 21, 18) split (see above): N = 20 is in range there."""
    import numpy as np

    from scalemodel.analytic.step import memory_terms as mt

    monkeypatch.setattr(mt, "_SPAN_AT_ONCE", at_once)
    for p in (_problem(), _uneven_problem()):  # NeMo's even split, megatron-core's uneven one
        sub, found, want = _brute_force(p, {})
        assert sub["tp"].size > 1000 and (want > 1).sum() > 500  # many layouts, many N above 1
        assert np.array_equal(found, want)
    assert np.any((sub["pp"] == 4) & (sub["vpp"] == 1))


@pytest.mark.parametrize("at_once", [1 << 14, 0])
@pytest.mark.parametrize("stages", [(26, 18, 18, 18), (17, 21, 21, 21)])
def test_the_fewest_n_on_a_given_split(monkeypatch, at_once, stages):
    """The same brute force on a split given per stage: a 26-layer first stage (N up to 25,
    past the 19 that ceil(80 / 4) - 1 allowed) and a short first stage before three of 21."""
    import numpy as np

    from scalemodel.analytic.step import memory_terms as mt

    monkeypatch.setattr(mt, "_SPAN_AT_ONCE", at_once)
    sub, found, want = _brute_force(_problem(), {"stages": stages})
    assert sub["tp"].size > 100 and (want > 1).sum() > 50
    assert want.max() > 19  # Ns the old bound never tried are the fewest for some layouts
    assert np.array_equal(found, want)


def test_block_recompute_time_share_is_the_priced_stages():
    """The step time's share of layers re-run is the memory model's for the largest stage:
    Llama 3 70B on pp 4 splits (20, 21, 21, 18) (see above), so N = 20 re-runs 20 of the 21
    layers of a middle stage (20 / 21 of full recompute's time), N = 21 all of them (share 1,
    the same step as recompute=full), and on stages=26/18/18/18 N = 22 is 22 / 26."""
    import numpy as np

    from scalemodel.analytic.layout import recompute_code
    from scalemodel.analytic.memory import stage_partition
    from scalemodel.analytic.planner import layout_grid
    from scalemodel.analytic.step.candidates import candidates
    from scalemodel.analytic.step.shapes import split_extras

    p = _uneven_problem()
    assert stage_partition(80, 4, **split_extras(p.job.model, "megatron-core")) == (20, 21, 21,
                                                                                   18)
    base = TrainLayout(tp=1, pp=4, dp=16, zero=1, micro_batch=2)
    for fixed, n, share in (({}, 20, 20 / 21), ({}, 21, 1.0),
                            ({"stages": (26, 18, 18, 18)}, 22, 22 / 26)):
        keys = {**fixed, "tp": 1, "dp": 16, "zero": 1, "micro_batch": 2, "recompute": "full",
                "recompute_layers": n, "vpp": 1}
        if "stages" not in fixed:
            keys["pp"] = 4
        cols = layout_grid(p.job, p.cluster, keys).cols
        assert cols["tp"].size >= 1
        c = candidates(p.job, p.cluster, cols)
        assert np.allclose(c.full_share, share)
        assert np.all(cols["rc"] == recompute_code("full", layers=n))
    full = evaluate_layout(p.job, p.cluster, base.with_(recompute="full")).values
    n21 = evaluate_layout(p.job, p.cluster, base.with_(recompute="full", recompute_layers=21))
    n20 = evaluate_layout(p.job, p.cluster, base.with_(recompute="full", recompute_layers=20))
    assert float(n21.values.step_time_s) == pytest.approx(float(full.step_time_s), rel=1e-12)
    assert float(n20.values.step_time_s) < float(full.step_time_s)


def test_memory_takes_pp_from_the_stages(capsys):
    """`scalemodel memory` reads pp from a split given per stage, as plan train does; a
    recompute_layers past its largest stage is one line."""
    rc = _cli(["memory", "--gpu", "h100-sxm", "--framework", "nemo-25.09", "--layout",
               "tp=8,stages=27/27/26", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and '"pp": 3' in out
    rc = _cli(["memory", "--gpu", "h100-sxm", "--framework", "nemo-25.09", "--layout",
               "tp=8,stages=27/27/26,recompute=full:28"])
    out, err = capsys.readouterr()
    assert rc == 2 and not out and err.count("\n") == 1
    assert "largest model chunk of the split" in err
    rc = _cli(["memory", "--gpu", "h100-sxm", "--framework", "nemo-25.09", "--layout",
               "tp=8,stages=27/27/26,recompute=full:27", "--json"])
    assert rc == 0
    capsys.readouterr()


@pytest.mark.parametrize("n, ok", [(11, True), (12, False)])
def test_the_largest_chunk_bounds_n_at_pp8(n, ok):
    """At pp 8 Llama 3 70B splits 10/10/10/10/10/11/11/8 (derived in
    test_partial_recompute_golden.py): N = 11, every layer of the two 11-layer stages, is
    accepted (ceil(80 / 8) = 10 refused it); 12 exceeds every chunk."""
    from scalemodel.analytic.layout import Context, check
    from scalemodel.specs import get_model

    lay = TrainLayout(tp=8, pp=8, dp=1, recompute="full", recompute_layers=n)
    ctx = Context(get_model("llama-3-70b"), lay.gpus, 512, 8192, framework_id="megatron-core")
    if ok:
        assert check(lay, ctx) == 512
    else:
        with pytest.raises(BadInput, match="rule recompute layers:"):
            check(lay, ctx)
