"""torch's context_parallel as the Dec-2024 torchtitan CP rows ran it (issue 16, session 17).

Source: torch/distributed/tensor/experimental/_attention.py. Three stored texts were read
(source `torch-cp-attention`): pytorch/pytorch 0123248a (2025), one from the weeks of the runs'
torch 1963fc8 (it has `set_rotate_method`, pytorch/pytorch PR #142093 of 2024-12-05/09, and a
`PRE_ALL_GATHER` method that later texts drop; the code index serves it without naming its
repository), and ROCm/pytorch 10b22ea5's merge-conflict copy of an older upstream text. The facts
used here read the same in all three:

* `_ContextParallelOptions` (0123248a lines 63-65): `convert_to_f32 = True`,
  `enable_load_balance = True`, `rotate_method = _RotateMethod.ALL_GATHER`. In the Dec-2024 text
  `context_parallel()` switches load balance off only for `PRE_ALL_GATHER`; torchtitan 9dec370's
  `create_context_parallel_ctx` calls `set_rotate_method("allgather")` (its default) and nothing
  else, so the runs were load balanced.
* `_RoundRobinLoadBalancer.shard`: rank r keeps chunks r and 2cp-1-r of 2cp.
* `_templated_ring_attention`: step 0 one call over both local chunks with `is_causal=True`;
  step i > 0 (`_is_causal_behavior`: NOT_IS_CAUSAL under load balance) the full local query
  against the first half of the K/V received when `i <= rank`, else the second half of the query
  against the whole K/V. Without load balance (`_SequentialSharder`) a step whose K/V comes from a
  later rank is skipped and the others run the whole local block.
* `_templated_ring_attention_backward`: the same branches, dK/dV sent on by a second rotater fixed
  to `_RotateMethod.ALL_TO_ALL` after each of the cp calls; dq, dk, dv accumulated in fp32.

The counts below are derived here from those rules on a small sequence (each pair of query and key
positions that a call evaluates), not from the planner. They show that the planner's split
(attention.cp_blocks) is the source's, and what an unbalanced ring would have cost.
"""

import math

import numpy as np
import pytest

from scalemodel.analytic.step.attention import attention_efficiency, cp_blocks
from scalemodel.specs import get_gpu
from scalemodel.specs.frameworks import get_framework


def _chunks_of(rank: int, cp: int, balanced: bool) -> list[int]:
    # _RoundRobinLoadBalancer: chunks r and 2cp-1-r of 2cp; _SequentialSharder: chunk r of cp
    return [rank, 2 * cp - 1 - rank] if balanced else [rank]


def _positions(chunks: list[int], size: int) -> list[int]:
    return [c * size + j for c in chunks for j in range(size)]


def _calls(rank: int, cp: int, balanced: bool, size: int) -> list[tuple[list[int], list[int], bool]]:
    """(query positions, key positions, causal) of each call rank ``rank`` makes, as
    _templated_ring_attention builds them; ``size`` tokens per chunk."""
    q = _positions(_chunks_of(rank, cp, balanced), size)
    out = []
    for i in range(cp):
        src = (rank - i) % cp  # the all-gather rotater hands step i the K/V of rank - i
        k = _positions(_chunks_of(src, cp, balanced), size)
        if i == 0:
            out.append((q, k, True))
        elif balanced:
            half = len(q) // 2
            if i <= rank:
                out.append((q, k[:half], False))
            else:
                out.append((q[half:], k, False))
        elif src < rank:
            out.append((q, k, False))
        # else: SKIP
    return out


def _pairs(call: tuple[list[int], list[int], bool]) -> set[tuple[int, int]]:
    q, k, causal = call
    # a causal call masks by local index (both local chunks concatenated in order)
    return {(qp, kp) for a, qp in enumerate(q) for b, kp in enumerate(k) if not causal or b <= a}


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_balanced_ring_covers_the_causal_mask_once_with_equal_work(cp):
    size = 6  # tokens per chunk (2cp chunks): S = 12 cp
    S = 2 * cp * size
    needed = {(qp, kp) for qp in range(S) for kp in range(qp + 1)}
    seen: list[tuple[int, int]] = []
    work = []
    for r in range(cp):
        calls = _calls(r, cp, True, size)
        assert len(calls) == cp  # one call per step, none skipped
        got = [p for c in calls for p in _pairs(c)]
        seen += got
        work.append(len(got))
        # rank r's own query rows are exactly the causal rows of its two chunks
        mine = set(_positions(_chunks_of(r, cp, True), size))
        assert set(got) == {p for p in needed if p[0] in mine}
    assert sorted(seen) == sorted(needed)  # every needed pair once, nothing wasted
    L = 2 * size  # local tokens S / cp
    # each rank: the causal call L (L + 1) / 2, then cp - 1 unmasked half-blocks of L x L / 2
    assert work == [L * (L + 1) // 2 + (cp - 1) * L * L // 2] * cp


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_unbalanced_ring_last_rank_carries_almost_twice(cp):
    size = 8
    work = [sum(len(_pairs(c)) for c in _calls(r, cp, False, size)) for r in range(cp)]
    # rank cp-1 runs its causal block and cp - 1 whole blocks of L x L (L = size here)
    assert work[-1] == size * (size + 1) // 2 + (cp - 1) * size * size
    balanced = (cp * size) * (cp * size + 1) // 2 / cp  # the mean
    # the slowest rank against a balanced one: (2cp - 1) / cp for large chunks
    assert work[-1] / balanced == pytest.approx((2 * cp - 1) / cp, rel=2 / size)


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_planner_split_is_the_source_split(cp):
    # cp_blocks gives the diagonal call 1/cp of a rank's causal FLOPs and each of the cp - 1
    # others (1 - 1/cp) / (cp - 1) = 1/cp: the counts above in the limit of long chunks
    # (L^2 / 2 each, cp L^2 / 2 in all); divide the efficiencies back out to read the split
    g = get_gpu("h100-sxm-hbm2e-500w")
    S, flops, peak = 32768.0 * cp, 1.0e15, g.peak_flop_per_s("bf16")
    d_f, o_f, d_b, o_b = cp_blocks(flops, S, cp, peak, g)
    d_share = d_f * attention_efficiency(g, S / cp) * peak / flops
    o_share = o_f * attention_efficiency(g, S / cp / math.sqrt(2), causal=False) * peak / flops
    assert float(d_share) == pytest.approx(1 / cp)
    assert float(o_share) == pytest.approx(1 / cp)
    assert float(d_share + (cp - 1) * o_share) == pytest.approx(1.0)
    # the backward runs the same calls (same branches in _templated_ring_attention_backward)
    d_bs = d_b * attention_efficiency(g, S / cp, backward=True) * peak / flops / 2.5
    assert float(d_bs) == pytest.approx(1 / cp)
    assert np.isfinite(o_b)


def test_profile_reads_the_defaults_the_runs_kept():
    fw = get_framework("torchtitan-2024-12")
    assert fw.get("cp_exchange") == "all_gather"  # rotate_method = ALL_GATHER, not overridden
    assert fw.get("cp_grad_bytes") == 4  # convert_to_f32: dK/dV sent as fp32
    assert fw.get("cp_kv_heads") == "query"  # torchtitan's repeat_kv before SDPA
    assert fw.attention_for("hopper")[0] == "flash"  # sdpa_kernel([FLASH, EFFICIENT])
    assert fw.sources["cp_exchange"] == "torchtitan-9dec370-cp"
    assert fw.sources["cp_grad_bytes"] == "torch-cp-attention"


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_unbalanced_split_prices_the_last_rank(cp):
    # cp_load_balance false: the last rank's cp - 1 whole blocks of S/cp x S/cp, each 2/cp of the
    # balanced rank's causal FLOPs (L^2 against cp L^2 / 2), read at length S/cp; in all
    # 1/cp + (cp - 1) 2/cp = (2cp - 1)/cp, the count derived above
    g = get_gpu("h100-sxm-hbm2e-500w")
    S, flops, peak = 32768.0 * cp, 1.0e15, g.peak_flop_per_s("bf16")
    d_f, o_f, _, o_b = cp_blocks(flops, S, cp, peak, g, balanced=False)
    o_share = o_f * attention_efficiency(g, S / cp, causal=False) * peak / flops
    d_share = d_f * attention_efficiency(g, S / cp) * peak / flops
    assert float(o_share) == pytest.approx(2 / cp)
    assert float(d_share + (cp - 1) * o_share) == pytest.approx((2 * cp - 1) / cp)
    ob_share = o_b * attention_efficiency(g, S / cp, causal=False, backward=True) * peak / flops
    assert float(ob_share) == pytest.approx(2.5 * 2 / cp)


def test_profile_states_the_load_balance_it_ran():
    fw = get_framework("torchtitan-2024-12")
    assert fw.get("cp_load_balance") is True
    assert fw.sources["cp_load_balance"] == "torch-cp-attention"
