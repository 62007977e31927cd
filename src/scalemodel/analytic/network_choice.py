"""RoCE vs InfiniBand: a scored decision model read from roce_ib.toml, with the flips.

Each factor of the data file adds points toward InfiniBand (positive) or RoCE (negative) when
its condition on an input holds. The decision is the sign of the sum. The flips are found by
trying every other value of each categorical input and by scanning numeric inputs for the
threshold where the sign changes, so they follow from the data, not from prose.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import BadInput
from ..specs.sources import cite, load_toml


@cache
def _data() -> dict[str, Any]:
    return load_toml("roce_ib.toml")


def inputs_spec() -> dict[str, Any]:
    return dict(_data()["inputs"])


def normalise(opts: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in and every input checked (BadInput names the field and choices)."""
    out = {}
    for name, spec in inputs_spec().items():
        v = opts.get(name)
        v = spec["default"] if v is None else v
        if spec["kind"] == "number":
            try:
                v = float(v)
            except (TypeError, ValueError):
                raise BadInput(f"--{name.replace('_', '-')}: expected a number, got {v!r}") from None
            if not spec["min"] <= v <= spec["max"]:
                raise BadInput(f"--{name.replace('_', '-')} must be in [{spec['min']}, "
                               f"{spec['max']}], got {v:g}")
        else:
            v = str(v).lower()
            if v not in spec["choices"]:
                raise BadInput(f"--{name.replace('_', '-')}: {v!r} is not one of "
                               f"{', '.join(spec['choices'])}")
        out[name] = v
    return out


@dataclass(frozen=True)
class Decision:
    recommendation: str  # "InfiniBand" or "RoCE"
    score: float  # > 0 favours InfiniBand
    contributions: tuple[tuple[str, float, str, str], ...]  # (input, points, reason, source)
    flips: tuple[str, ...]
    facts: tuple[tuple[str, str], ...]
    inputs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"recommendation": self.recommendation, "score": self.score,
                "contributions": [{"input": i, "points": p, "reason": r, "source": s}
                                  for i, p, r, s in self.contributions],
                "flips": list(self.flips), "facts": [{"text": t, "source": s}
                                                     for t, s in self.facts],
                "inputs": self.inputs}


def _holds(f: dict[str, Any], v: Any) -> float:
    op = f["op"]
    if op == "times":
        return float(v)
    if op == "eq":
        return 1.0 if v == f["value"] else 0.0
    if op == "ge":
        return 1.0 if v >= f["value"] else 0.0
    if op == "le":
        return 1.0 if v <= f["value"] else 0.0
    raise ValueError(f"unknown op {op!r} in roce_ib.toml")  # pragma: no cover


def score(inp: dict[str, Any]) -> tuple[float, list[tuple[str, float, str, str]]]:
    parts = []
    for f in _data()["factor"]:
        w = _holds(f, inp[f["input"]])
        if w:
            parts.append((f["input"], f["points"] * w, f["reason"], cite(f["source"])))
    return sum(p for _, p, _, _ in parts), parts


def _label(s: float) -> str:
    return "InfiniBand" if s > 0 else "RoCE"


def decide(opts: dict[str, Any]) -> Decision:
    inp = normalise(opts)
    s, parts = score(inp)
    rec = _label(s)
    flips = []
    for name, spec in inputs_spec().items():
        if spec["kind"] == "choice":
            for alt in spec["choices"]:
                if alt != inp[name] and _label(score(inp | {name: alt})[0]) != rec:
                    flips.append(f"{name} = {alt} (score {score(inp | {name: alt})[0]:+.2f})")
        else:
            lo, hi = float(spec["min"]), float(spec["max"])
            grid = ([lo + (hi - lo) * i / 100 for i in range(101)] if hi <= 1 else
                    sorted({round(lo * (hi / lo) ** (i / 200)) for i in range(201)}))
            hit = [g for g in grid if _label(score(inp | {name: g})[0]) != rec]
            if hit:
                below = [g for g in hit if g < inp[name]]
                above = [g for g in hit if g > inp[name]]
                if above:
                    flips.append(f"{name} >= {min(above):g}")
                if below:
                    flips.append(f"{name} <= {max(below):g}")
    facts = tuple((f["text"], cite(f["source"])) for f in _data().get("fact", []))
    return Decision(rec, s, tuple(parts), tuple(flips), facts, inp)
