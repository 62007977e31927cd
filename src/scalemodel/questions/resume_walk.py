"""resume-walk: a resume line for an infra role, checked by the claim checker."""

from __future__ import annotations

from typing import Any

from ..analytic.claims import Claim, check_claim, constants
from ..derive import Report, Section, Table
from ._claim_common import check_section, claim_from_opts
from .params import Param, claim

PROMPT = (
    "Walk me through your resume. One line says you trained a 70B model on 512 H100s for 2T "
    "tokens in 10 days. Which numbers on a line like that make it credible, which give "
    "inflation away, and what would you say to back it up?"
)

DEFAULTS = {"claim": "trained a 70B model on 512 H100s for 2T tokens in 10 days",
            "model": "70B", "gpu": "h100-sxm", "gpus": 512, "tokens": 2e12, "days": 10.0,
            "mfu": None, "layout": None, "seq_len": 4096, "dtype": "bf16"}

PARAMS: tuple[Param, ...] = claim(DEFAULTS["claim"], "70B", 512, "2T", "10")


def build(opts: dict[str, Any]) -> Report:
    merged = {k: v for k, v in opts.items() if v is not None}
    if "claim" not in merged and not any(k in merged for k in ("model", "gpus", "tokens", "days")):
        merged["claim"] = DEFAULTS["claim"]
    c, notes = claim_from_opts(DEFAULTS, merged)
    r = check_claim(c)
    k = constants()
    typ = k["mfu"]["typical_published"]
    line = merged.get("claim") or (f"trained {c.model} on {c.gpus:,} {c.gpu} for {c.tokens:.3g} "
                                   f"tokens in {c.days:g} days")
    s1 = check_section(f"1. The line, checked: \"{line}\"", r)
    fixes = []
    gpus_needed = r.claim.gpus * r.implied_mfu / typ
    fixes.append(("keep GPUs and tokens", f"{r.days_at_typical_mfu:.1f} days at {typ:.0%} MFU"))
    fixes.append(("keep days and tokens", f"{gpus_needed:,.0f} x {r.gpu} at {typ:.0%} MFU"))
    fixes.append(("keep GPUs and days", f"{c.tokens * typ / r.implied_mfu:.3g} tokens at {typ:.0%} MFU"))
    s2 = Section(
        "2. What the line would need to say",
        text=("A consistent line keeps 6ND = n x peak x MFU x time. Holding two of the claimed "
              "numbers and a typical MFU fixes the third:"),
        tables=(Table("", ("change", "consistent figure"), tuple(fixes)),),
    )
    tells = (
        (f"MFU above ~{k['mfu']['stretched']:.0%}",
         "no published large run is there; above 100% is arithmetic, not skill"),
        ("a GPU count the model cannot fit on", "the memory engine finds the smallest layout"),
        ("weeks on thousands of GPUs, no failures", "interruptions scale with GPU-days"),
        ("'owned' every layer", "a real story names one layer and its number"),
        ("round numbers only", "measured runs produce odd figures: 38.7% MFU, 2,730 tokens/s/GPU"),
    )
    s3 = Section("3. Inflation tells and what backs a line up",
                 text=("The strongest lines carry one number per layer owned: tokens/s per GPU, "
                       "MFU, GB per GPU under the layout, interruptions survived and the "
                       "checkpoint interval. The table lists the tells an interviewer checks."),
                 tables=(Table("", ("tell", "why it gives inflation away"), tells),))
    honest = check_claim(Claim(c.model, c.gpus, c.gpu, c.tokens, r.days_at_typical_mfu,
                               seq_len=c.seq_len, dtype=c.dtype))
    followups = (
        ("What tokens/s per GPU did you see?",
         f"The line implies {r.tokens_per_s_per_gpu:,.0f}; at {typ:.0%} MFU the figure is "
         f"{honest.tokens_per_s_per_gpu:,.0f} tokens/s per GPU."),
        ("How many times did the job fail?",
         f"At Llama 3's rate, ~{honest.expected_interruptions:.1f} interruptions over "
         f"{honest.claim.days:.0f} days on {c.gpus:,} GPUs; checkpoint every "
         f"{honest.checkpoint_interval_s / 60:.0f} min."),
        ("Which layout did you use and why?",
         f"The memory engine's smallest layout on these GPUs is {r.layout}; say why you chose "
         "yours (TP inside the NVLink domain, PP to fit, DP for throughput)."),
        ("What was your part?",
         "One layer, one number, one incident: e.g. the checkpoint path, its stall in seconds and "
         "what that saved over the run."),
        ("Is a low MFU a red flag?",
         f"Not by itself: below {k['mfu']['low']:.0%} the story should explain the waste "
         "(small batches, slow fabric, debugging time)."),
    )
    assumptions = (
        "Compute = 6 x parameters x tokens (active parameters for an MoE); a size such as '70B' "
        "is checked for memory on the bundled dense model nearest in size; an MoE shorthand such "
        "as '8x7B' reads the bundled model that carries it (mixtral-8x7b), otherwise E experts "
        "of the nearest dense model's MLP, top-2 per token, scaled to the named size.",
        f"Failure rate from Llama 3 ({k['failures']['unexpected_interruptions']:,} unexpected "
        f"interruptions in {k['failures']['window_days']:g} days on "
        f"{k['failures']['window_gpus']:,} GPUs).",
        f"Typical MFU {typ:.0%} (Llama 3 405B reports {k['mfu']['llama3_low']:.0%}-"
        f"{k['mfu']['llama3_high']:.0%}).",
    )
    data = {"question": "resume-walk", "line": line, "claim": r.to_dict(), "notes": notes,
            "implied_mfu": r.implied_mfu, "verdict": r.verdict,
            "consistent": {"days": r.days_at_typical_mfu, "gpus": gpus_needed,
                           "tokens": c.tokens * typ / r.implied_mfu}}
    return Report(f"resume-walk: {r.verdict}", (s1, s2, s3), data,
                  warnings=tuple(notes) + r.notes, question=PROMPT, assumptions=assumptions,
                  followups=followups)
