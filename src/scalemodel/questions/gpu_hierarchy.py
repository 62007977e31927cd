"""gpu-hierarchy: threads, warps, blocks and grids mapped onto SMs for a concrete launch."""

from __future__ import annotations

from typing import Any

from ..analytic.gpu_lab import SHARING, launch_map
from ..derive import Headline, Report, Section, Table
from ..specs import get_gpu
from .params import Param, gpu

PROMPT = ("Take a kernel launched with a grid of blocks of threads. How do threads, warps, "
          "blocks and the grid land on the GPU's SMs, how many blocks run at once, how many "
          "waves does the grid take, and what does each level share?")

DEFAULTS = {"gpu": "h100-sxm", "grid": 1000, "block": 256, "regs": 32, "smem": 0}

PARAMS: tuple[Param, ...] = (
    gpu(DEFAULTS["gpu"]),
    Param("grid", "int", DEFAULTS["grid"], "blocks in the grid", "blocks", lo=1, hi=2**31 - 1),
    Param("block", "int", DEFAULTS["block"], "threads per block", "threads", lo=1, hi=1024),
    Param("regs", "int", DEFAULTS["regs"], "registers per thread", "registers", lo=0, hi=255),
    Param("smem", "int", DEFAULTS["smem"], "shared memory per block", "B", lo=0, hi=2**20),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    g = get_gpu(o["gpu"])
    m = launch_map(g, int(o["grid"]), int(o["block"]), int(o["regs"]), int(o["smem"]))
    s1 = Section(
        "1. From threads to SMs",
        text=(f"{m.threads_per_block} threads per block make {m.warps_per_block} warps of 32; a "
              f"block lives on one SM for its whole life. The occupancy calculator allows "
              f"{m.blocks_per_sm} such blocks per SM (limited by {m.occupancy.limiter}), so "
              f"{g.sm_count} SMs hold {m.concurrent_blocks} blocks at once and the grid of "
              f"{m.total_blocks} blocks runs in {m.waves} wave(s)."),
        headlines=(Headline("warps per block", m.warps_per_block, "warp"),
                   Headline("resident blocks per SM", m.blocks_per_sm, "block"),
                   Headline("waves", m.waves), Headline("last wave's slots used", m.tail_fraction,
                                                       "1"),
                   Headline("resident warps per scheduler", m.warps_per_scheduler, "warp")),
        derivation=m.derivation)
    grids = []
    for G in (m.concurrent_blocks, m.concurrent_blocks + 1, 2 * m.concurrent_blocks,
              int(o["grid"])):
        mm = launch_map(g, G, int(o["block"]), int(o["regs"]), int(o["smem"]))
        grids.append((G, mm.waves, mm.tail_fraction, mm.wave_efficiency))
    s2 = Section(
        "2. Waves and the tail",
        text=("With blocks of equal duration, one block more than a full wave costs a whole "
              "extra wave: the last wave runs with most SMs idle. Sizing the grid to a multiple "
              "of the blocks per wave, or making it much larger than a wave, hides the tail."),
        tables=(Table("grid size vs waves", ("blocks", "waves", "last wave's slots used",
                                             "slot use over all waves"), tuple(grids)),))
    s3 = Section("3. What each level shares", tables=(Table("", ("level", "shares", "runs on"),
                                                            SHARING),))
    one_more = grids[1]
    followups = (
        ("Why must a block fit on one SM?",
         "Its threads share the SM's shared memory and barriers; blocks never migrate."),
        ("What if the grid is one block more than a wave?",
         f"{one_more[0]} blocks take {one_more[1]} waves; the last holds one block, so slot use "
         f"over the run drops to {one_more[3]:.0%}."),
        ("How many warps does each scheduler juggle here?",
         f"{m.warps_per_scheduler:g}: {m.blocks_per_sm} blocks x {m.warps_per_block} warps over "
         f"{m.warp_schedulers_per_sm} schedulers; each cycle a scheduler issues from one ready warp."),
        ("Do warps of a block run in lockstep?",
         "No: each warp is scheduled independently; only __syncthreads() aligns them."),
        ("What changes with thread block clusters (cc 9.0)?",
         "Blocks of a cluster are co-scheduled on SMs of one GPC and can read each other's "
         "shared memory (distributed shared memory)."),
    )
    return Report(f"gpu-hierarchy: {o['grid']} x {o['block']} on {g.id}", (s1, s2, s3),
                  {"question": "gpu-hierarchy", "options": o, "launch": m.to_dict()},
                  question=PROMPT,
                  assumptions=(f"{o['regs']} registers per thread, {o['smem']} B shared memory per "
                               "block.", "Blocks of equal duration for waves and tail."),
                  followups=followups)
