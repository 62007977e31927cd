"""The derivation builder evaluates formulas safely and checks itself."""

import pytest

from scalemodel.derive import Derivation, evaluate


def test_calc_evaluates_and_substitutes():
    d = Derivation()
    d.given("layers", "L", 80, "1")
    d.given("heads", "h", 8, "1")
    v = d.calc("product", "x", "2 * L * h", "1")
    assert v == 1280
    step = d.steps[-1]
    assert step.substituted == "2 * 80 * 8"
    assert step.formula == "2 * L * h"


def test_reusing_a_symbol_substitutes_the_old_value():
    d = Derivation()
    d.given("a", "F", 10, "1")
    d.calc("half", "F", "F / 2", "1")
    assert d.steps[-1].substituted == "10 / 2"
    assert d["F"] == 5


def test_check_catches_drift():
    d = Derivation()
    d.given("x", "x", 3, "1")
    with pytest.raises(AssertionError):
        d.calc("double", "y", "2 * x", "1", check=7)


@pytest.mark.parametrize("bad", ["__import__('os')", "x.real", "[1, 2]", "open('f')",
                                 "lambda: 1", "x if x else 1"])
def test_evaluator_refuses_anything_but_arithmetic(bad):
    with pytest.raises((ValueError, KeyError)):
        evaluate(bad, {"x": 1})


def test_functions_allowed():
    assert evaluate("ceil(7 / 2) + max(1, 3) + floor(2.5) + log2(8)", {}) == 4 + 3 + 2 + 3
