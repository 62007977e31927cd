"""Invariants of the planner over random jobs (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.analytic.memory import stage_partition
from scalemodel.analytic.planner import evaluate, layout_grid, make_cluster, make_job
from scalemodel.specs import get_model

MODELS = ["llama-3-8b", "llama-2-13b", "mixtral-8x7b"]


@settings(max_examples=30, deadline=None)
@given(L=st.integers(1, 200), p=st.integers(1, 64), v=st.integers(1, 4),
       extra=st.floats(0, 3))
def test_partition_sums_and_is_balanced(L, p, v, extra):
    if p * v > L:
        return
    sl = stage_partition(L, p, vpp=v, last_extra=extra)
    assert len(sl) == p and sum(sl) == L and min(sl) >= 1


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(MODELS), nodes=st.sampled_from([1, 2, 4, 8]),
       seq=st.sampled_from([2048, 4096, 8192]), seqs=st.sampled_from([64, 128, 256]))
def test_bounds_and_gpu_count(model, nodes, seq, seqs):
    m = get_model(model)
    job = make_job(m, seq_len=seq, global_batch_seqs=seqs)
    cl = make_cluster("h100-sxm", 8 * nodes)
    g = layout_grid(job, cl)
    if g.cols["tp"].size == 0:
        return
    c = g.cols
    assert np.all(c["tp"] * c["pp"] * c["dp"] * c["cp"] == 8 * nodes)
    assert np.all(c["dp"] * c["micro_batch"] * c["microbatches"] == seqs)
    r = evaluate(job, cl, c)
    assert np.all(r.lower_s <= r.step_time_s * (1 + 1e-9))
    assert np.all(r.step_time_s <= r.upper_s * (1 + 1e-9))
    assert np.all(r.hfu >= r.mfu - 1e-12)
    assert np.all(r.mfu < 1)
