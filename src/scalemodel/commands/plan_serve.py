"""scalemodel plan serve: serving throughput, TTFT and TPOT of a model on a layout, from an
iteration-level simulation of the engine's scheduler; the best layout on N GPUs or the fewest
GPUs meeting SLAs at a rate."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    add_gpu,
    add_model,
    add_output,
    at_most,
    finite_float,
    layout_type,
    positive_float,
    positive_int,
    tokens,
)

SERVE_KEYS = ("tp", "pp", "ep", "dp", "adp")


def _int0(text: str) -> int:
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return v
MAX_REQUESTS = 100_000


def register(sp: Any) -> None:
    s = sp.add_parser(
        "serve", help="plan a serving deployment (throughput, TTFT, TPOT, KV capacity)",
        description="Simulate the serving engine iteration by iteration (continuous batching, "
        "chunked prefill under a token budget, KV blocks, preemption) on every TP / PP / EP / "
        "DP layout, precision and batch limit, each iteration priced by the step model; print "
        "the best deployment on --gpus, or with --ttft-ms / --tpot-ms and --rate the fewest "
        "GPUs that meet them.")
    add_model(s)
    add_gpu(s, default="h100-sxm")
    s.add_argument("--gpus", type=at_most(positive_int, 4096, "a serving fleet bound"),
                   default=8, help="GPUs of the deployment (with SLAs: the most to use; "
                   "default 8)")
    s.add_argument("--isl", type=tokens, default=1000, help="input tokens per request "
                   "(mean with --length-dist; default 1000)")
    s.add_argument("--osl", type=tokens, default=1000, help="output tokens per request "
                   "(mean with --length-dist; default 1000)")
    s.add_argument("--layout", type=layout_type("plan serve", SERVE_KEYS), default=None,
                   metavar="tp=..,pp=..,ep=..,dp=..,adp=..", help="fix any of tp, pp, ep "
                   "(experts over ep of the tp ranks), dp (replicas), adp=1 (attention data "
                   "parallelism, MoE only: each of the tp ranks runs attention on its own batch "
                   "with its own KV pool, the experts over ep = tp ranks); the rest are searched")
    s.add_argument("--precision", choices=["bf16", "fp8", "int4", "fp4"], default=None,
                   help="weights and GEMMs: bf16, fp8 (W8A8), int4 (weight-only) or fp4 "
                   "(NVFP4 W4A4, Blackwell); default: bf16, fp8 and int4, those the GPU runs, "
                   "are searched")
    s.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: what the engine "
                   "uses for such a checkpoint, said in the output)")
    s.add_argument("--framework", default=None, metavar="ID",
                   help="serving engine profile: vllm-v1 (default), vllm-v0, vllm-0.6.4, trtllm-0.17, "
                   "trtllm-1.0, sglang (scalemodel specs frameworks)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--max-load", action="store_true",
                   help="every request queued at once (trtllm-bench throughput, vLLM's offline "
                   "benchmark); the default")
    g.add_argument("--rate", type=positive_float, default=None, metavar="R",
                   help="Poisson arrivals, R requests/s over the deployment")
    g.add_argument("--concurrency", type=at_most(positive_int, MAX_REQUESTS, "requests"),
                   default=None, metavar="C", help="C requests in flight (closed loop)")
    s.add_argument("--requests", type=at_most(positive_int, MAX_REQUESTS, "a simulation bound"),
                   default=3000, help="requests in the stream (default 3000)")
    s.add_argument("--length-dist", choices=["fixed", "normal", "uniform", "exponential",
                                             "sharegpt"],
                   default="fixed", help="input/output lengths: fixed (default), drawn from a "
                   "form about --isl/--osl, or sharegpt: (input, output) pairs of ShareGPT's "
                   "first rounds (the vLLM paper's lengths, bundled), scaled to --isl/--osl")
    s.add_argument("--length-spread", type=finite_float, default=0.25,
                   help="relative spread of drawn lengths (default 0.25)")
    s.add_argument("--prefix-tokens", type=_int0, default=0, metavar="P",
                   help="the first P prompt tokens are one shared prefix (a system prompt, "
                   "few-shot examples), priced with the engine's prefix cache (default 0: none)")
    s.add_argument("--prefix-share", type=finite_float, default=1.0, metavar="F",
                   help="fraction of requests whose prompt starts with the shared prefix, in "
                   "[0, 1] (default 1)")
    s.add_argument("--ttft-ms", type=positive_float, default=None, help="TTFT SLA, p99 (ms)")
    s.add_argument("--tpot-ms", type=positive_float, default=None, help="TPOT SLA, p99 (ms)")
    s.add_argument("--max-batch", type=at_most(positive_int, 65536, "sequences"), default=None,
                   help="max sequences per iteration (default: searched, and the engine's)")
    s.add_argument("--token-budget", type=at_most(positive_int, 1 << 20, "tokens"),
                   default=None, help="max tokens per iteration (default: the engine's)")
    s.add_argument("--spec", default=None, metavar="k=N,alpha=A[,draft=mtp|eagle|model]",
                   help="speculative decoding: k draft tokens per step, each accepted with "
                   "probability A (i.i.d.; or al=L, a stated acceptance length in tokens per "
                   "step), drafted by the model's MTP module (default), an EAGLE head or a "
                   "draft model (draft=model,model=ID); the engine profile must run that drafter")
    s.add_argument("--disaggregated", action="store_true",
                   help="also plan separate prefill and decode pools, the KV moved between "
                   "them on the GPUs' scale-out link")
    s.add_argument("--gpu-hour-price", type=positive_float, default=None, metavar="P",
                   help="price of one GPU-hour: adds cost per million tokens")
    s.add_argument("--seed", type=at_most(_int0, 2**32 - 1, "a seed"), default=0,
                   help="random seed of the stream (default 0)")
    add_output(s, plot=True)
    s.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    from ..analytic.serving.engine import get_serving_engine
    from ..analytic.serving.search import search
    from ..analytic.serving.streams import Stream, check_prefix
    from ..errors import BadInput
    from ..specs import dtype, get_gpu, get_model

    m = get_model(args.model)
    gpu = get_gpu(args.gpu)
    eng = get_serving_engine(args.framework)
    if args.spec is not None:
        from dataclasses import replace

        from ..analytic.serving.speculative import engine_check, model_check, parse

        sp = parse(args.spec)
        engine_check(eng, sp)
        model_check(m, sp)
        eng = replace(eng, speculation=sp)
    if args.kv_dtype:
        dtype(args.kv_dtype, "--kv-dtype")
    if args.precision == "fp8" and "fp8" not in gpu.flop_per_s:
        raise BadInput(f"--precision fp8: {gpu.id} has no fp8 tensor-core path in its spec; "
                       "use bf16 or int4")
    if not 0 <= args.length_spread < 1:
        raise BadInput(f"--length-spread must be in [0, 1), got {args.length_spread}")
    check_prefix(args.prefix_tokens, args.prefix_share, args.isl)
    if args.prefix_tokens and eng.prefix_cache == "unread":
        raise BadInput(f"--prefix-tokens: {eng.id}'s prefix cache (KV block reuse) was not read "
                       "at its version (frameworks.toml prefix_cache = unread); it is not "
                       "priced")
    if args.prefix_tokens and args.disaggregated:
        raise BadInput("--prefix-tokens with --disaggregated: a prefix cache in the prefill pool "
                       "is not simulated")
    kind = "rate" if args.rate else "concurrency" if args.concurrency else "max-load"
    stream = Stream(kind, args.requests, args.rate or 0.0, args.concurrency or 0,
                    args.length_dist, args.length_spread, args.seed,
                    prefix_tokens=args.prefix_tokens, prefix_share=args.prefix_share)
    fixed = dict(args.layout or {})
    ttft = args.ttft_ms / 1e3 if args.ttft_ms else None
    tpot = args.tpot_ms / 1e3 if args.tpot_ms else None
    if fixed and not (ttft or tpot):
        rep = fixed.get("tp", 1) * fixed.get("pp", 1)
        if {"tp", "pp", "dp"} <= set(fixed) and rep * fixed["dp"] != args.gpus:
            raise BadInput(f"--layout uses {rep * fixed['dp']} GPUs but --gpus is {args.gpus}")
    res = search(m, gpu, eng, stream, args.isl, args.osl, n_gpus=args.gpus,
                 domain=min(args.gpus, 8), fixed=fixed,
                 precs=[args.precision] if args.precision else None, kv_dtype=args.kv_dtype,
                 max_batch=args.max_batch, token_budget=args.token_budget, ttft_s=ttft,
                 tpot_s=tpot, disaggregated=args.disaggregated)
    if (ttft or tpot) and not res.meets_sla:
        b = res.best
        raise BadInput(
            f"no layout on up to {args.gpus} x {gpu.id} meets the SLA (TTFT p99 "
            f"{_ms(ttft)}, TPOT p99 {_ms(tpot)}) at {args.rate or args.concurrency} "
            f"{'requests/s' if args.rate else 'in flight'}; closest: {_label(b)} reaches TTFT "
            f"p99 {b.ttft_p99_s * 1e3:.0f} ms, TPOT p99 {b.tpot_p99_s * 1e3:.1f} ms")
    from ..views.serving import serve_report

    return serve_report(res, m, gpu, eng, stream, args)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:g} ms"


def _label(r: Any) -> str:
    lay = r.layout
    s = f"tp={lay.tp},pp={lay.pp},ep={lay.ep},dp={lay.dp} {r.precision} max_batch={r.max_batch}"
    return s + (" (disaggregated)" if r.disaggregated else "")
