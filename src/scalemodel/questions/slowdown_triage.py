"""slowdown-triage: straggler vs fabric vs lost overlap, on real runs and a public trace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..derive import Report, Section, Table
from .params import Param

PROMPT = ("The run is suddenly half as fast. Is it a straggler, the fabric, or lost "
          "compute/communication overlap, and which rank or node?")

PARAMS: tuple[Param, ...] = (
    Param("live", "bool", False, "run the three slow jobs again here (real gloo processes) instead of reading the bundled recordings"),
)

def _alibaba_dir() -> Path:
    """The bundled extract of Alibaba's mini-batch-time trace, or the folder the user names."""
    from ..specs.sources import data_path

    return Path(os.environ.get("SCALEMODEL_ALIBABA_MINIBATCH",
                               str(data_path("traces/alibaba_minibatch"))))


def build(opts: dict[str, Any]) -> Report:
    from ..live.triage_run import recorded_or_live
    from ..traces.load import load_dir
    from ..traces.slow import SCORE_MIN, SLOW_MIN, Z_MAX, analyse_slow, analyse_step_table

    rows, secs, data = [], [], {"question": "slowdown-triage", "runs": {}}
    par = {}
    for sc in ("straggler", "slow-link", "lost-overlap"):
        out, _, how, par[sc] = recorded_or_live(sc, 4, bool(opts.get("live")))
        r = analyse_slow(load_dir(out, "trace"))
        rows.append((sc, r.verdict, ", ".join(map(str, r.ranks)) or "-", r.evidence[1]
                     if len(r.evidence) > 1 else r.evidence[0]))
        data["runs"][sc] = r.to_dict()
    st = data["runs"]["straggler"]["per_rank"]
    strag = [p for p in st if p["rank"] in data["runs"]["straggler"]["ranks"]]
    others = [p for p in st if p not in strag]
    busy = [(p["rank"], p["blocked_s"] / p["step_s"]) for p in st]
    secs.append(Section(
        "1. Three real slow runs, one analyser",
        text=(_runs_text(par) + " The analyser splits the "
              "steps where the median step time jumps and compares compute, collective time and "
              f"exposed (blocked) communication per rank. The traces come from {how}."),
        tables=(Table("", ("injected", "verdict", "ranks", "evidence"), tuple(rows)),)))
    secs.append(Section(
        "2. Busy in a collective is not working (the nvidia-smi trap)",
        text=("In the straggler run the fast ranks spend most of each step blocked inside the "
              "collective waiting for the slow one; on a GPU that wait is a spinning NCCL "
              "kernel, which nvidia-smi counts as 100% utilisation. The straggler itself "
              "spends the least time in collectives."),
        tables=(Table("share of the step blocked in collectives (straggler run)",
                      ("rank", "blocked / step"), tuple(busy)),)))
    if _alibaba_dir().is_dir():
        arows = []
        for j in sorted(_alibaba_dir().glob("job_*_norm.csv")):
            a = analyse_step_table(j)
            arows.append((j.name, a.verdict, ", ".join(map(str, a.ranks)) or "-"))
            data.setdefault("alibaba", {})[j.name] = a.to_dict()
        wrows = []
        for job, a in data.get("alibaba", {}).items():
            for w in a["per_rank"]:
                wrows.append((job, w["worker"], w["rank"], w["placed_on"] or "-",
                              w["median"], f"{100 * w['slowdown']:+.1f}%", w["z"],
                              w["individual_score"], "slow" if w["flagged"] else "ok"))
        secs.append(Section("3. Alibaba PAI mini-batch times (real, per worker)",
                            text=("The rule: a worker is slow when its median step is at least "
                                  f"{SLOW_MIN:.0%} above the median worker and its modified "
                                  f"z-score exceeds {Z_MAX:g} (Iglewicz-Hoaglin), the spread "
                                  "being the larger of the workers' MAD and the standard error "
                                  "of one worker's median from its own step-to-step noise; so "
                                  "workers 10% slow for the whole run are caught. Episodes: "
                                  "each worker's best window over its worst, below NVRx's "
                                  f"{SCORE_MIN:g}."),
                            tables=(Table("", ("job", "verdict", "workers"), tuple(arows)),
                                    Table("per worker", ("job", "worker", "rank", "placed on",
                                                         "median step", "vs median worker",
                                                         "z", "best / worst window", "status"),
                                          tuple(wrows)))))
    fol = (("Why exclude collective time from straggler scores?",
            f"Fast ranks wait in the collective: here rank(s) "
            f"{[p['rank'] for p in others]} block {sum(p['blocked_s'] for p in others) / max(len(others), 1) * 1e3:.0f} ms "
            f"per step vs {sum(p['blocked_s'] for p in strag) / max(len(strag), 1) * 1e3:.0f} ms "
            "on the straggler; NVRx excludes NCCL kernels for this reason."),
           ("How do you localise a fabric problem?", "Collective time rises on all ranks of the "
            "affected groups at once; then per-link/pair bandwidth tests (nccl-tests) narrow it."),
           ("What causes lost overlap?", "A code or config change: bucket sizes, a stream sync, "
            "FSDP prefetch off; compare traces before and after."),
           ("Which signal is better than GPU utilisation?", "Per-rank compute time and blocked "
            "time per step, SM activity/tensor-core counters, and collective bus bandwidth."))
    return Report("slowdown-triage: straggler, fabric or lost overlap", tuple(secs), data,
                  question=PROMPT, followups=fol,
                  assumptions=("Compute is a timed sleep standing in for kernels; gloo on CPU.",
                               f"Scores: robust z (median/MAD) and NVRx's {SCORE_MIN:g} threshold."))


def _runs_text(par: dict[str, dict[str, Any]]) -> str:
    """How the runs were set up, from their parameters (one sentence when they agree). Only the
    straggler slows one rank; slow-link and lost-overlap act on every rank."""
    keys = {(p["ranks"], p["fault_step"]) for p in par.values()}
    one = f"on rank {par['straggler']['fault_rank']} in the straggler run, on every rank in the others"
    if len(keys) == 1:
        n, step = keys.pop()
        return f"Each run is {n} gloo ranks; the fault starts at step {step} ({one})."
    return " ".join(f"{sc}: {p['ranks']} gloo ranks, fault from step {p['fault_step']}."
                    for sc, p in par.items()) + f" The fault is {one}."
