"""Shared by scale-scoping and resume-walk: a Claim from the answer's options."""

from __future__ import annotations

from typing import Any

from ..analytic.claims import Claim, parse_sentence
from ..derive import Headline, Section, Table
from ..errors import BadInput


def claim_from_opts(defaults: dict[str, Any], opts: dict[str, Any]) -> tuple[Claim, list[str]]:
    """Defaults, then what a --claim sentence says, then explicit flags."""
    o = dict(defaults)
    notes: list[str] = []
    if opts.get("claim"):
        found, unparsed = parse_sentence(opts["claim"])
        o.update(found)
        notes = [u for u in unparsed if not u.startswith("no ")]
        notes += [f"{u} in the sentence: kept the default" for u in unparsed if u.startswith("no ")]
    o.update({k: v for k, v in opts.items() if v is not None and k != "claim"})
    try:
        c = Claim(model=str(o["model"]), gpus=int(o["gpus"]), gpu=str(o["gpu"]),
                  tokens=float(o["tokens"]), days=float(o["days"]), mfu=o.get("mfu"),
                  layout=o.get("layout"), seq_len=int(o.get("seq_len") or 4096),
                  dtype=str(o.get("dtype") or "bf16"))
    except (TypeError, ValueError) as e:
        raise BadInput(f"claim: cannot build the claim from the options ({e})") from None
    return c, notes


def check_section(title: str, r: Any) -> Section:
    return Section(
        title,
        text="Verdict: " + r.verdict + ". " + "; ".join(r.reasons) + ".",
        headlines=(Headline("verdict", r.verdict),
                   Headline("implied MFU", f"{r.implied_mfu:.1%}"),
                   Headline("tokens/s per GPU", r.tokens_per_s_per_gpu, "token/s"),
                   Headline("training compute", r.total_flops, "FLOP"),
                   Headline("fits in memory", r.fits_in_memory),
                   Headline("expected interruptions", r.expected_interruptions, "1"),
                   Headline("days at a typical MFU", r.days_at_typical_mfu, "day")),
        derivation=r.derivation,
        tables=(Table("The numbers a credible story carries", ("what", "figure"),
                      tuple(tuple(s.split(": ", 1)) for s in r.story)),),
    )
