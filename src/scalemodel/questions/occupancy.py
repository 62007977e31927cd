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
    return Report(f"occupancy: {g.id}", (s1, s2, s3),
                  {"question": "occupancy", "options": o, "occupancy": r.to_dict(),
                   "latency_hiding": lh.to_dict()}, question=PROMPT,
                  assumptions=("Carveout at its default (maximum shared memory).",
                               "DRAM latency under load from the project reference (600 ns on "
                               "Hopper) where recorded, else the unloaded pointer-chase figure."),
                  followups=followups)
