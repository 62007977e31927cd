"""blast-radius: what each failure domain takes down in a 16k-GPU synchronous job."""

from __future__ import annotations

from typing import Any

from ..errors import BadInput
from ..sim.checkpoint import blast_study
from ..views.reliability import blast_report
from .params import Param, gpu

PROMPT = ("One synchronous training job on 16,384 GPUs (TP 8, PP 16, DP 128). Which faults take "
          "down a rank, a tensor-parallel group, a pipeline or the whole job; what does each cost "
          "per month; where are the hidden single points of failure; what do hot spares and "
          "elastic data parallelism change?")

DEFAULTS = {"gpus": 16384, "layout": "tp=8,pp=16,dp=128"}

PARAMS: tuple[Param, ...] = (
    Param("gpus", "int", None, "GPUs in the job (default 16384, or the --layout's product; "
          "without --layout TP 8 and PP 16 are kept and DP takes the rest)", "GPUs", lo=1,
          hi=131072),
    Param("layout", "str", None, "parallel layout, e.g. tp=8,pp=4,dp=512 (also ep, cp; the "
          "product is the GPU count; default tp=8,pp=16,dp=128)", metavar="LAYOUT"),
    gpu("h100-sxm", "GPU id of the failure profile"),
)


def default_layout(gpus: int) -> str:
    """The classic layout's shape at another GPU count: TP 8 inside a node and PP 16 kept (the
    largest divisors of 8 and 16 that the count allows), data parallelism taking the rest."""
    from math import gcd

    tp = gcd(gpus, 8)
    pp = gcd(gpus // tp, 16)
    return f"tp={tp},pp={pp},dp={gpus // (tp * pp)}"


def build(opts: dict[str, Any]) -> Any:
    from ..analytic.blast import parse_layout

    if opts.get("layout"):  # the same parser as `reliability blast-radius --layout`
        lay = parse_layout(opts["layout"], gpus=opts.get("gpus"))
        gpus, layout = lay.world, opts["layout"]
    else:
        gpus = opts.get("gpus") or DEFAULTS["gpus"]
        layout = default_layout(gpus)
    if gpus % 8:  # the failure rates are priced per whole 8-GPU host
        raise BadInput(f"--gpus: the job must fill whole 8-GPU nodes, got {gpus:,} GPUs")
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
        ("Where are the hidden single points of failure?", _spof_answer(res)),
    )
    assumptions = ("GPU, host, network and software rates from Llama 3's Table 5 counts.",
                   "Rack, switch, power, storage, scheduler rates are planning assumptions "
                   "(marked in the data; override the data file).",
                   f"{h.gpus_per_node} GPUs/node, {h.nodes_per_rack} nodes/rack, "
                   f"{h.nodes_per_leaf} nodes/leaf; Megatron rank order tp-cp-ep-dp-pp.")
    return type(rep)(rep.title, rep.sections, {"question": "blast-radius", **rep.data},
                     warnings=rep.warnings, question=PROMPT, assumptions=assumptions,
                     followups=fol)


def _spof_answer(res: Any) -> str:
    """The shared services that stop the whole job, with their rates and GPU-hours, and the
    ones that only hold up restarts (from the fault table; rates marked as assumptions there)."""
    rows = {f.component: f for f in res.faults}
    stop = [rows[c] for c in res.spofs if c in rows]
    restart = [f for f in res.faults if not f.stops_job and f.note and "restart" in f.note]
    parts = [f"{f.label}: {f.rate_per_day * 365:.1f} a year, {f.gpu_hours_per_month:,.0f} "
             "GPU-hours a month" for f in stop]
    txt = ("Shared services, each one failure domain for the whole job: " + "; ".join(parts)
           + ". Spares and elastic DP do not help against them; redundancy of the service does "
           "(standby SM, replicated store, two resolvers).")
    if restart:
        txt += (" Not stopping a running job but holding up every restart that overlaps an "
                "outage: " + ", ".join(f.label for f in restart) + ".")
    return txt + " A spine switch or one PDU of an A/B pair costs bandwidth or nothing."
