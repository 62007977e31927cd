"""fabric-map: which parallelism goes on NVLink and which on the scale-out fabric, and why."""

from __future__ import annotations

from typing import Any

from ..analytic.collectives import collective_cost, make_fabric, make_group
from ..analytic.traffic import TrainLayout, traffic
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
    gpu(DEFAULTS["gpu"], "GPU id or TOML path for the planner section (default: the GPU of --intra)"),
)
# the GPU whose NVLink generation a fabric names (for the planned layout when --gpu is not given)
_GPU_OF_LINK = {"nvlink3": "a100-sxm-80gb", "nvlink4": "h100-sxm", "nvlink5": "b200"}


def _on(fab: Any, coll: str, size: int, nbytes: float, where: str) -> float:
    if coll == "send-recv":
        g = make_group(2, fab, 2 if where == "nvlink" else 1)
    else:
        g = make_group(size, fab, min(size, fab.gpus_per_node) if where == "nvlink" else 1)
    return collective_cost(coll, nbytes, g, fab).time_s


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    m = get_model(o["model"])
    fab = make_fabric(o["intra"], o["inter"], gpus_per_node=int(o["gpus_per_node"]))
    lay = TrainLayout(tp=int(o["tp"]), pp=int(o["pp"]), dp=int(o["dp"]), seq_len=int(o["seq_len"]),
                      micro_batch=int(o["micro_batch"]), global_batch=int(o["batch"]), zero=1)
    r = traffic(m, lay, fab)
    rows, cmp = [], {}
    for s in r.strategies:
        fits = s.group_size <= fab.gpus_per_node or s.collective == "send-recv"
        t_nv = _on(fab, s.collective, s.group_size, s.bytes_per_call, "nvlink") if fits else None
        t_net = _on(fab, s.collective, s.group_size, s.bytes_per_call, "network")
        cmp[s.name] = (t_nv, t_net, s)
        # printed in people's units (bytes scaled, ms); --json keeps bytes and seconds
        rows.append((s.name, s.calls_per_step, fmt_bytes(s.bytes_per_call),
                     fmt_bytes(s.bytes_per_step),
                     "yes" if s.overlappable else "no", f"{100 * s.latency_share:.0f}%",
                     1e3 * t_nv * s.calls_per_step if t_nv is not None else "-",
                     1e3 * t_net * s.calls_per_step, s.tier))
    tab = Table("Each strategy priced on both tiers (per GPU, per step; groups of at most one "
                "node on NVLink, one rank per node on the NIC)",
                ("strategy", "calls/step", "bytes/call", "bytes/step", "overlaps",
                 "latency share", "on NVLink (ms/step)", "on the NIC (ms/step)", "placed on"),
                tuple(rows))
    pp = next((v for k, v in cmp.items() if k.startswith("PP")), None)
    tp_in = sum(v[0] * v[2].calls_per_step for k, v in cmp.items()
                if k.startswith("TP") and v[0] is not None)
    tp_out = sum(v[1] * v[2].calls_per_step for k, v in cmp.items() if k.startswith("TP"))
    heads = [Headline("TP per step inside the node (exposed)", tp_in, "s"),
             Headline("TP per step if spread one rank per node (exposed)", tp_out, "s")]
    # bytes and calls per family, every collective of it counted (TP under SP: all-gather and
    # reduce-scatter; DP under ZeRO-1: reduce-scatter and all-gather)
    fam: dict[str, list[float]] = {}
    for st in r.strategies:
        f = st.name.split(":")[0].split()[0]
        acc = fam.setdefault(f, [0.0, 0])
        acc[0] += st.bytes_per_step
        acc[1] += st.calls_per_step
    top = max(fam, key=lambda f: fam[f][0]) if fam else "-"
    tp_b, tp_c = fam.get("TP", [0.0, 0])
    dp_b = fam.get("DP", [0.0, 0])[0]
    n_tp = sum(1 for st in r.strategies if st.name.startswith("TP"))
    lead = (f"TP sends the most bytes ({fmt_bytes(tp_b)} per GPU per step, its {n_tp} "
            f"collectives together)" if top == "TP" else
            f"TP sends {fmt_bytes(tp_b)} per GPU per step (its {n_tp} collectives together; "
            f"{top} sends more, {fmt_bytes(fam[top][0])})")
    text = (f"{lead} in {int(tp_c):,} calls that nothing can hide, so it "
            f"needs the fattest, lowest-latency tier: {fmt_time(tp_in)} per step on NVLink "
            f"becomes {fmt_time(tp_out)} on the NIC ({tp_out / tp_in if tp_in else 0:.1f}x). "
            f"DP moves {fmt_bytes(dp_b)} once per step, in "
            "buckets that overlap the backward pass: bandwidth-hungry but latency-tolerant, it "
            "belongs on the rails. PP sends one activation per micro-batch between neighbouring "
            f"stages ({fmt_bytes(pp[2].bytes_per_call) if pp else '-'} a call): the least traffic "
            "of all, point-to-point, happy anywhere, so it is the axis to stretch across the "
            "slowest links (between racks or pods).")
    swap = traffic(m, TrainLayout(tp=int(o["tp"]), pp=int(o["pp"]), dp=int(o["dp"]),
                                  seq_len=int(o["seq_len"]), micro_batch=int(o["micro_batch"]),
                                  global_batch=int(o["batch"]), zero=1),
                   make_fabric(o["intra"], o["inter"], gpus_per_node=1))
    swap_exposed = swap.to_dict()["exposed_time_per_step_s"]
    base_exposed = r.to_dict()["exposed_time_per_step_s"]
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
    followups = (
        ("Where does expert parallelism go?",
         "Its all-to-all is on the critical path and cannot aggregate NICs (single-NIC bound, "
         "nccl-tests#267): inside the NVLink domain if it fits (NVL72 makes EP64 possible), "
         "else rail-aligned with PXN."),
        (f"Why not TP{2 * fab.gpus_per_node} across two {fab.gpus_per_node}-GPU nodes?",
         f"Every TP call then crosses the NIC at ~{fmt_rate(nic_bw)} instead of "
         f"~{fmt_rate(nvl_bw)} on {fab.intra.id} (one direction, after efficiency); the table "
         "above shows the factor for this model."),
        ("What about NVL72?",
         "A 72-GPU NVLink domain lets TP x EP (or TP x CP) span 72 GPUs at NVLink rates; pass "
         "--gpus-per-node 72 --intra nvlink5 to price it."),
        ("Does PP really not care?",
         f"Per call it is {fmt_time(pp[1]) if pp else '-'} on the NIC vs "
         f"{fmt_time(pp[0]) if pp and pp[0] else '-'} on NVLink, hidden by 1F1B; its real cost "
         "is the pipeline bubble, not the wire."),
    )
    data = {"question": "fabric-map", "options": o, "traffic": r.to_dict(),
            "tiers": [{"name": k, "time_per_step_nvlink_s": v[0] * v[2].calls_per_step
                       if v[0] is not None else None,
                       "time_per_step_network_s": v[1] * v[2].calls_per_step}
                      for k, v in cmp.items()],
            "exposed_time_per_step_s": base_exposed,
            "exposed_time_per_step_tp_across_nodes_s": swap_exposed,
            "bytes_per_step_by_family": {f: v[0] for f, v in fam.items()},
            "most_bytes": top}
    s3 = _planned(o, m.id, lay, data)
    return Report(f"fabric-map: {m.id} TP{lay.tp} PP{lay.pp} DP{lay.dp}",
                  (Section("Three traffic profiles, two tiers", text=text, headlines=tuple(heads),
                           tables=(tab,)), s2, s3), data, question=PROMPT,
                  assumptions=(f"Fabric: {fab.describe()}.",
                               "Megatron rank order; ZeRO-1; bf16; recomputation not counted.",
                               f"Planned layout: {data['planned_gpu']} GPUs, the same model, "
                               "sequence, global batch and fabric, every layout searched."),
                  followups=followups)


def _planned(o: dict[str, Any], model: str, lay: TrainLayout, data: dict[str, Any]) -> Section:
    """Section 3: the training planner's fastest layout for the same job on the same fabric."""
    from ..errors import BadInput
    from ..views.plan import planned_layout_section

    gpu = o["gpu"] or _GPU_OF_LINK.get(o["intra"], "h100-sxm")
    n = lay.tp * lay.pp * lay.dp
    data["planned_gpu"] = gpu
    head = f"3. The planner's layout for this job on {n:,} x {gpu} (scalemodel plan train)"
    try:
        sec, plan = planned_layout_section(
            model, gpu, n, seq_len=lay.seq_len, global_batch_tokens=lay.global_batch * lay.seq_len,
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
