"""Pipeline-parallel memory terms, derived by hand from the schedules' and the frameworks' source.

1. Micro-batches in flight. A small simulator below replays the order of work each schedule's
   source gives a pipeline rank and counts the model-chunk micro-batches whose activations are
   held (a chunk's forward adds one, its backward frees one):

   * 1F1B: Megatron-Core schedules.py (NVIDIA/Megatron-LM d98e8a6,
     forward_backward_pipelining_without_interleaving, lines 2277-2278) runs
     min(p - i - 1, m) warmup forwards, then for each remaining micro-batch one forward and one
     backward, then the cooldown backwards. torch's Schedule1F1B runs min(m, p - i) forwards
     first and then backward-forward pairs; both peak at min(m, p - i).
   * Interleaved 1F1B: get_pp_rank_microbatches gives 2 (p - i - 1) + (v - 1) p warmup chunk
     forwards (+1 with overlap_moe_expert_parallel_comm), at most m v, then forward-backward
     pairs; torch's ScheduleInterleaved1F1B has the same warmup (its get_rank_warmup_ops).
   Korthikanti et al. 2022 (Sec. 4.2.3): the first 1F1B stage holds p micro-batches; with
   interleaving its memory grows by 1 + (p - 1) / (p v) over that.

2. torchtitan's FSDP under PP for the Dec-2024 Llama 3.1 405B rows (torchtitan 9dec370,
   benchmarks/llama3_h100_202412_torchtitan.md Table 5: FSDP 8, TP 8, PP 8, local batch 32,
   full AC; 8 micro-batches of 4 by 9dec370's defaults, see test_torchtitan_2024_12_pipeline.py):
   * pp_reshard_after_forward = false (parallelize_llama.py apply_fsdp): every parameter of a
     stage stays gathered in bf16 from its first forward to its last backward, beside its shard;
   * pp_grad_accum_bytes = 4 (torch pipelining stage.py + FSDP2 accumulate_unsharded_grad): one
     fp32 unsharded gradient per stage parameter, from a chunk's first backward to the step's
     last;
   * the loss under TP: loss_parallel() (train.py utils.get_train_context; the output layer
     returns its vocabulary shard), 16 B per shard element at the backward's peak (below);
   * stages: generate_split_points (9dec370) puts 126 // stages layers per stage and the
     remainder on the middle stages: 1F1B 15/16 x 6/15; interleaved 16 chunks 7/8 x 14/7, so
     ranks hold 15/16 x 6/15 layers (chunk j on rank j mod 8).
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.memory import (
    act_working_set,
    loss_logit_bytes,
    pipeline_in_flight,
    pp_extra_warmup,
    pp_fsdp_terms,
    static_model,
    training_bytes,
)
from scalemodel.specs import get_model


def _simulate(rank: int, p: int, m: int, v: int, extra: int = 0) -> int:
    """Peak chunk micro-batches held on ``rank``, replaying the schedule's order of work."""
    total = m * v
    # Megatron-Core: p - i - 1 warmup forwards (1F1B); 2 (p - i - 1) + (v - 1) p interleaved
    warm = (min(p - rank - 1, m) if v == 1
            else min(2 * (p - rank - 1) + (v - 1) * p + extra, total))
    held = peak = 0
    for _ in range(warm):
        held += 1
        peak = max(peak, held)
    for _ in range(total - warm):  # steady state: a forward, then a backward
        held += 1
        peak = max(peak, held)
        held -= 1
    return peak  # the cooldown only frees


@pytest.mark.parametrize("p, m, v", [(4, 8, 1), (8, 8, 1), (8, 3, 1), (16, 16, 1),
                                     (4, 8, 2), (8, 8, 2), (8, 16, 2), (16, 16, 6),
                                     (2, 32, 24), (8, 128, 2)])
def test_in_flight_is_the_schedules_peak(p, m, v):
    for rank in range(p):
        got, _ = pipeline_in_flight(rank, p, m, v)
        assert float(got) == _simulate(rank, p, m, v)


def test_extra_warmup_with_the_ep_overlap():
    # Megatron-Core: one more warmup chunk forward with overlap_moe_expert_parallel_comm
    for rank in range(8):
        got, _ = pipeline_in_flight(rank, 8, 128, 2, extra_warmup=1)
        assert float(got) == _simulate(rank, 8, 128, 2, extra=1)
    n, src = pp_extra_warmup("megatron-core", True)
    assert float(n) == 1 and src == "megatron-core-pp-warmup"
    assert float(pp_extra_warmup("megatron-core", False)[0]) == 0
    assert float(pp_extra_warmup("torchtitan-2024-12", True)[0]) == 0


@pytest.mark.parametrize("p, v", [(4, 2), (8, 2), (8, 4), (16, 6)])
def test_first_stage_matches_korthikanti(p, v):
    """First stage, enough micro-batches: p micro-batches of the whole stage under 1F1B; with v
    chunks of L / (p v) layers, (v p + p - 1) chunks = p (1 + (p - 1) / (p v)) stage-equivalents."""
    one, _ = pipeline_in_flight(0, p, None, 1)
    assert float(one) == p
    inter, _ = pipeline_in_flight(0, p, None, v)
    assert float(inter) / v == pytest.approx(p * (1 + (p - 1) / (p * v)), rel=1e-12)


# --- torchtitan 405B, TP8 PP8 FSDP8, 8 micro-batches of 4 x 8192 tokens, full AC -------------

L, H, FFN, KV_W, V = 126, 16384, 53248, 8 * 128, 128256  # Llama 3.1 405B config.json
T, P_, D, M, B, S = 8, 8, 8, 8, 4, 8192
LAYER_SPLIT = 2 * H * H + 2 * H * KV_W + 3 * H * FFN  # q, o; k, v; gate, up, down
LAYER = LAYER_SPLIT / T + 2 * H  # per GPU: TP-split matrices, the two RMSNorms replicated
EMB = V * H / T  # the embedding (first stage) and the untied head (last), vocab-split by TP
A_LAYER = 2 * S * B * H / T  # full AC keeps each layer's bf16 input, sequence-parallel
# the vocab-parallel loss (9dec370 under TP: loss_parallel(), torch's loss.py decomposition), per
# element of the rank's vocabulary shard at its peak in the backward: the saved log_softmax output,
# zeros_like(x), exp(x) and their sum (or the product with grad_output), 4 fp32 buffers
LOSS_TP = 4 * 4
A_OUT = 4 * S * B * H / T + LOSS_TP * S * B * V / T  # head input (fp32) + the loss's buffers


def _states(p_gpu: float) -> float:
    """bf16 shard + bf16 gathered stage + bf16 grad shard + 12 B Adam shard (FSDP 8): 4 B/param."""
    return p_gpu * (2 / D + 2 + 2 / D + 12 / D)


def _row(vpp: int, stages: tuple[int, ...]) -> dict:
    m = get_model("llama-3-405b")
    sm = static_model(m)
    gathered, accum, _, _ = pp_fsdp_terms("torchtitan-2024-12")
    assert gathered is True and accum == 4.0
    loss_b, loss_src, _ = loss_logit_bytes("torchtitan-2024-12", T)
    assert loss_b == LOSS_TP and loss_src == "torch-loss-parallel"
    first, last = stages[0], stages[-1]
    mid = max(stages[1:-1])
    out = training_bytes(sm, tp=T, pp=P_, dp=D, zero=3, rc=2, sp=True, micro_batch=B,
                         seq_len=S, vpp=vpp, microbatches=M, n_first=first, n_mid=mid,
                         mid_index=1 + stages[1:-1].index(mid), n_last=last, loss_bytes=loss_b,
                         pp_gathered=gathered, pp_grad_accum_bytes=accum)
    # the one layer being recomputed (its no-recompute set): the kernel model's term, the same on
    # every stage (tests/unit/test_memory_kernels.py covers it)
    ws = float(act_working_set(sm.dense, S, B, m.n_heads, m.n_kv_heads, T, True, 2, False))
    return {k: float(v) for k, v in out.items()} | {"ws": ws}


def test_405b_1f1b_by_hand():
    got = _row(1, (15,) + (16,) * 6 + (15,))
    p_first = 15 * LAYER + EMB
    p_mid = 16 * LAYER
    p_last = 15 * LAYER + EMB + H  # + the final norm
    # in flight with the accumulators (allocated at the first backward): rank 0 ran its 8
    # forwards, 7 left after that backward; rank 1 (7 warmup forwards) runs one more forward
    # after its first backward: 7; rank 7: 1. Without accumulators rank 0 holds 8 < 7 + 4 P.
    first = _states(p_first) + 4 * p_first + 7 * 15 * A_LAYER
    mid = _states(p_mid) + 4 * p_mid + 7 * 16 * A_LAYER
    last = _states(p_last) + 4 * p_last + 1 * 15 * A_LAYER + A_OUT
    assert mid > first > last
    assert got["heaviest"] == 1 and got["chunks_in_flight"] == 7
    assert got["params"] == pytest.approx(p_mid * (2 / D + 2), rel=1e-12)
    assert got["grad_accum"] == pytest.approx(4 * p_mid, rel=1e-12)
    assert got["grads"] == pytest.approx(p_mid * 2 / D + 4 * p_mid, rel=1e-12)
    assert got["activations"] == pytest.approx(7 * 16 * A_LAYER + got["ws"], rel=1e-12)
    assert got["total"] == pytest.approx(mid + got["ws"], rel=1e-12)
    # 61.50 GiB before the recomputed layer's working set
    assert mid / 2**30 == pytest.approx(61.50, abs=0.01)


def test_405b_interleaved_by_hand():
    got = _row(2, (15,) + (16,) * 6 + (15,))
    p_first, p_mid, p_last = 15 * LAYER + EMB, 16 * LAYER, 15 * LAYER + EMB + H
    a_f, a_m, a_l = 15 * A_LAYER, 16 * A_LAYER, 15 * A_LAYER  # one micro-batch, whole stage

    def peak(p_gpu: float, a: float, held: list[tuple[int, float]]) -> float:
        """The stage's worst moment: (chunks held, share of accumulators) candidates; a chunk is
        half the stage (chunks counted at the stage's mean size)."""
        return max(n * a / 2 + f * 4 * p_gpu for n, f in held)

    # ranks 0 and 1: warmup min(2 (7 - i) + 8, 16) = 16 (all), nothing after; the last chunk's
    # first backward leaves 15 with half the accumulators, the first chunk's (the 9th backward)
    # 7 with all. Rank 7: warmup 8 + 1 = 9 in flight; 9 after the first backward (a forward
    # follows), 7 after the 9th.
    first = _states(p_first) + peak(p_first, a_f, [(16, 0), (15, .5), (7, 1)])
    mid = _states(p_mid) + peak(p_mid, a_m, [(16, 0), (15, .5), (7, 1)])
    last = _states(p_last) + peak(p_last, a_l, [(9, 0), (9, .5), (7, 1)]) + A_OUT
    assert last > mid > first
    assert got["heaviest"] == 2 and got["chunks_in_flight"] == 7
    assert got["params"] == pytest.approx(p_last * (2 / D + 2), rel=1e-12)
    assert got["grad_accum"] == pytest.approx(4 * p_last, rel=1e-12)
    assert got["activations"] == pytest.approx(7 * a_l / 2 + A_OUT + got["ws"], rel=1e-12)
    assert got["total"] == pytest.approx(last + got["ws"], rel=1e-12)
    assert last / 2**30 == pytest.approx(61.14, abs=0.01)
