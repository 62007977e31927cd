"""Diff two ``scalemodel validate --serving --json`` outputs row by row (by id, in the top-level
table, ``published`` and ``kv``): every row's predicted value, relative change, and the rows
that are only in one. Exit 1 where any row moved by more than --rel (default 0.1 %).

    python bench/diff_serving_validation.py before.json after.json [--rel 0.001]
"""

from __future__ import annotations

import argparse
import json
import sys


def rows(d: dict) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for sect, part in (("serving", d), ("published", d.get("published", {})),
                       ("kv", d.get("kv", {}))):
        for r in part.get("rows", []):
            key = f"{sect}:{r.get('id')}:{r.get('metric', '')}"
            out[key] = (tuple(r[k] for k in ("predicted", "predicted_tokens") if k in r)
                        or (json.dumps(r),))
        for s in part.get("skipped", []) or []:
            out[f"{sect}:skipped:{json.dumps(s)}"] = ("skipped",)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rel", type=float, default=1e-3)
    a = ap.parse_args()
    with open(a.before) as f:
        b = rows(json.load(f))
    with open(a.after) as f:
        n = rows(json.load(f))
    bad = 0
    worst = 0.0
    for k in sorted(set(b) | set(n)):
        if k not in b or k not in n:
            print(f"only in {'after' if k in n else 'before'}: {k}")
            bad += 1
            continue
        x, y = b[k][0], n[k][0]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            rel = abs(y / x - 1) if x else abs(y)
            worst = max(worst, rel)
            if rel > a.rel:
                print(f"{k}: {x} -> {y} ({rel:+.4%})")
                bad += 1
        elif x != y:
            print(f"{k}: changed")
            bad += 1
    print(f"{len(b)} rows before, {len(n)} after; largest relative change {worst:.3g}; "
          f"{bad} beyond {a.rel:g}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
