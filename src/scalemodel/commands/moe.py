"""scalemodel moe route|place|serve|global: MoE routing, expert placement, serving, global serving."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

from .common import (
    add_gpu,
    add_model,
    add_output,
    non_negative_float,
    positive_float,
    positive_int,
    tokens,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "moe", help="MoE routing simulator, expert placement, latency-SLA serving, global serving",
        description="Mixture-of-experts as a systems problem. route: a learnable router trained "
        "on clustered tokens (collapse and balancing, capacity drops, serving imbalance). place: "
        "replicate and place experts from a loads CSV (compared with EPLB). serve: attention "
        "TP/DP, EP and redundant experts per phase under TPOT/TTFT SLAs. global: regions, "
        "regional skew, cross-region hops and KV bytes over the WAN.")
    ms = p.add_subparsers(dest="moe_command", metavar="SUBCOMMAND", required=True)

    r = ms.add_parser("route", help="router training simulation: collapse and balancing")
    r.add_argument("--experts", type=positive_int, default=64, help="routed experts (default 64)")
    r.add_argument("--top-k", type=positive_int, default=2, help="experts per token (default 2)")
    r.add_argument("--balance", choices=["none", "aux", "zloss", "bias"], default="none",
                   help="none, Switch aux loss, aux + ST-MoE z-loss, DeepSeek-V3 bias (default none)")
    r.add_argument("--steps", type=positive_int, default=500, help="gradient steps (default 500)")
    r.add_argument("--tokens", type=positive_int, default=4096, help="tokens per step (default 4096)")
    r.add_argument("--clusters", type=positive_int, default=16, help="token clusters (default 16)")
    r.add_argument("--score", choices=["softmax", "sigmoid"], default=None,
                   help="router scores (default: sigmoid with --balance bias, else softmax)")
    r.add_argument("--capacity-factor", type=positive_float, default=None,
                   help="expert capacity = cf x tokens x k / E (default: ST-MoE's training "
                        "value, moe.toml router.capacity_factor)")
    r.add_argument("--aux-coef", type=non_negative_float, default=None,
                   help="alpha (default: Switch Transformer's, moe.toml router.aux_coef)")
    r.add_argument("--z-coef", type=non_negative_float, default=None,
                   help="c_z (default: ST-MoE's, moe.toml router.z_coef)")
    r.add_argument("--gamma", type=non_negative_float, default=None,
                   help="bias speed (default: DeepSeek-V3's, moe.toml router.gamma)")
    r.add_argument("--skew", type=non_negative_float, default=None,
                   help="Zipf exponent of the training topic mix (default: a Dirichlet draw, "
                        "moe.toml router.mix_concentration)")
    r.add_argument("--seed", type=int, default=0, help="random seed, 0 or more (default 0)")
    add_output(r, plot=True)
    r.set_defaults(run=run_route)

    q = ms.add_parser("place", help="replicate and place experts (EPLB-compatible input)")
    q.add_argument("--loads", required=True, metavar="FILE.csv",
                   help="one row per layer, one column per expert, non-negative loads")
    q.add_argument("--slots", type=positive_int, required=True, help="physical expert slots")
    q.add_argument("--gpus", type=positive_int, required=True, help="GPUs")
    q.add_argument("--nodes", type=positive_int, default=1, help="nodes (default 1)")
    q.add_argument("--groups", type=positive_int, default=None, help="expert groups")
    q.add_argument("--keep-groups-on-node", action="store_true",
                   help="every replica of a group's experts stays on the group's node")
    q.add_argument("--top-k", type=positive_int, default=8,
                   help="experts per token, for cross-node traffic (default 8)")
    q.add_argument("--hidden", type=positive_int, default=7168,
                   help="hidden size, for cross-node bytes (default 7168)")
    add_output(q)
    q.set_defaults(run=run_place)

    s = ms.add_parser("serve", help="layout per phase under TPOT / TTFT SLAs")
    add_model(s, default="deepseek-v3")
    add_gpu(s, default="h800")
    s.add_argument("--tpot-ms", type=positive_float, default=50.0, help="TPOT SLA, p99 (default 50)")
    s.add_argument("--ttft-ms", type=positive_float, default=2000.0, help="TTFT SLA, p99 (default 2000)")
    s.add_argument("--context", type=tokens, default=None,
                   help="decode KV length (default 4989, DeepSeek's production mean)")
    s.add_argument("--prompt", type=tokens, default=4096, help="prompt tokens (default 4096)")
    s.add_argument("--dtype", default="fp8", help="weights and GEMMs (default fp8)")
    s.add_argument("--kv-dtype", default="bf16", help="KV cache (default bf16)")
    s.add_argument("--skew", type=non_negative_float, default=None,
                   help="Zipf exponent of expert popularity (default 0.6)")
    s.add_argument("--gpus-per-node", type=positive_int, default=8)
    s.add_argument("--no-overlap", action="store_true", help="no micro-batch overlap")
    s.add_argument("--draws", type=positive_int, default=256, help="Monte Carlo draws (default 256)")
    s.add_argument("--dispatch", default="auto",
                   help="all-to-all kernels: auto (DeepEP's choice: node-limited normal kernels "
                        "for prefill, per-expert low-latency kernels for decode), node-limited, "
                        "per-expert")
    add_output(s)
    s.set_defaults(run=run_serve)

    g = ms.add_parser("global", help="regions, regional skew, cross-region hops, KV over the WAN")
    add_model(g, default="deepseek-v3")
    g.add_argument("--regions", metavar="FILE.toml", default=None,
                   help="regions, shares, rtt_s, wan_bytes_per_s (default: bundled example)")
    g.add_argument("--prefill-tokens-per-s", type=positive_float, default=None,
                   help="prefill throughput of one node for recompute (default: each model's "
                        "prefill rate as plan serve's engine computes it on H800 nodes)")
    g.add_argument("--tpot-ms", type=positive_float, default=50.0)
    g.add_argument("--step-ms", type=positive_float, default=30.0,
                   help="local decode step time (default 30 ms)")
    g.add_argument("--skew", type=non_negative_float, default=1.0, help="Zipf exponent (default 1)")
    g.add_argument("--slots", type=positive_int, default=288)
    g.add_argument("--gpus", type=positive_int, default=144)
    g.add_argument("--kv-dtype", default="bf16")
    add_output(g)
    g.set_defaults(run=run_global)


# --- route ------------------------------------------------------------------------------------


def run_route(args: argparse.Namespace) -> Any:
    from ..errors import BadInput
    from ..sim.moe_routing import RouterConfig, simulate
    from ..views.moe import route_report
    from ..web.threads import one_blas_thread

    # small matrices: OpenBLAS's thread per core only adds synchronisation (web/threads.py)
    one_blas_thread()
    if args.top_k > args.experts:
        raise BadInput(f"--top-k: {args.top_k} is more than --experts {args.experts}")
    over = {k: getattr(args, k) for k in ("capacity_factor", "aux_coef", "z_coef", "gamma")
            if getattr(args, k) is not None}  # the rest: moe.toml [router.*]
    cfg = RouterConfig(experts=args.experts, top_k=args.top_k, balance=args.balance,
                       steps=args.steps, tokens_per_step=args.tokens, clusters=args.clusters,
                       score=args.score or "", seed=args.seed, skew=args.skew, **over)
    return route_report(simulate(cfg), args.experts, args.top_k, args.balance)


# --- place ------------------------------------------------------------------------------------


def run_place(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from ..analytic.moe_placement import place, read_loads_csv
    from ..views.moe import place_report

    text = _read_loads_file(Path(args.loads))
    w = read_loads_csv(text)
    res = place(w, slots=args.slots, gpus=args.gpus, nodes=args.nodes, groups=args.groups or 0,
                keep_groups=args.keep_groups_on_node, top_k=args.top_k, hidden=args.hidden)
    return place_report(res)


def _read_loads_file(path: Path) -> str:
    """The text of a loads CSV, or BadInput saying precisely why it cannot be used."""
    import stat

    from ..analytic.moe_data import check_limit
    from ..errors import BadInput

    try:
        st = path.stat()
    except FileNotFoundError:
        raise BadInput(f"--loads: no such file {str(path)!r}") from None
    except OSError as e:
        raise BadInput(f"--loads: cannot read {str(path)!r} ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else
                "a character device" if stat.S_ISCHR(st.st_mode) else
                "a block device" if stat.S_ISBLK(st.st_mode) else
                "a pipe" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a plain file")
        raise BadInput(f"--loads: {str(path)!r} is {kind}, not a regular CSV file")
    if st.st_size == 0:
        raise BadInput(f"--loads: {str(path)!r} is empty (0 bytes); expected one row of expert "
                       "loads per layer")
    check_limit(f"--loads: size of {str(path)!r} in bytes", st.st_size, "place_file_bytes")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--loads: {str(path)!r} is not a UTF-8 text CSV file") from None
    except OSError as e:
        raise BadInput(f"--loads: cannot read {str(path)!r} ({e.strerror})") from None


# --- serve ------------------------------------------------------------------------------------


def run_serve(args: argparse.Namespace) -> Any:
    from ..analytic.moe_serving import plan
    from ..specs import get_gpu, get_model
    from ..views.moe import serve_report

    m = get_model(args.model)
    gpu = get_gpu(args.gpu)
    res = plan(m, gpu, tpot_s=args.tpot_ms / 1e3, ttft_s=args.ttft_ms / 1e3,
               context=args.context, prompt=args.prompt, dtype_name=args.dtype,
               kv_dtype=args.kv_dtype, skew=args.skew, gpus_per_node=args.gpus_per_node,
               overlap=not args.no_overlap, draws=args.draws, dispatch=args.dispatch)
    return serve_report(res, m, gpu)


# --- global -----------------------------------------------------------------------------------


def run_global(args: argparse.Namespace) -> Any:
    from ..questions.moe_global_serving import build

    return build({"model": args.model, "regions": args.regions,
                  "prefill_tokens_per_s": args.prefill_tokens_per_s, "tpot_s": args.tpot_ms / 1e3,
                  "step_s": args.step_ms / 1e3, "skew": args.skew, "slots": args.slots,
                  "gpus": args.gpus, "kv_dtype": args.kv_dtype})
