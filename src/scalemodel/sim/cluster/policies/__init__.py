"""Scheduler policies. Every module here has the same shape: a module docstring saying what
the policy does and ``POLICY``, a :class:`PolicySpec` composing a queue discipline, a placement
strategy, and the optional preemption and quota mechanisms of :mod:`..core`."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ....errors import BadInput

NAMES = ("fifo", "backfill", "gang", "topology", "preempt", "quota", "fragmentation", "naive")


@dataclass(frozen=True)
class PolicySpec:
    name: str
    summary: str
    queue: str = "strict"  # strict | besteffort | easy
    placement: str = "pack"  # spread | pack | topology | fgd
    order: str = "fifo"  # fifo (submit time) | priority (then submit time)
    preemption: bool = False
    quota: bool = False
    source: str = ""


def get_policy(name: str) -> PolicySpec:
    if name not in NAMES:
        raise BadInput(f"--policy must be one of {', '.join(NAMES)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}").POLICY
