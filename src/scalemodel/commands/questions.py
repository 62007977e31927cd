"""scalemodel questions: the 24 questions of the bank and whether each is answered yet."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output


def register(sub: Any) -> None:
    p = sub.add_parser("questions", help="list the 24 interview questions and their status",
                       description="The question bank: ids for `scalemodel answer ID`.")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    from ..derive import Report, Section, Table
    from ..questions import BANK

    rows = tuple((q.id, "/".join(q.loops), q.status, q.title) for q in BANK)
    done = sum(1 for q in BANK if q.status == "answered")
    t = Table("", ("id", "loops", "status", "question"), rows)
    # --json is a list of objects, one per question
    return Report("scalemodel questions",
                  (Section("", text=f"{done} of {len(BANK)} answered. Run: scalemodel answer ID",
                           tables=(t,)),), [q.to_dict() for q in BANK])
