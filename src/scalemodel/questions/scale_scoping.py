"""scale-scoping: "tell me about the scale you ran", answered so that it holds at 4 or 4,000 GPUs."""

from __future__ import annotations

from typing import Any

from ..analytic.claims import check_claim, constants, scale_table
from ..derive import Report, Section, Table
from ._claim_common import check_section, claim_from_opts
from .params import Param, claim

PROMPT = (
    "Tell me about the largest training run you worked on. How many GPUs, what model, how many "
    "tokens, how long, and what did you own? The interviewer will check whether the numbers "
    "hang together, so the answer has to hold whether the run had 4 GPUs or 4,000."
)

DEFAULTS = {"model": "llama-3-70b", "gpu": "h100-sxm", "gpus": 1024, "tokens": 1.4e12,
            "days": 17.0, "mfu": None, "layout": None, "seq_len": 4096, "dtype": "bf16"}

PARAMS: tuple[Param, ...] = claim(
    "trained a 70B model on 1024 H100s for 1.4T tokens in 17 days", "llama-3-70b", 1024, "1.4T",
    "17")

LAYERS = (
    ("hardware and fabric", "GPU type, NVLink domain size, scale-out links per GPU",
     "GB/s per GPU on each fabric"),
    ("cluster and scheduler", "how the job got its GPUs, health checks, restarts",
     "interruptions survived, restart minutes"),
    ("training framework", "parallel layout, ZeRO stage, recompute, checkpointing",
     "layout, GB per GPU, checkpoint interval"),
    ("kernels and numerics", "attention kernel, precision, fused ops",
     "MFU, tokens/s per GPU"),
    ("data and evaluation", "tokens, mixture, sequence length", "tokens, days"),
)


def build(opts: dict[str, Any]) -> Report:
    c, notes = claim_from_opts(DEFAULTS, opts)
    r = check_claim(c)
    mk, fk = constants()["mfu"], constants()["failures"]
    typ = mk["typical_published"]
    s1 = check_section(f"1. The claim, checked: {c.model} on {c.gpus:,} x {r.gpu}", r)
    counts = sorted({4, 64, 512, 4096, c.gpus})
    s2 = Section(
        "2. The same work at 4 or 4,000 GPUs",
        text=("A scoping answer names the quantities that scale and the ones that do not. The "
              "work (6ND FLOPs) is fixed by the model and the tokens; days shrink with GPUs at "
              "a given MFU; memory decides the smallest GPU count; failures grow with GPU-days, "
              "so the checkpoint interval shrinks as the job grows. The table keeps the model "
              f"and tokens and solves for the days at a typical {typ:.0%} MFU."),
        tables=(scale_table(c, counts),),
    )
    s3 = Section(
        "3. The scoping framework",
        text=("Say which layers of the stack you owned and which you used, give the scale in "
              "four numbers (GPUs, model, tokens, days) plus the MFU, and tell one war story with "
              "numbers: what broke, how you found it, what it cost, what changed. Each layer has "
              "a figure that shows you were there."),
        tables=(Table("", ("layer", "what to say", "the number that proves it"), LAYERS),),
    )
    war = (f"At this scale expect ~{r.expected_interruptions:.0f} interruptions over "
           f"{c.days:g} days (one every {r.mean_time_between_interruptions_s / 3600:.0f} h at "
           f"Llama 3's rate); with a {constants()['checkpoint']['write_s']} s checkpoint stall "
           f"the best interval is {r.checkpoint_interval_s / 60:.0f} min and about "
           f"{r.lost_fraction:.1%} of the run is lost to checkpoints, rework and restarts.")
    s4 = Section("4. A war story with numbers", text=war)
    big = check_claim(type(c)(c.model, 4096, c.gpu, c.tokens, max(c.days * c.gpus / 4096, 0.01),
                              seq_len=c.seq_len, dtype=c.dtype))
    followups = (
        ("What MFU did you get, and how do you know?",
         f"Here {r.implied_mfu:.0%}: 6ND = {r.total_flops:.3g} FLOP over {c.gpus:,} GPUs x "
         f"{c.days:g} days against a {r.peak_flop_per_s / 1e12:.0f} TFLOP/s dense peak. Measure it "
         "from tokens/s, not from a profiler's busy time."),
        ("What changes at 4,096 GPUs?",
         f"The same tokens take {big.claim.days:.1f} days at the same MFU, but "
         f"~{big.expected_interruptions:.0f} interruptions are expected and the checkpoint interval "
         f"drops to {big.checkpoint_interval_s / 60:.0f} min; collectives cross more switch tiers."),
        ("Why not train on 4 GPUs?",
         f"{r.model} needs at least {r.min_gpus or 'more'} {r.gpu} to hold its training state, and "
         f"the work would take {r.days_at_typical_mfu * c.gpus / 4:,.0f} days on 4 at {typ:.0%} MFU."),
        ("What would make you doubt a candidate's numbers?",
         f"An MFU above the best published runs (~{mk['best_published']:.0%}), a GPU count that "
         "the model cannot fit on, weeks at thousands of GPUs with no failures, or tokens and "
         "days that disagree."),
        ("How do you scope a run you did not lead?",
         "Name the layer you owned and its number; give the run's scale as context and say you "
         "did not own it."),
    )
    assumptions = (
        "Compute = 6 x parameters x tokens (Kaplan et al. 2020); MFU against the dense peak.",
        f"Interruptions at Llama 3's unexpected-interruption rate per GPU-day "
        f"({fk['unexpected_interruptions']:,} in {fk['window_days']:g} days on "
        f"{fk['window_gpus']:,} GPUs); checkpoint interval by Young's formula.",
        f"Verdict thresholds: above {mk['stretched']:.0%} MFU stretched, above "
        f"{mk['implausible']:.0%} implausible (published: {mk['llama3_low']:.0%}-"
        f"{mk['best_published']:.0%}).",
    )
    data = {"question": "scale-scoping", "claim": r.to_dict(), "notes": notes,
            "implied_mfu": r.implied_mfu, "verdict": r.verdict}
    return Report(f"scale-scoping: {c.model} on {c.gpus:,} x {r.gpu}", (s1, s2, s3, s4), data,
                  warnings=tuple(notes) + r.notes, question=PROMPT, assumptions=assumptions,
                  followups=followups)
