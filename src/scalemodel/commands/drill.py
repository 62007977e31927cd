"""scalemodel drill: random but realistic parameters for a question; your number is graded."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import add_output, positive_int


def _seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= v < 2**32:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^32), got {v}")
    return v


def register(sub: Any) -> None:
    p = sub.add_parser(
        "drill", help="practice: random parameters for a question, your answer graded by the engine",
        description="Draws realistic parameters for a question, asks for one number, grades it "
        "against the engine within the stated tolerance and shows the worked answer; a summary "
        "at the end. --json prints the drill (prompt, parameters, answer, unit, tolerance) "
        "without asking; --answer grades one answer without a prompt.")
    p.add_argument("--topic", metavar="ID", help="question id (default: drawn at random)")
    p.add_argument("--seed", type=_seed, default=None, help="random seed (default: random)")
    p.add_argument("--count", type=positive_int, default=1,
                   help="drills in a row (seeds seed, seed+1, ...; default 1)")
    p.add_argument("--answer", metavar="NUMBER", help="grade this answer without asking")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    import random

    from ..errors import BadInput
    from ..study.drills import grade, make_drill
    from ..views.drill import drills_report

    if args.count > 50:
        raise BadInput(f"--count must be at most 50, got {args.count}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    drills = [make_drill(args.topic, (seed + i) % 2**32) for i in range(args.count)]
    if args.json or args.markdown or args.answer is not None:
        grades = None if args.answer is None else [grade(d, args.answer) for d in drills]
        return drills_report(drills, grades)
    return _interactive(drills)


def _interactive(drills: list[Any]) -> Any:
    """Ask each drill on the terminal; an empty line or end of input stops early."""
    from ..errors import BadInput
    from ..report import render_text
    from ..study.drills import grade
    from ..views.drill import summary_report, worked_report

    rows = []
    out = sys.stdout
    for i, d in enumerate(drills, 1):
        out.write(f"\n[{i}/{len(drills)}] {d.topic} (seed {d.seed})\n{d.prompt}\n")
        while True:
            out.write(f"your answer in {d.unit}: ")
            out.flush()
            try:
                text = input()
            except EOFError:
                text = ""
            if not text.strip():
                break
            try:
                g = grade(d, text)
                break
            except BadInput as e:
                out.write(f"  {e}\n")
        if not text.strip():
            out.write("\n(stopped)\n")
            break
        verdict = "correct" if g.correct else "not within tolerance"
        out.write(f"  {verdict}: the engine says {d.answer:,.4g} {d.unit} (±{d.tolerance:.0%}); "
                  f"you were off by {g.relative_error:.1%}\n")
        if g.diagnosis:
            out.write(f"  that is the number you get from: {g.diagnosis}\n")
        out.write(render_text(worked_report(d)).lstrip("\n="))
        out.write(f"  full worked answer: scalemodel {' '.join(d.command)}\n")
        rows.append((d.topic, d.seed, g.typed, d.answer, d.unit, "yes" if g.correct else "no"))
    return summary_report(rows)
