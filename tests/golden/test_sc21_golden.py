"""The SC21 Megatron-LM runs (Narayanan et al. 2021, Table 1) as their launch scripts ran them.

Sources: NVIDIA/Megatron-LM examples/sc21/run_table_1.sh and CONFIG.sh at commit 6985e589
(2021-08-18, "more updates on examples"; the scripts the paper's README names for Table 1), and
megatron/training.py, megatron/schedules.py of the same commit.
"""

from scalemodel.analytic.memory import chunk_partition, stage_partition


def test_uniform_split_when_the_head_is_a_fraction_of_a_layer():
    # Derivation: the 1T model has 128 layers on PP64 (run_table_1.sh: NLS=128, PP=64). Its
    # output head is V h / (12 h^2) = 51200 / (12 x 25600) = 0.167 layer-equivalents. The
    # smallest heaviest-stage load that holds all 128 layers is C = 2.167 (every stage 2
    # layers, the last 2 + 0.167), not the whole-layer C = 3 (which left one middle stage with
    # 3 layers, 50% more than the 2 layers every stage of the 2021 code runs: that code
    # splits num_layers / pp evenly).
    head = 51200 / (12 * 25600)
    assert stage_partition(128, 64, last_extra=head) == (2,) * 64
    # 145.6B: 80 layers, PP8, 5 layers per virtual stage (vpp 2): 16 chunks of 5
    # (head 51200 / (12 x 12288) = 0.35 layer; C = 5.35)
    assert chunk_partition(80, 8, vpp=2, last_extra=51200 / (12 * 12288)) == (5,) * 16
    # 310.1B: 96 layers, PP16, 3 layers per virtual stage: 32 chunks of 3
    assert chunk_partition(96, 16, vpp=2, last_extra=51200 / (12 * 16384)) == (3,) * 32
    # a head heavier than the slack still moves a layer: Llama 3 405B's 7 + 14 x 8 + 7 is kept
    # (tests/golden/test_plan_golden.py); 10 layers, 2 stages, head 1.5 layers: C = 6 gives
    # first 6, last floor(6 - 1.5) = 4 (loads 6 and 5.5)
    assert stage_partition(10, 2, last_extra=1.5) == (6, 4)
