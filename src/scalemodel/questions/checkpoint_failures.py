"""checkpoint-failures: job MTBF at 16k GPUs, Young/Daly interval, simulated goodput, async."""

from __future__ import annotations

from typing import Any

from ..sim.checkpoint import checkpoint_study, pick_profile
from ..units import fmt_time
from ..views.reliability import checkpoint_report
from .params import Param, gpu

PROMPT = ("Something fails every few hours on a 16,384-GPU run (Llama 3: 466 interruptions in "
          "54 days). How often do you checkpoint, what goodput do you get, and what else do you "
          "change: async or in-memory checkpoints, faster restarts, smaller jobs?")

DEFAULTS = {"gpus": 16384, "gpu": "h100-sxm", "checkpoint_write_s": 60.0, "restart_s": 600.0}

PARAMS: tuple[Param, ...] = (
    Param("gpus", "int", DEFAULTS["gpus"], "GPUs in the job", "GPUs", lo=8, hi=131072),
    gpu(DEFAULTS["gpu"]),
    Param("checkpoint_write_s", "float", DEFAULTS["checkpoint_write_s"], "time one checkpoint blocks training", "s", lo=0.0, hi=86400.0),
    Param("restart_s", "float", DEFAULTS["restart_s"], "relaunch, NCCL init and reload after a failure", "s", lo=0.0, hi=86400.0),
)


def build(opts: dict[str, Any]) -> Any:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in
                    ("gpus", "gpu", "model", "optimizer", "checkpoint_write_s", "restart_s")}
    st = checkpoint_study(gpus=o["gpus"], gpu=o["gpu"], checkpoint_write_s=o["checkpoint_write_s"],
                          restart_s=o["restart_s"], trials=200, sweep=True)
    rep = checkpoint_report(st, title=f"checkpoint-failures: {o['gpus']:,} x {o['gpu']}")
    r = st.result
    modes = {m: (s, rr, t, g) for m, s, rr, t, g in st.mode_rows}
    big = st.scale_rows[-1]
    tau_q = 60.0  # the interval the first follow-up asks about
    fol = (
        (f"Why not checkpoint every {fmt_time(tau_q)}?",
         f"Each checkpoint stalls {r.stall_s:g} s; at {fmt_time(tau_q)} intervals "
         f"{r.stall_s / (tau_q + r.stall_s):.0%} of the time is spent writing. The optimum "
         f"balances stall (delta/tau) against rework (tau/2M): {r.daly_interval_s:,.0f} s here."),
        ("What does async checkpointing buy?",
         f"The stall drops to {modes['async'][0]:.1f} s; the optimum moves to "
         f"{modes['async'][2]:,.0f} s and goodput from {modes['sync'][3]:.3f} to "
         f"{modes['async'][3]:.3f}, even though a failure during the write loses one more write."),
        ("And in-memory checkpoints (Gemini)?",
         f"Stall {modes['in-memory'][0]:.1f} s and restart {modes['in-memory'][1]:.0f} s: goodput "
         f"{modes['in-memory'][3]:.3f}. Restart time, not write time, dominates at this MTBF."),
        ("What happens at 128k GPUs?",
         f"MTBF {big[1] / 60:.0f} min, Daly interval {big[2]:,.0f} s, goodput {big[3]:.3f} with "
         "the same write and restart: restart cost must shrink with scale."),
        ("Is the exponential assumption safe?",
         f"With Weibull k={st.sim_weibull.shape:g} failures (bunching after repairs) the simulated "
         f"goodput at Daly's interval is {st.sim_weibull.goodput:.3f} vs {r.goodput:.3f} analytic; "
         "the optimum interval barely moves, so the formula is a good starting point."),
    )
    extra, budget = _budget_section(r, o["gpus"])
    prof, _ = pick_profile(o["gpu"], None)
    if prof.counted:
        rates = (f"Failure rates counted in {prof.label}, scaled by GPUs (GPU, software) and "
                 "hosts (host, network).")
    else:
        rates = (f"Failure rate {prof.rate_per_node_day:g} per node-day ({prof.label}), scaled "
                 "by the number of nodes.")
    assumptions = (rates,
                   f"Checkpoint write {fmt_time(o['checkpoint_write_s'])}, restart "
                   f"{fmt_time(o['restart_s'])} (relaunch, NCCL init, reload).",
                   "Daly's model: failures can hit during restarts and checkpoints.")
    return type(rep)(rep.title, (*rep.sections, extra),
                     {"question": "checkpoint-failures", **rep.data, "budget": budget},
                     warnings=rep.warnings, question=PROMPT, assumptions=assumptions,
                     followups=fol, plot=rep.plot)


def _budget_section(r: Any, gpus: int) -> tuple[Any, dict[str, float]]:
    """Failures as a monthly budget line, automated vs manual recovery, and what an undetected
    straggler costs by how long it takes to find it."""
    from ..analytic.reliability import best_interval, goodput
    from ..derive import Derivation, Section, Table
    from ..specs.sources import load_toml

    a = load_toml("reliability.toml")["automation"]
    manual = float(a["manual_response_s"]["value"])
    x = float(a["straggler_slowdown"]["value"])
    hours = float(a["hours_per_month"]["value"])
    M, delta, R = r.job_mtbf_s, r.stall_s, r.restart_s
    d = Derivation("failures as a budget line")
    d.given("GPUs", "n", gpus, "GPU")
    d.given("job MTBF", "M", M, "s")
    d.given("checkpoint stall", "delta", delta, "s")
    d.given("automated restart (detect, relaunch, reload)", "R", R, "s")
    d.given("extra time when a person restarts it", "R_h", manual, "s",
            note=a["manual_response_s"]["note"])
    d.given("hours in a month", "H", hours, "h")
    g_auto = d.given("goodput, automated (Daly, best interval)", "g_a",
                     goodput(best_interval(delta, R, M), delta, R, M), "1")
    g_man = d.given("goodput, manual restarts (Daly, best interval)", "g_m",
                    goodput(best_interval(delta, R + manual, M), delta, R + manual, M), "1")
    lost_a = d.calc("GPU-hours lost a month, automated", "L_a", "(1 - g_a) * n * H", "GPU-h")
    lost_m = d.calc("GPU-hours lost a month, manual", "L_m", "(1 - g_m) * n * H", "GPU-h")
    d.calc("what the automation saves a month", "S", "L_m - L_a", "GPU-h")
    d.given("straggler slowdown", "x", x, "1", note=a["straggler_slowdown"]["note"])
    d.calc("GPU-hours one undetected straggler costs per hour", "c_s", "x * n", "GPU-h/h")
    rows = tuple((label, x * gpus * sec / 3600) for label, sec in
                 (("1 min (a per-step z-score rule, traces/slow.py)", 60),
                  ("10 min", 600), ("1 hour (a dashboard someone watches)", 3600),
                  ("1 day (found when someone asks why the run is late)", 86400)))
    sec = Section(
        "Failures as a budget line, and the stragglers that never fail",
        text=(f"Lost goodput is a line in the monthly GPU budget: {lost_a:,.0f} GPU-hours a "
              f"month with automated restarts ({1 - g_auto:.1%} of {gpus:,} GPUs), "
              f"{lost_m:,.0f} when a person has to restart each failure ({1 - g_man:.1%}). "
              "The automation behind the first figure: health checks that drain bad nodes, a "
              "watchdog that kills hung collectives (NCCL timeout, Flight Recorder dump), "
              "automatic relaunch from the last checkpoint onto spares, and a per-rank "
              "step-time rule that flags stragglers. A straggler fails nothing but holds every "
              f"synchronous step back: at {x:.0%} slow it costs {x * gpus:,.0f} GPU-hours per "
              "hour until found, so detection time is the budget item."),
        tables=(Table("an undetected straggler, by time to detect", ("found after",
                                                                     "GPU-hours lost"), rows),),
        derivation=d)
    return sec, {"lost_gpu_hours_per_month_automated": lost_a,
                 "lost_gpu_hours_per_month_manual": lost_m, "goodput_automated": g_auto,
                 "goodput_manual": g_man, "straggler_gpu_hours_per_hour": x * gpus}
