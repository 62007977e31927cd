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
