"""Alpha-beta fits and calibration profiles (no torch needed)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.analytic.calibration import (
    build_profile,
    check_profile,
    fit_alpha_beta,
    profile_cost,
)
from scalemodel.errors import BadInput


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-6, 1e-2), st.floats(1e-12, 1e-8))
def test_fit_recovers_a_straight_line(alpha, beta):
    S = [2.0**k for k in range(10, 23, 2)]
    f = fit_alpha_beta(S, [alpha + beta * s for s in S])
    assert f.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert f.beta_s_per_byte == pytest.approx(beta, rel=1e-6)


def test_profile_round_trip_and_rescaling():
    rows = [{"collective": "all-reduce", "bytes": s, "time_s": 1e-3 + 1e-9 * s}
            for s in (1024, 4096, 1 << 20)]
    prof = check_profile(build_profile(rows, backend="gloo", world_size=4, meta={}))
    same = profile_cost(prof, "all-reduce", 1 << 20, 4)
    assert same.time_s == pytest.approx(1e-3 + 1e-9 * (1 << 20))
    # at 8 ranks: ring steps 14 vs 6, wire bytes 7/4 vs 3/2 of S (derivation in the docstring)
    eight = profile_cost(prof, "all-reduce", 1 << 20, 8)
    assert eight.time_s == pytest.approx(1e-3 / 6 * 14 + 1e-9 / 1.5 * 1.75 * (1 << 20))


def test_bad_profiles():
    with pytest.raises(BadInput, match="not a scalemodel comm profile"):
        check_profile({"kind": "x"})
    with pytest.raises(BadInput, match="non-negative"):
        check_profile({"kind": "scalemodel-comm-profile", "world_size": 4,
                       "collectives": {"all-reduce": {"alpha_s": -1}}})
