"""Render a :class:`~scalemodel.derive.Report` as terminal text, Markdown or JSON."""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from pathlib import PurePath
from typing import Any

from ..derive import Derivation, Headline, Report, Step, Table
from ..units import fmt_value

WIDTH = 100


# --- JSON -------------------------------------------------------------------------------------------


def to_jsonable(x: Any) -> Any:
    """Plain JSON types from results: dataclasses, numpy scalars and arrays, inf/nan as null."""
    if hasattr(x, "to_dict") and not isinstance(x, type):
        return to_jsonable(x.to_dict())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [to_jsonable(v) for v in x]
    if type(x).__module__ == "numpy":
        return to_jsonable(x.tolist()) if hasattr(x, "tolist") else x.item()
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, PurePath):
        return str(x)
    return x


def render_json(r: Report) -> str:
    data = r.data
    if getattr(r, "jsonl", False):  # one JSON object per line of plain values (plan train
        return "\n".join(json.dumps(x) for x in data)  # --layouts builds them so)
    if isinstance(data, dict) and r.warnings and "warnings" not in data:
        data = {**data, "warnings": list(r.warnings)}
    return json.dumps(to_jsonable(data), indent=2)


# --- terminal text -------------------------------------------------------------------------------------


def _fmt(v: Any, unit: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if v is None:
        return "n/a"
    return fmt_value(float(v), unit)


def _pretty_formula(f: str) -> str:
    return f.replace(" * ", " × ").replace(" ** ", "^").replace("**", "^")


def _wrap(text: str, indent: str = "") -> str:
    """Wrap to WIDTH; a marker indent such as 'Q: ' or '  - ' is aligned under, not repeated."""
    rest = " " * len(indent)

    def para(i: int, p: str) -> str:
        hang = "  " if p.startswith(("- ", "* ")) else ""  # bullets wrap under their text
        return textwrap.fill(p, WIDTH, initial_indent=indent if i == 0 else rest,
                             subsequent_indent=rest + hang)

    return "\n".join(para(i, p) for i, p in enumerate(text.split("\n")))


class _Cites:
    """Numbers the sources cited by a report, in order of first use."""

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}

    def __call__(self, src: str) -> str:
        if not src:
            return ""
        n = self.keys.setdefault(src, len(self.keys) + 1)
        return f"[{n}]"


def _step_text(s: Step, cite: _Cites) -> list[str]:
    if s.note == "prose":
        return [_wrap(s.name, "    · ")]
    val = _fmt(s.value, s.unit)
    bound = {"lower": "  (lower bound)", "upper": "  (upper bound)"}.get(s.bound, "")
    mark = cite(s.source)
    if s.is_given:
        line = f"    {s.symbol:>8} = {val:<26} {s.name}"
        if mark:
            line += f" {mark}"
        out = [line]
    else:
        out = [f"    {s.name}{bound} {mark}".rstrip()]
        pad = " " * 8
        out.append(f"{pad}{s.symbol} = {_pretty_formula(s.formula)}")
        if s.substituted != s.formula:
            out.append(f"{pad}{' ' * len(s.symbol)} = {_pretty_formula(s.substituted)}")
        out.append(f"{pad}{' ' * len(s.symbol)} = {val}")
    if s.note and s.note != "prose":
        out.append(textwrap.fill(s.note, WIDTH, initial_indent=" " * 10 + "note: ",
                                 subsequent_indent=" " * 16))
    return out


def _derivation_text(d: Derivation, cite: _Cites) -> list[str]:
    lines = []
    if d.title:
        lines.append(f"  Derivation: {d.title}")
    for s in d.steps:
        lines.extend(_step_text(s, cite))
    return lines


def _cell(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if math.isinf(v):
            return "inf"
        if abs(v) >= 1e4 or (v.is_integer() and abs(v) < 1e15):
            return f"{v:,.0f}"
        return f"{v:,.4g}" if abs(v) >= 1e-3 else f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return "n/a" if v is None else str(v)


def _table_text(t: Table) -> list[str]:
    rows = [[_cell(c) for c in r] for r in t.rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(t.columns)]
    out = [f"  {t.title}"] if t.title else []
    out.append("    " + "  ".join(h.ljust(w) for h, w in zip(t.columns, widths, strict=True)))
    out.append("    " + "  ".join("-" * w for w in widths))
    for r in rows:
        out.append("    " + "  ".join(
            c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)))
    if t.note:
        out.append(textwrap.fill(t.note, WIDTH, initial_indent="    note: ",
                                 subsequent_indent=" " * 10))
    return [line.rstrip() for line in out]


def _numeric(c: str) -> bool:
    return bool(c) and (c[0].isdigit() or (c[0] == "-" and c[1:2].isdigit()))


def _headlines(hs: tuple[Headline, ...]) -> list[str]:
    w = max((len(h.label) for h in hs), default=0)
    return [f"  {h.label:<{w}}  {_fmt(h.value, h.unit)}" for h in hs]


def render_text(r: Report) -> str:
    cite = _Cites()
    out = [r.title, "=" * min(len(r.title), WIDTH)]
    if r.question:
        out += ["", _wrap(r.question, "Q: ")]
    if r.assumptions:
        out += ["", "Assumptions:"] + [_wrap(a, "  - ") for a in r.assumptions]
    for s in r.sections:
        out += ["", s.heading, "-" * min(len(s.heading), WIDTH)] if s.heading else [""]
        if s.text:
            out.append(_wrap(s.text, "  "))
        if s.verbatim:
            out += ["", s.verbatim.rstrip("\n")]
        if s.headlines:
            out += _headlines(s.headlines)
        for t in s.tables:
            out += [""] + _table_text(t)
        if s.derivation is not None:
            out += [""] + _derivation_text(s.derivation, cite)
    if r.warnings:
        out += ["", "Warnings:"] + [_wrap(w, "  ! ") for w in r.warnings]
    if r.followups:
        out += ["", "Follow-ups an interviewer asks next", "-" * 35]
        for q, a in r.followups:
            out += [_wrap(q, "  Q: "), _wrap(a, "     "), ""]
    if cite.keys:
        out += ["", "Sources:"] + [f"  [{n}] {k}" for k, n in cite.keys.items()]
    return "\n".join(out).rstrip() + "\n"


# --- Markdown ------------------------------------------------------------------------------------------


def _md_table(t: Table) -> list[str]:
    out = [f"**{t.title}**", ""] if t.title else []
    out.append("| " + " | ".join(t.columns) + " |")
    out.append("|" + "---|" * len(t.columns))
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in t.rows]
    if t.note:
        out += ["", f"_{t.note}_"]
    return out + [""]


def _md_derivation(d: Derivation, cite: _Cites) -> list[str]:
    out = ["| step | formula | = | value | source |", "|---|---|---|---|---|"]
    for s in d.steps:
        if s.note == "prose":
            out.append(f"| _{s.name}_ | | | | |")
            continue
        formula = "" if s.is_given else f"`{s.symbol} = {_pretty_formula(s.formula)}`"
        subst = "" if s.is_given or s.substituted == s.formula else f"`{_pretty_formula(s.substituted)}`"
        if s.is_given:
            formula = f"`{s.symbol}`"
        val = _fmt(s.value, s.unit) + (f" ({s.bound} bound)" if s.bound else "")
        out.append(f"| {s.name} | {formula} | {subst} | {val} | {cite(s.source)} |")
    return out + [""]


def render_markdown(r: Report) -> str:
    cite = _Cites()
    out = [f"# {r.title}", ""]
    if r.question:
        out += [f"> {r.question}", ""]
    if r.assumptions:
        out += ["**Assumptions**", ""] + [f"- {a}" for a in r.assumptions] + [""]
    for s in r.sections:
        if s.heading:
            out += [f"## {s.heading}", ""]
        if s.text:
            out += [s.text, ""]
        if s.verbatim:
            fence = "~~~~" if "```" in s.verbatim else "```"
            out += [fence, s.verbatim.rstrip("\n"), fence, ""]
        if s.headlines:
            out += [f"- **{h.label}**: {_fmt(h.value, h.unit)}" for h in s.headlines] + [""]
        for t in s.tables:
            out += _md_table(t)
        if s.derivation is not None:
            out += _md_derivation(s.derivation, cite)
    if r.warnings:
        out += ["**Warnings**", ""] + [f"- {w}" for w in r.warnings] + [""]
    if r.followups:
        out += ["## Follow-ups", ""]
        for q, a in r.followups:
            out += [f"**{q}**", "", a, ""]
    if cite.keys:
        out += ["## Sources", ""] + [f"{n}. {k}" for k, n in cite.keys.items()] + [""]
    return "\n".join(out)
