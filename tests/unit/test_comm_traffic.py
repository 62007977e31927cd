"""Traffic per parallelism strategy."""

import pytest

from scalemodel.analytic.collectives import make_fabric
from scalemodel.analytic.network_choice import decide
from scalemodel.analytic.traffic import TrainLayout, placement, traffic
from scalemodel.errors import BadInput
from scalemodel.specs import get_model

FAB = make_fabric("nvlink4", "ndr-400")


def _row(r, prefix):
    return next(s for s in r.strategies if s.name.startswith(prefix))


def test_tp_bytes_are_one_hidden_state_and_four_calls_per_layer():
    m = get_model("llama-3-70b")
    lay = TrainLayout(tp=8, pp=4, dp=16, seq_len=4096, global_batch=1024)
    r = traffic(m, lay, FAB)
    tp = _row(r, "TP")
    # derivation: b x s x h x 2 bytes = 1 x 4096 x 8192 x 2; 4 calls x 20 layers x 64 micro-batches
    assert tp.bytes_per_call == 1 * 4096 * 8192 * 2
    assert tp.calls_per_step == 4 * 20 * 64
    assert tp.tier == "scale-up" and not tp.overlappable
    assert _row(r, "PP").tier == "scale-out" and _row(r, "DP").tier == "scale-out"


def test_zero_stages_keep_the_gradient_bytes():
    m = get_model("llama-3-8b")
    per = {z: traffic(m, TrainLayout(tp=1, dp=8, zero=z, global_batch=64), FAB)
           for z in (0, 1)}
    ar = _row(per[0], "DP").bytes_per_step
    rs = _row(per[1], "DP: gradient reduce-scatter").bytes_per_step
    assert ar == pytest.approx(rs, rel=1e-3)


def test_moe_gets_an_all_to_all_and_tp16_spans_nodes():
    r = traffic(get_model("mixtral-8x7b"), TrainLayout(tp=2, dp=8, ep=8, global_batch=64), FAB)
    assert _row(r, "EP").collective == "all-to-all"
    assert placement(16, 1, 8) == (8, "scale-up+scale-out")
    assert placement(8, 8, 8) == (1, "scale-out")


def test_bad_layouts():
    m = get_model("llama-3-70b")
    with pytest.raises(BadInput, match="global-batch"):
        traffic(m, TrainLayout(dp=3, global_batch=1024), FAB)
    with pytest.raises(BadInput, match="dense"):
        traffic(m, TrainLayout(ep=2, dp=2, global_batch=8), FAB)


def test_roce_ib_flips_are_real():
    d = decide({})
    for f in d.flips:
        if " = " in f:
            k, v = f.split(" (")[0].split(" = ")
            assert decide({k: v}).recommendation != d.recommendation
        else:
            k, op, v = f.split()
            assert decide({k: float(v)}).recommendation != d.recommendation
    with pytest.raises(BadInput, match="ops"):
        decide({"ops": "carrier pigeons"})



def test_every_cited_source_exists():
    import re
    from pathlib import Path

    from scalemodel.specs.sources import all_sources

    known = set(all_sources())
    data = Path(__file__).resolve().parents[2] / "src/scalemodel/specs/data"
    keys = set()
    for name in ("collectives.toml", "roce_ib.toml"):
        keys |= set(re.findall(r'source = "([^"]+)"', (data / name).read_text()))
    assert keys and keys <= known, keys - known
    # traffic rows cite by key; an unknown key would come back unchanged (no title, no space)
    m = get_model("mixtral-8x7b")
    for z in (0, 1, 3):
        r = traffic(m, TrainLayout(tp=2, pp=2, cp=2, dp=4, ep=2, zero=z, global_batch=64), FAB)
        assert all(" " in s.source for s in r.strategies)
