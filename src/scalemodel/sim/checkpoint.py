"""Assemble a checkpoint plan and a blast-radius table from the bundled data (shared by the
``reliability`` command and the question-bank answers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analytic.blast import Hierarchy, blast_radius, parse_layout
from ..analytic.reliability import (
    MODE_FIGURES,
    CheckpointResult,
    checkpoint_plan,
    checkpoint_size_bytes,
    component_rates_per_day,
    goodput,
    job_rate_per_day,
)
from ..errors import BadInput
from ..specs.reliability import (
    FailureProfile,
    checkpoint_figure,
    failure_profile,
    fault_classes,
    hierarchy,
    profile_for_gpu,
    profile_ids,
)
from .failures import SimResult, simulate


def pick_profile(gpu: str | None, profile: str | None) -> tuple[FailureProfile, list[str]]:
    """The failure profile named, or the one measured on ``gpu``, else Llama 3's H100 fleet."""
    warnings: list[str] = []
    if profile:
        return failure_profile(profile), warnings
    if gpu:
        p = profile_for_gpu(gpu)
        if p is not None:
            return p, warnings
        warnings.append(f"no measured failure rates for {gpu}; using the llama3-h100 profile "
                        f"(choose another with --failure-profile: {', '.join(profile_ids())})")
    return failure_profile("llama3-h100"), warnings


def reference_component_rates(p: FailureProfile, gpus: int, gpn: int) -> tuple[dict[str, float], list[str]]:
    """Per-component rates; an aggregate profile is split like the counted Llama 3 table."""
    if p.counted:
        return component_rates_per_day(p, gpus, gpn), []
    ref = failure_profile("llama3-h100")
    shares = component_rates_per_day(ref, gpus, gpn)
    total = sum(shares.values())
    agg = p.rate_per_node_day * gpus / gpn
    return ({k: v / total * agg for k, v in shares.items()},
            [f"{p.id} has one aggregate rate; it is split across components in the proportions "
             "of the Llama 3 table"])


def checkpoint_write_time(model: str | None, optimizer: str, dtype: str,
                          write_bytes_per_s: float | None) -> tuple[float, float, float, str]:
    """(write seconds, checkpoint bytes, write bandwidth, its source) for a model."""
    from ..analytic.params import count_params
    from ..specs import get_model
    from ..specs.numerics import dtype as get_dtype
    from ..specs.numerics import optimizer as get_opt

    m = get_model(model)
    params = count_params(m).total
    size = checkpoint_size_bytes(params, get_dtype(dtype).bytes, get_opt(optimizer).bytes_per_param)
    if write_bytes_per_s:
        bw, src = write_bytes_per_s, "--storage-bw"
    else:
        f = checkpoint_figure("storage_write_bytes_per_s")
        bw, src = f.value, f.source
    return size / bw, size, bw, src


@dataclass(frozen=True)
class CheckpointStudy:
    result: CheckpointResult
    sim_exponential: SimResult | None
    sim_weibull: SimResult | None
    weibull_best: tuple[float, float] | None  # (interval, goodput) best of the Weibull sweep
    sweep_taus: tuple[float, ...]
    sweep_analytic: tuple[float, ...]
    sweep_sim: tuple[float, ...]
    sweep_sim_weibull: tuple[float, ...]
    mode_rows: tuple[tuple[str, float, float, float, float], ...]
    scale_rows: tuple[tuple[int, float, float, float], ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        d = self.result.to_dict()
        d["simulation"] = {
            "exponential": self.sim_exponential.to_dict() if self.sim_exponential else None,
            "weibull": self.sim_weibull.to_dict() if self.sim_weibull else None,
            "weibull_best_interval_s": self.weibull_best[0] if self.weibull_best else None,
            "weibull_best_goodput": self.weibull_best[1] if self.weibull_best else None,
        }
        if self.sweep_taus:
            d["sweep"] = {"interval_s": list(self.sweep_taus),
                          "goodput_analytic": list(self.sweep_analytic),
                          "goodput_simulated": list(self.sweep_sim),
                          "goodput_simulated_weibull": list(self.sweep_sim_weibull)}
        d["modes"] = [{"mode": m, "stall_s": s, "restart_s": r, "daly_interval_s": t,
                       "goodput": g} for m, s, r, t, g in self.mode_rows]
        d["by_scale"] = [{"gpus": n, "job_mtbf_s": mt, "daly_interval_s": t, "goodput": g}
                         for n, mt, t, g in self.scale_rows]
        return d


def checkpoint_study(
    *,
    gpus: int,
    gpu: str | None = "h100-sxm",
    profile: str | None = None,
    gpus_per_node: int | None = None,
    checkpoint_write_s: float | None = None,
    model: str | None = None,
    optimizer: str = "adam",
    dtype: str = "bf16",
    storage_bw: float | None = None,
    restart_s: float = 600.0,
    requeue_s: float = 0.0,
    interval_s: float | None = None,
    mode: str = "sync",
    trials: int = 200,
    weibull_shape: float | None = None,
    horizon_days: float = 30.0,
    sweep: bool = False,
    seed: int = 0,
) -> CheckpointStudy:
    p, warnings = pick_profile(gpu, profile)
    gpn = gpus_per_node or p.gpus_per_node
    size = bw = None
    src = ""
    if checkpoint_write_s is None:
        if model is None:
            raise BadInput("give --checkpoint-write-s SECONDS or --model (checkpoint size from "
                           "the model and --optimizer, written at --storage-bw)")
        checkpoint_write_s, size, bw, src = checkpoint_write_time(model, optimizer, dtype,
                                                                 storage_bw)
    figs = tuple(checkpoint_figure(k).value for k in MODE_FIGURES)
    r = checkpoint_plan(p, gpus=gpus, gpus_per_node=gpn, checkpoint_write_s=checkpoint_write_s,
                        restart_s=restart_s, requeue_s=requeue_s, interval_s=interval_s,
                        mode=mode, mode_figures=figs, checkpoint_bytes=size,
                        write_bytes_per_s=bw, write_source=src)
    shape = weibull_shape if weibull_shape is not None else checkpoint_figure("weibull_shape").value
    horizon = horizon_days * 86400.0
    sim_e = sim_w = None
    wbest = None
    taus: tuple[float, ...] = ()
    an: tuple[float, ...] = ()
    se: tuple[float, ...] = ()
    sw: tuple[float, ...] = ()
    if trials:
        sim_e = simulate(r.interval_s, r.stall_s, r.restart_s, r.job_mtbf_s, trials=trials,
                         horizon_s=horizon, seed=seed)
        sim_w = simulate(r.interval_s, r.stall_s, r.restart_s, r.job_mtbf_s, shape=shape,
                         trials=trials, horizon_s=horizon, seed=seed + 1)
        base = r.daly_interval_s
        grid = np.geomspace(base / 6, base * 6, 13)
        wres = [simulate(float(t), r.stall_s, r.restart_s, r.job_mtbf_s, shape=shape,
                         trials=max(2, trials // 4), horizon_s=horizon, seed=seed + 100 + i)
                for i, t in enumerate(grid)]
        best = max(wres, key=lambda s: s.goodput)
        wbest = (best.tau_s, best.goodput)
        if sweep:
            taus = tuple(float(t) for t in grid)
            an = tuple(float(goodput(t, r.stall_s, r.restart_s, r.job_mtbf_s)) for t in grid)
            se = tuple(simulate(t, r.stall_s, r.restart_s, r.job_mtbf_s, trials=max(2, trials // 4),
                                horizon_s=horizon, seed=seed + 200 + i).goodput
                       for i, t in enumerate(taus))
            sw = tuple(s.goodput for s in wres)
    mode_rows = []
    for md in ("sync", "async", "in-memory"):
        rr = checkpoint_plan(p, gpus=gpus, gpus_per_node=gpn,
                             checkpoint_write_s=checkpoint_write_s, restart_s=restart_s,
                             requeue_s=requeue_s, mode=md, mode_figures=figs)
        mode_rows.append((md, rr.stall_s, rr.restart_s, rr.daly_interval_s, rr.goodput))
    scale_rows = []
    for n in sorted({1024, 4096, 16384, 65536, 131072, gpus}):
        lam = float(job_rate_per_day(p, n, gpn))
        mt = 86400.0 / lam
        rr = checkpoint_plan(p, gpus=n, gpus_per_node=gpn, checkpoint_write_s=checkpoint_write_s,
                             restart_s=restart_s, requeue_s=requeue_s, mode=mode,
                             mode_figures=figs)
        scale_rows.append((n, mt, rr.daly_interval_s, rr.goodput))
    return CheckpointStudy(r, sim_e, sim_w, wbest, taus, an, se, sw, tuple(mode_rows),
                           tuple(scale_rows), tuple(warnings) + r.warnings)


def blast_study(*, gpus: int, layout: str, order: str = "tp-cp-ep-dp-pp", gpu: str | None = None,
                profile: str | None = None, gpus_per_node: int | None = None,
                nodes_per_rack: int | None = None, nodes_per_leaf: int | None = None,
                racks_per_power_domain: int | None = None, restart_s: float = 600.0,
                interval_s: float | None = None, checkpoint_write_s: float = 60.0) -> Any:
    p, warnings = pick_profile(gpu, profile)
    h = Hierarchy(
        gpus_per_node=int(gpus_per_node or hierarchy("gpus_per_node").value),
        nodes_per_rack=int(nodes_per_rack or hierarchy("nodes_per_rack").value),
        nodes_per_leaf=int(nodes_per_leaf or hierarchy("nodes_per_leaf").value),
        racks_per_power_domain=int(racks_per_power_domain
                                   or hierarchy("racks_per_power_domain").value),
    )
    lay = parse_layout(layout, order, gpus)
    comps, w2 = reference_component_rates(p, gpus, h.gpus_per_node)
    if interval_s is None:
        r = checkpoint_plan(p, gpus=gpus, gpus_per_node=h.gpus_per_node,
                            checkpoint_write_s=checkpoint_write_s, restart_s=restart_s)
        interval_s = r.daly_interval_s
    res = blast_radius(p, fault_classes(), lay, h, restart_s=restart_s, interval_s=interval_s,
                       component_rates=comps)
    return res, h, tuple(warnings + w2)
