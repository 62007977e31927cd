"""Occupancy agrees exactly with NVIDIA's own calculator, cuda_occupancy.h.

Source of truth: the host-only header cuda_occupancy.h of the CUDA toolkit (found under the CUDA
include directory or in the nvidia-cuda-runtime wheel). A tiny C++ program is built against it
with g++ (no GPU, no runtime library) and fed random configurations; our vectorised engine must
give the same resident blocks per SM and the same limiting-factor bits for every one.

The device properties given to the header are typed in below from the CUDA Programming Guide's
per-compute-capability table (what cudaGetDeviceProperties reports), independently of our
compute_capabilities.toml, so the data file is checked too.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from scalemodel.analytic.occupancy import occupancy_arrays, sm_limits
from scalemodel.live.cuda_toolchain import find_occupancy_header

# cc: (maxThreadsPerSM, sharedMemPerSM, sharedMemPerBlockOptin, reservedSharedMemPerBlock)
DEVICE_PROPS = {
    "7.0": (2048, 96 * 1024, 96 * 1024, 0),
    "7.5": (1024, 64 * 1024, 64 * 1024, 0),
    "8.0": (2048, 164 * 1024, 163 * 1024, 1024),
    "8.6": (1536, 100 * 1024, 99 * 1024, 1024),
    "8.9": (1536, 100 * 1024, 99 * 1024, 1024),
    "9.0": (2048, 228 * 1024, 227 * 1024, 1024),
    "10.0": (2048, 228 * 1024, 227 * 1024, 1024),
    "12.0": (1536, 100 * 1024, 99 * 1024, 1024),
}
N_PER_ARCH = 10_000

HARNESS = r"""
#include <cstdio>
#include <cuda_occupancy.h>
int main() {
    int major, minor, tpsm, threads, regs, carve; long smem, smem_sm, optin, reserved;
    while (std::scanf("%d %d %d %ld %ld %ld %d %d %ld %d", &major, &minor, &tpsm, &smem_sm,
                      &optin, &reserved, &threads, &regs, &smem, &carve) == 10) {
        cudaOccDeviceProp p;
        p.computeMajor = major; p.computeMinor = minor;
        p.maxThreadsPerBlock = 1024; p.maxThreadsPerMultiprocessor = tpsm;
        p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536; p.warpSize = 32;
        p.sharedMemPerBlock = 49152; p.sharedMemPerMultiprocessor = (size_t)smem_sm;
        p.numSms = 100; p.sharedMemPerBlockOptin = (size_t)optin;
        p.reservedSharedMemPerBlock = (size_t)reserved;
        cudaOccFuncAttributes a;           /* as the runtime converts cudaFuncAttributes: */
        a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = 0;
        a.partitionedGCConfig = PARTITIONED_GC_OFF; a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        a.maxDynamicSharedSizeBytes = (size_t)smem; a.numBlockBarriers = 1;
        a.virtualResourceCount = 0;
        cudaOccDeviceState s; s.carveoutConfig = carve;
        cudaOccResult r;
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads,
                                                                   (size_t)smem);
        if (e != CUDA_OCC_SUCCESS) { std::printf("E %d\n", (int)e); continue; }
        std::printf("%d %u\n", r.activeBlocksPerMultiprocessor, r.limitingFactors);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    header = find_occupancy_header()
    if header is None:
        pytest.skip("cuda_occupancy.h not found (no CUDA toolkit, no nvidia-cuda-runtime wheel)")
    if shutil.which("g++") is None:
        pytest.skip("g++ not found: cannot build the cuda_occupancy.h harness")
    d = tmp_path_factory.mktemp("occ")
    (d / "harness.cpp").write_text(HARNESS)
    exe = d / "harness"
    subprocess.run(["g++", "-O1", "-std=c++11", f"-I{header.parent}", str(d / "harness.cpp"),
                    "-o", str(exe)], check=True, capture_output=True, timeout=120)
    return exe


def _configs(cc: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    _, _, optin, _ = DEVICE_PROPS[cc]
    n = N_PER_ARCH
    threads = rng.integers(1, 1025, n)
    threads[: n // 10] = rng.choice([32, 64, 96, 128, 192, 256, 384, 512, 768, 1024], n // 10)
    threads[n // 10: n // 10 + 200] = rng.integers(1025, 1300, 200)  # cannot launch
    regs = rng.integers(0, 256, n)
    smem = rng.integers(0, optin + 1, n)
    smem[::7] = rng.integers(0, 16 * 1024, len(smem[::7]))  # the common small-smem region
    smem[::97] = rng.integers(optin + 1, optin + 4096, len(smem[::97]))  # over the limit
    carve = np.where(rng.random(n) < 0.6, -1, rng.integers(0, 101, n))
    return threads, regs, smem, carve


@pytest.mark.parametrize("cc", list(DEVICE_PROPS))
def test_matches_cuda_occupancy_header(harness, cc):
    rng = np.random.default_rng(int(float(cc) * 10))
    threads, regs, smem, carve = _configs(cc, rng)
    tpsm, smem_sm, optin, reserved = DEVICE_PROPS[cc]
    major, minor = cc.split(".")
    lines = "".join(
        f"{major} {minor} {tpsm} {smem_sm} {optin} {reserved} {t} {r} {s} {c}\n"
        for t, r, s, c in zip(threads, regs, smem, carve, strict=True))
    out = subprocess.run([str(harness)], input=lines, capture_output=True, text=True, check=True,
                         timeout=120).stdout.split("\n")
    ref_blocks = np.array([int(x.split()[0]) if not x.startswith("E") else -1 for x in out if x])
    ref_mask = np.array([int(x.split()[1]) if not x.startswith("E") else -1 for x in out if x])
    assert len(ref_blocks) == len(threads)
    ours = occupancy_arrays(sm_limits(cc), threads, regs, smem, carve)
    ok = ref_blocks >= 0  # the header refuses nothing here, but keep errors visible
    assert ok.all(), f"header returned errors for {int((~ok).sum())} configurations"
    bad = np.flatnonzero(ours["blocks"] != ref_blocks)
    assert bad.size == 0, [
        (int(threads[i]), int(regs[i]), int(smem[i]), int(carve[i]), int(ours["blocks"][i]),
         int(ref_blocks[i])) for i in bad[:5]]
    badm = np.flatnonzero(ours["limiting_mask"] != ref_mask)
    assert badm.size == 0, [
        (int(threads[i]), int(regs[i]), int(smem[i]), int(carve[i]),
         int(ours["limiting_mask"][i]), int(ref_mask[i])) for i in badm[:5]]
