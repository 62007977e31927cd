"""Launch mapping, latency hiding (Little's law) and the memory hierarchy of a GPU.

* :func:`launch_map`: threads -> warps -> blocks -> SMs for a grid and block on a GPU; resident
  blocks per SM from the occupancy calculator, waves, and the tail (the last, partial wave).
* :func:`latency_hiding`: Little's law, parallelism = latency x throughput, turned into the
  warps x ILP an SM needs to keep HBM or its FP32 pipes busy, and the classic case where fewer
  warps with more work in flight each beat higher occupancy (Volkov, GTC 2010).
* :func:`memory_hierarchy`: registers to NIC, capacity, latency and bandwidth with sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..derive import Derivation, Table
from ..errors import BadInput
from ..specs.sources import cite, load_toml
from .occupancy import OccupancyResult, limits_for_gpu, occupancy

__all__ = ["LaunchMap", "launch_map", "LatencyHiding", "latency_hiding", "memory_hierarchy",
           "SHARING"]

# what each level of the thread hierarchy shares (the hardware behind it)
SHARING: tuple[tuple[str, str, str], ...] = (
    ("thread", "its registers (private) and local memory (spills, in DRAM through L1/L2)",
     "one lane of a warp"),
    ("warp (32 threads)", "one instruction stream and its active mask; shuffles exchange "
     "registers between lanes", "one SM sub-partition's warp scheduler"),
    ("block", "shared memory, barriers (__syncthreads), the SM's L1", "one SM, all its life"),
    ("cluster (cc 9.0+)", "distributed shared memory of its blocks' SMs", "SMs of one GPC"),
    ("grid", "global memory, the L2 cache, atomics", "all SMs, in waves"),
)


@dataclass(frozen=True)
class LaunchMap:
    gpu: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    threads_per_block: int
    warps_per_block: int
    total_blocks: int
    total_warps: int
    sm_count: int
    blocks_per_sm: int
    concurrent_blocks: int
    waves: int | None
    waves_exact: float | None
    full_waves: int | None
    tail_blocks: int | None
    tail_fraction: float | None
    wave_efficiency: float | None
    warp_schedulers_per_sm: int
    warps_per_scheduler: float
    occupancy: OccupancyResult
    derivation: Derivation
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu, "grid": list(self.grid), "block": list(self.block),
            "threads_per_block": self.threads_per_block, "warps_per_block": self.warps_per_block,
            "total_blocks": self.total_blocks, "total_warps": self.total_warps,
            "sm_count": self.sm_count, "blocks_per_sm": self.blocks_per_sm,
            "concurrent_blocks": self.concurrent_blocks, "waves": self.waves,
            "waves_exact": self.waves_exact, "full_waves": self.full_waves,
            "tail_blocks": self.tail_blocks, "tail_fraction": self.tail_fraction,
            "wave_efficiency": self.wave_efficiency,
            "warp_schedulers_per_sm": self.warp_schedulers_per_sm,
            "warps_per_scheduler": self.warps_per_scheduler,
            "occupancy": self.occupancy.occupancy, "limiter": self.occupancy.limiter,
            "reason": self.reason, "derivation": self.derivation.to_dict(),
        }


def _dims(v: int | tuple[int, ...], what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(t) <= 3 or any((not isinstance(x, int)) or x < 1 for x in t):
        raise BadInput(f"{what}: one to three positive whole numbers (x,y,z), got {v!r}")
    return (t + (1, 1))[:3]  # type: ignore[return-value]


def launch_map(gpu: Any, grid: int | tuple[int, ...], block: int | tuple[int, ...], regs: int = 32,
               smem: int = 0, carveout: int = -1) -> LaunchMap:
    """Map a launch onto the GPU's SMs; waves and the tail assume blocks of equal duration."""
    g, b = _dims(grid, "--grid"), _dims(block, "--block")
    lim = limits_for_gpu(gpu)
    if not gpu.sm_count:
        raise BadInput(f"--gpu: {gpu.id} has no sm_count in its spec")
    T = b[0] * b[1] * b[2]
    if lim.max_threads_per_block < T:  # (T is the thread count, not a constant)
        raise BadInput(f"--block: at most {lim.max_threads_per_block} threads per block, got {T}")
    occ = occupancy(lim, T, regs, smem, carveout)
    d = Derivation(f"launch of {g} x {b} on {gpu.id}")
    d.given("threads per block", "T", T, "thread")
    d.given("blocks in the grid", "G", g[0] * g[1] * g[2], "block")
    d.given("warp size", "w", lim.warp_size, "thread", source=lim.source_of("warp_size"))
    d.calc("warps per block", "W_b", "ceil(T / w)", "warp")
    d.calc("warps in the grid", "W_g", "G * W_b", "warp")
    d.given("SMs", "n_SM", gpu.sm_count, "SM", source=gpu.source_of("sm_count"))
    d.given("resident blocks per SM (occupancy calculator)", "B_sm", occ.active_blocks_per_sm,
            "block", note=f"limited by {occ.limiter}")
    d.given("warp schedulers per SM", "P", lim.sub_partitions, "1",
            source=lim.source_of("sub_partitions"))
    d.calc("resident warps per scheduler", "W_s", "B_sm * W_b / P", "warp")
    reason = occ.reason
    waves = waves_exact = full = tail = tail_frac = eff = None
    if occ.active_blocks_per_sm > 0:
        d.calc("blocks resident on the GPU at once (one wave)", "S", "B_sm * n_SM", "block")
        waves_exact = d.calc("waves (fractional)", "n_w_exact", "G / S", "wave")
        waves = d.calc("waves", "n_w", "ceil(G / S)", "wave")
        full = int(d.calc("full waves", "n_full", "floor(G / S)", "wave"))
        tail = int(d.calc("blocks in the last wave", "G_tail", "G - (n_w - 1) * S", "block"))
        tail_frac = d.calc("share of the last wave's block slots in use", "f_tail", "G_tail / S",
                           "1", note="1 means the last wave is full; small values waste the GPU")
        eff = d.calc("slot use over all waves (equal block times)", "eta", "G / (n_w * S)", "1",
                     bound="upper")
    else:
        reason = reason or "no block fits on an SM"
    return LaunchMap(
        gpu=gpu.id, grid=g, block=b, threads_per_block=T, warps_per_block=occ.warps_per_block,
        total_blocks=g[0] * g[1] * g[2], total_warps=int(d["W_g"]), sm_count=gpu.sm_count,
        blocks_per_sm=occ.active_blocks_per_sm,
        concurrent_blocks=occ.active_blocks_per_sm * gpu.sm_count,
        waves=None if waves is None else int(waves), waves_exact=waves_exact, full_waves=full,
        tail_blocks=tail, tail_fraction=tail_frac, wave_efficiency=eff,
        warp_schedulers_per_sm=lim.sub_partitions, warps_per_scheduler=float(d["W_s"]),
        occupancy=occ, derivation=d, reason=reason)


# --- memory hierarchy data ------------------------------------------------------------------


@cache
def _mh() -> dict[str, Any]:
    return load_toml("memory_hierarchy.toml")


def arch_latencies(arch: str) -> dict[str, Any]:
    """Latency entry (cycles) for an architecture name, {} when none is recorded. An entry that
    ``borrows`` another architecture's measurements returns those, with ``borrowed_from`` and
    ``borrow_note`` saying so."""
    e = _mh().get(arch, {})
    if "borrows" not in e:
        return dict(e)
    src = str(e["borrows"])
    lent = _mh().get(src, {})
    if not lent or "borrows" in lent:
        raise BadInput(f"memory_hierarchy.toml [{arch}]: borrows {src!r}, which is not a measured "
                       "entry")
    return {**lent, "borrowed_from": src, "borrow_note": str(e.get("note", ""))}


def dram_latency(gpu: Any, loaded: bool = True) -> tuple[float, str, str]:
    """(latency in s, source, note) of a DRAM access for this GPU's architecture.

    ``loaded``: the latency under full-bandwidth load where one is recorded (what Little's law
    needs for the bytes in flight at peak), else the unloaded pointer-chase figure.
    """
    e = arch_latencies(gpu.arch)
    lent = (f"; borrowed: {gpu.arch} has no measurement, {e['borrowed_from']}'s is used "
            f"({e['borrow_note']})" if "borrowed_from" in e else "")
    if loaded and "dram_loaded_ns" in e:
        return float(e["dram_loaded_ns"]) * 1e-9, cite(e["dram_loaded_source"]), (
            "latency under full-bandwidth load (queueing included); the unloaded pointer-chase "
            f"figure is {float(e['dram']) / gpu.boost_clock_hz * 1e9:.0f} ns" + lent)
    if "dram" not in e:
        raise BadInput(f"--gpu: no measured DRAM latency recorded for architecture {gpu.arch!r}; "
                       "pass --latency-ns")
    cyc = float(e["dram"])
    return cyc / gpu.boost_clock_hz, cite(e["source"]), (
        f"{cyc:g} cycles measured on {e['measured_on']} (pointer chase, unloaded; confidence "
        f"{e.get('confidence', {}).get('dram', 'low')}), converted at the {gpu.id} boost clock"
        + lent)


def memory_hierarchy(gpu: Any, measured: dict[str, Any] | None = None) -> Table:
    """One row per level: capacity, latency (cycles, ns), bandwidth, and the sources."""
    from ..specs import get_link

    lim = limits_for_gpu(gpu)
    clk = gpu.boost_clock_hz
    lat = arch_latencies(gpu.arch)
    bw = _mh()["bandwidth"]
    reg = _mh()["registers"]
    src_lat = cite(lat["source"]) if lat else "none recorded"
    n = gpu.sm_count
    smem_bw = bw["smem_bytes_per_clk_per_sm"] * n * clk

    def lat_cell(level: str) -> tuple[Any, Any]:
        if measured and level in measured:
            ns = float(measured[level]) * 1e9
            return ns * clk / 1e9, ns
        if level not in lat:
            return None, None
        c = float(lat[level])
        return c, c / clk * 1e9

    l2_per_clk = bw["l2_bytes_per_clk"].get(gpu.arch)
    rows: list[tuple[Any, ...]] = []
    rows.append(("registers", lim.regs_per_sm * 4 * n, reg["fma_latency_cycles"],
                 reg["fma_latency_cycles"] / clk * 1e9, None,
                 f"{lim.source_of('regs_per_sm')}; latency: {cite(reg['source'])} (dependent FMA)"))
    c, ns = lat_cell("shared")
    rows.append(("shared memory", lim.smem_per_sm_bytes * n, c, ns, smem_bw,
                 f"capacity {lim.source_of('smem_per_sm_bytes')}; latency {src_lat}; bandwidth "
                 f"{bw['smem_bytes_per_clk_per_sm']} B/clk/SM ({cite(bw['smem_source'])})"))
    c, ns = lat_cell("l1")
    l1 = float(gpu.sm.get("l1_smem_per_sm_bytes", 0)) * n or None
    rows.append(("L1 (with shared)", l1, c, ns, smem_bw,
                 f"capacity {gpu.source_of('sm.l1_smem_per_sm_bytes')}; latency {src_lat}"))
    c, ns = lat_cell("l2")
    l2_meas = bw.get("l2_measured_bytes_per_s", {}).get(gpu.id)
    if l2_per_clk:
        l2_bw, l2_src = l2_per_clk * clk, cite(bw["l2_source"])
    elif l2_meas:
        on = bw.get("l2_measured_on", {}).get(gpu.id, gpu.id)
        l2_bw = float(l2_meas)
        l2_src = (f"measured on {on}" + (f" (same SM count and L2 as {gpu.id})" if on != gpu.id
                                          else "") + f": {cite(bw['l2_measured_source'])}")
    else:
        l2_bw, l2_src = None, "neither published nor measured in the bundled data for this GPU"
    rows.append(("L2", gpu.l2_bytes or None, c, ns, l2_bw,
                 f"capacity {gpu.source_of('l2_bytes')}; latency {src_lat}; bandwidth {l2_src}"))
    c, ns = lat_cell("dram")
    rows.append(("HBM / DRAM", gpu.hbm_bytes, c, ns, gpu.hbm_bytes_per_s,
                 f"{gpu.source_of('hbm_bytes_per_s')}; latency {src_lat}"))
    ic = gpu.interconnect
    if ic.get("scale_up_link"):
        lk = get_link(ic["scale_up_link"])
        rows.append((f"NVLink ({lk.id}, per GPU, one direction)", None, lk.latency_s * clk,
                     lk.latency_s * 1e9, gpu.scale_up_bytes_per_s,
                     f"{gpu.source_of('interconnect')}; latency {lk.source_of('latency_s')}"))
    for key, label in (("pcie_link", "PCIe (host, one direction)"),
                       ("scale_out_link", "NIC (scale-out, one direction)")):
        if ic.get(key):
            lk = get_link(ic[key])
            mult = ic.get("nics_per_gpu", 1) if key == "scale_out_link" else 1
            rows.append((f"{label}: {lk.id}", None, lk.latency_s * clk, lk.latency_s * 1e9,
                         lk.bytes_per_s_per_direction * mult,
                         f"{lk.source_of('bytes_per_s_per_direction')}; latency "
                         f"{lk.source_of('latency_s')}"))
    note = (f"Latencies in cycles measured on {lat.get('measured_on', 'n/a')} by pointer chasing "
            f"(unloaded), ns at the {gpu.id} boost clock {clk / 1e9:.3g} GHz; link latencies are "
            "NCCL's per-hop model values. Capacities are totals over all SMs.")
    if "borrowed_from" in lat:
        note += (f" {gpu.arch} has no latency measurement: {lat['borrowed_from']}'s is borrowed "
                 f"({lat['borrow_note']})")
    if measured:
        note += " Rows with a measured latency use this GPU's probe results."
    return Table(f"Memory hierarchy of {gpu.name}",
                 ("level", "capacity (B)", "latency (cycles)", "latency (ns)",
                  "bandwidth (B/s)", "sources"), tuple(rows), note=note)


# --- latency hiding -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencyHiding:
    gpu: str
    latency_s: float
    bytes_in_flight_per_sm: float
    warps_needed_memory: float
    fma_lanes_per_sm: float
    fma_latency_cycles: float
    warps_needed_fma: float
    cases: tuple[dict[str, Any], ...]
    derivation: Derivation

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "latency_s": self.latency_s,
                "bytes_in_flight_per_sm": self.bytes_in_flight_per_sm,
                "warps_needed_memory": self.warps_needed_memory,
                "fma_lanes_per_sm": self.fma_lanes_per_sm,
                "fma_latency_cycles": self.fma_latency_cycles,
                "warps_needed_fma": self.warps_needed_fma, "cases": list(self.cases),
                "derivation": self.derivation.to_dict()}


def latency_hiding(gpu: Any, *, bytes_per_load: int = 4, ilp: int = 1,
                   latency_s: float | None = None,
                   cases: tuple[tuple[str, int, int, int, int], ...] = (
                       ("one 4-byte load in flight per thread", 256, 40, 4, 1),
                       ("four 16-byte loads in flight per thread", 256, 128, 16, 4),
                   )) -> LatencyHiding:
    """Warps x ILP needed to hide DRAM and FMA latency, and a high- vs low-occupancy case.

    Each case is (what the threads do, threads per block, registers per thread, bytes per load,
    independent loads per thread); its occupancy comes from the calculator (and leads the
    case's label), its achievable bandwidth from Little's law: min(peak, bytes in flight /
    latency).
    """
    if bytes_per_load not in (1, 2, 4, 8, 16) or ilp < 1:
        raise BadInput("--bytes-per-load must be 1, 2, 4, 8 or 16 and --ilp at least 1")
    lim = limits_for_gpu(gpu)
    d = Derivation(f"Little's law on {gpu.id}")
    if latency_s is None:
        latency_s, src, note = dram_latency(gpu)
    else:
        src, note = "given (--latency-ns)", ""
    d.given("HBM bandwidth", "BW", gpu.hbm_bytes_per_s, "B/s",
            source=gpu.source_of("hbm_bytes_per_s"))
    d.given("DRAM load latency", "L", latency_s, "s", source=src, note=note)
    d.given("SMs", "n_SM", gpu.sm_count, "SM", source=gpu.source_of("sm_count"))
    d.calc("bytes in flight to saturate HBM", "Q", "BW * L", "B", bound="lower",
           note="Little's law; loaded latency is higher, so more is needed in practice")
    q_sm = d.calc("bytes in flight per SM", "Q_sm", "Q / n_SM", "B", bound="lower")
    d.given("bytes per load per thread", "b", bytes_per_load, "B")
    d.given("independent loads in flight per thread (ILP)", "i", ilp, "1")
    d.given("warp size", "w", lim.warp_size, "thread")
    w_mem = d.calc("warps per SM needed for HBM", "W_mem", "Q_sm / (w * b * i)", "warp",
                   bound="lower")
    d.given("max warps per SM", "W_max", lim.max_warps_per_sm, "warp",
            source=lim.source_of("max_threads_per_sm"))
    # FP32 pipes
    d.given("FP32 peak", "F", gpu.flop_per_s.get("fp32", 0.0), "FLOP/s",
            source=gpu.source_of("flop_per_s.fp32"))
    d.given("boost clock", "f", gpu.boost_clock_hz, "Hz", source=gpu.source_of("boost_clock_hz"))
    lanes = d.calc("FP32 FMA lanes per SM", "N_fma", "F / (2 * n_SM * f)", "lane")
    fma_lat = float(_mh()["registers"]["fma_latency_cycles"])
    d.given("dependent FMA latency", "L_fma", fma_lat, "cycle",
            source=cite(_mh()["registers"]["source"]))
    d.calc("FMAs in flight per SM", "Q_fma", "N_fma * L_fma", "FMA")
    w_fma = d.calc("warps per SM needed for the FMA pipes (ILP i)", "W_fma",
                   "Q_fma / (w * i)", "warp", bound="lower")
    out = []
    for what, threads, regs, b, i in cases:
        occ = occupancy(lim, threads, regs, 0)
        label = f"{occ.occupancy:.0%} occupancy ({threads} threads x {regs} registers), {what}"
        warps = occ.active_warps_per_sm
        inflight = warps * lim.warp_size * b * i
        bw = min(gpu.hbm_bytes_per_s, inflight * gpu.sm_count / latency_s)
        out.append({"label": label, "threads_per_block": threads, "regs_per_thread": regs,
                    "bytes_per_load": b, "ilp": i, "occupancy": occ.occupancy,
                    "active_warps_per_sm": warps, "bytes_in_flight_per_sm": inflight,
                    "achievable_bytes_per_s": bw,
                    "fraction_of_peak": bw / gpu.hbm_bytes_per_s})
    return LatencyHiding(gpu=gpu.id, latency_s=latency_s, bytes_in_flight_per_sm=float(q_sm),
                         warps_needed_memory=float(w_mem), fma_lanes_per_sm=float(lanes),
                         fma_latency_cycles=fma_lat, warps_needed_fma=float(w_fma),
                         cases=tuple(out), derivation=d)


def ceil_warps(x: float) -> int:
    return int(math.ceil(x - 1e-9))
