"""scalemodel serve on waitress (issue 19): light requests are answered within 1 s while a heavy
one runs, and the heavy one stops at the per-request time limit in its own server thread.
Loopback only; every loop is bounded.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("waitress")

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 60) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def server():
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": SRC}
    p = subprocess.Popen([sys.executable, "-m", "scalemodel", "serve", "--port", str(port),
                          "--timeout", "4", "--threads", "4"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # up to 30 s to start (imports on a busy 2-core machine)
            if p.poll() is not None:
                pytest.fail(f"serve exited: {p.stderr.read()}")
            try:
                if _get(base + "/api/kv?model=llama-3-8b", timeout=5)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("serve did not answer within 30 s")
        yield base
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_light_requests_within_1s_while_a_heavy_one_runs(server):
    heavy: dict[str, object] = {}

    def run_heavy() -> None:
        t = time.perf_counter()
        # the heavy request: cluster compare of 200,000 synthetic jobs (its limit; about
        # 20 s of work per policy), stopped by the 4 s limit
        heavy["status"], heavy["body"] = _get(server + "/api/cluster/compare?trace=synthetic&jobs=200000")
        heavy["s"] = time.perf_counter() - t

    th = threading.Thread(target=run_heavy)
    th.start()
    time.sleep(0.5)  # the heavy request is running
    worst = 0.0
    for i in range(20):  # bounded: 20 light requests, each a new computation (no cache hit)
        if not th.is_alive():
            break
        t = time.perf_counter()
        status, body = _get(server + f"/api/kv?model=llama-3-8b&context={1024 + i}", timeout=10)
        worst = max(worst, time.perf_counter() - t)
        assert status == 200 and json.loads(body)
        time.sleep(0.1)
    th.join(timeout=60)
    assert i >= 5, "the heavy request ended before the light ones could be measured"
    assert worst < 1.0, f"a light request waited {worst:.2f} s"
    # the heavy one stopped at the 4 s limit, in its server thread: 503 with the reason
    assert heavy["status"] == 503, heavy
    assert b"limit" in heavy["body"]
    assert heavy["s"] < 15
