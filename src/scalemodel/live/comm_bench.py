"""Rank functions of ``scalemodel comm bench``: timed collectives and a ring all-reduce by hand.

Run inside ranks started by :mod:`scalemodel.live.launcher` (or torchrun, through
:func:`run_in_process_group`). Sizes follow nccl-tests: all-reduce, broadcast, reduce: the
buffer; reduce-scatter: the full input; all-gather: the full output; all-to-all: the per-rank
buffer; send-recv: the message (rank 0 and rank 1 exchange, the others idle). Each rank returns
its own mean time per call; the caller takes the maximum over ranks, as nccl-tests reports the
slowest rank.
"""

from __future__ import annotations

import time
from typing import Any

BENCH_COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce",
                     "all-to-all", "send-recv")


def _op(name: str, rank: int, world: int, nbytes: int, device: Any) -> Any:
    """A closure that runs one call of collective ``name`` on ``nbytes`` of float32."""
    import torch
    import torch.distributed as dist

    elems = max(world, nbytes // 4)
    elems -= elems % world  # shardable sizes (the caller only asks for multiples)
    x = torch.ones(elems, dtype=torch.float32, device=device)
    shard = elems // world
    if name == "all-reduce":
        return lambda: dist.all_reduce(x)
    if name == "reduce-scatter":
        out = torch.empty(shard, dtype=torch.float32, device=device)
        return lambda: dist.reduce_scatter_tensor(out, x)
    if name == "all-gather":
        part = torch.ones(shard, dtype=torch.float32, device=device)
        return lambda: dist.all_gather_into_tensor(x, part)
    if name == "broadcast":
        return lambda: dist.broadcast(x, src=0)
    if name == "reduce":
        return lambda: dist.reduce(x, dst=0)
    if name == "all-to-all":
        out = torch.empty_like(x)
        return lambda: dist.all_to_all_single(out, x)
    if name == "send-recv":
        buf = torch.empty_like(x)

        def sr() -> None:
            if rank == 0:
                dist.send(x, 1)
                dist.recv(buf, 1)
            elif rank == 1:
                dist.recv(buf, 0)
                dist.send(x, 0)

        return sr
    raise ValueError(f"unknown collective {name!r}")


def bench_rank(rank: int, world: int, sizes: list[int], collectives: list[str],
               iters: int = 5, warmup: int = 1, budget_s: float = 4.0,
               ring_bytes: int = 0, fail_rank: int = -1) -> dict[str, Any]:
    """Time every (collective, size); returns {"rows": [...], "ring": {...}} for this rank.

    ``budget_s`` caps the timed iterations of one (collective, size) cell: at least one timed
    call always runs, then more while the cell stays under budget. Ranks agree on the count
    (the maximum of their wishes) so no rank waits in a collective the others skipped.
    """
    import warnings

    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)
    if rank == fail_rank:  # fault injection for the clean-up test
        raise RuntimeError(f"rank {rank} fails on purpose (fail_rank)")
    torch.set_num_threads(1)
    device = torch.device("cuda", rank % torch.cuda.device_count()) if (
        dist.get_backend() == "nccl") else torch.device("cpu")
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    rows = []
    for name in collectives:
        if name == "send-recv" and world < 2:
            continue
        for nbytes in sizes:
            fn = _op(name, rank, world, nbytes, device)
            for _ in range(warmup):
                fn()
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            sync()
            first = time.perf_counter() - t0
            want = torch.tensor([min(iters - 1, int(budget_s / max(first, 1e-6)))],
                                dtype=torch.int64)
            dist.all_reduce(want, op=dist.ReduceOp.MIN)
            extra = max(0, int(want.item()))
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(extra):
                fn()
            sync()
            total = time.perf_counter() - t0
            mean = total / extra if extra else first
            rows.append({"collective": name, "bytes": int(nbytes), "time_s": mean,
                         "iters": extra or 1})
    ring = ring_allreduce_check(rank, world, ring_bytes) if ring_bytes else None
    return {"rows": rows, "ring": ring}


def ring_allreduce_check(rank: int, world: int, nbytes: int) -> dict[str, Any]:
    """A ring all-reduce from send/recv, checked against dist.all_reduce; counts bytes sent.

    The buffer of ``nbytes`` (float32) is cut into ``world`` chunks (the last padded with zeros
    when it does not divide, as NCCL pads its last chunk). n-1 reduce-scatter steps then n-1
    all-gather steps, each sending one chunk to the right neighbour.
    """
    import torch
    import torch.distributed as dist

    elems = max(1, nbytes // 4)
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randint(-50, 50, (elems,), generator=g).to(torch.float32)  # exact sums
    ref = x.clone()
    dist.all_reduce(ref)
    chunk = -(-elems // world)
    buf = torch.zeros(chunk * world, dtype=torch.float32)
    buf[:elems] = x
    parts = list(buf.split(chunk))
    right, left = (rank + 1) % world, (rank - 1) % world
    recv = torch.empty(chunk, dtype=torch.float32)
    sent = 0
    for step in range(world - 1):  # reduce-scatter
        s_idx, r_idx = (rank - step) % world, (rank - step - 1) % world
        req = dist.isend(parts[s_idx].contiguous(), right)
        dist.recv(recv, left)
        req.wait()
        sent += parts[s_idx].numel() * 4
        parts[r_idx] += recv
    for step in range(world - 1):  # all-gather
        s_idx, r_idx = (rank + 1 - step) % world, (rank - step) % world
        req = dist.isend(parts[s_idx].contiguous(), right)
        dist.recv(recv, left)
        req.wait()
        sent += parts[s_idx].numel() * 4
        parts[r_idx].copy_(recv)
    out = torch.cat(parts)[:elems]
    return {"bytes": elems * 4, "padded_bytes": chunk * world * 4, "bytes_sent": sent,
            "equal_to_all_reduce": bool(torch.equal(out, ref)),
            "max_abs_diff": float((out - ref).abs().max().item())}


def run_in_process_group(sizes: list[int], collectives: list[str], iters: int, budget_s: float,
                         ring_bytes: int) -> list[Any]:
    """For torchrun: this process is one rank of an already-initialised (or env://) group.

    Returns every rank's results (gathered), in rank order.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    mine = bench_rank(dist.get_rank(), dist.get_world_size(), sizes, collectives, iters=iters,
                      budget_s=budget_s, ring_bytes=ring_bytes)
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)  # so each rank reports the slowest, as the launcher does
    return every


# --- the driver (runs in the parent process; torch is imported only by the ranks) -----------


def size_ladder(lo: int, hi: int, factor: int = 4) -> list[int]:
    """lo, lo x factor, ... up to hi (inclusive when it lands on it)."""
    out, s = [], lo
    while s <= hi:
        out.append(int(s))
        s *= factor
    return out


def run_bench(ranks: int, *, backend: str = "gloo", sizes: list[int] | None = None,
              collectives: list[str] | None = None, iters: int = 5, budget_s: float = 1.0,
              ring_bytes: int = 1 << 20, timeout_s: float = 120.0,
              fail_rank: int = -1) -> dict[str, Any]:
    """Start ``ranks`` processes, time the collectives, check the hand-made ring; raw results.

    A failed rank stops the run at once (the launcher kills the others); the caller turns a
    failure into a one-line error.
    """
    from .launcher import launch

    sizes = sizes or size_ladder(1024, 4 << 20)
    collectives = collectives or list(BENCH_COLLECTIVES)
    r = launch("scalemodel.live.comm_bench:bench_rank", ranks, backend=backend,
               timeout_s=timeout_s, fail_fast=True,
               kwargs={"sizes": sizes, "collectives": collectives, "iters": iters,
                       "budget_s": budget_s, "ring_bytes": ring_bytes, "fail_rank": fail_rank})
    return {"launch": r, "ok": r.ok}
