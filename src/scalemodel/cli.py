"""The command line: parse -> scenario -> engine -> report. Nothing here computes.

Each command lives in ``scalemodel.commands.<name>`` with ``register(subparsers)`` (light:
argparse only) and ``run(args) -> Report`` (imports its engines when called), so
``scalemodel --help`` stays fast. Bad input raises :class:`~scalemodel.errors.BadInput` and
becomes one line on stderr with exit code 2; anything else is an internal failure, exit 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__
from .errors import BadInput, as_bad_input

# command name -> module; the order is the order of `scalemodel --help`
COMMANDS: dict[str, str] = {
    "kv": "scalemodel.commands.kv",
    "memory": "scalemodel.commands.memory",
    "roofline": "scalemodel.commands.roofline",
    "gpu": "scalemodel.commands.gpu",
    "comm": "scalemodel.commands.comm",
    "plan": "scalemodel.commands.plan",
    "validate": "scalemodel.commands.validate",
    "moe": "scalemodel.commands.moe",
    "questions": "scalemodel.commands.questions",
    "answer": "scalemodel.commands.answer",
    "specs": "scalemodel.commands.specs",
    "claim": "scalemodel.commands.claim",
    "drill": "scalemodel.commands.drill",
    "serve": "scalemodel.commands.serve",
    "site": "scalemodel.commands.site",
    "reliability": "scalemodel.commands.reliability",
    "triage": "scalemodel.commands.triage",
    "cluster": "scalemodel.commands.cluster",
    "bill": "scalemodel.commands.bill",
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2), as every other bad input gets."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


class _HelpOnly:
    """Accepts any argparse call and builds nothing; records each command's one-line help.

    ``scalemodel --help`` needs only the command names and their help lines, so the other
    commands' registrations run against this stand-in instead of building real parsers.
    """

    def __init__(self, log: list[tuple[str, str]] | None = None) -> None:
        self._log = log

    def add_parser(self, name: str, **kw: object) -> _HelpOnly:
        if self._log is not None:
            self._log.append((name, str(kw.get("help", ""))))
        return _HelpOnly()

    def __getattr__(self, _name: str) -> object:
        return lambda *a, **k: _HelpOnly()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``only``, that command in full and the others as help lines."""
    p = _Parser(
        prog="scalemodel",
        description="Executable napkin math for ML infrastructure and GPUs. Every command "
        "prints a worked answer (each number with its formula and source); --json gives the "
        "same result as machine-readable data in base units (bytes, seconds, FLOP).",
    )
    p.add_argument("--version", action="version", version=f"scalemodel {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, mod in COMMANDS.items():
        module = importlib.import_module(mod)
        if only is None or name == only:
            module.register(sub)
            continue
        log: list[tuple[str, str]] = []
        module.register(_HelpOnly(log))
        for cmd, text in log:
            sub.add_parser(cmd, help=text)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(only=chosen if chosen in COMMANDS else "")
    args = parser.parse_args(words)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    try:
        from .progress import activity
        from .specs.bounds import check_args

        check_args(args)  # every numeric argument within specs/data/bounds.toml
        label = "scalemodel " + " ".join(w for w in words[:2] if not w.startswith("-"))
        with activity(label, json_output=bool(getattr(args, "json", False))):
            report = args.run(args)
        from .report import render_json, render_markdown, render_text

        if getattr(args, "plot", None):
            if report.plot is None:
                raise BadInput(f"--plot: 'scalemodel {args.command}' has no figure for these options")
            report.plot(args.plot)
        if getattr(args, "json", False):
            out = render_json(report)
        elif getattr(args, "markdown", False):
            out = render_markdown(report)
        else:
            out = render_text(report)
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
        if getattr(args, "plot", None) and not getattr(args, "json", False):
            sys.stdout.write(f"plot written to {args.plot}\n")
        return 0
    except BadInput as e:
        sys.stderr.write(f"scalemodel {args.command}: error: {e}\n")
        return 2
    except (UnicodeDecodeError, OSError) as e:  # unusable input files or paths: one line, exit 2
        bad = as_bad_input(e)
        if bad is None:
            raise
        sys.stderr.write(f"scalemodel {args.command}: error: {bad}\n")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
