"""triage hang against PyTorch's own Flight Recorder analyser (torch.distributed.flight_recorder,
``python -m torch.distributed.flight_recorder.fr_trace``) on the real gloo dumps of torch 2.13.

The dumps' pg_config is keyed '' while their entries name process group '0', which makes the
analyser fail with KeyError ('0', 3) (see the dumps' README); the test rewrites that one key,
from the JSON twin of each dump, into a pickle in a temporary folder, and runs the analyser
there. The "detail" scenario is left out: the analyser aborts on its helper group.

Torch's analyser takes the first rank's entry as the expected one, so for a mismatch it names
the other ranks as culprits; triage hang names the rank that disagrees with the majority. The
check is that both find the same sequence number and the same split of the ranks.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = (ROOT / "tests" / "fixtures" / "fr_traces_gloo_torch2.13",
              ROOT.parent / "shared" / "data" / "fr_traces_gloo_torch2.13",
              Path("/work/shared/data/fr_traces_gloo_torch2.13"))
DATA = next((p for p in CANDIDATES if (p / "hang_json").is_dir()), None)
pytestmark = pytest.mark.skipif(DATA is None, reason="Flight Recorder dumps of torch 2.13 not found")


def _torch_analyser(scenario: str, tmp: Path) -> str:
    pytest.importorskip("torch.distributed.flight_recorder.fr_trace")
    out = tmp / scenario
    out.mkdir()
    for f in sorted((DATA / f"{scenario}_json").glob("rank_*.json")):
        d = json.loads(f.read_text())
        names = {e["process_group"][0] for e in d.get("entries", [])}
        if "" in d.get("pg_config", {}) and names:
            d["pg_config"] = {n: d["pg_config"][""] for n in names}
        (out / f.stem).write_bytes(pickle.dumps(d))
    r = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                        str(out), "-p", "rank_"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-800:]
    return r.stdout + r.stderr  # the analyser reports through logging (stderr)


def _ours(scenario: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "scalemodel", "triage", "hang",
                        str(DATA / scenario), "--json"], capture_output=True, text=True,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_healthy_both_find_nothing(tmp_path):
    text = _torch_analyser("healthy", tmp_path)
    assert "has errors" not in text and "Not all ranks joining" not in text
    assert _ours("healthy")["verdict"] == "healthy"


def test_hang_same_missing_rank_and_sequence(tmp_path):
    text = _torch_analyser("hang", tmp_path)
    seq = int(re.search(r"Not all ranks joining collective, sequence number: (\d+)", text)[1])
    missing = {int(x) for x in re.search(r"missing ranks: \{([\d, ]+)\}", text)[1].split(",")}
    ours = _ours("hang")
    assert (ours["seq"], set(ours["ranks"])) == (seq, missing)
    assert re.search(r"collective: gloo:(\w+)", text)[1] == ours["op"]


@pytest.mark.parametrize("scenario, torch_error, our_verdict", [
    ("mismatch", "COLLECTIVE_TYPE_MISMATCH", "op-mismatch"),
    ("sizemm", "SIZE_OR_SYNTAX_MISMATCH", "size-mismatch"),
])
def test_mismatch_same_sequence_and_split(tmp_path, scenario, torch_error, our_verdict):
    text = _torch_analyser(scenario, tmp_path)
    seq = int(re.search(r"Collective sequence number: (\d+) has errors", text)[1])
    culprits = {int(r) for r, kind in re.findall(r"Culprit rank (\d+); Error type: (\w+)", text)
                if kind == torch_error}
    world = int(re.search(r"world size: (\d+)", text)[1])
    ours = _ours(scenario)
    assert ours["verdict"] == our_verdict and ours["seq"] == seq
    # torch blames everyone who disagrees with rank 3's entry; we blame rank 3 (the minority)
    assert set(ours["ranks"]) | culprits == set(range(world))
    assert not set(ours["ranks"]) & culprits
