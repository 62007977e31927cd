"""scalemodel gpu: the GPU lab (occupancy, access analysis, divergence, launch mapping, hierarchy).

Subcommands: occupancy, access, divergence, launch, latency, hierarchy, build, bench.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, finite_float, non_negative_int, positive_int


def _dims(text: str) -> tuple[int, ...]:
    parts = text.replace("x", ",").split(",")
    try:
        vals = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X or X,Y or X,Y,Z such as 32,8, got {text!r}"
                                         ) from None
    if not 1 <= len(vals) <= 3 or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"one to three positive numbers, got {text!r}")
    return vals


def _define(text: str) -> tuple[str, int]:
    name, _, val = text.partition("=")
    if not name.isidentifier() or not val:
        raise argparse.ArgumentTypeError(f"expected NAME=INTEGER such as N=1024, got {text!r}")
    try:
        return name, int(val)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=INTEGER, got {text!r}") from None


def _loop(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, vals = text.partition("=")
    try:
        values = tuple(int(v) for v in vals.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=v1,v2,... such as s=1,2,4, got {text!r}"
                                         ) from None
    if not name.isidentifier() or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=v1,v2,..., got {text!r}")
    return name, values


def _target(p: argparse.ArgumentParser, gpu_default: str | None = None) -> None:
    p.add_argument("--cc", help="compute capability: 7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0")
    p.add_argument("--gpu", default=gpu_default, metavar="ID|gpu.toml",
                   help="a GPU id (its compute capability and SM table are used)"
                   + (f"; default {gpu_default}" if gpu_default else ""))


def register(sub: Any) -> None:
    p = sub.add_parser(
        "gpu", help="GPU lab: occupancy, coalescing/bank conflicts, divergence, launch, hierarchy",
        description="The GPU lab. Occupancy exact to NVIDIA's calculator; a warp-level access "
        "analyzer (sectors per request, bank-conflict wavefronts); divergence masks; mapping of "
        "a launch onto SMs; Little's law; the memory hierarchy; the lab's CUDA kernels "
        "(build: compile with nvcc and read ptxas; bench: run on a GPU with CuPy).")
    gs = p.add_subparsers(dest="gpu_command", metavar="SUBCOMMAND", required=True,
                          parser_class=type(p))

    o = gs.add_parser("occupancy", help="resident blocks/warps per SM and the limiting resource")
    _target(o)
    o.add_argument("--threads", type=int, default=256, help="threads per block (default 256)")
    o.add_argument("--regs", type=int, default=32, help="registers per thread (default 32)")
    o.add_argument("--smem", type=int, default=0,
                   help="shared memory per block, static + dynamic, bytes (default 0)")
    o.add_argument("--carveout", type=int, default=-1,
                   help="shared-memory carveout preference in percent (default -1: maximum)")
    add_output(o, plot=True)
    o.set_defaults(run=run_occupancy)

    a = gs.add_parser("access", help="sectors per request and shared-memory wavefronts per warp")
    a.add_argument("--kernel", help="built-in kernel: copy, transpose-naive, transpose-tiled, "
                   "transpose-padded, transpose-swizzled, reduce-interleaved, reduce-sequential "
                   "(or a name in --kernel-file)")
    a.add_argument("--kernel-file", metavar="FILE.toml", help="kernels described as data "
                   "(schema of specs/data/gpu_kernels.toml)")
    a.add_argument("--stride", type=positive_int, help="one warp reading element threadIdx.x*K")
    a.add_argument("--index", help="one custom access: element index expression, e.g. "
                   "'threadIdx.x * 2 + blockIdx.x * 64'")
    a.add_argument("--active", default="", help="with --index: predicate of the lanes that access")
    a.add_argument("--space", choices=("global", "shared"), default="global",
                   help="with --stride/--index: address space (default global)")
    a.add_argument("--op", choices=("load", "store"), default="load",
                   help="with --stride/--index: load or store (default load)")
    a.add_argument("--block", type=_dims, default=(32,), help="with --index: block X[,Y,Z]")
    a.add_argument("--grid", type=_dims, default=(1,), help="with --index: grid X[,Y,Z]")
    a.add_argument("--define", type=_define, action="append", default=[],
                   help="NAME=INTEGER bound in --index expressions (repeatable)")
    a.add_argument("--dtype", default="float32",
                   help="element type: float32, float64, float16, bfloat16, int8, float4/int4 "
                   "(16-byte vector), float2 (8-byte vector); default float32")
    a.add_argument("--tile", type=positive_int, help="tile size T of the transposes (default 32)")
    a.add_argument("--n", type=positive_int, help="matrix size N / elements (kernel default)")
    a.add_argument("--block-threads", type=positive_int,
                   help="block size BS of the reductions (default 256)")
    _target(a, gpu_default="h100-sxm")
    add_output(a, plot=True)
    a.set_defaults(run=run_access)

    d = gs.add_parser("divergence", help="per-warp active masks and SIMT efficiency of a branch")
    d.add_argument("--predicate", action="append", default=[],
                   help="branch condition, e.g. 'threadIdx.x %% 2 == 0'; repeat to nest the next "
                   "one inside the previous one's then-branch")
    d.add_argument("--trips", default="", help="per-thread loop trip count, e.g. "
                   "'threadIdx.x %% 4 + 1' (the warp runs its largest)")
    d.add_argument("--block", type=_dims, default=(256,), help="block X[,Y,Z] (default 256)")
    d.add_argument("--grid", type=_dims, default=(1,), help="grid X[,Y,Z] (default 1)")
    d.add_argument("--loop", type=_loop, help="evaluate once per value: NAME=v1,v2,...")
    d.add_argument("--define", type=_define, action="append", default=[],
                   help="NAME=INTEGER bound in the expressions (repeatable)")
    d.add_argument("--then-cost", type=finite_float, default=1.0,
                   help="instructions in the innermost then-body (default 1)")
    d.add_argument("--else-cost", type=finite_float, default=1.0,
                   help="instructions in each else-body; 0 for an if without else (default 1)")
    add_output(d)
    d.set_defaults(run=run_divergence)

    la = gs.add_parser("launch", help="threads -> warps -> blocks -> SMs: blocks per SM, waves, tail")
    la.add_argument("--gpu", default="h100-sxm", help="GPU id or TOML (default h100-sxm)")
    la.add_argument("--grid", type=_dims, required=True, help="blocks: X[,Y,Z]")
    la.add_argument("--block", type=_dims, required=True, help="threads per block: X[,Y,Z]")
    la.add_argument("--regs", type=int, default=32, help="registers per thread (default 32)")
    la.add_argument("--smem", type=int, default=0, help="shared memory per block, bytes")
    la.add_argument("--carveout", type=int, default=-1, help="carveout percent (default max)")
    add_output(la)
    la.set_defaults(run=run_launch)

    lt = gs.add_parser("latency", help="Little's law: warps x ILP to hide DRAM and FMA latency")
    lt.add_argument("--gpu", default="h100-sxm", help="GPU id or TOML (default h100-sxm)")
    lt.add_argument("--bytes-per-load", type=positive_int, default=4,
                    help="bytes each thread loads per instruction (default 4)")
    lt.add_argument("--ilp", type=positive_int, default=1,
                    help="independent loads / FMAs in flight per thread (default 1)")
    lt.add_argument("--latency-ns", type=finite_float, help="DRAM latency to use instead of the data")
    add_output(lt)
    lt.set_defaults(run=run_latency)

    h = gs.add_parser("hierarchy", help="memory hierarchy table: capacity, latency, bandwidth")
    h.add_argument("--gpu", default="h100-sxm", help="GPU id or TOML (default h100-sxm)")
    h.add_argument("--measured", metavar="FILE.json",
                   help="latencies measured by 'scalemodel gpu bench --save' on this GPU")
    add_output(h)
    h.set_defaults(run=run_hierarchy)

    b = gs.add_parser("build", help="compile the lab's CUDA kernels with nvcc; ptxas -> occupancy")
    b.add_argument("--arch", default="sm_90", help="target, e.g. sm_80, sm_90, sm_100 (default sm_90)")
    add_output(b)
    b.set_defaults(run=run_build)

    bn = gs.add_parser("bench", help="run the lab's kernels on a GPU (CuPy) and time them")
    bn.add_argument("--n", type=positive_int, default=8192, help="matrix size (default 8192)")
    bn.add_argument("--reps", type=positive_int, default=50, help="timed runs each (median)")
    bn.add_argument("--save", metavar="FILE.json", help="also save the measurements as JSON")
    add_output(bn)
    bn.set_defaults(run=run_bench)
    _ = non_negative_int  # shared type kept importable for subcommands that add it later


# --- helpers ----------------------------------------------------------------------------------

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "int32": 4, "uint32": 4, "float": 4, "float64": 8, "fp64": 8,
    "double": 8, "int64": 8, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
    "int16": 2, "int8": 1, "uint8": 1, "fp8": 1, "char": 1, "float2": 8, "int2": 8,
    "float4": 16, "int4": 16, "double2": 16,
}


def _elem_bytes(name: str) -> int:
    from ..errors import BadInput

    b = _DTYPE_BYTES.get(name.lower())
    if b is None:
        raise BadInput(f"--dtype: unknown element type {name!r}; choose one of "
                       f"{', '.join(sorted(_DTYPE_BYTES))}")
    return b


def _limits(args: argparse.Namespace) -> Any:
    from ..analytic.occupancy import limits_for_gpu, sm_limits
    from ..errors import BadInput
    from ..specs import get_gpu

    if args.cc and getattr(args, "gpu", None):
        raise BadInput("--cc and --gpu: give one of them")
    if args.cc:
        return sm_limits(args.cc), None
    if args.gpu:
        g = get_gpu(args.gpu)
        return limits_for_gpu(g), g
    raise BadInput("--cc or --gpu: say which GPU, e.g. --cc 9.0 or --gpu h100-sxm")


# --- occupancy ---------------------------------------------------------------------------------


def run_occupancy(args: argparse.Namespace) -> Any:
    from ..analytic.occupancy import occupancy
    from ..views.gpu import occupancy_report

    lim, gpu = _limits(args)
    r = occupancy(lim, args.threads, args.regs, args.smem, args.carveout)
    return occupancy_report(lim, gpu, r, args.threads, args.regs, args.smem)


# --- access -----------------------------------------------------------------------------------


def run_access(args: argparse.Namespace) -> Any:
    from ..errors import BadInput
    from ..sim import simt
    from ..views.gpu import access_report

    size = _elem_bytes(args.dtype)
    chosen = [x for x in (args.kernel, args.stride, args.index) if x]
    if len(chosen) != 1:
        raise BadInput("--kernel, --stride or --index: give exactly one")
    params: dict[str, int] = {}
    if args.kernel:
        spec = simt.get_kernel(args.kernel, args.kernel_file)
        for flag, key in ((args.tile, "T"), (args.n, "N"), (args.block_threads, "BS")):
            if flag is not None:
                if key not in spec.params:
                    raise BadInput(f"--{ {'T': 'tile', 'N': 'n', 'BS': 'block-threads'}[key]}: "
                                   f"kernel {spec.name} has no parameter {key}")
                params[key] = flag
    elif args.stride:
        spec = simt.strided_kernel(args.stride, args.space, args.op)
    else:
        spec = simt.custom_kernel(args.index, args.space, args.op, args.block, args.grid,
                                  active=args.active, defines=dict(args.define))
    res = simt.analyze(spec, size, params)
    pred = None
    if args.kernel and spec.name != "copy" and args.kernel_file is None \
            and spec.name.startswith("transpose"):
        pred = _predict(args, res, size, params)
    return access_report(spec, res, size, params, pred)


def _predict(args: argparse.Namespace, res: Any, size: int, params: dict[str, int]) -> Any:
    from ..sim import simt
    from ..specs import get_gpu

    if not args.gpu or args.cc:
        return None
    g = get_gpu(args.gpu)
    copy = simt.analyze(simt.get_kernel("copy"), size,
                        {k: v for k, v in res.params.items() if k in ("T", "N")})
    per_clk = g.hbm_bytes_per_s / g.sm_count / g.boost_clock_hz
    p = simt.predicted_fraction_of_copy(res, copy, per_clk)
    return {"gpu": g.id, "hbm_bytes_per_clk_per_sm": per_clk} | p


# --- divergence ---------------------------------------------------------------------------------


def run_divergence(args: argparse.Namespace) -> Any:
    from ..sim import simt
    from ..views.gpu import divergence_report

    launch = simt.Launch(grid=(tuple(args.grid) + (1, 1))[:3], block=(tuple(args.block) + (1, 1))[:3])
    r = simt.divergence(args.predicate, launch, trips=args.trips, then_cost=args.then_cost,
                        else_cost=args.else_cost, loop=args.loop, defines=dict(args.define))
    return divergence_report(r)


# --- launch / latency / hierarchy ---------------------------------------------------------------


def run_launch(args: argparse.Namespace) -> Any:
    from ..analytic.gpu_lab import launch_map
    from ..specs import get_gpu
    from ..views.gpu import launch_report

    g = get_gpu(args.gpu)
    m = launch_map(g, tuple(args.grid), tuple(args.block), args.regs, args.smem, args.carveout)
    return launch_report(g, m)


def run_latency(args: argparse.Namespace) -> Any:
    from ..analytic.gpu_lab import latency_hiding
    from ..specs import get_gpu
    from ..views.gpu import latency_report

    g = get_gpu(args.gpu)
    lat = args.latency_ns * 1e-9 if args.latency_ns else None
    r = latency_hiding(g, bytes_per_load=args.bytes_per_load, ilp=args.ilp, latency_s=lat)
    return latency_report(g, r)


def run_hierarchy(args: argparse.Namespace) -> Any:
    from ..analytic.gpu_lab import memory_hierarchy
    from ..errors import BadInput
    from ..specs import get_gpu
    from ..views.gpu import hierarchy_report

    g = get_gpu(args.gpu)
    measured = None
    if args.measured:
        try:
            from ..specs.bounds import read_json

            raw = read_json(args.measured, "--measured")
            measured = {k: float(v["seconds"]) for k, v in raw.get("latency", {}).items()}
        except BadInput:
            raise
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise BadInput(f"--measured: cannot read latencies from {args.measured!r} "
                           f"({type(e).__name__})") from None
    t = memory_hierarchy(g, measured)
    return hierarchy_report(g, t)


# --- build / bench --------------------------------------------------------------------------------


def run_build(args: argparse.Namespace) -> Any:
    from ..analytic.occupancy import occupancy, sm_limits
    from ..live.cuda_build import LAUNCH_THREADS, compile_all
    from ..views.gpu import build_report

    infos = compile_all(args.arch)
    cc = args.arch.removeprefix("sm_").rstrip("a")
    lim = sm_limits(cc)
    rows, data = [], []
    for i in infos:
        threads = LAUNCH_THREADS.get(i.kernel, 256)
        o = occupancy(lim, threads, i.registers, i.smem_bytes)
        rows.append((i.file, i.kernel, i.registers, i.smem_bytes, i.spill_store_bytes
                     + i.spill_load_bytes, threads, o.active_blocks_per_sm, o.occupancy, o.limiter))
        data.append(i.to_dict() | {"threads_per_block": threads,
                                   "active_blocks_per_sm": o.active_blocks_per_sm,
                                   "occupancy": o.occupancy, "limiter": o.limiter})
    return build_report(args.arch, lim, rows, data)


def run_bench(args: argparse.Namespace) -> Any:
    import json

    from ..errors import BadInput
    from ..live.cuda_bench import gpu_available, run_lab
    from ..views.gpu import bench_report

    ok, why = gpu_available()
    if not ok:
        raise BadInput(f"gpu bench: needs a CUDA GPU and CuPy; {why} (try 'scalemodel gpu "
                       "build' for the compile-only path)")
    res = run_lab(n=args.n, reps=args.reps)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(res, f, indent=2)
    return bench_report(res, args.n, args.reps)
