"""EASY backfill: the head of the queue gets a reservation at the earliest time enough GPUs
free up; later jobs may start now if they end before it or use only GPUs the head will not need
(Mu'alem and Feitelson 2001). Run times are known exactly here (an optimistic estimate)."""

from . import PolicySpec

POLICY = PolicySpec("backfill", "FIFO with EASY backfill (head reserved, exact run times)",
                    queue="easy", placement="pack", source="mualem-feitelson-2001-easy")
