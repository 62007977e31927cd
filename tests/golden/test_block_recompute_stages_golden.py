"""Block recompute priced stage by stage (issue 16, s19-megcore).

Source of the semantics: Megatron-Core core_v0.16.1 megatron/core/transformer/transformer_block.py
``_checkpointed_forward`` with ``recompute_method == 'block'``: each TransformerBlock (one per
model chunk on a rank) walks its own layers and checkpoints layer ``l`` when
``l < recompute_num_layers``, running the rest plainly (the same loop at core_r0.8.0). So a
stage of n layers (vpp 1) recomputes min(N, n) of them, and a stage with fewer layers than N
recomputes all of its own: the recompute of a stage depends on its own count, not on the
largest stage's.

Derivation (Llama 3 70B, the ``nemo-llama3-70b-gb300-260201-mx`` job on 64 GB300 under the
megatron-core profile, TP1 PP4 DP16 ZeRO-1 MBS 2, a split given per stage): a stage's time per
micro-batch is r L1 + (n - r) L0, plus the output head H on the last stage, where L1 is one
layer with its forward re-run, L0 one plain layer and r = min(N, n). The three component times
come from the step model's own per-stage pricing of plain layouts whose slowest stage is known:

* L0: recompute none on stages 19/22/19/20: the middle stage (22 plain layers) is the slowest,
  t = 22 L0;
* L1: recompute full on the same split: the middle stage again, t = 22 L1;
* H: recompute none on 20/21/19/20: the last stage is the slowest (H > L0), t = 20 L0 + H.

Then on 20/21/19/20 with N = 20: first 20 L1 (all of its 20), middle 20 L1 + 1 L0, last
20 L1 + H (all of its 20): since H > L0 the last stage is the critical path, t = 20 L1 + H,
the same as recompute=full's last stage. Before this change every stage took the largest
stage's share 20 / 21, the last stage 20 (20/21 L1 + 1/21 L0) + H, which is less recompute
than it runs. On 26/18/18/18 with N = 22 the first stage (22 L1 + 4 L0) stays the slowest
(the 18-layer stages recompute all 18: 18 L1 + H on the last), as before.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.planner import evaluate_layout
from scalemodel.analytic.validate import read_rows, row_problem

ROW = "nemo-llama3-70b-gb300-260201-mx"
CSV = Path(__file__).resolve().parents[2] / "validation" / "published_runs_nvl72.csv"


def _slow(stages, **kw):
    """(one micro-batch through the slowest stage, which stage) of the row's job under the
    megatron-core profile on the given split."""
    p = row_problem({r["id"]: r for r in read_rows(CSV.read_text())}[ROW])
    job = replace(p.job, framework_id="megatron-core")
    lay = TrainLayout(tp=1, pp=4, dp=16, zero=1, micro_batch=2, stages=stages, **kw)
    v = evaluate_layout(job, p.cluster, lay).values
    lay = TrainLayout(tp=1, pp=4, dp=16, zero=1, micro_batch=2, stages=stages, **kw)
    # nothing rides on the slowest stage's micro-batch but its layers (and the head)
    assert float(v.grad_acc_s) == 0.0 and float(v.fsdp_copy_s) == 0.0
    assert float(v.offload_s) == 0.0
    return float(v.t_slow_s), int(v.slow_stage)


def _components():
    t, which = _slow((19, 22, 19, 20), recompute="none")
    assert which == 1
    l0 = t / 22
    t, which = _slow((19, 22, 19, 20), recompute="full")
    assert which == 1
    l1 = t / 22
    t, which = _slow((20, 21, 19, 20), recompute="none")
    assert which == 2
    head = t - 20 * l0
    assert head > l0 and l1 > l0
    return l0, l1, head


def test_a_shorter_stage_recomputes_all_its_layers():
    l0, l1, head = _components()
    stages = {"first": 20 * l1, "middle": 20 * l1 + l0, "last": 20 * l1 + head}
    want = max(stages.values())
    assert want == stages["last"]
    t, which = _slow((20, 21, 19, 20), recompute="full", recompute_layers=20)
    assert which == 2
    assert t == pytest.approx(want, rel=1e-9)
    # the largest stage's share on every stage (the pricing before) is measurably less
    before = max(20 * l1 + l0, 20 * (20 / 21 * l1 + 1 / 21 * l0) + head)
    assert want > before * 1.005


def test_the_largest_stage_is_priced_as_before():
    l0, l1, head = _components()
    t, which = _slow((26, 18, 18, 18), recompute="full", recompute_layers=22)
    assert which == 0
    assert t == pytest.approx(22 * l1 + 4 * l0, rel=1e-9)
    assert 22 * l1 + 4 * l0 > 18 * l1 + head
