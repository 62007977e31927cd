"""Progress on stderr: shown on a terminal after the delay, silent under --json, off a
terminal, and for short work; the CLI through a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalemodel.progress import activity, enabled

ROOT = Path(__file__).resolve().parents[2]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_only_on_a_terminal_and_without_json():
    assert enabled(_Tty()) and not enabled(io.StringIO())
    assert not enabled(_Tty(), json_output=True)


def test_plain_line_appears_after_the_delay_and_is_erased():
    s = _Tty()
    with activity("scalemodel demo", stream=s, delay_s=0.05, prefer="plain"):
        time.sleep(0.4)
    out = s.getvalue()
    assert "scalemodel demo ... 0 s" in out
    assert out.endswith("\r")  # the line is blanked at the end


@pytest.mark.parametrize("stream, json_output, delay", [
    (_Tty(), False, 5.0),  # short work: nothing
    (io.StringIO(), False, 0.0),  # not a terminal
    (_Tty(), True, 0.0),  # --json
])
def test_silent_cases(stream, json_output, delay):
    with activity("x", stream=stream, json_output=json_output, delay_s=delay, prefer="plain"):
        time.sleep(0.2)
    assert stream.getvalue() == ""


def _pty_run(args: list[str], timeout: float = 240.0) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal and stdout on a pipe."""
    master, slave = pty.openpty()
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "TERM": "xterm",
           "SCALEMODEL_PROGRESS_DELAY_S": "0"}  # show at once: the command here is quick
    p = subprocess.Popen([sys.executable, "-m", "scalemodel", *args], stdout=subprocess.PIPE,
                         stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    err = b""
    t_end = time.time() + timeout
    while time.time() < t_end:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
        elif p.poll() is not None:
            break
    out = p.stdout.read().decode() if p.stdout else ""
    p.wait(timeout=30)
    os.close(master)
    return p.returncode, out, err.decode(errors="replace")


CMD = ["kv", "--model", "llama-3-8b", "--gpu", "h100-sxm"]


def test_cli_shows_progress_on_a_terminal_and_not_under_json():
    rc, out, err = _pty_run(CMD)
    assert rc == 0 and "scalemodel kv ..." in err and "scalemodel kv ..." not in out
    rc, out, err = _pty_run([*CMD, "--json"])
    assert rc == 0 and "..." not in err
