"""The house's layering (DESIGN.md): lower rooms never import higher ones.

specs <- analytic <- sim / traces / live / billing <- views <- questions <- commands / web / cli;
report renders result types and imports no engine.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "src" / "scalemodel"
BASE = {"derive", "errors", "units", "__version__"}
ENGINES = {"analytic", "sim", "traces", "live", "billing"}
ALLOWED = {
    "units": {"errors"},
    "errors": set(),
    "derive": set(),
    "specs": BASE,
    "report": BASE,
    "analytic": BASE | {"specs"},
    "sim": BASE | {"specs"} | ENGINES,
    "traces": BASE | {"specs"} | ENGINES,
    "live": BASE | {"specs"} | ENGINES,
    "billing": BASE | {"specs"} | ENGINES,
    "views": BASE | {"specs", "report"} | ENGINES,
    "study": BASE | {"specs", "report", "views", "questions"} | ENGINES,
    "questions": BASE | {"specs", "report", "views", "study"} | ENGINES,
}


def imported_rooms(path: Path) -> set[str]:
    rel = path.relative_to(ROOT)
    pkg = list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
            full = base + (node.module.split(".") if node.module else [])
            if full:
                out.add(full[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for n in names:
                if n and n.startswith("scalemodel."):
                    out.add(n.split(".")[1])
    return out


FILES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_room_imports_only_lower_rooms(path):
    rel = path.relative_to(ROOT)
    room = rel.parts[0] if len(rel.parts) > 1 else rel.stem
    if room not in ALLOWED:
        return  # commands, web, cli, tour: the faces may wire anything
    bad = imported_rooms(path) - ALLOWED[room] - {room}
    assert not bad, f"{rel} ({room}) imports {sorted(bad)}"
