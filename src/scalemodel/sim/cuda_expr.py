"""A safe, vectorised evaluator for CUDA-style index expressions and branch predicates.

User text such as ``threadIdx.x % 2 == 0`` or ``(blockIdx.y * 32 + threadIdx.y) * N + threadIdx.x``
is parsed with :mod:`ast` and walked node by node over a whitelist; nothing is passed to ``eval``
and no builtins are reachable. Values are numpy int64 arrays (one entry per thread), so one call
evaluates a whole launch.

Accepted: integers; the names ``threadIdx.{x,y,z}``, ``blockIdx.{x,y,z}``, ``blockDim.{x,y,z}``,
``gridDim.{x,y,z}``, ``warpSize``, ``laneId`` and any variables the caller binds (loop variables,
sizes such as ``N``); ``+ - * / % << >> & | ^ ~``, comparisons (chains too), ``and or not`` (also
C's ``&& || !``), ``a if c else b`` and the functions ``min``, ``max``, ``abs``. As in C on
integers, ``/`` truncates toward zero and ``%`` takes the sign of the dividend; ``//`` is floor
division. Division by zero, negative shifts and any value that leaves the int64 range
(|v| >= 2**63; numpy would wrap around silently) are reported as bad input.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput

__all__ = ["Expr", "parse", "BUILTIN_NAMES"]

MAX_LEN = 2000
MAX_NODES = 400
_DIMS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
BUILTIN_NAMES = tuple(f"{d}.{a}" for d in _DIMS for a in "xyz") + ("warpSize", "laneId")

_C_OPS = ((re.compile(r"&&"), " and "), (re.compile(r"\|\|"), " or "),
          (re.compile(r"!(?!=)"), " not "))


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


def _c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a - _c_div(a, b) * b


_LIMIT = 2**63  # int64 holds -2**63 .. 2**63 - 1; every value kept is strictly inside
_INT_MIN = np.iinfo(np.int64).min


def _magnitude(x: np.ndarray) -> int:
    """The largest |value| of an operand (values never reach -2**63, so abs cannot wrap)."""
    return int(np.max(np.abs(x))) if np.size(x) else 0


def _nonzero(b: np.ndarray, what: str, text: str) -> None:
    if np.any(b == 0):
        raise BadInput(f"{what}: division by zero in {text!r}")


@dataclass(frozen=True)
class Expr:
    """A parsed expression: ``text``, the ``names`` it uses, and :meth:`evaluate`."""

    text: str
    tree: ast.Expression
    names: frozenset[str]
    what: str = "expression"

    def evaluate(self, env: Mapping[str, Any]) -> np.ndarray:
        """Evaluate over ``env`` (names -> int arrays or ints, broadcast together)."""
        missing = sorted(n for n in self.names if n not in env)
        if missing:
            known = ", ".join(sorted(env))
            raise BadInput(f"{self.what}: unknown name {missing[0]!r} in {self.text!r}; "
                           f"known names: {known}")
        with np.errstate(over="ignore"):
            out = self._ev(self.tree.body, env)
        return np.asarray(out)

    def _ev(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        ev = self._ev
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return np.int64(int(node.value))
            return np.int64(node.value)
        if isinstance(node, ast.Name):
            return np.asarray(env[node.id], dtype=np.int64)
        if isinstance(node, ast.Attribute):
            return np.asarray(env[f"{node.value.id}.{node.attr}"], dtype=np.int64)  # type: ignore[attr-defined]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand, env)
            if isinstance(node.op, ast.USub):
                return -v  # values stay inside (-2**63, 2**63), so negation cannot wrap
            if isinstance(node.op, ast.UAdd):
                return v
            if isinstance(node.op, ast.Not):
                return (v == 0).astype(np.int64)
            return ~v  # Invert
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left, env), ev(node.right, env)
            op = node.op
            if isinstance(op, ast.Add | ast.Sub | ast.Mult):
                r = a + b if isinstance(op, ast.Add) else a - b if isinstance(op, ast.Sub) \
                    else a * b
                ma, mb = _magnitude(a), _magnitude(b)  # fast path: bounds that cannot overflow
                if (ma * mb if isinstance(op, ast.Mult) else ma + mb) < _LIMIT:
                    return r
                if isinstance(op, ast.Add):  # a wrapped sum has the sign of neither operand
                    return self._int64(r, ((a ^ r) & (b ^ r)) < 0)
                if isinstance(op, ast.Sub):
                    return self._int64(r, ((a ^ b) & (a ^ r)) < 0)
                # exact products divide back exactly; wrapped ones cannot
                q = np.where(a == 0, b, r // np.where(a == 0, 1, a))
                return self._int64(r, q != b)
            if isinstance(op, ast.Div):
                _nonzero(b, self.what, self.text)
                return _c_div(a, b)
            if isinstance(op, ast.FloorDiv):
                _nonzero(b, self.what, self.text)
                return a // b
            if isinstance(op, ast.Mod):
                _nonzero(b, self.what, self.text)
                return _c_mod(a, b)
            if isinstance(op, ast.Pow):
                if np.any(b < 0):
                    raise BadInput(f"{self.what}: negative exponent in {self.text!r}")
                e = np.minimum(b, 64)
                return self._exact(np.power(a, e), a, e, pow)
            if isinstance(op, ast.LShift | ast.RShift):
                if np.any(b < 0) or np.any(b > 62):
                    raise BadInput(f"{self.what}: shift count outside 0..62 in {self.text!r}")
                if isinstance(op, ast.RShift):
                    return a >> b
                return self._exact(a << b, a, b, lambda x, y: x << y)
            if isinstance(op, ast.BitAnd):
                return a & b
            if isinstance(op, ast.BitOr):
                return a | b
            return a ^ b  # BitXor (the only one left after _check)
        if isinstance(node, ast.BoolOp):
            vals = [ev(v, env) != 0 for v in node.values]
            acc = vals[0]
            for v in vals[1:]:
                acc = (acc & v) if isinstance(node.op, ast.And) else (acc | v)
            return acc.astype(np.int64)
        if isinstance(node, ast.Compare):
            left = ev(node.left, env)
            acc = None
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = ev(right_node, env)
                r = _CMP[type(op)](left, right)
                acc = r if acc is None else (acc & r)
                left = right
            return np.asarray(acc).astype(np.int64)
        if isinstance(node, ast.IfExp):
            return np.where(ev(node.test, env) != 0, ev(node.body, env), ev(node.orelse, env))
        if isinstance(node, ast.Call):
            args = [ev(a, env) for a in node.args]
            name = node.func.id  # type: ignore[attr-defined]
            if name == "abs":
                return np.abs(args[0])
            f = np.minimum if name == "min" else np.maximum
            out = args[0]
            for a in args[1:]:
                out = f(out, a)
            return out
        raise AssertionError("unreachable: _check admits only the nodes above")  # pragma: no cover

    def _int64(self, r: Any, wrapped: Any) -> Any:
        """``r`` unless an element wrapped around (or reached -2**63, which has no negation):
        BadInput, since a wrapped index would be silently wrong."""
        if np.any(wrapped) or np.any(r == _INT_MIN):
            raise BadInput(f"{self.what}: a value leaves the 64-bit integer range in "
                           f"{self.text!r}")
        return r

    def _exact(self, r: Any, a: Any, b: Any, op: Any) -> Any:
        """Check ``r = op(a, b)`` (power, left shift: both grow as |a| * 2**(b * k)) by a float64
        estimate, and by Python's unbounded integers where the estimate is too close to call."""
        fa, fb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            est = np.abs(np.power(fa, fb) if op is pow else fa * np.exp2(fb))
        if np.any(~(est < 2.0**64)):
            return self._int64(r, True)
        a_, b_, unsure = np.broadcast_arrays(a, b, est >= 2.0**62)
        for x, y in zip(a_[unsure].tolist(), b_[unsure].tolist(), strict=True):
            if not -_LIMIT < op(int(x), int(y)) < _LIMIT:
                return self._int64(r, True)
        return self._int64(r, False)


_CMP = {
    ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
    ast.Gt: np.greater, ast.GtE: np.greater_equal,
}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift,
           ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)
_FUNCS = {"min": (2, 8), "max": (2, 8), "abs": (1, 1)}


def _check(tree: ast.AST, text: str, what: str) -> frozenset[str]:
    names: set[str] = set()
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for count, node in enumerate(ast.walk(tree), start=1):
        if count > MAX_NODES:
            raise BadInput(f"{what}: expression too long ({text[:40]!r}...)")
        ok = isinstance(node, ast.Expression | ast.Load | ast.operator | ast.unaryop | ast.cmpop
                        | ast.boolop | ast.BoolOp | ast.Compare | ast.IfExp)
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, int) or abs(int(node.value)) >= 2**62:
                raise BadInput(f"{what}: only integer constants are allowed, got "
                               f"{node.value!r} in {text!r}")
            ok = True
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, _BINOPS):
                raise BadInput(f"{what}: operator not allowed in {text!r}")
            ok = True
        elif isinstance(node, ast.UnaryOp):
            ok = isinstance(node.op, ast.USub | ast.UAdd | ast.Not | ast.Invert)
        elif isinstance(node, ast.Attribute):
            base = node.value
            if not (isinstance(base, ast.Name) and base.id in _DIMS and node.attr in "xyz"
                    and len(node.attr) == 1):
                raise BadInput(f"{what}: only threadIdx/blockIdx/blockDim/gridDim .x/.y/.z "
                               f"attributes are allowed, in {text!r}")
            names.add(f"{base.id}.{node.attr}")
            ok = True
        elif isinstance(node, ast.Name):
            if node.id in _DIMS or id(node) in funcs:
                # under an Attribute or a Call: checked there (a bare 'threadIdx' is not allowed)
                ok = True
            else:
                if node.id.startswith("_"):
                    raise BadInput(f"{what}: name {node.id!r} not allowed in {text!r}")
                names.add(node.id)
                ok = True
        elif isinstance(node, ast.Call):
            f = node.func
            if not (isinstance(f, ast.Name) and f.id in _FUNCS) or node.keywords:
                raise BadInput(f"{what}: only the functions min, max, abs may be called, in "
                               f"{text!r}")
            lo, hi = _FUNCS[f.id]
            if not lo <= len(node.args) <= hi:
                raise BadInput(f"{what}: {f.id}() takes {lo}..{hi} arguments, in {text!r}")
            ok = True
        if not ok:
            raise BadInput(f"{what}: {type(node).__name__} is not allowed in {text!r}")
    # a bare threadIdx (no .x) is a Name used outside an Attribute
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and child.id in _DIMS and not isinstance(
                    node, ast.Attribute):
                raise BadInput(f"{what}: write {child.id}.x/.y/.z, in {text!r}")
    if isinstance(tree, ast.Expression) and isinstance(tree.body, ast.Name) and \
            tree.body.id in _DIMS:
        raise BadInput(f"{what}: write {tree.body.id}.x/.y/.z, in {text!r}")
    return frozenset(names)


def parse(text: str, what: str = "expression") -> Expr:
    """Parse user text into an :class:`Expr`; BadInput (naming ``what``) if it is not allowed."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput(f"{what}: empty expression")
    if len(text) > MAX_LEN:
        raise BadInput(f"{what}: expression longer than {MAX_LEN} characters")
    src = text.strip()
    for pat, rep in _C_OPS:
        src = pat.sub(rep, src)
    src = src.strip()
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError:
        raise BadInput(f"{what}: not a valid expression: {text!r}") from None
    names = _check(tree, text, what)
    return Expr(text=text, tree=tree, names=names, what=what)
