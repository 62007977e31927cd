"""Bounds on every input, from one table (``specs/data/bounds.toml``), and parsers that keep
to them.

Every parser of a user file goes through here: :func:`read_json`, :func:`read_toml` and
:func:`check_depth` (for a pickle, after the data-only unpickler) bound the file size and the
nesting depth, so a hostile file is one line on stderr (exit 2), never a RecursionError or a
gigabyte read into memory. :func:`check_model_config` bounds the numbers of a model config
(by field name, anywhere in the tree), :func:`check_args` every numeric command-line argument
(by argparse dest), and the web app reads the same table for its own, tighter, ``web_max``.
A value past its bound is refused before any work starts, in one line naming the bound.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import BadInput
from .sources import load_toml


@cache
def table() -> dict[str, Any]:
    return load_toml("bounds.toml")


def bound(section: str, name: str) -> Any:
    """The ``max`` of one entry, e.g. ``bound("parse", "json_depth")``."""
    return table()[section][name]["max"]


def _why(section: str, name: str) -> str:
    return table()[section][name]["why"].split(";")[0].split(":")[0]


def refuse(what: str, value: Any, section: str, name: str) -> BadInput:
    """The one-line error for a value past a bound."""
    mx = bound(section, name)
    shown = _short(value)
    return BadInput(f"{what}: {shown} is past the bound {section}.{name} = {mx:,} "
                    f"(specs/data/bounds.toml: {_why(section, name)})")


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"about 10^{len(str(abs(value))) - 1}" if abs(value) < 10**4000 else "a number "\
            "of more than 4,000 digits"
    if isinstance(value, float) and abs(value) >= 1e15:
        return f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int | float) else str(value)[:60]


def check(what: str, value: Any, section: str, name: str) -> Any:
    """``value`` unless it is past the bound (then BadInput)."""
    if value > bound(section, name):
        raise refuse(what, value, section, name)
    return value


# --- depth and size ------------------------------------------------------------------------------


def depth_of(obj: Any, limit: int) -> int:
    """Nesting depth of lists, tuples and dicts (iterative: no recursion), stopping once past
    ``limit``."""
    deepest = 0
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            children = o.values()
        elif isinstance(o, list | tuple | set | frozenset):
            children = o
        else:
            continue
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        stack.extend((c, d + 1) for c in children)
    return deepest


def check_depth(obj: Any, what: str, name: str = "json_depth") -> Any:
    limit = bound("parse", name)
    d = depth_of(obj, limit)
    if d > limit:
        raise BadInput(f"{what}: nested more than {limit} levels deep (bound parse.{name}); "
                       "not a file this reads")
    return obj


def read_bytes(path: str | Path, what: str, name: str = "config_bytes") -> bytes:
    """The file's bytes, refused past its size bound before it is read."""
    p = Path(path)
    limit = bound("parse", name)
    size = p.stat().st_size
    if size > limit:
        raise BadInput(f"{what}: {p.name} is {size:,} bytes, past the bound parse.{name} = "
                       f"{limit:,}")
    with open(p, "rb") as f:
        return f.read(limit + 1)


def _deep(what: str, name: str) -> BadInput:
    return BadInput(f"{what}: nested more than {bound('parse', name)} levels deep (bound "
                    f"parse.{name}); not a file this reads")


def parse_json(text: str | bytes, what: str) -> Any:
    """JSON text, depth-bounded (a RecursionError in the parser is the same refusal)."""
    try:
        obj = json.loads(text)
    except RecursionError:
        raise _deep(what, "json_depth") from None
    return check_depth(obj, what)


def read_json(path: str | Path, what: str) -> Any:
    """A user's JSON file: size- and depth-bounded; a parse error is one line."""
    raw = read_bytes(path, what)
    try:
        return parse_json(raw, what)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{what}: {path} is not valid JSON ({e})") from None


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """A user's TOML file: size- and depth-bounded (TOML executes nothing)."""
    raw = read_bytes(path, what)
    try:
        obj = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise _deep(what, "toml_depth") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{what}: {path} is not UTF-8 text ({e.reason} at byte {e.start})") \
            from None
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{what}: {path} is not valid TOML ({e})") from None
    return check_depth(obj, what, "toml_depth")


# --- numbers -------------------------------------------------------------------------------------


def check_model_config(cfg: Any, where: str) -> None:
    """Bound every number of a model config: fields named in the table's ``config`` section
    by their own bound (anywhere in the tree: a multimodal config nests its text config), any
    other by ``config.number``; a float must be finite."""
    own = table()["config"]
    generic = own["number"]["max"]
    stack = [("", cfg)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, Mapping):
            stack.extend((str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((key, x) for x in v)
        elif isinstance(v, bool) or not isinstance(v, int | float):
            continue
        elif isinstance(v, float) and not math.isfinite(v):
            raise BadInput(f"{where}: {key} is {v}, not a finite number")
        elif key in own and key != "number":
            if abs(v) > own[key]["max"]:
                raise refuse(f"{where}: {key}", v, "config", key)
        elif abs(v) > generic:
            raise refuse(f"{where}: {key}", v, "config", "number")


def read_model_config(path: str | Path, what: str) -> Any:
    """A user's model config.json: :func:`read_json`, then :func:`check_model_config`."""
    cfg = read_json(path, what)
    check_model_config(cfg, f"{what} {path}")
    return cfg


def arg_bound(dest: str, web: bool = False) -> tuple[float, float]:
    """(min, max) of a numeric argument by its argparse dest; the generic bound of its type
    for one without its own entry (``dest`` "int" or "float")."""
    args = table()["arg"]
    e = args.get(dest)
    if e is None:
        return -math.inf, math.inf
    mx = e["web_max"] if web else e["max"]
    return e.get("min", 1 if dest not in ("int", "float") else -mx), mx


def check_args(ns: Any) -> None:
    """Bound every numeric value an argparse namespace holds (the CLI's one call)."""
    for dest, v in vars(ns).items():
        for x in v if isinstance(v, list | tuple) else (v,):
            if isinstance(x, bool) or not isinstance(x, int | float):
                continue
            # an entry may name its flag where the dest differs (serve --threads -> server_threads)
            flag = table()["arg"].get(dest, {}).get("flag") or "--" + dest.replace("_", "-")
            if isinstance(x, float) and not math.isfinite(x):
                raise BadInput(f"{flag}: must be a finite number, got {x}")
            lo, hi = arg_bound(dest)
            if dest not in table()["arg"]:
                g = "float" if isinstance(x, float) else "int"
                lo, hi = arg_bound(g)
                if not lo <= x <= hi:
                    raise refuse(flag, x, "arg", g)
            elif x > hi:
                raise refuse(flag, x, "arg", dest)


def markdown_table() -> str:
    """The bounds table as Markdown (docs/reliability.md holds this text; a test checks it)."""
    rows = ["| bound | max | web max | unit | why |", "|---|---|---|---|---|"]
    for section in ("parse", "config", "billing", "arg"):
        for name, e in table()[section].items():
            web = e.get("web_max")
            rows.append(f"| `{section}.{name}` | {_num(e['max'])} | "
                        f"{_num(web) if web is not None else ''} | {e.get('unit', '')} | "
                        f"{e['why']} |")
    rows.append("")
    rows.append("Web-only bounds on arguments whose memory grows with their value "
                "(`web_cost`, [min, max]):")
    rows.append("")
    rows.append("| command | argument | min | max |")
    rows.append("|---|---|---|---|")
    for cmd, args in table()["web_cost"].items():
        for dest, (lo, hi) in args.items():
            rows.append(f"| `{cmd}` | `{dest}` | {_num(lo)} | {_num(hi)} |")
    return "\n".join(rows) + "\n"


def _num(x: Any) -> str:
    if isinstance(x, float) and (abs(x) >= 1e15 or x != int(x)):
        return f"{x:g}"
    return f"{int(x):,}"
