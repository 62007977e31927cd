"""`triage run` reports a missing dump kind (BadInput) in its JSON, and lets a bug surface."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from scalemodel.cli import main
from scalemodel.errors import BadInput


@pytest.fixture
def fake_run(monkeypatch):
    """No real gloo job: a finished run whose trace folder has no FR dumps."""
    import scalemodel.live.triage_run as tr
    import scalemodel.traces.load as ld

    monkeypatch.setattr(tr, "run_scenario", lambda *a, **k: SimpleNamespace(wall_s=1.0, ranks=[]))

    def load_dir(path, fmt):
        raise BadInput(f"DIR: no {fmt} dumps under {path}")

    monkeypatch.setattr(ld, "load_dir", load_dir)


def test_missing_dumps_are_reported_in_the_json(fake_run, tmp_path, capsys):
    assert main(["triage", "run", "--out", str(tmp_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["analysis"]["fr"] == {"error": f"DIR: no fr dumps under {tmp_path}"}
    assert d["analysis"]["trace"] == {"error": f"DIR: no trace dumps under {tmp_path}"}


def test_a_bug_in_the_analysis_is_not_turned_into_json(fake_run, monkeypatch, tmp_path):
    import scalemodel.traces.load as ld

    def broken(path, fmt):
        raise KeyError("a bug, not bad input")

    monkeypatch.setattr(ld, "load_dir", broken)
    with pytest.raises(KeyError):
        main(["triage", "run", "--out", str(tmp_path), "--json"])


def test_run_parameters_from_run_json():
    from scalemodel.live.triage_run import run_parameters

    # a recording from before run.json kept its parameters: the command set none of them,
    # so they are run_scenario's defaults (12 steps, fault from step 5 on the last rank, 4 s)
    old = run_parameters({"ranks": 4})
    assert (old["ranks"], old["steps"], old["fault_step"], old["fault_rank"],
            old["pg_timeout_s"]) == (4, 12, 5, 3, 4.0)
    new = run_parameters({"ranks": 8, "parameters": {"steps": 20, "fault_step": 7,
                                                     "fault_rank": 2, "pg_timeout_s": 6.0}})
    assert (new["ranks"], new["steps"], new["fault_step"], new["fault_rank"],
            new["pg_timeout_s"]) == (8, 20, 7, 2, 6.0)
