"""Views of the GPU lab: occupancy, memory access, divergence, launch, latency, hierarchy, and
the lab's compiled and timed kernels."""

from __future__ import annotations

from typing import Any


def occupancy_report(lim: Any, gpu: Any, r: Any, threads: int, regs: int, smem: int) -> Any:
    """``gpu occupancy``: resident blocks and warps per SM and the resource that limits them."""
    from ..derive import Headline, Report, Section, Table

    heads = (Headline("resident blocks per SM", r.active_blocks_per_sm, "block"),
             Headline("resident warps per SM", r.active_warps_per_sm, "warp"),
             Headline("occupancy", r.occupancy, "1"),
             Headline("limited by", ", ".join(r.limiters) or "none"))
    caps = Table("block caps per resource (the smallest wins)", ("resource", "blocks per SM"),
                 tuple((k, "unlimited" if v is None else v) for k, v in r.block_limits.items()))
    text = r.reason and f"Cannot launch: {r.reason}."
    data = r.to_dict() | {"gpu": gpu.id if gpu else None}
    title = f"scalemodel gpu occupancy: cc {lim.cc}" + (f" ({gpu.id})" if gpu else "")
    return Report(title, (Section("", text=text, headlines=heads, derivation=r.derivation,
                                  tables=(caps,)),), data,
                  plot=_occupancy_plotter(lim, threads, regs, smem))


def _occupancy_plotter(lim: Any, threads: int, regs: int, smem: int) -> Any:
    def draw(path: str) -> None:
        import numpy as np

        from ..analytic.occupancy import occupancy_arrays
        from ..report import plot_gpu as plot

        r = np.arange(0, lim.max_regs_per_thread + 1)
        occ_r = occupancy_arrays(lim, threads, r, smem)["occupancy"]
        s = np.arange(0, lim.max_smem_per_block_bytes + 1, 256)
        occ_s = occupancy_arrays(lim, threads, regs, s)["occupancy"]
        plot.occupancy_curves(path, title=f"Occupancy on cc {lim.cc}, {threads} threads/block",
                              regs=(r, occ_r, regs), smem=(s, occ_s, smem))

    return draw


def access_report(spec: Any, res: Any, size: int, params: dict[str, int], pred: Any) -> Any:
    """``gpu access``: sectors per request and shared-memory wavefronts, per memory
    instruction; with ``pred`` (a transpose on a named GPU) its bandwidth against a copy."""
    from ..derive import Headline, Report, Section, Table

    rows = []
    for i in res.instructions:
        if i.space == "global":
            rows.append((i.space, i.op, f"{i.array}[{i.index}]", i.requests,
                         i.sectors_per_request, i.ideal_sectors_per_request, "", "",
                         i.efficiency))
        else:
            rows.append((i.space, i.op, f"{i.array}[{i.index}]", i.requests, "", "",
                         i.wavefronts_per_request, i.conflict_degree, i.efficiency))
    table = Table(f"{res.kernel}: per memory instruction ({res.elem_bytes}-byte elements)",
                  ("space", "op", "access", "requests", "sectors/req", "ideal sectors/req",
                   "wavefronts/req", "conflict degree", "efficiency"), tuple(rows),
                  note=(f"{res.blocks_analyzed} of {res.launch.blocks} blocks analyzed"
                        + ("" if res.blocks_analyzed == res.launch.blocks else
                           " (an even sample; per-request figures are averages over it)")))
    data = res.to_dict()
    heads = []
    text = res.description + (f" [{res.source}]" if res.source else "")
    if pred is not None:
        data["prediction"] = pred
        heads.append(Headline(f"predicted bandwidth vs copy on {pred['gpu']}",
                              pred["fraction_of_copy"], "1"))
        heads.append(Headline("bound by", pred["bound"]))
    plot = _banks_plotter(spec, size, params) if any(
        o.space == "shared" for o in spec.ops) else None
    return Report(f"scalemodel gpu access: {res.kernel}",
                  (Section("", text=text, headlines=tuple(heads), tables=(table,)),), data,
                  plot=plot)


def _banks_plotter(spec: Any, size: int, params: dict[str, int]) -> Any:
    def draw(path: str) -> None:
        from ..report import plot_gpu as plot
        from ..sim import simt

        panels = []
        for i, op in enumerate(spec.ops):
            if op.space == "shared":
                panels.append((f"{op.op} {op.array}[{op.index}]",
                               simt.warp_banks(spec, i, size, params).tolist()))
        plot.warp_banks(path, title=f"{spec.name}: banks hit by warp 0", panels=panels)

    return draw


def divergence_report(r: Any) -> Any:
    """``gpu divergence``: divergent warps, serialized paths and SIMT efficiency."""
    from ..derive import Headline, Report, Section, Table

    heads = [Headline("warps", r.warps, "warp"),
             Headline("divergent warps", r.divergent_warps, "warp"),
             Headline("SIMT efficiency", r.simt_efficiency, "1")]
    if r.trips:
        heads.append(Headline("loop SIMT efficiency", r.loop_simt_efficiency, "1"))
    tables = [Table("serialized paths per warp", ("paths", "warps"),
                    tuple(r.paths_per_warp.items()))] if r.paths_per_warp else []
    if r.masks:
        tables.append(Table("active masks of the first warps (first predicate)",
                            ("block", "warp", "lanes that exist", "lanes taking the branch"),
                            r.masks[:16]))
    if r.by_loop_value:
        tables.append(Table(f"per value of {next(iter(r.loop))}",
                            ("value", "divergent warps", "SIMT efficiency"), r.by_loop_value))
    text = ("A warp diverges when its active lanes disagree on the branch: it then runs each "
            "non-empty path in turn with the other lanes masked off. Warps never diverge from "
            "each other. SIMT efficiency = useful lanes / 32 per issued instruction.")
    return Report("scalemodel gpu divergence", (Section("", text=text, headlines=tuple(heads),
                                                        tables=tuple(tables)),), r.to_dict())


def launch_report(g: Any, m: Any) -> Any:
    """``gpu launch``: threads to warps to blocks to SMs, waves and the tail."""
    from ..analytic.gpu_lab import SHARING
    from ..derive import Headline, Report, Section, Table

    heads = [Headline("warps per block", m.warps_per_block, "warp"),
             Headline("resident blocks per SM", m.blocks_per_sm, "block"),
             Headline("blocks per wave (all SMs)", m.concurrent_blocks, "block"),
             Headline("waves", m.waves if m.waves is not None else "cannot launch"),
             Headline("last wave's slots in use", m.tail_fraction, "1")]
    text = f"Cannot launch: {m.reason}." if m.reason else (
        "Blocks are handed to SMs as slots free up; with blocks of equal duration the grid runs "
        "in waves, and a small last wave leaves most SMs idle (the tail effect).")
    share = Table("what each level shares", ("level", "shares", "runs on"), SHARING)
    return Report(f"scalemodel gpu launch: {g.id}",
                  (Section("", text=text, headlines=tuple(heads), derivation=m.derivation,
                           tables=(share,)),), m.to_dict())


def latency_report(g: Any, r: Any) -> Any:
    """``gpu latency``: Little's law, the warps and bytes in flight that hide latency."""
    from ..derive import Headline, Report, Section, Table

    heads = (Headline("bytes in flight per SM to saturate HBM", r.bytes_in_flight_per_sm, "B"),
             Headline("warps per SM needed (memory)", r.warps_needed_memory, "warp"),
             Headline("warps per SM needed (FP32 FMA)", r.warps_needed_fma, "warp"))
    cases = Table("fewer warps with more in flight vs more warps",
                  ("case", "occupancy", "warps/SM", "bytes in flight/SM", "achievable B/s",
                   "of peak"),
                  tuple((c["label"], c["occupancy"], c["active_warps_per_sm"],
                         c["bytes_in_flight_per_sm"], c["achievable_bytes_per_s"],
                         c["fraction_of_peak"]) for c in r.cases))
    return Report(f"scalemodel gpu latency: {g.id}",
                  (Section("", headlines=heads, derivation=r.derivation, tables=(cases,)),),
                  r.to_dict())


def hierarchy_report(g: Any, t: Any) -> Any:
    """``gpu hierarchy``: capacity, latency and bandwidth of each memory level (``t``: the
    engine's table)."""
    from ..derive import Report, Section

    keys = ("level", "capacity_bytes", "latency_cycles", "latency_s", "bytes_per_s", "sources")
    rows = [dict(zip(keys, r, strict=True)) for r in t.rows]
    for r in rows:
        r["latency_s"] = None if r["latency_s"] is None else r["latency_s"] * 1e-9
    return Report(f"scalemodel gpu hierarchy: {g.id}", (Section("", tables=(t,)),),
                  {"gpu": g.id, "levels": rows, "note": t.note})


def build_report(arch: str, lim: Any, rows: list[tuple[Any, ...]], data: list[dict[str, Any]]
                 ) -> Any:
    """``gpu build``: ptxas's registers and shared memory per kernel, fed to the occupancy
    calculator."""
    from ..derive import Report, Section, Table

    t = Table(f"ptxas -v for {arch}, fed to the occupancy calculator (cc {lim.cc})",
              ("file", "kernel", "registers", "static smem B", "spill B", "threads/block",
               "blocks/SM", "occupancy", "limiter"), tuple(rows))
    return Report(f"scalemodel gpu build: {arch}", (Section("", tables=(t,)),),
                  {"arch": arch, "cc": lim.cc, "kernels": data})


def bench_report(res: dict[str, Any], n: int, reps: int) -> Any:
    """``gpu bench``: the lab's transposes and pointer chase timed on a real GPU."""
    from ..derive import Report, Section, Table

    rows = tuple((k, v["bytes_per_s"], v["fraction_of_copy"]) for k, v in res["transpose"].items())
    t = Table(f"{res['device']}: transposes of {n}x{n} float32 (median of "
              f"{reps})", ("kernel", "effective B/s", "of copy"), rows)
    lat = Table("pointer-chase latency", ("level", "cycles", "seconds"),
                tuple((k, v["cycles"], v["seconds"]) for k, v in res["latency"].items()))
    return Report("scalemodel gpu bench", (Section("", tables=(t, lat)),), res)
