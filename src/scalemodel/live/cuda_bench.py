"""Run the lab's CUDA kernels on a real GPU through CuPy and time them with CUDA events.

Only imported by ``scalemodel gpu bench`` and bench/bench_gpulab.py; CuPy is imported inside the
functions. Each timing is the median of ``reps`` launches after ``warmup`` launches.
"""

from __future__ import annotations

import statistics
from typing import Any

from .cuda_build import cuda_source_dir

__all__ = ["gpu_available", "run_lab"]


def gpu_available() -> tuple[bool, str]:
    """(True, device name) when CuPy and a CUDA device are present, else (False, why not)."""
    try:
        import cupy as cp  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return False, f"CuPy is not importable ({type(e).__name__})"
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return False, f"no CUDA device ({type(e).__name__})"
    if n < 1:
        return False, "no CUDA device"
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    return True, name.decode() if isinstance(name, bytes) else str(name)


def _module(cp: Any, file: str, options: tuple[str, ...] = ()) -> Any:
    code = (cuda_source_dir() / file).read_text()
    return cp.RawModule(code=code, options=("-std=c++17",) + options)


def _time(cp: Any, launch: Any, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        launch()
    cp.cuda.Device().synchronize()
    times = []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    return statistics.median(times)


def _chain(cp: Any, n_elems: int, stride_elems: int, seed: int = 0) -> Any:
    """A random cyclic chain over n_elems / stride slots (one per cache line or more)."""
    import numpy as np

    slots = max(2, n_elems // stride_elems)
    order = np.random.default_rng(seed).permutation(slots)
    nxt = np.zeros(n_elems, dtype=np.uint32)
    pos = order * stride_elems
    nxt[pos] = np.roll(pos, -1)  # every slot, element 0 included, lies on one cycle
    return cp.asarray(nxt)


def run_lab(n: int = 8192, reps: int = 50, warmup: int = 5) -> dict[str, Any]:
    """Transposes vs copy, divergence probes, pointer-chase latencies, copy bandwidth."""
    import cupy as cp  # type: ignore[import-not-found]

    ok, name = gpu_available()
    if not ok:
        raise RuntimeError(name)
    props = cp.cuda.runtime.getDeviceProperties(0)
    clock_hz = float(props["clockRate"]) * 1e3
    out: dict[str, Any] = {"device": name, "clock_hz": clock_hz, "n": n, "reps": reps}

    # transposes: effective bandwidth = 2 x matrix bytes / time
    mod = _module(cp, "transpose.cu")
    a = cp.random.random((n, n), dtype=cp.float32)
    b = cp.empty_like(a)
    grid, block = (n // 32, n // 32), (32, 8)
    rows = {}
    for k in ("copy_kernel", "transpose_naive", "transpose_tiled", "transpose_padded",
              "transpose_swizzled"):
        f = mod.get_function(k)
        t = _time(cp, lambda f=f: f(grid, block, (b, a, cp.int32(n))), warmup, reps)
        if k != "copy_kernel" and not bool(cp.allclose(b, a.T)):
            raise RuntimeError(f"{k} produced a wrong transpose")
        rows[k] = {"time_s": t, "bytes_per_s": 2 * a.nbytes / t}
    copy_bw = rows["copy_kernel"]["bytes_per_s"]
    for r in rows.values():
        r["fraction_of_copy"] = r["bytes_per_s"] / copy_bw
    out["transpose"] = rows

    # divergence probes
    mod = _module(cp, "divergence.cu")
    threads = 1 << 20
    buf = cp.empty(threads, dtype=cp.float32)
    iters = 4096
    div = {}
    for k, bs in (("branch_warp_uniform", 256), ("branch_first_warp", 64),
                  ("branch_odd_even", 256), ("loop_lane_trips", 256)):
        f = mod.get_function(k)
        div[k] = _time(cp, lambda f=f, bs=bs: f((threads // bs,), (bs,), (buf, cp.int32(iters))),
                       warmup, max(5, reps // 5))
    base = div["branch_warp_uniform"]
    out["divergence"] = {k: {"time_s": v, "relative_to_uniform": v / base} for k, v in div.items()}

    # pointer chase per level
    mod = _module(cp, "latency.cu")
    cyc = cp.zeros(1, dtype=cp.uint64)
    sink = cp.zeros(1, dtype=cp.uint32)
    steps = 20000
    lat = {}
    l2_bytes = int(props.get("l2CacheSize", 50 << 20))
    for level, kern, size_bytes in (("l1", "chase_l1", 16 << 10), ("l2", "chase_global", l2_bytes // 4),
                                    ("dram", "chase_global", 8 * l2_bytes)):
        chain = _chain(cp, size_bytes // 4, 32)  # one element per 128-byte line
        f = mod.get_function(kern)
        f((1,), (1,), (chain, cp.int32(steps), cyc, sink))
        cp.cuda.Device().synchronize()
        c = float(cyc.get()[0]) / steps
        lat[level] = {"cycles": c, "seconds": c / clock_hz}
    chain = _chain(cp, 4096, 1)
    mod.get_function("chase_shared")((1,), (256,), (chain, cp.int32(4096), cp.int32(steps), cyc,
                                                     sink))
    cp.cuda.Device().synchronize()
    c = float(cyc.get()[0]) / steps
    lat["shared"] = {"cycles": c, "seconds": c / clock_hz}
    out["latency"] = lat

    # bandwidth probe: 16-byte copy of 2 GiB
    mod = _module(cp, "bandwidth.cu")
    n4 = (1 << 31) // 16
    x = cp.zeros(n4 * 4, dtype=cp.float32)
    y = cp.empty_like(x)
    sms = int(props["multiProcessorCount"])
    f = mod.get_function("copy_vec4")
    t = _time(cp, lambda: f((sms * 8,), (256,), (y, x, cp.int64(n4))), warmup, max(5, reps // 5))
    out["copy_bandwidth"] = {"bytes_per_s": 2 * x.nbytes / t, "time_s": t}
    return out
