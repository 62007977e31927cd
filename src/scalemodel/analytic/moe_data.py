"""The MoE engines' constants and input limits, read from specs/data/moe.toml.

Every figure there carries a source (a paper for published coefficients, ``kind =
"assumption"`` for ours, with a note on what it controls). Limits bound the work an input can
ask for: a larger value is refused with one line naming the flag, the limit and its reason.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..errors import BadInput
from ..specs.sources import cite, load_toml


@cache
def moe_table() -> dict[str, Any]:
    return load_toml("moe.toml")


def entry(section: str, name: str) -> dict[str, Any]:
    return moe_table()[section][name]


def router_constant(name: str) -> Any:
    """Value of a [router.*] figure (a number or a list)."""
    return entry("router", name)["value"]


def router_citation(name: str) -> str:
    return cite(entry("router", name)["source"])


def limit(name: str) -> int:
    return int(entry("limits", name)["value"])


def check_limit(flag: str, value: float, name: str) -> None:
    """BadInput when ``value`` exceeds the [limits.name] figure of moe.toml."""
    lim = limit(name)
    if value > lim:
        note = entry("limits", name)["note"]
        raise BadInput(f"{flag}: {value:,} is more than the limit of {lim:,} "
                       f"(moe.toml limits.{name}: {note})")
