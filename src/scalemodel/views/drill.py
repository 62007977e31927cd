"""View of the drills: each drill's prompt, answer and tolerance (graded when an answer is
given), the worked answer shown after each try, and the summary of a session."""

from __future__ import annotations

from typing import Any


def drills_report(drills: list[Any], grades: list[Any] | None = None) -> Any:
    """The drills as a report (``--json``, ``--markdown``, ``--answer``); ``grades``: one
    grade per drill when an answer was given."""
    from ..derive import Headline, Report, Section

    sections = []
    data: Any = drills[0].to_dict() if len(drills) == 1 else {"drills": [d.to_dict() for d in drills]}
    for k, d in enumerate(drills):
        heads = [Headline("answer", d.answer, d.unit),
                 Headline("tolerance", f"±{d.tolerance:.0%}")]
        if grades is not None:
            g = grades[k]
            heads.append(Headline("your answer", g.typed, d.unit))
            heads.append(Headline("graded", "correct" if g.correct else "wrong"))
            if g.diagnosis:
                heads.append(Headline("the classic mistake", g.diagnosis))
            if len(drills) == 1:
                data["grade"] = g.to_dict()
        sections.append(Section(f"{d.topic} (seed {d.seed})", text=d.prompt,
                                headlines=tuple(heads), derivation=d.derivation))
    return Report("scalemodel drill", tuple(sections), data)


def worked_report(d: Any) -> Any:
    """One drill's derivation, printed after the answer was graded."""
    from ..derive import Report, Section

    return Report("", (Section("", derivation=d.derivation),), {})


def summary_report(rows: list[tuple[Any, ...]]) -> Any:
    """The session: each drill answered, the engine's number, and how many were right."""
    from ..derive import Report, Section, Table

    right = sum(1 for r in rows if r[-1] == "yes")
    t = Table("", ("topic", "seed", "you", "engine", "unit", "correct"), tuple(rows))
    return Report("scalemodel drill: summary",
                  (Section("", text=f"{right} of {len(rows)} correct.", tables=(t,)),),
                  {"answered": len(rows), "correct": right})
