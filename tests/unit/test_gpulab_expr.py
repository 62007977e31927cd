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


@pytest.mark.parametrize("text", [
    "9 ** 9 ** 9",                      # would wrap silently in int64 arithmetic
    "2 ** 63", "3037000500 * 3037000500", "4611686018427387903 + 4611686018427387903 + 2",
    "-4611686018427387903 - 4611686018427387903 - 2", "1 << 62 << 1",
    "threadIdx.x * 4611686018427387903",  # overflows only for lanes 2 and up
    "3 ** 40", "-(2 ** 62) - 2 ** 62",  # 1.2e19; and -2**63, which cannot be negated
])
def test_int64_overflow_is_bad_input(text):
    with pytest.raises(BadInput, match="64-bit integer range"):
        parse(text, "--index").evaluate(ENV)


def test_largest_int64_values_still_evaluate():
    # 2**63 - 1 = 9,223,372,036,854,775,807 is the largest int64; 3037000499**2 just fits
    assert int(parse("2 ** 62 - 1 + 2 ** 62").evaluate(ENV)) == 2**63 - 1
    assert int(parse("3037000499 * 3037000499").evaluate(ENV)) == 3037000499**2
    assert int(parse("-(2 ** 62) + 1 - 2 ** 62").evaluate(ENV)) == -(2**63) + 1
    assert int(parse("3 ** 39").evaluate(ENV)) == 3**39  # 4.05e18, close to the limit
    assert int(parse("1 << 62").evaluate(ENV)) == 2**62
