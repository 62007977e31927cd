"""Benchmark of `scalemodel validate` and its issue-16 modes on the validation files:
the error (mean / max), the out-of-sample error (--cv) and the layout agreement (--agreement).

    PYTHONPATH=src python bench/bench_validate.py [--json]

For each of validation/training_runs.csv, published_runs_2026.csv and published_runs_papers.csv it prints the
row count, mean and max absolute error, the number of constants derived from end-to-end runs,
the agreement figures (share of rows whose team layout is predicted within 10% of the free
search's best, median predicted speedup of the pick, rows ranked first) and the CPU time
(time.process_time) of each mode; wall time on a shared machine is inflated, CPU time less so.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalemodel.analytic.agreement import agreement  # noqa: E402
from scalemodel.analytic.validate import cross_validate, summary, validate  # noqa: E402

FILES = ("training_runs.csv", "published_runs_2026.csv", "published_runs_papers.csv")


def bench_file(name: str) -> dict:
    text = (ROOT / "validation" / name).read_text()
    t = time.process_time()
    results, skipped = validate(text)
    t_val = time.process_time() - t
    s = summary(results)
    t = time.process_time()
    cv = cross_validate(results)
    t_cv = time.process_time() - t
    t = time.process_time()
    a = agreement(text)
    t_agr = time.process_time() - t
    return {"file": name, "rows": s["row_count"], "skipped": len(skipped), "mape": s["mape"],
            "max_ape": s["max_ape"], "end_to_end_constants": len(cv.end_to_end_constants),
            "agreement_rows": len(a.rows), "share_within_10pct": a.share_within_10pct,
            "median_speedup_predicted": a.median_speedup, "rows_ranked_first": a.picks_published,
            "cpu_s": {"validate": t_val, "cv": t_cv, "agreement": t_agr}}


def main() -> None:
    out = [bench_file(n) for n in FILES]
    if "--json" in sys.argv:
        print(json.dumps(out, indent=2))
        return
    for d in out:
        c = d["cpu_s"]
        print(f"{d['file']}: {d['rows']} rows ({d['skipped']} skipped), mean |error| "
              f"{100 * d['mape']:.1f}%, max {100 * d['max_ape']:.1f}%; constants from end-to-end "
              f"runs: {d['end_to_end_constants']}; agreement over {d['agreement_rows']} rows: "
              f"{100 * d['share_within_10pct']:.1f}% within 10%, median pick +"
              f"{100 * d['median_speedup_predicted']:.1f}%, {d['rows_ranked_first']} ranked first; "
              f"CPU s: validate {c['validate']:.2f}, --cv {c['cv']:.2f}, --agreement "
              f"{c['agreement']:.1f}")


if __name__ == "__main__":
    main()
