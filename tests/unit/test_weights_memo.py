"""weight_bytes is remembered per (spec, byte width): the remembered answer is the fresh one, and
a spec that cannot be hashed is still priced."""

from __future__ import annotations

from dataclasses import replace

from scalemodel.analytic import weights as w
from scalemodel.specs import get_model


def test_remembered_equals_fresh_and_is_reused():
    m = get_model("validation/serving_models/llama-3.1-70b-instruct-w8a8.json")
    w._weight_bytes_remembered.cache_clear()
    a = w.weight_bytes(m, 2.0)
    assert a == w._weight_bytes(m, 2.0)
    assert w.weight_bytes(m, 2.0) is a  # the second call reads the remembered object
    assert w._weight_bytes_remembered.cache_info().hits == 1
    # another byte width is another key: the modules left unquantized cost half as much
    assert w.weight_bytes(m, 1.0) != a


def test_unhashable_spec_is_priced_afresh():
    m = get_model("llama-3-8b")

    class Unhashable(type(m)):  # type: ignore[misc]
        __hash__ = None  # type: ignore[assignment]

    u = Unhashable(**{f: getattr(m, f) for f in m.__dataclass_fields__})
    assert w.weight_bytes(u, 2.0) == w._weight_bytes(replace(m), 2.0)
