"""The exposed DP traffic of the FSDP root group (FSDP2's in torchtitan, FSDP1's in llm-foundry) (analytic/step/data_parallel._sync_plan).

torchtitan 9dec370 wraps the whole model last (``fully_shard(model)``), so the embedding, the
final norm and the output head form FSDP2's root group (frameworks.toml fsdp_root_group, source
torch-260-fsdp2-root). The root is gathered first in each forward, kept gathered into the
backward, and reduce-scattered only after the whole backward. So where the profile says so,
the root's share of the all-gather and of the reduce-scatter is exposed in place of the
last-bucket rule. The bundled torchtitan 2024-12 profile offers ZeRO-3 only, so the ZeRO-2
branch of the rule (the same FSDP2 groups with parameters kept gathered) is reached by no
bundled row; these tests pin both branches with numbers derived by hand below.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.step.data_parallel import _sync_plan

# one reduce-scatter 1.0 s, one all-gather 0.5 s, 4 micro-batches; a forward hides 0.45 s of
# traffic and a backward 0.9 s; the last DDP bucket holds 10% of the gradients, the root 20%
RS, AG, MB, FWD, BWD, LAST, ROOT = 1.0, 0.5, 4.0, 0.45, 0.9, 0.1, 0.2


def _plan(zero: int, root: float | None):
    c = SimpleNamespace(zero=np.array(float(zero)), mb=np.array(MB),
                        job=SimpleNamespace(framework_id="torchtitan-2024-12"))
    st = SimpleNamespace(fwd_mb=np.array(FWD), bwd_mb=np.array(BWD))
    r = None if root is None else np.array(root)
    raw, exposed = _sync_plan(c, np.array(RS), np.array(AG), np.array(LAST), st, r)
    return float(raw), float(exposed)


def test_zero2_root_group_exposes_its_share():
    # ZeRO-2 reduce-scatters in every micro-batch's backward (4 x 1.0 s) and gathers the
    # parameters once (0.5 s): raw 4.5 s. Exposed with the root group: per micro-batch
    # max(1.0 x 0.2, 1.0 - 0.9) = 0.2 s, and the gather max(0.5 x 0.2, 0.5 - 0.45) = 0.1 s:
    # 4 x 0.2 + 0.1 = 0.9 s
    raw, exposed = _plan(2, ROOT)
    assert raw == pytest.approx(4.5)
    assert exposed == pytest.approx(0.9)


def test_zero2_without_root_keeps_the_last_bucket_rule():
    # the last bucket instead: 4 x max(0.1, 0.1) + max(0.05, 0.05) = 0.45 s
    raw, exposed = _plan(2, None)
    assert raw == pytest.approx(4.5)
    assert exposed == pytest.approx(0.45)


def test_zero3_root_group():
    # ZeRO-3 gathers for forward and backward and reduce-scatters every micro-batch. The root
    # is kept gathered from forward to backward (FSDP2: no reshard after forward for the root;
    # FSDP1 torch 2.1.0 _post_forward_reshard: the root is not freed), so the backward gathers
    # only the other 80%: raw 4 x (0.5 + 0.8 x 0.5 + 1.0) = 7.6 s. Exposed per micro-batch: the
    # forward gather's root share max(0.5 x 0.2, 0.5 - 0.45) = 0.1 s and the backward's
    # max(1.0 x 0.2, 0.4 + 1.0 - 0.9) = 0.5 s: 4 x 0.6 = 2.4 s
    raw, exposed = _plan(3, ROOT)
    assert raw == pytest.approx(7.6)
    assert exposed == pytest.approx(2.4)


def test_root_share_zero_falls_back_to_the_last_bucket():
    # a root share of 0 (pipeline stages, ZeRO-1) leaves the last-bucket rule in force
    assert _plan(2, 0.0) == pytest.approx(_plan(2, None))
    assert _plan(3, 0.0) == pytest.approx(_plan(3, None))
