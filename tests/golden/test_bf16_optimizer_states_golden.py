"""DeepSpeed's BF16_Optimizer shards its fp32 states over DP by itself at ZeRO stage 0.

Source: microsoft/DeepSpeed 56c522386 (PR #1801, the bf16 + pipeline optimizer of the BLOOM run)
deepspeed/runtime/bf16_optimizer.py: __init__ keeps only this rank's 1/dp partition of each flat
bf16 group as the fp32 master copy (lines 146-159) and hands that partition to Adam (line 202);
the fp32 gradients are one flat buffer as large as the whole group (lines 164-165), and the
pipeline engine keeps the bf16 .grad beside it (update_hp_grads(clear_lp_grads=False),
pipe/engine.py line 760); step() all-gathers the updated bf16 partitions over DP
(all_gather_dp_groups, line 359). The BLOOM launch script (bigscience-workshop/bigscience
train/tr11-176B-ml/tr11-176B-ml.slurm at 003b2505) runs it at ZERO_STAGE=0, micro-batch 2.
Per local parameter, by hand: weights 2 bytes, gradients 2 + 4 = 6, fp32 master + two Adam
moments 12 / dp.
"""

from pathlib import Path

import pytest

from scalemodel.analytic.planner import evaluate_one
from scalemodel.analytic.step.comm import collective_time
from scalemodel.analytic.validate import read_rows, row_problem

ROOT = Path(__file__).resolve().parents[2] / "validation"
BLOOM = {"tp": 4, "pp": 12, "dp": 8, "cp": 1, "ep": 1, "zero": 0, "vpp": 1,
         "micro_batch": 2, "recompute": "full"}


def _bloom():
    rows = {r["id"]: r for r in read_rows((ROOT / "published_runs_papers.csv").read_text())}
    p = row_problem(rows["bloom-176b-384"])  # profile megatron-deepspeed-2022-bf16
    return p.job, p.cluster


def test_bloom_states_sharded_gradients_kept_twice():
    job, cl = _bloom()
    v = evaluate_one(job, cl, BLOOM).values
    # weights 2 B, gradients 6 B, states 12 / 8 = 1.5 B per local parameter
    assert v.mem_grads / v.mem_params == pytest.approx(6 / 2, rel=1e-9)
    assert v.mem_optimizer / v.mem_params == pytest.approx(12 / 8 / 2, rel=1e-9)


def test_bloom_gathers_the_bf16_weights_after_the_step():
    job, cl = _bloom()
    v = evaluate_one(job, cl, BLOOM).values
    p_local = v.mem_params / 2  # parameters of the slowest stage's GPU (2-byte weights)
    # DP 8 ranks TP 4 apart, two to a node (Megatron rank order tp, dp, pp): fp32
    # all-reduce, then the bf16 all-gather; the tied embedding's fp32 all-reduce (V h / tp x 4
    # over the first and last stage) besides
    ar = 2 * float(collective_time("reduce_scatter", 4.0 * p_local, 8.0, 2.0, cl))
    ag = float(collective_time("all_gather", 2.0 * p_local, 8.0, 2.0, cl))
    tied = float(collective_time("all_reduce", 250880 * 14336 / 4 * 4, 2.0, 1.0, cl))
    assert v.dp_raw_s == pytest.approx(ar + ag + tied, rel=2e-3)
    # 2021 Megatron-DeepSpeed overlaps none of it
    assert v.dp_s == pytest.approx(v.dp_raw_s, rel=1e-9)
