"""Compile the lab's CUDA kernels with nvcc and read what ptxas reports (no GPU needed).

``nvcc -cubin -Xptxas -v`` prints, per kernel, the registers, shared memory, barriers and spill
bytes the compiler settled on; those feed the occupancy calculator with the block size each
kernel is launched with.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import BadInput
from .cuda_toolchain import find_nvcc

__all__ = ["KERNEL_FILES", "LAUNCH_THREADS", "PtxasInfo", "cuda_source_dir", "parse_ptxas",
           "compile_all"]

KERNEL_FILES = ("transpose.cu", "divergence.cu", "latency.cu", "bandwidth.cu")
# threads per block each kernel is launched with by the bench
LAUNCH_THREADS = {
    "copy_kernel": 256, "transpose_naive": 256, "transpose_tiled": 256, "transpose_padded": 256,
    "transpose_swizzled": 256, "branch_warp_uniform": 256, "branch_first_warp": 64,
    "branch_odd_even": 256, "loop_lane_trips": 256, "chase_global": 1, "chase_l1": 1,
    "chase_shared": 256, "copy_vec4": 256, "read_vec4": 256,
}


@dataclass(frozen=True)
class PtxasInfo:
    kernel: str
    file: str
    arch: str
    registers: int
    smem_bytes: int
    barriers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def cuda_source_dir() -> Path:
    return Path(str(resources.files("scalemodel.live").joinpath("cuda")))


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARS = re.compile(r"used (\d+) barriers")


def parse_ptxas(text: str, file: str = "") -> list[PtxasInfo]:
    """Parse ``ptxas -v`` output into one record per kernel (kernels without output are absent)."""
    out: list[PtxasInfo] = []
    cur: dict[str, Any] | None = None

    def flush() -> None:
        if cur is not None and "registers" in cur:
            out.append(PtxasInfo(kernel=cur["kernel"], file=file, arch=cur["arch"],
                                 registers=cur["registers"], smem_bytes=cur.get("smem", 0),
                                 barriers=cur.get("barriers", 0), stack_bytes=cur.get("stack", 0),
                                 spill_store_bytes=cur.get("st", 0),
                                 spill_load_bytes=cur.get("ld", 0)))

    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            flush()
            cur = {"kernel": m.group(1), "arch": m.group(2)}
            continue
        if cur is None:
            continue
        m = _FRAME.search(line)
        if m:
            cur["stack"], cur["st"], cur["ld"] = (int(x) for x in m.groups())
        m = _USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            if (s := _SMEM.search(line)) is not None:
                cur["smem"] = int(s.group(1))
            if (b := _BARS.search(line)) is not None:
                cur["barriers"] = int(b.group(1))
    flush()
    return out


def compile_all(arch: str = "sm_90", files: tuple[str, ...] = KERNEL_FILES,
                timeout_s: float = 120.0) -> list[PtxasInfo]:
    """Compile each kernel file to a cubin for ``arch`` and return ptxas's per-kernel report."""
    if not re.fullmatch(r"sm_\d{2,3}a?", arch):
        raise BadInput(f"--arch: expected sm_XY such as sm_80, sm_90, sm_100, got {arch!r}")
    nvcc = find_nvcc()
    if nvcc is None:
        raise BadInput("gpu build: nvcc not found (install the CUDA toolkit or set CUDA_HOME)")
    infos: list[PtxasInfo] = []
    src = cuda_source_dir()
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            cmd = [nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o",
                   str(Path(tmp) / (Path(f).stem + ".cubin")), str(src / f)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise BadInput(f"gpu build: nvcc timed out on {f}") from None
            if p.returncode != 0:
                first = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
                raise BadInput(f"gpu build: nvcc failed on {f} for {arch}: {first}")
            infos += parse_ptxas(p.stdout + "\n" + p.stderr, file=f)
    return infos
