"""Start N real torch.distributed processes on this machine and collect what each returns.

Each rank is its own Python process (``python -m scalemodel.live.worker``) so that a hung or
crashed rank can be observed and killed from outside, as an operator would. The launcher:

* picks a free TCP port on 127.0.0.1 for the rendezvous (nothing leaves the machine);
* starts ``world_size`` workers with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set;
* each worker initialises the process group (gloo on CPU, nccl when asked and available),
  imports ``module:function`` and calls it as ``function(rank, world_size, **kwargs)``;
  the JSON-able value it returns is written to a per-rank result file;
* waits up to ``timeout_s``; ranks still running then are killed and reported as timed out.

Per-rank extra environment (e.g. a fault to inject on rank 2, or TORCH_FR_DUMP_TEMP_FILE for the
Flight Recorder) goes in ``rank_env``. Only this module and ``worker`` import torch, and only in
the child processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput


@dataclass(frozen=True)
class RankResult:
    rank: int
    status: str  # "ok", "error" (non-zero exit), "timeout" (killed by the launcher),
    # "aborted" (killed because another rank failed, with fail_fast)
    returncode: int | None
    value: Any = None  # what the function returned (JSON)
    error: str = ""  # last lines of stderr for a failed rank
    wall_s: float = 0.0


@dataclass(frozen=True)
class LaunchResult:
    world_size: int
    backend: str
    ranks: tuple[RankResult, ...]
    wall_s: float
    workdir: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.status == "ok" for r in self.ranks)

    def values(self) -> list[Any]:
        return [r.value for r in self.ranks]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(
    target: str,
    world_size: int,
    *,
    kwargs: Mapping[str, Any] | None = None,
    backend: str = "gloo",
    timeout_s: float = 120.0,
    rank_env: Mapping[int, Mapping[str, str]] | None = None,
    workdir: str | Path | None = None,
    pg_timeout_s: float | None = None,
    fail_fast: bool = False,
) -> LaunchResult:
    """Run ``target`` ("package.module:function") on ``world_size`` local ranks.

    ``pg_timeout_s`` is the process group's own timeout (how long a collective may wait before
    torch raises); by default it is longer than ``timeout_s`` so a hang stays a hang.
    ``fail_fast``: once a rank exits with an error, kill the others at once (status "aborted")
    instead of letting them wait for it until the deadline. Whatever happens in the launcher
    itself (Ctrl-C included), every rank it started is killed before the exception leaves.
    """
    if world_size < 1:
        raise BadInput(f"world size must be at least 1, got {world_size}")
    if ":" not in target:
        raise BadInput(f"target must look like 'package.module:function', got {target!r}")
    if backend not in ("gloo", "nccl"):
        raise BadInput(f"backend must be gloo or nccl, got {backend!r}")
    wd = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="scalemodel-launch-"))
    wd.mkdir(parents=True, exist_ok=True)
    port = free_port()
    src_root = str(Path(__file__).resolve().parents[2])  # .../src, so children import this copy
    procs: list[tuple[int, subprocess.Popen[bytes], Any, float]] = []
    base_env = dict(os.environ)
    base_env["PYTHONPATH"] = src_root + os.pathsep + base_env.get("PYTHONPATH", "")
    base_env.setdefault("OMP_NUM_THREADS", "1")
    spec = {
        "target": target,
        "kwargs": dict(kwargs or {}),
        "backend": backend,
        "pg_timeout_s": pg_timeout_s if pg_timeout_s is not None else max(timeout_s * 4, 60.0),
    }
    (wd / "spec.json").write_text(json.dumps(spec))
    t0 = time.monotonic()
    try:
        return _run(procs, wd, world_size, backend, spec, base_env, port, rank_env, t0,
                    timeout_s, fail_fast)
    finally:
        for _rank, p, err, _started in procs:
            if p.poll() is None:
                _kill(p)
                p.wait()
            if not err.closed:
                err.close()


def _run(procs: list[Any], wd: Path, world_size: int, backend: str, spec: dict[str, Any],
         base_env: dict[str, str], port: int, rank_env: Mapping[int, Mapping[str, str]] | None,
         t0: float, timeout_s: float, fail_fast: bool) -> LaunchResult:
    with _signals_held():  # a Ctrl-C mid-spawn lands after every started rank is in ``procs``
        _spawn(procs, wd, world_size, base_env, port, rank_env)
    deadline = t0 + timeout_s
    results: dict[int, RankResult] = {}
    failed = False
    while len(results) < world_size:
        for rank, p, err, started in procs:
            if rank in results:
                continue
            rc = p.poll()
            if rc is None and time.monotonic() < deadline and not failed:
                continue
            status = "ok" if rc == 0 else "error"
            if rc is None:
                _kill(p)
                rc, status = p.wait(), ("aborted" if failed else "timeout")
            err.close()
            results[rank] = _collect(wd, rank, status, rc, time.monotonic() - started)
            if fail_fast and status == "error":
                failed = True
        if len(results) < world_size:
            time.sleep(0.02)
    return LaunchResult(
        world_size=world_size,
        backend=backend,
        ranks=tuple(results[r] for r in range(world_size)),
        wall_s=time.monotonic() - t0,
        workdir=str(wd),
    )


@contextlib.contextmanager
def _signals_held() -> Any:
    """Hold SIGINT and SIGTERM while ranks are spawned (main thread, POSIX): an interrupt that
    arrives between a child's fork and its entry in the launcher's list would orphan it; held,
    it is raised right after, when the cleanup in :func:`launch` can see every child."""
    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not \
            threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _spawn(procs: list[Any], wd: Path, world_size: int, base_env: dict[str, str], port: int,
           rank_env: Mapping[int, Mapping[str, str]] | None) -> None:
    for rank in range(world_size):
        env = dict(base_env)
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(world_size),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            SCALEMODEL_LAUNCH_DIR=str(wd),
        )
        env.update({k: str(v) for k, v in (rank_env or {}).get(rank, {}).items()})
        err = open(wd / f"rank_{rank}.stderr", "wb")  # noqa: SIM115 - closed below
        p = subprocess.Popen(
            [sys.executable, "-m", "scalemodel.live.worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        procs.append((rank, p, err, time.monotonic()))


def _kill(p: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(p.pid, 9)
    except (ProcessLookupError, PermissionError):
        p.kill()


def _collect(wd: Path, rank: int, status: str, rc: int | None, wall: float) -> RankResult:
    out = wd / f"rank_{rank}.json"
    value: Any = None
    if out.exists():
        try:
            value = json.loads(out.read_text())
        except json.JSONDecodeError:
            value = None
    err_txt = ""
    if status != "ok":
        lines = (wd / f"rank_{rank}.stderr").read_text(errors="replace").splitlines()
        err_txt = "\n".join(lines[-12:])
    if status == "ok" and not out.exists():
        status, err_txt = "error", "the rank exited 0 without writing its result"
    return RankResult(rank, status, rc, value, err_txt, wall)
