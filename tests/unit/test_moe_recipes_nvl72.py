"""The MoE recipes of NeMo / Megatron-Bridge on DGX-GB300, DGX-GB200 and DGX-B300 (frameworks.toml
moe_recipes of nemo-25.11 ... nemo-26.08): golden values read from each release's performance
configs at its tag, NVIDIA-NeMo/Megatron-Bridge:

* v0.2.1 (25.11): scripts/performance/configs/{qwen3,deepseek}/workload_base_configs.py
* v0.3.0 (26.02), v0.4.2 (26.04.01), v0.5.0 (26.06):
  scripts/performance/configs/qwen/qwen3_workload_base_configs.py and
  scripts/performance/configs/deepseek/deepseek_workload_base_configs.py (the V1 preset of
  Qwen3-30B-A3B, the V2 presets of Qwen3-235B-A22B and DeepSeek-V3: the layouts the tables print)
* v0.6.0 (26.08): src/megatron/bridge/perf_recipes/{qwen,deepseek}/{gb200,gb300}/*.py, the
  *_fp8mx_config functions (_enable_hybridep_full_iteration_mxfp8 in qwen/common.py,
  _enable_deepseek_full_iteration_mxfp8 in deepseek/common.py)

A preset that sets no moe_flex_dispatcher_backend keeps the provider's alltoall dispatcher; one
that sets no moe_a2a_overlap keeps WorkloadBaseConfig's False (scripts/performance/utils/utils.py).
"fp8" is the FP8_MX preset (the tables' MXFP8 / FP8-MX rows); cuda_graph_impl full_iteration with
cuda_graph_scope [] is recorded as the one scope full_iteration."""

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.step.config import ep_dispatch, moe_dispatcher, moe_graph_scopes
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import fp8_scaling_of, get_framework, job_settings, moe_recipe

A = ["attn", "moe_router", "moe_preprocess"]
R = ["moe_router", "moe_preprocess"]
F = ["full_iteration"]
H = "flex-hybridep"

# (profile, model, gpu): (dispatcher, moe_a2a_overlap, bf16 scopes, fp8 scopes)
GOLDEN = {
    # v0.2.1 DEEPSEEK_V3_GB300_BASE_CONFIG (all precisions): hybridep, moe_a2a_overlap=False,
    # cuda_graph_scope ["attn", "moe_router", "moe_preprocess"]; GB200: ["moe_router",
    # "moe_preprocess"]
    ("nemo-25.11", "deepseek-v3", "gb300"): (H, False, A, A),
    ("nemo-25.11", "deepseek-v3", "gb200"): (H, False, R, R),
    # QWEN3_30B_A3B_GB300_*: hybridep, moe_router + moe_preprocess; GB200 BF16 adds attn,
    # GB200 FP8_MX does not
    ("nemo-25.11", "qwen3-30b-a3b", "gb300"): (H, False, R, R),
    ("nemo-25.11", "qwen3-30b-a3b", "gb200"): (H, False, A, R),
    ("nemo-25.11", "qwen3-235b-a22b", "gb300"): (H, False, R, R),
    ("nemo-25.11", "qwen3-235b-a22b", "gb200"): (H, False, A, A),
    # v0.3.0 DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_BF16_V2 graphs attn + router + preprocess,
    # _FP8_MX_V2 cuda_graph_scope [] without an impl; B300 V2 no graph
    ("nemo-26.02", "deepseek-v3", "gb300"): (H, False, A, []),
    ("nemo-26.02", "deepseek-v3", "gb200"): (H, False, A, A),
    ("nemo-26.02", "deepseek-v3", "b300"): (H, False, [], []),
    ("nemo-26.02", "qwen3-30b-a3b", "gb300"): (H, False, R, R),
    ("nemo-26.02", "qwen3-30b-a3b", "gb200"): (H, False, A, R),
    ("nemo-26.02", "qwen3-30b-a3b", "b300"): (H, False, R, R),
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2 moe_router + moe_preprocess, _FP8_MX_V2
    # attn + moe_router + moe_preprocess; B300 V2: no flex backend, moe_a2a_overlap=True
    ("nemo-26.02", "qwen3-235b-a22b", "gb300"): (H, False, R, A),
    ("nemo-26.02", "qwen3-235b-a22b", "gb200"): (H, False, A, A),
    ("nemo-26.02", "qwen3-235b-a22b", "b300"): ("alltoall", True, [], []),
    # v0.4.2: DEEPSEEK_V3 GB300 FP8_MX V2 no graph; B300 V2 (PP8 MBS 2) attn + router + preprocess
    ("nemo-26.04", "deepseek-v3", "gb300"): (H, False, A, []),
    ("nemo-26.04", "deepseek-v3", "gb200"): (H, False, A, A),
    ("nemo-26.04", "deepseek-v3", "b300"): (H, False, A, A),
    ("nemo-26.04", "qwen3-30b-a3b", "gb300"): (H, False, R, R),
    ("nemo-26.04", "qwen3-30b-a3b", "gb200"): (H, False, A, R),
    ("nemo-26.04", "qwen3-30b-a3b", "b300"): (H, False, R, R),
    ("nemo-26.04", "qwen3-235b-a22b", "gb300"): (H, False, A, A),
    ("nemo-26.04", "qwen3-235b-a22b", "gb200"): (H, False, A, A),
    ("nemo-26.04", "qwen3-235b-a22b", "b300"): (H, False, [], []),
    # v0.5.0: the GB300 / GB200 FP8_MX presets cuda_graph_impl "full_iteration",
    # cuda_graph_scope [], moe_a2a_overlap=True (BF16: TE scopes, the overlap off)
    ("nemo-26.06", "deepseek-v3", "gb300"): (H, True, A, F),
    ("nemo-26.06", "deepseek-v3", "gb200"): (H, True, A, F),
    ("nemo-26.06", "deepseek-v3", "b300"): (H, False, A, A),
    ("nemo-26.06", "qwen3-30b-a3b", "gb300"): (H, True, R, F),
    ("nemo-26.06", "qwen3-30b-a3b", "gb200"): (H, True, A, F),
    ("nemo-26.06", "qwen3-30b-a3b", "b300"): (H, True, R, F),
    ("nemo-26.06", "qwen3-235b-a22b", "gb300"): (H, True, A, F),
    ("nemo-26.06", "qwen3-235b-a22b", "gb200"): (H, True, A, F),
    ("nemo-26.06", "qwen3-235b-a22b", "b300"): (H, False, [], []),
}
# v0.6.0: every *_fp8mx_config of the three models on GB300 / GB200 runs hybridep with a
# full-iteration graph and overlap_moe_expert_parallel_comm=True; the bf16 functions not recorded
for _m in ("deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b"):
    for _g in ("gb300", "gb200"):
        GOLDEN[("nemo-26.08", _m, _g)] = (H, True, None, F)


@pytest.mark.parametrize("key", sorted(GOLDEN), ids="/".join)
def test_recipe_is_what_the_configs_set(key):
    fid, model, gpu = key
    disp, ovl, bf16, fp8 = GOLDEN[key]
    r = moe_recipe(get_framework(fid).values, model, gpu)
    assert r is not None
    assert (r["dispatcher"], r["a2a_overlap"]) == (disp, ovl)
    assert r["cuda_graphs"].get("bf16") == bf16
    assert r["cuda_graphs"]["fp8"] == fp8


def _job(fid: str, model: str, gpu: str, precision: str):
    s = job_settings(fid, gpu, model=model)[1]
    return SimpleNamespace(framework_id=s["framework_id"], model=get_model(model),
                           precision=precision), s


@pytest.mark.parametrize("key", sorted(GOLDEN), ids="/".join)
def test_the_lookups_return_the_recipe(key):
    fid, model, gpu = key
    disp, ovl, bf16, fp8 = GOLDEN[key]
    job, s = _job(fid, model, gpu, "fp8")
    assert s["ep_overlap"] is ovl
    assert moe_dispatcher(job, gpu) == disp
    assert ep_dispatch(job, gpu) == ("per_expert" if disp == "alltoall" else "per_destination")
    assert moe_graph_scopes(job, gpu) == tuple(fp8)
    job.precision = "bf16"
    assert moe_graph_scopes(job, gpu) == (None if bf16 is None else tuple(bf16))
    # the tables label these rows MXFP8 / FP8-MX (megatron-bridge-perf-precision-labels)
    assert fp8_scaling_of(get_framework(fid), model, gpu)[0] == "mxfp8"


def test_full_iteration_graph_folds_the_launches_after_the_wait():
    # a step captured whole replays the MoE layer's launches as one (the moe scope's rule);
    # Qwen3-30B-A3B (128 experts) at EP8: 16 local experts; Hybrid-EP under MXFP8 launches
    # combine 1 + fc1 16 + SwiGLU 1 + fc2 16 + one split-quantise kernel for each of fc1's and
    # fc2's 16 inputs (planner.toml [host] fp8_split_launches_mxfp8 = 1) = 66 after the wait
    from scalemodel.analytic.step.host import host_exposed

    def cand(fid):
        job, _ = _job(fid, "qwen3-30b-a3b", "gb200", "fp8")
        return SimpleNamespace(job=job, gpu=SimpleNamespace(id="gb200"), m=job.model,
                               ep=np.float64(8.0), etp=np.float64(1.0), fp8=True)

    _, ops_te = host_exposed(cand("nemo-26.04"), np.float64(0.0))  # moe_router + preprocess
    _, ops_full = host_exposed(cand("nemo-26.06"), np.float64(0.0))  # full_iteration
    assert float(ops_te) == 1 + 16 + 1 + 16 + 2 * 16
    assert float(ops_full) == 1.0
