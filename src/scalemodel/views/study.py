"""Views of the study faces: the question bank, the static site export, the web app's end."""

from __future__ import annotations

from typing import Any


def bank_report(bank: Any) -> Any:
    """``scalemodel questions``: each question of the bank with its status."""
    from ..derive import Report, Section, Table

    rows = tuple((q.id, "/".join(q.loops), q.status, q.title) for q in bank)
    done = sum(1 for q in bank if q.status == "answered")
    t = Table("", ("id", "loops", "status", "question"), rows)
    # --json is a list of objects, one per question
    return Report("scalemodel questions",
                  (Section("", text=f"{done} of {len(bank)} answered. Run: scalemodel answer ID",
                           tables=(t,)),), [q.to_dict() for q in bank])


def site_report(pages: list[dict[str, Any]], out: str) -> Any:
    """``scalemodel site``: the pages written and the HTTP status each was rendered with."""
    from ..derive import Report, Section, Table

    rows = tuple((p["path"], p["status"]) for p in pages)
    return Report(f"scalemodel site: {len(pages)} pages in {out}",
                  (Section("", tables=(Table("", ("page", "HTTP status"), rows),)),),
                  {"out": out, "pages": pages})


def served_report(host: str, port: int) -> Any:
    """``scalemodel serve`` after the server stopped."""
    from ..derive import Report, Section

    return Report("scalemodel serve", (Section("", text="stopped"),),
                  {"host": host, "port": port, "stopped": True})
