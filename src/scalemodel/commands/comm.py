"""scalemodel comm: collective costs on a fabric, traffic per parallelism, a real benchmark."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    add_framework,
    add_model,
    add_output,
    finite_float,
    layout_type,
    positive_int,
    size_bytes,
    tokens,
)

COLLECTIVE_CHOICES = ("all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce",
                      "all-to-all", "send-recv")


def _add_fabric(p: argparse.ArgumentParser, *, link: bool = True) -> None:
    g = p.add_argument_group("fabric (link ids: scalemodel specs links)")
    if link:
        g.add_argument("--link", help="one link for the whole group: a scale-up link (nvlink4) "
                       "puts the ranks in one node, a NIC (ndr-400) puts each rank on its own node")
    g.add_argument("--gpu", help="take the intra-node link and its per-GPU rate from this GPU "
                   "(gpus.toml id), e.g. h800 for its reduced NVLink")
    g.add_argument("--intra", help="link inside a node (default nvlink4)")
    g.add_argument("--inter", help="NIC between nodes (default ndr-400 when the group spans nodes)")
    g.add_argument("--nodes", type=positive_int, help="nodes the group spans")
    g.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs per node / NVLink domain (default 8, as HGX; 72 for NVL72)")
    g.add_argument("--nics-per-gpu", type=finite_float, default=1.0,
                   help="NIC rails per GPU (default 1, as HGX/DGX H100)")
    g.add_argument("--oversubscription", type=finite_float, default=None,
                   help="leaf-spine down:up ratio (default 1, non-blocking)")
    g.add_argument("--nodes-per-leaf", type=positive_int, default=None,
                   help="nodes under one leaf switch per rail (default 32)")
    g.add_argument("--efficiency-intra", type=finite_float, default=None,
                   help="override the stated NVLink/PCIe efficiency (0-1]")
    g.add_argument("--efficiency-inter", type=finite_float, default=None,
                   help="override the stated NIC efficiency (0-1]")
    g.add_argument("--pcie-host", default=None,
                   help="PCIe host layout for GPUs without a scale-up link (collectives.toml "
                   "[pcie_hosts], e.g. intel-2s-2psw; default: the --gpu's, else none)")
    g.add_argument("--collnet", action="store_true",
                   help="the fabric runs NCCL's CollNet (IB SHARP plugin): lets NVLS+SHARP "
                   "compete across nodes (off by default, as in NCCL)")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "comm", help="collective costs, traffic per parallelism, and a torch.distributed benchmark",
        description="Alpha-beta cost models of collectives on a fabric (comm cost), the traffic "
        "each parallelism strategy puts on it (comm traffic), and a real benchmark on "
        "torch.distributed that fits a calibration profile (comm bench).")
    s = p.add_subparsers(dest="comm_command", metavar="SUBCOMMAND", required=True)

    c = s.add_parser("cost", help="time, bytes, algbw/busbw of one collective",
                     description="Price one collective with an algorithm and protocol (or the "
                     "NCCL-like automatic choice, with its reasons).")
    c.add_argument("--collective", default="all-reduce", choices=COLLECTIVE_CHOICES)
    c.add_argument("--algorithm", default="auto",
                   help="auto, ring, tree, rhd, hierarchical, in-switch, nvls-tree, direct, "
                   "pairwise")
    c.add_argument("--protocol", default="auto", help="auto, ll, ll128, simple (NCCL protocols)")
    c.add_argument("--ranks", type=int, default=None, help="ranks in the group (default 8)")
    c.add_argument("--ranks-per-node", type=int, default=None,
                   help="ranks of the group per node (default: packed)")
    c.add_argument("--bytes", type=size_bytes, default=2.0**30,
                   help="operation size, nccl-tests convention (default 1GiB)")
    c.add_argument("--dtype", default="bf16", help="element type (sizes must be whole elements)")
    c.add_argument("--profile", metavar="FILE",
                   help="price with measured alpha-beta: a profile written by comm bench --save, "
                   "or nccl-tests output (all_reduce_perf and friends), fitted on reading")
    _add_fabric(c)
    add_output(c, plot=True)
    c.set_defaults(run=run_cost)

    t = s.add_parser("traffic", help="what each parallelism strategy sends, how often, on which tier",
                     description="Per GPU and per optimizer step, as plan train prices the "
                     "layout: the collectives of every parallelism strategy, bytes, calls, the "
                     "tier, seconds with nothing hidden and seconds left exposed.")
    add_model(t)
    for name, help_ in (("tp", "tensor parallel"), ("pp", "pipeline parallel"),
                        ("dp", "data parallel"), ("cp", "context parallel"),
                        ("ep", "expert parallel (within DP x CP)")):
        t.add_argument(f"--{name}", type=positive_int, default=None,
                       help=f"{help_} degree (default 1)")
    t.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=None,
                   help="0: DDP all-reduce; 1/2: ZeRO reduce-scatter + all-gather; 3: FSDP "
                        "(default 1)")
    t.add_argument("--layout", type=layout_type("comm traffic", TRAFFIC_KEYS), default=None,
                   metavar="K=V,...", help="the layout in plan train's keys: "
                   + ", ".join(TRAFFIC_KEYS) + " (the flags above are shorthands)")
    t.add_argument("--seq-len", type=tokens, default=8192,
                   help="tokens per sequence (default 8192, as plan train)")
    t.add_argument("--micro-batch", type=positive_int, default=None,
                   help="sequences per micro-batch (default 1)")
    g = t.add_mutually_exclusive_group()
    g.add_argument("--global-batch", type=positive_int, default=None,
                   help="sequences per optimizer step (default 4M tokens, as plan train)")
    g.add_argument("--global-batch-tokens", type=tokens, default=None,
                   help="tokens per optimizer step (instead of sequences)")
    t.add_argument("--gpu", default="h100-sxm", help="GPU id (default h100-sxm): its NVLink "
                   "and usual NIC")
    t.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs per node / NVLink domain (default 8)")
    t.add_argument("--inter", default=None, help="scale-out link id (default: the GPU's NIC)")
    t.add_argument("--nics-per-gpu", type=positive_int, default=None,
                   help="scale-out NICs per GPU (default from the GPU spec)")
    t.add_argument("--attention", choices=["flash", "flash3", "triton", "unfused"],
                   default=None, help="attention kernel (default: the framework's)")
    t.add_argument("--schedule", choices=["1f1b", "dualpipe"], default=None,
                   help="pipeline schedule (default: the framework's)")
    add_framework(t)
    add_output(t)
    t.set_defaults(run=run_traffic)

    v = s.add_parser("validate", help="the collective model against published nccl-tests rows",
                     description="Predicts every published nccl-tests row (validation/"
                     "nccl_tests.csv: large-message bus bandwidths and small-message times, "
                     "each with its issue thread) with NCCL's own algorithm choice and the "
                     "physical model, and prints the error of each against its tolerance.")
    v.add_argument("--file", metavar="CSV", default=None,
                   help="rows CSV (default: the repository's validation/nccl_tests.csv; "
                   "validation/nccl_size_sweeps.csv holds published size sweeps, metric time_us)")
    add_output(v)
    v.set_defaults(run=run_validate)

    b = s.add_parser("bench", help="time collectives on real torch.distributed ranks",
                     description="Starts N local processes (gloo on CPU, nccl on GPUs), times "
                     "each collective over a range of sizes like nccl-tests, checks a ring "
                     "all-reduce built from send/recv, and fits alpha and beta per collective.")
    b.add_argument("--ranks", type=int, default=4, help="processes to start (default 4)")
    b.add_argument("--backend", default="gloo", help="gloo (CPU) or nccl (GPUs)")
    b.add_argument("--min-bytes", type=size_bytes, default=1024.0, help="smallest size (1KiB)")
    b.add_argument("--max-bytes", type=size_bytes, default=4.0 * 2**20, help="largest (4MiB)")
    b.add_argument("--collectives", default=",".join(COLLECTIVE_CHOICES),
                   help="comma-separated subset")
    b.add_argument("--iters", type=positive_int, default=5, help="timed calls per cell at most")
    b.add_argument("--timeout", type=finite_float, default=120.0, help="seconds before ranks are killed")
    b.add_argument("--save", metavar="FILE", help="write the calibration profile (JSON) here")
    b.add_argument("--torchrun", action="store_true",
                   help="run as one rank of the current torchrun job instead of starting ranks")
    add_output(b)
    b.set_defaults(run=run_bench)


# ------------------------------------------------------------------------------------------


def _fabric_and_group(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..analytic.collectives import make_fabric, make_group
    from ..errors import BadInput
    from ..specs import get_link

    intra, inter = args.intra, args.inter
    gpn = args.gpus_per_node
    rate = None
    host = getattr(args, "pcie_host", None)
    if getattr(args, "gpu", None):
        from ..specs import get_gpu

        gpu = get_gpu(args.gpu)
        ic = gpu.interconnect
        intra = intra or ic.get("scale_up_link") or ic.get("pcie_link") or "pcie5"
        rate = gpu.scale_up_bytes_per_s or None
        if host is None and not ic.get("scale_up_link"):
            host = ic.get("pcie_host")
    ranks = getattr(args, "ranks", None)
    rpn = getattr(args, "ranks_per_node", None)
    if ranks is not None and ranks < 1:
        raise BadInput(f"--ranks must be at least 1, got {ranks}")
    link = getattr(args, "link", None)
    if link:
        lk = get_link(link)
        if lk.kind == "scale-out":
            if intra is None:
                intra = "nvlink4"
            inter = link
            rpn = 1
        else:
            intra = link
    intra = intra or "nvlink4"
    nodes = args.nodes
    if gpn is None:
        gpn = 8 if (nodes or rpn == 1 or (ranks or 8) > 8) else max(ranks or 8, 1)
    if nodes:
        rpn = rpn or gpn
        if ranks is None:
            ranks = nodes * rpn
        elif ranks != nodes * rpn:
            raise BadInput(f"--ranks {ranks} does not equal --nodes {nodes} x ranks per node "
                           f"{rpn}")
    ranks = ranks or 8
    spans = (rpn == 1 and ranks > 1) or ranks > gpn or (nodes or 1) > 1
    if spans and inter is None:
        inter = "ndr-400"
    fab = make_fabric(intra, inter, gpus_per_node=gpn, nics_per_gpu=args.nics_per_gpu,
                      oversubscription=args.oversubscription, nodes_per_leaf=args.nodes_per_leaf,
                      efficiency_intra=args.efficiency_intra,
                      efficiency_inter=args.efficiency_inter, intra_bytes_per_s=rate,
                      collnet=bool(getattr(args, "collnet", False)), pcie_host=host)
    return fab, make_group(ranks, fab, rpn)


def run_validate(args: argparse.Namespace) -> Any:
    from ..analytic.nccl_validate import validate_rows
    from ..views.collective import validate_report

    return validate_report(validate_rows(args.file))


def run_cost(args: argparse.Namespace) -> Any:
    from ..analytic.collectives import collective_cost
    from ..specs import dtype
    from ..views.collective import cost_report

    fab, grp = _fabric_and_group(args)
    el = dtype(args.dtype).bytes
    if args.profile:
        return _cost_with_profile(args, grp)
    r = collective_cost(args.collective, args.bytes, grp, fab, algorithm=args.algorithm,
                        proto=args.protocol, elem_bytes=el)
    return cost_report(r, grp, fab, el, plot=bool(getattr(args, "plot", None)))


def _read_profile_text(text: str, where: str, collective: str) -> dict[str, Any]:
    """A calibration profile from a comm bench --save JSON file or from nccl-tests output
    (fitted on reading with the same alpha-beta fit)."""
    import json

    from ..analytic.calibration import check_profile
    from ..errors import BadInput
    from ..specs.bounds import parse_json

    if text.lstrip().startswith("{"):
        try:
            return check_profile(parse_json(text, "--profile"), where)
        except json.JSONDecodeError as e:
            raise BadInput(f"--profile: {where} is not JSON ({e.msg})") from None
    from ..traces.nccl_tests import looks_like_nccl_tests, profile_from_nccl_tests

    if not looks_like_nccl_tests(text):
        raise BadInput(f"--profile: {where} is neither a scalemodel comm profile (JSON from comm "
                       "bench --save) nor nccl-tests output (no '# size count type ... time "
                       "algbw busbw' header)")
    # a table the file does not name (nor its file name) is taken as the collective asked for
    prof = profile_from_nccl_tests(text, where, collective)
    if collective in prof["collectives"]:
        check_profile(prof, where)
    return prof


def _cost_with_profile(args: argparse.Namespace, grp: Any) -> Any:
    from pathlib import Path

    from ..analytic.calibration import profile_cost
    from ..errors import BadInput
    from ..views.collective import profile_cost_report

    pth = Path(args.profile)
    if not pth.is_file():
        raise BadInput(f"--profile: no such file {args.profile!r}")
    from ..specs.bounds import read_bytes

    try:
        text = read_bytes(pth, "--profile").decode()
    except UnicodeDecodeError:
        raise BadInput(f"--profile: {args.profile} is not text (a comm bench --save JSON or "
                       "nccl-tests output)") from None
    prof = _read_profile_text(text, args.profile, args.collective)
    pc = profile_cost(prof, args.collective, args.bytes, grp.ranks)
    data = {"time_s": pc.time_s, "bytes_sent_per_rank": pc.bytes_sent_per_rank,
            "algbw_bytes_per_s": pc.algbw_bytes_per_s, "busbw_bytes_per_s": pc.busbw_bytes_per_s,
            "lower_bound_bytes_per_rank": None, "steps": pc.steps, "how": pc.how,
            "profile_backend": prof["backend"], "profile_world_size": prof["world_size"],
            "profile_source": prof.get("source", "comm bench --save"),
            "profile_fit": {k: {f: c[f] for f in ("alpha_s", "beta_s_per_byte", "points",
                                                   "max_rel_err")}
                            for k, c in prof["collectives"].items()},
            "profile_skipped_rows": prof.get("skipped_rows", [])}
    from ..analytic.collectives import LOWER_BOUND, np_eval

    data["lower_bound_bytes_per_rank"] = float(np_eval(LOWER_BOUND[args.collective],
                                                       {"n": float(pc.ranks), "S": args.bytes}))
    return profile_cost_report(args.collective, prof, pc, data)


TRAFFIC_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch", "recompute",
                "recompute_modules", "recompute_layers",
                "stages")


def run_traffic(args: argparse.Namespace) -> Any:
    from ..analytic.layout import TrainLayout
    from ..analytic.planner import evaluate_layout, make_cluster
    from ..analytic.traffic import step_traffic
    from ..specs import get_model
    from ..views.comm import step_traffic_report
    from .memory import layout_keys
    from .plan import plan_job

    m = get_model(args.model)
    args.zero = 1 if args.zero is None and "zero" not in (args.layout or {}) else args.zero
    args.gpus = None
    lay = TrainLayout.from_keys(layout_keys(args))
    job, fw = plan_job(args, m, args.gpu)
    cl = make_cluster(args.gpu, lay.gpus, gpus_per_node=args.gpus_per_node, inter=args.inter,
                      nics_per_gpu=args.nics_per_gpu)
    row = evaluate_layout(job, cl, lay)
    rows = step_traffic(job, cl, row)
    return step_traffic_report(m.id, lay, fw, job, cl, row, rows,
                               f"scalemodel comm traffic: {m.id}")


def run_bench(args: argparse.Namespace) -> Any:
    import datetime
    import platform

    from ..analytic.calibration import build_profile
    from ..analytic.collectives import BUSBW_FACTOR, np_eval
    from ..errors import BadInput
    from ..live.comm_bench import run_bench as _run
    from ..live.comm_bench import run_in_process_group, size_ladder
    from ..views.collective import bench_report

    if args.ranks < 1:
        raise BadInput(f"--ranks must be at least 1, got {args.ranks}")
    if args.backend not in ("gloo", "nccl"):
        raise BadInput(f"--backend must be gloo or nccl, got {args.backend!r}")
    colls = [c.strip() for c in args.collectives.split(",") if c.strip()]
    bad = [c for c in colls if c not in COLLECTIVE_CHOICES]
    if bad or not colls:
        raise BadInput(f"--collectives: unknown {', '.join(bad) or '(none)'}; choose from "
                       f"{', '.join(COLLECTIVE_CHOICES)}")
    if args.min_bytes < 4 or args.max_bytes < args.min_bytes:
        raise BadInput("--min-bytes must be at least 4 and not above --max-bytes")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise BadInput("comm bench needs torch: pip install 'scalemodel[dist]'") from None
    unit = 4 * args.ranks
    sizes = [max(unit, s - s % unit) for s in size_ladder(int(args.min_bytes),
                                                          int(args.max_bytes))]
    ring_bytes = max(unit, (1 << 20) - (1 << 20) % unit)
    if args.torchrun:
        import torch.distributed as dist

        per_rank = run_in_process_group(sizes, colls, args.iters, 1.0, ring_bytes)
        world = dist.get_world_size()
    else:
        out = _run(args.ranks, backend=args.backend, sizes=sizes, collectives=colls,
                   iters=args.iters, ring_bytes=ring_bytes, timeout_s=args.timeout)
        lr = out["launch"]
        if not lr.ok:
            bad_r = [x for x in lr.ranks if x.status != "ok"]
            first = next((x for x in bad_r if x.status == "error"), bad_r[0])
            last = (first.error.strip().splitlines() or ["no message"])[-1]
            raise BadInput(f"the benchmark failed: rank {first.rank} {first.status} ({last}); "
                           f"all {args.ranks} ranks were stopped")
        world = args.ranks
        per_rank = lr.values()
    rows = []
    base = per_rank[0]["rows"]
    for i, row in enumerate(base):
        t = max(pr["rows"][i]["time_s"] for pr in per_rank)
        n = 2 if row["collective"] == "send-recv" else world
        algbw = row["bytes"] / t
        rows.append({"collective": row["collective"], "bytes": row["bytes"], "time_s": t,
                     "algbw_bytes_per_s": algbw,
                     "busbw_bytes_per_s": algbw * float(np_eval(BUSBW_FACTOR[row["collective"]],
                                                                {"n": float(n)})),
                     "iters": row["iters"]})
    rings = [pr["ring"] for pr in per_rank if pr.get("ring")]
    K = rings[0]["bytes"] if rings else ring_bytes
    ring_check = {
        "bytes": K, "ranks": world,
        "bytes_sent_per_rank": max(r["bytes_sent"] for r in rings) if rings else None,
        "bytes_sent_each_rank": [r["bytes_sent"] for r in rings],
        "expected_bytes_per_rank": 2 * (world - 1) * K / world,
        "equal_to_all_reduce": all(r["equal_to_all_reduce"] for r in rings),
    }
    import torch as _t

    meta = {"date": datetime.date.today().isoformat(), "torch": _t.__version__,
            "machine": platform.machine(), "cpus": __import__("os").cpu_count(),
            "sizes": sizes}
    profile = build_profile(rows, backend=args.backend, world_size=world, meta=meta)
    writer = True
    if args.torchrun:
        import torch.distributed as dist

        writer = dist.get_rank() == 0  # one file, written once
    if args.save and writer:
        import json
        from pathlib import Path

        try:
            Path(args.save).write_text(json.dumps(profile, indent=2))
        except OSError as e:
            raise BadInput(f"--save: cannot write {args.save!r} ({e.strerror})") from None
    return bench_report(args.backend, world, rows, ring_check, profile)
