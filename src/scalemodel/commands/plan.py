"""scalemodel plan train: search every parallel layout, predict step time, MFU and memory."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    MAX_GPUS,
    add_framework,
    add_gpu,
    add_model,
    add_output,
    at_most,
    fraction,
    layout_type,
    positive_int,
    tokens,
)

# the keys plan train prices (sp: the planner prices sequence parallelism on with TP)
PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch", "recompute",
             "recompute_modules", "recompute_layers",
             "stages")
layout_arg = layout_type("plan train", PLAN_KEYS)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "plan", help="training planner: best parallel layout, step time, MFU, memory",
        description="Planners. 'plan train' searches every TP/SP, PP (interleaved, uneven "
        "stages), DP/ZeRO, CP, EP, recompute and micro-batch layout and ranks them by "
        "predicted throughput within memory.")
    sp = p.add_subparsers(dest="plan_kind", metavar="KIND", required=True)
    t = sp.add_parser("train", help="plan a training run",
                      description="Predict step time, tokens/s, TFLOP/s per GPU, MFU/HFU and "
                      "memory per GPU for every valid layout; print the best with its "
                      "derivation, the next ones and the Pareto front.")
    add_model(t)
    add_gpu(t, default="h100-sxm")
    t.add_argument("--gpus", type=at_most(positive_int, MAX_GPUS, "a cluster size bound"),
                   default=64, help="total GPUs (default 64)")
    t.add_argument("--seq-len", type=tokens, default=8192, help="sequence length (default 8192)")
    g = t.add_mutually_exclusive_group()
    g.add_argument("--global-batch-tokens", type=at_most(tokens, 2**50, "tokens per step"),
                   default=None,
                   help="tokens per step (default 4M = 4194304)")
    g.add_argument("--global-batch", type=at_most(positive_int, 2**31, "sequences per step"),
                   default=None,
                   help="sequences per step (instead of tokens)")
    t.add_argument("--precision", choices=["bf16", "fp8"], default="bf16",
                   help="training precision of the GEMMs (default bf16)")
    t.add_argument("--optimizer", default=None,
                   help="optimizer id (default: the framework profile's optimizer, else adam)")
    t.add_argument("--layout", type=layout_arg, default=None, metavar="K=V,...",
                   help="fix any of tp, pp, dp, cp, ep, etp, zero, vpp, micro_batch, "
                        "recompute, stages; the others are searched (etp: expert tensor parallelism, "
                        "1 or the tp; etp=1 with ep over tp x dp x cp is MoE parallel folding; "
                        "stages=7/8/8/7 fixes the layers per pipeline stage)")
    t.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs per node (default 8, the HGX/DGX board)")
    t.add_argument("--nvlink-domain", type=positive_int, default=None,
                   help="GPUs in one NVLink domain (default: the GPU's own, 72 for "
                        "gb200 / gb300 NVL72, else --gpus-per-node)")
    t.add_argument("--inter", default=None, metavar="LINK",
                   help="scale-out link id from links.toml (default: the GPU's usual NIC)")
    t.add_argument("--nics-per-gpu", type=positive_int, default=None,
                   help="scale-out NICs per GPU (default from the GPU spec, 1)")
    t.add_argument("--attention", choices=["flash", "flash3", "triton", "unfused"],
                   default=None,
                   help="attention kernel (default: the framework's for the GPU's "
                        "architecture): flash (FlashAttention-2 class), flash3 "
                        "(FlashAttention-3 / cuDNN on Hopper, cuDNN on Blackwell), triton (the older Triton "
                        "FlashAttention kernel, 1.8x slower) or unfused (scores in HBM)")
    t.add_argument("--kernels", choices=["fused", "eager"], default=None,
                   help="elementwise kernels (default: the framework's): fused "
                        "(Megatron/Transformer Engine, torch.compile) or eager (PyTorch eager mode: RMSNorm, rotary and SwiGLU op by "
                        "op)")
    t.add_argument("--no-grad-accum-fusion", dest="grad_accum_fusion", action="store_false",
                   default=None,
                   help="weight gradients are added into the fp32 main gradient in a separate "
                        "pass per micro-batch (Megatron before 2022, or "
                        "--no-gradient-accumulation-fusion)")
    t.add_argument("--schedule", choices=["1f1b", "dualpipe"], default=None,
                   help="pipeline schedule: 1f1b (Megatron's, interleaved when vpp > 1; default) "
                        "or dualpipe (DeepSeek-V3: smaller bubble, two parameter copies)")
    t.add_argument("--ep-overlap", action="store_true", default=None,
                   help="MoE: the framework overlaps the all-to-alls with another micro-batch's "
                        "compute (DeepSeek DualPipe, Megatron's EP A2A overlap)")
    t.add_argument("--fp8-recipe", dest="fp8_recipe", default=None,
                   choices=["delayed", "current", "blockwise", "mxfp8"],
                   help="with --precision fp8: the fp8 scaling recipe (default: the framework "
                        "profile's for the model on the GPU): delayed or current per-tensor "
                        "scaling, blockwise (1x128 / 128x128 blocks, Hopper) or mxfp8 "
                        "(32-element blocks, Blackwell)")
    t.add_argument("--layouts", default=None, metavar="FILE",
                   help="evaluate every layout of a CSV or JSONL file (one per row; columns: "
                        "the layout keys, optional model, gpus, global_batch, seq_len) in one "
                        "process: one result per row (--json: one JSON object per line)")
    add_framework(t)
    t.add_argument("--mem-fraction", type=fraction, default=None,
                   help="fraction of HBM a step may fill (default: the HBM less the "
                        "framework's reserve: CUDA context, NCCL buffers, allocator slack)")
    t.add_argument("--top", type=positive_int, default=5, help="layouts listed after the best")
    t.add_argument("--export", choices=["megatron", "torchtitan", "deepspeed", "slurm"],
                   default=None, help="also write the best layout for this framework: "
                   "Megatron-LM arguments (a bash array), a torchtitan TOML, a DeepSpeed JSON "
                   "or a Slurm + torchrun script; printed verbatim unless --export-out is given")
    t.add_argument("--export-out", default=None, metavar="PATH",
                   help="write the --export file to PATH (exactly as the framework reads it)")
    add_output(t, plot=True)
    t.set_defaults(run=run)
    from .plan_serve import register as register_serve

    register_serve(sp)


def plan_job(args: argparse.Namespace, m: Any, gpu: Any, *, seq_len: int | None = None,
             global_batch: int | None = None) -> tuple[Any, Any]:
    """The planner's Job for these arguments, the framework profile filling what no flag says
    (attention, kernels, gradient-accumulation fusion, schedule, EP overlap)."""
    from ..analytic.planner import make_job
    from ..specs.frameworks import job_settings

    fw, settings = job_settings(
        getattr(args, "framework", None), gpu, attention=getattr(args, "attention", None),
        kernels=getattr(args, "kernels", None),
        grad_accum_fusion=getattr(args, "grad_accum_fusion", None),
        schedule=getattr(args, "schedule", None), ep_overlap=getattr(args, "ep_overlap", None),
        model=getattr(m, "id", None))
    seq = seq_len or args.seq_len
    seqs = global_batch if global_batch is not None else getattr(args, "global_batch", None)
    tok = None if seqs is not None else (getattr(args, "global_batch_tokens", None)
                                         or 4 * 1024 * 1024)
    job = make_job(m, seq_len=seq, global_batch_tokens=tok, global_batch_seqs=seqs,
                   precision=getattr(args, "precision", "bf16"),
                   optimizer_id=getattr(args, "optimizer", None),
                   memory_fraction=getattr(args, "mem_fraction", None),
                   fp8_scaling=getattr(args, "fp8_recipe", None), **settings)
    return job, fw


def run(args: argparse.Namespace) -> Any:
    from ..analytic.planner import make_cluster, search
    from ..analytic.traffic import step_traffic
    from ..errors import BadInput
    from ..specs import get_model
    from ..views.plan import train_report

    if args.layouts:
        from .plan_batch import run_batch

        return run_batch(args)
    m = get_model(args.model)
    job, fw = plan_job(args, m, args.gpu)
    cl = make_cluster(args.gpu, args.gpus, gpus_per_node=args.gpus_per_node,
                      nvlink_domain=args.nvlink_domain, inter=args.inter,
                      nics_per_gpu=args.nics_per_gpu)
    if args.export_out and not args.export:
        raise BadInput("--export-out needs --export megatron|torchtitan|deepspeed|slurm")
    res = search(job, cl, args.layout or {}, top=args.top)
    return train_report(res, fw, step_traffic(job, cl, res.best), export=args.export,
                        export_out=args.export_out)
