"""Where the expert-parallel and expert data-parallel groups sit (issue 16: session 18's
smaller-EP picks, session 19's check with context parallelism).

The expert gradients are reduced (and, under ZeRO, the expert weights gathered) over the ranks
that hold the same expert shard; the all-to-all runs over the EP group. Megatron-Core numbers
the ranks as a mixed-radix number whose digits run in the order of its ``order`` string, the
first digit fastest, and ``generate_masked_orthogonal_rank_groups`` gives a group the ranks
whose other digits agree. Two grids, by release (frameworks.toml expert_ranks):

* own_grid, core_v0.16.0 (3bec9aa9) megatron/core/parallel_state.py: the dense layers'
  ``RankGenerator(tp, ep=1, dp, pp, cp)`` and the expert layers' own
  ``RankGenerator(tp=etp, ep=ep, dp=tp cp dp / (etp ep), pp=pp, cp=1, order="tp-cp-ep-dp-pp")``
  (lines 775-806); EP groups are its ``get_ranks('ep')`` (line 1189), EXPERT_DATA_PARALLEL_GROUP
  its ``get_ranks('dp')`` (line 1270). The cp digit of the expert grid is 1, so CP is folded
  into the EP and expert-DP digits: EP ranks etp apart, expert-DP ranks etp x ep apart.
* dp_split, core_r0.8.0 (baf94af3): one grid of digits [tp, cp, ep, dp / ep, pp]
  (``order_w_ep``, lines 256-268); EP groups ``get_ranks('ep', independent_ep=True)`` (line
  695): ranks tp x cp apart; the expert buffers reduce over
  ``get_ranks('dp-cp', independent_ep=True)`` (lines 711-725; distributed_data_parallel.py line
  170 takes the with-CP group): the cp digit and the dp / ep digit, i.e. cp ranks tp apart in
  blocks tp x cp x ep apart.

Worked by hand, 16 GPUs on two 8-GPU nodes (ranks 0-7 and 8-15), pp 1:

(1) tp 2, cp 2, dp 4, ep 4 (etp = tp = 2).
    own_grid: expert grid digits [etp 2, cp 1, ep 4, edp 2]: rank = t + 2 e + 8 d (edp =
    2 x 2 x 4 / (2 x 4) = 2). EP group of rank 0 (t = d = 0): {0, 2, 4, 6}, all on node 0
    (it holds CP ranks 0 and 1 of DP ranks 0 and 1: the dense grid's rank = t + 2 c + 4 d);
    expert-DP group of rank 0: {0, 8}, one a node.
    dp_split: digits [tp 2, cp 2, ep 4, dp / ep 1]: rank = t + 2 c + 4 e. EP group {0, 4, 8,
    12}: two a node; expert-DP-with-CP group {0, 2}: both on node 0.
    Before session 19 the planner placed every profile as dp_split's EP group (two a node) and
    gave the expert-DP group one stride tp x cp x ep = 16 (one a node).
(2) tp 1, cp 2, dp 8, ep 2.
    own_grid: digits [1, 1, ep 2, edp 8]: rank = e + 2 d. EP {0, 1}; expert DP {0, 2, 4, ...,
    14}: four a node.
    dp_split: digits [1, cp 2, ep 2, dp / ep 4]: rank = c + 2 e + 4 d'. EP {0, 2}; expert DP
    with CP (c and d' vary) {0, 1, 4, 5, 8, 9, 12, 13}: four a node (the single stride 4 used
    before counted two).
"""

from itertools import product
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import search
from scalemodel.analytic.step.comm import collective_time, ep_stride, ranks_per_node
from scalemodel.analytic.step.config import profile_value
from scalemodel.analytic.step.data_parallel import expert_dp_ranks_per_node
from scalemodel.analytic.validate import read_rows, row_problem

NODE = 8
OWN = SimpleNamespace(framework_id="megatron-core")  # core_v0.16 reading
SPLIT = SimpleNamespace(framework_id="megatron-core-0.8")  # core_r0.8.0 reading


def _group_of_rank0(sizes: list[int], varying: list[int]) -> list[int]:
    """Ranks of the group through rank 0 whose digits ``varying`` run over their ranges, the
    others held at 0 (digit i has weight prod(sizes[:i]), the first digit fastest), as
    generate_masked_orthogonal_rank_groups builds it."""
    weights = [int(np.prod(sizes[:i])) for i in range(len(sizes))]
    return sorted(sum(d * weights[i] for i, d in zip(varying, ds, strict=True))
                  for ds in product(*(range(sizes[i]) for i in varying)))


def _members_in_node(ranks: list[int]) -> int:
    return sum(1 for r in ranks if r // NODE == ranks[0] // NODE)


def _cand(tp: int, etp: int, ep: int, cp: int, job: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(tp=np.array(tp), etp=np.array(etp), ep=np.array(ep), cp=np.array(cp),
                           job=job)


def _planner(c: SimpleNamespace, dp: int) -> tuple[float, float]:
    """(EP members per node, expert-DP members per node) as the step model counts them."""
    egroup = int(c.tp) * dp * int(c.cp) // (int(c.etp) * int(c.ep))
    return (float(ranks_per_node(ep_stride(c), c.ep, NODE)),
            float(expert_dp_ranks_per_node(c, np.array(egroup), NODE)))


def test_hand_derived_rank_lists():
    # case (1) of the docstring: tp 2, cp 2, dp 4, ep 4 on 16 GPUs
    assert _group_of_rank0([2, 1, 4, 2, 1], [2]) == [0, 2, 4, 6]  # own grid, EP
    assert _group_of_rank0([2, 1, 4, 2, 1], [3]) == [0, 8]  # own grid, expert DP
    assert _group_of_rank0([2, 2, 4, 1, 1], [2]) == [0, 4, 8, 12]  # dp_split, EP
    assert _group_of_rank0([2, 2, 4, 1, 1], [1, 3]) == [0, 2]  # dp_split, expert DP with CP
    assert _planner(_cand(2, 2, 4, 2, OWN), 4) == (4.0, 1.0)
    assert _planner(_cand(2, 2, 4, 2, SPLIT), 4) == (2.0, 2.0)
    # case (2): tp 1, cp 2, dp 8, ep 2
    assert _group_of_rank0([1, 1, 2, 8, 1], [3]) == list(range(0, 16, 2))
    assert _group_of_rank0([1, 2, 2, 4, 1], [1, 3]) == [0, 1, 4, 5, 8, 9, 12, 13]
    assert _planner(_cand(1, 1, 2, 2, OWN), 8) == (2.0, 4.0)
    assert _planner(_cand(1, 1, 2, 2, SPLIT), 8) == (2.0, 4.0)


@pytest.mark.parametrize(("tp", "etp", "cp", "ep", "dp"),
                         [(tp, etp, cp, ep, dp)
                          for tp, cp, ep, dp in product((1, 2, 4), (1, 2, 4), (1, 2, 4, 8, 16),
                                                        (2, 4, 8, 16))
                          for etp in {1, tp}
                          if (tp * dp * cp) % (etp * ep) == 0 and (ep > 1 or etp == tp)])
def test_core_v0_16_expert_grid(tp, etp, cp, ep, dp):
    # expert grid digits: tp (etp), cp (1), ep, dp (edp), pp (1); CP folded into ep and edp
    edp = tp * cp * dp // (etp * ep)
    sizes = [etp, 1, ep, edp, 1]
    want = (_members_in_node(_group_of_rank0(sizes, [2])),
            _members_in_node(_group_of_rank0(sizes, [3])))
    assert _planner(_cand(tp, etp, ep, cp, OWN), dp) == want, (tp, etp, cp, ep, dp)


@pytest.mark.parametrize(("tp", "cp", "ep", "dp"),
                         [(tp, cp, ep, dp)
                          for tp, cp, ep, dp in product((1, 2, 4), (1, 2, 4), (1, 2, 4, 8),
                                                        (2, 4, 8, 16))
                          if dp % ep == 0])
def test_core_r0_8_dp_modulo_ep(tp, cp, ep, dp):
    # one grid: tp, cp, ep, dp / ep, pp (1); experts split like the MLP (etp = tp); the EP
    # group is the ep digit, the expert buffers' group the cp and dp / ep digits
    sizes = [tp, cp, ep, dp // ep, 1]
    want = (_members_in_node(_group_of_rank0(sizes, [2])),
            _members_in_node(_group_of_rank0(sizes, [1, 3])))
    assert _planner(_cand(tp, tp, ep, cp, SPLIT), dp) == want, (tp, cp, ep, dp)


def test_without_ep_the_group_is_the_dense_one():
    # ep 1: the experts are replicated like the dense weights, over dp x cp at stride tp
    for job in (OWN, SPLIT):
        c = _cand(2, 2, 1, 2, job)
        assert float(expert_dp_ranks_per_node(c, np.array(8), NODE)) == 4.0  # 8 ranks 2 apart


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


def _cli(argv: list[str]) -> int:
    from scalemodel.cli import main

    try:
        return int(main(argv) or 0)
    except SystemExit as e:
        return int(e.code or 0)


@pytest.mark.parametrize(("framework", "rc"), [("megatron-core-0.8", 2), ("megatron-core", 0)])
def test_core_r0_8_ep_divides_dp_alone(capsys, framework, rc):
    # core_r0.8.0 parallel_state.py line 442: initialize_model_parallel raises unless
    # data_parallel_size % expert_model_parallel_size == 0 (EP is cut out of the DP digit).
    # Mixtral 8x7B on 16 GPUs at tp 2, cp 2: dp = 4, and ep 8 divides dp x cp = 8 but not dp,
    # a layout the own grid (core_r0.10.0 on) builds and core_r0.8.0 refuses.
    got = _cli(["plan", "train", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "16",
                "--seq-len", "8192", "--global-batch", "64", "--framework", framework,
                "--layout", "tp=2,pp=1,cp=2,ep=8,etp=2,zero=1,micro_batch=1,recompute=full"])
    out, err = capsys.readouterr()
    assert got == rc
    if rc == 2:
        assert not out and err.count("\n") == 1
        assert "ep must divide the 8 experts and dp (the core_r0.8.0 rank grid" in err
