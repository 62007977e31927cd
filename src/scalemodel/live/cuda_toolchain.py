"""Finding the CUDA toolchain on this machine: nvcc, the include directory, cuda_occupancy.h.

Nothing here needs a GPU. The search order is: $CUDA_HOME / $CUDA_PATH, the directory of the
``nvcc`` on PATH, /usr/local/cuda*, and the ``nvidia-cuda-runtime`` wheel (nvidia/cuda_runtime).
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

__all__ = ["find_nvcc", "cuda_include_dirs", "find_occupancy_header"]


def find_nvcc() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return shutil.which("nvcc")


def cuda_include_dirs() -> list[Path]:
    dirs: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "include")
    nvcc = find_nvcc()
    if nvcc:
        real = Path(nvcc).resolve()
        dirs.append(real.parent.parent / "include")
    dirs += [Path(p) / "include" for p in sorted(glob.glob("/usr/local/cuda*"), reverse=True)]
    for sp in sys.path:
        dirs.append(Path(sp) / "nvidia" / "cuda_runtime" / "include")
    seen: dict[str, Path] = {}
    for d in dirs:
        if d.is_dir():
            seen.setdefault(str(d.resolve()), d)
    return list(seen.values())


def find_occupancy_header() -> Path | None:
    """Path of cuda_occupancy.h, or None when no CUDA toolkit or runtime wheel is present."""
    for d in cuda_include_dirs():
        h = d / "cuda_occupancy.h"
        if h.is_file():
            return h
    return None
