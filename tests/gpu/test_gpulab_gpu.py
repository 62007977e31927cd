"""On a real GPU (CuPy): the transposes against copy, as Harris (2013) measured them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_transposes_vs_copy_on_gpu():
    pytest.importorskip("cupy")
    from scalemodel.live.cuda_bench import run_lab

    res = run_lab(n=4096, reps=20)
    t = res["transpose"]
    assert t["transpose_padded"]["fraction_of_copy"] >= 0.85
    assert t["transpose_naive"]["fraction_of_copy"] < 0.6
    lat = res["latency"]
    assert lat["shared"]["cycles"] < lat["l2"]["cycles"] < lat["dram"]["cycles"]
