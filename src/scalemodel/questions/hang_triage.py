"""hang-triage: a real gloo job hangs; find the rank and the collective from per-rank traces."""

from __future__ import annotations

from typing import Any

from ..derive import Headline, Report, Section, Table
from ..errors import BadInput
from .params import Param

PROMPT = ("The job hangs: no crash, no log line, every GPU shows 100% utilisation. Find the "
          "rank at fault and the collective it broke, from per-rank collective traces.")

DEFAULTS = {"ranks": 4, "scenario": "order-mismatch"}

PARAMS: tuple[Param, ...] = (
    Param("live", "bool", False, "run the hang again here (real gloo processes) instead of reading the bundled recording"),
    Param("ranks", "int", DEFAULTS["ranks"], "processes of the hanging job (other than the recording's 4 only with --live)", "ranks", lo=2, hi=64),
)


def build(opts: dict[str, Any]) -> Report:
    from ..live.triage_run import recorded_or_live
    from ..traces.hang import analyse_hang
    from ..traces.load import load_dir

    ranks, live = int(opts.get("ranks") or DEFAULTS["ranks"]), bool(opts.get("live"))
    if ranks != DEFAULTS["ranks"] and not live:
        raise BadInput(f"--ranks {ranks}: the bundled recording has {DEFAULTS['ranks']} ranks; "
                       "add --live to run the hang with another count")
    out, status, how, par = recorded_or_live(DEFAULTS["scenario"], ranks, live)
    n, bad = par["ranks"], par["fault_rank"]
    results = {fmt: analyse_hang(load_dir(out, fmt), n) for fmt in ("trace", "fr")}
    t, f = results["trace"], results["fr"]
    s1 = Section(
        "1. A real hang",
        text=(f"{n} gloo processes run a training-like loop: a gradient "
              "all-reduce on the world group, then a metrics all-reduce on a second group. From "
              f"step {par['fault_step']}, rank {bad} calls the second group's collective first. "
              "Every rank "
              "blocks inside a collective (on a GPU, NCCL kernels spin, so utilisation reads "
              f"100%) until the collective timeout fires. The traces analysed here come from {how}."),
        tables=(Table("ranks", ("rank", "status", "wall s"),
                      tuple((x["rank"], x["status"], round(x["wall_s"], 2)) for x in status)),))
    s2 = Section(
        "2. Triage from scalemodel traces and from Flight Recorder dumps",
        text="\n".join(f"- {e}" for e in t.evidence),
        headlines=(Headline("verdict (trace)", t.verdict),
                   Headline("rank(s) (trace)", ", ".join(map(str, t.ranks))),
                   Headline("group / seq (trace)", f"{t.group} #{t.seq}"),
                   Headline("verdict (Flight Recorder)", f.verdict),
                   Headline("rank(s) (Flight Recorder)", ", ".join(map(str, f.ranks))),
                   Headline("group / seq (Flight Recorder)", f"{f.group_label} #{f.seq}")))
    s3 = Section(
        "3. The method",
        text=("For each process group, line up every member's collectives by sequence number and "
              "find the first number where they disagree: some members never arrived, or they "
              "arrived with a different op, size or dtype. Culprits are the minority by vote "
              "(PyTorch's analyser compares against the first rank it reads, so in a 3-vs-1 "
              "mismatch it can blame the three). A rank that never arrived is dead (no file, "
              "heartbeats stop), stuck outside collectives (alive, nothing pending) or waiting "
              "in another group's collective (order mismatch)."))
    fol = ((f"What if rank {bad} died instead?", "Its file is missing or its heartbeats stop "
            "before the others got stuck: verdict dead-rank (the live test suite runs it)."),
           ("What if the sizes differ?", "gloo does not check sizes: the matching ranks may "
            "complete and a peer aborts; the fingerprints at that sequence number still differ, "
            "verdict size-mismatch, culprit by vote."),
           ("Why is the Flight Recorder enough here, on gloo?", "It records sequence ids, ops, "
            "sizes and groups, though no completion state or durations; the divergence point "
            "needs only those."),
           ("How do you get dumps on NCCL?", "TORCH_FR_BUFFER_SIZE>0 and "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1; the watchdog writes one per rank at timeout."),
           ("Does it scale?", "The analyser is linear in records; 16,384 synthetic dumps are "
            "triaged in seconds (bench/bench_reliability.py)."))
    return Report("hang-triage: a real gloo hang, found by rank and collective", (s1, s2, s3),
                  {"question": "hang-triage", "trace": t.to_dict(), "flight_recorder": f.to_dict(),
                   "out": out}, question=PROMPT,
                  assumptions=("Real torch.distributed gloo processes on this machine.",
                               f"Collective timeout {par['pg_timeout_s']:g} s, so the hang "
                               "resolves into errors."),
                  followups=fol)
