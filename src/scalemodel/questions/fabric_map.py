"""fabric-map: which parallelism goes on NVLink and which on the scale-out fabric, and why.

Every row is the step model's (analytic/traffic.py ``step_traffic``, as ``comm traffic`` and
``plan train`` list it); "on NVLink" and "on the NIC" price the same layout with every GPU in one
NVLink domain and with one GPU per domain."""

from __future__ import annotations

from typing import Any

from ..analytic.layout import TrainLayout
from ..analytic.traffic import GPU_OF_LINK, layout_traffic
from ..derive import Headline, Report, Section, Table
from ..specs import get_model
from ..units import fmt_bytes, fmt_rate, fmt_time
from .params import Param, batch_shape, fabric, gpu, model, tp_pp

PROMPT = (
    "You have NVLink inside each node and a 400G NIC per GPU between nodes. Given the traffic "
    "profiles of tensor, pipeline and data parallelism, which goes where, and what breaks if "
    "you swap them?"
)

DEFAULTS = {"model": "llama-3-70b", "tp": 8, "pp": 4, "dp": 16, "seq_len": 4096, "micro_batch": 1,
            "batch": 1024, "intra": "nvlink4", "inter": "ndr-400", "gpus_per_node": 8,
            "gpu": None}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    *tp_pp(DEFAULTS),
    Param("dp", "int", DEFAULTS["dp"], "data-parallel degree", "replicas", lo=1, hi=131072),
    *batch_shape(DEFAULTS),
    *fabric(DEFAULTS),
    gpu(DEFAULTS["gpu"], "GPU id or TOML path for the traffic and the planner section "
        "(default: the GPU of --intra: nvlink3 A100, nvlink4 H100, nvlink5 B200)"),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    m = get_model(o["model"])
    lay = TrainLayout(tp=int(o["tp"]), pp=int(o["pp"]), dp=int(o["dp"]),
                      micro_batch=int(o["micro_batch"]), zero=1)
    gpn = int(o["gpus_per_node"])

    def priced(domain: int | None) -> Any:
        return layout_traffic(m, lay, seq_len=int(o["seq_len"]), global_batch=int(o["batch"]),
                              gpu=o["gpu"], intra=o["intra"], inter=o["inter"],
                              gpus_per_node=gpn, nvlink_domain=domain)

    # the layout as placed, every group inside one NVLink domain, and one GPU per domain (every
    # group on the NICs)
    r, nv, net = priced(None), priced(lay.gpus), priced(1)
    fab = r.cluster.fabric
    rows, cmp = [], {}
    for s in r.rows:
        fits = s.group_size <= gpn or s.collective.startswith("send-recv")
        t_nv = nv.get(s.name).time_per_step_s if fits else None
        t_net = net.get(s.name).time_per_step_s
        cmp[s.name] = (t_nv, t_net, s)
        # printed in people's units (bytes scaled, ms); --json keeps bytes and seconds
        rows.append((s.name, int(s.calls_per_step), fmt_bytes(s.bytes_per_call),
                     fmt_bytes(s.bytes_per_step), "yes" if s.overlappable else "no",
                     1e3 * t_nv if t_nv is not None else "-", 1e3 * t_net, s.tier))
    tab = Table(f"Each strategy priced on both tiers (per GPU, per step, nothing hidden; groups of "
                f"at most {gpn} GPUs on NVLink, one rank per node on the NIC)",
                ("strategy", "calls/step", "bytes/call", "bytes/step", "overlaps",
                 "on NVLink (ms/step)", "on the NIC (ms/step)", "placed on"), tuple(rows),
                note="bytes: what one GPU sends (the step model's rows, as comm traffic lists "
                     "them)")
    tp, pp = r.get("TP"), r.get("PP")
    tp_in = tp.exposed_s if tp else 0.0
    tp_out = net.get("TP").exposed_s if tp else 0.0
    heads = [Headline("TP per step inside the node (exposed)", tp_in, "s"),
             Headline("TP per step if spread one rank per node (exposed)", tp_out, "s")]
    # bytes and calls per strategy, every collective of it counted (TP under SP: all-gather and
    # reduce-scatter; DP under ZeRO-1: reduce-scatter and all-gather)
    fam = {st.name: [st.bytes_per_step, st.calls_per_step] for st in r.rows}
    top = max(fam, key=lambda f: fam[f][0]) if fam else "-"
    tp_b, tp_c = fam.get("TP", [0.0, 0])
    dp_b = fam.get("DP", [0.0, 0])[0]
    lead = (f"TP sends the most bytes ({fmt_bytes(tp_b)} per GPU per step, its all-gathers and "
            "reduce-scatters together)" if top == "TP" else
            f"TP sends {fmt_bytes(tp_b)} per GPU per step (its all-gathers and reduce-scatters "
            f"together; {top} sends more, {fmt_bytes(fam[top][0])})")
    text = (f"{lead} in {int(tp_c):,} calls that nothing can hide, so it "
            f"needs the fattest, lowest-latency tier: {fmt_time(tp_in)} per step on NVLink "
            f"becomes {fmt_time(tp_out)} on the NIC ({tp_out / tp_in if tp_in else 0:.1f}x). "
            f"DP moves {fmt_bytes(dp_b)} once per step, in "
            "buckets that overlap the backward pass: bandwidth-hungry but latency-tolerant, it "
            "belongs on the rails. PP sends one activation per micro-batch between neighbouring "
            f"stages ({fmt_bytes(pp.bytes_per_call) if pp else '-'} a call): the least traffic "
            "of all, point-to-point, happy anywhere, so it is the axis to stretch across the "
            "slowest links (between racks or pods).")
    swap_exposed, base_exposed = net.exposed_s, r.exposed_s
    s2 = Section(
        "What breaks if swapped",
        text=(f"Put TP across nodes (as if every GPU were its own node): exposed communication "
              f"goes from {fmt_time(base_exposed)} to {fmt_time(swap_exposed)} per step. Put DP "
              "inside the node and TP outside and the DP reduce-scatter gets faster but it was "
              "already hidden; the TP cost lands on the critical path. The rule: order the axes "
              "by bytes x frequency / overlap, and give the innermost, fastest tier to the "
              "largest exposed one (TP, then EP), then CP, DP, and PP outermost."),
        headlines=(Headline("exposed comm per step, TP in node", base_exposed, "s"),
                   Headline("exposed comm per step, TP across nodes", swap_exposed, "s")))
    nvl_bw = fab.intra.bytes_per_s_per_direction * fab.eff_intra
    nic_bw = fab.inter.bytes_per_s_per_direction * fab.eff_inter * fab.nics_per_gpu
    pp_nv, pp_net = (cmp["PP"][0], cmp["PP"][1]) if pp else (None, None)
    pp_calls = pp.calls_per_step if pp else 1.0
    followups = (
        ("Where does expert parallelism go?",
         "Its all-to-all is on the critical path and cannot aggregate NICs (single-NIC bound, "
         "nccl-tests#267): inside the NVLink domain if it fits (NVL72 makes EP64 possible), "
         "else rail-aligned with PXN."),
        (f"Why not TP{2 * gpn} across two {gpn}-GPU nodes?",
         f"Every TP call then crosses the NIC at ~{fmt_rate(nic_bw)} instead of "
         f"~{fmt_rate(nvl_bw)} on {fab.intra.id} (one direction, after efficiency); the table "
         "above shows the factor for this model."),
        ("What about NVL72?",
         "A 72-GPU NVLink domain lets TP x EP (or TP x CP) span 72 GPUs at NVLink rates; pass "
         "--gpus-per-node 72 --intra nvlink5 to price it."),
        ("Does PP really not care?",
         f"Per call it is {fmt_time(pp_net / pp_calls) if pp else '-'} on the NIC vs "
         f"{fmt_time(pp_nv / pp_calls) if pp and pp_nv else '-'} on NVLink; its real cost "
         "is the pipeline bubble, not the wire."),
    )
    data = {"question": "fabric-map", "options": o, "traffic": r.to_dict(),
            "tiers": [{"name": k, "time_per_step_nvlink_s": v[0],
                       "time_per_step_network_s": v[1]} for k, v in cmp.items()],
            "exposed_time_per_step_s": base_exposed,
            "exposed_time_per_step_tp_across_nodes_s": swap_exposed,
            "bytes_per_step_by_family": {f: v[0] for f, v in fam.items()},
            "most_bytes": top}
    s3 = _planned(o, m.id, lay, data)
    return Report(f"fabric-map: {m.id} TP{lay.tp} PP{lay.pp} DP{lay.dp}",
                  (Section("Three traffic profiles, two tiers", text=text, headlines=tuple(heads),
                           tables=(tab,)), s2, s3), data, question=PROMPT,
                  assumptions=(f"Fabric: {fab.describe()}; {r.cluster.gpu.id} GPUs.",
                               "Megatron rank order; ZeRO-1; priced by the step model as plan "
                               f"train and comm traffic price the layout (framework "
                               f"{r.framework.id}: bf16 activations, fp32 gradient reduction, "
                               "no recompute).",
                               f"Planned layout: {data['planned_gpu']} GPUs, the same model, "
                               "sequence, global batch and fabric, every layout searched."),
                  followups=followups)


def _planned(o: dict[str, Any], model: str, lay: TrainLayout, data: dict[str, Any]) -> Section:
    """Section 3: the training planner's fastest layout for the same job on the same fabric."""
    from ..errors import BadInput
    from ..views.plan import planned_layout_section

    gpu = o["gpu"] or GPU_OF_LINK.get(o["intra"], "h100-sxm")
    n = lay.tp * lay.pp * lay.dp
    data["planned_gpu"] = gpu
    head = f"3. The planner's layout for this job on {n:,} x {gpu} (scalemodel plan train)"
    try:
        sec, plan = planned_layout_section(
            model, gpu, n, seq_len=int(o["seq_len"]),
            global_batch_tokens=int(o["batch"]) * int(o["seq_len"]),
            heading=head, gpus_per_node=int(o["gpus_per_node"]), inter=o["inter"])
    except BadInput as e:
        data["planned_layout"] = None
        return Section(head, text=f"The planner found no layout: {e}")
    data["planned_layout"] = plan
    b = plan["best"]
    given = (f"The layout asked about (TP{lay.tp} PP{lay.pp} DP{lay.dp}) puts TP "
             + ("inside" if lay.tp <= int(o["gpus_per_node"]) else "across")
             + f" the {o['gpus_per_node']}-GPU NVLink domain; the planner's winner uses "
             f"TP{b['tp']} x CP{b['cp']} "
             + ("inside it" if b["tp"] * b["cp"] <= int(o["gpus_per_node"]) else "across it")
             + f" and PP{b['pp']} x DP{b['dp']} over the NICs. ")
    return Section(sec.heading, text=given + sec.text, headlines=sec.headlines,
                   tables=sec.tables)
