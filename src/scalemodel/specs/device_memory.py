"""Device memory as serving engines read it (specs/data/device_memory.toml), with its source."""

from __future__ import annotations

from functools import cache
from typing import Any

from .sources import cite, load_toml


@cache
def _table() -> dict[str, Any]:
    return load_toml("device_memory.toml")


def engine_visible_bytes(gpu: Any) -> tuple[float, str]:
    """(bytes, source) of the total an engine reads on ``gpu``; the GPU spec's memory when the
    table has no entry for it."""
    t = _table().get(getattr(gpu, "id", "")) or {}
    if "total_bytes" in t:
        return float(t["total_bytes"]), cite(t["source"]) + (f"; {t['note']}" if t.get("note") else "")
    return float(gpu.hbm_bytes), (gpu.source_of("hbm_bytes") + "; no engine-read total recorded, "
                                  "the spec's memory is used")


def nvls_bytes(gpu: Any, tp: int) -> tuple[float, str]:
    """(bytes, source) one NCCL communicator of ``tp`` GPUs maps for NVLS on each of them; 0 where
    the GPU has no NVLS entry or the group is too small for NCCL to use it."""
    t = (_table().get(getattr(gpu, "id", "")) or {}).get("nccl")
    if not t or tp < int(t.get("nvls_min_ranks", 3)):
        return 0.0, ""
    return float(t["nvls_bytes_per_rank"]) * tp, cite(t["source"])
