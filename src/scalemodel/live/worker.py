"""One rank started by :mod:`scalemodel.live.launcher` (run as ``python -m``; not imported)."""

from __future__ import annotations

import contextlib
import datetime
import importlib
import json
import os
import signal
from pathlib import Path


def main() -> int:
    # the launcher holds SIGINT / SIGTERM while it spawns ranks, and a signal mask survives exec
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    wd = Path(os.environ["SCALEMODEL_LAUNCH_DIR"])
    spec = json.loads((wd / "spec.json").read_text())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    import torch.distributed as dist

    dist.init_process_group(
        backend=spec["backend"],
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=float(spec["pg_timeout_s"])),
    )
    mod_name, fn_name = spec["target"].split(":")
    fn = getattr(importlib.import_module(mod_name), fn_name)
    value = fn(rank, world, **spec["kwargs"])
    tmp = wd / f"rank_{rank}.json.tmp"
    tmp.write_text(json.dumps(value))
    tmp.replace(wd / f"rank_{rank}.json")
    # teardown after a deliberate fault may fail; the result is already saved
    with contextlib.suppress(Exception):
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
