"""scalemodel specs: the bundled GPUs, links, models and sources, with provenance."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output


def register(sub: Any) -> None:
    p = sub.add_parser("specs", help="list bundled GPUs, links, models, optimizers and sources",
                       description="Shows the spec data every command uses, with the source of "
                       "each figure. Add your own with --gpu my.toml / --model config.json.")
    p.add_argument("kind", choices=["gpus", "links", "models", "optimizers", "frameworks",
                                    "sources"],
                   help="what to list")
    p.add_argument("id", nargs="?", help="show one entry in full")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    from ..views.specs import specs_report

    return specs_report(args.kind, args.id)
