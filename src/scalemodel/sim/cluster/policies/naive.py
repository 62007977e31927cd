"""Naive: EASY backfill, and a job of one node goes to the node with the most free GPUs (worst
fit), the way a load-spreading scorer (Kubernetes' default LeastAllocated) places pods. Every
node ends up partly used, so a whole-node job finds no node: the baseline that strands GPUs."""

from . import PolicySpec

POLICY = PolicySpec("naive", "EASY backfill + spread placement (most free GPUs first)",
                    queue="easy", placement="spread", source="kubernetes-least-allocated")
