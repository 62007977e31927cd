"""scalemodel answer ID: a complete worked answer to one question of the bank."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, fraction, positive_int, tokens


def register(sub: Any) -> None:
    p = sub.add_parser(
        "answer", help="the worked answer to one question (scalemodel questions lists the ids)",
        description="Prints the worked answer to a question of the bank, computed live from its "
        "classic parameters; the flags below override them.")
    p.add_argument("id", help="question id, e.g. kv-cache, training-memory, roofline")
    g = p.add_argument_group("overrides (each question uses the ones that apply)")
    g.add_argument("--model", help="model id or config.json path")
    g.add_argument("--gpu", help="GPU id or TOML path")
    g.add_argument("--dtype", help="weight / compute precision")
    g.add_argument("--kv-dtype", help="KV-cache element type")
    g.add_argument("--context", type=tokens, help="tokens per sequence")
    g.add_argument("--seq-len", type=tokens, help="training sequence length")
    g.add_argument("--batch", type=positive_int, help="sequences")
    g.add_argument("--micro-batch", type=positive_int, help="training micro-batch")
    g.add_argument("--tp", type=positive_int, help="tensor-parallel degree")
    g.add_argument("--gpus", type=positive_int, help="total GPUs")
    g.add_argument("--optimizer", help="optimizer id (adam, adam-8bit, sgd, ...)")
    g.add_argument("--mem-fraction", type=fraction, help="usable fraction of HBM")
    g.add_argument("--tpot-ms", type=float, help="TPOT SLA in ms (moe-latency-layout)")
    g.add_argument("--ttft-ms", type=float, help="TTFT SLA in ms (moe-latency-layout)")
    g.add_argument("--skew", type=float, help="Zipf exponent of expert popularity (moe)")
    add_output(p, plot=True)
    p.set_defaults(run=run)


_KEYS = ("model", "gpu", "dtype", "kv_dtype", "context", "seq_len", "batch", "micro_batch", "tp",
         "gpus", "optimizer", "mem_fraction")


def run(args: argparse.Namespace) -> Any:
    from ..questions import build_answer

    opts = {k: getattr(args, k) for k in _KEYS}
    opts["skew"] = args.skew
    opts["tpot_s"] = args.tpot_ms / 1e3 if args.tpot_ms else None
    opts["ttft_s"] = args.ttft_ms / 1e3 if args.ttft_ms else None
    return build_answer(args.id, opts)
