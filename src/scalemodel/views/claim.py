"""View of the claim checker: the verdict, the numbers a credible story carries, the way there."""

from __future__ import annotations

from typing import Any


def claim_report(claim: Any, r: Any, notes: list[str]) -> Any:
    from ..derive import Headline, Report, Section, Table

    heads = (
        Headline("verdict", r.verdict),
        Headline("implied MFU", f"{r.implied_mfu:.1%}"),
        Headline("tokens/s per GPU", r.tokens_per_s_per_gpu, "token/s"),
        Headline("fits in memory", r.fits_in_memory),
        Headline("expected interruptions", r.expected_interruptions, "1"),
        Headline("checkpoint interval", r.checkpoint_interval_s, "s"),
    )
    sections = (
        Section(f"{claim.model} on {claim.gpus:,} x {r.gpu}: {r.verdict}",
                text="Why: " + "; ".join(r.reasons) + ".", headlines=heads),
        Section("The numbers a credible story carries",
                tables=(Table("", ("what", "figure"), tuple(
                    (s.split(": ", 1)[0], s.split(": ", 1)[1]) for s in r.story)),)),
        Section("", derivation=r.derivation),
    )
    data = r.to_dict() | {"unparsed": notes}
    return Report(f"scalemodel claim: {r.verdict}", sections, data,
                  warnings=tuple(notes) + r.notes)
