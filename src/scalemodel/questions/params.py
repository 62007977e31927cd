"""The parameters a question takes: one small declaration per parameter, kept in its module.

Each question module lists ``PARAMS``, a tuple of :class:`Param`. ``scalemodel answer ID``
builds its flags from them (so ``--help`` lists exactly these and any other flag is refused),
the web builds its form from them, and :func:`resolve` checks a dict of values against them
before the question's ``build`` sees it. Values are given in the unit the flag names (``--tpot-ms
50``) and handed to ``build`` under ``key`` in base units (``tpot_s = 0.05``) via ``scale``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import BadInput

# value kinds: how the text of a flag is read (commands/answer.py maps each to a parser)
KINDS = ("int", "float", "str", "bool", "tokens", "bytes", "count", "days", "fraction", "percent")


@dataclass(frozen=True)
class Param:
    """One parameter of a question.

    ``name`` is the flag without dashes (``kv_dtype`` -> ``--kv-dtype``; also the web form's
    field and the API's query name); ``key`` the name ``build`` reads (defaults to ``name``);
    ``scale`` multiplies the given value into ``key``'s unit; ``lo``/``hi`` bound it (inclusive);
    ``choices`` lists the allowed strings; ``unit`` is the unit the value is given in."""

    name: str
    kind: str
    default: Any
    help: str
    unit: str = ""
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    key: str = ""
    scale: float = 1.0
    metavar: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"parameter {self.name}: kind {self.kind!r} not in {KINDS}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def target(self) -> str:
        return self.key or self.name

    def check(self, v: Any) -> Any:
        """``v`` (already of the right type) within the declared range and choices."""
        if self.kind == "bool" or v is None:
            return v
        if self.choices and str(v) not in self.choices:
            raise BadInput(f"{self.flag}: {v!r} is not one of {', '.join(self.choices)}")
        if isinstance(v, int | float) and (self.lo is not None and v < self.lo
                                           or self.hi is not None and v > self.hi):
            raise BadInput(f"{self.flag}: must be between {_num(self.lo)} and "
                               f"{_num(self.hi)}{' ' + self.unit if self.unit else ''}, got {_num(v)}")
        return v

    def default_text(self) -> str:
        """The default as a person would type it ('' when there is none)."""
        v = self.default
        if v is None or isinstance(v, bool):
            return ""
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)

    def help_text(self) -> str:
        """Help with the unit, range and default (no '(default: None)')."""
        extra = []
        if self.unit:
            extra.append(self.unit)
        if self.lo is not None or self.hi is not None:
            extra.append(f"{_num(self.lo) if self.lo is not None else '...'}-"
                         f"{_num(self.hi) if self.hi is not None else '...'}")
        d = self.default_text()
        if d:
            extra.append(f"default {d}")
        return self.help + (f" ({'; '.join(extra)})" if extra else "")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "flag": self.flag, "kind": self.kind, "default": self.default,
                "help": self.help, "unit": self.unit, "min": self.lo, "max": self.hi,
                "choices": list(self.choices)}


def _num(v: float | None) -> str:
    if v is None:
        return "..."
    return f"{v:,g}" if isinstance(v, float) else f"{v:,}"


# parameters several questions share (same flag, same meaning); a question copies and adjusts
def model(default: str | None, help: str = "model id or a Hugging Face config.json path") -> Param:
    return Param("model", "str", default, help, metavar="ID|config.json")


def gpu(default: str | None, help: str = "GPU id or a GPU TOML path") -> Param:
    return Param("gpu", "str", default, help, metavar="ID|gpu.toml")


def resolve(qid: str, params: tuple[Param, ...], given: dict[str, Any]) -> dict[str, Any]:
    """The values ``build`` receives: every declared parameter (given or default), keyed by
    ``target`` and scaled to base units. A name that is not declared is refused."""
    by = {p.name: p for p in params}
    unknown = [k for k in given if k not in by]
    if unknown:
        raise BadInput(f"{qid} takes no parameter {unknown[0]!r}; it takes: "
                       f"{', '.join(p.flag for p in params) or 'none'}")
    out: dict[str, Any] = {}
    for p in params:
        v = given.get(p.name)
        v = p.default if v is None else p.check(v)
        if v is not None and p.scale != 1.0:
            v = v * p.scale
        out[p.target] = v
    return out


def fabric(d: dict[str, Any]) -> tuple[Param, ...]:
    """The two link tiers and the NVLink domain, with defaults from a question's DEFAULTS."""
    return (Param("intra", "str", d["intra"], "link inside a node (a links.toml id)"),
            Param("inter", "str", d["inter"], "NIC between nodes (a links.toml id)"),
            Param("gpus_per_node", "int", d["gpus_per_node"], "GPUs per node (NVLink domain)",
                  "GPUs", lo=1, hi=1024))


def batch_shape(d: dict[str, Any]) -> tuple[Param, ...]:
    """Sequence length, micro-batch and global batch of a training step."""
    return (Param("seq_len", "tokens", d["seq_len"], "training sequence length", "tokens", lo=1,
                  hi=2**21),
            Param("micro_batch", "int", d["micro_batch"], "sequences per micro-batch",
                  "sequences", lo=1, hi=65536),
            Param("batch", "int", d["batch"], "global batch", "sequences", lo=1, hi=65536))


def tp_pp(d: dict[str, Any]) -> tuple[Param, ...]:
    return (Param("tp", "int", d["tp"], "tensor-parallel degree", "GPUs", lo=1, hi=1024),
            Param("pp", "int", d["pp"], "pipeline-parallel degree", "stages", lo=1, hi=1024))


def claim(line: str, model: str, gpus: int, tokens: str, days: str) -> tuple[Param, ...]:
    """A training claim: a sentence, then each figure of it (a flag given wins over the
    sentence; without either, the question's classic claim, whose figures ``model`` ... name)."""
    return (
        Param("claim", "str", None, f"a claim sentence (default: {line!r})"),
        Param("model", "str", None, f"model id or size such as 70B (default: the claim's, else "
              f"{model})"),
        Param("gpu", "str", None, "GPU id (default: the claim's, else h100-sxm)"),
        Param("gpus", "int", None, f"GPUs (default: the claim's, else {gpus})", "GPUs", lo=1,
              hi=1048576),
        Param("tokens", "count", None, f"training tokens such as 2T or 300B (default: the "
              f"claim's, else {tokens})", "tokens", lo=1.0),
        Param("days", "days", None, f"wall-clock days (default: the claim's, else {days})",
              "days"),
        Param("mfu", "percent", None, "claimed MFU, 0.45 or 45% (default: implied by the other "
              "numbers)", lo=0.0, hi=1.0),
        Param("layout", "str", None, "claimed layout such as 'tp8 pp4 zero1'"),
        Param("seq_len", "tokens", None, "training sequence length (default 4096)", "tokens",
              lo=1, hi=2**21),
        Param("dtype", "str", None, "training precision (default bf16)"),
    )
