"""A training-like loop of collectives with injected faults, run on real gloo ranks.

Each step: compute (a timed sleep standing in for forward/backward), a gradient bucket
all-reduce on the world group issued asynchronously and overlapped with the second half of the
compute, then a small all-reduce on a second process group ("aux", e.g. metrics). Every rank
writes scalemodel's JSONL collective trace (with heartbeats from a side thread) and a PyTorch
Flight Recorder dump (pickle and JSON), the latter when it finishes, fails, or stops making
progress for ``stall_s`` (gloo never dumps by itself; NCCL's watchdog would).

Scenarios (fault on ``fault_rank`` from step ``fault_step``):
  healthy, dead-rank (the process exits), hang (sleeps before the collective), op-mismatch
  (all_gather instead of all_reduce), size-mismatch (twice the elements), order-mismatch (aux
  before world), straggler (compute x ``slow_factor``), slow-link (every rank: collectives take
  ``link_delay_s`` longer), lost-overlap (every rank: the bucket all-reduce made synchronous).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

SCENARIOS = ("healthy", "dead-rank", "hang", "op-mismatch", "size-mismatch", "order-mismatch",
             "straggler", "slow-link", "lost-overlap")
HANG_SCENARIOS = ("dead-rank", "hang", "op-mismatch", "size-mismatch", "order-mismatch")


_DUMP_LOCK = threading.Lock()  # the watchdog thread and the main path may both dump


def _dump_fr(out: Path, rank: int) -> None:
    with _DUMP_LOCK:
        _dump_fr_locked(out, rank)


def _dump_fr_locked(out: Path, rank: int) -> None:
    import torch._C._distributed_c10d as c10d

    try:
        pk = c10d._dump_fr_trace(True, True, False)
        js = c10d._dump_fr_trace_json(True, False)
    except Exception:  # noqa: BLE001 - FR disabled or unavailable: the JSONL trace still exists
        return
    for sub, name, data in (("fr", f"rank_{rank}", pk), ("fr_json", f"rank_{rank}.json", js)):
        d = out / sub
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"{name}.{threading.get_ident()}.tmp"
        tmp.write_bytes(data if isinstance(data, bytes) else str(data).encode())
        tmp.replace(d / name)


def train(rank: int, world: int, *, scenario: str, out: str, steps: int = 12,
          fault_step: int = 5, fault_rank: int = -1, compute_s: float = 0.08,
          numel: int = 1 << 20, slow_factor: float = 4.0, link_delay_s: float = 0.06,
          stall_s: float = 2.0, hang_s: float = 8.0, run_id: str = "") -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from ..traces.recorder import CollectiveRecorder

    outp = Path(out)
    fault_rank = fault_rank if fault_rank >= 0 else world - 1
    aux = dist.new_group(ranks=list(range(world)))
    rec = CollectiveRecorder(outp / "trace", rank, world, run_id=run_id)
    rec.declare_groups({"world": list(range(world)), "aux": list(range(world))})
    progress = [time.time()]
    done = threading.Event()
    dumped = threading.Event()

    def watchdog() -> None:
        rec.heartbeat()
        while not done.wait(0.1):
            rec.heartbeat()
            if not dumped.is_set() and time.time() - progress[0] > stall_s:
                dumped.set()
                _dump_fr(outp, rank)

    threading.Thread(target=watchdog, daemon=True).start()
    grad = torch.ones(numel)
    small = torch.ones(8)
    me = rank == fault_rank
    try:
        for step in range(steps):
            faulty = step >= fault_step
            with rec.step(step):
                if faulty and me and scenario == "dead-rank":
                    os._exit(17)
                if faulty and me and scenario == "hang" and step == fault_step:
                    time.sleep(hang_s)  # stuck outside any collective; the operator kills it
                    os._exit(0)
                c = compute_s * (slow_factor if faulty and me and scenario == "straggler" else 1)
                with rec.compute(step):
                    time.sleep(c / 2)
                size = numel * 2 if (faulty and me and scenario == "size-mismatch") else numel
                g = grad if size == numel else torch.ones(size)
                sync = faulty and scenario == "lost-overlap"
                delay = link_delay_s if faulty and scenario == "slow-link" else 0.0
                swap = faulty and me and scenario == "order-mismatch"
                if swap:
                    _aux_allreduce(rec, dist, small, aux, delay)
                if faulty and me and scenario == "op-mismatch":
                    parts = [torch.empty_like(g) for _ in range(world)]
                    with rec.collective("all_gather", "world", [[size]], "float32"):
                        dist.all_gather(parts, g)
                    with rec.compute(step):
                        time.sleep(c / 2)
                elif sync:
                    with rec.collective("all_reduce", "world", [[size]], "float32"):
                        dist.all_reduce(g)
                    with rec.compute(step):
                        time.sleep(c / 2)
                else:
                    h = rec.issue("all_reduce", "world", [[size]], "float32")
                    work = dist.all_reduce(g, async_op=True)
                    with rec.compute(step):
                        time.sleep(c / 2)
                    with rec.wait(h):
                        work.wait()
                        if delay:
                            time.sleep(delay)
                progress[0] = time.time()
                if not swap:
                    _aux_allreduce(rec, dist, small, aux, delay)
                progress[0] = time.time()
        status, msg = "ok", ""
    except Exception as e:  # noqa: BLE001 - a timed-out or broken collective is the experiment
        status, msg = "error", f"{type(e).__name__}: {e}"
        rec.error(msg)
    done.set()
    _dump_fr(outp, rank)
    if status == "ok":
        rec.close()
    return {"rank": rank, "status": status, "error": msg[:300]}


def _aux_allreduce(rec: Any, dist: Any, t: Any, group: Any, delay: float) -> None:
    with rec.collective("all_reduce", "aux", [[t.numel()]], "float32"):
        dist.all_reduce(t, group=group)
        if delay:
            time.sleep(delay)


def run_scenario(scenario: str, ranks: int, out: str | Path, *, steps: int = 12,
                 fault_step: int = 5, fault_rank: int = -1, ranks_per_node: int = 2,
                 pg_timeout_s: float = 4.0, timeout_s: float = 60.0) -> Any:
    """Launch ``ranks`` real gloo processes running :func:`train`; returns the LaunchResult."""
    from ..errors import BadInput
    from .launcher import launch

    if scenario not in SCENARIOS:
        raise BadInput(f"--scenario: choose one of {', '.join(SCENARIOS)}, got {scenario!r}")
    if not 2 <= ranks <= 16:
        raise BadInput(f"--ranks must be between 2 and 16 on one machine, got {ranks}")
    if fault_rank >= ranks:
        raise BadInput(f"--fault-rank must be below --ranks ({ranks}), got {fault_rank}")
    if not 1 <= fault_step < steps:
        raise BadInput(f"--fault-step must be between 1 and --steps - 1, got {fault_step}")
    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    for sub in ("trace", "fr", "fr_json"):
        d = outp / sub
        if d.exists():
            for f in d.iterdir():
                if f.is_file():
                    f.unlink()
    rank_env = {r: {"TORCH_FR_BUFFER_SIZE": "2000",
                    "SCALEMODEL_NODE": f"node{r // max(1, ranks_per_node)}"} for r in range(ranks)}
    run_id = f"{scenario}-{int(time.time())}"
    res = launch("scalemodel.live.triage_run:train", ranks,
                 kwargs={"scenario": scenario, "out": str(outp.resolve()), "steps": steps,
                         "fault_step": fault_step, "fault_rank": fault_rank,
                         "run_id": run_id, "stall_s": pg_timeout_s / 2,
                         "hang_s": pg_timeout_s + 4.0},
                 timeout_s=timeout_s, rank_env=rank_env, workdir=outp / "launch",
                 pg_timeout_s=pg_timeout_s)
    params = {"steps": steps, "fault_step": fault_step,
              "fault_rank": fault_rank if fault_rank >= 0 else ranks - 1,
              "ranks_per_node": ranks_per_node, "pg_timeout_s": pg_timeout_s}
    _write_summary(outp, scenario, ranks, run_id, res, params)
    return res


def run_parameters(meta: dict[str, Any]) -> dict[str, Any]:
    """The parameters a recorded run used: its run.json ``parameters``, or for recordings made
    before run.json carried them, the defaults of :func:`run_scenario` (their ``command`` line
    sets none of them)."""
    import inspect

    sig = inspect.signature(run_scenario).parameters
    p = {k: sig[k].default for k in ("steps", "fault_step", "fault_rank", "ranks_per_node",
                                     "pg_timeout_s")}
    p |= meta.get("parameters", {})
    p["ranks"] = int(meta["ranks"])
    if p["fault_rank"] < 0:
        p["fault_rank"] = int(meta["ranks"]) - 1
    return p


def _write_summary(out: Path, scenario: str, ranks: int, run_id: str, res: Any,
                   params: dict[str, Any]) -> None:
    """run.json: what ran and how each rank ended, so a run directory describes itself."""
    import datetime
    import json

    import torch

    summary = {
        "scenario": scenario, "ranks": ranks, "run_id": run_id,
        "date": datetime.date.today().isoformat(), "torch": torch.__version__,
        "command": f"scalemodel triage run --scenario {scenario} --ranks {ranks} --out DIR",
        "parameters": params,
        "rank_status": [{"rank": r.rank, "status": r.status, "wall_s": round(r.wall_s, 3)}
                        for r in res.ranks],
    }
    (out / "run.json").write_text(json.dumps(summary, indent=1))


def recorded_or_live(scenario: str, ranks: int, live: bool
                     ) -> tuple[Path, list[dict[str, Any]], str, dict[str, Any]]:
    """A run directory for a question's answer: the bundled recording of a real run (default,
    fast and repeatable) or a fresh run with ``live``. Returns (dir, per-rank status,
    provenance, the run's parameters as :func:`run_parameters` gives them).
    """
    import json
    import tempfile

    from ..specs.sources import data_path

    if live:
        out = Path(tempfile.mkdtemp(prefix=f"scalemodel-{scenario}-"))
        res = run_scenario(scenario, ranks, out)
        status = [{"rank": r.rank, "status": r.status, "wall_s": r.wall_s} for r in res.ranks]
        meta = json.loads((out / "run.json").read_text())
        return out, status, "a fresh run on this machine (--live)", run_parameters(meta)
    out = data_path(f"runs/{scenario}")
    meta = json.loads((out / "run.json").read_text())
    how = (f"a real run recorded on {meta['date']} with torch {meta['torch']} "
           f"(`{meta['command']}`); --live repeats it here")
    return out, meta["rank_status"], how, run_parameters(meta)
