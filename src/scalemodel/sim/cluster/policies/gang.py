"""Gang, best effort: every job is all-or-nothing (as in every policy here), and any job whose
whole gang fits now starts, in submit order, with no reservation for the head (Kueue's
BestEffortFIFO, Volcano's gang plugin). Small jobs flow; large gangs can starve."""

from . import PolicySpec

POLICY = PolicySpec("gang", "all-or-nothing, best-effort order: any whole gang that fits starts",
                    queue="besteffort", placement="pack", source="kueue-docs")
