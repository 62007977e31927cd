"""Real gloo runs with injected faults, triaged from both trace formats (4 ranks each)."""

import pytest

pytestmark = pytest.mark.live


@pytest.mark.parametrize("scenario,verdict", [("dead-rank", "dead-rank"),
                                              ("order-mismatch", "order-mismatch")])
def test_hang_scenarios(tmp_path, scenario, verdict):
    from scalemodel.live.triage_run import run_scenario
    from scalemodel.traces.hang import analyse_hang
    from scalemodel.traces.load import load_dir

    run_scenario(scenario, 4, tmp_path)
    for fmt in ("trace", "fr"):
        r = analyse_hang(load_dir(tmp_path, fmt), 4)
        assert (r.verdict, r.ranks) == (verdict, (3,)), (fmt, r.evidence)


def test_straggler(tmp_path):
    from scalemodel.live.triage_run import run_scenario
    from scalemodel.traces.load import load_dir
    from scalemodel.traces.slow import analyse_slow

    run_scenario("straggler", 4, tmp_path)
    r = analyse_slow(load_dir(tmp_path, "trace"))
    assert (r.verdict, r.ranks) == ("straggler", (3,)), r.evidence
