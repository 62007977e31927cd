"""ptxas -v parsing, and (where nvcc exists) a real compile of the transpose kernels."""

from __future__ import annotations

import pytest

from scalemodel.live.cuda_build import compile_all, parse_ptxas
from scalemodel.live.cuda_toolchain import find_nvcc

SAMPLE = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'transpose_padded' for 'sm_90'
ptxas info    : Function properties for transpose_padded
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 28 registers, used 1 barriers, 4224 bytes smem
ptxas info    : Compiling entry function 'copy_kernel' for 'sm_90'
ptxas info    : Function properties for copy_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers
"""


def test_parse_ptxas():
    a, b = parse_ptxas(SAMPLE, "t.cu")
    assert (a.kernel, a.registers, a.smem_bytes, a.barriers) == ("transpose_padded", 28, 4224, 1)
    assert (a.spill_store_bytes, a.spill_load_bytes) == (8, 4)
    assert (b.kernel, b.registers, b.smem_bytes) == ("copy_kernel", 24, 0)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_compile_transposes_with_nvcc():
    infos = {i.kernel: i for i in compile_all("sm_90", files=("transpose.cu",))}
    assert set(infos) == {"copy_kernel", "transpose_naive", "transpose_tiled",
                          "transpose_padded", "transpose_swizzled"}
    assert infos["transpose_padded"].smem_bytes == 32 * 33 * 4
    assert infos["transpose_tiled"].smem_bytes == 32 * 32 * 4
