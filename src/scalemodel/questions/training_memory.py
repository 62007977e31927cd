"""training-memory: a 70B model's training budget in bytes first, then the layout it forces."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..analytic.layout import TrainLayout as Layout
from ..analytic.memory import (
    RECOMPUTE,
    act_per_layer,
    find_min_gpus,
    korthikanti_per_layer,
    memory_report,
    static_model,
    usable_memory,
)
from ..analytic.params import count_params
from ..derive import Derivation, Headline, Report, Section
from ..specs import assumption, dtype, get_gpu, get_model, optimizer
from ..specs.frameworks import get_framework
from ..specs.sources import cite
from ..units import fmt_bytes
from ..views.memory import activations_table, breakdown_row, fit_section, layouts_table
from .params import Param, gpu, model

PROMPT = (
    "You are asked to train a 70B dense model with Adam in mixed precision on H100s. Before "
    "talking about parallelism, how many bytes does the training state take, what do the "
    "activations add, and what is the smallest layout that fits? Why that one?"
)

DEFAULTS = {"model": "llama-3-70b", "gpu": "h100-sxm", "seq_len": 4096, "micro_batch": 1,
            "optimizer": "adam", "dtype": "bf16", "gpus": 64}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    gpu(DEFAULTS["gpu"]),
    Param("seq_len", "tokens", DEFAULTS["seq_len"], "training sequence length", "tokens", lo=1, hi=2**21),
    Param("micro_batch", "int", DEFAULTS["micro_batch"], "sequences per micro-batch", "sequences", lo=1, hi=65536),
    Param("optimizer", "str", DEFAULTS["optimizer"], "optimizer id (adam, adam-8bit, sgd, ...)"),
    Param("dtype", "str", DEFAULTS["dtype"], "weight / compute precision"),
    Param("gpus", "int", DEFAULTS["gpus"], "GPUs the layouts are planned for", "GPUs", lo=1, hi=131072),
    Param("mem_fraction", "fraction", None, "usable share of HBM (default: HBM less the framework's reserve, as the memory engine prices it)"),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    m = get_model(o["model"])
    gpu = get_gpu(o["gpu"])
    opt = optimizer(o["optimizer"])
    ew = dtype(o["dtype"])
    pc = count_params(m)
    # usable memory as the memory engine prices it (analytic/memory.usable_memory: HBM less
    # the default framework's CUDA context and NCCL buffers, over its allocator slack), unless
    # --mem-fraction replaces it with a fraction of HBM
    frac = o.get("mem_fraction")

    # 1. bytes of the model state, before any parallelism
    d = Derivation(f"training state of {m.id}")
    d.given("parameters", "P", pc.total, "1", m.source)
    d.given(f"{ew.name} weights, bytes each", "e_w", ew.bytes, "B", ew.source)
    d.given(f"{ew.name} gradients, bytes each", "e_g", ew.bytes, "B", ew.source)
    d.given(f"optimizer bytes per parameter ({opt.label})", "K", opt.bytes_per_param, "B",
            opt.source)
    d.calc("bytes per parameter", "k", "e_w + e_g + K", "B")
    state = d.calc("model state (weights + gradients + optimizer)", "M_state", "P * k", "B")
    d.given(f"{gpu.name} memory", "M_hbm", gpu.hbm_bytes, "B", gpu.source_of("hbm_bytes"))
    if frac:
        d.given("fraction planned for the step (--mem-fraction)", "u", frac, "1")
        d.calc("usable memory per GPU", "M_use", "M_hbm * u", "B")
    else:
        fw = get_framework(None)
        d.given("usable memory per GPU before any communicator ((M_hbm - CUDA context) / "
                "(1 + allocator slack), the default framework's reserve; a layout's NCCL "
                "buffers only lower it)", "M_use", float(usable_memory(gpu.hbm_bytes, 0)), "B",
                cite(fw.sources.get("reserved_bytes", fw.source)))
    lower = d.calc("GPUs needed for the state alone (perfect sharding)", "N_min",
                   "ceil(M_state / M_use)", "GPU", bound="lower")
    s1 = Section(
        "1. Bytes first",
        text=(f"Mixed-precision Adam keeps {ew.bytes:g} + {ew.bytes:g} + {opt.bytes_per_param:g} "
              f"= {ew.bytes * 2 + opt.bytes_per_param:g} bytes per parameter: the {ew.name} "
              "weights and gradients, an fp32 master copy and Adam's two fp32 moments "
              "(ZeRO, Rajbhandari et al. 2020). That is the floor before a single activation."),
        headlines=(Headline("model state", state, "B"),
                   Headline("GPUs for the state alone (lower bound)", lower, "GPU")),
        derivation=d,
    )

    # 2. activations per layer (Korthikanti et al. 2022) at this sequence length
    s, b = o["seq_len"], o["micro_batch"]
    base = Layout(tp=1, pp=1, dp=1, micro_batch=b)
    sm = static_model(m)
    rows = []
    for code, rc in enumerate(RECOMPUTE):
        r = memory_report(m, replace(base, recompute=rc), seq_len=s, optimizer_id=opt.id,
                          weight_dtype=ew.name)
        per_layer = float(act_per_layer(sm.moe or sm.dense, s, b, m.n_heads, m.n_kv_heads, 1,
                                        False, code, sm.mla))
        rows.append((rc, per_layer, r.breakdown["activations"]))
    gpt_like = korthikanti_per_layer(s, b, m.hidden, m.n_heads)
    s2 = Section(
        f"2. Activations at sequence {s:,}, micro-batch {b}",
        text=(f"Per layer a GPT layer stores 34 s b h + 5 a s^2 b bytes without recompute "
              f"(Korthikanti et al. 2022, eq. 2): {fmt_bytes(gpt_like)} at these sizes with "
              f"h = {m.hidden}, a = {m.n_heads}. {m.id} has GQA, a gated MLP and no dropout, so "
              "its own terms are computed from its config (below). Selective recompute drops "
              "the attention scores (the s^2 term); full recompute keeps only each layer's input."),
        tables=(activations_table(rows),),
    )

    # 3. what each sharding does at a fixed GPU count
    n = int(o["gpus"])
    layouts = [
        ("DP only (ZeRO-0)", Layout(dp=n)),
        ("ZeRO-1", Layout(dp=n, zero=1)),
        ("ZeRO-2", Layout(dp=n, zero=2)),
        ("ZeRO-3 / FSDP", Layout(dp=n, zero=3)),
        ("ZeRO-3 + full recompute", Layout(dp=n, zero=3, recompute="full")),
        ("TP8 + SP, DP", Layout(tp=8, dp=max(1, n // 8))),
        ("TP8 + PP4, DP", Layout(tp=8, pp=4, dp=max(1, n // 32))),
        ("TP8 + PP4 + ZeRO-1, selective", Layout(tp=8, pp=4, dp=max(1, n // 32), zero=1,
                                                 recompute="selective")),
    ]
    trows, caps = [], []
    for label, lay in layouts:
        lay = replace(lay, micro_batch=b)
        if lay.gpus != n or m.n_heads % lay.tp:
            continue
        r = memory_report(m, lay, seq_len=s, gpu=gpu, optimizer_id=opt.id,
                          weight_dtype=ew.name, memory_fraction=frac)
        caps.append(float(r.capacity_bytes))
        trows.append(breakdown_row(label, r, caps[-1]))
    s3 = Section(
        f"3. The same step on {n} GPUs, layout by layout",
        text=("ZeRO-1/2/3 divide optimizer states, then gradients, then weights by the "
              "data-parallel degree; TP and PP divide everything per GPU including activations, "
              "but the first pipeline stage holds p micro-batches of activations in flight."),
        tables=(layouts_table(trows, min(caps, default=0.0), max(caps, default=0.0)),),
    )

    # 4. the smallest layout, found by search
    fit = find_min_gpus(m, gpu, seq_len=s, micro_batch=b, optimizer_id=opt.id,
                        weight_dtype=ew.name, memory_fraction=frac)
    sections = [s1, s2, s3]
    data: dict[str, Any] = {"question": "training-memory", "options": o,
                            "model_state_bytes": state, "min_gpus_state_only": lower,
                            "activation_rows": [dict(zip(("recompute", "per_layer_bytes",
                                                          "total_bytes"), r, strict=True))
                                                for r in rows]}
    if fit.layout is not None:
        best = memory_report(m, fit.layout, seq_len=s, gpu=gpu, optimizer_id=opt.id,
                             weight_dtype=ew.name,
                             memory_fraction=frac)
        why = (f"{fit.min_gpus} x {gpu.id}: {fit.layout.describe()}. The state alone needs "
               f"{lower} GPUs at perfect sharding; a real layout must also hold a stage's "
               "activations and whole layers, which is why the count lands here. Among layouts "
               "of that size the search prefers the least recompute, then the lowest ZeRO stage, "
               "then fewer pipeline stages and less TP (cheaper communication).")
        sections.append(fit_section("4. The smallest layout that fits", why,
                                    (Headline("min GPUs", fit.min_gpus, "GPU"),
                                     Headline("per GPU", best.per_gpu_bytes, "B")),
                                    fit, best.derivation))
        data.update(min_gpus=fit.min_gpus, min_layout=fit.layout.as_dict(),
                    per_gpu_bytes=best.per_gpu_bytes, breakdown=best.breakdown)
    # 5. the planner's layout for a real run: what the fastest layout that fits looks like
    from ..errors import BadInput
    from ..views.plan import planned_layout_section

    try:
        sec5, plan = planned_layout_section(
            m.id if m.origin == "bundled" or not o["model"].endswith(".json") else o["model"],
            o["gpu"], n, seq_len=s, global_batch_tokens=max(s, (int(assumption("training_batch_tokens").value) // s) * s),
            heading=f"5. The fastest layout that fits on {n} GPUs (scalemodel plan train)",
            optimizer=opt.id)
        sections.append(sec5)
        data["planned_layout"] = plan
    except BadInput as e:
        sections.append(Section(f"5. A planned layout on {n} GPUs", text=f"The planner found "
                                f"no layout: {e}"))
    followups = (
        ("Why not just ZeRO-3 on as many GPUs as it takes?",
         "It works for memory, but every step all-gathers the weights twice and reduce-scatters "
         "the gradients over the whole data-parallel group; on a slow scale-out network that "
         "traffic, not memory, sets the step time. TP inside the NVLink domain is cheaper."),
        ("What does 8-bit Adam change?",
         f"The optimizer term drops from {optimizer('adam').bytes_per_param:g} to "
         f"{optimizer('adam-8bit').bytes_per_param:g} bytes per parameter (fp32 master kept), "
         f"so the state becomes {fmt_bytes(pc.total * (2 * ew.bytes + optimizer('adam-8bit').bytes_per_param))}."),
        ("Why does the first pipeline stage run out of memory first?",
         "Under 1F1B it has started p micro-batches before the first backward returns, so it "
         "holds p micro-batches of activations for its layers; the last stage holds one."),
        ("When is selective recompute enough?",
         "When the s^2 attention scores dominate (long sequences, many heads): they are cheap to "
         "recompute and large to store. FlashAttention never stores them at all."),
        ("How do long contexts change this?",
         "Activations grow linearly in s (quadratically for unfused scores); context parallelism "
         "divides s across ranks, and the model state does not change."),
    )
    assumptions = (
        f"{m.id} ({pc.total / 1e9:.2f}B parameters from its config), {ew.name} weights and "
        f"gradients, {opt.label}.",
        f"Sequence {s:,}, micro-batch {b}; 16-bit activations, unfused attention scores.",
        (f"{gpu.id}: {frac:g} of HBM usable for the step" if frac else
         f"{gpu.id}: usable memory as the memory engine prices it (HBM less the default "
         "framework's CUDA context and NCCL buffers, over its allocator slack)")
        + "; TP kept within an 8-GPU node.",
    )
    return Report(f"training-memory: {m.id} on {gpu.id}", tuple(sections), data,
                  question=PROMPT, assumptions=assumptions, followups=followups)
