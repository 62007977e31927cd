"""Traffic per parallelism strategy: one implementation (analytic/traffic.py step_traffic) that
comm traffic, plan train, the parallelism-traffic and fabric-map answers and the drills read."""

import json

import pytest

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.network_choice import decide
from scalemodel.analytic.step.comm import ranks_per_node
from scalemodel.analytic.traffic import _tier, layout_traffic
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_model


def _lt(mid, lay, **kw):
    return layout_traffic(get_model(mid), lay, **({"seq_len": 4096, "global_batch": 1024,
                                                   "intra": "nvlink4", "gpus_per_node": 8}
                                                  | kw))


def test_tiers_follow_megatron_rank_order():
    # TP8 is 8 consecutive ranks: one 8-GPU node. PP stages are tp x dp = 128 ranks apart and DP
    # replicas 8 apart: one member per node, the NICs.
    r = _lt("llama-3-70b", TrainLayout(tp=8, pp=4, dp=16, zero=1))
    tiers = {s.name: s.tier for s in r.rows}
    assert tiers == {"TP": "scale-up", "PP": "scale-out", "DP": "scale-out"}
    assert not r.get("TP").overlappable and r.get("DP").overlappable
    # a group of 16 consecutive ranks on 8-GPU nodes spans two nodes, 8 per node
    assert ranks_per_node(1, 16, 8) == 16 // 2 and _tier(8, 16) == "scale-up+scale-out"
    assert ranks_per_node(8, 8, 8) == 1 and _tier(1, 8) == "scale-out"


def test_zero1_sends_three_quarters_of_ddp():
    # DDP all-reduces the fp32 gradients: 2 (n-1)/n x 4 P bytes per GPU. ZeRO-1 reduce-scatters
    # them, (n-1)/n x 4 P, and all-gathers the bf16 parameters, (n-1)/n x 2 P: 6 / 8 of DDP.
    per = {z: _lt("llama-3-8b", TrainLayout(tp=1, dp=8, zero=z), global_batch=64).get("DP")
           for z in (0, 1)}
    assert per[1].bytes_per_step == pytest.approx(0.75 * per[0].bytes_per_step, rel=1e-12)
    assert per[0].calls_per_step == 1 and per[1].calls_per_step == 2


def test_moe_gets_an_all_to_all():
    r = _lt("mixtral-8x7b", TrainLayout(tp=2, dp=8, ep=8, zero=1), global_batch=64)
    assert r.get("EP").collective.startswith("all-to-all")
    # 8 experts over the 8 DP replicas, 2 ranks apart: 4 per 8-GPU node, two nodes
    assert r.get("EP").tier == "scale-up+scale-out"


def test_bad_layouts():
    with pytest.raises(BadInput, match="global batch"):
        _lt("llama-3-70b", TrainLayout(dp=3))
    with pytest.raises(BadInput, match="no experts"):
        _lt("llama-3-70b", TrainLayout(ep=2, dp=2), global_batch=8)
    with pytest.raises(BadInput, match="--intra pcie5"):
        _lt("llama-3-70b", TrainLayout(dp=2), intra="pcie5")


def test_answers_read_the_rows_comm_traffic_lists(capsys):
    # the same layout, job and fabric: the answers' rows are comm traffic's (and so plan
    # train's, tests/unit/test_layout_contract.py)
    from scalemodel.questions import fabric_map, parallelism_traffic

    assert main(["comm", "traffic", "--model", "llama-3-70b", "--seq-len", "4096",
                 "--global-batch", "1024", "--layout", "tp=8,pp=4,dp=16,zero=1", "--json"]) == 0
    tool = json.loads(capsys.readouterr()[0])
    for q in (parallelism_traffic, fabric_map):
        d = q.build({}).data["traffic"]
        assert d["strategies"] == tool["strategies"], q.__name__
        assert d["step_time_s"] == tool["step_time_s"]


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
