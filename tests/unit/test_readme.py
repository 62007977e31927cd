"""The README as a user reads it from a clean clone (issue 18, items 5-6).

Every example command in the README runs as written (exit 0) from a directory that holds only
what a clone has (examples/, validation/); no link points outside the repository; the model
families line is the registry of readers; ``make demo`` installs no torch.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from scalemodel.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()

# examples that take longer than ~10 s on a 2-core machine run under `make test` (CI), not in
# the quick default `pytest`; those that start torch.distributed ranks need torch
SLOW = ("moe route", "moe serve", "triage run", "cluster compare", "reliability checkpoint")
TORCH = ("triage run",)


def examples() -> list[str]:
    block = README.split("Examples:", 1)[1].split("\n\n", 2)[1]
    cmds = [line.strip() for line in block.splitlines() if line.startswith("    scalemodel ")]
    assert len(cmds) >= 15, "the README's example block moved"
    return cmds


def _param(cmd: str):
    marks = []
    if any(f"scalemodel {s}" in cmd for s in SLOW):
        marks.append(pytest.mark.slow)
    return pytest.param(cmd, marks=marks, id=cmd[11:60])


@pytest.mark.parametrize("cmd", [_param(c) for c in examples()])
def test_readme_example_runs_as_written(cmd, tmp_path, monkeypatch, capsys):
    if any(f"scalemodel {s}" in cmd for s in TORCH) and importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (the live extra)")
    for d in ("examples", "validation"):  # what a clone has beside the package
        (tmp_path / d).symlink_to(ROOT / d)
    monkeypatch.chdir(tmp_path)
    for part in cmd.split(" && "):
        argv = shlex.split(part)
        assert argv[0] == "scalemodel"
        rc = main(argv[1:])
        out, err = capsys.readouterr()
        assert rc == 0, f"{part}: exit {rc}: {err.strip()[:300]}"
        assert out.strip()


def test_readme_links_stay_inside_the_repository():
    for target in re.findall(r"\]\(([^)#]+)", README):
        assert not target.startswith(("http:", "https:", "/")), target
        path = (ROOT / target).resolve()
        assert ROOT in path.parents or path == ROOT, f"{target} leaves the repository"
        assert path.exists(), f"{target} does not exist"


def test_readme_model_families_are_the_readers():
    from scalemodel.specs.model import supported_families

    m = re.search(r"<!-- model-families: begin -->\n(.*?)\n<!-- model-families: end -->", README,
                  re.S)
    assert m, "the README's model-families markers are missing"
    listed = re.findall(r"`([a-z0-9_]+)`", m.group(1))
    assert listed == supported_families()


def test_readme_example_inputs_are_shipped():
    for path in re.findall(r"(examples/[\w./-]+)", README):
        assert (ROOT / path.rstrip(".")).exists(), path


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_demo_installs_no_torch():
    dry = subprocess.run(["make", "-n", "-B", "demo"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert "pip install" in dry and "torch" not in dry
    test = subprocess.run(["make", "-n", "-B", "test"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    assert "torch==" in test and "export-check" in test
