"""roce-vs-ib: RoCE or InfiniBand at 400 Gb/s, a recommendation and what flips it."""

from __future__ import annotations

from typing import Any

from ..analytic.collectives import collective_cost, make_fabric, make_group
from ..analytic.network_choice import decide
from ..derive import Headline, Report, Section, Table
from ..units import fmt_rate, fmt_time
from .params import Param

PROMPT = (
    "You are building the backend network of a GPU cluster at 400 Gb/s per GPU. RoCE or "
    "InfiniBand? Give a recommendation for the situation, and say what would change it."
)

DEFAULTS = {"gpus": 16384, "workload": "training", "a2a_share": 0.1, "ops": "ethernet",
            "existing_ethernet": "yes", "budget": "normal", "vendor": "single-ok"}

PARAMS: tuple[Param, ...] = (
    Param("gpus", "int", DEFAULTS["gpus"], "GPUs in the cluster", "GPUs", lo=8, hi=131072),
    Param("workload", "str", DEFAULTS["workload"], "what the cluster runs", choices=("training", "inference", "mixed")),
    Param("a2a_share", "float", DEFAULTS["a2a_share"], "share of step time in all-to-all (MoE)", lo=0.0, hi=1.0),
    Param("ops", "str", DEFAULTS["ops"], "the team's experience", choices=("ib", "ethernet", "none")),
    Param("existing_ethernet", "str", DEFAULTS["existing_ethernet"], "an Ethernet fabric already run", choices=("yes", "no")),
    Param("budget", "str", DEFAULTS["budget"], "budget", choices=("tight", "normal")),
    Param("vendor", "str", DEFAULTS["vendor"], "vendor policy", choices=("single-ok", "multi-vendor")),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    dec = decide(o)
    contrib = Table("What pushed the decision (points > 0 toward InfiniBand, < 0 toward RoCE)",
                    ("input", "value", "points", "why", "source"),
                    tuple((i, str(dec.inputs[i]), p, r, s) for i, p, r, s in dec.contributions))
    s1 = Section(
        f"Recommendation: {dec.recommendation}",
        text=("A decision model, not a benchmark: at 400G both fabrics deliver the same per-NIC "
              "bandwidth to NCCL, so the choice turns on who operates it, how much many-to-many "
              "traffic it must carry, scale, supply and money. Each factor and its weight is "
              "data (specs/data/roce_ib.toml); the facts behind them are cited."),
        headlines=(Headline("recommendation", dec.recommendation),
                   Headline("score (> 0 InfiniBand)", round(dec.score, 2))),
        tables=(contrib,))
    s2 = Section("What would flip it",
                 text="\n".join(f"- {f}" for f in dec.flips) or "- nothing within the inputs' "
                 "ranges: the recommendation is robust for this situation")
    # the same job on both fabrics, as the engine sees them: the wire is not the difference
    rows, nic_bw = [], {}
    for link in ("ndr-400", "roce-400"):
        fab = make_fabric("nvlink4", link)
        nic_bw[link] = fab.inter.bytes_per_s_per_direction * fab.eff_inter
        g = make_group(64, fab, 8)
        ar = collective_cost("all-reduce", 2.0**30, g, fab, algorithm="ring", proto="simple")
        a2a = collective_cost("all-to-all", 2.0**28, g, fab, algorithm="direct", proto="simple")
        rows.append((link, ar.time_s, ar.busbw_bytes_per_s, a2a.time_s))
    s3 = Section("On paper the wire is a tie",
                 text="\n".join(f"- {t} [{s}]" for t, s in dec.facts) +
                 "\n- The cost model prices both at the same stated NIC efficiency: any gap in "
                 "practice comes from congestion control and routing under load, which this "
                 "table cannot show.",
                 tables=(Table("8 nodes x 8 H100, ring all-reduce 1 GiB and all-to-all 256 MiB",
                               ("NIC", "all-reduce (ms)", "busbw", "all-to-all (ms)"),
                               tuple((n, 1e3 * ar, fmt_rate(bw), 1e3 * a2a)
                                     for n, ar, bw, a2a in rows)),))
    moe = decide(o | {"a2a_share": 0.6})
    followups = (
        ("What if it is an MoE shop with heavy all-to-all?",
         f"At a2a share 0.6 the model says {moe.recommendation} (score {moe.score:+.2f}): "
         "adaptive routing on IB copes with incast; RoCE needs QP scaling and enhanced ECMP."),
        ("Why did Meta turn DCQCN off?",
         "Default DCQCN settings hurt at 400G and firmware brought CNP bugs; Meta runs PFC only "
         "and schedules traffic in the collective library (SIGCOMM 2024)."),
        ("What does RoCE need that IB gives for free?",
         "A lossless class (PFC, with pause storms and deadlock risk), ECN thresholds, congestion "
         "control tuning per speed, and hash entropy for few fat flows."),
        ("And Spectrum-X?",
         "Ethernet with adaptive routing and congestion control in the SuperNIC; NVIDIA claims "
         "95% throughput at Colossus scale vs ~60% for standard Ethernet (vendor claim)."),
        ("How would you test the choice before buying?",
         "Run nccl-tests all_reduce and alltoall at the target scale under a realistic mix with "
         "NCCL_ALGO=RING; both should approach "
         + " and ".join(f"~{fmt_rate(v)} ({k})" for k, v in nic_bw.items())
         + f" per NIC, and the ring all-reduce here would take about {fmt_time(rows[0][1])}."),
    )
    return Report(f"roce-vs-ib: {int(dec.inputs['gpus']):,} GPUs, {dec.inputs['workload']}",
                  (s1, s2, s3), {"question": "roce-vs-ib", "options": o, **dec.to_dict()},
                  question=PROMPT,
                  assumptions=tuple(f"{k} = {v}" for k, v in dec.inputs.items()),
                  followups=followups)
