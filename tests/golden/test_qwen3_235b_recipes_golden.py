"""Megatron-Bridge's Qwen3-235B-A22B recipe facts as the nemo profiles record them
(frameworks.toml model_recipes), each read at the tag named here, and what the step model does
with them, derived by hand.

1. Pipeline split. The Qwen3-235B-A22B pre-training recipe sets
   account_for_embedding_in_pipeline_split = True and account_for_loss_in_pipeline_split = True:
   v0.1.0rc4 src/megatron/bridge/recipes/qwen/qwen3_235b_a22b.py lines 70-71; v0.2.0, v0.2.1 and
   v0.3.0 recipes/qwen/qwen3_moe.py lines 160-161 (applied in _qwen3_moe_common lines 276-279);
   v0.4.2 and v0.5.0 recipes/qwen/qwen3_moe.py lines 166-167; v0.6.0
   recipes/qwen/h100/qwen3_moe.py lines 261-262. Every GPU's performance preset calls that
   recipe and none resets the flags. Megatron-Core then splits L + 2 = 94 + 2 = 96 slots evenly
   over pp x vpp chunks and builds one decoder layer less in the first chunk and in the last
   (source megatron-core-account-for-embedding-loss-split).
2. TP communication overlap. The H100 preset of the same model passes
   CommOverlapConfig(tp_comm_overlap=False): v0.2.1 scripts/performance/configs/qwen3/
   qwen3_llm_pretrain.py line 156 (v0.2.0 line 153), v0.3.0 configs/qwen/qwen3_llm_pretrain.py
   line 184, v0.4.2 line 167, v0.5.0 line 210; the GB300 / GB200 / B200 functions pass True.
3. Parameter all-gather overlap. The v0.2.x B200 preset, at FP8-MX only, sets
   overlap_param_gather False ("keeping this eanbled causes NaN grad norm"): v0.2.1
   qwen3_llm_pretrain.py lines 136-139 (v0.2.0 lines 133-136); v0.3.0's B200 function (lines
   141-164) has no such block.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scalemodel.analytic.memory import stage_partition
from scalemodel.analytic.planner import evaluate_one, make_cluster, make_job
from scalemodel.analytic.step.config import recipe_overlap
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import (
    _model_recipes_ok,
    get_framework,
    job_settings,
    model_recipe_value,
    pipeline_split_of,
)

MODEL = "qwen3-235b-a22b"
NEMO = ("nemo-25.09", "nemo-25.11", "nemo-26.02", "nemo-26.04", "nemo-26.06", "nemo-26.08")


def _by_hand(n_layers: int, pp: int, vpp: int) -> tuple[int, ...]:
    """Decoder layers per pipeline rank with both flags set, from Megatron-Core's
    get_num_layers_to_build: (L + 2) / (pp vpp) per chunk, one less in chunk (vp 0, rank 0) and
    in chunk (vp vpp - 1, rank pp - 1)."""
    per_chunk = (n_layers + 2) // (pp * vpp)
    assert per_chunk * pp * vpp == n_layers + 2
    ranks = [per_chunk * vpp] * pp
    ranks[0] -= 1
    ranks[-1] -= 1
    return tuple(ranks)


@pytest.mark.parametrize("fid", NEMO)
def test_every_nemo_profile_splits_qwen3_235b_at_the_edges(fid: str) -> None:
    assert pipeline_split_of(fid, MODEL) == "edge_chunks_even"
    hit = model_recipe_value(get_framework(fid).values, MODEL, None, "pipeline_split")
    assert hit == ("edge_chunks_even", "megatron-bridge-qwen3-235b-pipeline-split")


@pytest.mark.parametrize(("pp", "vpp", "expected"), [
    # 96 / 16 = 6 per chunk: rank 0 holds 5 + 6, rank 7 holds 6 + 5, the others 12
    (8, 2, (11, 12, 12, 12, 12, 12, 12, 11)),
    # 96 / 48 = 2 per chunk: 1 + 11 x 2 = 23 at both ends, 24 between (the GB300 PP4 VP12 rows)
    (4, 12, (23, 24, 24, 23)),
    # plain PP8 (the 26.04 B200 row): 12 per rank, 11 at both ends
    (8, 1, (11, 12, 12, 12, 12, 12, 12, 11)),
    # PP8 VP4 (the H100 and B300 2602 rows): 3 per chunk, 2 + 9 = 11 at both ends
    (8, 4, (11, 12, 12, 12, 12, 12, 12, 11)),
])
def test_the_split_is_megatron_cores(pp: int, vpp: int, expected: tuple[int, ...]) -> None:
    assert get_model(MODEL).n_layers == 94
    assert _by_hand(94, pp, vpp) == expected
    assert stage_partition(94, pp, vpp=vpp, edge_chunks=True) == expected


def _job(fid: str, precision: str = "fp8", scaling: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(framework_id=fid, precision=precision, fp8_scaling=scaling,
                           model=SimpleNamespace(id=MODEL))


@pytest.mark.parametrize("fid", ["nemo-25.11", "nemo-26.02", "nemo-26.04", "nemo-26.06",
                                 "nemo-26.08"])
def test_the_h100_preset_runs_tp_without_userbuffers(fid: str) -> None:
    # the profile itself overlaps TP (nemo-25.09 tp_overlap true); the H100 preset does not
    assert get_framework(fid).get("tp_overlap") is True
    for prec in ("bf16", "fp8"):
        assert recipe_overlap(_job(fid, prec), "h100-sxm", "tp_overlap", False) is False
    assert recipe_overlap(_job(fid), "gb200", "tp_overlap", False) is True
    hit = model_recipe_value(get_framework(fid).values, MODEL, "h100-sxm", "tp_overlap", "bf16")
    assert hit == (False, "megatron-bridge-qwen3-235b-h100-no-tp-overlap")


def test_the_2511_b200_fp8_mx_preset_gathers_parameters_unhidden() -> None:
    # FP8-MX only (the profile's mxfp8 for this model on B200: fp8_scaling_recipes)
    assert recipe_overlap(_job("nemo-25.11"), "b200", "param_gather_overlap", True) is False
    assert recipe_overlap(_job("nemo-25.11", "fp8", "current"), "b200",
                          "param_gather_overlap", True) is True
    assert recipe_overlap(_job("nemo-25.11", "bf16"), "b200", "param_gather_overlap",
                          True) is True
    # v0.3.0 dropped the block: 26.02 keeps the profile's overlap
    assert recipe_overlap(_job("nemo-26.02"), "b200", "param_gather_overlap", True) is True


def _row(gpu: str, n: int, layout: dict, batch: int, scaling: str | None = None) -> dict:
    _, s = job_settings("nemo-25.11", gpu, model=MODEL)
    s.pop("mtp_layers", None)
    j = make_job(get_model(MODEL), seq_len=4096, global_batch_seqs=batch, precision="fp8",
                 fp8_scaling=scaling, **s)
    full = {"cp": 1, "etp": 1, "zero": 1, "recompute": "none", **layout}
    return evaluate_one(j, make_cluster(gpu, n), full).values


def test_unhidden_parameter_gather_is_the_zero1_all_gather() -> None:
    # 64 B200, TP1 PP8 VP2 EP8 DP8 (the 25.11 row): with the gather outside the forward the
    # exposed DP time is at least the all-gather's own time; with it hidden (FP8-CS, the same
    # recipe otherwise) it is only what the forward does not cover
    lay = {"tp": 1, "pp": 8, "vpp": 2, "ep": 8, "dp": 8, "micro_batch": 1}
    mx = _row("b200", 64, lay, 1024)
    cs = _row("b200", 64, lay, 1024, scaling="current")
    assert float(mx.dp_s) > 10 * float(cs.dp_s)


def test_h100_tp2_collectives_are_exposed() -> None:
    # 256 H100, TP2 PP8 VP4 EP32 DP16: without userbuffers the TP collectives take the plain
    # branch of step/comm.py layer_time, (1 - [overlap] tp) = 1 - 0 of each exposed
    # (planner.toml: Megatron-LM without --tp-comm-overlap), so the exposed TP time is the raw
    lay = {"tp": 2, "pp": 8, "vpp": 4, "ep": 32, "dp": 16, "micro_batch": 1}
    v = _row("h100-sxm", 256, lay, 2048)
    assert float(v.tp_s) > 0.0
    assert float(v.tp_s) == pytest.approx(float(v.tp_raw_s), rel=1e-9)


def test_bad_model_recipe_entries_are_refused() -> None:
    ok = {"model": MODEL, "gpu": "b200", "param_gather_overlap": False,
          "source": "megatron-bridge-qwen3-235b-b200-mxfp8-param-gather"}
    assert _model_recipes_ok([ok])
    assert _model_recipes_ok([{**ok, "precision": "mxfp8"}])
    assert not _model_recipes_ok([{**ok, "precision": "fp4"}])
    assert not _model_recipes_ok([{**ok, "param_gather_overlap": "no"}])
    split = {"model": MODEL, "pipeline_split": "edge_chunks_even",
             "source": "megatron-bridge-qwen3-235b-pipeline-split"}
    assert _model_recipes_ok([split])
    assert not _model_recipes_ok([{**split, "precision": "bf16"}])
