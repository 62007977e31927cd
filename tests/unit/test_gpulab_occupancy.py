"""Occupancy engine: hand-derived cases (rules of NVIDIA's calculator) and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.analytic.occupancy import cc_ids, occupancy, occupancy_arrays, sm_limits
from scalemodel.errors import BadInput


def test_issue_example_cc90_by_hand():
    # cc 9.0, 256 threads, 64 regs, 16 KiB smem. By the calculator's rules:
    # warps/block = 8 -> warp cap 64/8 = 8; regs/warp = 64*32 = 2048 (already a multiple of 256),
    # per sub-partition 16384/2048 = 8 warps -> 32 warps/SM -> 4 blocks;
    # smem/block = ceil((16384 + 1024)/128)*128 = 17408 -> 233472 // 17408 = 13; block cap 32.
    r = occupancy(sm_limits("9.0"), 256, 64, 16384)
    assert r.block_limits["warps"] == 8
    assert r.block_limits["registers"] == 4
    assert r.block_limits["shared_memory"] == 13
    assert (r.active_blocks_per_sm, r.active_warps_per_sm, r.occupancy) == (4, 32, 0.5)
    assert r.limiter == "registers"


def test_register_granularity_by_hand():
    # 33 regs: 33*32 = 1056 -> rounded to 1280 per warp; 16384 // 1280 = 12 warps per
    # sub-partition -> 48 per SM -> 128-thread blocks (4 warps): 12 blocks, occupancy 0.75
    r = occupancy(sm_limits("8.0"), 128, 33, 0)
    assert r.block_limits["registers"] == 12
    assert r.occupancy == pytest.approx(0.75)


def test_reserved_smem_and_carveout_by_hand():
    # cc 8.0, 48 KiB dynamic: (49152 + 1024) rounded to 128 = 50176 per block.
    # Default carveout = 164 KiB: 167936 // 50176 = 3 blocks.
    # Carveout 25%: 0.25 * 167936 = 41984 -> next legal size 64 KiB, which holds no block, so the
    # SM uses the smallest legal size that holds one: 64 KiB -> 65536 // 50176 = 1.
    lim = sm_limits("8.0")
    assert occupancy(lim, 128, 0, 49152).block_limits["shared_memory"] == 3
    assert occupancy(lim, 128, 0, 49152, carveout=25).block_limits["shared_memory"] == 1
    # Carveout 50%: 83968 -> 100 KiB = 102400 -> 2 blocks
    assert occupancy(lim, 128, 0, 49152, carveout=50).block_limits["shared_memory"] == 2


def test_turing_and_ada_limits_by_hand():
    # cc 7.5: 1024 threads per SM = 32 warps; 16 blocks max; 32-thread blocks -> 16 blocks, 50%
    r = occupancy(sm_limits("7.5"), 32, 16, 0)
    assert (r.active_blocks_per_sm, r.occupancy, r.limiter) == (16, 0.5, "blocks")
    # cc 8.9: 48 warps, 24 blocks: 64-thread blocks -> min(48/2=24, 24) = 24 -> 48 warps, 100%
    r = occupancy(sm_limits("8.9"), 64, 32, 0)
    assert (r.active_blocks_per_sm, r.occupancy) == (24, 1.0)
    assert set(r.limiters) >= {"warps", "blocks"}


def test_cannot_launch_reports_zero_with_reason():
    # 1024 threads x 255 regs: 8192 regs per warp x 32 warps = 262144 > 65536 per block
    r = occupancy(sm_limits("9.0"), 1024, 255, 0)
    assert r.active_blocks_per_sm == 0 and r.occupancy == 0
    assert "registers" in r.reason


@pytest.mark.parametrize("kw", [dict(threads=1025, regs=32, smem=0),
                                dict(threads=0, regs=32, smem=0),
                                dict(threads=128, regs=256, smem=0),
                                dict(threads=128, regs=32, smem=232449),
                                dict(threads=128, regs=32, smem=0, carveout=101)])
def test_bad_input(kw):
    with pytest.raises(BadInput):
        occupancy(sm_limits("9.0"), **kw)


def test_unknown_cc():
    with pytest.raises(BadInput):
        sm_limits("6.1")
    assert sm_limits("sm_90").cc == "9.0" and sm_limits("sm_120").cc == "12.0"


@settings(max_examples=60, deadline=None)
@given(cc=st.sampled_from(["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"]),
       threads=st.integers(1, 1024), regs=st.integers(0, 254), smem=st.integers(0, 90000))
def test_more_resources_never_raise_occupancy(cc, threads, regs, smem):
    lim = sm_limits(cc)
    smem = min(smem, lim.max_smem_per_block_bytes - 1)
    base = occupancy_arrays(lim, threads, regs, smem)
    more_regs = occupancy_arrays(lim, threads, regs + 1, smem)
    more_smem = occupancy_arrays(lim, threads, regs, smem + 1)
    assert more_regs["blocks"][()] <= base["blocks"][()]
    assert more_smem["blocks"][()] <= base["blocks"][()]
    assert 0 <= base["occupancy"][()] <= 1
    assert base["active_warps"][()] <= lim.max_warps_per_sm
    one = occupancy(lim, threads, regs, smem)
    assert one.active_blocks_per_sm == base["blocks"][()]


def test_vectorised_matches_scalar_on_random_shapes():
    # 10,000 random shapes in one vectorised call; a sample of 300 re-computed one at a time by
    # occupancy(), whose derivation evaluates the calculator's formulas step by step (and
    # raises if a step disagrees with the arrays)
    lim = sm_limits("9.0")
    rng = np.random.default_rng(1)
    n = 10_000
    t, r, s = rng.integers(1, 1025, n), rng.integers(0, 256, n), rng.integers(0, 200_000, n)
    out = occupancy_arrays(lim, t, r, s)
    assert out["blocks"].shape == (n,)
    assert ((out["occupancy"] >= 0) & (out["occupancy"] <= 1)).all()
    checked = 0
    for i in rng.choice(n, 300, replace=False):
        try:
            one = occupancy(lim, int(t[i]), int(r[i]), int(s[i]))
        except BadInput:  # over a per-block limit: the arrays must say it cannot launch
            assert out["blocks"][i] == 0
            continue
        assert one.active_blocks_per_sm == out["blocks"][i]
        assert one.active_warps_per_sm == out["active_warps"][i]
        assert one.occupancy == pytest.approx(float(out["occupancy"][i]))
        checked += 1
    assert checked > 100


def test_compute_capabilities_covered():
    assert set(cc_ids()) == {"7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "12.0"}
