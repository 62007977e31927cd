"""scalemodel memory: training memory per GPU under a layout, and the smallest layout that fits."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    add_dtypes,
    add_framework,
    add_gpu,
    add_model,
    add_output,
    at_most,
    fraction,
    layout_type,
    non_negative_int,
    positive_int,
    tokens,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "memory",
        help="training memory per GPU (weights, grads, optimizer, activations) and --fit",
        description="Bytes per GPU for training under a layout (TP/SP, PP with 1F1B, DP with "
        "ZeRO 0-3/FSDP, CP, EP) with a breakdown into weights, gradients, optimizer states and "
        "activations (Korthikanti et al. 2022). With --fit, the smallest number of --gpu GPUs on "
        "which the model trains, and the layout that forces.",
    )
    add_model(p)
    add_gpu(p, default="h100-sxm")
    add_dtypes(p)
    p.add_argument("--grad-dtype", default=None, help="gradient precision (default: --dtype)")
    p.add_argument("--optimizer", default=None,
                   help="adam (fp32 master + m, v: 12 B/param), adam-bf16, adam-pure-bf16, "
                        "adam-8bit, sgd (default: the framework profile's optimizer, else adam)")
    p.add_argument("--seq-len", type=tokens, default=8192,
                   help="training sequence length (default 8192, as plan train)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--global-batch-tokens", type=at_most(tokens, 2**50, "tokens per step"),
                   default=None, help="tokens per step (default 4M = 4194304, as plan train): "
                   "sets the micro-batches a pipeline stage holds in flight")
    g.add_argument("--global-batch", type=at_most(positive_int, 2**31, "sequences per step"),
                   default=None, help="sequences per step (instead of tokens)")
    g.add_argument("--microbatches", type=positive_int, default=None,
                   help="micro-batches per step per pipeline (instead of the global batch)")
    p.add_argument("--layout", type=layout_type("memory"), default=None, metavar="K=V,...",
                   help="the layout in plan train's keys: tp, pp, dp, cp, ep, etp, zero, vpp, "
                        "micro_batch, recompute, sp, stages (the flags below are shorthands)")
    p.add_argument("--micro-batch", type=positive_int, default=None,
                   help="sequences per micro-batch (default 1)")
    p.add_argument("--gpus", type=positive_int, default=None,
                   help="total GPUs; dp = gpus / (tp x pp x cp) when dp is not given")
    p.add_argument("--tp", type=positive_int, default=None, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=positive_int, default=None, help="pipeline stages (default 1)")
    p.add_argument("--dp", type=positive_int, default=None, help="data-parallel degree (default 1)")
    p.add_argument("--cp", type=positive_int, default=None, help="context-parallel degree (default 1)")
    p.add_argument("--ep", type=positive_int, default=None, help="expert-parallel degree (MoE; default 1)")
    p.add_argument("--zero", type=non_negative_int, choices=[0, 1, 2, 3], default=None,
                   help="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 (= FSDP) also weights")
    p.add_argument("--recompute", choices=["none", "selective", "full", "op"], default=None,
                   help="activation recomputation (default none; op: torchtitan's op-level policy)")
    p.add_argument("--no-sp", action="store_true", help="turn sequence parallelism off (with TP)")
    p.add_argument("--vpp", type=positive_int, default=None,
                   help="interleaved chunks per stage (default 1)")
    p.add_argument("--attention", choices=["flash", "flash3", "triton", "unfused"],
                   default=None, help="attention kernel (default: the framework's, flash on "
                   "Megatron-Core, as plan train; unfused stores the a s^2 scores)")
    p.add_argument("--precision", choices=["bf16", "fp8"], default="bf16",
                   help="training precision of the GEMMs, as plan train (fp8: the framework's "
                        "fp8 Linears keep what its profile's fp8_saved_input says)")
    p.add_argument("--kernels", choices=["fused", "eager"], default=None,
                   help="elementwise kernels, as plan train (default: the framework's)")
    p.add_argument("--schedule", choices=["1f1b", "dualpipe"], default=None,
                   help="pipeline schedule, as plan train (default: the framework's; dualpipe "
                        "holds two parameter copies)")
    p.add_argument("--mem-fraction", type=fraction, default=None,
                   help="fraction of HBM a step may fill (default: the HBM less the framework's "
                        "reserve: CUDA context, NCCL buffers, allocator slack)")
    p.add_argument("--fit", action="store_true",
                   help="search the smallest GPU count and layout that fits (flags you give are kept fixed)")
    p.add_argument("--any-count", action="store_true",
                   help="with --fit, allow any GPU count (default: 1, 2, 4, then whole 8-GPU nodes)")
    add_framework(p)
    add_output(p, plot=True)
    p.set_defaults(run=run)


_FLAGS = ("tp", "pp", "dp", "cp", "ep", "zero", "recompute", "vpp", "micro_batch")


def layout_keys(args: argparse.Namespace) -> dict[str, Any]:
    """--layout merged with the shorthand flags (a key given both ways must agree); dp from
    --gpus when not given."""
    from ..errors import BadInput

    keys = dict(args.layout or {})
    for key in _FLAGS:
        v = getattr(args, key, None)
        if v is None:
            continue
        if key in keys and keys[key] != v:
            raise BadInput(f"--{key.replace('_', '-')} {v} disagrees with --layout {key}="
                           f"{keys[key]}")
        keys[key] = v
    if getattr(args, "no_sp", False):
        keys["sp"] = False
    if keys.get("stages") is not None:  # a split given per stage sets pp (as plan train)
        keys.setdefault("pp", len(keys["stages"]))
    tp, pp, cp = keys.get("tp", 1), keys.get("pp", 1), keys.get("cp", 1)
    if getattr(args, "gpus", None) is not None:
        if args.gpus % (tp * pp * cp):
            raise BadInput(f"--gpus {args.gpus} is not a multiple of tp x pp x cp = {tp * pp * cp}")
        derived = args.gpus // (tp * pp * cp)
        if keys.get("dp", derived) != derived:
            raise BadInput(f"dp {keys['dp']} disagrees with --gpus {args.gpus} / (tp x pp x cp) "
                           f"= {derived}")
        keys["dp"] = derived
    return keys


def global_batch(args: argparse.Namespace, lay: Any) -> int:
    """Sequences per step: --global-batch, --global-batch-tokens / --seq-len, or the
    micro-batches given; default 4M tokens, as plan train."""
    from ..errors import BadInput

    if args.global_batch is not None:
        return int(args.global_batch)
    if getattr(args, "microbatches", None) is not None:
        return int(args.microbatches) * lay.dp * lay.micro_batch
    tok = args.global_batch_tokens or 4 * 1024 * 1024
    if tok % args.seq_len:
        raise BadInput(f"--global-batch-tokens {tok:,} is not a multiple of --seq-len "
                       f"{args.seq_len:,}; give --global-batch (sequences)")
    return max(1, tok // args.seq_len)


def run(args: argparse.Namespace) -> Any:
    from ..analytic.layout import TrainLayout
    from ..analytic.memory import find_min_gpus
    from ..specs import get_gpu, get_model

    m = get_model(args.model)
    gpu = get_gpu(args.gpu) if args.gpu else None
    keys = layout_keys(args)
    lay = TrainLayout.from_keys(keys)
    fit = None
    if args.fit:
        from ..errors import BadInput

        if gpu is None:
            raise BadInput("--fit needs --gpu")
        if keys.get("recompute_modules") or keys.get("recompute_layers"):
            raise BadInput("--fit searches recompute none, selective and full; give "
                           "recompute_modules / recompute_layers without --fit")
        if keys.get("recompute") == "op":
            raise BadInput("--fit searches recompute none, selective and full; give "
                           "recompute=op (torchtitan's op-level policy) without --fit")
        # find_min_gpus holds tp, pp, dp, cp, zero, recompute, ep and the micro-batch: any other
        # key given would be dropped from the layout it reports
        held = [k for k in ("vpp", "stages", "etp") if keys.get(k) not in (None, 1)]
        if keys.get("sp") is False:
            held.append("sp (--no-sp)")
        if held:
            raise BadInput(f"--fit searches tp, pp, dp, zero and recompute and holds cp, ep and "
                           f"micro_batch; it cannot hold {', '.join(held)}: give "
                           "them without --fit")
        from ..specs.frameworks import job_kernels

        fixed = {k: keys[k] for k in ("tp", "pp", "dp", "cp", "zero", "recompute", "ep")
                 if k in keys}
        _, kern = job_kernels(args.framework, gpu, attention=args.attention,
                              kernels=args.kernels)
        fit = find_min_gpus(m, gpu, seq_len=args.seq_len, micro_batch=lay.micro_batch,
                            optimizer_id=args.optimizer, weight_dtype=args.dtype,
                            grad_dtype=args.grad_dtype, fixed=fixed,
                            memory_fraction=args.mem_fraction, whole_nodes=not args.any_count,
                            framework=args.framework, precision=args.precision,
                            # the batch the report states (--microbatches: any dp holds it)
                            global_batch=(None if args.microbatches is not None
                                          else global_batch(args, lay)), **kern)
        if fit.layout is not None:
            lay = fit.layout
    from ..views.memory import report

    est = step_memory(args, m, gpu, lay, fit is not None)
    return report(m, gpu, lay, est, fit, seq_len=args.seq_len, optimizer_id=args.optimizer,
                  weight_dtype=args.dtype, grad_dtype=args.grad_dtype)


def step_memory(args: argparse.Namespace, m: Any, gpu: Any, lay: Any, fit: bool) -> dict[str, Any]:
    """Bytes per GPU from the planner's step model for this layout (the number plan train
    shows), with the memory model's derivation of the same terms. Layouts the step model does
    not price (sequence parallelism off, weights or gradients not in bf16, --fit's own search)
    take the memory model alone, and say so."""
    from ..analytic.layout import Context, check
    from ..analytic.memory import memory_report, stage_partition
    from ..analytic.planner import (
        evaluate_layout,
        make_cluster,
        make_job,
        split_extras,
    )
    from ..specs.frameworks import edge_chunk_split, job_settings

    gpu_id = gpu.id if gpu is not None else "h100-sxm"
    # model: the profile's recipe for this model on this GPU (its EP overlap), as plan train
    fw, kern = job_settings(args.framework, gpu or gpu_id, attention=args.attention,
                            kernels=args.kernels, schedule=args.schedule, model=m.id)
    B = global_batch(args, lay)
    ctx = Context(m, lay.gpus, B, args.seq_len, kern["schedule"],
                  edge_slots=2 if edge_chunk_split(fw.id, m.id) else 0, framework_id=fw.id)
    n_mb = None if fit else check(lay, ctx)
    stages = lay.stages
    if stages is None and lay.pp > 1 and not fit:
        stages = stage_partition(m.n_layers, lay.pp, vpp=lay.vpp, **split_extras(m, fw.id))
    r = memory_report(m, lay.with_(stages=stages), seq_len=args.seq_len, microbatches=n_mb,
                      gpu=gpu, optimizer_id=args.optimizer, weight_dtype=args.dtype,
                      grad_dtype=args.grad_dtype, memory_fraction=args.mem_fraction,
                      attention=kern["attention"], kernels=kern["kernels"], framework=fw.id,
                      precision=args.precision, ep_overlap=bool(kern.get("ep_overlap")))
    out = {"report": r, "per_gpu_bytes": r.per_gpu_bytes, "breakdown": dict(r.breakdown),
           "global_batch": B, "microbatches": n_mb, **kern, "framework": fw}
    # the step model keeps the profile's gradient buffer (frameworks.toml grad_buffer_bytes),
    # else 16 bits: an explicit --grad-dtype that differs takes the memory model alone
    from ..analytic.memory import grad_buffer_bytes

    fw_g = grad_buffer_bytes(fw.id)[0]
    bf16 = args.dtype == "bf16" and (args.grad_dtype is None or (
        args.grad_dtype == "bf16" and fw_g in (None, 2.0)))
    why = ("the memory model alone (--fit searches it)" if fit else
           "the memory model alone (sequence parallelism off; the step model prices SP on)"
           if (not lay.sp and lay.tp > 1) else
           f"the memory model alone (--dtype {args.dtype}, --grad-dtype {args.grad_dtype}: the "
           "step model trains with bf16 weights and the profile's gradients)" if not bf16
           else None)
    if why is not None:
        out["priced_by"] = why
        return out
    job = make_job(m, seq_len=args.seq_len, global_batch_seqs=B, optimizer_id=args.optimizer,
                   memory_fraction=args.mem_fraction, precision=args.precision, **kern)
    row = evaluate_layout(job, make_cluster(gpu_id, lay.gpus), lay)
    v = row.values
    out["per_gpu_bytes"] = float(v.memory_per_gpu_bytes)
    out["breakdown"] = {"params": float(v.mem_params), "grads": float(v.mem_grads),
                        "optimizer": float(v.mem_optimizer),
                        "activations": float(v.mem_activations)}
    out["priced_by"] = "the step model plan train uses"
    gap = out["per_gpu_bytes"] - r.per_gpu_bytes
    if abs(gap) > 1e-6 * r.per_gpu_bytes:
        out["priced_by"] += (f" (its {kern['schedule']} schedule adds {gap / 1e9:+.2f} GB to the "
                             "derivation below)")
    return out
