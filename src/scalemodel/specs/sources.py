"""Where every figure comes from: the source registry and the bundled data files."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import BadInput


@dataclass(frozen=True)
class Source:
    """A citable origin of a figure: datasheet, paper, config file, measurement or assumption."""

    key: str
    title: str
    url: str = ""
    date: str = ""
    kind: str = ""

    def cite(self) -> str:
        """Short citation for a derivation step: 'title (date)'."""
        return f"{self.title} ({self.date})" if self.date else self.title


def data_path(name: str) -> Path:
    """Path of a bundled data file under specs/data/."""
    return Path(str(resources.files("scalemodel.specs").joinpath("data", name)))


@cache
def load_toml(name: str) -> dict[str, Any]:
    with open(data_path(name), "rb") as f:
        return tomllib.load(f)


def is_user_file(name: str) -> bool:
    """True when ``name`` names an existing regular file; odd strings (too long, NUL bytes) are
    simply not files rather than an error."""
    try:
        return Path(name).is_file()
    except (OSError, ValueError):
        return False


def read_user_toml(path: str | Path, what: str) -> dict[str, Any]:
    """Parse a user's TOML file (data only: TOML cannot execute anything)."""
    p = Path(path)
    if not is_user_file(str(p)):
        raise BadInput(f"{what}: no such file {str(p)[:200]!r}")
    from .bounds import read_toml  # size- and depth-bounded

    return read_toml(p, what)


@cache
def _registry() -> dict[str, Source]:
    reg: dict[str, Source] = {}
    tables: dict[str, Any] = {}
    # sources.toml and any topic file sources_<topic>.toml, then [sources.*] tables elsewhere
    folder = data_path("")
    for p in sorted(folder.glob("sources*.toml")):
        tables.update(load_toml(p.name))
    tables.update(load_toml("numerics.toml").get("sources", {}))
    for key, t in tables.items():
        reg[key] = Source(
            key=key,
            title=t.get("title", key),
            url=t.get("url", ""),
            date=str(t.get("date", "")),
            kind=t.get("kind", ""),
        )
    return reg


def all_sources() -> dict[str, Source]:
    return dict(_registry())


def source(key: str) -> Source:
    """Look up a source key; an unknown key is shown as given (user files may cite freely)."""
    return _registry().get(key) or Source(key=key, title=key)


def cite(key: str) -> str:
    return source(key).cite()
