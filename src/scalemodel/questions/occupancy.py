"""occupancy: when 25% occupancy beats 75%, and the resource arithmetic that decides it."""

from __future__ import annotations

from typing import Any

from ..analytic.gpu_lab import latency_hiding
from ..analytic.occupancy import limits_for_gpu, occupancy
from ..derive import Headline, Report, Section, Table
from ..specs import get_gpu
from .params import Param, gpu

PROMPT = ("What limits occupancy, how do you compute it exactly, and when does a kernel at 25% "
          "occupancy beat one at 75%?")

DEFAULTS = {"gpu": "h100-sxm", "threads": 256, "regs": 64, "smem": 16384}

PARAMS: tuple[Param, ...] = (
    gpu(DEFAULTS["gpu"]),
    Param("threads", "int", DEFAULTS["threads"], "threads per block", "threads", lo=1, hi=1024),
    Param("regs", "int", DEFAULTS["regs"], "registers per thread", "registers", lo=0, hi=255),
    Param("smem", "int", DEFAULTS["smem"], "shared memory per block", "B", lo=0, hi=2**20),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    g = get_gpu(o["gpu"])
    lim = limits_for_gpu(g)
    r = occupancy(lim, int(o["threads"]), int(o["regs"]), int(o["smem"]))
    s1 = Section(
        "1. Exact occupancy (NVIDIA's calculator rules)",
        text=("Each resource caps the resident blocks per SM; the smallest cap wins. Registers "
              "are allocated per warp in units of 256 and per sub-partition; shared memory per "
              "block in units of 128 B plus a 1 KiB driver reserve."),
        headlines=(Headline("resident blocks per SM", r.active_blocks_per_sm, "block"),
                   Headline("occupancy", r.occupancy, "1"), Headline("limited by", r.limiter)),
        derivation=r.derivation)
    sweep = []
    for regs in (32, 40, 64, 96, 128, 168, 255):
        x = occupancy(lim, int(o["threads"]), regs, int(o["smem"]))
        sweep.append((regs, x.active_blocks_per_sm, x.occupancy, x.limiter))
    s2 = Section("2. Registers vs occupancy", tables=(Table(
        f"{o['threads']} threads, {o['smem']} B shared per block",
        ("regs/thread", "blocks/SM", "occupancy", "limiter"), tuple(sweep)),))
    lh = latency_hiding(g)
    lo, hi = lh.cases[1], lh.cases[0]
    s3 = Section(
        "3. Occupancy is a means: bytes in flight are the goal (Little's law)",
        text=(f"To keep HBM busy an SM needs about {lh.bytes_in_flight_per_sm:,.0f} bytes in "
              f"flight. At {hi['occupancy']:.0%} occupancy with one 4-byte load per thread it has "
              f"{hi['bytes_in_flight_per_sm']:,} and reaches {hi['fraction_of_peak']:.0%} of peak; "
              f"at {lo['occupancy']:.0%} with four independent 16-byte loads per thread it has "
              f"{lo['bytes_in_flight_per_sm']:,} and reaches {lo['fraction_of_peak']:.0%}. The "
              "registers that lower occupancy hold the extra loads in flight (Volkov 2010)."),
        headlines=(Headline("warps per SM to hide DRAM at ILP 1", lh.warps_needed_memory, "warp"),
                   Headline("warps per SM to fill the FP32 pipes at ILP 1", lh.warps_needed_fma,
                            "warp")),
        derivation=lh.derivation,
        tables=(Table("two ways to put bytes in flight", ("case", "occupancy", "warps/SM",
                                                          "bytes in flight/SM", "of HBM peak"),
                      tuple((c["label"], c["occupancy"], c["active_warps_per_sm"],
                             c["bytes_in_flight_per_sm"], c["fraction_of_peak"])
                            for c in lh.cases)),))
    followups = (
        ("What is the most registers per thread at full occupancy?",
         f"{lim.regs_per_sm // lim.max_warps_per_sm // 32} on cc {lim.cc}: "
         f"{lim.regs_per_sm} registers / {lim.max_threads_per_sm} threads."),
        ("Why does 1 KiB per block matter?",
         "From cc 8.0 the driver reserves 1 KiB of shared memory per block, so tiny blocks hit "
         "the shared-memory cap sooner than the raw sizes suggest."),
        ("Does the FP32 pipe need high occupancy?",
         f"About {lh.warps_needed_fma:.0f} warps per SM with one independent FMA each; 4 "
         f"independent FMAs per thread need a quarter of that."),
        ("How do you get the register count of a kernel?",
         "ptxas -v at compile time ('scalemodel gpu build' parses it) or Nsight Compute's launch "
         "statistics; __launch_bounds__ and -maxrregcount cap it."),
        ("When is higher occupancy the right fix?",
         "When the kernel has no independent work per thread (dependent loads, pointer chasing): "
         "then only more warps add bytes in flight."),
    )
    s4, tiling = _register_tiling(g, lim)
    return Report(f"occupancy: {g.id}", (s1, s2, s3, s4),
                  {"question": "occupancy", "register_tiling": tiling, "options": o, "occupancy": r.to_dict(),
                   "latency_hiding": lh.to_dict()}, question=PROMPT,
                  assumptions=("Carveout at its default (maximum shared memory).",
                               "DRAM latency under load from the project reference (600 ns on "
                               "Hopper) where recorded, else the unloaded pointer-chase figure."),
                  followups=followups)


def _register_tiling(g: Any, lim: Any) -> tuple[Section, list[dict[str, Any]]]:
    """When 25% beats 75%: per-thread register tiles cut shared-memory traffic per FMA (Volkov
    2010). Tile r x r: 2r words read per r^2 FMAs; FMA rate <= min(FP32 lanes, smem words/clk x
    r / 2); the registers r^2 + 2r + overhead set the occupancy (the exact calculator rules)."""
    from ..specs.sources import load_toml

    mh = load_toml("memory_hierarchy.toml")
    rt = mh["register_tiling"]
    over = int(rt["overhead_regs"]["value"])
    words = mh["bandwidth"]["smem_bytes_per_clk_per_sm"] / 4  # 4-byte words per clock per SM
    lanes = g.peak_flop_per_s("fp32") / (2 * g.sm_count * g.boost_clock_hz)  # FMA/clk/SM
    need = latency_hiding(g).warps_needed_fma  # independent FMAs in flight per SM (Little's law)
    rows, data = [], []
    for r in rt["tiles"]:
        regs = min(255, r * r + 2 * r + over)
        occ = occupancy(lim, 256, regs, 0)
        fma = min(lanes, words * r / 2)
        # latency hiding: resident warps x independent FMAs per thread (r^2) must cover the
        # warp-FMAs in flight the FP32 pipe needs (section 3)
        frac = min(fma / lanes, occ.active_warps_per_sm * r * r / need)
        rows.append((f"{r}x{r}", regs, occ.occupancy, r * r, 2 * r, fma, frac))
        data.append({"tile": r, "regs": regs, "occupancy": occ.occupancy, "fma_per_clk": fma,
                     "fraction_of_fp32_peak": frac})
    best = max(data, key=lambda x: (x["fraction_of_fp32_peak"], -x["occupancy"]))
    hi = max((x for x in data if x["occupancy"] >= 0.75), key=lambda x: x["fraction_of_fp32_peak"],
             default=None)
    text = (f"A shared-memory GEMM loop on {g.id}: shared memory delivers {words:g} words per "
            f"clock per SM and the FP32 pipes take {lanes:g} FMAs per clock. A thread that keeps "
            "an r x r tile of results reads 2r words per r^2 FMAs, so the SM sustains at most "
            f"{words:g} x r / 2 FMAs per clock: r must reach {2 * lanes / words:g} to feed the "
            "pipes. The tile lives in registers, r^2 + 2r + "
            f"{over} per thread, and registers set the occupancy. ")
    if hi is not None:
        text += (f"The best tile at >= 75% occupancy is {hi['tile']}x{hi['tile']}: "
                 f"{hi['fraction_of_fp32_peak']:.0%} of the FP32 peak; "
                 f"{best['tile']}x{best['tile']} at {best['occupancy']:.0%} occupancy reaches "
                 f"{best['fraction_of_fp32_peak']:.0%}: lower occupancy wins because each "
                 "thread reuses every loaded value r times (Volkov 2010's SGEMM argument), and "
                 "r^2 independent FMAs per thread hide the pipeline latency that fewer warps "
                 "no longer do.")
    sec = Section("4. When 25% beats 75%: register tiling (data reuse per thread)", text=text,
                  tables=(Table("256-thread blocks, tiles of r x r outputs per thread",
                                ("tile", "regs/thread", "occupancy", "FMAs per k step",
                                 "smem words per k step", "FMA/clk/SM", "of FP32 peak"),
                                tuple(rows)),))
    return sec, data
