"""scalemodel claim: check a claimed training run (model, GPUs, tokens, days) for consistency."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, positive_int, tokens


def _count(text: str) -> float:
    from ..analytic.claims import parse_count
    from ..errors import BadInput

    try:
        return parse_count(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None


def _days(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not 0 < v <= 3650:
        raise argparse.ArgumentTypeError(f"must be in (0, 3650] days, got {v:g}")
    return v


def _mfu(text: str) -> float:
    t = text.strip()
    try:
        v = float(t.rstrip("%")) / (100 if t.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.4 or 40%, got {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1] (or 1%-100%), got {text!r}")
    return v


def register(sub: Any) -> None:
    p = sub.add_parser(
        "claim",
        help="check a claimed training run: implied throughput, MFU, memory, failures, verdict",
        description="Derives what a claimed run implies (6ND FLOPs, tokens/s per GPU, MFU against "
        "the GPU's dense peak, whether the model fits in memory, interruptions and checkpoints "
        "at Llama 3's failure rate) and gives a verdict: plausible, stretched or implausible. "
        "Give flags, or one sentence such as \"trained a 70B model on 512 H100s for 2T tokens "
        "in 10 days\"; flags override what the sentence says.",
    )
    p.add_argument("sentence", nargs="?", default=None,
                   help="the claim in words (model or size, GPU count and type, tokens, days, "
                        "optional 'N%% MFU')")
    p.add_argument("--model", help="bundled model id, config.json path, or a size such as 70B")
    p.add_argument("--gpus", type=positive_int, help="number of GPUs")
    p.add_argument("--gpu", metavar="ID|gpu.toml", help="GPU id (default h100-sxm)")
    p.add_argument("--tokens", type=_count, help="training tokens: 2T, 300B, 1.5e12")
    p.add_argument("--days", type=_days, help="wall-clock days of training")
    p.add_argument("--mfu", type=_mfu, help="claimed MFU, e.g. 0.45 or 45%%")
    p.add_argument("--layout", help="the layout used, e.g. 'tp8 pp4 zero1' (dp = the rest); "
                                    "default: the smallest layout the memory engine finds")
    p.add_argument("--seq-len", type=tokens, default=4096, help="training sequence length (default 4096)")
    p.add_argument("--dtype", default="bf16", help="training precision for the peak (default bf16)")
    add_output(p)
    p.set_defaults(run=run)


def gather(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """A Claim from the sentence and the flags (flags win), and what could not be parsed."""
    from ..analytic.claims import Claim, parse_sentence
    from ..errors import BadInput

    found: dict[str, Any] = {}
    unparsed: list[str] = []
    if args.sentence:
        found, unparsed = parse_sentence(args.sentence)
    for k in ("model", "gpus", "gpu", "tokens", "days", "mfu"):
        if getattr(args, k, None) is not None:
            found[k] = getattr(args, k)
    missing = [k for k in ("model", "gpus", "tokens", "days") if k not in found]
    if missing:
        said = f"; from the sentence: {'; '.join(unparsed)}" if args.sentence and unparsed else ""
        raise BadInput(f"claim: missing {', '.join('--' + k for k in missing)} (give the flags "
                       f"or say it in the sentence){said}")
    notes = [u for u in unparsed if not u.startswith("no ")]
    if "gpu" not in found:
        found["gpu"] = "h100-sxm"
        notes.append("no GPU type given: assumed h100-sxm")
    c = Claim(model=str(found["model"]), gpus=int(found["gpus"]), gpu=found["gpu"],
              tokens=float(found["tokens"]), days=float(found["days"]), mfu=found.get("mfu"),
              layout=args.layout, seq_len=args.seq_len, dtype=args.dtype)
    return c, notes


def run(args: argparse.Namespace) -> Any:
    from ..analytic.claims import check_claim
    from ..views.claim import claim_report

    claim, notes = gather(args)
    r = check_claim(claim)
    return claim_report(claim, r, notes)
