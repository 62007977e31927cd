"""parallelism-traffic: the strategies organised by what each sends and how often.

Every row is the step model's (analytic/traffic.py ``step_traffic``), the rows ``comm traffic``
and ``plan train --json`` list for the same layout."""

from __future__ import annotations

from typing import Any

from ..analytic.layout import TrainLayout
from ..analytic.traffic import LayoutTraffic, layout_traffic
from ..derive import Derivation, Report, Section
from ..errors import BadInput
from ..specs import assumption, get_model
from ..units import fmt_bytes, fmt_count, fmt_time
from .params import Param, batch_shape, fabric, gpu, model, tp_pp

PROMPT = (
    "Walk through the parallelism strategies (DP, ZeRO/FSDP, TP with and without sequence "
    "parallelism, PP, CP, EP) by what each one communicates: which collective, how many bytes, "
    "how often per step, and whether it can hide behind compute. Use a concrete model."
)

DEFAULTS = {"model": "llama-3-70b", "tp": 8, "pp": 4, "dp": 16, "cp": 1, "ep": 1, "zero": 1,
            "seq_len": 4096, "micro_batch": 1, "batch": 1024, "intra": "nvlink4",
            "inter": "ndr-400", "gpus_per_node": 8, "gpu": None}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    *tp_pp(DEFAULTS),
    Param("dp", "int", None, "data-parallel degree (default 16, or gpus / (tp x pp))", "replicas",
          lo=1, hi=131072),
    Param("gpus", "int", None, "total GPUs: sets dp = gpus / (tp x pp) (default: tp x pp x dp)",
          "GPUs", lo=1, hi=131072),
    *batch_shape(DEFAULTS),
    *fabric(DEFAULTS),
    gpu(DEFAULTS["gpu"], "GPU id or TOML path (default: the GPU of --intra: nvlink3 A100, "
        "nvlink4 H100, nvlink5 B200)"),
)


def _layout(o: dict[str, Any], **kw: Any) -> TrainLayout:
    base = dict(tp=int(o["tp"]), pp=int(o["pp"]), dp=int(o["dp"]), cp=int(o["cp"]),
                ep=int(o["ep"]), zero=int(o["zero"]), micro_batch=int(o["micro_batch"]))
    return TrainLayout(**(base | kw))


def _priced(o: dict[str, Any], m: Any, lay: TrainLayout, **kw: Any) -> LayoutTraffic:
    return layout_traffic(m, lay, seq_len=int(o["seq_len"]),
                          global_batch=int(kw.get("batch", o["batch"])), gpu=o["gpu"],
                          intra=o["intra"], inter=o["inter"],
                          gpus_per_node=int(o["gpus_per_node"]))


def _tp_derivation(lt: LayoutTraffic, m: Any) -> Derivation:
    """One TP collective of one micro-batch, and the calls and bytes of a step."""
    from ..analytic.step.config import TP_BWD_COLLECTIVES, TP_FWD_COLLECTIVES
    from ..analytic.traffic import slowest_stage_layers

    lay, v, tp_row = lt.layout, lt.row.values, lt.get("TP")
    n = float(v.n_first if lay.pp == 1 else slowest_stage_layers(v))
    # the checks hold where every layer runs the TP collectives (no EP: an MoE layer with EP
    # keeps only its attention block's) and nothing is recomputed
    ok = tp_row is not None and (lay.ep == 1 or not m.is_moe) and lay.recompute == "none"
    d = Derivation("one TP collective of one micro-batch, and a step of them")
    d.given("micro-batch", "b", lay.micro_batch, "seq")
    d.given("sequence length (per CP rank)", "s", lt.job.seq_len // lay.cp, "token")
    d.given("hidden size", "h", m.hidden, "1", source=m.source)
    d.given("bytes per activation (bf16)", "e", 2, "B")
    d.given("TP ranks", "t", lay.tp, "1")
    d.calc("gathered hidden state (the all-gather's output, the reduce-scatter's input)", "A",
           "b * s * h * e", "B")
    d.calc("bytes one GPU sends per call (ring: (t - 1) / t of it)", "W", "(t - 1) / t * A", "B",
           check=tp_row.bytes_per_call if ok else None)
    d.given("layers on the slowest pipeline stage (the planner's split, output head counted)",
            "L_s", n, "1")
    d.given("micro-batches per step", "m", int(v.microbatches), "1")
    d.given("TP collectives per layer, forward (2 all-gathers + 2 reduce-scatters)", "F",
            TP_FWD_COLLECTIVES, "1")
    d.given("TP collectives per layer, backward (the mirror 4 and 2 inputs re-gathered for the "
            "weight gradients)", "B_w", TP_BWD_COLLECTIVES, "1")
    d.calc("TP calls per step", "c", "m * L_s * (F + B_w)", "1",
           check=tp_row.calls_per_step if ok else None)
    d.calc("TP bytes one GPU sends per step", "T", "c * W", "B",
           check=tp_row.bytes_per_step if ok else None)
    return d


def _dp_wire(lt: LayoutTraffic) -> float:
    r = lt.get("DP")
    return r.bytes_per_step if r else 0.0


def build(opts: dict[str, Any]) -> Report:
    from ..views.comm import traffic_section

    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    if opts.get("gpus"):  # the GPU count sets the data-parallel degree
        per = int(o["tp"]) * int(o["pp"]) * int(o["cp"])
        if opts["gpus"] % per:
            raise BadInput(f"--gpus: {opts['gpus']:,} GPUs is not a multiple of tp x pp x cp = {per}")
        if opts.get("dp") and opts["dp"] != opts["gpus"] // per:
            raise BadInput(f"--gpus {opts['gpus']:,} and --dp {opts['dp']} disagree: tp x pp x cp "
                           f"x dp = {per * opts['dp']:,}")
        o["dp"] = opts["gpus"] // per
    m = get_model(o["model"])
    lay = _layout(o)
    lt = _priced(o, m, lay)
    main = traffic_section(lt)
    d = _tp_derivation(lt, m)
    mb = int(lt.row.values.microbatches)

    # FSDP against DDP on the wire, from the two variants' DP rows: DDP all-reduces the fp32
    # gradients once per step (2 (n-1)/n x 4 P bytes); FSDP gathers the bf16 parameters twice and
    # reduce-scatters the fp32 gradients in every micro-batch ((n-1)/n x (2 x 2 P + 4 P))
    ddp, fsdp = _priced(o, m, _layout(o, zero=0)), _priced(o, m, _layout(o, zero=3))
    ddp_wire, fsdp_wire = _dp_wire(ddp), _dp_wire(fsdp)
    fsdp_ratio_wire = fsdp_wire / ddp_wire if ddp_wire else 0.0
    z12_wire = _dp_wire(_priced(o, m, _layout(o, zero=1)) if lay.zero != 1 else lt)
    variants = [Section(f"Variant: {label}", tables=traffic_section(x).tables)
                for label, x in (("ZeRO-0 (DDP all-reduce)", ddp), ("ZeRO-3 / FSDP", fsdp))]
    rm = layout_traffic(get_model("mixtral-8x7b"), TrainLayout(tp=2, pp=1, dp=8, ep=8, zero=1),
                        seq_len=4096, global_batch=256, gpu=o["gpu"], intra=o["intra"],
                        inter=o["inter"], gpus_per_node=int(o["gpus_per_node"]))
    cpr = _priced(o, m, _layout(o, cp=2, dp=max(1, int(o["dp"]) // 2)))
    s_moe = Section("Expert parallelism (Mixtral-8x7B, TP2 EP8 over DP8)",
                    tables=traffic_section(rm).tables)
    s_cp = Section("Context parallelism (same model, CP2)", tables=traffic_section(cpr).tables)

    tp_row, dp = lt.get("TP"), lt.get("DP")
    exposed = ", ".join(f"{r.name} {fmt_time(r.exposed_s)}" for r in lt.rows if r.exposed_s > 0)
    followups = (
        ("Which of these sit on the critical path?",
         f"{fmt_time(lt.exposed_s)} of communication per step is left exposed here ({exposed}): "
         "TP and EP in full (nothing hides them without TP-comm overlap), DP only its last "
         "bucket and what exceeds the backward, PP its send/recv crossings."),
        ("Why is TP confined to a node?",
         f"{fmt_count(tp_row.calls_per_step) if tp_row else 0} calls per step of "
         f"{fmt_bytes(tp_row.bytes_per_call) if tp_row else '-'} sent per GPU, none overlapped: "
         "see fabric-map for the same calls priced on the NIC."),
        ("What does ZeRO change on the wire?",
         "ZeRO-1/2 replace one all-reduce of the fp32 gradients by a reduce-scatter of them "
         "plus an all-gather of the updated parameters, which travel in bf16: 3/4 of DDP's "
         f"volume ({fmt_bytes(z12_wire)} against {fmt_bytes(ddp_wire)} here), and the optimizer "
         "state is sharded. FSDP gathers each layer's parameters before its "
         "forward and again before its backward, and reduce-scatters its gradients, in each of "
         f"the {mb} micro-batches: {fmt_bytes(fsdp_wire)} sent per GPU per step against DDP's "
         f"{fmt_bytes(ddp_wire)}, {fsdp_ratio_wire:,.1f}x the DDP volume on the wire. With "
         "gradients reduced in fp32 (Megatron's main_grad, FSDP2's reduce_dtype) one "
         "micro-batch of FSDP sends as much as DDP (2 x 2 P + 4 P against 2 x 4 P bytes); the "
         "textbook 1.5x assumes gradients reduced in the parameters' bf16."),
        ("How big is the DP gradient traffic per step?",
         f"{fmt_bytes(dp.bytes_per_step) if dp else '-'} sent per GPU (reduce-scatter and "
         "all-gather together), once per step regardless of micro-batches."),
        ("What does sequence parallelism cost?",
         "Nothing extra on the wire: an all-reduce is a reduce-scatter plus an all-gather, and "
         "SP splits them around the norm/dropout so activations are sharded. The step model "
         "prices TP with SP on (Megatron-Core's default), so there is no SP-off variant."),
    )
    data = {"question": "parallelism-traffic", "options": o, "traffic": lt.to_dict(),
            "fsdp_vs_ddp": {"wire_ratio": fsdp_ratio_wire, "micro_batches": mb,
                            "ddp_bytes_per_step": ddp_wire, "fsdp_bytes_per_step": fsdp_wire},
            "variants": {"zero0": ddp.to_dict(), "zero3": fsdp.to_dict()}}
    gb = int(o["batch"]) * int(o["seq_len"])
    return Report(f"parallelism-traffic: {m.id}", (main, Section("", derivation=d), *variants,
                                                    s_cp, s_moe), data, question=PROMPT,
                  assumptions=(f"{m.id}, {int(o['seq_len'])}-token sequences, {int(o['batch'])} "
                               f"per step ({fmt_count(gb)} tokens"
                               + (", the Llama 3 starting batch)." if gb
                                  == assumption("training_batch_tokens").value else ")."),
                               f"{lt.cluster.gpu.id} GPUs, {lt.cluster.nvlink_domain} per NVLink "
                               f"domain, {lt.cluster.inter.id} NICs; Megatron rank order (TP "
                               "fastest).",
                               f"Priced by the step model as plan train and comm traffic price "
                               f"the layout (framework {lt.framework.id}): bf16 activations and "
                               "parameter gathers, fp32 gradient reduction, no recompute."),
                  followups=followups)
