"""torchtitan 9dec370 (the Dec-2024 H100 benchmarks) on torch of Dec 2024: two memory-bound
passes on the compute stream that a generic one-pass optimizer term does not count.

1. The optimizer (sources `torchtitan-9dec370-optimizer`, `torch-260-adamw-foreach`):
   torchtitan builds torch.optim.AdamW with foreach = not fused (fused off unless
   --optimizer.fused is given; the benchmark page gives none), weight decay 0.1, and clips the
   gradient norm with foreach every step. torch 2.6.0's _multi_tensor_adamw (no capturable) runs
   one foreach kernel per line over whole fp32 lists (FSDP2 shards fp32 parameters; gradients
   are reduced in fp32). Bytes per local parameter, read + written:

       params *= 1 - lr * wd                   4 + 4
       exp_avg.lerp_(grad, 1 - beta1)          8 + 4
       exp_avg_sq *= beta2                     4 + 4
       exp_avg_sq.addcmul_(grad, grad)         8 + 4   (the same grad twice, read once)
       denom = sqrt(exp_avg_sq)                4 + 4   (a new list)
       denom /= sqrt(bias correction 2)        4 + 4
       denom += eps                            4 + 4
       params.addcdiv_(exp_avg, denom)        12 + 4
                                              -------
                                                  80
   clip_grad_norm_: _foreach_norm reads every gradient (4), _foreach_mul_ scales it in place
   (4 + 4): 12. Together 92, where one pass over the fp32 states (2 x 12), the gradient and the
   16-bit weight (2 x 2) counts 28.

2. FSDP2's copies (source `torch-260-fsdp2-collectives`): after every all-gather the copy-out
   (split_with_sizes_copy) reads the bf16 all-gather output and writes each unsharded parameter,
   2 + 2 = 4 bytes; before every reduce-scatter the copy-in (_chunk_cat into a reduce_dtype
   buffer) reads the bf16 gradient and writes fp32, 2 + 4 = 6 bytes; both on the current
   (compute) stream. Without PP torchtitan reshards the blocks after forward, so ZeRO-3 gathers
   twice per micro-batch (forward, backward) and reduce-scatters once: 2 x 4 + 6 = 14 bytes per
   unsharded local parameter. (The last block and the root module, which FSDP2 keeps gathered
   from forward to backward, are gathered once; the step model counts two gathers for every
   parameter, 4.5% high for Llama 3 8B: an upper bound.)

Llama 3 8B holds 8,030,261,248 parameters: embedding and output 2 x 128,256 x 4,096; per layer
q and o 2 x 4,096^2, k and v 2 x 4,096 x 1,024, the MLP 3 x 4,096 x 14,336, two norms of 4,096;
32 layers; a final norm of 4,096."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from scalemodel.analytic.planner import search
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.validate import row_problem
from scalemodel.specs import get_gpu
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

CSV = Path(__file__).resolve().parents[2] / "validation" / "published_runs_2026.csv"

FP32, BF16 = 4, 2
ADAMW_FOREACH = ((FP32 + FP32)  # params *= 1 - lr wd
                 + (2 * FP32 + FP32)  # exp_avg.lerp_(grad)
                 + (FP32 + FP32)  # exp_avg_sq *= beta2
                 + (2 * FP32 + FP32)  # exp_avg_sq.addcmul_(grad, grad), grad read once
                 + (FP32 + FP32)  # sqrt into a new list
                 + (FP32 + FP32)  # /= bias-correction root
                 + (FP32 + FP32)  # += eps
                 + (3 * FP32 + FP32))  # params.addcdiv_(exp_avg, denom)
CLIP_FOREACH = FP32 + (FP32 + FP32)  # _foreach_norm, then _foreach_mul_ in place
GATHER_OUT = BF16 + BF16  # split_with_sizes_copy: all-gather output -> unsharded parameter
REDUCE_IN = BF16 + FP32  # _chunk_cat: bf16 gradient -> fp32 reduce-scatter input

H, KV, FFN, VOCAB, LAYERS = 4096, 1024, 14336, 128256, 32
LLAMA3_8B_PARAMS = (2 * VOCAB * H + LAYERS * (2 * H * H + 2 * H * KV + 3 * H * FFN + 2 * H) + H)


def _row(row_id: str) -> dict[str, str]:
    return {r["id"]: r for r in csv.DictReader(io.StringIO(CSV.read_text()))}[row_id]


def test_the_byte_counts_are_the_profiles():
    assert ADAMW_FOREACH == 80 and CLIP_FOREACH == 12
    fw = get_framework("torchtitan-2024-12")
    # keyed by optimizer id (numerics.toml [optimizers]): torchtitan's AdamW is "adam"
    assert fw.get("optimizer_step_bytes") == {"adam": ADAMW_FOREACH + CLIP_FOREACH} == {"adam": 92}
    assert fw.get("fsdp_copy_bytes") == {"gather_out": GATHER_OUT, "reduce_in": REDUCE_IN}
    for key in ("optimizer_step_bytes", "fsdp_copy_bytes"):
        assert fw.sources[key] in all_sources()
    assert {"torchtitan-9dec370-optimizer", "torch-260-adamw-foreach",
            "torch-260-fsdp2-collectives"} <= set(all_sources())
    # only the profile whose torch was read carries them: the 2025 torchtitan preset defaults to
    # the fused AdamW, which the planner's one pass already describes
    for other in ("torchtitan", "megatron-core"):
        assert get_framework(other).get("optimizer_step_bytes") is None
        assert get_framework(other).get("fsdp_copy_bytes") is None


def test_llama3_8b_parameter_count():
    assert LLAMA3_8B_PARAMS == 8_030_261_248


def test_fsdp8_row_prices_both_passes():
    """Table 1, FSDP eager, 8 GPUs, local batch 2 (one micro-batch of 2 sequences)."""
    p = row_problem(_row("titan-h100-8b-fsdp8-eager"))
    v = search(p.job, p.cluster, p.stated, top=0).best.values
    hbm = get_gpu("h100-sxm-hbm2e-500w").hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    assert hbm == pytest.approx(0.8 * 2.4e12)
    assert v.microbatches == 1
    # optimizer: the 1/8 shard of every parameter, 92 bytes each
    assert v.optimizer_s == pytest.approx(LLAMA3_8B_PARAMS / 8 * 92 / hbm, rel=1e-6)
    assert v.optimizer_s == pytest.approx(0.0481, abs=1e-4)  # 1.0e9 x 92 B / 1.92 TB/s
    # FSDP2 copies: every unsharded parameter, two gathers and one reduce-scatter
    assert v.fsdp_copy_s == pytest.approx(
        LLAMA3_8B_PARAMS * (2 * GATHER_OUT + REDUCE_IN) / hbm, rel=1e-6)
    assert v.fsdp_copy_s == pytest.approx(0.0586, abs=1e-4)


def test_pipeline_rows_gather_and_reduce_once_per_step():
    """The 405B 1F1B row keeps its stages' parameters gathered (pp_reshard_after_forward =
    false): one copy-out and one copy-in per step, spread over its 8 micro-batches."""
    p = row_problem(_row("titan-h100-405b-3d-1f1b"))
    v = search(p.job, p.cluster, p.stated, top=0).best.values
    one_pass = v.fsdp_copy_s / (GATHER_OUT + REDUCE_IN)  # seconds per byte per parameter
    assert v.microbatches == 8 and v.fsdp_copy_s > 0
    # what ZeRO-3 without PP would charge: 8 micro-batches x (2 gathers + 1 reduce)
    assert v.fsdp_copy_s < 8 * (2 * GATHER_OUT + REDUCE_IN) * one_pass / 10


def test_no_copies_without_a_sharded_group():
    """TP 8 alone (dp x cp = 1): torchtitan applies no fully_shard, nothing is gathered."""
    p = row_problem(_row("titan-h100-8b-fsdp8-eager"))
    v = search(p.job, p.cluster, dict(p.stated, tp=8, dp=1, zero=0), top=0).best.values
    assert v.fsdp_copy_s == 0


# 3. FSDP2's root group (sources `torch-260-fsdp2-root`, `torchtitan-9dec370-fsdp-pp`):
#    torchtitan's last fully_shard(model) makes the embedding, the final norm and the output head
#    one group. Its reduce-scatter hangs on inputs that require grad, and the root's input is the
#    token ids, so it runs in the final callback after the whole backward; it is gathered first in
#    the forward and kept gathered for the backward. Exposed per micro-batch: the root's share f of
#    the forward all-gather and of the reduce-scatter, where the generic rule leaves only the last
#    160 MB bucket. Llama 3 8B: f = (2 x 128,256 x 4,096 + 4,096) / 8,030,261,248.
ROOT_PARAMS = 2 * VOCAB * H + H


def test_root_group_share_and_exposure():
    from scalemodel.analytic.step.comm import collective_time

    f = ROOT_PARAMS / LLAMA3_8B_PARAMS
    assert ROOT_PARAMS == 1_050_677_248 and f == pytest.approx(0.1308, abs=1e-4)
    p = row_problem(_row("titan-h100-8b-fsdp8-eager"))
    v = search(p.job, p.cluster, p.stated, top=0).best.values
    # the two collectives of the 8-GPU group (one NVLink domain), as the step model sizes them:
    # bf16 parameters gathered, fp32 gradients reduce-scattered
    ag = float(collective_time("all_gather", LLAMA3_8B_PARAMS * BF16, 8, 8, p.cluster))
    rs = float(collective_time("reduce_scatter", LLAMA3_8B_PARAMS * FP32, 8, 8, p.cluster))
    # the root is kept gathered for the backward, which gathers the other (1 - f) only
    assert v.dp_raw_s == pytest.approx((2 - f) * ag + rs, rel=1e-6)
    # both are far shorter than the forward and backward they overlap, so only the root is left
    assert v.dp_s == pytest.approx(f * (ag + rs), rel=1e-6)
    assert 0.010 < v.dp_s < 0.020  # about 15 ms at NVLink speed


def test_root_group_only_for_fsdp_without_pipeline():
    p = row_problem(_row("titan-h100-405b-3d-1f1b"))
    v = search(p.job, p.cluster, p.stated, top=0).best.values
    assert get_framework("torchtitan-2024-12").get("fsdp_root_group") is True
    assert get_framework("torchtitan").get("fsdp_root_group") is None
    # the PP row keeps the last-bucket rule: its exposure is not the root share of its traffic
    assert v.dp_s < 0.05 * v.dp_raw_s


def test_zero2_is_not_offered_at_9dec370():
    """ZeRO-2 (FSDP2 with parameters kept gathered) needs fsdp_reshard_after_forward, an option
    later than 9dec370: apply_fsdp there fixes reshard_after_forward per block (source
    torchtitan-9dec370-parallelisms), so the profile refuses the layout instead of pricing it."""
    from scalemodel.errors import BadInput

    p = row_problem(_row("titan-h100-8b-fsdp8-eager"))
    with pytest.raises(BadInput, match="offers no ZeRO-2"):
        search(p.job, p.cluster, dict(p.stated, zero=2), top=0)
