"""Priority preemption with checkpoint contracts: the queue is ordered by priority; when the
highest-priority waiting job does not fit, whole lower-priority gangs are preempted (lowest
priority first, then the one losing least work). A victim loses the work since its last
checkpoint and pays a restore on restart; one that declares a grace period at least as long as
its checkpoint cost saves first and loses nothing but the save."""

from . import PolicySpec

POLICY = PolicySpec("preempt", "priority order + EASY backfill + preemption honouring checkpoints",
                    queue="easy", placement="pack", order="priority", preemption=True)
