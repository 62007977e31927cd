"""The house's layering (DESIGN.md): lower rooms never import higher ones.

specs <- analytic <- traces <- sim / live / billing <- views <- questions <- commands / web / cli;
report renders result types and imports no engine. No two rooms import each other, even
lazily (a cycle between rooms is caught whatever the ALLOWED table says), and the commands
do not build reports: a tool's Report and its Sections come from its view (views/), which the
command, its question and the web share.
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
    "traces": BASE | {"specs"} | (ENGINES - {"sim"}),
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


def room_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def room_graph() -> dict[str, dict[str, list[str]]]:
    """room -> room it imports -> the files that do (lazy imports inside functions count)."""
    g: dict[str, dict[str, list[str]]] = {}
    for path in FILES:
        room = room_of(path)
        for other in imported_rooms(path) - {room}:
            g.setdefault(room, {}).setdefault(other, []).append(str(path.relative_to(ROOT)))
    return g


def cycles(g: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one room (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_sees_a_cycle():
    g = {"sim": {"traces": ["sim/a.py"]}, "traces": {"analytic": ["t.py"], "sim": ["t.py"]},
         "analytic": {}}
    assert cycles(g) == [["sim", "traces"]]
    del g["traces"]["sim"]
    assert cycles(g) == []


def test_no_import_cycle_between_rooms():
    g = room_graph()
    found = cycles(g)
    where = [{a: {b: g[a][b][:3] for b in comp if b in g.get(a, {})} for a in comp}
             for comp in found]
    assert not found, f"rooms importing each other: {where}"


# commands that still build Report or Section objects themselves; a command whose report moves
# into views/ leaves this list (the test below fails on a stale entry, so it only shrinks)
BUILDS_REPORTS: set[str] = set()
COMMANDS = sorted((ROOT / "commands").glob("*.py"))


def builds_report(path: Path) -> list[int]:
    """Lines where a file calls Report(...) or Section(...)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in ("Report", "Section"):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.name)
def test_commands_take_their_report_from_a_view(path):
    lines = builds_report(path)
    if path.name in BUILDS_REPORTS:
        assert lines, f"commands/{path.name} no longer builds reports: drop it from BUILDS_REPORTS"
    else:
        assert not lines, (f"commands/{path.name} builds Report/Section objects (lines {lines}); "
                           "build them in its view module under views/")
