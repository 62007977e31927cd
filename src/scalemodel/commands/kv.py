"""scalemodel kv: KV-cache bytes per token, sequence and batch; concurrency on a GPU; paging."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    add_dtypes,
    add_gpu,
    add_model,
    add_output,
    finite_float,
    fraction,
    non_negative_int,
    positive_int,
    size_bytes,
    tokens,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "kv",
        help="KV-cache size, serving capacity and paged vs contiguous allocation",
        description="KV-cache bytes per token (MHA/GQA/MQA/MLA), per sequence and per batch; "
        "with --gpu, the KV pool a serving engine allocates there (--framework: vllm-v0, "
        "vllm-v1, trtllm-0.17, trtllm-1.0, sglang, ...; default vllm-v1), its tokens and "
        "concurrent sequences at --context (the engine's max_model_len); with --simulate, a "
        "request-level simulation of paged vs contiguous KV allocation.",
    )
    add_model(p)
    add_gpu(p)
    add_dtypes(p, kv=True)
    p.add_argument("--context", type=tokens, default=8192,
                   help="tokens per sequence (8192, 8k, 128k; default 8k)")
    p.add_argument("--batch", type=positive_int, default=1, help="concurrent sequences (default 1)")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree (default 1)")
    p.add_argument("--framework", default=None, metavar="ENGINE",
                   help="serving engine whose KV accounting sizes the pool (default vllm-v1; "
                        "'scalemodel specs frameworks' lists the serving ids); with --framework "
                        "and no --gpu the GPU is h100-sxm")
    p.add_argument("--util", type=fraction, default=None,
                   help="the engine's memory fraction (gpu_memory_utilization, "
                        "free_gpu_memory_fraction or mem_fraction_static; default: the engine's)")
    p.add_argument("--max-num-seqs", type=positive_int, default=None,
                   help="the engine's max_num_seqs / max batch (default: the engine's)")
    p.add_argument("--max-num-batched-tokens", type=tokens, default=None,
                   help="the engine's token budget per step, which sizes its profile run "
                        "(default: the engine's)")
    p.add_argument("--reserve", type=size_bytes, default=None,
                   help="runtime reserve per GPU, e.g. 4GiB, instead of an engine's accounting")
    p.add_argument("--block", type=positive_int, default=None,
                   help="KV block size in tokens (default: the engine's)")
    s = p.add_argument_group("paged-KV simulation (--simulate)")
    s.add_argument("--simulate", action="store_true",
                   help="simulate a request stream with contiguous vs paged allocation")
    s.add_argument("--requests", type=positive_int, default=20000, help="requests (default 20000)")
    s.add_argument("--prompt-mean", type=finite_float, default=512, help="mean prompt tokens (default 512)")
    s.add_argument("--output-mean", type=finite_float, default=256, help="mean output tokens (default 256)")
    s.add_argument("--pool", type=tokens, default=None,
                   help="KV pool in tokens (default: the capacity computed for --gpu, else 200k)")
    s.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    from ..analytic.kv import kv_report, mitigation_table
    from ..errors import BadInput
    from ..specs import get_gpu, get_model
    from ..specs.frameworks import get_engine
    from ..views.kv import report

    if args.framework is not None:
        get_engine(args.framework)  # an unknown or training id: one line naming the engines
        if args.reserve is not None:
            raise BadInput("--reserve and --framework: give one (a reserve replaces the "
                           "engine's own accounting)")
    m = get_model(args.model)
    gpu = get_gpu(args.gpu or ("h100-sxm" if args.framework else "")) if (
        args.gpu or args.framework) else None
    r = kv_report(m, gpu=gpu, context=args.context, batch=args.batch, tp=args.tp, pp=args.pp,
                  kv_dtype=args.kv_dtype, weight_dtype=args.dtype, utilization=args.util,
                  reserve_bytes=args.reserve, block_tokens=args.block, engine=args.framework,
                  max_num_seqs=args.max_num_seqs,
                  max_num_batched_tokens=args.max_num_batched_tokens)
    e = r.engine
    if args.framework is not None and e is not None and not e.fits:
        raise BadInput(f"kv --framework {e.engine}: {m.id} does not start: {e.lacks}")
    rows = mitigation_table(m, args.context, args.batch)
    sim = _simulate(args, r) if args.simulate else None
    return report(m, r, rows, context=args.context, batch=args.batch, tp=args.tp, pp=args.pp,
                  has_gpu=gpu is not None, simulation=sim)


def _simulate(args: argparse.Namespace, r: Any) -> tuple[Any, dict[str, Any]]:
    from ..errors import BadInput
    from ..sim.paged_kv import compare, synthetic_workload
    from ..views.kv import simulation_section

    if args.pool:
        pool, pool_from = args.pool, "--pool"
    elif r.max_tokens is None:
        pool, pool_from = 200_000, "the default pool (no --gpu given)"
    elif r.max_tokens == 0:
        raise BadInput("--simulate: this layout leaves no memory for KV (see the warning); "
                       "pass --pool, a larger --tp or a narrower --dtype")
    else:
        pool, pool_from = r.max_tokens, f"the capacity computed for {args.tp} x {r.gpu}"
    if pool < args.context:
        raise BadInput(
            f"--simulate: the KV pool ({pool:,} tokens) is smaller than one --context "
            f"({args.context:,}); lower --context or raise --pool/--tp"
        )
    w = synthetic_workload(args.requests, prompt_mean=args.prompt_mean,
                           output_mean=args.output_mean, max_len=args.context, seed=args.seed)
    c = compare(w, capacity_tokens=pool, max_len=args.context, block_tokens=args.block or 16)
    sec = simulation_section(c, requests=args.requests, prompt_mean=args.prompt_mean,
                             output_mean=args.output_mean, context=args.context, pool=pool,
                             pool_from=pool_from)
    return sec, c.to_dict()
