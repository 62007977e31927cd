"""Failure budgets and checkpoint intervals: pure arithmetic, numpy-friendly.

Symbols (see docs/reliability.md): N GPUs, g GPUs per node, lambda job interruptions per second,
M = 1/lambda the job's mean time between interruptions, delta the training stall per checkpoint,
R the restart cost after an interruption (relaunch + re-queue + reload), tau the compute time
between checkpoints.

* Young (1974): tau_Y = sqrt(2 delta M).
* Daly (2006): tau_D = sqrt(2 delta M) (1 + sqrt(delta/(2M))/3 + delta/(18 M)) - delta for
  delta < 2M, else M.
* Daly's wall-clock model for exponential failures (failures may also strike during a restart):
  expected wall time per checkpoint segment = M exp(R/M) (exp((tau + delta)/M) - 1); goodput is
  tau divided by that (the effective training time ratio, ETTR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput, require_positive
from ..specs.reliability import FailureProfile, checkpoint_figure
from ..specs.sources import cite

DAY_S = 86400.0
MONTH_S = 30.4375 * DAY_S  # a mean Gregorian month


# --- failure rates ---------------------------------------------------------------------------------


# reliability.toml [checkpoint] keys of the async and in-memory checkpoint figures
MODE_FIGURES = ("async_stall_fraction", "inmemory_stall_fraction", "inmemory_restart_fraction")


def unit_count(domain: str, gpus: Any, gpus_per_node: Any) -> Any:
    """How many units of a component domain a job of ``gpus`` GPUs holds."""
    if domain in ("gpu", "software"):
        return gpus
    if domain in ("node", "network"):
        return np.ceil(np.asarray(gpus, dtype=float) / gpus_per_node)
    raise ValueError(f"unknown component domain {domain!r}")


def component_rates_per_day(p: FailureProfile, gpus: float, gpus_per_node: int) -> dict[str, float]:
    """Expected interruptions per day of a job, per counted component.

    Each component's rate per unit-day is measured on the profile's fleet (count / (units x
    days)) and multiplied by the units the job holds; GPU and software rates scale with GPUs,
    host and network rates with hosts, so a different node size changes the mix.
    """
    if not p.counted:
        return {"all components": p.rate_per_node_day * gpus / gpus_per_node}
    out: dict[str, float] = {}
    for c in p.components:
        fleet_units = float(unit_count(c.domain, p.gpus, p.gpus_per_node))
        per_unit_day = c.count / (fleet_units * p.days)
        out[c.component] = per_unit_day * float(unit_count(c.domain, gpus, gpus_per_node))
    return out


def job_rate_per_day(p: FailureProfile, gpus: Any, gpus_per_node: Any) -> Any:
    """Vectorised total of :func:`component_rates_per_day` over arrays of GPU counts."""
    if not p.counted:
        return p.rate_per_node_day * np.asarray(gpus, dtype=float) / gpus_per_node
    total = 0.0
    for c in p.components:
        fleet_units = float(unit_count(c.domain, p.gpus, p.gpus_per_node))
        total = total + c.count / (fleet_units * p.days) * unit_count(c.domain, gpus, gpus_per_node)
    return total


# --- checkpoint intervals and goodput ----------------------------------------------------------------


def young_interval(delta: Any, mtbf: Any) -> Any:
    return np.sqrt(2.0 * np.asarray(delta, dtype=float) * mtbf)


def daly_interval(delta: Any, mtbf: Any) -> Any:
    d = np.asarray(delta, dtype=float)
    m = np.asarray(mtbf, dtype=float)
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    out = np.where(d < 2.0 * m, tau, m)
    return out if out.ndim else float(out)


def goodput(tau: Any, delta: Any, restart: Any, mtbf: Any) -> Any:
    """Daly's exact ETTR for exponential failures: tau / (M e^(R/M) (e^((tau+delta)/M) - 1))."""
    t, d, r, m = (np.asarray(v, dtype=float) for v in (tau, delta, restart, mtbf))
    out = t / (m * np.exp(r / m) * np.expm1((t + d) / m))
    return out if out.ndim else float(out)


def first_order_waste(tau: Any, delta: Any, restart: Any, mtbf: Any) -> Any:
    """delta/tau + (tau/2 + R)/M: checkpoint cost plus expected rework and restart per failure."""
    t = np.asarray(tau, dtype=float)
    return delta / t + (t / 2.0 + restart) / mtbf


def best_interval(delta: float, restart: float, mtbf: float) -> float:
    """The interval that maximises :func:`goodput` (golden-section search around Daly)."""
    lo, hi = max(1e-3, 0.05 * float(daly_interval(delta, mtbf))), 20.0 * max(
        float(daly_interval(delta, mtbf)), 1.0)
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(120):
        c, d = b - g * (b - a), a + g * (b - a)
        if goodput(c, delta, restart, mtbf) > goodput(d, delta, restart, mtbf):
            b = d
        else:
            a = c
    return (a + b) / 2


# --- checkpoint size and modes ----------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointMode:
    """How a checkpoint costs time: the stall seen by training and the restart after a failure."""

    mode: str  # sync | async | in-memory
    stall_s: float
    restart_s: float
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "stall_s": self.stall_s, "restart_s": self.restart_s,
                "note": self.note}


MODES = ("sync", "async", "in-memory")


def checkpoint_modes(write_s: float, restart_s: float, async_stall: float, mem_stall: float,
                     mem_restart: float) -> dict[str, CheckpointMode]:
    """Stall and restart of the three ways to checkpoint, from the synchronous write time.

    async: training stalls only for the copy to host memory; the write finishes in the
    background, so a failure during the write loses one more write time of work (added to R).
    in-memory: state copied to peers' host memory; restart reloads from there.
    """
    return {
        "sync": CheckpointMode("sync", write_s, restart_s,
                               "training waits for the whole write to storage"),
        "async": CheckpointMode("async", async_stall * write_s, restart_s + write_s,
                                "stall = device-to-host copy; R grows by one write time "
                                "(the newest checkpoint is durable only after the write)"),
        "in-memory": CheckpointMode("in-memory", mem_stall * write_s, mem_restart * restart_s,
                                    "copy to peers' host memory; restart reads from peers "
                                    "(falls back to storage if a whole replica set is lost)"),
    }


# --- the worked result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointResult:
    gpus: int
    profile: str
    job_mtbf_s: float
    rate_per_day: float
    checkpoint_write_s: float
    stall_s: float
    restart_s: float
    young_interval_s: float
    daly_interval_s: float
    best_interval_s: float
    interval_s: float
    goodput: float
    goodput_at_young: float
    goodput_at_daly: float
    mode: str
    components: dict[str, float]
    derivation: Derivation = field(compare=False, repr=False)
    checkpoint_bytes: float | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus, "profile": self.profile, "job_mtbf_s": self.job_mtbf_s,
            "rate_per_day": self.rate_per_day, "checkpoint_write_s": self.checkpoint_write_s,
            "checkpoint_bytes": self.checkpoint_bytes, "mode": self.mode,
            "stall_s": self.stall_s, "restart_s": self.restart_s,
            "young_interval_s": self.young_interval_s, "daly_interval_s": self.daly_interval_s,
            "best_interval_s": self.best_interval_s, "interval_s": self.interval_s,
            "goodput": self.goodput, "goodput_at_young": self.goodput_at_young,
            "goodput_at_daly": self.goodput_at_daly,
            "rate_per_day_by_component": self.components,
            "derivation": self.derivation.to_dict(),
        }


def checkpoint_plan(
    p: FailureProfile,
    *,
    gpus: int,
    gpus_per_node: int,
    checkpoint_write_s: float,
    restart_s: float,
    requeue_s: float = 0.0,
    interval_s: float | None = None,
    mode: str = "sync",
    mode_figures: tuple[float, float, float] | None = None,
    checkpoint_bytes: float | None = None,
    write_bytes_per_s: float | None = None,
    write_source: str = "",
) -> CheckpointResult:
    """Job MTBF, Young's and Daly's intervals and goodput, with the derivation.

    ``mode_figures`` (async stall, in-memory stall, in-memory restart fractions) default to
    reliability.toml [checkpoint]; a figure that differs from the file is shown without source.
    """
    require_positive("--gpus", gpus, integer=True)
    require_positive("--gpus-per-node", gpus_per_node, integer=True)
    require_positive("--restart-s", restart_s + 1e-300)
    if checkpoint_write_s <= 0:
        raise BadInput(f"--checkpoint-write-s must be positive, got {checkpoint_write_s}")
    if requeue_s < 0:
        raise BadInput(f"--requeue-s must be 0 or more, got {requeue_s}")
    if mode not in MODES:
        raise BadInput(f"--mode: choose one of {', '.join(MODES)}, got {mode!r}")
    if interval_s is not None and interval_s <= 0:
        raise BadInput(f"--interval-s must be positive, got {interval_s}")

    d = Derivation("failure budget and checkpoint interval")
    d.given("GPUs in the job", "N", gpus, "GPU")
    d.given("GPUs per node", "g", gpus_per_node, "GPU")
    comps = component_rates_per_day(p, gpus, gpus_per_node)
    if p.counted:
        total = sum(c.count for c in p.components)
        d.given(f"unexpected interruptions counted ({p.label})", "n_obs", total, "1",
                source=p.source)
        d.given("GPUs in that fleet", "N_obs", p.gpus, "GPU", source=p.source)
        d.given("days observed", "D_obs", p.days, "day", source=p.source)
        lam = sum(comps.values())
        if gpus_per_node == p.gpus_per_node and gpus % gpus_per_node == 0:
            d.calc("job interruptions per day (rates scale with GPUs and hosts)", "lambda_d",
                   "n_obs / (N_obs * D_obs) * N", "1/day", check=lam, rel_tol=1e-6)
        else:
            d.given("job interruptions per day (host and network rates counted per whole or "
                    "partial node of g GPUs; sum of the component table)", "lambda_d", lam,
                    "1/day")
    else:
        d.given(f"interruptions per node-day ({p.label})", "r_f", p.rate_per_node_day,
                "1/(node*day)", source=p.source)
        lam = p.rate_per_node_day * gpus / gpus_per_node
        d.calc("job interruptions per day", "lambda_d", "r_f * N / g", "1/day", check=lam)
    mtbf = d.calc("job mean time between interruptions", "M", "86400 / lambda_d", "s")

    if checkpoint_bytes is not None and write_bytes_per_s:
        d.given("checkpoint size (weights + optimizer state)", "S_ckpt", checkpoint_bytes, "B")
        d.given("storage write bandwidth", "B_w", write_bytes_per_s, "B/s", source=write_source)
        d.calc("time to write one checkpoint", "delta_w", "S_ckpt / B_w", "s",
               check=checkpoint_write_s)
    else:
        d.given("time to write one checkpoint (synchronous)", "delta_w", checkpoint_write_s, "s")
    d.given("restart after an interruption", "R_0", restart_s, "s")
    d.given("re-queue wait", "Q", requeue_s, "s")
    spec = [checkpoint_figure(k) for k in MODE_FIGURES]
    if mode_figures is None:
        mode_figures = (spec[0].value, spec[1].value, spec[2].value)
    fig_src = [f.source if v == f.value else "" for f, v in zip(spec, mode_figures, strict=True)]
    modes = checkpoint_modes(checkpoint_write_s, restart_s + requeue_s, *mode_figures)
    m = modes[mode]
    if mode == "sync":
        delta = d.calc("stall per checkpoint (sync: the write)", "delta", "delta_w", "s")
        restart = d.calc("restart cost", "R", "R_0 + Q", "s")
    elif mode == "async":
        d.given("async stall as a fraction of the write", "f_a", mode_figures[0], "1",
                source=fig_src[0])
        delta = d.calc("stall per checkpoint (async copy to host)", "delta", "f_a * delta_w", "s")
        restart = d.calc("restart cost (+ one write: the newest checkpoint may not be durable)",
                         "R", "R_0 + Q + delta_w", "s")
    else:
        d.given("in-memory stall as a fraction of the write", "f_m", mode_figures[1], "1",
                source=fig_src[1])
        d.given("in-memory restart as a fraction of a storage restart", "f_r", mode_figures[2], "1",
                source=fig_src[2])
        delta = d.calc("stall per checkpoint (copy to peers)", "delta", "f_m * delta_w", "s")
        restart = d.calc("restart cost from peers' memory", "R", "f_r * (R_0 + Q)", "s")
    assert math.isclose(delta, m.stall_s) and math.isclose(restart, m.restart_s)
    young = d.calc("Young's interval", "tau_Y", "sqrt(2 * delta * M)", "s", source=cite("young-1974"))
    if delta < 2 * mtbf:
        daly = d.calc("Daly's interval", "tau_D",
                      "sqrt(2 * delta * M) * (1 + sqrt(delta / (2 * M)) / 3 + delta / (18 * M))"
                      " - delta", "s", source=cite("daly-2006"), check=daly_interval(delta, mtbf))
    else:
        daly = d.calc("Daly's interval (delta >= 2M: checkpoint every M)", "tau_D", "M", "s",
                      source=cite("daly-2006"))
    best = best_interval(delta, restart, mtbf)
    tau = interval_s if interval_s is not None else daly
    d.given("chosen interval" + (" (Daly's)" if interval_s is None else ""), "tau", tau, "s")
    g = d.calc("goodput (Daly's model, exponential failures)", "G",
               "tau / (M * exp(R / M) * expm1((tau + delta) / M))", "1",
               source=cite("daly-2006"), check=goodput(tau, delta, restart, mtbf))
    d.calc("first-order waste for comparison", "W_1", "delta / tau + (tau / 2 + R) / M", "1")
    warnings: list[str] = []
    if delta >= mtbf:
        warnings.append("the checkpoint stall is longer than the job's MTBF: the job barely "
                        "progresses; shrink the checkpoint or the job")
    return CheckpointResult(
        gpus=gpus, profile=p.id, job_mtbf_s=mtbf, rate_per_day=lam,
        checkpoint_write_s=checkpoint_write_s, stall_s=delta, restart_s=restart,
        young_interval_s=young, daly_interval_s=float(daly), best_interval_s=best,
        interval_s=float(tau), goodput=g, goodput_at_young=goodput(young, delta, restart, mtbf),
        goodput_at_daly=goodput(daly, delta, restart, mtbf), mode=mode, components=comps,
        derivation=d, checkpoint_bytes=checkpoint_bytes, warnings=tuple(warnings),
    )


def checkpoint_size_bytes(params: float, weight_bytes: float, optimizer_bytes: float) -> float:
    """Weights in their training precision plus the optimizer's master copy and states."""
    return params * (weight_bytes + optimizer_bytes)
