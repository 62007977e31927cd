"""warp-divergence: which branches diverge, what it costs, and how to avoid it."""

from __future__ import annotations

from typing import Any

from ..derive import Headline, Report, Section, Table
from ..sim import simt
from .params import Param

PROMPT = ("How does warp divergence work, which branches actually diverge, and what does it cost? "
          "Why does 'threadIdx.x < 32' not diverge in a 64-thread block while 'threadIdx.x % 2' "
          "does?")

DEFAULTS = {"block": 256}

PARAMS: tuple[Param, ...] = (
    Param("block", "int", DEFAULTS["block"], "threads per block of the reduction", "threads", lo=1, hi=1024),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    bs = int(o["block"])
    cases = [("threadIdx.x < 32", 64), ("threadIdx.x % 2 == 0", 64),
             ("threadIdx.x / 32 % 2 == 0", bs), ("threadIdx.x % 2 == 0", bs),
             ("threadIdx.x < 16", bs), ("laneId < 31", bs)]
    rows, data = [], []
    for pred, b in cases:
        r = simt.divergence([pred], simt.Launch((1, 1, 1), (b, 1, 1)))
        rows.append((pred, b, r.warps, r.divergent_warps, r.simt_efficiency))
        data.append(r.to_dict())
    s1 = Section(
        "1. Branch predicates, warp by warp",
        text=("A warp issues one instruction for its active lanes. When lanes disagree on a "
              "branch the warp runs one path with the other lanes masked off, then the other: "
              "the paths are serialised. A predicate that is constant over each group of 32 "
              "consecutive thread ids never diverges, whatever it does across warps."),
        tables=(Table("if/else with one instruction per side", ("predicate", "block", "warps",
                                                               "divergent warps",
                                                               "SIMT efficiency"),
                      tuple(rows)),))
    # the reductions, for any block size: the interleaved one adds x[t + s] into x[t] where
    # t % 2s == 0 and t + s exists; the sequential one halves the live prefix rounding up
    # (s = ceil(n / 2)) and lets only the n - s threads with a partner add
    strides = interleaved_strides(bs)
    inter = simt.divergence(["threadIdx.x % (2 * s) == 0 && threadIdx.x + s < N"],
                            simt.Launch((1, 1, 1), (bs, 1, 1)), else_cost=0, loop=("s", strides),
                            defines={"N": bs})
    steps = sequential_steps(bs)
    seq = simt.divergence(["threadIdx.x < m"], simt.Launch((1, 1, 1), (bs, 1, 1)), else_cost=0,
                          loop=("m", [m for _, m in steps]))
    seq_rows = tuple((st, m, dv, eff) for (st, m), (_, dv, eff) in
                     zip(steps, seq.by_loop_value, strict=True))
    s2 = Section(
        "2. The reduction: interleaved vs sequential addressing",
        text=(f"A tree reduction over {bs} threads. With 'tid % (2s) == 0' the working threads "
              "are spread over every warp, so all warps stay busy doing less and less; with "
              "'tid < s' they are packed into the first warps and the others skip the body. "
              + ("" if bs & (bs - 1) == 0 else
                 f"{bs} is not a power of two, so halving must round up (s = ceil(n / 2)) and "
                 "only threads whose partner exists may add; halving down would drop an element "
                 f"({len(steps)} steps here: " + ", ".join(f"{n_} -> {st}" for n_, st in
                                                          _live(bs)) + ").")),
        headlines=(Headline("SIMT efficiency, interleaved", inter.simt_efficiency, "1"),
                   Headline("SIMT efficiency, sequential", seq.simt_efficiency, "1")),
        tables=(Table("interleaved: tid % (2s) == 0", ("s", "divergent warps", "SIMT eff."),
                      inter.by_loop_value),
                Table("sequential: tid < n - s adds x[tid + s], s = ceil(n / 2)",
                      ("s", "threads adding", "divergent warps", "SIMT eff."), seq_rows)))
    loop = simt.divergence([], simt.Launch((1, 1, 1), (bs, 1, 1)), trips="threadIdx.x % 4 + 1")
    s3 = Section(
        "3. Loops with data-dependent trip counts",
        text=("A warp keeps looping until its last lane is done; lanes that finished early idle. "
              "With trip counts 1..4 spread over the lanes the warp runs 4 iterations for an "
              "average of 2.5 useful ones."),
        headlines=(Headline("loop SIMT efficiency", loop.loop_simt_efficiency, "1"),))
    followups = (
        ("Does Volta's independent thread scheduling remove divergence?",
         "No: paths are still executed one at a time; it gives each thread its own program "
         "counter so divergent paths can interleave and spin locks make progress; reconvergence "
         "needs __syncwarp()."),
        ("Is every if a divergent branch?",
         "Short bodies are often predicated (both sides issued, no branch); the cost is then both "
         "sides' instructions, as in the model here."),
        ("How do you remove divergence in a reduction?",
         f"Sequential addressing: efficiency {seq.simt_efficiency:.0%} vs "
         f"{inter.simt_efficiency:.0%}; below 32 active threads, finish with warp shuffles."),
        ("How is divergence measured?",
         "Nsight Compute: 'avg. threads executed per warp instruction' / 32 and branch "
         "efficiency (smsp__sass_average_branch_targets_threads_uniform)."),
        ("Does a block of 48 threads diverge?",
         "Its second warp has 16 lanes that never exist; that is idle, not divergent, but it "
         "costs the same efficiency."),
    )
    return Report("warp-divergence", (s1, s2, s3),
                  {"question": "warp-divergence", "options": o, "cases": data,
                   "reduction": {"interleaved": inter.to_dict(), "sequential": seq.to_dict()},
                   "loop": loop.to_dict()},
                  question=PROMPT,
                  assumptions=("One instruction per branch body unless stated; SIMT efficiency "
                               "counts against 32 lanes (Nsight Compute's convention).",),
                  followups=followups)


def sequential_steps(n: int) -> list[tuple[int, int]]:
    """(stride s, threads that add m) of the sequential-addressing reduction of n values:
    s = ceil(n / 2), thread t < m = n - s adds x[t + s], then n = s, until one value is left."""
    out = []
    while n > 1:
        s = (n + 1) // 2
        out.append((s, n - s))
        n = s
    return out


def _live(n: int) -> list[tuple[int, int]]:
    """(values before, values after) of each sequential step."""
    return [(st + m, st) for st, m in sequential_steps(n)]


def interleaved_strides(n: int) -> list[int]:
    """Strides 1, 2, 4, ... below n: after them x[0] holds the sum of all n values."""
    out, s = [], 1
    while s < n:
        out.append(s)
        s *= 2
    return out
