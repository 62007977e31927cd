"""FIFO: jobs start strictly in submit order; a head that does not fit blocks everyone behind it
(Kueue's StrictFIFO). Placement packs nodes (best fit)."""

from . import PolicySpec

POLICY = PolicySpec("fifo", "strict submit order; the head blocks the queue; best-fit nodes",
                    queue="strict", placement="pack")
