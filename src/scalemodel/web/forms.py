"""Forms and API parameters derived from the CLI's own argparse parsers.

Every registered command (and nested sub-command) becomes a form and an API endpoint: each
argument's flag, type, choices, default and help come from its parser, so commands added to
``cli.COMMANDS`` later appear without changes here. Values from the web go through the same
parser as the command line (``parse``), then through the bounds of :mod:`scalemodel.web.limits`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput

# not offered on the web: output switches, and options that write files or start processes
OUTPUT_DESTS = {"help", "version", "json", "markdown", "plot", "out", "save", "ledger",
                "chrome_trace", "usage_out", "live", "torchrun", "export_file", "export_out"}
# no tool page / endpoint: they start servers or processes, build code, or write files
NOT_TOOLS = {"serve", "site", "triage/run", "comm/bench", "gpu/build", "gpu/bench"}


class FieldError(BadInput):
    """A bad form field: ``field`` is the argument's dest (or '' when no field is named)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Field:
    dest: str
    flag: str | None  # None for a positional
    kind: str  # "flag" (checkbox), "choice" (select), "text"
    choices: tuple[str, ...]
    default: Any
    help: str
    required: bool
    metavar: str
    type_name: str  # integer, number, string, boolean (for OpenAPI)
    multi: bool = False  # a repeatable flag (action="append"): one value per line or per ';'

    @property
    def label(self) -> str:
        return self.flag or self.dest


def _type_name(a: argparse.Action) -> str:
    if isinstance(a, argparse._StoreTrueAction | argparse._StoreFalseAction):
        return "boolean"
    t = a.type
    name = getattr(t, "__name__", "")
    if t is int or name in ("positive_int", "non_negative_int", "_seed"):
        return "integer"
    if t is float or name in ("fraction", "_days", "positive_float", "non_negative_float", "finite_float"):
        return "number"
    return "string"


def _help(a: argparse.Action, prog: str) -> str:
    h = a.help or ""
    if "%" in h:
        try:
            h = h % {"default": a.default, "prog": prog, "dest": a.dest}
        except (KeyError, TypeError, ValueError):
            h = h.replace("%%", "%")
    # a default that is None means "chosen by the command", never a value to show
    h = re.sub(r"\s*\(default:? None\)", "", h)
    h = re.sub(r"default:? None[;,]\s*", "", h)
    return re.sub(r"[;,]\s*default:? None\b", "", h).strip()


def fields_of(p: argparse.ArgumentParser) -> list[Field]:
    """The form fields of one parser. A store_false flag (``--no-grad-accum-fusion``) is a
    checkbox named after the flag (``no_grad_accum_fusion``): ticked means the flag is given.
    A parser that adds its arguments when first used (``answer ID``) is completed first."""
    ensure = getattr(p, "ensure", None)
    if callable(ensure):
        ensure()
    out = []
    for a in p._actions:
        if a.dest in OUTPUT_DESTS or isinstance(a, argparse._SubParsersAction):
            continue
        if a.help == argparse.SUPPRESS:
            continue
        negative = isinstance(a, argparse._StoreFalseAction)
        is_flag = negative or isinstance(a, argparse._StoreTrueAction)
        choices = tuple(str(c) for c in a.choices) if a.choices else ()
        kind = "flag" if is_flag else ("choice" if choices else "text")
        flag = max(a.option_strings, key=len) if a.option_strings else None
        dest = flag.lstrip("-").replace("-", "_") if negative and flag else a.dest
        out.append(Field(
            dest=dest, flag=flag, kind=kind, choices=choices,
            default=None if is_flag else a.default, help=_help(a, p.prog),
            required=bool(a.required) if flag else a.nargs not in ("?", "*"),
            metavar=str(a.metavar or ""), type_name=_type_name(a),
            multi=isinstance(a, argparse._AppendAction)))
    return out


def subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def command_help(p: argparse.ArgumentParser, name: str) -> str:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for ca in a._choices_actions:
                if ca.dest == name:
                    return ca.help or ""
    return ""


def command_tree(root: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """'kv' -> (parser, help); nested sub-commands as 'comm/cost'. Leaves only."""
    out: dict[str, tuple[argparse.ArgumentParser, str]] = {}

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for name, sp in subparsers(p).items():
            path = f"{prefix}/{name}" if prefix else name
            if path in NOT_TOOLS:
                continue
            if subparsers(sp):
                walk(sp, path)
            else:
                out[path] = (sp, command_help(p, name))

    walk(root, "")
    return out


def _raiser(message: str) -> None:
    import re

    m = re.search(r"argument (\S+?)[:/ ]", message + " ")
    raise FieldError(message.replace("argument ", "", 1) if m else message,
                     m.group(1) if m else "")


def patch_errors(root: argparse.ArgumentParser) -> None:
    """Make every parser in the tree raise FieldError instead of printing and exiting."""
    root.error = _raiser  # type: ignore[method-assign]
    for sp in subparsers(root).values():
        patch_errors(sp)


def argv_from(fields: list[Field], values: Mapping[str, str]) -> list[str]:
    """Command-line words from form values (empty values are left out: the default applies)."""
    argv: list[str] = []
    positionals: list[str] = []
    for f in fields:
        v = values.get(f.dest)
        if v is None:
            continue
        v = str(v)
        if f.kind == "flag":
            if v.strip().lower() in ("1", "true", "on", "yes"):
                argv.append(f.flag or "")
            elif v.strip().lower() not in ("", "0", "false", "off", "no"):
                raise FieldError(f"{f.label}: expected true or false, got {v!r}", f.dest)
            continue
        if v.strip() == "":
            continue
        if f.flag is None:
            if v.lstrip().startswith("-"):
                raise FieldError(f"{f.label}: must not start with '-'", f.dest)
            positionals.append(v)
        elif f.multi:  # `--predicate a --predicate b` from "a; b" (or one per line)
            argv += [f"{f.flag}={x.strip()}" for x in re.split(r"[;\n]", v) if x.strip()]
        else:
            argv.append(f"{f.flag}={v}")
    return positionals + argv


def field_for(fields: list[Field], token: str) -> str:
    """The dest of the field an error message names (a flag or a dest), or ''."""
    for f in fields:
        if token and token in (f.flag, f.dest, f.metavar):
            return f.dest
    return ""
