"""scalemodel memory: training memory per GPU under a layout, and the smallest layout that fits."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    add_dtypes,
    add_gpu,
    add_model,
    add_output,
    fraction,
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
    p.add_argument("--optimizer", default="adam",
                   help="adam (fp32 master + m, v: 12 B/param), adam-bf16, adam-pure-bf16, "
                        "adam-8bit, sgd (default adam)")
    p.add_argument("--seq-len", type=tokens, default=4096, help="training sequence length (default 4096)")
    p.add_argument("--micro-batch", type=positive_int, default=1, help="sequences per micro-batch (default 1)")
    p.add_argument("--gpus", type=positive_int, default=None,
                   help="total GPUs; dp = gpus / (tp x pp x cp) when --dp is not given")
    p.add_argument("--tp", type=positive_int, default=None, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=positive_int, default=None, help="pipeline stages (default 1)")
    p.add_argument("--dp", type=positive_int, default=None, help="data-parallel degree (default 1)")
    p.add_argument("--cp", type=positive_int, default=None, help="context-parallel degree (default 1)")
    p.add_argument("--ep", type=positive_int, default=None, help="expert-parallel degree (MoE; default 1)")
    p.add_argument("--zero", type=non_negative_int, choices=[0, 1, 2, 3], default=None,
                   help="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 (= FSDP) also weights")
    p.add_argument("--recompute", choices=["none", "selective", "full"], default=None,
                   help="activation recomputation (default none)")
    p.add_argument("--no-sp", action="store_true", help="turn sequence parallelism off (with TP)")
    p.add_argument("--vpp", type=positive_int, default=1, help="interleaved chunks per stage (default 1)")
    p.add_argument("--microbatches", type=positive_int, default=None,
                   help="micro-batches per step per pipeline (default: at least pp)")
    p.add_argument("--mem-fraction", type=fraction, default=None,
                   help="fraction of HBM a step may fill (default 0.9)")
    p.add_argument("--fit", action="store_true",
                   help="search the smallest GPU count and layout that fits (flags you give are kept fixed)")
    p.add_argument("--any-count", action="store_true",
                   help="with --fit, allow any GPU count (default: 1, 2, 4, then whole 8-GPU nodes)")
    add_output(p, plot=True)
    p.set_defaults(run=run)


def _layout(args: argparse.Namespace) -> Any:
    from ..analytic.memory import Layout
    from ..errors import BadInput

    tp, pp, cp = args.tp or 1, args.pp or 1, args.cp or 1
    dp = args.dp
    if args.gpus is not None:
        if args.gpus % (tp * pp * cp):
            raise BadInput(f"--gpus {args.gpus} is not a multiple of tp x pp x cp = {tp * pp * cp}")
        derived = args.gpus // (tp * pp * cp)
        if dp is not None and dp != derived:
            raise BadInput(f"--dp {dp} disagrees with --gpus {args.gpus} / (tp x pp x cp) = {derived}")
        dp = derived
    return Layout(tp=tp, pp=pp, dp=dp or 1, cp=cp, ep=args.ep or 1, zero=args.zero or 0,
                  recompute=args.recompute or "none", sequence_parallel=not args.no_sp,
                  micro_batch=args.micro_batch, seq_len=args.seq_len, vpp=args.vpp,
                  microbatches=args.microbatches)


def run(args: argparse.Namespace) -> Any:
    from ..analytic.memory import find_min_gpus, memory_report
    from ..derive import Headline, Report, Section
    from ..specs import get_gpu, get_model

    m = get_model(args.model)
    gpu = get_gpu(args.gpu) if args.gpu else None
    lay = _layout(args)
    fit = None
    if args.fit:
        from ..errors import BadInput

        if gpu is None:
            raise BadInput("--fit needs --gpu")
        fixed = {k: getattr(args, k) for k in ("tp", "pp", "dp", "cp", "zero", "recompute", "ep")
                 if getattr(args, k) is not None}
        fit = find_min_gpus(m, gpu, seq_len=args.seq_len, micro_batch=args.micro_batch,
                            optimizer_id=args.optimizer, weight_dtype=args.dtype,
                            grad_dtype=args.grad_dtype, fixed=fixed,
                            memory_fraction=args.mem_fraction, whole_nodes=not args.any_count)
        if fit.layout is not None:
            lay = fit.layout
    r = memory_report(m, lay, gpu=gpu, optimizer_id=args.optimizer, weight_dtype=args.dtype,
                      grad_dtype=args.grad_dtype, memory_fraction=args.mem_fraction)
    b = r.breakdown
    heads = [
        Headline("per GPU", r.per_gpu_bytes, "B"),
        Headline("  weights", b["params"], "B"),
        Headline("  gradients", b["grads"], "B"),
        Headline("  optimizer states", b["optimizer"], "B"),
        Headline("  activations", b["activations"], "B"),
    ]
    if r.capacity_bytes is not None:
        heads.append(Headline(f"usable on {gpu.id}", r.capacity_bytes, "B"))
        heads.append(Headline("fits", r.fits))
    sections = [Section(f"{m.id}: {lay.describe()} on {lay.gpus} GPU(s)", headlines=tuple(heads))]
    data = r.to_dict()
    warnings = list(r.warnings)
    if fit is not None:
        data["min_gpus"] = fit.min_gpus
        data["min_layout"] = (fit.layout.__dict__ | {"gpus": fit.layout.gpus}) if fit.layout else None
        data["rows_evaluated"] = fit.rows_evaluated
        if fit.min_gpus is None:
            warnings.append(f"no layout of at most 65,536 {gpu.id} GPUs fits with these fixed flags")
            text = "Nothing fits; the report below is the layout as given."
        else:
            text = (f"{fit.min_gpus} x {gpu.id} is the smallest count that holds a training step "
                    f"({fit.rows_evaluated:,} layouts evaluated). Fewer GPUs leave some GPU over "
                    "its usable memory in every layout searched.")
        sections.insert(0, Section("Smallest layout that fits (--fit)", text=text,
                                   headlines=(Headline("min GPUs", fit.min_gpus, "1"),),
                                   tables=(fit.candidates,)))
    sections.append(Section("", derivation=r.derivation))
    rep = Report(f"scalemodel memory: {m.id}", tuple(sections), data, warnings=tuple(warnings),
                 plot=_plotter(m, gpu, lay, args))
    return rep


def _plotter(m: Any, gpu: Any, lay: Any, args: argparse.Namespace) -> Any:
    """Stacked bars of the breakdown for each ZeRO stage and recompute mode at this layout."""

    def draw(path: str) -> None:
        from dataclasses import replace

        from ..analytic.memory import memory_report
        from ..report import plot

        labels, series = [], {"weights": [], "gradients": [], "optimizer": [], "activations": []}
        for z in (0, 1, 2, 3):
            for rc in ("none", "full"):
                r = memory_report(m, replace(lay, zero=z, recompute=rc), optimizer_id=args.optimizer,
                                  weight_dtype=args.dtype, grad_dtype=args.grad_dtype)
                labels.append(f"ZeRO-{z} rc={rc}")
                for k, key in zip(series, ("params", "grads", "optimizer", "activations"), strict=True):
                    series[k].append(r.breakdown[key] / 1e9)
        plot.bars(path, title=f"{m.id} per-GPU memory, TP{lay.tp} PP{lay.pp} DP{lay.dp}",
                  labels=labels, series=series, ylabel="GB per GPU")

    return draw
