"""The DP gradient reduction's last bucket holds the word embedding whole (issue 16).

Source: Megatron-LM core_r0.8.0 megatron/core/distributed/param_and_grad_buffer.py (commit
baf94af3): parameters are assigned to buckets in reverse order, a bucket is closed once it holds
bucket_size elements or more, so no parameter is split; the word embedding, the model's first
parameter and the last gradient of the backward, sits whole in the last bucket, whose
reduce-scatter (and, with --overlap-param-gather, whose all-gather before the first forward
layer) nothing hides.
"""

from pathlib import Path

import pytest

from scalemodel.analytic.planner import evaluate_one
from scalemodel.analytic.step.comm import collective_time
from scalemodel.analytic.validate import read_rows, row_problem

ROOT = Path(__file__).resolve().parents[2] / "validation"


def test_readme_1p7b_exposes_the_embedding_bucket():
    # The Megatron-LM README's 1.7B GPT on 48 H100 (DP 48, TP 1, PP 1; batch 192 = one
    # micro-batch of 4 per GPU). Parameters by hand: 24 layers of 12 h^2 + 13 h (QKV, output
    # projection, fc1, fc2 with biases, two LayerNorms), untied input and output tables of
    # V h each, the final LayerNorm 2 h; h = 2048, V = 131072.
    h, V, L = 2048, 131072, 24
    emb = V * h  # 268,435,456
    total = L * (12 * h * h + 13 * h) + 2 * emb + 2 * h  # 1,745,473,536
    rows = {r["id"]: r for r in read_rows((ROOT / "published_runs_papers.csv").read_text())}
    p = row_problem(rows["mcore-r080-gpt-1.7b-h100"])  # profile megatron-core-0.8, bf16
    job, cl = p.job, p.cluster
    lay = {"tp": 1, "pp": 1, "dp": 48, "cp": 1, "ep": 1, "zero": 1, "vpp": 1,
           "micro_batch": 4, "recompute": "none"}
    v = evaluate_one(job, cl, lay).values
    # fp32 gradients reduce-scattered (grad_reduce_bytes 4), bf16 parameters all-gathered,
    # over 48 ranks, 8 per node (the collective model, one component)
    rs = float(collective_time("reduce_scatter", 4.0 * total, 48.0, 8.0, cl))
    ag = float(collective_time("all_gather", 2.0 * total, 48.0, 8.0, cl))
    assert v.dp_raw_s == pytest.approx(rs + ag, rel=2e-3)
    # the backward (0.2 s) is far longer than the rest of the traffic: only the last bucket
    # is exposed, the embedding's share of the gradients, not 160 MB's share (2.3%)
    assert v.dp_s == pytest.approx((rs + ag) * emb / total, rel=2e-3)
    assert emb / total == pytest.approx(0.1538, abs=1e-4)
