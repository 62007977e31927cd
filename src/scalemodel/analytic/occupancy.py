"""Occupancy of an NVIDIA SM: how many blocks of a kernel fit at once, and which resource stops more.

The rules are those of NVIDIA's occupancy calculator (the host-only header ``cuda_occupancy.h``
shipped with the CUDA toolkit), written here from their description and checked against the
header itself by ``tests/golden/test_gpulab_occupancy_header.py``. For one block size ``T``,
registers per thread ``R`` and shared memory per block ``S`` (static + dynamic), each resource
gives a cap on resident blocks per SM and the smallest cap wins:

* warps: ``floor(max_warps_per_sm / ceil(T / 32))``, and 0 if ``T`` exceeds 1024 threads;
* registers: a warp's registers ``R x 32`` are rounded up to 256; registers are split evenly over
  the 4 SM sub-partitions, so ``floor(floor(regs_per_sm / 4) / regs_per_warp) x 4`` warps fit,
  divided by warps per block; 0 if the block exceeds 64K registers when its warps are rounded
  up to a multiple of 4 (the hardware's check), or if ``R`` exceeds the per-thread limit;
* shared memory: ``S`` plus the driver's per-block reserve (1 KiB from cc 8.0) is rounded up to
  the allocation unit (128 B from cc 8.0, 256 B before); the SM's shared memory is the carveout
  preference rounded up to a legal size, or, if one block does not fit in that, the smallest legal
  size that holds one block; 0 if the block exceeds the per-block (opt-in) limit;
* blocks: the fixed maximum of resident blocks per SM;
* barriers (cc 9.0 and later): named barriers per SM / barriers per block (one by default).

Everything is vectorised over numpy arrays, so a million configurations take a fraction of a
second; :func:`occupancy` wraps one configuration with its derivation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput
from ..specs.sources import cite, load_toml

__all__ = [
    "SMLimits",
    "OccupancyResult",
    "LIMITERS",
    "UNLIMITED",
    "cc_ids",
    "sm_limits",
    "limits_for_gpu",
    "occupancy_arrays",
    "occupancy",
]

UNLIMITED = 2**31 - 1  # what cuda_occupancy.h reports (INT_MAX) for a resource the kernel does not use

# the limiting-factor bits of cuda_occupancy.h (cudaOccLimitingFactor), in its order
LIMITERS: tuple[tuple[str, int], ...] = (
    ("warps", 0x01),
    ("registers", 0x02),
    ("shared_memory", 0x04),
    ("blocks", 0x08),
    ("barriers", 0x10),
)


@dataclass(frozen=True)
class SMLimits:
    """Per-SM limits of one compute capability (bytes, registers, threads)."""

    cc: str
    arch: str
    warp_size: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    regs_per_sm: int
    max_regs_per_block: int
    max_regs_per_thread: int
    reg_alloc_unit: int
    sub_partitions: int
    smem_per_sm_bytes: int
    default_smem_per_block_bytes: int
    max_smem_per_block_bytes: int
    reserved_smem_per_block_bytes: int
    smem_alloc_unit_bytes: int
    smem_carveouts_bytes: tuple[int, ...]
    barrier_slots_per_block_slot: int
    reg_alloc_limit_per_thread: int
    barrier_limit_from_major: int
    example: str = ""
    field_sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def major(self) -> int:
        return int(self.cc.split(".")[0])

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def source_of(self, name: str) -> str:
        key = self.field_sources.get(name) or self.field_sources.get("*") or "cuda-guide-cc-table"
        return cite(key)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "field_sources"}
        d["smem_carveouts_bytes"] = list(self.smem_carveouts_bytes)
        d["max_warps_per_sm"] = self.max_warps_per_sm
        return d


_INT_FIELDS = (
    "warp_size", "max_threads_per_sm", "max_blocks_per_sm", "max_threads_per_block",
    "regs_per_sm", "max_regs_per_block", "max_regs_per_thread", "reg_alloc_unit",
    "sub_partitions", "smem_per_sm_bytes", "default_smem_per_block_bytes",
    "max_smem_per_block_bytes", "reserved_smem_per_block_bytes", "smem_alloc_unit_bytes",
    "barrier_slots_per_block_slot", "reg_alloc_limit_per_thread", "barrier_limit_from_major",
)

# names used by gpus.toml [<id>.sm] -> names here (a GPU's table may override its cc's values)
_GPU_SM_NAMES = {
    "warp_size": "warp_size",
    "max_threads_per_sm": "max_threads_per_sm",
    "max_blocks_per_sm": "max_blocks_per_sm",
    "max_threads_per_block": "max_threads_per_block",
    "regs_per_sm": "regs_per_sm",
    "max_regs_per_block": "max_regs_per_block",
    "max_regs_per_thread": "max_regs_per_thread",
    "reg_alloc_unit": "reg_alloc_unit",
    "smem_per_sm_bytes": "smem_per_sm_bytes",
    "max_smem_per_block_bytes": "max_smem_per_block_bytes",
    "default_smem_per_block_bytes": "default_smem_per_block_bytes",
    "reserved_smem_per_block_bytes": "reserved_smem_per_block_bytes",
    "smem_alloc_unit_bytes": "smem_alloc_unit_bytes",
    "warp_schedulers_per_sm": "sub_partitions",
}


@cache
def _table() -> dict[str, Any]:
    return load_toml("compute_capabilities.toml")


def cc_ids() -> list[str]:
    return list(_table()["cc"])


def _normalise_cc(cc: str | float) -> str:
    text = str(cc).strip().lower().removeprefix("sm_").removeprefix("sm")
    if "." not in text and text.isdigit() and len(text) >= 2:  # sm_90 -> 9.0, sm_120 -> 12.0
        text = f"{text[:-1]}.{text[-1]}"
    return text


def _build(cc: str, overrides: Mapping[str, Any] | None = None, origin: str = "") -> SMLimits:
    t = _table()
    key = _normalise_cc(cc)
    if key not in t["cc"]:
        raise BadInput(f"--cc: unknown compute capability {cc!r}; choose one of "
                       f"{', '.join(cc_ids())}")
    merged: dict[str, Any] = dict(t["defaults"]) | dict(t["cc"][key])
    merged.pop("sources", None)
    srcs = {"*": "cuda-guide-cc-table"} | dict(t["defaults"].get("sources", {}))
    srcs |= dict(t.get("sources", {}))
    for k, v in (overrides or {}).items():
        if k in _GPU_SM_NAMES:
            merged[_GPU_SM_NAMES[k]] = v
            srcs[_GPU_SM_NAMES[k]] = origin or srcs.get(_GPU_SM_NAMES[k], "")
    if overrides and "smem_carveouts_kib" in overrides:
        merged["smem_carveouts_kib"] = overrides["smem_carveouts_kib"]
    vals = {}
    for k in _INT_FIELDS:
        v = merged.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise BadInput(f"cc {key}: field {k!r} must be a whole number >= 0, got {v!r}")
        vals[k] = v
    for k in ("warp_size", "max_threads_per_sm", "max_blocks_per_sm", "regs_per_sm",
              "reg_alloc_unit", "sub_partitions", "smem_per_sm_bytes", "smem_alloc_unit_bytes"):
        if vals[k] <= 0:
            raise BadInput(f"cc {key}: field {k!r} must be positive")
    carve = tuple(sorted(int(x) * 1024 for x in merged["smem_carveouts_kib"]))
    return SMLimits(cc=key, arch=str(merged.get("arch", "")), example=str(merged.get("example", "")),
                    smem_carveouts_bytes=carve, field_sources=srcs, **vals)


def sm_limits(cc: str | float) -> SMLimits:
    """The per-SM limits of a compute capability ('9.0', 'sm_90', 9.0)."""
    return _build(str(cc))


def limits_for_gpu(gpu: Any) -> SMLimits:
    """Limits for a GPUSpec: its compute capability's table, with the GPU's [sm] figures on top."""
    cc = getattr(gpu, "compute_capability", "")
    if _normalise_cc(cc) not in _table()["cc"]:
        raise BadInput(f"--gpu: {gpu.id} has compute capability {cc or 'unknown'!r}; the occupancy "
                       f"model covers NVIDIA cc {', '.join(cc_ids())}")
    key = gpu.field_sources.get("sm", "") if hasattr(gpu, "field_sources") else ""
    return _build(cc, dict(getattr(gpu, "sm", {})), origin=key)


# --- the vectorised calculator -------------------------------------------------------------------


def _ceil_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    return -(-a // b)


def _align_carveout(lim: SMLimits, size: np.ndarray) -> np.ndarray:
    """Round a shared-memory size up to the next legal carveout (-1 where none is big enough)."""
    table = np.asarray(lim.smem_carveouts_bytes, dtype=np.int64)
    idx = np.searchsorted(table, size, side="left")
    out = np.where(idx < table.size, table[np.minimum(idx, table.size - 1)], -1)
    return out


def occupancy_arrays(
    lim: SMLimits,
    threads: Any,
    regs: Any,
    smem: Any,
    carveout: Any = -1,
    barriers: int = 1,
) -> dict[str, np.ndarray]:
    """Resident blocks per SM for arrays of (threads, registers/thread, shared bytes/block).

    ``carveout`` is the shared-memory carveout preference in percent of the SM's maximum
    (-1: none, i.e. the maximum). Returns arrays: ``blocks`` and the per-resource caps
    ``limit_warps``, ``limit_registers``, ``limit_shared_memory``, ``limit_blocks``,
    ``limit_barriers`` (UNLIMITED where a resource is unused), ``limiting_mask`` (bits as in
    cuda_occupancy.h), ``regs_per_block``, ``smem_per_block`` (allocated), ``smem_per_sm``
    (the shared-memory configuration the SM runs with), ``warps_per_block``, ``active_warps``
    and ``occupancy``. Configurations that cannot launch get 0 blocks, as NVIDIA's calculator
    gives them; validation of user input happens in :func:`occupancy`.
    """
    T, R, S, C = np.broadcast_arrays(
        np.asarray(threads, dtype=np.int64), np.asarray(regs, dtype=np.int64),
        np.asarray(smem, dtype=np.int64), np.asarray(carveout, dtype=np.int64))
    ws = lim.warp_size
    wpb = _ceil_div(T, ws)  # warps per block
    wpb_safe = np.maximum(wpb, 1)

    # warps
    lim_warps = np.where(lim.max_threads_per_block < T, 0, lim.max_warps_per_sm // wpb_safe)

    # registers (allocated per warp, in units of reg_alloc_unit, per sub-partition)
    regs_warp = _ceil_div(R * ws, lim.reg_alloc_unit) * lim.reg_alloc_unit
    regs_block = regs_warp * wpb
    regs_hw = regs_warp * (_ceil_div(wpb, lim.sub_partitions) * lim.sub_partitions)
    # cuda_occupancy.h's allocation check (256 for cc >= 7, of which 255 are usable)
    reg_cap = lim.reg_alloc_limit_per_thread
    regs_fit = (regs_hw <= lim.max_regs_per_block) & (regs_block <= lim.max_regs_per_block) & (
        reg_cap >= R)
    warps_per_sub = (lim.regs_per_sm // lim.sub_partitions) // np.maximum(regs_warp, 1)
    lim_regs = np.where(~regs_fit, 0, np.where(
        regs_warp > 0, warps_per_sub * lim.sub_partitions // wpb_safe, UNLIMITED))

    # shared memory
    reserved = lim.reserved_smem_per_block_bytes
    need = S + reserved
    smem_block = _ceil_div(need, lim.smem_alloc_unit_bytes) * lim.smem_alloc_unit_bytes
    per_block_cap = np.where(need > lim.default_smem_per_block_bytes,
                             lim.max_smem_per_block_bytes, lim.default_smem_per_block_bytes)
    per_block_cap = per_block_cap + reserved
    too_big = smem_block > per_block_cap
    pref = np.where(C < 0, lim.smem_per_sm_bytes, (C * lim.smem_per_sm_bytes) // 100)
    pref = _align_carveout(lim, pref)
    smem_sm = np.where(pref >= smem_block, pref, _align_carveout(lim, smem_block))
    lim_smem = np.where(too_big | (smem_sm < 0), 0, np.where(
        smem_block > 0, smem_sm // np.maximum(smem_block, 1), UNLIMITED))

    lim_blocks = np.full_like(T, lim.max_blocks_per_sm)
    blocks = np.minimum(np.minimum(lim_regs, lim_smem), np.minimum(lim_warps, lim_blocks))
    mask = np.zeros_like(T)
    for (_, bit), cap in zip(LIMITERS[:4], (lim_warps, lim_regs, lim_smem, lim_blocks),
                             strict=True):
        mask |= np.where(blocks == cap, bit, 0)
    if lim.major >= lim.barrier_limit_from_major and barriers > 0:
        lim_bar = np.full_like(T, lim.barrier_slots_per_block_slot * lim.max_blocks_per_sm
                               // barriers)
        blocks = np.minimum(blocks, lim_bar)
        mask |= np.where(blocks == lim_bar, 0x10, 0)
    else:
        lim_bar = np.full_like(T, UNLIMITED)
    active_warps = blocks * wpb
    return {
        "blocks": blocks,
        "limit_warps": lim_warps,
        "limit_registers": lim_regs,
        "limit_shared_memory": lim_smem,
        "limit_blocks": lim_blocks,
        "limit_barriers": lim_bar,
        "limiting_mask": mask,
        "regs_per_block": regs_block,
        "smem_per_block": smem_block,
        "smem_per_sm": smem_sm,
        "warps_per_block": wpb,
        "active_warps": active_warps,
        "occupancy": active_warps / lim.max_warps_per_sm,
    }


def mask_names(mask: int) -> list[str]:
    return [name for name, bit in LIMITERS if mask & bit]


# --- one configuration, with its derivation ------------------------------------------------------


@dataclass(frozen=True)
class OccupancyResult:
    cc: str
    threads_per_block: int
    regs_per_thread: int
    smem_per_block_bytes: int
    carveout_percent: int
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float
    limiter: str
    limiters: tuple[str, ...]
    block_limits: Mapping[str, int | None]
    regs_allocated_per_block: int
    smem_allocated_per_block_bytes: int
    smem_config_per_sm_bytes: int
    warps_per_block: int
    reason: str
    derivation: Derivation

    def to_dict(self) -> dict[str, Any]:
        return {
            "cc": self.cc,
            "threads_per_block": self.threads_per_block,
            "regs_per_thread": self.regs_per_thread,
            "smem_per_block_bytes": self.smem_per_block_bytes,
            "carveout_percent": self.carveout_percent,
            "active_blocks_per_sm": self.active_blocks_per_sm,
            "active_warps_per_sm": self.active_warps_per_sm,
            "max_warps_per_sm": self.max_warps_per_sm,
            "occupancy": self.occupancy,
            "limiter": self.limiter,
            "limiters": list(self.limiters),
            "block_limits": dict(self.block_limits),
            "warps_per_block": self.warps_per_block,
            "regs_allocated_per_block": self.regs_allocated_per_block,
            "smem_allocated_per_block_bytes": self.smem_allocated_per_block_bytes,
            "smem_config_per_sm_bytes": self.smem_config_per_sm_bytes,
            "reason": self.reason,
            "derivation": self.derivation.to_dict(),
        }


def validate(lim: SMLimits, threads: int, regs: int, smem: int, carveout: int = -1) -> None:
    """BadInput for a request no kernel can make (the calculator itself would return 0)."""
    if not 1 <= threads <= lim.max_threads_per_block:
        raise BadInput(f"--threads: a block has 1..{lim.max_threads_per_block} threads on cc "
                       f"{lim.cc}, got {threads}")
    if not 0 <= regs <= lim.max_regs_per_thread:
        raise BadInput(f"--regs: registers per thread must be 0..{lim.max_regs_per_thread}, "
                       f"got {regs}")
    if not 0 <= smem <= lim.max_smem_per_block_bytes:
        raise BadInput(f"--smem: shared memory per block must be 0..{lim.max_smem_per_block_bytes}"
                       f" bytes on cc {lim.cc} (opt-in limit), got {smem}")
    if not (carveout == -1 or 0 <= carveout <= 100):
        raise BadInput(f"--carveout: a percentage 0..100 (or -1 for the default), got {carveout}")


def occupancy(lim: SMLimits, threads: int, regs: int, smem: int = 0,
              carveout: int = -1) -> OccupancyResult:
    """Occupancy of one configuration, with the worked derivation; BadInput on impossible input."""
    validate(lim, threads, regs, smem, carveout)
    a = {k: int(v[0]) for k, v in occupancy_arrays(lim, [threads], [regs], [smem], [carveout]).items()
         if k != "occupancy"}
    d = Derivation(f"occupancy on cc {lim.cc} ({lim.arch})")
    d.given("threads per block", "T", threads, "thread")
    d.given("registers per thread", "R", regs, "reg", note="from ptxas -v or Nsight Compute")
    d.given("shared memory per block (static + dynamic)", "S", smem, "B")
    d.given("warp size", "w", lim.warp_size, "thread", source=lim.source_of("warp_size"))
    d.given("max warps per SM", "W_sm", lim.max_warps_per_sm, "warp",
            source=lim.source_of("max_threads_per_sm"))
    d.given("max resident blocks per SM", "B_max", lim.max_blocks_per_sm, "block",
            source=lim.source_of("max_blocks_per_sm"))
    d.calc("warps per block", "W_b", "ceil(T / w)", "warp", check=a["warps_per_block"])
    d.calc("block cap from warp slots", "B_warps", "floor(W_sm / W_b)", "block",
           check=a["limit_warps"])
    # registers
    d.given("registers per SM", "RF", lim.regs_per_sm, "reg", source=lim.source_of("regs_per_sm"))
    d.given("register allocation unit per warp", "g_r", lim.reg_alloc_unit, "reg",
            source=lim.source_of("reg_alloc_unit"))
    d.given("SM sub-partitions (register banks, warp schedulers)", "P", lim.sub_partitions, "1",
            source=lim.source_of("sub_partitions"))
    if regs > 0:
        d.calc("registers per warp, rounded up", "R_w", "ceil(R * w / g_r) * g_r", "reg")
        if a["limit_registers"] > 0:
            d.calc("warps per sub-partition by registers", "W_p", "floor(floor(RF / P) / R_w)",
                   "warp")
            d.calc("block cap from registers", "B_regs", "floor(W_p * P / W_b)", "block",
                   check=a["limit_registers"])
        else:
            d.note("The block's registers (warps rounded up to a multiple of the sub-partitions) "
                   f"exceed {lim.max_regs_per_block} per block: it cannot launch.")
    else:
        d.note("No registers: the register file sets no cap.")
    # shared memory
    d.given("driver-reserved shared memory per block", "S_r", lim.reserved_smem_per_block_bytes,
            "B", source=lim.source_of("reserved_smem_per_block_bytes"))
    d.given("shared-memory allocation unit", "g_s", lim.smem_alloc_unit_bytes, "B",
            source=lim.source_of("smem_alloc_unit_bytes"))
    d.calc("shared memory allocated per block", "S_b", "ceil((S + S_r) / g_s) * g_s", "B",
           check=a["smem_per_block"])
    legal = ", ".join(str(c // 1024) for c in lim.smem_carveouts_bytes)
    d.given("shared memory configured per SM", "S_sm", a["smem_per_sm"], "B",
            source=lim.source_of("smem_carveouts_kib"),
            note=(f"carveout {'default (maximum)' if carveout < 0 else f'{carveout}%'} rounded up "
                  f"to a legal size ({legal} KiB), or the smallest legal size holding one block"))
    if a["smem_per_block"] > 0:
        d.calc("block cap from shared memory", "B_smem", "floor(S_sm / S_b)", "block",
               check=a["limit_shared_memory"])
    else:
        d.note("No shared memory per block: shared memory sets no cap.")
    caps = ["B_warps", "B_max"] + [c for c in ("B_smem", "B_regs") if c in d.env]
    if a["blocks"] > 0:
        if a["limit_barriers"] < min(d.env[c] for c in caps):  # pragma: no cover - barriers=1
            d.given("block cap from barriers", "B_bar", a["limit_barriers"], "block")
            caps.append("B_bar")
        d.calc("resident blocks per SM", "B", f"min({', '.join(caps)})", "block", check=a["blocks"])
    else:
        d.given("resident blocks per SM", "B", 0, "block", note="the configuration cannot launch")
    d.calc("resident warps per SM", "W_act", "B * W_b", "warp", check=a["active_warps"])
    occ = d.calc("occupancy", "occ", "W_act / W_sm", "1")
    names = mask_names(a["limiting_mask"])
    limiter = names[0] if names else "none"
    reason = ""
    if a["blocks"] == 0:
        if a["limit_registers"] == 0:
            reason = (f"registers: {a['regs_per_block']} allocated per block exceed the "
                      f"{lim.max_regs_per_block} available")
        elif a["limit_shared_memory"] == 0:
            reason = "shared memory: the block needs more than one SM can give it"
        else:
            reason = f"{limiter}: the block cannot be resident"
    limits = {
        "warps": a["limit_warps"],
        "registers": None if a["limit_registers"] == UNLIMITED else a["limit_registers"],
        "shared_memory": None if a["limit_shared_memory"] == UNLIMITED
        else a["limit_shared_memory"],
        "blocks": a["limit_blocks"],
        "barriers": None if a["limit_barriers"] == UNLIMITED else a["limit_barriers"],
    }
    return OccupancyResult(
        cc=lim.cc, threads_per_block=threads, regs_per_thread=regs, smem_per_block_bytes=smem,
        carveout_percent=carveout, active_blocks_per_sm=a["blocks"],
        active_warps_per_sm=a["active_warps"], max_warps_per_sm=lim.max_warps_per_sm,
        occupancy=float(occ), limiter=limiter, limiters=tuple(names), block_limits=limits,
        regs_allocated_per_block=a["regs_per_block"],
        smem_allocated_per_block_bytes=a["smem_per_block"],
        smem_config_per_sm_bytes=a["smem_per_sm"], warps_per_block=a["warps_per_block"],
        reason=reason, derivation=d)
