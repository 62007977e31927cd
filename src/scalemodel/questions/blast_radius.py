"""blast-radius: what each failure domain takes down in a 16k-GPU synchronous job."""

from __future__ import annotations

from typing import Any

from ..sim.checkpoint import blast_study
from ..views.reliability import blast_report

PROMPT = ("One synchronous training job on 16,384 GPUs (TP 8, PP 16, DP 128). Which faults take "
          "down a rank, a tensor-parallel group, a pipeline or the whole job; what does each cost "
          "per month; where are the hidden single points of failure; what do hot spares and "
          "elastic data parallelism change?")

DEFAULTS = {"gpus": 16384, "layout": "tp=8,pp=16,dp=128"}


def build(opts: dict[str, Any]) -> Any:
    gpus = opts.get("gpus") or DEFAULTS["gpus"]
    layout = DEFAULTS["layout"] if gpus == DEFAULTS["gpus"] else f"tp=8,dp={max(1, gpus // 8)}"
    res, h, w = blast_study(gpus=gpus, layout=layout, gpu=opts.get("gpu") or "h100-sxm")
    alt, _, _ = blast_study(gpus=gpus, layout=layout, order="tp-cp-ep-pp-dp",
                            gpu=opts.get("gpu") or "h100-sxm")
    rep = blast_report(res, h, w, title=f"blast-radius: {gpus:,} GPUs, {res.layout}")
    d = res.to_dict()
    by = {f.component: f for f in res.faults}
    rack_alt = next(f for f in alt.faults if f.component == "rack")
    fol = (
        ("Which fault class costs the most?",
         f"GPU faults: {by['gpu'].rate_per_day:.1f} per day, "
         f"{by['gpu'].gpu_hours_per_month:,.0f} GPU-hours a month, because each one stops all "
         f"{gpus:,} GPUs for detection, repair and restart."),
        ("What do hot spares change?",
         f"Recovery no longer waits for repair: {d['gpu_hours_per_month']:,.0f} -> "
         f"{d['gpu_hours_per_month_spares']:,.0f} GPU-hours a month."),
        ("And elastic data parallelism?",
         f"The job drops the replicas hit instead of stopping: "
         f"{d['gpu_hours_per_month_elastic']:,.0f} GPU-hours a month; job-scope faults "
         f"({', '.join(res.spofs)}, software) still stop everything."),
        ("Does the rank order matter?",
         f"Yes: with Megatron's order a rack holds {by['rack'].replicas_hit} pipelines' stages; "
         f"with pipeline stages placed next to each other ({alt.order}) one rack hits "
         f"{rack_alt.replicas_hit} pipeline(s). Fewer replicas hit = cheaper elastic recovery."),
        ("Where are the hidden single points of failure?",
         "The rendezvous store on one host, shared storage, and the scheduler for restarts; a "
         "spine switch or one PDU of an A/B pair only costs bandwidth or nothing."),
    )
    assumptions = ("GPU, host, network and software rates from Llama 3's Table 5 counts.",
                   "Rack, switch, power, storage, scheduler rates are planning assumptions "
                   "(marked in the data; override the data file).",
                   f"{h.gpus_per_node} GPUs/node, {h.nodes_per_rack} nodes/rack, "
                   f"{h.nodes_per_leaf} nodes/leaf; Megatron rank order tp-cp-ep-dp-pp.")
    return type(rep)(rep.title, rep.sections, {"question": "blast-radius", **rep.data},
                     warnings=rep.warnings, question=PROMPT, assumptions=assumptions,
                     followups=fol)
