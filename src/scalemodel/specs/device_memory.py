"""Device memory as serving engines read it (specs/data/device_memory.toml), with its source."""

from __future__ import annotations

import math
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


def nccl_table(version: str) -> dict[str, Any] | None:
    """NCCL's buffer sizes at ``version`` (device_memory.toml ["nccl-VERSION"]), or None."""
    return _table().get(f"nccl-{version}")


def nccl_kernel_stack_bytes(gpu: Any, version: str) -> tuple[float, str] | None:
    """(bytes, source): the per-thread stack NCCL ``version``'s collective kernels need on
    ``gpu``'s compute capability (the least any collective reaches), or None where not read."""
    t = nccl_table(version) or {}
    v = (t.get("kernel_stack_bytes") or {}).get(str(getattr(gpu, "compute_capability", "")))
    if v is None:
        return None
    return float(v), cite(t["kernel_stack_source"])


def nccl_device_code_bytes(gpu: Any, version: str) -> tuple[float, str] | None:
    """(bytes, source): device memory NCCL ``version``'s kernel module takes once loaded on
    ``gpu``'s compute capability (once per process), or None where not read."""
    t = nccl_table(version) or {}
    v = (t.get("device_code_bytes") or {}).get(str(getattr(gpu, "compute_capability", "")))
    if v is None:
        return None
    return float(v), cite(t["device_code_source"])


def torch_cublas_workspace_bytes(gpu: Any, version: str) -> tuple[float, str] | None:
    """(bytes, source): the cuBLAS workspace PyTorch ``version`` takes from its caching allocator
    for one (handle, stream) on ``gpu``'s compute capability, or None where the version or the
    architecture is not recorded (device_memory.toml ["torch-VERSION"])."""
    t = _table().get(f"torch-{version}") or {}
    v = (t.get("cublas_workspace_bytes") or {}).get(str(getattr(gpu, "compute_capability", "")))
    if v is None:
        return None
    return float(v), cite(t["cublas_workspace_source"])


def context_stack_bytes() -> tuple[float, str]:
    """(bytes, source): the per-thread local memory a new CUDA context is sized for (the default
    stack limit); the context holds it for every thread the GPU can keep resident."""
    t = _table()["cuda_context"]
    return float(t["stack_bytes_per_thread"]), cite(t["source"])


def resident_threads(gpu: Any) -> tuple[float, str] | None:
    """(threads, source): SMs x max threads per SM, the count a context's local memory is sized
    for; None where the GPU spec gives either figure as unknown."""
    n = int(getattr(gpu, "sm_count", 0) or 0)
    per = int((getattr(gpu, "sm", None) or {}).get("max_threads_per_sm", 0) or 0)
    if not n or not per:
        return None
    return float(n * per), gpu.source_of("sm_count")


def nccl_versions() -> list[str]:
    """The NCCL versions whose buffer sizes are recorded."""
    return [k.removeprefix("nccl-") for k in _table() if k.startswith("nccl-")]


def _granules(nbytes: float, align: float) -> float:
    return math.ceil(nbytes / align) * align


def nccl_comm_bytes(gpu: Any, tp: int, version: str, eager: bool) -> tuple[dict[str, float], str] | None:
    """Device memory one NCCL communicator of ``tp`` GPUs of one node holds on each of them, by
    part: {"channels", "pairs", "pair", "nvls"} (bytes), with the sources; None where the version
    or the GPU's channel count is not recorded, or where NCCL connects lazily (not modelled).

    A P2P connection pair (one send and one receive side, each its own allocation in 2 MiB
    granules; the GPU's ``p2p_read`` says which side holds the Simple buffer) per channel for the ring, and one more for the intra-node tree chain on a GPU inside
    the chain (its other neighbour; the chain follows the ring order, so its first pair is the
    ring's); NVLS: nvls_channels x 2 x chunk x steps per head, one head per GPU, plus the credits,
    for more than two GPUs where the GPU records NVLS."""
    t = nccl_table(version)
    g = (_table().get(getattr(gpu, "id", "")) or {}).get("nccl") or {}
    if not t or "coll_channels" not in g or not eager:
        return None
    a = float(t["alloc_align_bytes"])
    h = float(t["header_bytes"])
    if g.get("p2p_read", False):  # the sender holds Simple, the receiver LL and LL128
        pair = (_granules(t["simple_bytes"] + h, a)
                + _granules(t["ll_bytes"] + t["ll128_bytes"] + h, a))
    else:  # P2P write: the receiver holds all three, the sender its header
        pair = _granules(h, a) + _granules(t["simple_bytes"] + t["ll_bytes"] + t["ll128_bytes"] + h, a)
    pairs = 2.0 if tp >= 3 else 1.0
    nvls = 0.0
    if tp >= int(g.get("nvls_min_ranks", 3)) and "nvls_bytes_per_rank" in g:
        nvls = (_granules(float(t["nvls_channels"]) * 2 * t["nvls_chunk_bytes"] * t["nccl_steps"]
                          * tp, a) + float(t["nvls_credit_bytes"]))
    parts = {"channels": float(g["coll_channels"]), "pairs": pairs, "pair": pair, "nvls": nvls}
    src = f"{cite(t['source'])}; {cite(g['coll_channels_source'])}"
    if g.get("p2p_buffers_check_source"):
        src += f"; check of the pair's two buffers: {cite(g['p2p_buffers_check_source'])}"
    return parts, src
