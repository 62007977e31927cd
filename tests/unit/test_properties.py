"""Invariants of the memory and KV models (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.analytic.kv import kv_report
from scalemodel.analytic.memory import static_model, training_bytes
from scalemodel.specs import get_model

MODELS = ["llama-2-7b", "llama-3-70b", "mixtral-8x7b", "deepseek-v3", "gpt3-175b"]
SM = {m: static_model(get_model(m)) for m in MODELS}

layouts = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "tp": st.sampled_from([1, 2, 4, 8]),
    "pp": st.sampled_from([1, 2, 4]),
    "dp": st.integers(1, 64),
    "zero": st.integers(0, 3),
    "rc": st.integers(0, 2),
    "mb": st.integers(1, 8),
    "seq": st.sampled_from([512, 1024, 2048, 4096, 8192]),
})


def total(d, **over):
    d = d | over
    return float(training_bytes(SM[d["model"]], tp=d["tp"], pp=d["pp"], dp=d["dp"],
                                zero=d["zero"], rc=d["rc"], micro_batch=d["mb"],
                                seq_len=d["seq"])["total"])


@settings(max_examples=150, deadline=None)
@given(layouts)
def test_memory_monotone_in_batch_and_sequence(d):
    assert total(d, mb=d["mb"] + 1) >= total(d)
    assert total(d, seq=d["seq"] * 2) >= total(d)


@settings(max_examples=150, deadline=None)
@given(layouts)
def test_higher_zero_stage_never_costs_more(d):
    for z in range(3):
        assert total(d, zero=z + 1) <= total(d, zero=z) * (1 + 1e-12) or d["dp"] == 1


@settings(max_examples=150, deadline=None)
@given(layouts)
def test_more_recompute_never_costs_more(d):
    assert total(d, rc=2) <= total(d, rc=1) <= total(d, rc=0)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 512), st.sampled_from([128, 4096, 32768]))
def test_kv_per_token_independent_of_batch(model, batch, context):
    m = get_model(model)
    a = kv_report(m, batch=1, context=context)
    b = kv_report(m, batch=batch, context=context)
    assert a.kv_bytes_per_token == b.kv_bytes_per_token
    assert b.kv_bytes_total == a.kv_bytes_total * batch
