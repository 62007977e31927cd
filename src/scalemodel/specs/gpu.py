"""GPU and link specifications: frozen records loaded from gpus.toml / links.toml or a user file.

A GPU's figures all carry a source: the GPU's default ``source`` key, or a per-field override in
its ``[id.sources]`` table (dotted paths such as ``"sm.regs_per_sm"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import BadInput, close_matches
from .sources import cite, is_user_file, load_toml, read_user_toml

_REQUIRED = ("name", "hbm_bytes", "hbm_bytes_per_s", "flop_per_s")
_POSITIVE = ("hbm_bytes", "hbm_bytes_per_s", "sm_count", "boost_clock_hz", "l2_bytes",
             "peak_clock_hz", "sustained_clock_hz")


@dataclass(frozen=True)
class GPUSpec:
    id: str
    name: str
    hbm_bytes: float
    hbm_bytes_per_s: float
    flop_per_s: Mapping[str, float]
    vendor: str = ""
    arch: str = ""
    compute_capability: str = ""
    sm_count: int = 0
    boost_clock_hz: float = 0.0
    peak_clock_hz: float = 0.0  # the clock the datasheet's dense tensor peaks are quoted at
    sustained_clock_hz: float = 0.0  # the clock held under sustained dense math at the power limit
    # sustained / short-burst throughput of large dense GEMMs, measured by one tool on this GPU or
    # one of the same die (0 = not measured; the clock ratio above is used instead)
    sustained_gemm_ratio: float = 0.0
    # short-burst bf16 GEMM rate over the dense bf16 peak at the best shape of a shape search
    # (the shape-free GEMM ceiling), measured on this GPU or one of the same die (0 = not
    # measured: planner.toml [gemm]'s anchor ceiling is used)
    gemm_burst_efficiency: float = 0.0
    # fp8 GEMM efficiency over bf16 GEMM efficiency (each as a fraction of its own dense peak),
    # measured by one tool on this GPU or one of the same die (0 = not measured: 1 assumed)
    fp8_gemm_ratio: float = 0.0
    # NVFP4 (block-scaled fp4) GEMM efficiency over bf16 GEMM efficiency, each against its own
    # dense peak, measured on this GPU (0 = not measured: 1 assumed)
    fp4_gemm_ratio: float = 0.0
    l2_bytes: float = 0.0
    tdp_w: float = 0.0
    sm: Mapping[str, Any] = field(default_factory=dict)
    interconnect: Mapping[str, Any] = field(default_factory=dict)
    source_key: str = ""
    field_sources: Mapping[str, str] = field(default_factory=dict)
    date: str = ""
    notes: str = ""
    origin: str = "bundled"

    def peak_flop_per_s(self, dtype: str) -> float:
        """Dense peak rate for a precision; BadInput if the GPU has no such path."""
        key = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype, dtype)
        if key not in self.flop_per_s:
            raise BadInput(
                f"--dtype: {self.id} has no {dtype} peak in its spec; it lists "
                f"{', '.join(self.flop_per_s)}"
            )
        return float(self.flop_per_s[key])

    def source_of(self, field_path: str) -> str:
        """Citation for one figure, e.g. source_of('flop_per_s.bf16')."""
        parts = field_path.split(".")
        key = None
        for n in range(len(parts), 0, -1):  # longest matching prefix wins
            key = self.field_sources.get(".".join(parts[:n]))
            if key:
                break
        key = key or self.source_key
        return cite(key) if key else self.origin

    @property
    def sustained_fraction(self) -> float:
        """What a long, power-saturated run of dense GEMMs keeps of a short burst's rate: the
        measured ``sustained_gemm_ratio`` where the GPU has one, else the clock held at the power
        limit over the clock the peak is quoted at (sustained_clock_hz / peak_clock_hz); 1 when
        neither is known."""
        if self.sustained_gemm_ratio:
            return self.sustained_gemm_ratio
        if self.peak_clock_hz and self.sustained_clock_hz:
            return min(1.0, self.sustained_clock_hz / self.peak_clock_hz)
        return 1.0

    def gemm_dtype_factor(self, dtype: str) -> float:
        """How much of the bf16 GEMM efficiency a GEMM in ``dtype`` reaches, each against its own
        dense peak: ``fp8_gemm_ratio`` for fp8 and ``fp4_gemm_ratio`` for fp4 where measured,
        else 1."""
        if dtype == "fp8" and self.fp8_gemm_ratio:
            return self.fp8_gemm_ratio
        if dtype == "fp4" and self.fp4_gemm_ratio:
            return self.fp4_gemm_ratio
        return 1.0

    @property
    def sustained_basis(self) -> str:
        """Which figure sustained_fraction comes from: 'gemm' (measured ratio), 'clock' or ''."""
        if self.sustained_gemm_ratio:
            return "gemm"
        if self.peak_clock_hz and self.sustained_clock_hz and self.sustained_fraction < 1.0:
            return "clock"
        return ""

    @property
    def scale_up_bytes_per_s(self) -> float:
        """Per-GPU scale-up (NVLink-class) bandwidth, one direction; 0 when the GPU has none."""
        return float(self.interconnect.get("scale_up_bytes_per_s_per_direction", 0.0))


def _build_gpu(gid: str, t: Mapping[str, Any], origin: str) -> GPUSpec:
    for k in _REQUIRED:
        if k not in t:
            raise BadInput(f"GPU {gid!r} ({origin}): missing field {k!r}")
    for k in _POSITIVE:
        if k in t and not (isinstance(t[k], int | float) and t[k] > 0):
            raise BadInput(f"GPU {gid!r} ({origin}): field {k!r} must be a positive number")
    for k, what in (("sustained_gemm_ratio", "sustained over short-burst GEMM throughput"),
                    ("gemm_burst_efficiency", "burst bf16 GEMM rate over the dense bf16 peak"),
                    ("fp8_gemm_ratio", "fp8 over bf16 GEMM efficiency"),
                    ("fp4_gemm_ratio", "fp4 over bf16 GEMM efficiency")):
        r = t.get(k, 0.0)
        if k in t and not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
            raise BadInput(f"GPU {gid!r} ({origin}): field {k!r} must be in (0, 1] ({what}), "
                           f"got {r!r}")
    flops = t["flop_per_s"]
    if not isinstance(flops, dict) or not flops:
        raise BadInput(f"GPU {gid!r} ({origin}): flop_per_s must be a table such as bf16 = 989.4e12")
    for k, v in flops.items():
        if not (isinstance(v, int | float) and v > 0):
            raise BadInput(f"GPU {gid!r} ({origin}): flop_per_s.{k} must be a positive number")
    ic = t.get("interconnect", {})
    if not isinstance(ic, dict):
        raise BadInput(f"GPU {gid!r} ({origin}): interconnect must be a table")
    for k, v in ic.items():
        if k.endswith("_link"):
            if not isinstance(v, str) or not v:
                raise BadInput(f"GPU {gid!r} ({origin}): interconnect.{k} must be a link id "
                               f"such as \"ndr-400\", got {v!r}")
        elif k == "pcie_host":
            if not isinstance(v, str) or not v:
                raise BadInput(f"GPU {gid!r} ({origin}): interconnect.pcie_host must be a PCIe "
                               f"host id of collectives.toml [pcie_hosts], got {v!r}")
        elif k == "nics_per_gpu":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BadInput(f"GPU {gid!r} ({origin}): interconnect.nics_per_gpu must be a "
                               f"whole number of at least 1, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise BadInput(f"GPU {gid!r} ({origin}): interconnect.{k} must be a non-negative "
                           f"number, got {v!r}")
    return GPUSpec(
        id=gid,
        name=t["name"],
        hbm_bytes=float(t["hbm_bytes"]),
        hbm_bytes_per_s=float(t["hbm_bytes_per_s"]),
        flop_per_s=MappingProxyType({k: float(v) for k, v in flops.items()}),
        vendor=t.get("vendor", ""),
        arch=t.get("arch", ""),
        compute_capability=str(t.get("compute_capability", "")),
        sm_count=int(t.get("sm_count", 0)),
        boost_clock_hz=float(t.get("boost_clock_hz", 0.0)),
        peak_clock_hz=float(t.get("peak_clock_hz", 0.0)),
        sustained_clock_hz=float(t.get("sustained_clock_hz", 0.0)),
        sustained_gemm_ratio=float(t.get("sustained_gemm_ratio", 0.0)),
        gemm_burst_efficiency=float(t.get("gemm_burst_efficiency", 0.0)),
        fp8_gemm_ratio=float(t.get("fp8_gemm_ratio", 0.0)),
        fp4_gemm_ratio=float(t.get("fp4_gemm_ratio", 0.0)),
        l2_bytes=float(t.get("l2_bytes", 0.0)),
        tdp_w=float(t.get("tdp_w", 0.0)),
        sm=MappingProxyType(dict(t.get("sm", {}))),
        interconnect=MappingProxyType(dict(t.get("interconnect", {}))),
        source_key=t.get("source", ""),
        field_sources=MappingProxyType(dict(t.get("sources", {}))),
        date=str(t.get("date", "")),
        notes=t.get("notes", ""),
        origin=origin,
    )


_TABLES = ("flop_per_s", "sm", "interconnect")  # merged key by key under ``extends``


def _extended(gid: str, t: Mapping[str, Any], tables: Mapping[str, Mapping[str, Any]],
              origin: str, seen: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """A GPU entry with ``extends = "other-id"`` resolved: the other entry's fields, then this
    entry's over them (``flop_per_s``, ``sm`` and ``interconnect`` merged key by key). A field
    this entry sets is cited by this entry (its ``sources`` row, else its ``source``), never by
    the parent's row for that field."""
    base_id = t.get("extends")
    if base_id is None:
        return t
    if not isinstance(base_id, str) or base_id.lower() not in tables:
        raise BadInput(f"GPU {gid!r} ({origin}): extends unknown GPU {base_id!r}")
    if base_id.lower() in seen or base_id.lower() == gid:
        raise BadInput(f"GPU {gid!r} ({origin}): extends itself through "
                       f"{' -> '.join((*seen, gid, base_id))}")
    base = _extended(base_id.lower(), tables[base_id.lower()], tables, origin, (*seen, gid))
    out: dict[str, Any] = {k: v for k, v in base.items() if k not in ("extends", "sources")}
    own_sources = dict(t.get("sources", {}))
    sources = dict(base.get("sources", {}))
    for k in base:  # inherited figures keep the parent's citation, even its fallback one
        inherited = k not in t or (k in _TABLES and isinstance(t[k], dict))
        if inherited and k not in sources and base.get("source"):
            sources[k] = base["source"]
    for k, v in t.items():
        if k in ("extends", "sources"):
            continue
        if k in _TABLES and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
            set_paths = [f"{k}.{sub}" for sub in v]
        else:
            out[k] = v
            set_paths = [k]
        for path in set_paths:
            if path not in own_sources:
                sources.pop(path, None)
                own_sources[path] = t.get("source", "")
    sources.update({k: v for k, v in own_sources.items() if v})
    out["sources"] = sources
    return out


@cache
def _bundled_gpus() -> dict[str, Mapping[str, Any]]:
    raw = load_toml("gpus.toml")
    return {gid: _extended(gid, t, raw, "bundled gpus.toml") if isinstance(t, dict) else t
            for gid, t in raw.items()}


def gpu_ids() -> list[str]:
    return list(_bundled_gpus())


def get_gpu(name: str) -> GPUSpec:
    """A bundled GPU by id (``h100-sxm``) or a user TOML file by path (``./my_gpu.toml``)."""
    # a bundled id wins over a stray file of the same name in the working directory
    if name.lower() not in _bundled_gpus() and (name.endswith(".toml") or is_user_file(name)):
        data = read_user_toml(name, "--gpu")
        if "name" not in data and len(data) == 1:  # one table: [my-gpu] ...
            ((gid, t),) = data.items()
        else:
            gid, t = data.get("id", Path(name).stem), data
        if not isinstance(t, dict):
            raise BadInput(f"--gpu: {name} must hold one GPU table")
        t = _extended(str(gid).lower(), t, _bundled_gpus(), f"user file {name}")
        return _build_gpu(gid, t, origin=f"user file {name}")
    table = _bundled_gpus().get(name.lower())
    if table is None:
        hint = close_matches(name.lower(), gpu_ids()) or ", ".join(gpu_ids())
        raise BadInput(f"--gpu: unknown GPU {name[:80]!r}; did you mean: {hint}? (or pass a .toml path)")
    return _build_gpu(name.lower(), table, origin="bundled gpus.toml")


# --- links ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkSpec:
    id: str
    name: str
    kind: str
    bytes_per_s_per_direction: float
    latency_s: float
    source_key: str = ""
    field_sources: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    notes: str = ""

    @property
    def bytes_per_s_bidirectional(self) -> float:
        return float(self.extra.get("bytes_per_s_bidirectional", 2 * self.bytes_per_s_per_direction))

    def source_of(self, field_path: str) -> str:
        key = self.field_sources.get(field_path, self.source_key)
        return cite(key) if key else "links.toml"


@cache
def _bundled_links() -> dict[str, Mapping[str, Any]]:
    return load_toml("links.toml")


def link_ids() -> list[str]:
    return list(_bundled_links())


def get_link(name: str) -> LinkSpec:
    t = _bundled_links().get(name.lower())
    if t is None:
        hint = close_matches(name.lower(), link_ids()) or ", ".join(link_ids())
        raise BadInput(f"--link: unknown link {name!r}; did you mean: {hint}?")
    for k in ("name", "bytes_per_s_per_direction", "latency_s"):
        if k not in t:
            raise BadInput(f"link {name!r}: missing field {k!r}")  # pragma: no cover
    known = {"name", "kind", "bytes_per_s_per_direction", "latency_s", "source", "sources", "notes"}
    return LinkSpec(
        id=name.lower(),
        name=t["name"],
        kind=t.get("kind", ""),
        bytes_per_s_per_direction=float(t["bytes_per_s_per_direction"]),
        latency_s=float(t["latency_s"]),
        source_key=t.get("source", ""),
        field_sources=MappingProxyType(dict(t.get("sources", {}))),
        extra=MappingProxyType({k: v for k, v in t.items() if k not in known}),
        notes=t.get("notes", ""),
    )
