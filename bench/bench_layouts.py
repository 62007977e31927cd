"""Benchmark of issue 15's speed targets: many fixed layouts in one process, and the two searches.

    PYTHONPATH=src python bench/bench_layouts.py

Prints (1) ``plan train --layouts bench/data_layouts_1000.csv --json`` (1,000 layouts of
llama-3-70b and llama-3-8b): the whole command as a fresh process (wall, peak RSS) and the
command run again in the same process (target < 1 s for 1,000 layouts); (2) the full search of
llama-3-405b on 16,384 H100 (target < 2 s); (3) the full search of deepseek-v3 on 2,048 H800 at
63M tokens and sequence 4096 (target < 1.5 s and 250 MB), each best of 3 in-process after one
warm-up, and each as a fresh process with its peak RSS.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalemodel.cli import main  # noqa: E402

LAYOUTS = ["plan", "train", "--layouts", str(ROOT / "bench" / "data_layouts_1000.csv"),
           "--json"]
LLAMA = ["plan", "train", "--model", "llama-3-405b", "--gpu", "h100-sxm", "--gpus", "16384",
         "--seq-len", "8192", "--global-batch-tokens", "16M", "--json"]
DSV3 = ["plan", "train", "--model", "deepseek-v3", "--gpu", "h800", "--gpus", "2048",
        "--seq-len", "4096", "--global-batch-tokens", "63M", "--json"]

CHILD = """
import resource, sys, time
t = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from scalemodel.cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[2:])
print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def in_process(argv: list[str], repeat: int = 3) -> float:
    with contextlib.redirect_stdout(io.StringIO()):
        main(argv)  # warm: imports, TOML, caches
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(argv)
        best = min(best, time.perf_counter() - t)
    return best


def fresh(argv: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "src"), *argv],
                         capture_output=True, text=True, env=env, check=True).stdout.split()
    wall = time.perf_counter() - t
    rc, inner, rss_kb = int(out[0]), float(out[1]), int(out[2])
    return {"rc": rc, "process_wall_s": wall, "main_s": inner, "peak_rss_mb": rss_kb / 1024}


def run() -> dict:
    out = {}
    for name, argv in (("layouts_1000", LAYOUTS), ("llama3_405b_16384_h100", LLAMA),
                       ("deepseek_v3_2048_h800", DSV3)):
        out[name] = {"in_process_s": in_process(argv), **fresh(argv)}
    out["cpus"] = os.cpu_count()
    out["load_1min"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
