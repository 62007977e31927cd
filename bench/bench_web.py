"""Benchmark of the study face: start-up, all 24 question pages, the main tool pages, the API,
claims and drills.

Run: PYTHONPATH=src python bench/bench_web.py [--quick] [--only ID,ID]
Targets (issue 9): a question page in under 300 ms on 2 cores (planner-backed pages under 2 s),
app start-up under 2 s.

For every page three figures, each in one fresh app (one process, pages in bank order):
- cold: the first request of the page with its classic inputs (the engine's imports included);
- new: a request with inputs the app has not seen (the engine recomputes, the plot is redrawn),
  the median over up to three different inputs (one for the pages slower than 3 s);
- again: the same request repeated (the app's result cache answers it).
A page over its target is flagged with "!"; docs/benchmarks.md says why each one is slow.
"""

from __future__ import annotations

import argparse
import statistics
import time

# new inputs per question: fields of the question's form, each value different from the default
NEW_INPUTS: dict[str, list[str]] = {
    "kv-cache": ["batch=16", "batch=48", "context=4096"],
    "training-memory": ["micro_batch=2", "seq_len=8192", "gpus=128"],
    "roofline": ["batch=4", "batch=16", "context=8192"],
    "parallelism-traffic": ["seq_len=8192", "seq_len=2048", "batch=512"],
    "ring-allreduce": ["bytes=512MiB", "bytes=2GiB", "nodes=8"],
    "fabric-map": ["seq_len=8192", "seq_len=2048", "batch=512"],
    "nccl-topology": ["bytes=64MiB", "bytes=1GiB", "nodes=8"],
    "roce-vs-ib": ["gpus=4096", "gpus=32768", "a2a_share=0.3"],
    "moe-latency-layout": ["skew=0.8", "skew=1.2", "context=8192"],
    "moe-global-serving": ["gpus=288", "skew=0.8", "kv_dtype=fp8"],
    "moe-routing": ["tokens=2000", "tokens=1536", "tokens=3072"],
    "gpu-hierarchy": ["grid=2000", "block=128", "regs=64"],
    "memory-hierarchy": ["gpu=a100-sxm-80gb", "gpu=h200", "gpu=b200"],
    "occupancy": ["regs=32", "threads=128", "smem=32768"],
    "coalescing-transpose": ["tile=16", "n=512", "n=2048"],
    "warp-divergence": ["block=128", "block=512", "block=64"],
    "billing": [],
    "blast-radius": ["gpus=8192", "gpus=4096", "gpus=2048"],
    "checkpoint-failures": ["gpus=16000", "gpus=8192", "gpus=32768"],
    "hang-triage": ["ranks=8", "ranks=2", "ranks=6"],
    "slowdown-triage": [],
    "cluster-scheduler": ["nodes=24", "nodes=8", "nodes=32"],
    "scale-scoping": ["days=20", "gpus=2048", "tokens=2T"],
    "resume-walk": ["days=12", "gpus=1024", "tokens=3T"],
}
PLANNER = {"training-memory", "fabric-map", "moe-latency-layout"}  # the 2 s target

# the main tool pages of the issue, with inputs they need (?run=1 computes)
TOOLS: dict[str, list[str]] = {
    "kv": ["model=llama-3-70b&gpu=h100-sxm", "model=llama-3-8b&gpu=h100-sxm",
           "model=llama-3-70b&gpu=h200"],
    "memory": ["model=llama-3-70b&gpu=h100-sxm&tp=8", "model=llama-3-8b&gpu=h100-sxm",
               "model=llama-3-70b&gpu=h100-sxm&tp=4&pp=2"],
    "roofline": ["gpu=h100-sxm", "gpu=h200", "gpu=a100-sxm-80gb"],
    "comm/cost": ["collective=all-reduce&bytes=1GiB&ranks=64",
                  "collective=all-reduce&bytes=256MiB&ranks=64",
                  "collective=all-gather&bytes=1GiB&ranks=16"],
    "plan/train": ["model=llama-3-70b&gpus=64&gpu=h100-sxm", "model=llama-3-8b&gpus=16&gpu=h100-sxm",
                   "model=llama-3-70b&gpus=128&gpu=h100-sxm"],
    "gpu/occupancy": ["gpu=h100-sxm&threads=256&regs=64&smem=16384",
                      "gpu=h100-sxm&threads=128&regs=32", "gpu=a100-sxm-80gb&threads=512&regs=48"],
    "gpu/access": ["kernel=transpose-tiled", "kernel=transpose-padded", "kernel=transpose-naive"],
    # loads.csv: written by this script into the app's --data-dir (files are never cached)
    "moe/place": ["loads=loads.csv&slots=80&gpus=8", "loads=loads.csv&slots=96&gpus=8",
                  "loads=loads.csv&slots=128&gpus=16&nodes=2"],
    "reliability/checkpoint": ["gpus=16384&checkpoint_write_s=60", "gpus=4096&checkpoint_write_s=60",
                               "gpus=16384&checkpoint_write_s=30"],
}
TOOL_PLANNER = {"plan/train"}


def ms(s: float) -> str:
    return f"{s * 1000:7.0f}"


def once(c, url: str) -> tuple[float, int]:
    t = time.perf_counter()
    r = c.get(url)
    return time.perf_counter() - t, r.status_code


def check_inputs(app) -> None:
    """Every new input must be a field of the question's form (an ignored one would only
    measure the cache)."""
    import importlib

    from scalemodel.questions import BANK

    st = app.extensions["scalemodel"]
    flags = {f.dest for f in st.fields["answer"]}
    for q in BANK:
        defaults = getattr(importlib.import_module(q.module), "DEFAULTS", None) or {}
        used = {kv.split("=")[0] for s in NEW_INPUTS[q.id] for kv in s.split("&")}
        if used - (set(defaults) & flags):
            raise SystemExit(f"{q.id}: {sorted(used - set(defaults))} is not on its form")


def bench_pages(c, base: str, inputs: dict[str, list[str]], planner: set[str], quick: bool,
                only: set[str] | None, sep: str) -> list[tuple[str, float, float, float, bool]]:
    rows = []
    for name, news in inputs.items():
        if only and name not in only:
            continue
        url = f"{base}{name}"
        cold, code = once(c, url + (sep + news[0] if base == "/tools/" and news else ""))
        if code != 200:
            raise SystemExit(f"{url}: HTTP {code}")
        times = []
        extra = news[1:] if base == "/tools/" else news
        for q in extra[: 1 if (quick or cold > 3) else 3]:
            dt, code = once(c, f"{url}{sep}{q}")
            if code != 200:
                raise SystemExit(f"{url}{sep}{q}: HTTP {code}")
            times.append(dt)
        new = statistics.median(times) if times else float("nan")
        again = min(once(c, url + (sep + news[0] if base == "/tools/" and news else ""))[0]
                    for _ in range(3))
        target = 2.0 if name in planner else 0.3
        slow = max(cold, new if times else 0.0) > target
        rows.append((name, cold, new, again, slow))
        print(f"{name:24s} cold {ms(cold)} ms   new input {ms(new) if times else '      -'} ms   "
              f"again {again * 1000:6.1f} ms   target {target * 1000:5.0f} ms"
              + ("  !" if slow else ""), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one new input per page")
    ap.add_argument("--only", default="", help="comma-separated question ids / tool paths")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(","))) or None

    import tempfile
    from pathlib import Path

    data = Path(tempfile.mkdtemp(prefix="bench-web-"))
    # 4 layers x 64 experts with skewed loads, for the moe/place tool page
    (data / "loads.csv").write_text("".join(
        ",".join(str(1000 // (1 + (e * 7 + layer) % 64)) for e in range(64)) + "\n"
        for layer in range(4)))
    t = time.perf_counter()
    from scalemodel.web import create_app

    app = create_app(data_dir=data)  # imports the question modules (preload)
    startup = time.perf_counter() - t
    c = app.test_client()
    check_inputs(app)
    print(f"app start-up (import + create_app, question modules preloaded): "
          f"{startup * 1000:.0f} ms (target 2000 ms)")
    t = time.perf_counter()
    c.get("/")
    print(f"first request (index, templates compiled): {(time.perf_counter() - t) * 1000:.0f} ms")

    print("\n== question pages (cold = first request, classic inputs; new = unseen inputs; "
          "again = cached) ==")
    q = bench_pages(c, "/questions/", NEW_INPUTS, PLANNER, a.quick, only, "?")
    print("\n== tool pages (?run=1) ==")
    t_rows = bench_pages(c, "/tools/", {k: v for k, v in TOOLS.items()}, TOOL_PLANNER, a.quick,
                         only, "?run=1&")
    over = [r[0] for r in q + t_rows if r[4]]
    print(f"\npages over target: {len(over)} ({', '.join(over) or 'none'})")

    if only:
        return
    print("\n(repeated requests below are answered by the result cache after the first)")
    print(f"index page: {timed(lambda: c.get('/')) * 1000:.1f} ms")
    print(f"GET /api/kv: {timed(lambda: c.get('/api/kv?tp=8&gpu=h100-sxm')) * 1000:.1f} ms")
    print(f"GET /api/claim: {timed(lambda: c.get(CLAIM_URL)) * 1000:.1f} ms")
    print(f"GET /openapi.json: {timed(lambda: c.get('/openapi.json')) * 1000:.1f} ms")
    from scalemodel.analytic.claims import Claim, check_claim
    from scalemodel.study.drills import make_drill, topics

    claim = Claim("llama-3-70b", 1024, "h100-sxm", 1.4e12, 17)
    print(f"check_claim (70B, 1,024 GPUs, layout search): "
          f"{timed(lambda: check_claim(claim)) * 1000:.1f} ms")
    for tp in topics():
        print(f"make_drill {tp:16s} {timed(lambda tp=tp: make_drill(tp, 1)) * 1000:6.1f} ms")


CLAIM_URL = "/api/claim?model=llama-3-70b&gpus=64&tokens=1T&days=7"


def timed(fn, n=5):
    fn()  # warm: imports, caches
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t)
    return statistics.median(xs)


if __name__ == "__main__":
    main()
