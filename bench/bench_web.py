"""Benchmark of the study face: app start-up, question pages, API calls, claims and drills.

Run: PYTHONPATH=src python bench/bench_web.py
Targets (issue 9): a question page in under 300 ms on 2 cores, app start-up under 2 s.
"""

from __future__ import annotations

import statistics
import time


def timed(fn, n=5):
    fn()  # warm: imports, caches
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t)
    return statistics.median(xs)


def main() -> None:
    t = time.perf_counter()
    from scalemodel.web import create_app

    app = create_app()
    startup = time.perf_counter() - t
    c = app.test_client()
    print(f"app start-up (import + create_app): {startup * 1000:.0f} ms")
    first = {}
    for q in ("kv-cache", "training-memory", "roofline", "scale-scoping", "resume-walk"):
        t = time.perf_counter()
        assert c.get(f"/questions/{q}?batch=3").status_code == 200
        first[q] = time.perf_counter() - t
    print("first render of each page (cold caches, plot drawn): "
          + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in first.items()))
    counter = iter(range(10**6))
    for q in ("kv-cache", "training-memory", "roofline", "scale-scoping", "resume-walk"):
        # a new input each time, so the answer is recomputed (plots of roofline are redrawn)
        ms = timed(lambda q=q: c.get(f"/questions/{q}?batch={2 + next(counter) % 50}")) * 1000
        cached = timed(lambda q=q: c.get(f"/questions/{q}")) * 1000
        print(f"question page {q:16s} new input {ms:6.0f} ms   same input {cached:6.0f} ms")
    print(f"index page: {timed(lambda: c.get('/')) * 1000:.1f} ms")
    print(f"GET /api/kv: {timed(lambda: c.get('/api/kv?tp=8&gpu=h100-sxm')) * 1000:.1f} ms")
    print(f"GET /api/claim: "
          f"{timed(lambda: c.get('/api/claim?model=llama-3-70b&gpus=64&tokens=1T&days=7')) * 1000:.1f} ms")
    print(f"GET /openapi.json: {timed(lambda: c.get('/openapi.json')) * 1000:.1f} ms")
    from scalemodel.analytic.claims import Claim, check_claim
    from scalemodel.study.drills import make_drill, topics

    print(f"check_claim (70B, 1,024 GPUs, layout search): "
          f"{timed(lambda: check_claim(Claim('llama-3-70b', 1024, 'h100-sxm', 1.4e12, 17))) * 1000:.1f} ms")
    for tp in topics():
        print(f"make_drill {tp:16s} {timed(lambda tp=tp: make_drill(tp, 1)) * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
