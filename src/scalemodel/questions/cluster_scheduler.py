"""cluster-scheduler: design a GPU cluster scheduler, then replay real and synthetic traces."""

from __future__ import annotations

from typing import Any

from ..derive import Headline, Report, Section, Table
from ..sim.cluster import run as sr
from ..sim.cluster.workload import synthetic_defaults
from ..traces.jobs import contract_defaults
from ..units import fmt_time
from ..views.cluster import compare_table
from .params import Param

PROMPT = (
    "Design the scheduler for a GPU cluster that runs large synchronous training jobs next to "
    "many small ones: gang scheduling, topology-aware placement, preemption that respects "
    "checkpoints, team quotas. Fragmentation is eating about 20% of the GPUs: what do you do?"
)

DEFAULTS = {"nodes": 16, "time_scale": 8.0, "synthetic_jobs": 3000, "synthetic_nodes": 64,
            "seed": 0, "mix_jobs": 5000, "mix_nodes": 32}

PARAMS: tuple[Param, ...] = (
    Param("nodes", "int", DEFAULTS["nodes"], "nodes of the trace-replay cluster", "nodes", lo=1, hi=16384),
    Param("gpus", "int", None, "GPUs of the synthetic cluster (default: 64 nodes)", "GPUs", lo=1, hi=131072),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    gpn = sr.ClusterConfig().gpus_per_node
    if opts.get("gpus"):
        o["synthetic_nodes"] = max(1, opts["gpus"] // gpn)
    syn = synthetic_defaults()
    con = contract_defaults()
    cfg_a = sr.ClusterConfig(nodes=o["nodes"])
    wl_a = sr.load_workload("alibaba-v2023", cfg_a.capacity, time_scale=o["time_scale"])
    res_a = sr.compare(wl_a, cfg_a)
    # the real trace's span: arrivals scaled back to trace time, to the last pod's end
    first = min(j.submit_s for j in wl_a.jobs) * o["time_scale"]
    span_days = (max(j.submit_s * o["time_scale"] + j.duration_s for j in wl_a.jobs)
                 - first) / 86400
    cfg_s = sr.ClusterConfig(nodes=o["synthetic_nodes"])
    wl_s = sr.load_workload("synthetic", cfg_s.capacity, jobs=o["synthetic_jobs"], seed=o["seed"])
    res_s = sr.compare(wl_s, cfg_s)
    by = {r.policy: r for r in res_s}
    nowait_s = sr.no_wait_utilization(wl_s, cfg_s.capacity)
    cfg_m = sr.ClusterConfig(nodes=o["mix_nodes"])
    mix = sr.trace_size_mix()
    wl_m = sr.load_workload("alibaba-mix", cfg_m.capacity, jobs=o["mix_jobs"], seed=o["seed"])
    bm = {p: sr.run_policy(wl_m, p, cfg_m) for p in ("naive", "backfill", "fragmentation")}

    s1 = Section(
        "1. The design in one paragraph",
        text=("Admission and placement are separate decisions. Admission (Kueue-like) decides "
              "when a whole job may start: per-team nominal quotas in a cohort, borrowing of "
              "idle quota, reclaim by preempting borrowers. Placement decides where: a gang "
              "starts all-or-nothing, inside one NVLink domain (a node) when it fits, inside "
              "one rack otherwise, spread only as a last resort with a step-time penalty. "
              "Ordering is priority then age, with EASY backfill so small jobs fill holes "
              "without delaying the head's reservation. Preemption picks whole gangs, lowest "
              "priority first and least work lost; every job carries a checkpoint contract "
              "(interval, save cost, restore cost, grace period) so the scheduler knows the "
              "price of each victim. Each piece below is a policy of the simulator, replayed on "
              "the same trace."),
    )
    s2 = Section(
        f"2. Replay of the Alibaba GPU trace (v2023) on {cfg_a.capacity} GPUs",
        text=(f"{len(wl_a.jobs):,} pods replayed ({len(wl_a.rejects):,} not replayable: CPU-only "
              f"or never scheduled), arrivals compressed {o['time_scale']:g}x to load a "
              f"{cfg_a.nodes}-node cluster. Every pod fits in one node, so topology placement "
              "has nothing to improve here and spread jobs stay at 0; queueing is where the "
              "policies differ. Utilisation is low over the makespan because a few pods run "
              f"for the whole {span_days:.0f}-day trace."),
        tables=(compare_table(res_a),),
    )
    s3 = Section(
        f"3. Synthetic large-training workload on {cfg_s.capacity} GPUs",
        text=(f"{wl_s.name}: sizes 1 to {cfg_s.capacity} GPUs with a heavy tail, log-normal "
              f"run times, Poisson arrivals at {syn['offered_load']:.0%} offered load "
              "(arrival rate = load x GPUs / mean GPU-seconds of the drawn jobs), "
              f"{syn['high_priority_fraction']:.0%} high priority, {syn['teams']:.0f} teams. "
              "Utilisation and fragmentation are read over the arrival window, where the "
              "offered load applies; the drain after the last arrival (long jobs finishing on "
              "an emptying cluster) is reported apart, as is the makespan figure that mixes "
              f"both. Below the offered load even with no queueing: {nowait_s:.1%} is what "
              "the window holds if every job started on arrival (jobs that arrive late run "
              "past its end, the cluster starts empty); whole-cluster gangs make the rest "
              "wait."),
        tables=(compare_table(res_s),),
    )
    nv, bf, fg = (bm[p] for p in ("naive", "backfill", "fragmentation"))
    s3b = Section(
        f"4. Fragmentation on the Alibaba trace's job-size mix ({cfg_m.capacity} GPUs)",
        text=(f"{wl_m.name}: job sizes drawn from the replayable pods of the trace "
              + ", ".join(f"{g} GPU {w:.2%}" for g, w in mix.items())
              + f", the same run times and calibration as above, {cfg_m.nodes} nodes of "
              f"{gpn} GPUs. Naive placement puts each job on the node with the most free GPUs "
              "(load spreading, Kubernetes' default LeastAllocated score): every node ends up "
              "partly used, and the whole-node jobs at the head of the queue find no node. "
              f"It strands {nv.fragmentation_arrivals:.1%} of the GPUs over the arrival "
              f"window (free, but unusable by the waiting head), utilisation "
              f"{nv.utilization_arrivals:.1%}; best fit strands "
              f"{bf.fragmentation_arrivals:.1%} ({bf.utilization_arrivals:.1%}), the "
              f"fragmentation-gradient (FGD) policy {fg.fragmentation_arrivals:.1%} "
              f"({fg.utilization_arrivals:.1%}). With whole GPUs and sizes that divide a node, "
              "best fit is already the packing FGD descends toward; FGD's gains in the paper "
              "come from GPU sharing (fractions of one GPU: 37.8% of the trace's tasks) and "
              "GPU-type constraints, which this simulator does not model (docs/scheduler.md)."),
        tables=(Table("naive vs best fit vs FGD", sr.COMPARE_COLUMNS, sr.compare_rows(
            [nv, bf, fg])),),
    )
    pr = by["preempt"]
    s4 = Section("5. Where the GPU time goes under preemption", derivation=sr.accounting(pr),
                 headlines=(Headline("preemptions", pr.preemptions),
                            Headline("lost GPU-hours", round(pr.lost_gpu_hours, 1))))
    fifo = by["fifo"]
    gain = fifo.queue_delay_mean_s / max(by["backfill"].queue_delay_mean_s, 1e-9)
    followups = (
        ("Why not let a gang start with the GPUs that are free and wait for the rest?",
         "Partly started gangs hold GPUs while doing nothing and can deadlock each other; all "
         "policies here are all-or-nothing, and the gang row shows the cost of skipping the "
         f"head instead: mean queueing {by['gang'].queue_delay_mean_s:,.0f} s overall but the "
         "largest jobs wait longest (by-size table in `scalemodel cluster simulate`)."),
        ("What does backfill buy over strict FIFO?",
         f"On the synthetic workload mean queueing delay falls from "
         f"{fifo.queue_delay_mean_s:,.0f} s to {by['backfill'].queue_delay_mean_s:,.0f} s "
         f"({gain:.1f}x), because small jobs fill holes before the head's reservation."),
        ("How do you measure fragmentation, and what fixes it?",
         "As the free GPUs that the job at the head of the queue cannot use, over time, as a "
         "fraction of capacity, read over the arrival window. On the trace's size mix naive "
         f"spreading strands {nv.fragmentation_arrivals:.1%}, best fit "
         f"{bf.fragmentation_arrivals:.1%}, FGD {fg.fragmentation_arrivals:.1%}. The levers: "
         "pack small jobs (best fit), give big jobs whole nodes, keep a few nodes whole for "
         "them; FGD-style scoring pays off when GPUs are shared fractionally."),
        ("What does preemption cost, and how do checkpoint contracts change it?",
         f"{pr.preemptions:,} preemptions lost {pr.lost_gpu_hours:,.0f} GPU-hours "
         f"({pr.lost_gpu_s / max(pr.allocated_gpu_s, 1e-9):.1%} of allocated time) with a "
         f"{fmt_time(con['checkpoint_interval_s'])} checkpoint interval; a victim loses on "
         "average half an interval plus a restore. A grace period at least as long as the save "
         f"makes the loss the save alone (--grace {con['checkpoint_cost_s']:g})."),
        ("Topology: when does it matter?",
         f"Spread gangs on the synthetic run: {by['backfill'].spread_jobs:,} with best-fit vs "
         f"{by['topology'].spread_jobs:,} with rack-aware placement; each spread gang runs "
         f"{cfg_s.spread_penalty:.0%} slower here (a stated factor; derive it for your model "
         "with the collectives model)."),
        ("How do quotas stay fair without wasting idle GPUs?",
         f"Borrowing lets a team use idle quota; reclaim preempts borrowers when the owner "
         f"returns. Jain's index over teams is {by['quota'].quota_fairness_jain:.3f} with "
         f"{by['quota'].preemptions:,} reclaim preemptions."),
    )
    return Report(
        "cluster-scheduler: a GPU cluster scheduler, replayed",
        (s1, s2, s3, s3b, s4),
        {"alibaba": [r.to_dict() for r in res_a], "synthetic": [r.to_dict() for r in res_s],
         "synthetic_no_wait_utilization": nowait_s, "alibaba_size_mix": mix,
         "alibaba_mix": [r.to_dict() for r in bm.values()]},
        question=PROMPT,
        assumptions=(
            "whole GPUs: a pod asking for part of a GPU gets a whole one",
            f"a node is one NVLink domain of {gpn} GPUs; racks of {cfg_a.nodes_per_rack} nodes; "
            f"+{cfg_a.spread_penalty:.0%} run time when a gang spans racks",
            "checkpoint contract when the trace is silent: " + "; ".join(sr.contract_sources()),
            "EASY backfill uses exact run times (an optimistic user estimate)",
        ),
        followups=followups,
    )
