"""A minimal rank function for checking that the launcher and the process group work."""

from __future__ import annotations


def allreduce_ranks(rank: int, world: int, n: int = 4) -> list[float]:
    """All-reduce a vector holding rank + 1 on every rank; each rank should get sum(1..world)."""
    import torch
    import torch.distributed as dist

    t = torch.full((n,), float(rank + 1))
    dist.all_reduce(t)
    return t.tolist()
