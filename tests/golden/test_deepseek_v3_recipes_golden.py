"""Megatron-Bridge's DeepSeek-V3 performance presets as the nemo-25.11 and nemo-26.02 profiles
record them (frameworks.toml moe_recipes), each read at the tag named here, and what the step
model does with them, derived by hand.

1. nemo-25.11 (Megatron-Bridge v0.2.1; the container ships 0.2.0, whose DeepSeek-V3 files are
   the same): scripts/performance/configs/deepseek/workload_base_configs.py lines 63-74,
   DEEPSEEK_V3_B200_BASE_CONFIG for BF16, FP8-CS and FP8-MX alike: PP16, EP8, GBS 2048,
   recompute_modules [mla_up_proj], moe_a2a_overlap False; moe_flex_dispatcher_backend and
   cuda_graph_scope stay at their None defaults (scripts/performance/utils/utils.py lines
   48-56). apply_flex_dispatcher_backend returns at a None backend
   (training/flex_dispatcher_backend.py lines 61-64), so DeepSeekModelProvider's
   moe_token_dispatcher_type "alltoall" stands (models/deepseek/deepseek_provider.py line 76),
   and no graph is captured. Lines 77-91, H100: TP2 PP8 VP4 EP64, backend deepep,
   moe_a2a_overlap True, no graph. Lines 27-42 GB300 and 45-60 GB200: hybridep without the
   overlap, graphs attn + moe_router + moe_preprocess (GB300) and moe_router + moe_preprocess
   (GB200).
2. nemo-26.02 (v0.3.0): deepseek/deepseek_workload_base_configs.py lines 105-117,
   DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V1: PP16, EP8, recompute [mla_up_proj], backend hybridep,
   moe_a2a_overlap False, no graph; lines 178-184 the V2 presets (GBS 4096, the 26.02 table's
   B200 row) change only the batch. Lines 120-135 (H100 V1) and 187-197 (V2): hybridep, no
   overlap, no graph. flex_dispatcher_backend.py lines 54-61 at v0.3.0 apply a hybridep backend
   on compute capability 8-10 (v0.2.1 lines 54-60: GPUs named GB200 / GB300 only).
3. Both B200 presets pass layout=None at PP16 without VP: the recipe's (16, 1) pipeline layout
   (recipes/deepseek/deepseek_v3.py line 240 at v0.2.1, line 54 at v0.3.0): embedding + 4
   decoder layers, 14 stages of 4, then 1 decoder layer + the MTP module + the loss; 4 + 14 x 4
   + 1 = 61 layers, DeepSeek-V3's count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import scalemodel.specs.frameworks as fw
from scalemodel.analytic.planner import make_cluster, make_job, search
from scalemodel.analytic.step.config import (
    ep_dispatch,
    ep_dispatch_kernel,
    moe_dispatcher,
    moe_graph_scopes,
)
from scalemodel.analytic.validate import validate
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import get_framework, job_settings, moe_recipe

MODEL = "deepseek-v3"
ROOT = Path(__file__).resolve().parents[2] / "validation"


def _job(fid: str, gpu: str, precision: str = "fp8"):
    from types import SimpleNamespace

    return SimpleNamespace(framework_id=fid, precision=precision, model=get_model(MODEL))


@pytest.mark.parametrize(("fid", "gpu", "dispatcher", "overlap", "bf16", "fp8"), [
    # v0.2.1 workload_base_configs.py lines 63-74: no backend (the provider's alltoall)
    ("nemo-25.11", "b200", "alltoall", False, [], []),
    # lines 77-91
    ("nemo-25.11", "h100-sxm", "flex-deepep", True, [], []),
    # lines 27-42 and 45-60
    ("nemo-25.11", "gb300", "flex-hybridep", False, ["attn", "moe_router", "moe_preprocess"],
     ["attn", "moe_router", "moe_preprocess"]),
    ("nemo-25.11", "gb200", "flex-hybridep", False, ["moe_router", "moe_preprocess"],
     ["moe_router", "moe_preprocess"]),
    # v0.3.0 deepseek_workload_base_configs.py lines 105-117 / 178-184 and 120-135 / 187-197
    ("nemo-26.02", "b200", "flex-hybridep", False, [], []),
    ("nemo-26.02", "h100-sxm", "flex-hybridep", False, [], []),
    # lines 41-68 (GB300 FP8_MX_V2 = V1 with cuda_graph_scope [], BF16 attn + router +
    # preprocess), 72-87 (GB200), 90-102 (B300)
    ("nemo-26.02", "gb300", "flex-hybridep", False, ["attn", "moe_router", "moe_preprocess"], []),
    ("nemo-26.02", "gb200", "flex-hybridep", False, ["attn", "moe_router", "moe_preprocess"],
     ["attn", "moe_router", "moe_preprocess"]),
    ("nemo-26.02", "b300", "flex-hybridep", False, [], []),
])
def test_every_deepseek_v3_preset_of_the_tag_is_recorded(fid, gpu, dispatcher, overlap, bf16,
                                                         fp8) -> None:
    r = moe_recipe(get_framework(fid).values, MODEL, gpu)
    assert r == {"model": MODEL, "gpu": gpu, "dispatcher": dispatcher, "a2a_overlap": overlap,
                 "cuda_graphs": {"bf16": bf16, "fp8": fp8}}
    assert job_settings(fid, gpu, model=MODEL)[1]["ep_overlap"] is overlap
    assert moe_graph_scopes(_job(fid, gpu), gpu) == tuple(fp8)
    assert moe_graph_scopes(_job(fid, gpu, "bf16"), gpu) == tuple(bf16)


def test_the_b200_dispatch_of_each_release() -> None:
    # alltoall: one row per (token, routed expert); flex: one copy per destination GPU
    assert ep_dispatch(_job("nemo-25.11", "b200"), "b200") == "per_expert"
    assert ep_dispatch_kernel(_job("nemo-25.11", "b200"), "b200") is None
    for gpu in ("b200", "h100-sxm"):
        assert ep_dispatch(_job("nemo-26.02", gpu), gpu) == "per_destination"
        assert ep_dispatch_kernel(_job("nemo-26.02", gpu), gpu) == "hybridep"


def test_the_2511_entry_is_the_profiles_own_default() -> None:
    # the profile (through nemo-25.09 and megatron-core) already runs alltoall without the
    # overlap: the v0.2.1 B200 preset names no other
    vals = get_framework("nemo-25.11").values
    assert (vals["moe_dispatcher"], vals["a2a_overlap"], vals["ep_overlap"]) == (
        "alltoall", False, False)


def _row(rid: str) -> str:
    text = (ROOT / "published_runs_2026.csv").read_text().splitlines()
    row = [ln for ln in text if ln.startswith(rid + ",")]
    assert len(row) == 1
    return "\n".join([text[0], *row]) + "\n"


def _predicted(rid: str) -> float:
    results, skipped = validate(_row(rid))
    assert not skipped and len(results) == 1
    return float(results[0].predicted)


def test_naming_the_2511_dispatcher_adds_only_its_count_exchange(monkeypatch) -> None:
    """With the entry the dispatcher is named, so step/comm.py dispatch_metadata prices the
    all-to-all dispatcher's tokens-per-expert all-gather (Megatron-Core
    MoEAlltoAllTokenDispatcher.preprocess): E x 8 B x ep = 256 x 8 x 8 = 16 KiB per MoE layer
    and micro-batch over the node's NVLink, a few microseconds each; 4 MoE layers a stage x
    GBS 2048 / DP 16 = 128 micro-batches = 512 of them a step, about 0.1% of a step of
    about 11.6 s at most. Without the entry (the defaults) nothing else is priced apart."""
    with_entry = _predicted("nemo-deepseek-v3-b200-2511")
    orig = fw.moe_recipe

    def without(values, model_id, gpu_id):
        return None if (model_id, gpu_id) == (MODEL, "b200") else orig(values, model_id, gpu_id)

    monkeypatch.setattr(fw, "moe_recipe", without)
    defaults = _predicted("nemo-deepseek-v3-b200-2511")
    assert with_entry < defaults
    assert with_entry == pytest.approx(defaults, rel=1e-3)


def test_the_2602_preset_dispatches_with_hybrid_ep(monkeypatch) -> None:
    """The 26.02 row (2689 tokens/s) with the v0.3.0 preset's Hybrid-EP: fewer copies a token
    (one per destination GPU: DeepSeek-V3 routes a token into 4 of its 8 expert groups, and at
    EP8 a GPU holds one group, so 4 copies against the 8 rows of the all-to-all dispatcher) and
    no TE fp8 padding copies (Hybrid-EP pads inside its dispatch, step/layers.py
    fp8_padding_bytes): faster than the all-to-all reading the row had before."""
    assert moe_dispatcher(_job("nemo-26.02", "b200"), "b200") == "flex-hybridep"
    hybrid = _predicted("nemo-deepseek-v3-b200-2602")
    orig = fw.moe_recipe

    def alltoall(values, model_id, gpu_id):
        r = orig(values, model_id, gpu_id)
        if (model_id, gpu_id) == (MODEL, "b200") and r and r["dispatcher"] == "flex-hybridep":
            r = {**r, "dispatcher": "alltoall"}
        return r

    monkeypatch.setattr(fw, "moe_recipe", alltoall)
    assert hybrid > _predicted("nemo-deepseek-v3-b200-2602")


@pytest.mark.parametrize("fid", ["nemo-25.11", "nemo-26.02"])
def test_the_pp16_split_is_the_recipes_layout(fid: str) -> None:
    # the (16, 1) layout: 4 decoder layers on each of the first 15 stages, 1 on the last (with
    # the MTP module and the loss); 4 x 15 + 1 = 61
    m = get_model(MODEL)
    assert m.n_layers == 61
    _, s = job_settings(fid, "b200", model=MODEL)
    s.pop("mtp_layers", None)
    job = make_job(m, seq_len=4096, global_batch_seqs=2048, precision="fp8", **s)
    res = search(job, make_cluster("b200", 256),
                 {"tp": 1, "pp": 16, "dp": 16, "cp": 1, "ep": 8, "etp": 1, "vpp": 1,
                  "micro_batch": 1, "zero": 1, "recompute": "none"}, top=1)
    assert res.stage_layers == (4,) * 15 + (1,)
