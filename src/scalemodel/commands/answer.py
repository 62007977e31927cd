"""scalemodel answer ID: a complete worked answer to one question of the bank."""

from __future__ import annotations

import argparse
from typing import Any

from .claim import _count, _days, _mfu
from .common import add_output, finite_float, fraction, positive_int, size_bytes, tokens


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
    g.add_argument("--grid", type=positive_int, help="GPU lab: blocks in the grid")
    g.add_argument("--block", type=positive_int, help="GPU lab: threads per block")
    g.add_argument("--threads", type=positive_int, help="GPU lab: threads per block (occupancy)")
    g.add_argument("--regs", type=int, help="GPU lab: registers per thread")
    g.add_argument("--smem", type=int, help="GPU lab: shared memory per block, bytes")
    g.add_argument("--tile", type=positive_int, help="GPU lab: transpose tile size")
    g.add_argument("--n", type=positive_int, help="GPU lab: matrix size N")
    g.add_argument("--tokens", type=_count, help="training tokens (2T, 300B; claim questions)")
    g.add_argument("--days", type=_days, help="wall-clock days (claim questions)")
    g.add_argument("--mfu", type=_mfu, help="claimed MFU, 0.45 or 45%% (claim questions)")
    g.add_argument("--layout", help="layout such as 'tp8 pp4 zero1' (claim questions)")
    g.add_argument("--claim", help="a claim sentence (scale-scoping, resume-walk)")
    c = p.add_argument_group("communication questions (ring-allreduce, parallelism-traffic, "
                             "fabric-map, nccl-topology, roce-vs-ib)")
    c.add_argument("--ranks", type=positive_int, help="ranks in a collective")
    c.add_argument("--bytes", type=size_bytes, help="collective size, e.g. 1GiB")
    c.add_argument("--nodes", type=positive_int, help="nodes")
    c.add_argument("--gpus-per-node", type=positive_int, help="GPUs per node / NVLink domain")
    c.add_argument("--intra", help="link inside a node (links.toml id)")
    c.add_argument("--inter", help="NIC between nodes (links.toml id)")
    c.add_argument("--pp", type=positive_int, help="pipeline-parallel degree")
    c.add_argument("--dp", type=positive_int, help="data-parallel degree")
    c.add_argument("--workload", help="roce-vs-ib: training, inference or mixed")
    c.add_argument("--a2a-share", type=finite_float, help="roce-vs-ib: share of step time in all-to-all")
    c.add_argument("--ops", help="roce-vs-ib: team's experience: ib, ethernet or none")
    c.add_argument("--existing-ethernet", help="roce-vs-ib: yes or no")
    c.add_argument("--budget", help="roce-vs-ib: tight or normal")
    c.add_argument("--vendor", help="roce-vs-ib: single-ok or multi-vendor")
    p.add_argument("--live", action="store_true",
                   help="answers built on real runs (hang-triage, slowdown-triage): run them "
                        "again here instead of reading the bundled recordings")
    g.add_argument("--tpot-ms", type=finite_float, help="TPOT SLA in ms (moe-latency-layout)")
    g.add_argument("--ttft-ms", type=finite_float, help="TTFT SLA in ms (moe-latency-layout)")
    g.add_argument("--skew", type=finite_float, help="Zipf exponent of expert popularity (moe)")
    add_output(p, plot=True)
    p.set_defaults(run=run)


# what the answer receives: every override flag above (not the output switches)
_NOT_OPTIONS = {"id", "json", "markdown", "plot", "run", "command"}


def run(args: argparse.Namespace) -> Any:
    from ..questions import build_answer

    opts = {k: v for k, v in vars(args).items() if k not in _NOT_OPTIONS}
    opts["skew"] = args.skew
    opts["tpot_s"] = args.tpot_ms / 1e3 if args.tpot_ms else None
    opts["ttft_s"] = args.ttft_ms / 1e3 if args.ttft_ms else None
    return build_answer(args.id, opts)
