"""Blast radius: what one fault of each class takes down, given the hierarchy and the layout.

Ranks are placed on GPUs in order (rank r on GPU r, node r // g); the parallel layout assigns
each rank a coordinate in each dimension by a rank order such as Megatron's default
``tp-cp-ep-dp-pp`` (tensor parallel fastest). A fault removes the ranks of one physical unit
(a GPU, a node, a rack, the nodes under a leaf switch, a power domain) or of the whole job.
Its *scope* is the smallest parallel unit that holds every removed rank:

* ``rank``: one rank; ``tp_group``: inside one tensor-parallel group;
* ``pipeline``: inside some but not all data-parallel replicas (a replica is one pipeline);
* ``job``: every replica is hit; ``none``: no rank is removed.

A synchronous job stops on any scope but ``none``. With elastic data parallelism the job goes on
without the replicas hit (scopes rank / tp_group / pipeline), as long as a copy of their state
survives; with hot spares the lost hardware is replaced in ``spare_s`` instead of ``repair_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput
from ..specs.reliability import FailureProfile, FaultClass
from .layout import TrainLayout
from .reliability import DAY_S, MONTH_S, component_rates_per_day

DIMS = ("tp", "cp", "ep", "dp", "pp")
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
SCOPES = ("none", "rank", "tp_group", "pipeline", "job")


BLAST_KEYS = ("tp", "pp", "dp", "cp", "ep")  # the layout keys that place ranks


@dataclass(frozen=True)
class Layout:
    """Where a training layout (analytic/layout.py TrainLayout) puts its ranks: one size per
    parallel dimension in the rank order. Expert parallelism is drawn from the data-parallel
    ranks, so the ``dp`` dimension here counts the dp / ep groups of ``ep`` replicas."""

    sizes: dict[str, int]
    order: tuple[str, ...]
    train: TrainLayout | None = None

    @property
    def world(self) -> int:
        return int(np.prod([self.sizes[d] for d in DIMS]))

    def describe(self) -> str:
        t = self.train or TrainLayout(tp=self.sizes["tp"], pp=self.sizes["pp"],
                                      dp=self.sizes["dp"] * self.sizes["ep"],
                                      cp=self.sizes["cp"], ep=self.sizes["ep"])
        return ",".join(f"{k}={t[k]}" for k in BLAST_KEYS if t[k] > 1) or "dp=1"

    @classmethod
    def of(cls, lay: TrainLayout, order: tuple[str, ...]) -> Layout:
        if lay.folded:
            raise BadInput("--layout etp: blast radius places experts inside the data-parallel "
                           "ranks; folded expert layouts (etp < tp) are not placed")
        if lay.dp % lay.ep:
            raise BadInput(f"--layout: ep={lay.ep} must divide dp={lay.dp} (expert groups are "
                           "drawn from the data-parallel ranks)")
        sizes = {"tp": lay.tp, "cp": lay.cp, "ep": lay.ep, "dp": lay.dp // lay.ep, "pp": lay.pp}
        return cls(sizes, order, lay)


def parse_layout(text: str, order: str = DEFAULT_ORDER, gpus: int | None = None) -> Layout:
    """``tp=8,pp=16,dp=128`` in plan train's keys (analytic/layout.py parse_layout): ep is drawn
    from dp, so tp x pp x dp x cp is the GPU count."""
    from .layout import parse_layout as parse_keys

    keys = parse_keys(text, BLAST_KEYS, "reliability blast-radius")
    dims = tuple(order.split("-"))
    if sorted(dims) != sorted(DIMS):
        raise BadInput(f"--order: a permutation of {'-'.join(DIMS)} (fastest first), got {order!r}")
    lay = Layout.of(TrainLayout.from_keys(keys), dims)
    if gpus is not None and lay.world != gpus:
        raise BadInput(f"--layout: {lay.describe()} uses {lay.world} GPUs but --gpus is {gpus}")
    return lay


def coordinates(lay: Layout) -> dict[str, np.ndarray]:
    """Per rank (index), its coordinate along each parallel dimension."""
    r = np.arange(lay.world)
    out: dict[str, np.ndarray] = {}
    stride = 1
    for d in lay.order:
        out[d] = (r // stride) % lay.sizes[d]
        stride *= lay.sizes[d]
    return out


@dataclass(frozen=True)
class Hierarchy:
    gpus_per_node: int
    nodes_per_rack: int
    nodes_per_leaf: int
    racks_per_power_domain: int

    def footprint_ranks(self, footprint: str, world: int) -> np.ndarray:
        """Ranks removed by one instance (the first one) of a physical unit."""
        g = self.gpus_per_node
        n = {"gpu": 1, "node": g, "rack": g * self.nodes_per_rack,
             "leaf": g * self.nodes_per_leaf,
             "power_domain": g * self.nodes_per_rack * self.racks_per_power_domain}.get(footprint)
        if footprint == "job":
            return np.arange(world)
        if footprint == "none":
            return np.arange(0)
        if n is None:
            raise ValueError(f"unknown footprint {footprint!r}")
        return np.arange(min(n, world))

    def units(self, unit: str, world: int) -> float:
        nodes = np.ceil(world / self.gpus_per_node)
        return float({"gpu": world, "node": nodes, "rack": np.ceil(nodes / self.nodes_per_rack),
                      "leaf": np.ceil(nodes / self.nodes_per_leaf),
                      "power_domain": np.ceil(nodes / (self.nodes_per_rack
                                                       * self.racks_per_power_domain)),
                      "spine": max(1.0, np.ceil(nodes / self.nodes_per_leaf)),
                      "cluster": 1.0}[unit])


def scope_of(ranks: np.ndarray, lay: Layout, coords: dict[str, np.ndarray]) -> tuple[str, int]:
    """(scope, number of data-parallel replicas hit) of a set of removed ranks."""
    if ranks.size == 0:
        return "none", 0
    # a tp group = same coordinates in every dimension but tp. The ep ranks of one expert group
    # hold different experts, so the ep data-parallel replicas they belong to stop together: a
    # fault hits whole groups of ep replicas (the dp coordinate here numbers those groups)
    ep = lay.sizes["ep"]
    n_replicas = lay.sizes["dp"] * ep
    hit = np.unique(coords["dp"][ranks]).size * ep
    if ranks.size == 1:
        return "rank", ep
    key = np.zeros(ranks.size, dtype=np.int64)
    for d in DIMS:
        if d != "tp":
            key = key * lay.sizes[d] + coords[d][ranks]
    if np.unique(key).size == 1:
        return "tp_group", ep
    if hit < n_replicas:
        return "pipeline", hit
    return "job", hit


@dataclass(frozen=True)
class FaultRow:
    component: str
    label: str
    scope: str
    rate_per_day: float
    detect_s: float
    recovery_s: float
    replicas_hit: int
    ranks_lost: int
    stops_job: bool
    stops_job_elastic: bool
    gpu_hours_per_month: float
    gpu_hours_per_month_spares: float
    gpu_hours_per_month_elastic: float
    source: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BlastResult:
    gpus: int
    layout: str
    order: str
    interval_s: float
    restart_s: float
    faults: tuple[FaultRow, ...]
    derivation: Derivation = field(compare=False, repr=False)
    spofs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        tot = sum(f.rate_per_day for f in self.faults if f.stops_job)
        return {"gpus": self.gpus, "layout": self.layout, "order": self.order,
                "interval_s": self.interval_s, "restart_s": self.restart_s,
                "faults": [f.to_dict() for f in self.faults],
                "job_stopping_rate_per_day": tot,
                "gpu_hours_per_month": sum(f.gpu_hours_per_month for f in self.faults),
                "gpu_hours_per_month_spares": sum(f.gpu_hours_per_month_spares
                                                  for f in self.faults),
                "gpu_hours_per_month_elastic": sum(f.gpu_hours_per_month_elastic
                                                   for f in self.faults),
                "single_points_of_failure": list(self.spofs),
                "derivation": self.derivation.to_dict()}


def blast_radius(
    p: FailureProfile,
    faults: list[FaultClass],
    lay: Layout,
    h: Hierarchy,
    *,
    restart_s: float,
    interval_s: float,
    component_rates: dict[str, float] | None = None,
) -> BlastResult:
    """Scope, rate, recovery time and monthly cost of each fault class for one job."""
    world = lay.world
    coords = coordinates(lay)
    comps = dict(component_rates) if component_rates is not None else component_rates_per_day(
        p, world, h.gpus_per_node)
    rows: list[FaultRow] = []
    by_id: dict[str, float] = {}
    d = Derivation("cost of one fault class (GPU-hours lost per month)")
    d.given("GPUs in the job", "N", world, "GPU")
    d.given("checkpoint interval", "tau", interval_s, "s")
    d.given("restart (relaunch and reload)", "R", restart_s, "s")
    for f in faults:
        if f.from_components:
            missing = [c for c in f.from_components if c not in comps]
            if missing:
                raise BadInput(f"fault class {f.id}: components {missing} are not in the "
                               f"component rates of profile {p.id}")
            rate = sum(comps[c] for c in f.from_components)
        elif f.same_rate_as:
            base = next(x for x in faults if x.id == f.same_rate_as)
            units_base = h.units(base.footprint, world)
            rate = by_id[f.same_rate_as] / units_base * f.per_units
        else:
            rate = f.per_unit_year / 365.25 * h.units(f.unit, world)
        by_id[f.id] = rate
        ranks = h.footprint_ranks(f.footprint, world)
        scope, hit = scope_of(ranks, lay, coords)
        stops = scope != "none"
        elastic_survives = scope in ("rank", "tp_group", "pipeline")
        recovery = f.detect_s + f.repair_s + (restart_s if stops else 0.0)
        recovery_spare = f.detect_s + f.spare_s + (restart_s if stops else 0.0)
        rework = interval_s / 2.0
        per_month = rate * MONTH_S / DAY_S
        gh = per_month * (recovery + rework) * world / 3600.0 if stops else 0.0
        gh_sp = per_month * (recovery_spare + rework) * world / 3600.0 if stops else 0.0
        if elastic_survives:
            # the job shrinks by the replicas hit until they come back; the rest keep training
            frac = hit / (lay.sizes["dp"] * lay.sizes["ep"])
            gh_el = per_month * (f.detect_s + f.repair_s) * frac * world / 3600.0
        else:
            gh_el = gh_sp
        rows.append(FaultRow(
            component=f.id, label=f.label, scope=scope, rate_per_day=rate, detect_s=f.detect_s,
            recovery_s=recovery, replicas_hit=hit, ranks_lost=int(ranks.size), stops_job=stops,
            stops_job_elastic=stops and not elastic_survives, gpu_hours_per_month=gh,
            gpu_hours_per_month_spares=gh_sp, gpu_hours_per_month_elastic=gh_el,
            source=f.source, note=f.note))
    # one worked row: the most expensive fault class
    top = max(rows, key=lambda r: r.gpu_hours_per_month)
    d.given(f"rate of '{top.component}' faults", "lambda_f", top.rate_per_day, "1/day")
    d.given("time to detect", "T_det", top.detect_s, "s")
    d.given("time to get the hardware back (no spare)", "T_rep",
            top.recovery_s - top.detect_s - restart_s, "s")
    d.calc("recovery time", "T_rec", "T_det + T_rep + R", "s", check=top.recovery_s)
    d.calc("faults per month", "n_m", "lambda_f * 30.4375", "1/month")
    d.calc("GPU-hours lost per month (recovery + half an interval of rework, whole job)",
           "C_m", "n_m * (T_rec + tau / 2) * N / 3600", "GPU*h", check=top.gpu_hours_per_month,
           rel_tol=1e-6)
    # a single point of failure: one shared unit (not a class of many parts) that stops the job
    # whatever the layout, spares or elasticity
    shared = {f.id for f in faults if f.footprint == "job" and not f.from_components}
    spofs = tuple(r.component for r in rows if r.component in shared)
    return BlastResult(gpus=world, layout=lay.describe(), order="-".join(lay.order),
                       interval_s=interval_s, restart_s=restart_s, faults=tuple(rows),
                       derivation=d, spofs=tuple(dict.fromkeys(spofs)))
