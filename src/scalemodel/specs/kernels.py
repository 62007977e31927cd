"""Kernel efficiency curves as data (specs/data/kernels.toml): GEMM tiles and attention curves
per kernel family and GPU architecture, with explicit borrowing where an architecture has no
measurement of its own."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import BadInput
from .sources import load_toml

FILE = "kernels.toml"


@dataclass(frozen=True)
class ArchEntry:
    """One architecture's entry of a table, after following ``borrows``."""

    arch: str  # the architecture asked for
    data: dict[str, Any]  # the entry whose figures are used
    borrowed_from: str | None  # where the figures come from, when not ``arch`` itself
    borrow_note: str  # why (from the borrowing entry)

    @property
    def owner(self) -> str:
        return self.borrowed_from or self.arch


@cache
def kernels() -> dict[str, Any]:
    return load_toml(FILE)


def _measured(what: str, arch: str, e: dict[str, Any]) -> None:
    if not e.get("source"):
        raise BadInput(f"{FILE} [{what}.{arch}]: source is missing (every measured entry names "
                       "one)")


def resolve(table: dict[str, Any], arch: str, what: str) -> ArchEntry:
    """The entry for ``arch`` in ``table`` (architecture -> entry), following one ``borrows``
    link; BadInput naming the file, the table and the architectures it has when there is none."""
    archs = sorted(k for k, v in table.items() if isinstance(v, dict))
    e = table.get(arch)
    if not isinstance(e, dict):
        raise BadInput(f"{FILE} [{what}] has no entry for architecture {arch or '(none)'!r}; "
                       f"it has: {', '.join(archs)} (add one, or one that borrows)")
    if "borrows" not in e:
        _measured(what, arch, e)
        return ArchEntry(arch, e, None, "")
    src = e["borrows"]
    lent = table.get(src)
    if not isinstance(lent, dict) or "borrows" in lent:
        raise BadInput(f"{FILE} [{what}.{arch}]: borrows {src!r}, which is not a measured entry; "
                       f"choose one of {', '.join(a for a in archs if 'borrows' not in table[a])}")
    if not e.get("note"):
        raise BadInput(f"{FILE} [{what}.{arch}]: a borrowing entry needs a note saying why")
    _measured(what, src, lent)
    return ArchEntry(arch, lent, src, str(e["note"]))


def gemm_entry(arch: str) -> ArchEntry:
    """The GEMM tile of an architecture."""
    return resolve(kernels()["gemm"], arch, "gemm")


def attention_family(kind: str) -> tuple[str, dict[str, Any]]:
    """(family id, table) of the attention kernel a planner ``--attention`` kind names."""
    for fam, t in kernels()["attention"].items():
        if t.get("kind") == kind:
            return fam, t
    kinds = [t.get("kind") for t in kernels()["attention"].values()]
    raise BadInput(f"--attention: no kernel family for {kind!r} in {FILE}; "
                   f"choose one of {', '.join(k for k in kinds if k)}")


def attention_entry(family: str, arch: str) -> ArchEntry:
    """One attention family's entry for an architecture (borrowed where the data says so)."""
    table = kernels()["attention"].get(family)
    if table is None:
        raise BadInput(f"{FILE} [attention] has no family {family!r}; "
                       f"it has: {', '.join(kernels()['attention'])}")
    return resolve(table, arch, f"attention.{family}")
