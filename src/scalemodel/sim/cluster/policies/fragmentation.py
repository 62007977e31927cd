"""Fragmentation-aware: EASY backfill, and a job goes to the node whose use raises the expected
fragmentation of the free GPUs least, fragmentation being the free GPUs of a node too few for a
job size, weighted by the workload's job sizes (after FGD, Weng et al. 2023, with whole GPUs)."""

from . import PolicySpec

POLICY = PolicySpec("fragmentation", "EASY backfill + fragmentation-gradient node choice",
                    queue="easy", placement="fgd", source="weng-2023-fgd")
