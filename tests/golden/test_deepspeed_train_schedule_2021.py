"""DeepSpeed's 2021 pipeline schedule, replayed command by command, against the planner's
bubble and pipeline P2P terms for the ``megatron-deepspeed-2021`` profile (the MT-NLG rows).

Sources read (microsoft/DeepSpeed):

* ``deepspeed/runtime/pipe/schedule.py`` at v0.5.3 (30537e719, 2021-09-16), the same at
  cd7967d6b (2021-10-09): ``TrainSchedule.steps`` (lines 189-245) runs
  ``total_steps = 2 * (micro_batches + stages - 1)`` steps (line 192); a forward step issues
  ``RecvActivation(curr)`` then ``SendGrad(prev)`` (lines 209, 212), a backward step
  ``SendActivation(prev)`` then ``RecvGrad(curr)`` (lines 216, 219), then the step's
  ``ForwardPass`` / ``BackwardPass``; ``_step_to_micro_batch`` and the four ``_*_id`` helpers
  (lines 249-295) map (step, stage) to (micro-batch, forward?) as ``_step`` below does.
* ``deepspeed/runtime/pipe/p2p.py`` at v0.5.3: ``send`` / ``recv`` (lines 31-55) force
  ``async_op = False`` (lines 34, 48) and run ``dist.broadcast`` over the 2-rank group of the
  two stages (lines 41, 55; groups built by ``dist.new_group`` at line 19); at v0.5.4
  (bc7778ea5, 2021-10-06, from PR #1407 e2fdd254e) they call the blocking ``dist.send`` /
  ``dist.recv`` (lines 62, 83) where torch >= 1.8 (line 23). Either way each call is one
  blocking transfer between the two stages, issued in the command order above: the
  simulation below treats each as a rendezvous of time ``c`` on both ranks.

What the test checks (a derivation written here, not the planner's output copied): with the
planner's own forward and backward time of one micro-batch on the slowest stage for
MT-NLG's TP8 PP35 DP8 layout, the replayed schedule's compute critical path is 1F1B's
(m + p - 1) (F + B), so the planner's bubble (p - 1) t_slow is the engine's; and the transfers
the order puts on the critical path are between 3.5 and 4 (m + p - 1), where the planner
prices 4 (m + p - 1) (``pp_p2p_calls = 2``): its PP term is an upper bound, within 8%
(3.73 (m + p - 1) on the path at MT-NLG's F and B: 0.06 s of the 0.87 s priced).
"""

from pathlib import Path

import pytest

from scalemodel.analytic.planner import evaluate_one
from scalemodel.analytic.validate import read_rows, row_problem

ROOT = Path(__file__).resolve().parents[2] / "validation"
MTNLG = {"tp": 8, "pp": 35, "dp": 8, "cp": 1, "ep": 1, "zero": 0, "vpp": 1,
         "micro_batch": 1, "recompute": "full"}


def _step(step: int, s: int, p: int) -> tuple[int, bool]:
    """schedule.py v0.5.3 _step_to_micro_batch (lines 249-269) with its four id helpers."""
    if step % 2 == 0 and s % 2 == 0:
        return step // 2 - s // 2, True
    if step % 2 == 1 and s % 2 == 1:
        return (step - 1) // 2 - s // 2, True
    if step % 2 == 0 and s % 2 == 1:
        return step // 2 - p + (s + 1) // 2, False
    return (step - 1) // 2 - p + 1 + s // 2, False


def _commands(s: int, p: int, m: int) -> list[tuple]:
    """TrainSchedule.steps (lines 189-245) for stage s: ('x', peer, tag) transfers in the order
    issued, ('F' | 'B',) compute."""
    out: list[tuple] = []
    prev = -1
    for step in range(2 * (m + p - 1)):
        mb, fwd = _step(step, s, p)
        ok, ok_prev = 0 <= mb < m, 0 <= prev < m
        if fwd:
            if ok and s > 0:
                out.append(("x", s - 1, ("A", mb)))  # RecvActivation(curr)
            if ok_prev and s > 0:
                out.append(("x", s - 1, ("G", prev)))  # SendGrad(prev)
        else:
            if ok_prev and s < p - 1:
                out.append(("x", s + 1, ("A", prev)))  # SendActivation(prev)
            if ok and s < p - 1:
                out.append(("x", s + 1, ("G", mb)))  # RecvGrad(curr)
        if ok:
            out.append(("F",) if fwd else ("B",))
        prev = mb
    return out


def _replay(p: int, m: int, f: float, b: float, c: float) -> float:
    """Seconds until the last stage is done: each rank runs its commands in order; a transfer
    ends at max(both ranks reach it) + c on both."""
    cmds = [_commands(s, p, m) for s in range(p)]
    pc, t = [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while pc[s] < len(cmds[s]):
                op = cmds[s][pc[s]]
                if op[0] != "x":
                    t[s] += f if op[0] == "F" else b
                    pc[s] += 1
                    moved = True
                    continue
                q = op[1]
                if pc[q] < len(cmds[q]) and cmds[q][pc[q]] == ("x", s, op[2]):
                    t[s] = t[q] = max(t[s], t[q]) + c
                    pc[s] += 1
                    pc[q] += 1
                    moved = True
                    continue
                break
    assert pc == [len(x) for x in cmds], "the command order deadlocked"
    return max(t)


@pytest.fixture(scope="module")
def mtnlg_terms():
    rows = {r["id"]: r for r in read_rows((ROOT / "published_runs_papers.csv").read_text())}
    prob = row_problem(rows["mt-nlg-530b-2240"])  # megatron-deepspeed-2021, DP 8: m = 240
    return evaluate_one(prob.job, prob.cluster, MTNLG).values


def test_replay_is_1f1b_on_a_small_pipeline():
    # p 4, m 8, F 1, B 2: (8 + 3) x 3 = 33 by hand
    assert _replay(4, 8, 1.0, 2.0, 0.0) == pytest.approx(33.0)


def test_deepspeed_order_keeps_the_1f1b_bubble(mtnlg_terms):
    v = mtnlg_terms
    p, m = 35, int(v.microbatches)
    assert m == 240  # 1,920 sequences / DP 8 / micro-batch 1
    f = float(v.fwd_mb_s)
    b = float(v.t_slow_s) - f  # backward with recompute and the accumulation pass
    replay = _replay(p, m, f, b, 0.0)
    assert replay == pytest.approx((m + p - 1) * (f + b), rel=1e-9)
    # the planner's bubble is the replay's idle time beyond m micro-batches
    assert float(v.bubble_s) == pytest.approx(replay - m * (f + b), rel=1e-6)


def test_priced_transfers_bound_the_replay(mtnlg_terms):
    v = mtnlg_terms
    p, m = 35, int(v.microbatches)
    f = float(v.fwd_mb_s)
    b = float(v.t_slow_s) - f
    n = m + p - 1
    c = float(v.pp_raw_s) / (4 * n)  # one blocking call: the 1/t chunk over HDR + TP gather
    assert 0.5e-3 < c < 1.2e-3
    on_path = (_replay(p, m, f, b, c) - _replay(p, m, f, b, 0.0)) / c
    assert 3.5 * n < on_path < 4.0 * n
    assert float(v.pp_s) == pytest.approx(4 * n * c, rel=1e-9)
    assert float(v.pp_s) / (on_path * c) < 1.08  # 4 / 3.73 = 1.07 at these F and B
