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
    from ..questions import BANK
    from ..views.study import bank_report

    return bank_report(BANK)
