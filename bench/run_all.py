"""Run every bench/bench_*.py in turn (make bench)."""

import subprocess
import sys
from pathlib import Path

for p in sorted(Path(__file__).parent.glob("bench_*.py")):
    print(f"\n== {p.name}", flush=True)
    subprocess.run([sys.executable, str(p)], check=True)
