"""scalemodel site --out DIR: a static export of every answer page, readable offline."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output


def register(sub: Any) -> None:
    p = sub.add_parser(
        "site", help="export every answer page as static HTML (readable offline)",
        description="Writes index.html, questions/ID.html for every answered question (with "
        "plots inline) and the stylesheet to DIR, linked relatively so the pages open from "
        "disk. Needs the 'web' extra (Flask).")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created if missing)")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    from ..views.study import site_report
    from ..web.export import export_site

    return site_report(export_site(args.out), args.out)
