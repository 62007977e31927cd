"""Fitting alpha and beta from benchmark rows, and pricing with a saved calibration profile.

A profile is measured data kept apart from the model (DESIGN rule 5): ``comm bench`` writes it,
``comm cost --profile`` reads it, the models never write it. Per collective it holds the fitted
call latency ``alpha_s`` and per-byte time ``beta_s_per_byte`` at the benchmarked rank count,
and the same fit rescaled to per step and per wire byte through the algorithm the backend is
assumed to run, so it can be carried to other rank counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput
from .collectives import BUSBW_FACTOR, FORMULAS, np_eval

PROFILE_KIND = "scalemodel-comm-profile"

# which (collective, algorithm) of FORMULAS a backend runs; gloo's reduce-scatter is a full
# all-reduce followed by keeping one slice (gloo-reduce-scatter-emulation), so it is priced so
BACKEND_ALGORITHM: dict[str, dict[str, tuple[str, str]]] = {
    "gloo": {
        "all-reduce": ("all-reduce", "ring"),
        "reduce-scatter": ("all-reduce", "ring"),
        "all-gather": ("all-gather", "ring"),
        "broadcast": ("broadcast", "ring"),
        "reduce": ("reduce", "ring"),
        "all-to-all": ("all-to-all", "pairwise"),
        "send-recv": ("send-recv", "direct"),
    },
    "nccl": {
        "all-reduce": ("all-reduce", "ring"),
        "reduce-scatter": ("reduce-scatter", "ring"),
        "all-gather": ("all-gather", "ring"),
        "broadcast": ("broadcast", "ring"),
        "reduce": ("reduce", "ring"),
        "all-to-all": ("all-to-all", "direct"),
        "send-recv": ("send-recv", "direct"),
    },
}


def steps_and_wire(model: tuple[str, str], n: float, S: float = 1.0) -> tuple[float, float]:
    """(steps, bytes sent per rank) of an algorithm on one tier, from the formula table."""
    if n <= 1:
        return 0.0, 0.0
    steps = FORMULAS[model]["intra"]
    env: dict[str, Any] = {"S": S, "n": n, "p": n, "N": 1.0, "g": 0.0, "Bi": 1.0, "ai": 0.0,
                           "a0": 0.0, "L": 0.0}
    for _name, sym, formula, _unit in steps:
        env[sym] = float(np_eval(formula, env))
    return env["k"], env["W"]


@dataclass(frozen=True)
class Fit:
    alpha_s: float
    beta_s_per_byte: float
    points: int
    max_rel_err: float

    def time(self, nbytes: Any) -> Any:
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)


def fit_alpha_beta(nbytes: Any, times: Any) -> Fit:
    """t = alpha + beta x S by least squares on relative error (times span decades).

    A negative coefficient is set to zero and the other refitted, so both stay physical.
    """
    S = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    if S.size < 2 or S.size != t.size or np.any(t <= 0):
        raise BadInput("a fit needs at least two sizes with positive times")
    A = np.column_stack([1.0 / t, S / t])
    (a, b), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    if a < 0:
        a, b = 0.0, float(np.sum(S / t) / np.sum((S / t) ** 2))
    if b < 0:
        a, b = float(np.sum(1 / t) / np.sum((1 / t) ** 2)), 0.0
    pred = a + b * S
    return Fit(float(a), float(b), int(S.size), float(np.max(np.abs(pred - t) / t)))


def build_profile(rows: list[dict[str, Any]], *, backend: str, world_size: int,
                  meta: dict[str, Any]) -> dict[str, Any]:
    """A calibration profile from benchmark rows (collective, bytes, time_s)."""
    colls: dict[str, Any] = {}
    for name in sorted({r["collective"] for r in rows}):
        pts = [r for r in rows if r["collective"] == name]
        if len(pts) < 2:
            continue
        f = fit_alpha_beta([r["bytes"] for r in pts], [r["time_s"] for r in pts])
        model = BACKEND_ALGORITHM.get(backend, BACKEND_ALGORITHM["nccl"])[name]
        n = 2 if name == "send-recv" else world_size
        k, w = steps_and_wire(model, n)
        colls[name] = {
            "alpha_s": f.alpha_s, "beta_s_per_byte": f.beta_s_per_byte,
            "points": f.points, "max_rel_err": f.max_rel_err,
            "assumed_algorithm": list(model),
            "alpha_per_step_s": f.alpha_s / k if k else f.alpha_s,
            "beta_s_per_wire_byte": f.beta_s_per_byte / w if w else f.beta_s_per_byte,
        }
    return {"kind": PROFILE_KIND, "version": 1, "backend": backend, "world_size": world_size,
            **meta, "collectives": colls}


def check_profile(d: Any, path: str = "profile") -> dict[str, Any]:
    """Validate a profile read from a user's JSON file (data only); BadInput when unusable."""
    if not isinstance(d, dict) or d.get("kind") != PROFILE_KIND:
        raise BadInput(f"--profile: {path} is not a scalemodel comm profile (kind must be "
                       f"{PROFILE_KIND!r}; write one with scalemodel comm bench --save FILE)")
    colls = d.get("collectives")
    if not isinstance(colls, dict) or not colls:
        raise BadInput(f"--profile: {path} has no collectives")
    ws = d.get("world_size")
    if not isinstance(ws, int) or ws < 1:
        raise BadInput(f"--profile: {path}: world_size must be a positive integer")
    for name, c in colls.items():
        for k in ("alpha_s", "beta_s_per_byte", "alpha_per_step_s", "beta_s_per_wire_byte"):
            v = c.get(k) if isinstance(c, dict) else None
            if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise BadInput(f"--profile: {path}: collectives.{name}.{k} must be a "
                               "non-negative number")
        am = c.get("assumed_algorithm")
        if not (isinstance(am, list) and tuple(am) in FORMULAS):
            raise BadInput(f"--profile: {path}: collectives.{name}.assumed_algorithm must be a "
                           "known [collective, algorithm] pair")
    return d


@dataclass(frozen=True)
class ProfileCost:
    collective: str
    nbytes: float
    ranks: int
    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    bytes_sent_per_rank: float
    steps: float
    how: str


def profile_cost(profile: dict[str, Any], collective: str, nbytes: float,
                 ranks: int) -> ProfileCost:
    """Time of a collective from measured alpha/beta; rescaled when the rank count differs."""
    c = profile["collectives"].get(collective)
    if c is None:
        raise BadInput(f"--profile: no measurement of {collective} in the profile; it has "
                       f"{', '.join(profile['collectives'])}")
    model = tuple(c["assumed_algorithm"])
    n = 2 if collective == "send-recv" else ranks
    k, w = steps_and_wire(model, n, nbytes)  # type: ignore[arg-type]
    if n == (2 if collective == "send-recv" else profile["world_size"]):
        t = c["alpha_s"] + c["beta_s_per_byte"] * nbytes
        how = f"measured fit at {profile['world_size']} ranks: t = alpha + beta x S"
    else:
        t = c["alpha_per_step_s"] * k + c["beta_s_per_wire_byte"] * w
        how = (f"fit at {profile['world_size']} ranks carried to {n} ranks through "
               f"{model[1]} {model[0]}: t = alpha_step x k(n) + beta_wire x W(n, S)")
    algbw = nbytes / t if t > 0 else math.inf
    bus = algbw * float(np_eval(BUSBW_FACTOR[collective], {"n": float(n)}))
    return ProfileCost(collective, nbytes, n, t, algbw, bus, w, k, how)
