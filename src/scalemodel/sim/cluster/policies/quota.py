"""Team quotas in one cohort (after Kueue): each team has a nominal GPU quota; a job within its
team's quota is admitted when it fits; a job beyond it borrows idle quota of the cohort and is
marked as borrowing; a team under its quota reclaims borrowed GPUs by preempting borrowing jobs
of other teams (newest first), honouring their checkpoint contracts."""

from . import PolicySpec

POLICY = PolicySpec("quota", "team quotas with borrowing of idle quota and reclaim",
                    queue="easy", placement="pack", quota=True, source="kueue-docs")
