"""The safe expression parser: CUDA names, C integer semantics, nothing else reachable."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.errors import BadInput
from scalemodel.sim.cuda_expr import parse

ENV = {"threadIdx.x": np.arange(8), "blockIdx.x": np.int64(2), "N": 10}


def test_arithmetic_and_c_semantics():
    assert parse("threadIdx.x % 2 == 0").evaluate(ENV).tolist() == [1, 0] * 4
    assert parse("-7 / 2").evaluate(ENV) == -3  # C truncation
    assert parse("-7 % 3").evaluate(ENV) == -1  # sign of the dividend
    assert parse("-7 // 2").evaluate(ENV) == -4  # floor division when asked for
    assert parse("threadIdx.x < 4 && blockIdx.x == 2").evaluate(ENV).tolist() == [1] * 4 + [0] * 4
    assert parse("!(threadIdx.x < 4) || 0").evaluate(ENV).tolist() == [0] * 4 + [1] * 4
    assert parse("threadIdx.x ^ 1").evaluate(ENV).tolist() == [1, 0, 3, 2, 5, 4, 7, 6]
    assert parse("max(threadIdx.x, 5) if N > 3 else 0").evaluate(ENV).tolist()[0] == 5
    assert parse("threadIdx.x != 3").evaluate(ENV).tolist()[3] == 0


@pytest.mark.parametrize("text", [
    "__import__('os')", "threadIdx.x.__class__", "open('f')", "threadIdx", "1.5 + threadIdx.x",
    "'a'", "[1, 2]", "lambda: 1", "threadIdx.w", "x.y", "(yield)", "a[0]", "print(1)",
    "threadIdx.x +", "", "f(x=1)", "_secret", "2 ** -1", "1 / 0", "1 << 99",
])
def test_rejected(text):
    with pytest.raises(BadInput):
        parse(text, "--predicate").evaluate(ENV | {"a": 1, "x": 1, "_secret": 1})


def test_unknown_name_lists_known():
    with pytest.raises(BadInput, match="unknown name 'M'"):
        parse("M + 1").evaluate(ENV)


def test_huge_power_does_not_hang():
    v = parse("9 ** 9 ** 9").evaluate(ENV)  # numpy int64 arithmetic wraps, it does not explode
    assert np.asarray(v).dtype == np.int64
