"""scalemodel answer ID: a complete worked answer to one question of the bank.

Each question is a sub-command whose flags come from the question's own parameter declarations
(``PARAMS`` in its module, see :mod:`scalemodel.questions.params`): ``answer ID --help`` lists
exactly those, and a flag the question does not take is refused with one line (exit 2). The
question's module is imported only when its sub-command is parsed, so ``scalemodel answer
--help`` stays light.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, finite_float, fraction, size_bytes, tokens


def _count(text: str) -> float:
    from .claim import _count as parse

    return parse(text)


def _days(text: str) -> float:
    from .claim import _days as parse

    return parse(text)


def _percent(text: str) -> float:
    from .claim import _mfu as parse

    return parse(text)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


# Param.kind -> the argparse type that reads it
_TYPES: dict[str, Any] = {"int": _int, "float": finite_float, "str": str, "tokens": tokens,
                          "bytes": size_bytes, "count": _count, "days": _days,
                          "fraction": fraction, "percent": _percent}


def _typed(p: Any) -> Any:
    """The parser of one parameter: its kind's reader, then its declared range."""
    read = _TYPES[p.kind]

    def parse(text: str) -> Any:
        from ..errors import BadInput

        v = read(text)
        try:
            return p.check(v)
        except BadInput as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None

    # the web reads a field's type from this name (web/forms.py)
    parse.__name__ = {"int": "non_negative_int", "tokens": "positive_int"}.get(p.kind,
                                                                              read.__name__)
    if p.kind in ("float", "bytes", "count", "days", "fraction", "percent"):
        parse.__name__ = "finite_float"
    return parse


def add_params(parser: argparse.ArgumentParser, params: tuple[Any, ...]) -> None:
    """One flag per declared parameter (the web builds its forms from the same flags)."""
    g = parser.add_argument_group("parameters of this question")
    for p in params:
        if p.kind == "bool":
            g.add_argument(p.flag, dest=p.name, action="store_true",
                           help=p.help_text().replace("%", "%%"))
            continue
        g.add_argument(p.flag, dest=p.name, type=_typed(p), default=None,
                       choices=p.choices or None, metavar=p.metavar or (p.unit.upper().replace(" ", "_")
                                                           if p.unit else None),
                       help=p.help_text().replace("%", "%%"))


def question_parser_class(base: type) -> type:
    """A parser of ``base``'s class that adds its question's flags the first time it is used."""

    class QuestionParser(base):  # type: ignore[misc, valid-type]
        qid: str = ""
        _ready = False

        def ensure(self) -> QuestionParser:
            if not self._ready and self.qid:
                from ..questions import params_of

                self._ready = True
                add_params(self, params_of(self.qid))
                add_output(self, plot=True)
            return self

        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            self.ensure()
            ns, extra = super().parse_known_args(args, namespace)
            if extra and self.qid:
                flags = [a.option_strings[-1] for a in self._actions if a.option_strings
                         and a.dest not in ("help", "json", "markdown", "plot")]
                self.error(f"{extra[0]} is not a parameter of {self.qid}; it takes: "
                           f"{', '.join(flags) or 'none'}")
            return ns, extra

        def format_help(self) -> str:
            self.ensure()
            return super().format_help()

    return QuestionParser


def answer_parser_class(base: type) -> type:
    class AnswerParser(base):  # type: ignore[misc, valid-type]
        def error(self, message: str) -> Any:
            if "invalid choice" in message:
                import re

                from ..errors import BadInput
                from ..questions import question

                m = re.search(r"invalid choice: '([^']*)'", message)
                try:
                    question(m.group(1) if m else "")
                except BadInput as e:
                    message = str(e)
            return super().error(message)

    return AnswerParser


def register(sub: Any) -> None:
    from ..questions import BANK

    p = sub.add_parser(
        "answer", help="the worked answer to one question (scalemodel questions lists the ids)",
        description="Prints the worked answer to a question of the bank, computed live from its "
        "classic parameters. Each question takes its own parameters: scalemodel answer ID --help "
        "lists them.")
    if not isinstance(p, argparse.ArgumentParser):  # `scalemodel --help`: the help line only
        return
    base = type(p)
    p.__class__ = answer_parser_class(base)
    qs = p.add_subparsers(dest="id", metavar="ID", required=True,
                          parser_class=question_parser_class(base))
    for q in BANK:
        qp = qs.add_parser(q.id, help=q.title.replace("%", "%%"), description=q.title)
        qp.qid = q.id
        qp.set_defaults(run=run)
    p.set_defaults(run=run)


# what the answer receives: the question's parameters (not the output switches)
_NOT_OPTIONS = {"id", "json", "markdown", "plot", "run", "command"}


def run(args: argparse.Namespace) -> Any:
    from ..questions import build_answer

    opts = {k: v for k, v in vars(args).items() if k not in _NOT_OPTIONS}
    return build_answer(args.id, opts)
