"""Failure profiles, fault classes and the cluster hierarchy, read from reliability.toml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import BadInput, close_matches
from .sources import cite, load_toml


@dataclass(frozen=True)
class Component:
    component: str
    category: str
    count: int
    domain: str  # gpu | node | network | software


@dataclass(frozen=True)
class FailureProfile:
    """Observed interruptions of a fleet: either counted components over a window or one rate."""

    id: str
    label: str
    gpu: str
    gpus_per_node: int
    source: str
    components: tuple[Component, ...] = ()
    gpus: int = 0
    days: float = 0.0
    planned: int = 0
    rate_per_node_day: float = 0.0  # aggregate form (no component split)

    @property
    def counted(self) -> bool:
        return bool(self.components)


@dataclass(frozen=True)
class FaultClass:
    id: str
    label: str
    footprint: str  # gpu | node | rack | leaf | power_domain | job | none
    detect_s: float
    repair_s: float
    spare_s: float
    source: str
    from_components: tuple[str, ...] = ()
    per_unit_year: float = 0.0
    unit: str = ""
    same_rate_as: str = ""
    per_units: float = 0.0
    note: str = ""


@cache
def _data() -> dict[str, Any]:
    return load_toml("reliability.toml")


def profile_ids() -> list[str]:
    return list(_data()["profiles"])


def failure_profile(pid: str) -> FailureProfile:
    t = _data()["profiles"].get(pid)
    if t is None:
        hint = close_matches(pid, profile_ids()) or ", ".join(profile_ids())
        raise BadInput(f"--failure-profile: unknown profile {pid!r}; choose one of: {hint}")
    comps = tuple(Component(c["component"], c["category"], int(c["count"]), c["domain"])
                  for c in t.get("components", ()))
    return FailureProfile(
        id=pid, label=t["label"], gpu=t["gpu"], gpus_per_node=int(t["gpus_per_node"]),
        source=cite(t["source"]), components=comps, gpus=int(t.get("gpus", 0)),
        days=float(t.get("days", 0.0)), planned=int(t.get("planned", 0)),
        rate_per_node_day=float(t.get("rate_per_node_day", 0.0)),
    )


def profile_for_gpu(gpu_id: str) -> FailureProfile | None:
    """The first profile measured on this GPU model (counted profiles first), or None."""
    hits = [failure_profile(p) for p in profile_ids() if _data()["profiles"][p]["gpu"] == gpu_id]
    hits.sort(key=lambda p: not p.counted)
    return hits[0] if hits else None


def fault_classes() -> list[FaultClass]:
    out = []
    for fid, t in _data()["faults"].items():
        out.append(FaultClass(
            id=fid, label=t["label"], footprint=t["footprint"], detect_s=float(t["detect_s"]),
            repair_s=float(t["repair_s"]), spare_s=float(t["spare_s"]), source=cite(t["source"]),
            from_components=tuple(t.get("from_components", ())),
            per_unit_year=float(t.get("per_unit_year", 0.0)), unit=t.get("unit", ""),
            same_rate_as=t.get("same_rate_as", ""), per_units=float(t.get("per_units", 0.0)),
            note=t.get("note", ""),
        ))
    return out


@dataclass(frozen=True)
class Figure:
    value: float
    source: str
    note: str = ""


def hierarchy(name: str) -> Figure:
    t = _data()["hierarchy"][name]
    return Figure(float(t["value"]), cite(t["source"]), t.get("note", ""))


def checkpoint_figure(name: str) -> Figure:
    t = _data()["checkpoint"][name]
    return Figure(float(t["value"]), cite(t["source"]), t.get("note", ""))
