"""Warp access analyzer and divergence model: rules worked by hand in each test."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.errors import BadInput
from scalemodel.sim import simt


def one(stride: int, space: str, size: int) -> simt.InstructionStats:
    return simt.analyze(simt.strided_kernel(stride, space), size).instructions[0]


@settings(max_examples=40, deadline=None)
@given(stride=st.integers(1, 80), size=st.sampled_from([1, 2, 4, 8, 16]))
def test_global_sectors_match_hand_count(stride, size):
    # lane t reads bytes [t*stride*size, +size); count the 32-byte sectors by enumeration
    sectors = set()
    for t in range(32):
        a = t * stride * size
        sectors |= set(range(a // 32, (a + size - 1) // 32 + 1))
    i = one(stride, "global", size)
    assert i.requests == 1 and i.sectors_per_request == len(sectors)
    assert i.ideal_sectors_per_request == math.ceil(32 * size / 32)


@settings(max_examples=40, deadline=None)
@given(stride=st.integers(1, 128))
def test_shared_4byte_stride_conflicts_are_gcd(stride):
    # word t*stride sits in bank (t*stride) % 32: each bank used gets gcd(stride, 32) words
    i = one(stride, "shared", 4)
    assert i.wavefronts_per_request == math.gcd(stride, 32)
    assert i.conflict_degree == math.gcd(stride, 32)


def test_vector_widths_are_phased():
    # 8-byte: two half-warp phases of 128 B; 16-byte: four quarter-warp phases
    i8, i16 = one(1, "shared", 8), one(1, "shared", 16)
    assert (i8.wavefronts_per_request, i8.conflict_degree) == (2, 1)
    assert (i16.wavefronts_per_request, i16.conflict_degree) == (4, 1)
    # float2 at stride 2: each half-warp covers words {4t, 4t+1}: two words per used bank
    assert one(2, "shared", 8).conflict_degree == 2


def test_broadcast_and_misaligned():
    same = simt.custom_kernel("0", "shared", "load", (32,), (1,))
    assert simt.analyze(same, 4).instructions[0].wavefronts_per_request == 1
    mis = simt.custom_kernel("threadIdx.x + 1", "global", "load", (32,), (1,))
    g = simt.analyze(mis, 4).instructions[0]
    assert g.sectors_per_request == 5 and g.ideal_sectors_per_request == 4


def test_active_predicate_and_partial_warp():
    k = simt.custom_kernel("threadIdx.x", "global", "load", (48,), (1,), active="threadIdx.x % 2")
    i = simt.analyze(k, 4).instructions[0]
    assert i.requests == 2 and i.lanes == 24


def test_divergence_trap_cases():
    two = simt.Launch((1, 1, 1), (64, 1, 1))
    assert simt.divergence(["threadIdx.x < 32"], two).divergent_warps == 0
    r = simt.divergence(["threadIdx.x % 2"], two)
    assert (r.warps, r.divergent_warps, r.simt_efficiency) == (2, 2, 0.5)
    assert simt.divergence(["threadIdx.x / 32 % 2"], simt.Launch((1, 1, 1), (256, 1, 1))
                           ).divergent_warps == 0


def test_nested_and_loop_trips():
    two = simt.Launch((1, 1, 1), (64, 1, 1))
    # % 2 then % 4: paths (odd), (even, not mult of 4), (mult of 4) all present in every warp
    r = simt.divergence(["threadIdx.x % 2 == 0", "threadIdx.x % 4 == 0"], two)
    assert r.paths_per_warp == {3: 2}
    assert r.simt_efficiency == pytest.approx(32 / (32 * 3))
    # trips 1..4 over lanes: each warp runs 4, useful average 2.5 -> 0.625
    t = simt.divergence([], two, trips="threadIdx.x % 4 + 1")
    assert t.loop_simt_efficiency == pytest.approx(2.5 / 4) and t.loop_divergent_warps == 2


def test_builtin_kernels_and_bad_input():
    assert "transpose-swizzled" in simt.kernel_names()
    with pytest.raises(BadInput):
        simt.analyze(simt.get_kernel("transpose-naive"), 4, {"N": 1000})  # N % T != 0
    with pytest.raises(BadInput):
        simt.analyze(simt.get_kernel("transpose-swizzled"), 4, {"T": 24, "N": 96})
    with pytest.raises(BadInput):
        simt.get_kernel("transpose-fast")
    with pytest.raises(BadInput):
        simt.divergence(["threadIdx.x <"], simt.Launch((1, 1, 1), (64, 1, 1)))
    with pytest.raises(BadInput):
        simt.Launch((1, 1, 1), (2048, 1, 1)).check()


def test_kernel_file(tmp_path):
    f = tmp_path / "k.toml"
    f.write_text('[mine]\nblock = ["64"]\ngrid = ["4"]\n'
                 'ops = [{ array = "a", space = "global", op = "load", '
                 'index = "blockIdx.x * 64 + threadIdx.x * 2" }]\n')
    r = simt.analyze(simt.get_kernel("mine", str(f)), 4)
    assert r.instructions[0].sectors_per_request == 8
