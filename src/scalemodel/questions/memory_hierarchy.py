"""memory-hierarchy: latency and bandwidth from registers to the network, with sources."""

from __future__ import annotations

from typing import Any

from ..analytic.gpu_lab import memory_hierarchy
from ..derive import Report, Section
from ..specs import get_gpu
from .params import Param, gpu

PROMPT = ("Give the latency and bandwidth of each level a GPU kernel can reach: registers, shared "
          "memory and L1, L2, HBM, NVLink, PCIe and the network. How would you measure them?")

DEFAULTS = {"gpu": "h100-sxm"}

PARAMS: tuple[Param, ...] = (
    gpu(DEFAULTS["gpu"]),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    g = get_gpu(o["gpu"])
    t = memory_hierarchy(g)
    rows = {r[0].split(" ")[0]: r for r in t.rows}
    hbm, l2 = rows.get("HBM"), rows.get("L2")
    s1 = Section("1. The table", text=(
        "Each step down costs roughly an order of magnitude in latency and gains capacity; "
        "bandwidth falls from tens of TB/s on chip to tens of GB/s off the node."), tables=(t,))
    s2 = Section("2. How to measure it", text=(
        "Latency: a pointer chase, one thread following a random cyclic chain of dependent loads "
        "through an array sized for the level (fits L1, fits L2, larger than L2), timed with "
        "clock64(); the chain's stride of a cache line defeats prefetching. Bandwidth: a "
        "grid-stride copy of a buffer much larger than L2, timed with CUDA events after warm-up. "
        "The lab ships both kernels (src/scalemodel/live/cuda/latency.cu and bandwidth.cu); "
        "'scalemodel gpu bench --save m.json' runs them where a GPU exists and 'scalemodel gpu "
        "hierarchy --measured m.json' puts the measured latencies into this table."))
    ratio = (hbm[3] / l2[3]) if hbm and l2 and hbm[3] and l2[3] else None
    followups = (
        ("Why is HBM latency so high if the bandwidth is huge?",
         "Bandwidth comes from many channels in parallel, not from short latency; Little's law "
         "says you need latency x bandwidth bytes in flight to use it (scalemodel gpu latency)."),
        ("How much slower is HBM than L2 here?",
         (f"About {ratio:.1f}x in latency" if ratio else "No latency recorded for this GPU")
         + (f"; in bandwidth L2 gives {l2[4] / hbm[4]:.1f}x the HBM rate ({l2[4] / 1e12:.1f} vs "
            f"{hbm[4] / 1e12:.2f} TB/s, sources in the table)." if hbm and l2 and hbm[4] and l2[4]
            else "; no L2 bandwidth is recorded for this GPU.")),
        ("Where do registers spill to?",
         "Local memory: per-thread DRAM addresses cached in L1/L2, so a spill costs like a "
         "global access when it misses."),
        ("Why does the loaded latency differ from the pointer-chase figure?",
         "Under full bandwidth, requests queue in the memory controllers; loaded latency can be "
         "2x the idle figure."),
        ("NVLink or PCIe for a tensor-parallel all-reduce?",
         "NVLink: an order of magnitude more bandwidth per GPU (table above)."),
    )
    levels = [dict(zip(("level", "capacity_bytes", "latency_cycles", "latency_ns",
                        "bytes_per_s", "sources"), r, strict=True)) for r in t.rows]
    return Report(f"memory-hierarchy: {g.id}", (s1, s2),
                  {"question": "memory-hierarchy", "options": o, "levels": levels},
                  question=PROMPT,
                  assumptions=("Latencies are pointer-chase measurements from the papers cited "
                               "(unloaded, cycles converted at the boost clock).",
                               "Link latencies are NCCL's per-hop model values."),
                  followups=followups)
