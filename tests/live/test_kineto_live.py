"""torch.profiler (Kineto) traces written by real gloo ranks on CPU, triaged by triage slow."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("scenario, verdict, ranks, gz", [
    ("straggler", "straggler", [3], False),
    ("slow-link", "fabric", [], False),
    ("lost-overlap", "lost-overlap", [], True),
])
def test_kineto_verdicts(tmp_path, scenario, verdict, ranks, gz):
    from scalemodel.live.kineto_run import run_profiled

    res = run_profiled(scenario, 4, tmp_path, gz=gz)
    assert res.ok, [r.error for r in res.ranks]
    assert len(list(tmp_path.glob("rank*.trace.json" + (".gz" if gz else "")))) == 4
    r = subprocess.run([sys.executable, "-m", "scalemodel", "triage", "slow", str(tmp_path),
                        "--json"], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["verdict"], d["ranks"]) == (verdict, ranks), d["evidence"]
    assert d["input"]["format"] == "kineto"
    ov = d["input"]["overlap_per_step"]["0"]
    assert all(0.0 <= s["overlap"] <= 1.0 for s in ov.values())
