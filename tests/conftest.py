"""Test setup: import the package from this checkout's src/ (worktrees included)."""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    """Skip GPU tests where no CUDA device is visible, and live tests where torch is missing."""
    import importlib.util

    import pytest

    has_torch = importlib.util.find_spec("torch") is not None
    has_gpu = False
    if has_torch and any("gpu" in i.keywords for i in items):
        import torch

        has_gpu = torch.cuda.is_available()
    for item in items:
        if "live" in item.keywords and not has_torch:
            item.add_marker(pytest.mark.skip(reason="torch is not installed"))
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


def run_cli(capsys, *argv):  # noqa: ANN001, ANN002, ANN201
    """(exit code, stdout, stderr) of one ``scalemodel`` command run in-process; an argparse
    rejection (SystemExit) reads as its exit code. Test modules import it as ``run``."""
    from scalemodel.cli import main

    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _cli_fixture():  # noqa: ANN202
    import pytest

    @pytest.fixture
    def cli(capsys):  # noqa: ANN001, ANN202
        """``cli(*argv)`` -> (exit code, stdout, stderr) of one ``scalemodel`` command run
        in-process (:func:`run_cli` with this test's capsys)."""

        def run(*argv):  # noqa: ANN002, ANN202
            return run_cli(capsys, *argv)

        return run

    return cli


cli = _cli_fixture()
