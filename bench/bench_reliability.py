"""Benchmarks for reliability and triage.

    PYTHONPATH=src python bench/bench_reliability.py [--ranks 16384] [--entries 32] [--shapes 1]

1. Writes synthetic Flight Recorder JSON dumps for N ranks (rank N-1 never enters the last
   collective: a hang) into a temp folder, then times load + hang analysis and reports peak
   memory (target: 16,384 ranks in < 10 s and < 4 GiB).
2. Times the checkpoint Monte Carlo and compares it with Daly's formula.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path


def write_dumps(root: Path, ranks: int, entries: int, shapes: int = 1) -> None:
    base = 1_800_000_000_000_000_000
    for r in range(ranks):
        n = entries - 1 if r == ranks - 1 else entries
        # ``shapes`` distinct tensor sizes in turn (gradient buckets of a real loop)
        ents = [{"record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"],
                 "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
                 "profiling_name": "nccl:all_reduce", "time_created_ns": base + i * 10**7 + r,
                 "input_sizes": [[(1 << 20) + 4096 * (i % shapes)]],
                 "input_dtypes": ["BFloat16"],
                 "output_sizes": [[(1 << 20) + 4096 * (i % shapes)]],
                 "output_dtypes": ["BFloat16"],
                 "state": "completed" if i < n - 1 else "started",
                 "time_discovered_started_ns": 0, "time_discovered_completed_ns": 0,
                 "retired": True, "timeout_ms": 600000, "is_p2p": False}
                for i in range(n)]
        d = {"version": "2.10", "comm_lib_version": "2.21.5", "entries": ents,
             "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[]"}},
             "pg_status": {}}
        (root / f"rank_{r}.json").write_text(json.dumps(d))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--entries", type=int, default=32)
    ap.add_argument("--shapes", type=int, default=1, help="distinct tensor sizes per dump")
    a = ap.parse_args()
    from scalemodel.traces.hang import analyse_hang
    from scalemodel.traces.load import load_dir

    root = Path(tempfile.mkdtemp(prefix="fr-bench-"))
    try:
        t0 = time.perf_counter()
        write_dumps(root, a.ranks, a.entries, max(a.shapes, 1))
        t1 = time.perf_counter()
        c1 = time.process_time()
        r = analyse_hang(load_dir(root), a.ranks)
        t2 = time.perf_counter()
        cpu = time.process_time() - c1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"hang triage: {a.ranks} ranks x {a.entries} entries ({a.shapes} sizes): write {t1 - t0:.1f} s, "
          f"load+analyse {t2 - t1:.2f} s ({cpu:.2f} CPU s), peak RSS {peak / 2**30:.2f} GiB; "
          f"verdict {r.verdict} "
          f"ranks {list(r.ranks)} seq {r.seq}")

    from scalemodel.analytic.reliability import goodput
    from scalemodel.sim.failures import simulate

    m = 86400 * 54 / 419
    t0 = time.perf_counter()
    s = simulate(1116.0, 60.0, 600.0, m, trials=400, horizon_s=30 * 86400)
    t1 = time.perf_counter()
    g = goodput(1116.0, 60.0, 600.0, m)
    print(f"Monte Carlo: 400 trials x 30 days in {t1 - t0:.2f} s; goodput {s.goodput:.4f} vs "
          f"Daly {g:.4f} ({abs(s.goodput - g) / g:.3%} apart)")


if __name__ == "__main__":
    main()
