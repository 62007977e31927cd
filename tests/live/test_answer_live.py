"""`answer hang-triage --live --ranks N` runs N real gloo ranks (issue 20: it ran 4)."""

import json

import pytest

pytestmark = pytest.mark.live


def test_hang_triage_live_runs_the_ranks_asked_for(capsys):
    pytest.importorskip("torch")
    from scalemodel.cli import main

    assert main(["answer", "hang-triage", "--live", "--ranks", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr()[0])
    # 3 per-rank traces read back (not the default 4); the injected fault is on the last rank (fault_rank -1)
    assert len(d["trace"]["per_rank"]) == 3
    assert d["trace"]["verdict"] == "order-mismatch" and d["trace"]["ranks"] == [2]
    assert d["parameters"] == {"live": True, "ranks": 3}
