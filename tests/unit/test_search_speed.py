"""The search's speed work changes no result (issue 15, Performance): the one-dimensional
de-duplication of collective queries is np.unique's row-wise answer, a search priced in chunks
ranks the same rows in the same order as one priced at once, and the deepseek-v3 search on 2,048
H800 stays inside its memory budget."""

import tracemalloc

import numpy as np
import pytest

from scalemodel.analytic import planner
from scalemodel.analytic.planner import _ranking, _reportable, make_cluster, make_job, search
from scalemodel.analytic.step.candidates import _codes, _hashed_codes, unique_rows
from scalemodel.specs import get_model


def test_unique_rows_is_numpys_row_unique():
    rng = np.random.default_rng(1)
    for _ in range(60):
        n = int(rng.integers(1, 2000))
        cols = []
        for kind in rng.integers(0, 3, size=3):
            if kind == 0:  # small integers (ranks): counted, not sorted
                pool = rng.integers(1, 2**21, size=int(rng.integers(1, 50))).astype(float)
            elif kind == 1:  # byte sizes
                pool = rng.random(int(rng.integers(1, 2000))) * 1e9
            else:
                pool = np.array([1.0, 2.0, 4.0, 8.0, 1.5])
            cols.append(rng.choice(pool, n))
        want, inv = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
        got, ginv = unique_rows(tuple(cols))
        assert np.array_equal(np.stack(got, 1), want)
        assert np.array_equal(ginv, inv.ravel())


def test_hashed_codes_are_numpys_unique():
    # the bucketed de-duplication of byte-size columns answers exactly as np.unique, and hands
    # back to it where buckets collide, where 0.0 and -0.0 both occur, or on NaN
    rng = np.random.default_rng(7)
    few = rng.random(60) * 1e9
    cases = {
        "few sizes": few[rng.integers(0, 60, 1 << 16)],
        "one size": np.full(5000, 3.5e8),
        "many distinct (collisions)": rng.random(50_000) * 1e9,
        "signed zeros": np.concatenate([few[rng.integers(0, 60, 4000)], [0.0, -0.0, 0.0]]),
        "a NaN": np.concatenate([few[rng.integers(0, 60, 4000)], [np.nan]]),
        "strided view": few[rng.integers(0, 60, 1 << 14)][::2],
    }
    for name, x in cases.items():
        want, inv = np.unique(x, return_inverse=True)
        got, ginv = _codes(x)
        assert np.array_equal(got, want, equal_nan=True), name
        assert np.array_equal(ginv, inv.ravel()), name
    assert _hashed_codes(cases["few sizes"]) is not None  # the fast path is taken
    assert _hashed_codes(cases["many distinct (collisions)"]) is None
    assert _hashed_codes(cases["signed zeros"]) is None
    assert _hashed_codes(cases["a NaN"]) is None


def test_chunk_supersets_rank_like_the_whole_grid():
    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(1, 300))
        q = int(rng.integers(1, 6))
        thr = rng.integers(0, 3 * q, n).astype(float)  # many ties
        mem = rng.integers(0, 3 * q, n).astype(float)
        cap = np.full(n, 3.0 * q)
        fits = rng.random(n) < 0.8
        top = int(rng.integers(0, 7))
        want = _ranking(fits, thr, mem, cap, top)
        size = int(rng.integers(1, n + 1))
        keep = set()
        for a in range(0, n, size):
            sl = slice(a, a + size)
            keep |= {a + i for i in _reportable(fits[sl], thr[sl], mem[sl], cap[sl], top)}
        k = np.array(sorted(keep), dtype=np.int64)
        order, front = _ranking(fits[k], thr[k], mem[k], cap[k], top)
        assert np.array_equal(k[order], want[0]) and np.array_equal(k[front], want[1])


def test_chunked_search_equals_one_pass(monkeypatch):
    job = make_job(get_model("llama-3-8b"), seq_len=4096, global_batch_seqs=256)
    cl = make_cluster("h100-sxm", 64)
    whole = search(job, cl)
    # four uneven chunks (an odd size, so chunk borders fall anywhere)
    monkeypatch.setattr(planner, "SEARCH_CHUNK", whole.valid // 4 + 7)
    parts = search(job, cl)
    assert [r.to_dict() for r in parts.rows] == [r.to_dict() for r in whole.rows]
    assert [r.to_dict() for r in parts.pareto] == [r.to_dict() for r in whole.pareto]
    assert (parts.valid, parts.fitting, parts.rejected) == (whole.valid, whole.fitting,
                                                            whole.rejected)


@pytest.mark.parametrize("mid, gpu, n, seq, tokens", [
    ("deepseek-v3", "h800", 2048, 4096, 63 * 2**20)])
def test_moe_search_memory_budget(mid, gpu, n, seq, tokens):
    # issue 15: under 250 MB peak for the whole process; the interpreter, numpy and the specs
    # take ~35 MB, so the search's own arrays stay under 150 MB (they were ~230 MB)
    job = make_job(get_model(mid), seq_len=seq, global_batch_tokens=tokens // seq * seq)
    cl = make_cluster(gpu, n)
    tracemalloc.start()
    try:
        res = search(job, cl)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.candidates_evaluated > 900_000
    assert peak < 150e6, peak
