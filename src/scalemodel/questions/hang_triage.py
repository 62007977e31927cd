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
        tables=(Table("ranks", ("rank", "state in the traces", "last collective entered",
                                "process exit", "wall s"),
                      tuple(_rank_row(x, t) for x in status)),))
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
    s4 = _triage_order(t, f, n, par)
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
    return Report("hang-triage: a real gloo hang, found by rank and collective", (s1, s2, s3, s4),
                  {"question": "hang-triage", "trace": t.to_dict(), "flight_recorder": f.to_dict(),
                   "rank_states": [_rank_row(x, t)[1] for x in status],
                   "out": out}, question=PROMPT,
                  assumptions=("Real torch.distributed gloo processes on this machine.",
                               f"Collective timeout {par['pg_timeout_s']:g} s, so the hang "
                               "resolves into errors."),
                  followups=fol)


def _rank_row(x: dict[str, Any], t: Any) -> tuple[Any, ...]:
    """One rank: what the traces say it was doing (hung where it blocked, culprit where the
    analysis blames it), apart from how its process ended."""
    pr = next((p for p in t.per_rank if p["rank"] == x["rank"]), {})
    where = (f"{pr.get('last_op')} on {pr.get('last_group')} #{pr.get('last_seq')}"
             if pr.get("last_op") else "-")
    if x["rank"] in t.ranks:
        state = f"culprit ({t.verdict})"
    elif pr and not pr.get("last_completed", True) and not pr.get("finished", False):
        state = "hung (blocked until the timeout)"
    elif pr.get("finished"):
        state = "finished"
    else:
        state = "idle outside collectives"
    exit_ = "exited after the timeout" if x["status"] == "ok" and not pr.get("finished", True) \
        else x["status"]
    return (x["rank"], state, where, exit_, round(x["wall_s"], 2))


def _triage_order(t: Any, f: Any, n: int, par: dict[str, Any]) -> Section:
    """The order to look at signals in, what each rules out, and what it showed here."""
    hung = sum(1 for p in t.per_rank if not p.get("last_completed", True)
               and not p.get("finished", False))
    dead = [p["rank"] for p in t.per_rank if not p.get("records")]
    frontier = {p["rank"]: p.get("frontier", {}) for p in t.per_rank}
    groups = sorted({g for fr in frontier.values() for g in fr})
    spread = {g: sorted({fr.get(g) for fr in frontier.values() if g in fr}) for g in groups}
    disagree = any(len(v) > 1 for v in spread.values())
    rows = (
        ("1", "step heartbeat / last log line per rank",
         "slowness: no rank finished a step for many step times, so it is a hang, not a slow run",
         f"{hung} of {n} ranks blocked inside a collective, none completing"),
        ("2", "which processes are alive (heartbeats, exit codes, trace files present)",
         "a dead rank or node (one missing or stopped early: verdict dead-rank, replace it)",
         "dead: " + (", ".join(map(str, dead)) if dead else "none")),
        ("3", "per-group sequence numbers (Flight Recorder / traces): the first one where members "
              "disagree",
         "the program or the fabric: members that all entered the same collective point at the "
         "network or NCCL; members that disagree point at the program",
         "; ".join(f"{g}: seq {', '.join(map(str, v))}" for g, v in spread.items())),
        ("4", "the culprit's op, size and group at that sequence number",
         "a size or dtype mismatch vs an order mismatch vs a rank stuck outside collectives",
         f"{t.verdict}: rank(s) {', '.join(map(str, t.ranks)) or '-'} at {t.group} #{t.seq} "
         f"({t.op}); Flight Recorder agrees: {f.verdict}"),
        ("5", "the culprit's Python stack (py-spy dump) and the code path of the group",
         "which line issued the collective out of order (a rank-dependent branch)",
         f"rank {par.get('fault_rank')} took the other group first from step "
         f"{par.get('fault_step')}"),
        ("6", "only if all members arrived: nccl-tests on the group, NIC counters, ibstat",
         "a link or switch fault",
         "not needed: the members disagreed at step 3" if disagree else "run it: every member "
         "entered the same collective"),
    )
    return Section(
        "4. The triage order",
        text=("Cheapest signal first; each rules a class of cause out before the next is worth "
              "its cost. GPU utilisation is not on the list: a rank spinning in a collective "
              "reads 100% whether it works or waits."),
        tables=(Table("", ("step", "signal", "what it rules out", "here"), rows),))
