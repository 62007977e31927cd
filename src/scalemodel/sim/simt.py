"""Warp-level access analysis: coalescing, shared-memory bank conflicts and divergence, in numpy.

A kernel is described by data: its launch (grid, block), named parameters, loops, and one entry
per memory instruction with a per-thread element-index expression (see
:mod:`scalemodel.sim.cuda_expr`). The analyzer evaluates every expression for every thread of the
launch (or of an even sample of its blocks when the launch is large), groups the threads into
warps of 32 as the hardware does (linear thread id ``x + y*Bx + z*Bx*By``, 32 consecutive ids per
warp), and counts per warp-level request:

* global memory: the 32-byte sectors and 128-byte lines the active lanes touch, against the
  fewest sectors that could hold the distinct bytes requested (the ideal);
* shared memory: 32 banks of 4 bytes; lanes reading the same 4-byte word are served together
  (broadcast), distinct words in the same bank are serialised; 8-byte accesses are processed as
  two half-warp phases and 16-byte accesses as four quarter-warp phases, conflicts counting only
  within a phase. Wavefronts per request = sum over phases of the largest number of distinct
  words in one bank; the conflict degree is wavefronts / the conflict-free count.

Divergence: for nested branch predicates and per-thread loop trip counts, the per-warp active
masks, the paths each warp serialises and the SIMT efficiency (useful lanes / 32 per issued
instruction, the convention of Nsight Compute's 'thread instructions executed / 32').
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from ..errors import BadInput, close_matches
from ..specs.sources import cite, load_toml, read_user_toml
from .cuda_expr import parse

__all__ = [
    "SECTOR_BYTES", "LINE_BYTES", "BANKS", "BANK_BYTES", "WARP",
    "Launch", "MemOp", "LoopSpec", "KernelSpec", "InstructionStats", "AccessResult",
    "DivergenceResult", "kernel_names", "get_kernel", "kernel_from_table", "strided_kernel",
    "custom_kernel", "analyze", "divergence", "warp_banks",
]

# access units from memory_hierarchy.toml [access] (each with its source), warp size from the
# compute-capability table's defaults
_ACCESS = load_toml("memory_hierarchy.toml")["access"]
SECTOR_BYTES = int(_ACCESS["sector_bytes"]["value"])
LINE_BYTES = int(_ACCESS["line_bytes"]["value"])
BANKS = int(_ACCESS["smem_banks"]["value"])
BANK_BYTES = int(_ACCESS["smem_bank_bytes"]["value"])
WARP = int(load_toml("compute_capabilities.toml")["defaults"]["warp_size"])
MAX_LANES_PER_OP = 2_000_000  # above this many thread-accesses per instruction, sample blocks
_NONE = np.iinfo(np.int64).max


# --- launch and thread indices ---------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // WARP)

    def check(self) -> None:
        if min(self.block) < 1 or min(self.grid) < 1:
            raise BadInput(f"launch: block and grid sizes must be positive, got block "
                           f"{self.block} grid {self.grid}")
        if self.threads_per_block > 1024:
            raise BadInput(f"--block: at most 1024 threads per block, got {self.threads_per_block}"
                           f" ({' x '.join(map(str, self.block))})")


def _thread_env(launch: Launch, block_ids: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-thread index arrays shaped (blocks, warps, 32) and the mask of lanes that exist."""
    bx, by, bz = launch.block
    gx, gy, _ = launch.grid
    nw = launch.warps_per_block
    lin = np.arange(nw * WARP, dtype=np.int64).reshape(1, nw, WARP)
    exists = np.broadcast_to(lin < launch.threads_per_block, (block_ids.size, nw, WARP))
    b = block_ids.reshape(-1, 1, 1).astype(np.int64)
    env = {
        "threadIdx.x": lin % bx, "threadIdx.y": (lin // bx) % by, "threadIdx.z": lin // (bx * by),
        "blockIdx.x": b % gx, "blockIdx.y": (b // gx) % gy, "blockIdx.z": b // (gx * gy),
        "blockDim.x": np.int64(bx), "blockDim.y": np.int64(by), "blockDim.z": np.int64(bz),
        "gridDim.x": np.int64(gx), "gridDim.y": np.int64(gy), "gridDim.z": np.int64(launch.grid[2]),
        "warpSize": np.int64(WARP), "laneId": lin % WARP,
    }
    return env, exists


def _sample_blocks(launch: Launch, lanes_per_block: int) -> np.ndarray:
    total = launch.blocks
    keep = max(1, min(total, MAX_LANES_PER_OP // max(lanes_per_block, 1)))
    if keep >= total:
        return np.arange(total, dtype=np.int64)
    return np.unique(np.linspace(0, total - 1, keep).round().astype(np.int64))


# --- kernel descriptions -----------------------------------------------------------------------


@dataclass(frozen=True)
class LoopSpec:
    """``for var in start, start+step, ... < stop`` or, with ``factor``, a geometric loop
    (``*= factor`` while ``< stop``, or ``/= factor`` while ``> stop`` when ``divide``)."""

    var: str
    start: str
    stop: str
    step: str = "1"
    factor: str = ""
    divide: bool = False

    def values(self, env: Mapping[str, Any]) -> list[int]:
        def val(text: str) -> int:
            v = parse(str(text), f"loop {self.var}").evaluate(env)
            if v.size != 1 and np.unique(v).size != 1:
                raise BadInput(f"loop {self.var}: bounds must be the same for every thread")
            return int(v.flat[0])

        start, stop = val(self.start), val(self.stop)
        out: list[int] = []
        if self.factor:
            f = val(self.factor)
            if f < 2:
                raise BadInput(f"loop {self.var}: factor must be at least 2, got {f}")
            v = start
            while (v > stop if self.divide else v < stop) and len(out) < 4096 and v != 0:
                out.append(v)
                v = v // f if self.divide else v * f
        else:
            step = val(self.step)
            if step == 0:
                raise BadInput(f"loop {self.var}: step must not be 0")
            out = list(range(start, stop, step))[:4096]
        return out


@dataclass(frozen=True)
class MemOp:
    """One memory instruction: which array, where it lives, load or store, and its index."""

    array: str
    space: str
    op: str
    index: str
    active: str = ""
    loops: tuple[str, ...] = ()
    base_bytes: int = 0
    elem_bytes: int | None = None  # None: the kernel's element size

    def label(self) -> str:
        return f"{self.op} {self.array}[{self.index}]"


@dataclass(frozen=True)
class KernelSpec:
    name: str
    description: str
    block: tuple[str, str, str]
    grid: tuple[str, str, str]
    params: Mapping[str, str]
    ops: tuple[MemOp, ...]
    loops: Mapping[str, LoopSpec] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    source: str = ""
    divergence: tuple[str, ...] = ()  # branch predicates the kernel contains (for reports)


@cache
def _library() -> dict[str, Any]:
    return load_toml("gpu_kernels.toml")


def kernel_names() -> list[str]:
    return list(_library())


def kernel_from_table(name: str, t: Mapping[str, Any], origin: str = "gpu_kernels.toml") -> KernelSpec:
    """Build a KernelSpec from a TOML table (bundled library or a user's --kernel-file)."""
    def three(key: str) -> tuple[str, str, str]:
        v = t.get(key, ["1", "1", "1"])
        if not isinstance(v, list) or not 1 <= len(v) <= 3:
            raise BadInput(f"kernel {name!r} ({origin}): {key} must be a list of 1-3 expressions")
        v = [str(x) for x in v] + ["1"] * (3 - len(v))
        return v[0], v[1], v[2]

    ops = []
    for i, o in enumerate(t.get("ops", [])):
        for k in ("array", "space", "op", "index"):
            if k not in o:
                raise BadInput(f"kernel {name!r} ({origin}): ops[{i}] is missing {k!r}")
        if o["space"] not in ("global", "shared"):
            raise BadInput(f"kernel {name!r}: ops[{i}].space must be global or shared")
        if o["op"] not in ("load", "store"):
            raise BadInput(f"kernel {name!r}: ops[{i}].op must be load or store")
        ops.append(MemOp(array=str(o["array"]), space=o["space"], op=o["op"],
                         index=str(o["index"]), active=str(o.get("active", "")),
                         loops=tuple(o.get("loops", ())), base_bytes=int(o.get("base_bytes", 0)),
                         elem_bytes=o.get("bytes")))
    if not ops:
        raise BadInput(f"kernel {name!r} ({origin}): no ops")
    loops = {}
    for lp in t.get("loops", []):
        try:
            loops[lp["var"]] = LoopSpec(var=lp["var"], start=str(lp["start"]),
                                        stop=str(lp["stop"]), step=str(lp.get("step", "1")),
                                        factor=str(lp.get("factor", "")),
                                        divide=bool(lp.get("divide", False)))
        except KeyError as e:
            raise BadInput(f"kernel {name!r} ({origin}): a loop lacks {e}") from None
    for o in ops:
        for lv in o.loops:
            if lv not in loops:
                raise BadInput(f"kernel {name!r}: op uses undefined loop {lv!r}")
    return KernelSpec(name=name, description=str(t.get("description", "")), block=three("block"),
                      grid=three("grid"), params={k: str(v) for k, v in t.get("params", {}).items()},
                      ops=tuple(ops), loops=loops, requires=tuple(t.get("requires", ())),
                      source=str(t.get("source", "")),
                      divergence=tuple(t.get("divergence", ())))


def get_kernel(name: str, kernel_file: str | None = None) -> KernelSpec:
    if kernel_file:
        data = read_user_toml(kernel_file, "--kernel-file")
        if name not in data:
            raise BadInput(f"--kernel: {kernel_file} defines {', '.join(data) or 'no kernels'}, "
                           f"not {name!r}")
        return kernel_from_table(name, data[name], origin=kernel_file)
    lib = _library()
    if name not in lib:
        hint = close_matches(name, list(lib))
        raise BadInput(f"--kernel: unknown kernel {name!r}; "
                       + (f"did you mean {hint}? " if hint else "")
                       + f"built-in kernels: {', '.join(lib)}")
    return kernel_from_table(name, lib[name])


def strided_kernel(stride: int, space: str, op: str = "load") -> KernelSpec:
    """One warp reading element ``threadIdx.x * stride`` (the classic strided-access example)."""
    return KernelSpec(
        name=f"stride-{stride}", description=f"one warp, element index threadIdx.x * {stride}",
        block=("32", "1", "1"), grid=("1", "1", "1"), params={"K": str(stride)},
        ops=(MemOp(array="a", space=space, op=op, index="threadIdx.x * K"),))


def custom_kernel(index: str, space: str, op: str, block: Sequence[int], grid: Sequence[int],
                  active: str = "", defines: Mapping[str, int] | None = None) -> KernelSpec:
    parse(index, "--index")  # fail early with the field name
    if active:
        parse(active, "--active")
    return KernelSpec(
        name="custom", description=f"{op} {space}[{index}]",
        block=tuple(str(b) for b in (tuple(block) + (1, 1))[:3]),  # type: ignore[arg-type]
        grid=tuple(str(g) for g in (tuple(grid) + (1, 1))[:3]),  # type: ignore[arg-type]
        params={k: str(v) for k, v in (defines or {}).items()},
        ops=(MemOp(array="a", space=space, op=op, index=index, active=active),))


# --- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstructionStats:
    label: str
    array: str
    space: str
    op: str
    index: str
    elem_bytes: int
    requests: int
    lanes: int
    sectors: int = 0
    ideal_sectors: int = 0
    lines: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0
    max_conflict_ways: int = 0
    bytes_requested: int = 0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal_sectors_per_request(self) -> float:
        return self.ideal_sectors / self.requests if self.requests else 0.0

    @property
    def wavefronts_per_request(self) -> float:
        return self.wavefronts / self.requests if self.requests else 0.0

    @property
    def conflict_degree(self) -> float:
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 0.0

    @property
    def efficiency(self) -> float:
        if self.space == "global":
            return self.ideal_sectors / self.sectors if self.sectors else 1.0
        return self.ideal_wavefronts / self.wavefronts if self.wavefronts else 1.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"space": self.space, "op": self.op, "array": self.array,
                             "index": self.index, "elem_bytes": self.elem_bytes,
                             "requests": self.requests, "active_lanes": self.lanes}
        if self.space == "global":
            d |= {"sectors_per_request": self.sectors_per_request,
                  "ideal_sectors_per_request": self.ideal_sectors_per_request,
                  "lines_per_request": self.lines / self.requests if self.requests else 0.0,
                  "efficiency": self.efficiency,
                  "bytes_requested": self.bytes_requested,
                  "bytes_transferred": self.sectors * SECTOR_BYTES}
        else:
            d |= {"wavefronts_per_request": self.wavefronts_per_request,
                  "ideal_wavefronts_per_request": (self.ideal_wavefronts / self.requests
                                                   if self.requests else 0.0),
                  "conflict_degree": self.conflict_degree,
                  "max_conflict_ways": self.max_conflict_ways,
                  "efficiency": self.efficiency}
        return d


@dataclass(frozen=True)
class AccessResult:
    kernel: str
    description: str
    params: Mapping[str, int]
    launch: Launch
    elem_bytes: int
    blocks_analyzed: int
    instructions: tuple[InstructionStats, ...]
    source: str = ""

    @property
    def global_sectors(self) -> int:
        return sum(i.sectors for i in self.instructions if i.space == "global")

    @property
    def global_ideal_sectors(self) -> int:
        return sum(i.ideal_sectors for i in self.instructions if i.space == "global")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "description": self.description, "params": dict(self.params),
            "grid": list(self.launch.grid), "block": list(self.launch.block),
            "elem_bytes": self.elem_bytes, "blocks_total": self.launch.blocks,
            "blocks_analyzed": self.blocks_analyzed,
            "instructions": [i.to_dict() for i in self.instructions],
        }


# --- counting ---------------------------------------------------------------------------------


def _distinct_per_row(vals: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Number of distinct values per row among the valid entries."""
    v = np.where(valid, vals, _NONE)
    s = np.sort(v, axis=1)
    first = s[:, :1] != _NONE
    rest = (s[:, 1:] != s[:, :-1]) & (s[:, 1:] != _NONE)
    return first.sum(axis=1) + rest.sum(axis=1)


def _spans(addr: np.ndarray, valid: np.ndarray, size: int, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit ids (sectors, lines, words) each lane's access covers, flattened per row."""
    first = addr // unit
    last = (addr + size - 1) // unit
    span = -(-size // unit) + 1  # an unaligned access can straddle one more unit
    ids = first[..., None] + np.arange(span)
    ok = valid[..., None] & (ids <= last[..., None])
    rows = addr.shape[0]
    return ids.reshape(rows, -1), ok.reshape(rows, -1)


def _global_counts(addr: np.ndarray, valid: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    sid, sok = _spans(addr, valid, size, SECTOR_BYTES)
    sectors = _distinct_per_row(sid, sok)
    lid, lok = _spans(addr, valid, size, LINE_BYTES)
    lines = _distinct_per_row(lid, lok)
    distinct_elems = _distinct_per_row(addr, valid)
    ideal = -(-(distinct_elems * size) // SECTOR_BYTES)
    return sectors, lines, ideal


def _shared_counts(addr: np.ndarray, valid: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    """Wavefronts, conflict-free wavefronts and worst n-way per request (row of 32 lanes)."""
    phases = max(1, size // BANK_BYTES) if size > BANK_BYTES else 1
    lanes_per_phase = WARP // phases
    rows = addr.shape[0]
    a = addr.reshape(rows * phases, lanes_per_phase)
    v = valid.reshape(rows * phases, lanes_per_phase)
    wid, wok = _spans(a, v, size, BANK_BYTES)
    # distinct words per (phase, bank): mark first occurrence of each word in its phase
    w = np.where(wok, wid, _NONE)
    order = np.argsort(w, axis=1, kind="stable")
    ws = np.take_along_axis(w, order, axis=1)
    is_new = np.ones_like(ws, dtype=bool)
    is_new[:, 1:] = ws[:, 1:] != ws[:, :-1]
    is_new &= ws != _NONE
    bank = np.where(ws == _NONE, 0, ws % BANKS)
    r = np.repeat(np.arange(rows * phases), ws.shape[1]).reshape(ws.shape)
    counts = np.bincount((r * BANKS + bank).ravel(), weights=is_new.ravel().astype(np.float64),
                         minlength=rows * phases * BANKS).reshape(rows * phases, BANKS)
    ways = counts.max(axis=1).astype(np.int64)  # 0 for a phase with no active lane
    active_phase = v.any(axis=1)
    ways = np.where(active_phase, np.maximum(ways, 1), 0).reshape(rows, phases)
    wavefronts = ways.sum(axis=1)
    ideal = active_phase.reshape(rows, phases).sum(axis=1)
    return wavefronts, ideal, ways.max(axis=1)


def _resolve_params(spec: KernelSpec, overrides: Mapping[str, int]) -> dict[str, int]:
    env: dict[str, Any] = {"warpSize": 32}
    for k, text in spec.params.items():
        if k in overrides:
            env[k] = int(overrides[k])
            continue
        env[k] = int(parse(text, f"kernel parameter {k}").evaluate(env))
    for k, v in overrides.items():
        if k not in env:
            env[k] = int(v)
    env.pop("warpSize")
    return env


def build_launch(spec: KernelSpec, params: Mapping[str, int]) -> Launch:
    env = dict(params) | {"warpSize": 32}

    def ints(exprs: tuple[str, str, str], what: str) -> tuple[int, int, int]:
        out = tuple(int(parse(e, f"kernel {what}").evaluate(env)) for e in exprs)
        return out  # type: ignore[return-value]

    launch = Launch(grid=ints(spec.grid, "grid"), block=ints(spec.block, "block"))
    launch.check()
    for req in spec.requires:
        if not int(parse(req, "kernel requirement").evaluate(env)):
            shown = ", ".join(f"{k}={v}" for k, v in params.items())
            raise BadInput(f"kernel {spec.name}: requires {req} (with {shown})")
    return launch


def analyze(spec: KernelSpec, elem_bytes: int = 4, params: Mapping[str, int] | None = None,
            ) -> AccessResult:
    """Count requests, sectors, lines and wavefronts for every memory instruction of a kernel."""
    if elem_bytes not in (1, 2, 4, 8, 16):
        raise BadInput(f"--dtype: element size must be 1, 2, 4, 8 or 16 bytes, got {elem_bytes}")
    p = _resolve_params(spec, params or {})
    launch = build_launch(spec, p)
    base_env = dict(p)
    stats = []
    blocks_seen = launch.blocks
    for op in spec.ops:
        size = int(op.elem_bytes or elem_bytes)
        loop_vals = [spec.loops[lv].values(base_env) for lv in op.loops]
        combos = list(itertools.product(*loop_vals)) if op.loops else [()]
        lanes_per_block = launch.warps_per_block * WARP * max(1, len(combos))
        block_ids = _sample_blocks(launch, lanes_per_block)
        blocks_seen = min(blocks_seen, block_ids.size)
        tenv, exists = _thread_env(launch, block_ids)
        index = parse(op.index, f"index of {op.array}")
        active = parse(op.active, f"active predicate of {op.array}") if op.active else None
        tot = dict(requests=0, lanes=0, sectors=0, ideal_sectors=0, lines=0, wavefronts=0,
                   ideal_wavefronts=0, max_ways=0, bytes=0)
        for combo in combos:
            env = base_env | tenv | dict(zip(op.loops, combo, strict=True))
            idx = np.broadcast_to(index.evaluate(env), exists.shape)
            valid = exists.copy()
            if active is not None:
                valid &= np.broadcast_to(active.evaluate(env) != 0, exists.shape)
            if np.any(idx[valid] < 0):
                raise BadInput(f"kernel {spec.name}: index {op.index!r} is negative for some "
                               "thread")
            addr = (idx * size + op.base_bytes).reshape(-1, WARP)
            vrows = valid.reshape(-1, WARP)
            live = vrows.any(axis=1)
            addr, vrows = addr[live], vrows[live]
            if not addr.shape[0]:
                continue
            tot["requests"] += addr.shape[0]
            n_lanes = int(vrows.sum())
            tot["lanes"] += n_lanes
            tot["bytes"] += n_lanes * size
            if op.space == "global":
                s, ln, ideal = _global_counts(addr, vrows, size)
                tot["sectors"] += int(s.sum())
                tot["lines"] += int(ln.sum())
                tot["ideal_sectors"] += int(ideal.sum())
            else:
                wf, ideal, ways = _shared_counts(addr, vrows, size)
                tot["wavefronts"] += int(wf.sum())
                tot["ideal_wavefronts"] += int(ideal.sum())
                tot["max_ways"] = max(tot["max_ways"], int(ways.max()))
        stats.append(InstructionStats(
            label=op.label(), array=op.array, space=op.space, op=op.op, index=op.index,
            elem_bytes=size, requests=tot["requests"], lanes=tot["lanes"],
            sectors=tot["sectors"], ideal_sectors=tot["ideal_sectors"], lines=tot["lines"],
            wavefronts=tot["wavefronts"], ideal_wavefronts=tot["ideal_wavefronts"],
            max_conflict_ways=tot["max_ways"], bytes_requested=tot["bytes"]))
    return AccessResult(kernel=spec.name, description=spec.description, params=p, launch=launch,
                        elem_bytes=elem_bytes, blocks_analyzed=blocks_seen,
                        instructions=tuple(stats),
                        source=cite(spec.source) if spec.source else "")


def warp_banks(spec: KernelSpec, op_index: int, elem_bytes: int = 4,
               params: Mapping[str, int] | None = None, loop_values: Mapping[str, int] | None = None,
               ) -> np.ndarray:
    """Bank hit by each lane of warp 0 of block 0 for one instruction (-1: inactive lane)."""
    p = _resolve_params(spec, params or {})
    launch = build_launch(spec, p)
    op = spec.ops[op_index]
    size = int(op.elem_bytes or elem_bytes)
    tenv, exists = _thread_env(launch, np.zeros(1, dtype=np.int64))
    lv = dict(loop_values or {})
    for name in op.loops:
        lv.setdefault(name, spec.loops[name].values(p)[0])
    env = dict(p) | tenv | lv
    idx = np.broadcast_to(parse(op.index).evaluate(env), exists.shape)[0, 0]
    ok = exists[0, 0].copy()
    if op.active:
        ok &= np.broadcast_to(parse(op.active).evaluate(env) != 0, exists.shape)[0, 0]
    banks = ((idx * size + op.base_bytes) // BANK_BYTES) % BANKS
    return np.where(ok, banks, -1)


# --- divergence ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DivergenceResult:
    predicates: tuple[str, ...]
    trips: str
    launch: Launch
    loop: Mapping[str, tuple[int, ...]]
    warps: int
    divergent_warps: int
    simt_efficiency: float
    paths_per_warp: Mapping[int, int]  # serialized paths -> warps (summed over loop values)
    issued_slots: float
    useful_lane_slots: float
    loop_divergent_warps: int
    loop_simt_efficiency: float | None
    masks: tuple[tuple[int, int, str, str], ...]  # (block, warp, exists mask, taken mask) hex
    by_loop_value: tuple[tuple[int, int, float], ...] = ()
    blocks_analyzed: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = {
            "predicates": list(self.predicates), "block": list(self.launch.block),
            "grid": list(self.launch.grid), "warps": self.warps,
            "divergent_warps": self.divergent_warps, "simt_efficiency": self.simt_efficiency,
            "paths_per_warp": {str(k): v for k, v in self.paths_per_warp.items()},
            "blocks_analyzed": self.blocks_analyzed,
            "warp_masks": [{"block": b, "warp": w, "exists": e, "taken": t}
                           for b, w, e, t in self.masks],
        }
        if self.loop:
            d["loop"] = {k: list(v) for k, v in self.loop.items()}
            d["by_loop_value"] = [{"value": v, "divergent_warps": n, "simt_efficiency": e}
                                  for v, n, e in self.by_loop_value]
        if self.trips:
            d |= {"trips": self.trips, "loop_divergent_warps": self.loop_divergent_warps,
                  "loop_simt_efficiency": self.loop_simt_efficiency}
        return d


def _hex_mask(bits: np.ndarray) -> str:
    return f"0x{int(sum(1 << i for i, b in enumerate(bits) if b)):08x}"


def divergence(predicates: Sequence[str], launch: Launch, *, trips: str = "",
               then_cost: float = 1.0, else_cost: float = 1.0,
               loop: tuple[str, Sequence[int]] | None = None,
               defines: Mapping[str, int] | None = None, max_masks: int = 64) -> DivergenceResult:
    """Per-warp active masks and SIMT efficiency of nested branches and data-dependent loops.

    ``predicates`` nest: ``if (p1) { if (p2) { ... then ... } else {...} } else {...}``; every
    non-empty leaf path is one serialized pass of its body (cost ``then_cost`` for the innermost
    then, ``else_cost`` for each else; 0 means the branch has no else). ``loop=(name, values)``
    evaluates the predicates once per value of a loop variable (e.g. a reduction's stride) and
    sums. ``trips`` is a per-thread trip count: the warp runs its largest one.
    """
    launch.check()
    if not predicates and not trips:
        raise BadInput("--predicate or --trips: give at least one branch predicate or trip count")
    if then_cost < 0 or else_cost < 0:
        raise BadInput("--then-cost/--else-cost must be 0 or more")
    preds = [parse(p, "--predicate") for p in predicates]
    trip_expr = parse(trips, "--trips") if trips else None
    block_ids = _sample_blocks(launch, launch.warps_per_block * WARP
                               * max(1, len(loop[1]) if loop else 1))
    tenv, exists = _thread_env(launch, block_ids)
    base = dict(defines or {}) | tenv
    nb, nw, _ = exists.shape
    lane_exists = exists.reshape(-1, WARP)
    n_warps = launch.warps_per_block * launch.blocks
    scale = launch.blocks / block_ids.size  # sampled blocks stand for all

    values = list(loop[1]) if loop else [None]
    paths_hist: dict[int, int] = {}
    issued = useful = 0.0
    divergent_any = np.zeros(lane_exists.shape[0], dtype=bool)
    per_value = []
    first_taken = None
    for val in values:
        env = base | ({loop[0]: np.int64(val)} if loop else {})
        if not preds:
            break
        leaves = []  # lane masks of the leaf paths, with their cost
        cur = lane_exists.copy()
        for k, pe in enumerate(preds):
            pv = np.broadcast_to(pe.evaluate(env) != 0, exists.shape).reshape(-1, WARP)
            taken = cur & pv
            if k == 0 and first_taken is None:
                first_taken = taken
            leaves.append((cur & ~pv, else_cost))
            cur = taken
        leaves.append((cur, then_cost))
        nonempty = np.stack([m.any(axis=1) for m, _ in leaves], axis=1)
        n_paths = nonempty.sum(axis=1)
        div = n_paths > 1
        divergent_any |= div
        iss = sum(m.any(axis=1) * c for m, c in leaves)
        use = sum(m.sum(axis=1) * c for m, c in leaves) / WARP
        issued += float(iss.sum()) * scale
        useful += float(use.sum()) * scale
        for p_count, cnt in zip(*np.unique(n_paths, return_counts=True), strict=True):
            paths_hist[int(p_count)] = paths_hist.get(int(p_count), 0) + int(round(cnt * scale))
        per_value.append((val, int(round(div.sum() * scale)),
                          float(use.sum() / iss.sum()) if iss.sum() else 1.0))
    loop_div = 0
    loop_eff = None
    if trip_expr is not None:
        t = np.broadcast_to(trip_expr.evaluate(base), exists.shape).reshape(-1, WARP)
        if np.any(t[lane_exists] < 0):
            raise BadInput("--trips: trip counts must be 0 or more")
        tv = np.where(lane_exists, t, 0)
        tmax = tv.max(axis=1)
        tmin = np.where(lane_exists, t, np.iinfo(np.int64).max).min(axis=1)
        loop_div = int(round((tmax != tmin).sum() * scale))
        loop_eff = float(tv.sum() / (WARP * tmax.sum())) if tmax.sum() else 1.0
    masks = []
    if first_taken is not None:
        for r in range(min(max_masks, first_taken.shape[0])):
            masks.append((int(block_ids[r // nw]), r % nw, _hex_mask(lane_exists[r]),
                          _hex_mask(first_taken[r])))
    eff = useful / issued if issued else (loop_eff if loop_eff is not None else 1.0)
    return DivergenceResult(
        predicates=tuple(predicates), trips=trips, launch=launch,
        loop={loop[0]: tuple(loop[1])} if loop else {}, warps=n_warps,
        divergent_warps=int(round(divergent_any.sum() * scale)) if preds else loop_div,
        simt_efficiency=float(eff), paths_per_warp=dict(sorted(paths_hist.items())),
        issued_slots=issued, useful_lane_slots=useful, loop_divergent_warps=loop_div,
        loop_simt_efficiency=loop_eff, masks=tuple(masks),
        by_loop_value=tuple(per_value) if loop else (), blocks_analyzed=int(block_ids.size))


# --- a simple time model for the bench comparison ------------------------------------------


def predicted_fraction_of_copy(res: AccessResult, copy: AccessResult, hbm_bytes_per_clk_sm: float,
                               ) -> dict[str, float]:
    """Bandwidth of a kernel as a fraction of the copy kernel's, from sectors and wavefronts.

    Per SM, the kernel needs (global sectors x 32 B) / (HBM bytes per clock per SM) cycles of
    DRAM time and one cycle per shared-memory wavefront; with perfect overlap the slower of the
    two sets its time (a lower bound on time). Both kernels move the same useful bytes, so the
    ratio of times is the predicted fraction of copy bandwidth.
    """
    def cycles(r: AccessResult) -> tuple[float, float]:
        dram = r.global_sectors * SECTOR_BYTES / hbm_bytes_per_clk_sm
        smem = float(sum(i.wavefronts for i in r.instructions if i.space == "shared"))
        return dram, smem

    d, s = cycles(res)
    dc, sc = cycles(copy)
    t, tc = max(d, s), max(dc, sc)
    return {"dram_cycles": d, "smem_cycles": s, "copy_cycles": tc,
            "fraction_of_copy": tc / t if t else 1.0,
            "bound": "shared memory" if s > d else "DRAM"}


def sectors_needed(elem_bytes: int, lanes: int = WARP) -> int:
    """Sectors a fully coalesced, aligned warp access needs: ceil(lanes x size / 32)."""
    return math.ceil(lanes * elem_bytes / SECTOR_BYTES)
