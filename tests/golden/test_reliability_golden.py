"""Golden values for the failure budget; each derivation is written out here."""

import math

from scalemodel.analytic.reliability import checkpoint_plan, daly_interval, goodput, young_interval
from scalemodel.sim.failures import simulate
from scalemodel.specs.reliability import failure_profile


def test_llama3_job_mtbf_from_table5_counts():
    # Llama 3 (arXiv 2407.21783) Table 5: 419 unexpected interruptions, 16,384 GPUs, 54 days
    # -> 419 / 54 = 7.759 per day -> 86400 / 7.759 = 11,135 s (3.09 h)
    p = failure_profile("llama3-h100")
    assert sum(c.count for c in p.components) == 419
    r = checkpoint_plan(p, gpus=16384, gpus_per_node=8, checkpoint_write_s=60, restart_s=600)
    assert math.isclose(r.rate_per_day, 419 / 54, rel_tol=1e-12)
    assert math.isclose(r.job_mtbf_s, 86400 * 54 / 419, rel_tol=1e-12)


def test_young_and_daly_worked_example():
    # Young 1974: sqrt(2 * 60 * 11135.08) = 1155.9 s; Daly 2006 higher-order: 1116.3 s
    m = 86400 * 54 / 419
    assert math.isclose(young_interval(60, m), math.sqrt(2 * 60 * m))
    x = 60 / (2 * m)
    assert math.isclose(daly_interval(60, m), math.sqrt(2 * 60 * m) * (1 + math.sqrt(x) / 3 + x / 9) - 60)
    assert round(float(young_interval(60, m))) == 1156 and round(daly_interval(60, m)) == 1116


def test_daly_interval_is_m_when_checkpoint_exceeds_2m():
    assert daly_interval(300.0, 100.0) == 100.0


def test_goodput_without_failures_is_tau_over_tau_plus_delta():
    assert math.isclose(goodput(1000, 50, 600, 1e15), 1000 / 1050, rel_tol=1e-6)


def test_meta_rsc1_projection_16k_gpus_about_1_8_hours():
    # Kokolis et al. 2024: MTTF(N) = 1 / (r_f N / 8), r_f = 6.5 / 1000 node-days -> 1.8 h at 16k
    r = checkpoint_plan(failure_profile("meta-rsc1-a100"), gpus=16384, gpus_per_node=8,
                        checkpoint_write_s=60, restart_s=600)
    assert math.isclose(r.job_mtbf_s / 3600, 24 / (6.5e-3 * 2048), rel_tol=1e-9)
    assert 1.7 < r.job_mtbf_s / 3600 < 1.9


def test_monte_carlo_matches_daly_within_2_percent():
    m = 86400 * 54 / 419
    for tau in (400.0, 1116.0, 4000.0):
        s = simulate(tau, 60, 600, m, trials=120, horizon_s=20 * 86400, seed=3)
        assert abs(s.goodput - goodput(tau, 60, 600, m)) / goodput(tau, 60, 600, m) < 0.02
