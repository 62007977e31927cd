"""Flags shared by several commands, and argparse types that give one-line errors."""

from __future__ import annotations

import argparse
import math
from typing import Any


def _int_at_least(lowest: int, what: str):  # noqa: ANN202 - an argparse type factory
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < lowest:
            raise argparse.ArgumentTypeError(f"must be {what}, got {v}")
        return v

    return parse


positive_int = _int_at_least(1, "at least 1")
non_negative_int = _int_at_least(0, "0 or more")


def finite_float(text: str) -> float:
    """Any finite number (nan and infinities are never a meaningful input)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return v


def non_negative_float(text: str) -> float:
    v = finite_float(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return v


def positive_float(text: str) -> float:
    v = non_negative_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def _parsed(parse: Any, text: str) -> Any:
    """Run a units parser, turning its BadInput into argparse's one-line error."""
    from ..errors import BadInput

    try:
        return parse(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def tokens(text: str) -> int:
    """Token counts accept 8192, 8k (8192) or 128k (131072)."""
    from ..units import parse_tokens

    v = _parsed(parse_tokens, text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 token, got {text!r}")
    return v


def fraction(text: str) -> float:
    v = finite_float(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {v}")
    return v


def size_bytes(text: str) -> float:
    from ..units import parse_size

    v = _parsed(parse_size, text)
    if v < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return v


def add_output(p: argparse.ArgumentParser, plot: bool = False) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true",
                   help="machine-readable result (stable keys, base units) instead of text")
    g.add_argument("--markdown", action="store_true", help="the worked answer as Markdown")
    if plot:
        g.add_argument("--plot", metavar="FILE", help="also draw the figure (PNG, SVG or PDF)")


def add_model(p: argparse.ArgumentParser, default: str | None = "llama-3-70b") -> None:
    p.add_argument("--model", default=default, metavar="ID|config.json",
                   help="bundled model id or a path to a Hugging Face config.json ("
                        + (f"default: {default}; " if default else "")
                        + "list: scalemodel specs models)")


def add_gpu(p: argparse.ArgumentParser, default: str | None = None) -> None:
    p.add_argument("--gpu", default=default, metavar="ID|gpu.toml",
                   help="bundled GPU id or a path to a GPU TOML file"
                        + (f" (default: {default})" if default else "")
                        + "; list: scalemodel specs gpus")


def add_dtypes(p: argparse.ArgumentParser, kv: bool = False) -> None:
    p.add_argument("--dtype", default="bf16", help="weight / compute precision (default bf16)")
    if kv:
        p.add_argument("--kv-dtype", default="bf16",
                       help="KV-cache element type: bf16, fp16, fp8, int8, int4 (default bf16)")


def at_most(parse: Any, highest: float, why: str) -> Any:
    """An argparse type: ``parse`` the text, then refuse values above ``highest`` (input bounds
    keep one command from running for hours or exhausting memory; ``why`` says where it comes
    from)."""

    def bounded(text: str) -> Any:
        v = parse(text)
        if v > highest:
            raise argparse.ArgumentTypeError(f"at most {highest:,g} ({why}), got {text}")
        return v

    bounded.__name__ = getattr(parse, "__name__", "bounded")
    return bounded


# bounds shared by several commands
MAX_GPUS = 2**21  # about ten times the largest GPU clusters announced by 2026
MAX_SECONDS = 1e8  # about three years: longer durations are not a training-run question


def layout_type(command: str, allowed: tuple[str, ...] | None = None) -> Any:
    """argparse type for ``--layout K=V,...`` (analytic/layout.py parse_layout); keys outside
    ``allowed`` are refused with the keys ``command`` takes."""

    def parse(text: str) -> dict[str, Any]:
        from ..analytic.layout import KEY_NAMES, parse_layout

        return _parsed(lambda t: parse_layout(t, allowed or KEY_NAMES, command), text)

    parse.__name__ = "layout"
    return parse


def add_framework(p: argparse.ArgumentParser) -> None:
    """--framework ID (specs/data/frameworks.toml; scalemodel specs frameworks lists them)."""
    p.add_argument("--framework", default=None, metavar="ID",
                   help="framework profile whose kernels, overlap and gradient reduction are "
                        "priced (default megatron-core: Megatron-Core with Transformer Engine; "
                        "'scalemodel specs frameworks' lists them); explicit flags override it")
