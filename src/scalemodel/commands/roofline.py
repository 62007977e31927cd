"""scalemodel roofline: ridge points, and where a GEMM, a decode step or a prefill lands."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_dtypes, add_gpu, add_model, add_output, positive_int, tokens


def _gemm_shape(text: str) -> tuple[int, int, int]:
    parts = text.replace("x", ",").split(",")
    try:
        m, n, k = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected M,N,K such as 4096,4096,4096, got {text!r}") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"M, N and K must be positive, got {text!r}")
    return m, n, k


def register(sub: Any) -> None:
    p = sub.add_parser(
        "roofline",
        help="ridge point, arithmetic intensity, bound and time of a GEMM / decode / prefill",
        description="Places a kernel on a GPU's roofline (Williams et al. 2009). With only --gpu: "
        "the ridge point of each precision. --gemm M,N,K: one matrix multiply. --decode or "
        "--prefill with --model: one step of the model at --batch and --context, and for decode "
        "the batch at which it turns compute-bound.",
    )
    add_gpu(p, default="h100-sxm")
    add_model(p, default=None)
    add_dtypes(p, kv=True)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--gemm", type=_gemm_shape, metavar="M,N,K", help="a GEMM (M x K) @ (K x N)")
    mode.add_argument("--decode", action="store_true", help="one decode step of --model")
    mode.add_argument("--prefill", action="store_true", help="one prefill pass of --model")
    mode.add_argument("--attention", choices=["prefill", "decode"],
                      help="one layer's attention of --model: a causal prefill over --context "
                           "tokens, or one decode token against --context cached tokens")
    p.add_argument("--unfused", action="store_true",
                   help="with --attention: scores and probabilities go through HBM (no FlashAttention)")
    p.add_argument("--batch", type=positive_int, default=1, help="sequences (default 1)")
    p.add_argument("--context", type=tokens, default=4096,
                   help="decode: tokens already cached; prefill: prompt tokens (default 4096)")
    p.add_argument("--tp", type=positive_int, default=1, help="split evenly over t GPUs (default 1)")
    add_output(p, plot=True)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    from ..analytic import roofline as rl
    from ..errors import BadInput
    from ..specs import get_gpu, get_model
    from ..views.roofline import point_report, ridges_report

    gpu = get_gpu(args.gpu)
    if (args.decode or args.prefill or args.attention) and not args.model:
        raise BadInput("--decode, --prefill and --attention need --model")
    if args.model and not (args.decode or args.prefill or args.gemm or args.attention):
        args.decode = True  # a model alone means its decode step
    ridges = rl.ridge_points(gpu)
    if not (args.gemm or args.decode or args.prefill or args.attention):
        return ridges_report(gpu, ridges, args.dtype)
    if args.attention:
        m = get_model(args.model)
        q_len = args.context if args.attention == "prefill" else 1
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim if m.kv_lora_rank else m.head_dim
        pt = rl.attention(gpu, batch=args.batch, q_len=q_len, kv_len=args.context,
                          heads=m.n_heads, kv_heads=m.n_kv_heads, head_dim=qk,
                          dtype_name=args.dtype, fused=not args.unfused)
        title = (f"{m.id} attention, one layer, {args.attention}, "
                 f"{'unfused' if args.unfused else 'fused'}")
        curve = None
    elif args.gemm:
        M, N, K = args.gemm
        pt = rl.gemm(gpu, M, N, K, args.dtype)
        title = f"GEMM {M}x{K} @ {K}x{N} ({pt.dtype})"
        curve = None
    else:
        m = get_model(args.model)
        if args.decode:
            pt = rl.decode_step(gpu, m, batch=args.batch, context=args.context,
                                dtype_name=args.dtype, kv_dtype=args.kv_dtype, tp=args.tp)
            title = f"{m.id} decode step, batch {args.batch}, context {args.context:,}"
            import numpy as np

            bs = np.unique(np.round(np.logspace(0, 13, 40, base=2))).astype(int)
            sw = rl.decode_sweep(gpu, m, bs, args.context, args.dtype, args.kv_dtype)
            curve = (sw["intensity"].tolist(), sw["attainable"].tolist(),
                     f"decode, batch 1..{bs[-1]} at context {args.context:,}")
        else:
            pt = rl.prefill(gpu, m, batch=args.batch, prompt=args.context, dtype_name=args.dtype,
                            kv_dtype=args.kv_dtype, tp=args.tp)
            title = f"{m.id} prefill, {args.batch} x {args.context:,} tokens"
            curve = None
    kind = "decode" if args.decode else "gemm" if args.gemm else "other"
    return point_report(gpu, ridges, pt, title, kind=kind, batch=args.batch,
                        context=args.context, gemm=args.gemm, curve=curve)
