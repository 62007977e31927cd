"""parallelism-traffic: the strategies organised by what each sends and how often."""

from __future__ import annotations

from typing import Any

from ..analytic.collectives import make_fabric
from ..analytic.traffic import TrainLayout, traffic
from ..derive import Derivation, Report, Section
from ..errors import BadInput
from ..specs import assumption, get_model
from ..units import fmt_bytes, fmt_count, fmt_time
from .params import Param, batch_shape, fabric, model, tp_pp

PROMPT = (
    "Walk through the parallelism strategies (DP, ZeRO/FSDP, TP with and without sequence "
    "parallelism, PP, CP, EP) by what each one communicates: which collective, how many bytes, "
    "how often per step, and whether it can hide behind compute. Use a concrete model."
)

DEFAULTS = {"model": "llama-3-70b", "tp": 8, "pp": 4, "dp": 16, "cp": 1, "ep": 1, "zero": 1,
            "seq_len": 4096, "micro_batch": 1, "batch": 1024, "intra": "nvlink4",
            "inter": "ndr-400", "gpus_per_node": 8}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    *tp_pp(DEFAULTS),
    Param("dp", "int", None, "data-parallel degree (default 16, or gpus / (tp x pp))", "replicas",
          lo=1, hi=131072),
    Param("gpus", "int", None, "total GPUs: sets dp = gpus / (tp x pp) (default: tp x pp x dp)",
          "GPUs", lo=1, hi=131072),
    *batch_shape(DEFAULTS),
    *fabric(DEFAULTS),
)


def _layout(o: dict[str, Any], **kw: Any) -> TrainLayout:
    base = dict(tp=int(o["tp"]), pp=int(o["pp"]), dp=int(o["dp"]), cp=int(o["cp"]),
                ep=int(o["ep"]), zero=int(o["zero"]), seq_len=int(o["seq_len"]),
                micro_batch=int(o["micro_batch"]), global_batch=int(o["batch"]))
    return TrainLayout(**(base | kw))


def build(opts: dict[str, Any]) -> Report:
    from ..views.comm import traffic_report

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
    fab = make_fabric(o["intra"], o["inter"], gpus_per_node=int(o["gpus_per_node"]))
    lay = _layout(o)
    r = traffic(m, lay, fab)
    main = traffic_report(r, "").sections[0]

    tp_row = next((s for s in r.strategies if s.name.startswith("TP")), None)
    d = Derivation("one TP collective of one micro-batch")
    d.given("micro-batch", "b", lay.micro_batch, "seq")
    d.given("sequence length (per CP rank)", "s", lay.seq_len // lay.cp, "token")
    d.given("hidden size", "h", m.hidden, "1", source=m.source)
    d.given("bytes per activation (bf16)", "e", lay.act_bytes, "B")
    d.calc("hidden-state tensor = bytes per TP call", "A", "b * s * h * e", "B",
           check=tp_row.bytes_per_call if tp_row else None)
    d.given("layers per pipeline stage", "L_s", -(-m.n_layers // lay.pp), "1")
    d.given("micro-batches per step", "m", lay.micro_batches, "1")
    d.calc("TP calls per step per kind (2 per layer forward + 2 backward)", "c", "4 * L_s * m", "1",
           check=tp_row.calls_per_step if tp_row else None)

    # FSDP against DDP, from the two variant tables: the buffers each moves per step and what a
    # ring puts on the wire per GPU ((n-1)/n of the buffer for all-gather / reduce-scatter,
    # 2(n-1)/n for all-reduce)
    def dp_volume(rr: Any) -> tuple[float, float]:
        buf = wire = 0.0
        for st in rr.strategies:
            if st.name.startswith("DP"):
                k = (2.0 if st.collective == "all-reduce" else 1.0) * (st.group_size - 1) / st.group_size
                buf += st.bytes_per_step
                wire += k * st.bytes_per_step
        return buf, wire

    ddp_buf, ddp_wire = dp_volume(traffic(m, _layout(o, zero=0), fab))
    fsdp_buf, fsdp_wire = dp_volume(traffic(m, _layout(o, zero=3), fab))
    fsdp_ratio_buf = fsdp_buf / ddp_buf if ddp_buf else 0.0
    fsdp_ratio_wire = fsdp_wire / ddp_wire if ddp_wire else 0.0
    variants = []
    for label, kw in (("ZeRO-0 (DDP all-reduce)", {"zero": 0}), ("ZeRO-3 / FSDP", {"zero": 3}),
                      ("TP without SP", {"sequence_parallel": False})):
        rr = traffic(m, _layout(o, **kw), fab)
        variants.append(Section(f"Variant: {label}", tables=traffic_report(rr, "").sections[0]
                                .tables))
    moe = get_model("mixtral-8x7b")
    rm = traffic(moe, TrainLayout(tp=2, pp=1, dp=8, ep=8, seq_len=4096, global_batch=256), fab)
    cpr = traffic(m, _layout(o, cp=2, dp=max(1, int(o["dp"]) // 2)), fab)
    s_moe = Section("Expert parallelism (Mixtral-8x7B, TP2 EP8 over DP8)",
                    tables=traffic_report(rm, "").sections[0].tables)
    s_cp = Section("Context parallelism (same model, CP2)",
                   tables=traffic_report(cpr, "").sections[0].tables)

    dp = next((s for s in r.strategies if s.name.startswith("DP")), None)
    followups = (
        ("Which of these sit on the critical path?",
         f"TP and EP: {fmt_time(r.to_dict()['exposed_time_per_step_s'])} per step here; DP, PP "
         "and CP traffic can hide behind compute if buckets and micro-batches are arranged."),
        ("Why is TP confined to a node?",
         f"{tp_row.calls_per_step if tp_row else 0:,} calls per step of "
         f"{fmt_bytes(tp_row.bytes_per_call) if tp_row else '-'}, none overlapped: see fabric-map "
         "for the same calls priced on the NIC."),
        ("What does ZeRO change on the wire?",
         "ZeRO-1/2 replace one all-reduce by a reduce-scatter plus an all-gather: the same bytes "
         "(2(n-1)/n) but the optimizer state is sharded. FSDP gathers each layer's parameters "
         "before its forward and again before its backward, and reduce-scatters its gradients, "
         f"for each of the {lay.micro_batches} micro-batches: {fmt_bytes(fsdp_buf)} of buffers "
         f"per step against DDP's {fmt_bytes(ddp_buf)} ({fsdp_ratio_buf:,.1f}x), "
         f"{fsdp_ratio_wire:,.1f}x the DDP volume on the wire. The textbook 1.5x holds only at one "
         "micro-batch (or when the gathered parameters are kept across micro-batches, which costs "
         "the memory FSDP was meant to save)."),
        ("How big is the DP gradient traffic per step?",
         f"{fmt_bytes(dp.bytes_per_step) if dp else '-'} per GPU for its reduce-scatter, once "
         "per step regardless of micro-batches."),
        ("What does sequence parallelism cost?",
         "Nothing extra on the wire: an all-reduce is a reduce-scatter plus an all-gather, and "
         "SP just splits them around the norm/dropout so activations are sharded (the variant "
         "table shows the same bytes)."),
    )
    data = {"question": "parallelism-traffic", "options": o, "traffic": r.to_dict(),
            "fsdp_vs_ddp": {"buffer_ratio": fsdp_ratio_buf, "wire_ratio": fsdp_ratio_wire,
                            "micro_batches": lay.micro_batches},
            "variants": {"zero0": traffic(m, _layout(o, zero=0), fab).to_dict()}}
    return Report(f"parallelism-traffic: {m.id}", (main, Section("", derivation=d), *variants,
                                                    s_cp, s_moe), data, question=PROMPT,
                  assumptions=(f"{m.id}, {lay.seq_len}-token sequences, {lay.global_batch} per "
                               f"step ({fmt_count(lay.global_batch * lay.seq_len)} tokens"
                               + (", the Llama 3 starting batch)." if lay.global_batch * lay.seq_len
                                  == assumption("training_batch_tokens").value else ")."),
                               f"Fabric: {fab.describe()}; Megatron rank order (TP fastest).",
                               "bf16 activations and gradients; recomputation not counted."),
                  followups=followups)
