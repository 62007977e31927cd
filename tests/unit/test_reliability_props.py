"""Invariants of the reliability math (hypothesis) and the blast-radius scopes."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.analytic.blast import Hierarchy, coordinates, parse_layout, scope_of
from scalemodel.analytic.reliability import best_interval, daly_interval, goodput, young_interval

pos = st.floats(min_value=1.0, max_value=1e5)


@given(delta=pos, m=st.floats(min_value=1e3, max_value=1e7), r=st.floats(0, 1e4))
@settings(max_examples=60, deadline=None)
def test_goodput_in_unit_interval_and_daly_near_optimal(delta, m, r):
    t = daly_interval(delta, m)
    g = goodput(t, delta, r, m)
    assert 0 <= g <= 1
    if delta < m / 10:
        assert g >= goodput(best_interval(delta, r, m), delta, r, m) - 1e-3


@given(delta=pos, m=st.floats(min_value=1e3, max_value=1e7))
def test_daly_below_young_for_small_delta(delta, m):
    if delta < m / 100:
        assert daly_interval(delta, m) < young_interval(delta, m)


@given(tau=pos, delta=pos, r=st.floats(0, 1e4), m=st.floats(min_value=1e3, max_value=1e7))
def test_more_failures_never_raise_goodput(tau, delta, r, m):
    assert goodput(tau, delta, r, m / 2) <= goodput(tau, delta, r, m) + 1e-12
    assert math.isfinite(goodput(tau, delta, r, m))


def test_scopes_follow_rank_order():
    h = Hierarchy(8, 4, 32, 8)
    lay = parse_layout("tp=8,pp=16,dp=128", "tp-cp-ep-dp-pp", 16384)
    c = coordinates(lay)
    assert scope_of(h.footprint_ranks("gpu", 16384), lay, c) == ("rank", 1)
    assert scope_of(h.footprint_ranks("node", 16384), lay, c) == ("tp_group", 1)
    # a rack = 4 nodes = 4 TP groups of 4 different data-parallel replicas (dp is next fastest)
    assert scope_of(h.footprint_ranks("rack", 16384), lay, c) == ("pipeline", 4)
    alt = parse_layout("tp=8,pp=16,dp=128", "tp-cp-ep-pp-dp", 16384)
    assert scope_of(h.footprint_ranks("rack", 16384), alt, coordinates(alt)) == ("pipeline", 1)
    assert scope_of(h.footprint_ranks("job", 16384), lay, c)[0] == "job"


def test_a_subnormal_checkpoint_write_prices_a_finite_goodput():
    """A write of 2.2e-313 s (the web fuzz found it) made exp(x) - 1 round to 0 in the goodput
    formula; expm1 keeps it: with delta -> 0 and tau = Daly's ~ sqrt(2 delta M), goodput tends to
    tau / (tau + delta) * exp(-R/M) -> exp(-R/M)."""
    from scalemodel.sim.checkpoint import checkpoint_study

    st_ = checkpoint_study(gpus=16384, gpu="h100-sxm", checkpoint_write_s=2.2250738585e-313,
                           restart_s=600.0)
    r = st_.result
    # delta << tau, so the limit is reached: goodput = exp(-R/M)
    assert math.isclose(r.goodput, math.exp(-r.restart_s / r.job_mtbf_s), rel_tol=1e-9)
