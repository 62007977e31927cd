"""torchtitan's 64-A100 runs of April 2024 (docs/performance.md; issue 16): the "selective layer"
activation checkpointing the Llama 3 8B row of validation/published_runs_2026.csv states, and
the torchtitan-2024-04 profile's FSDP2 copy-out.

Source: pytorch/torchtitan at 1ea476e9f (2024-04-24, the commit that wrote docs/performance.md's
Llama 3 table: "8B | 1 | selective layer | 2904 | 56.8%"):

* torchtitan/config_manager.py: ``--activation_checkpoint.selective_ac_option`` defaults to
  ``"2"`` ("2 = checkpoint every other layer"); the doc names no other frequency.
* torchtitan/parallelisms/parallelize_llama.py ``checkpoint_wrapper``: with a digit option
  N, a module-level counter is incremented once per TransformerBlock and the block is wrapped
  in a full (non-reentrant) checkpoint when ``count % N == 0``; the others are returned
  unwrapped and keep every activation.

The derivation below replays that rule by hand on Llama 3 8B's 32 blocks; every expected value
is written from it, not read from the planner.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from scalemodel.analytic.layout import TrainLayout, recompute_spec
from scalemodel.analytic.planner import evaluate_layout, make_cluster, make_job
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import job_settings

ROWS = Path(__file__).resolve().parents[2] / "validation" / "published_runs_2026.csv"
ROW = "titan-llama3-8b-sel-layer"


def _wrapped(n_blocks: int, every: int) -> list[int]:
    """The block indices torchtitan's counter wraps (count runs 1..n_blocks)."""
    return [i for i in range(n_blocks) if not every or (i + 1) % every == 0]


def test_every_second_block_is_checkpointed():
    # count = 1, 2, ..., 32; count % 2 == 0 for blocks 1, 3, ..., 31: 16 blocks
    blocks = _wrapped(32, 2)
    assert len(blocks) == 16
    assert blocks[:3] == [1, 3, 5] and blocks[-1] == 31
    # option "1" (or "0") wraps every block: that is torchtitan's full AC
    assert len(_wrapped(32, 1)) == 32 and len(_wrapped(32, 0)) == 32


def test_the_row_states_that_policy():
    row = next(r for r in csv.DictReader(io.StringIO(ROWS.read_text())) if r["id"] == ROW)
    assert row["model"] == "llama-3-8b" and row["framework"] == "torchtitan-2024-04"
    assert row["recompute"] == f"full:{len(_wrapped(32, 2))}"
    assert recompute_spec(row["recompute"]) == {"recompute": "full", "recompute_layers": 16}
    assert "selective_ac_option '2'" in row["notes"] or "default '2'" in row["notes"]


def _titan_a100_fsdp64(model: str, seq: int):
    """torchtitan 2024-04 (eager) on 64 A100 80GB, FSDP over all 64 at micro-batch 1, global
    batch 64 sequences: the setting of the torchtitan-performance rows."""
    _, s = job_settings("torchtitan-2024-04", "a100-sxm-80gb", kernels="eager")
    job = make_job(get_model(model), seq_len=seq, global_batch_seqs=64, precision="bf16", **s)
    return (job, make_cluster("a100-sxm-80gb", 64),
            TrainLayout(tp=1, pp=1, dp=64, cp=1, zero=3, micro_batch=1))


def test_half_the_forward_is_run_again():
    """A checkpointed block re-runs its forward once in the backward; nothing else in the step
    depends on which blocks are wrapped. So checkpointing 16 of the 32 blocks adds exactly half
    of what checkpointing all 32 adds, in hardware FLOPs and in compute seconds, and leaves the
    model FLOPs alone."""
    job, cl, base = _titan_a100_fsdp64("llama-3-8b", 8192)
    none = evaluate_layout(job, cl, base.with_(recompute="none")).values
    full = evaluate_layout(job, cl, base.with_(recompute="full")).values
    half = evaluate_layout(job, cl, base.with_(recompute="full", recompute_layers=16)).values
    assert float(none.model_flops) == pytest.approx(float(half.model_flops))
    added_full = float(full.hw_flops) - float(none.hw_flops)
    added_half = float(half.hw_flops) - float(none.hw_flops)
    assert added_half == pytest.approx(0.5 * added_full, rel=1e-9)
    # and the compute seconds it adds are half of full AC's (the re-run forward is linear in the
    # blocks it covers; nothing else in the step depends on which blocks)
    d_full = float(full.compute_s) - float(none.compute_s)
    d_half = float(half.compute_s) - float(none.compute_s)
    assert d_half == pytest.approx(0.5 * d_full, rel=1e-6)


def _llama2_70b_params() -> int:
    """Llama 2 70B from its config: hidden 8192, 80 layers, MLP 28672, 64 query heads and 8 KV
    heads of 128, vocabulary 32000, untied embedding and head, RMSNorm weights."""
    h, L, f, kv, V = 8192, 80, 28672, 8 * 128, 32000
    layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    return L * layer + 2 * V * h + h


def test_the_april_2024_copy_out_by_hand():
    """FSDP2 on the runs' nightly (torch-2.4.0.dev20240412): the all-gather copy-out
    (split_with_sizes_copy, bf16 read 2 + write 2 per unsharded parameter) runs on the compute
    stream, twice per micro-batch (torchtitan reshards every block after forward but the last;
    the step model counts every parameter twice), and the reduce-scatter copy-in ran on the
    reduce-scatter stream until PR #129721 (2024-06-27): nothing of it on the compute stream.
    Llama 2 70B, FSDP over 64 A100 (tp = pp = 1: every parameter is local and unsharded once
    gathered), local batch 1: 2 x 4 x 68.98e9 B at 0.8 of 2.039 TB/s."""
    P = _llama2_70b_params()
    assert pytest.approx(68.98e9, rel=1e-3) == P
    want = 2 * 4 * P / (0.8 * 2.039e12)  # 0.338 s
    m = get_model("llama-2-70b")
    cl = make_cluster("a100-sxm-80gb", 64)
    lay = TrainLayout(tp=1, pp=1, dp=64, cp=1, zero=3, micro_batch=1, recompute="op")

    def values(fid: str):
        _, s = job_settings(fid, "a100-sxm-80gb", kernels="eager")
        job = make_job(m, seq_len=4096, global_batch_seqs=64, precision="bf16", **s)
        return evaluate_layout(job, cl, lay).values

    dated, later = values("torchtitan-2024-04"), values("torchtitan")
    assert float(dated.fsdp_copy_s) == pytest.approx(want, rel=2e-3)
    assert float(later.fsdp_copy_s) == 0.0  # the 2025-06 profile records no copies
    # the copy is compute-stream time: the step grows by it (nothing else differs)
    assert float(dated.step_time_s) - float(later.step_time_s) == pytest.approx(want, rel=2e-3)


def _op_policy_recomputed(calls: list[str]) -> list[str]:
    """torchtitan's "op" policy at 1ea476e9f (torchtitan/parallelisms/parallelize_llama.py
    lines 36-41 and 49-57): a per-block counter goes up on every aten.mm; the output is saved
    when the op is in no_recompute_list (mm, SDPA flash / efficient, reduce_scatter_tensor)
    unless it is an mm whose count is even. Returns the mm outputs recomputed."""
    return [name for i, name in enumerate(calls, start=1) if i % 2 == 0]


def test_op_policy_recomputes_wk_wo_w3_by_hand():
    """The matmuls of a Llama block in the order they run (torchtitan/models/llama/model.py at
    1ea476e9f: Attention.forward line 187 wq, wk, wv, then SDPA line 204 and wo line 209;
    FeedForward.forward line 248 w2(silu(w1(x)) * w3(x)): w1, then w3, then w2). Every second
    one is recomputed: wk, wo and w3; SDPA's output is saved (no attention FLOPs re-run).
    Llama 2 70B: h 8192, 8 KV heads of 128 (wk: h x 1024), wo h x h, w3 h x 28672, 80 layers.
    Re-run FLOPs per token 2 x 80 x 8192 x (1024 + 8192 + 28672) = 4.966e10, times 64 x 4096
    tokens per step."""
    calls = ["wq", "wk", "wv", "wo", "w1", "w3", "w2"]
    assert _op_policy_recomputed(calls) == ["wk", "wo", "w3"]
    per_tok = 2 * 80 * 8192 * (1024 + 8192 + 28672)
    assert per_tok == pytest.approx(4.966e10, rel=1e-3)
    job, cl, base = _titan_a100_fsdp64("llama-2-70b", 4096)
    none = evaluate_layout(job, cl, base.with_(recompute="none")).values
    op = evaluate_layout(job, cl, base.with_(recompute="op")).values
    added = float(op.hw_flops) - float(none.hw_flops)
    assert added == pytest.approx(per_tok * 64 * 4096, rel=1e-9)
