"""Monte Carlo of a checkpointed job under failures (exponential or Weibull inter-failure times).

The model is Daly's, simulated instead of integrated: the job alternates compute segments of
``tau`` seconds, each followed by a checkpoint stall ``delta``; a segment counts only when its
checkpoint finishes. A failure throws away the running segment, costs a restart ``R`` (which a
further failure may interrupt, costing another restart), and the segment is redone. After every
failure the failure clock renews: the next inter-failure time is a fresh draw. For exponential
draws this is exactly the process behind Daly's formula; for Weibull draws with shape k < 1
(infant mortality after a repair) failures bunch up and the formula no longer holds.

All trials advance together, one attempt per loop iteration, with numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput


@dataclass(frozen=True)
class SimResult:
    tau_s: float
    goodput: float
    goodput_stderr: float
    failures_per_trial: float
    trials: int
    horizon_s: float
    shape: float

    def to_dict(self) -> dict[str, Any]:
        return {"interval_s": self.tau_s, "goodput": self.goodput,
                "goodput_stderr": self.goodput_stderr,
                "failures_per_trial": self.failures_per_trial, "trials": self.trials,
                "horizon_s": self.horizon_s, "weibull_shape": self.shape}


def _sampler(mtbf: float, shape: float, rng: np.random.Generator) -> Any:
    if shape == 1.0:
        return lambda n: rng.exponential(mtbf, n)
    scale = mtbf / math.gamma(1.0 + 1.0 / shape)  # mean of the Weibull draw equals the MTBF
    return lambda n: scale * rng.weibull(shape, n)


def simulate(
    tau: float,
    delta: float,
    restart: float,
    mtbf: float,
    *,
    shape: float = 1.0,
    horizon_s: float = 30 * 86400.0,
    trials: int = 400,
    seed: int = 0,
) -> SimResult:
    """Goodput (useful compute / wall time) averaged over ``trials`` runs of ``horizon_s``."""
    for name, v in (("interval", tau), ("MTBF", mtbf), ("horizon", horizon_s)):
        if not v > 0:
            raise BadInput(f"simulation: {name} must be positive, got {v}")
    if delta < 0 or restart < 0:
        raise BadInput("simulation: checkpoint stall and restart must be 0 or more")
    if not 0.1 <= shape <= 10:
        raise BadInput(f"--weibull-shape must be in [0.1, 10], got {shape}")
    if trials < 2:
        raise BadInput(f"--trials must be at least 2, got {trials}")
    rng = np.random.default_rng(seed)
    draw = _sampler(mtbf, shape, rng)
    x = tau + delta
    wall = np.zeros(trials)
    useful = np.zeros(trials)
    fails = np.zeros(trials)
    ttf = draw(trials)
    restarting = np.zeros(trials, dtype=bool)
    active = np.ones(trials, dtype=bool)
    max_iter = int(50 * (horizon_s / x + 10 * horizon_s / mtbf)) + 1000
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        t = ttf[idx]
        # a running trial completes every interval its time to failure covers, up to the
        # horizon, in one move (k intervals at once, as k single steps would); then it fails
        k = np.where(restarting[idx], 0.0,
                     np.minimum(np.floor(t / x), np.ceil((horizon_s - wall[idx]) / x)))
        bulk = k > 1
        if bulk.any():
            b = idx[bulk]
            kb = k[bulk] - 1  # the last complete interval is taken by the single step below
            wall[b] += kb * x
            useful[b] += kb * tau
            t[bulk] -= kb * x
        need = np.where(restarting[idx], restart, x)
        ok = t >= need
        wall[idx] += np.where(ok, need, t)
        useful[idx] += np.where(ok & ~restarting[idx], tau, 0.0)
        n_fail = int((~ok).sum())
        new_t = t - need
        if n_fail:
            new_t[~ok] = draw(n_fail)
            fails[idx[~ok]] += 1
        ttf[idx] = new_t
        restarting[idx] = ~ok
        active[idx] = wall[idx] < horizon_s
    else:  # pragma: no cover - guards against a runaway loop
        raise RuntimeError("failure simulation did not finish")
    per = useful / wall
    return SimResult(tau_s=tau, goodput=float(useful.sum() / wall.sum()),
                     goodput_stderr=float(per.std(ddof=1) / math.sqrt(trials)),
                     failures_per_trial=float(fails.mean()), trials=trials,
                     horizon_s=horizon_s, shape=shape)


def sweep(taus: Any, delta: float, restart: float, mtbf: float, **kw: Any) -> list[SimResult]:
    return [simulate(float(t), delta, restart, mtbf, seed=kw.pop("seed", 0) + i, **kw)
            for i, t in enumerate(taus)]
