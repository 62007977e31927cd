"""One BLAS thread for the web app's computations.

The engines behind the pages multiply small matrices (a router's 2,048 x 32 tokens by 32 x 64
weights, say). With OpenBLAS's default of one thread per core, each such product wakes and
synchronises every thread; on a 2-core machine that is also serving requests (or shared with
other work) this made the moe-routing answer 3x slower (26 s against 8 s single-threaded,
measured for docs/benchmarks.md). The server runs requests in several threads of its own
(waitress), so BLAS threads would only compete with them: one BLAS thread each loses nothing.

Nothing is changed when the user set the thread count themselves (``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``).
"""

from __future__ import annotations

import ctypes
import os
import sys

_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# setters exported by the OpenBLAS builds numpy ships with (scipy-openblas, 64-bit ints) and by
# a system OpenBLAS
_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")


def one_blas_thread() -> str:
    """Keep BLAS to one thread; returns what was done (for logs and tests)."""
    if any(v in os.environ for v in _VARS):
        return "left as set by the environment"
    for v in _VARS:
        os.environ[v] = "1"
    if "numpy" not in sys.modules:
        return "environment set before numpy loaded"
    return _set_loaded_openblas(1)


def _set_loaded_openblas(n: int) -> str:
    """numpy is loaded already: call the setter of the OpenBLAS library it mapped, if any."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            libs = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower()})
    except OSError:
        return "no /proc/self/maps: thread count unchanged"
    for path in libs:
        if not path.startswith("/") or not (".so" in path or path.endswith(".dylib")):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return f"{name}({n}) in {os.path.basename(path)}"
    return "no OpenBLAS setter found: thread count unchanged"
