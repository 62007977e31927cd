"""A minimal rank function for checking that the launcher and the process group work."""

from __future__ import annotations


def allreduce_ranks(rank: int, world: int, n: int = 4, skip_rank: int = -1) -> list[float]:
    """All-reduce a vector holding rank + 1 on every rank; each rank should get sum(1..world).

    ``skip_rank`` returns at once without joining the collective, so the others wait for it:
    the smallest possible hang.
    """
    import torch
    import torch.distributed as dist

    if rank == skip_rank:
        return []
    t = torch.full((n,), float(rank + 1))
    dist.all_reduce(t)
    return t.tolist()
