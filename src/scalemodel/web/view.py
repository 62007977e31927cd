"""A Report turned into plain values for the HTML templates (the templates escape everything)."""

from __future__ import annotations

import math
import os
import re
import tempfile
from typing import Any

from markupsafe import Markup

from ..derive import Derivation, Report
from ..report import svg
from ..report.render import _cell, _fmt, _pretty_formula
from ..specs.sources import source


class _Cites:
    def __init__(self) -> None:
        self.keys: dict[str, int] = {}

    def __call__(self, src: str) -> int | None:
        if not src:
            return None
        return self.keys.setdefault(src, len(self.keys) + 1)


def _raw(v: Any) -> str:
    """The machine value behind a formatted number (for <data value=...>)."""
    if isinstance(v, bool) or v is None:
        return str(v).lower()
    if isinstance(v, int | float):
        if isinstance(v, float) and not math.isfinite(v):
            return ""
        return repr(v)
    return str(v)


def derivation_view(d: Derivation, cite: _Cites) -> dict[str, Any]:
    steps = []
    for s in d.steps:
        if s.note == "prose":
            steps.append({"kind": "prose", "text": s.name})
            continue
        steps.append({
            "kind": "given" if s.is_given else "calc",
            "name": s.name,
            "symbol": s.symbol,
            "formula": _pretty_formula(s.formula),
            "substituted": "" if s.substituted == s.formula else _pretty_formula(s.substituted),
            "value": _fmt(s.value, s.unit),
            "raw": _raw(s.value),
            "cite": cite(s.source),
            "bound": s.bound,
            "note": s.note,
        })
    return {"title": d.title, "steps": steps}


def report_view(r: Report, svg: str | None = None) -> dict[str, Any]:
    cite = _Cites()
    sections = []
    for s in r.sections:
        sections.append({
            "heading": s.heading,
            "text": s.text,
            "verbatim": s.verbatim,
            "headlines": [{"label": h.label, "value": _fmt(h.value, h.unit), "raw": _raw(h.value)}
                          for h in s.headlines],
            "tables": [{"title": t.title, "columns": list(t.columns),
                        "rows": [[_cell(c) for c in row] for row in t.rows], "note": t.note}
                       for t in s.tables],
            "derivation": derivation_view(s.derivation, cite) if s.derivation is not None else None,
        })
    sources = []
    for text, n in cite.keys.items():
        src = source(text)
        sources.append({"n": n, "text": text, "url": src.url if src.url.startswith("https://") else ""})
    return {
        "title": r.title,
        "question": r.question,
        "assumptions": list(r.assumptions),
        "sections": sections,
        "warnings": list(r.warnings),
        "followups": [{"q": q, "a": a} for q, a in r.followups],
        "sources": sources,
        "svg": Markup(svg) if svg else None,
    }


_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_UNSAFE = re.compile(r"<\s*(script|foreignObject|iframe)\b|\son[a-z]+\s*=|javascript:", re.I)


def plot_svg(r: Report, key: Any, cache: Any = None, *, pin: bool = False) -> str | None:
    """Draw ``Report.plot`` as SVG text for inline use; None without a plot.

    The figures of ``report.plot`` are drawn by the small SVG writer of ``report.svg`` (no
    matplotlib: a few milliseconds instead of about a second); a command that draws with
    matplotlib itself still works, only slower. Kept in ``cache`` under ``key`` when both are
    given."""
    if r.plot is None:
        return None
    if cache is not None and key is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit
    fd, path = tempfile.mkstemp(suffix=".svg")
    os.close(fd)
    try:
        with svg.inline():
            r.plot(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    finally:
        os.unlink(path)
    text = _PROLOG.sub("", text, count=1)
    if _UNSAFE.search(text):  # every writer escapes its text; refuse anything active all the same
        return None
    if cache is not None and key is not None:
        cache.put(key, text, pin=pin)
    return text
