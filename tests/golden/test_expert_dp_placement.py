"""Where the expert data-parallel group sits (issue 16, session 18: smaller-EP picks).

The expert gradients are reduced (and, under ZeRO, the expert weights gathered) over the ranks
that hold the same expert shard. Megatron-Core numbers those ranks with a mixed-radix rank whose
digits run in the order of its ``order`` string, the first digit fastest:

* core_v0.16.0 (3bec9aa9) megatron/core/parallel_state.py: the expert grid is
  ``RankGenerator(tp=etp, ep=ep, dp=expert_dp, pp=pp, cp=1, order="tp-cp-ep-dp-pp")`` (lines
  798-806), and EXPERT_DATA_PARALLEL_GROUP comes from its ``get_ranks('dp')`` (line 1270);
  ``generate_masked_orthogonal_rank_groups`` gives a group the ranks whose other digits agree.
* core_r0.8.0 (baf94af3): one grid of order tp-cp-ep-dp-pp with the DP digit split into ep x
  dp / ep (``order_w_ep``, lines 256-268); DATA_MODULO_EXPERT_PARALLEL_GROUP is
  ``get_ranks('dp', independent_ep=True)`` (lines 702-708).

So the group's members are (size of every faster digit) apart: etp x ep under core_v0.16.0,
tp x cp x ep under core_r0.8.0. The replay below numbers the ranks that way and counts the
members that share one 8-GPU node; the planner must count the same. Before this session the
planner used stride tp whenever etp = tp, which put an EP8 layout's expert group (one member a
node) on NVLink.
"""

from itertools import product
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import search
from scalemodel.analytic.step.comm import collective_time, ranks_per_node
from scalemodel.analytic.step.config import profile_value
from scalemodel.analytic.step.data_parallel import expert_dp_stride
from scalemodel.analytic.validate import read_rows, row_problem

NODE = 8


def _group_of_rank0(sizes: list[int], varying: int) -> list[int]:
    """Ranks of the group through rank 0 whose digit ``varying`` runs over its range, the
    others held at 0 (digit i has weight prod(sizes[:i]), the first digit fastest)."""
    weight = int(np.prod(sizes[:varying]))
    return [d * weight for d in range(sizes[varying])]


def _members_in_node(ranks: list[int]) -> int:
    return sum(1 for r in ranks if r // NODE == ranks[0] // NODE)


@pytest.mark.parametrize(("etp", "ep", "edp"), list(product((1, 2), (1, 2, 4, 8, 16), (2, 4, 8))))
def test_core_v0_16_expert_grid(etp, ep, edp):
    # expert grid digits: tp (etp), cp (1), ep, dp (edp), pp (1)
    members = _members_in_node(_group_of_rank0([etp, 1, ep, edp, 1], 3))
    # the planner's candidate: folding (etp < tp) with tp 2, or experts split like the MLP
    for tp in {etp, 2 * etp}:
        c = SimpleNamespace(tp=np.array(tp), etp=np.array(etp), ep=np.array(ep), cp=np.array(1))
        got = ranks_per_node(expert_dp_stride(c), edp, NODE)
        assert float(got) == members, (tp, etp, ep, edp)


@pytest.mark.parametrize(("tp", "ep", "edp"), list(product((1, 2, 4), (2, 4, 8), (2, 4))))
def test_core_r0_8_dp_modulo_ep(tp, ep, edp):
    # one grid: tp, cp (1), ep, dp / ep, pp; the experts split like the MLP (etp = tp)
    members = _members_in_node(_group_of_rank0([tp, 1, ep, edp, 1], 3))
    c = SimpleNamespace(tp=np.array(tp), etp=np.array(tp), ep=np.array(ep), cp=np.array(1))
    assert float(ranks_per_node(expert_dp_stride(c), edp, NODE)) == members


def test_without_ep_the_group_is_the_dense_one():
    # ep 1: the experts are replicated like the dense weights, over dp x cp at stride tp
    c = SimpleNamespace(tp=np.array(2), etp=np.array(2), ep=np.array(1), cp=np.array(1))
    assert float(expert_dp_stride(c)) == 2.0


def test_ep8_expert_gradients_cross_the_network():
    # nemo-qwen3-30b-a3b-h100 (16 H100, two DGX nodes) at EP8 TP1 DP16, ZeRO-1, micro-batch 1:
    # the expert group is ranks {r, r + 8}, one a node, so the once-a-step reduce-scatter of the
    # expert gradients and the all-gather of the expert weights go over the NICs. Qwen3-30B-A3B:
    # 48 layers x 128 experts x 3 x 2048 x 768 = 28.99e9 expert parameters, 3.62e9 on a rank at
    # EP8. The raw DP time is then at least what the two network collectives of that size take.
    text = (Path(__file__).parents[2] / "validation" / "training_runs.csv").read_text()
    p = row_problem([r for r in read_rows(text) if r["id"] == "nemo-qwen3-30b-a3b-h100"][0])
    lay = {"tp": 1, "pp": 1, "dp": 16, "cp": 1, "ep": 8, "etp": 1, "zero": 2, "vpp": 1,
           "micro_batch": 2, "recompute": "none"}
    v = search(p.job, p.cluster, lay, top=0).best.values
    p_exp = 48 * 128 * 3 * 2048 * 768 / 8
    mb = 1024 // 16 // 2  # ZeRO-2 reduce-scatters every micro-batch
    # bytes a reduced gradient takes: the profile's (frameworks.toml grad_reduce_bytes, the
    # Megatron-Bridge recipes' bf16 main_grad buffer for the NeMo 2x profiles)
    e_red = float(profile_value(p.job, "grad_reduce_bytes", 4))
    grad_b = float(v.dp_bytes)  # bytes a rank sends, both groups: at least the expert part
    assert grad_b >= mb * 0.5 * p_exp * e_red  # (n - 1) / n of them, n = 2
    net_rs = collective_time("reduce_scatter", p_exp * e_red, 2.0, 1.0, p.cluster)
    nvl_rs = collective_time("reduce_scatter", p_exp * e_red, 2.0, 2.0, p.cluster)
    assert net_rs > 2 * nvl_rs  # the tier matters
    assert float(v.dp_raw_s) >= mb * net_rs
