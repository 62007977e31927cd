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


@pytest.mark.parametrize("layout, needle", [
    ("tp=8,pp=4,recompute=full:30", "N must be 1 to 20"),  # 80 layers / pp 4
    ("tp=8,pp=4,vpp=5,recompute=full:5", "N must be 1 to 4"),
    ("tp=8,recompute=full:81", "N must be 1 to 80"),
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


@pytest.mark.parametrize("at_once", [1 << 14, 0])  # every N of the chord's misses at once / bisection
def test_the_fewest_n_is_the_step_models_fewest(monkeypatch, at_once):
    """Against brute force: every N from 1 to a chunk's layers less one, priced by the whole
    step model, for every layout of the row's free grid that does not fit without recompute; the
    fewest that fits is the one found (0 where none does)."""
    import numpy as np

    from scalemodel.analytic.layout import recompute_code
    from scalemodel.analytic.planner import layout_grid
    from scalemodel.analytic.step import memory_terms as mt
    from scalemodel.analytic.step.model import evaluate

    monkeypatch.setattr(mt, "_SPAN_AT_ONCE", at_once)
    p = _problem()
    cols = layout_grid(p.job, p.cluster, {}).cols
    none = evaluate(p.job, p.cluster, cols)
    sel = np.flatnonzero((cols["rc"] == 0) & ~np.asarray(none.fits))
    sub = {k: v[sel] for k, v in cols.items()}
    (found,) = mt.fewest_block_layers(p.job, p.cluster, sub)  # no MTP: one split
    hi = -(-80 // (sub["pp"] * sub["vpp"])) - 1
    span = np.maximum(hi, 0)
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
    assert sel.size > 1000 and (want > 1).sum() > 500  # many layouts, many N above 1
    assert np.array_equal(found, want)
