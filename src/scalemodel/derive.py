"""Results and their derivations: the types every room returns.

A :class:`Derivation` is an ordered list of :class:`Step` objects. A step is either *given*
(an input or a constant, with its source) or *calculated* from a formula written in symbols.
The formula of a calculated step is evaluated here, by a small arithmetic-only evaluator, from
the values of the symbols defined by earlier steps. The derivation is therefore the computation
itself for the rows that are shown, not a description written beside it; engines that also have
a vectorised path pass ``check=`` so a disagreement between the two paths fails loudly.

Renderers (``scalemodel.report``) print derivations as worked answers; nothing here prints.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Step", "Derivation", "Table", "evaluate"]


@dataclass(frozen=True)
class Step:
    """One line of worked arithmetic.

    ``formula`` is empty for a given value; ``substituted`` repeats the formula with numbers in
    place of symbols. ``bound`` says whether the value is a ``"lower"`` or ``"upper"`` bound of
    the real quantity (empty when the model claims no such direction).
    """

    name: str
    symbol: str
    value: float
    unit: str
    formula: str = ""
    substituted: str = ""
    source: str = ""
    note: str = ""
    bound: str = ""

    @property
    def is_given(self) -> bool:
        return not self.formula

    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "symbol": self.symbol,
            "value": self.value,
            "unit": self.unit,
        }
        for key in ("formula", "substituted", "source", "note", "bound"):
            v = getattr(self, key)
            if v:
                d[key] = v
        return d


@dataclass(frozen=True)
class Table:
    """A small table for a renderer: column names with units in them, rows of plain values."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": list(self.columns),
            "rows": [list(r) for r in self.rows],
            **({"note": self.note} if self.note else {}),
        }


# --- the evaluator --------------------------------------------------------------------------

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_FUNCS: dict[str, Callable[..., float]] = {
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "expm1": math.expm1,
    "exp": math.exp,
}


def evaluate(formula: str, env: Mapping[str, float]) -> float:
    """Evaluate an arithmetic formula over named values, without ``eval``.

    Allowed: numbers, names bound in ``env``, + - * / // % **, unary minus, parentheses and the
    functions ceil, floor, min, max, log2, sqrt, exp, expm1.
    """
    tree = ast.parse(formula, mode="eval")

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise KeyError(f"symbol {node.id!r} in formula {formula!r} is not defined")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"unsupported element in formula {formula!r}: {ast.dump(node)[:60]}")

    return ev(tree)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _fmt_number(x: float) -> str:
    if isinstance(x, bool):
        return str(x)
    if float(x).is_integer() and abs(x) < 1e15:
        # group digits with a narrow no-break space: commas would read as argument separators
        return f"{int(x):,}".replace(",", "\u202f") if abs(x) >= 1e5 else str(int(x))
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.4g}"
    return f"{x:.6g}"


def _substitute(formula: str, env: Mapping[str, float]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(0)
        if name in _FUNCS or name not in env:
            return name
        return _fmt_number(env[name])

    return _NAME.sub(repl, formula)


# --- the builder ----------------------------------------------------------------------------


@dataclass
class Derivation:
    """An ordered, growing list of steps with a symbol table.

    >>> d = Derivation("demo")
    >>> d.given("layers", "L", 80, "1")
    80
    >>> d.calc("twice the layers", "n", "2 * L", "1")
    160
    """

    title: str = ""
    steps: list[Step] = field(default_factory=list)
    env: dict[str, float] = field(default_factory=dict)

    def given(
        self, name: str, symbol: str, value: float, unit: str, source: str = "", note: str = ""
    ) -> Any:
        """Record an input or constant (``source`` names where a constant came from)."""
        self.env[symbol] = value
        self.steps.append(Step(name, symbol, value, unit, source=source, note=note))
        return value

    def calc(
        self,
        name: str,
        symbol: str,
        formula: str,
        unit: str,
        *,
        source: str = "",
        note: str = "",
        bound: str = "",
        check: float | None = None,
        rel_tol: float = 1e-9,
    ) -> Any:
        """Evaluate ``formula`` over the symbols defined so far and record the step.

        ``check`` is the same quantity computed by an engine's vectorised path; a mismatch is an
        internal error (the two paths have drifted apart).
        """
        value = evaluate(formula, self.env)
        if check is not None and not math.isclose(
            float(value), float(check), rel_tol=rel_tol, abs_tol=1e-12
        ):
            raise AssertionError(
                f"derivation of {name!r} gives {value!r} but the engine computed {check!r}"
            )
        substituted = _substitute(formula, self.env)
        self.env[symbol] = value
        self.steps.append(
            Step(
                name,
                symbol,
                value,
                unit,
                formula=formula,
                substituted=substituted,
                source=source,
                note=note,
                bound=bound,
            )
        )
        return value

    def note(self, text: str) -> None:
        """A line of prose between steps (an assumption, a caveat)."""
        self.steps.append(Step(text, "", 0.0, "", note="prose"))

    def __getitem__(self, symbol: str) -> float:
        return self.env[symbol]

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "steps": [s.to_dict() for s in self.steps]}

    @property
    def sources(self) -> list[str]:
        """Distinct sources cited by the steps, in order of first use."""
        seen: dict[str, None] = {}
        for s in self.steps:
            if s.source:
                seen.setdefault(s.source, None)
        return list(seen)


# --- what a command or a question hands to a renderer ---------------------------------------------


@dataclass(frozen=True)
class Headline:
    """One number worth stating first: label, value in base units, unit."""

    label: str
    value: Any
    unit: str = ""


@dataclass(frozen=True)
class Section:
    """A part of a report: prose, and optionally headline numbers, a derivation and tables."""

    heading: str
    text: str = ""
    headlines: tuple[Headline, ...] = ()
    derivation: Derivation | None = None
    tables: tuple[Table, ...] = ()
    verbatim: str = ""  # a file's text (an export): printed as it is, never wrapped or indented


@dataclass(frozen=True)
class Report:
    """Everything a renderer needs: sections for people and ``data`` for ``--json``.

    A worked answer of the question bank is a Report with ``question``, ``assumptions`` and
    ``followups`` (pairs of an interviewer's next question and its short answer).
    """

    title: str
    sections: tuple[Section, ...]
    data: Any  # what --json prints: an object (dict) for every command but `questions` (a list)
    warnings: tuple[str, ...] = ()
    question: str = ""
    assumptions: tuple[str, ...] = ()
    followups: tuple[tuple[str, str], ...] = ()
    plot: Any = None  # a callable(path) that draws the figure for --plot, built by the command
