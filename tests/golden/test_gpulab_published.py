"""Golden values from published sources for the access analyzer and the launch model.

Sources (each test names its own):
* CUDA C++ Programming Guide, shared memory cc 5.x+: 32 banks of 4 bytes; a column of
  float tile[32][32] read by a warp is a 32-way conflict, tile[32][33] is conflict-free.
* Nsight Compute Profiling Guide / CUDA Best Practices Guide: a warp's aligned 4-byte contiguous
  access is 4 sectors, 8-byte 8, 16-byte 16; a stride of 32 B or more gives 32 sectors.
* CUDA Best Practices Guide (branching): threadIdx.x < 32 in a 64-thread block does not diverge;
  threadIdx.x % 2 diverges in every warp.
* Harris 2013 (NVIDIA blog, transpose): on Kepler K20c naive 55.3, tiled 97.6, padded 144.3 GB/s
  vs copy 136.1: the order naive < tiled < padded ~ copy must hold for our prediction.
* Harris 2007 (reduction): interleaved addressing has bank conflicts, sequential does not.
"""

from __future__ import annotations

from scalemodel.sim import simt


def test_transpose_tile_conflicts_programming_guide():
    tiled = simt.analyze(simt.get_kernel("transpose-tiled"), 4).instructions
    padded = simt.analyze(simt.get_kernel("transpose-padded"), 4).instructions
    assert tiled[2].space == "shared" and tiled[2].op == "load"
    assert tiled[2].conflict_degree == 32
    assert padded[2].conflict_degree == 1
    swz = simt.analyze(simt.get_kernel("transpose-swizzled"), 4).instructions
    assert swz[1].conflict_degree == 1 and swz[2].conflict_degree == 1


def test_sectors_per_request_ncu_guide():
    for size, sectors in ((4, 4), (8, 8), (16, 16)):
        i = simt.analyze(simt.strided_kernel(1, "global"), size).instructions[0]
        assert i.sectors_per_request == sectors
    assert simt.analyze(simt.strided_kernel(8, "global"), 4).instructions[0].sectors_per_request \
        == 32
    naive = simt.analyze(simt.get_kernel("transpose-naive"), 4).instructions
    assert naive[0].sectors_per_request == 4 and naive[1].sectors_per_request == 32


def test_divergence_best_practices():
    two = simt.Launch((1, 1, 1), (64, 1, 1))
    assert simt.divergence(["threadIdx.x < 32"], two).divergent_warps == 0
    assert simt.divergence(["threadIdx.x % 2 == 0"], two).divergent_warps == 2


def test_transpose_order_harris_2013():
    copy = simt.analyze(simt.get_kernel("copy"), 4)
    per_clk = 3.35e12 / 132 / 1.98e9  # H100 SXM HBM bytes per clock per SM (datasheet, clocks)
    frac = {k: simt.predicted_fraction_of_copy(simt.analyze(simt.get_kernel(k), 4), copy,
                                               per_clk)["fraction_of_copy"]
            for k in ("transpose-naive", "transpose-tiled", "transpose-padded")}
    assert frac["transpose-naive"] < frac["transpose-tiled"] < frac["transpose-padded"]
    assert frac["transpose-padded"] >= 0.85 and frac["transpose-naive"] < 0.5


def test_reduction_conflicts_harris_2007():
    inter = simt.analyze(simt.get_kernel("reduce-interleaved"), 4).instructions
    seq = simt.analyze(simt.get_kernel("reduce-sequential"), 4).instructions
    assert max(i.max_conflict_ways for i in inter if i.space == "shared") > 1
    assert max(i.max_conflict_ways for i in seq if i.space == "shared") == 1
