"""What the NeMo / Megatron-Bridge recipes of Llama 3 70B and Qwen3-30B-A3B do to the pipeline
split, read at the tags of the profiles (s18-ppsplit, 2026-12-07), and the split that follows,
derived by hand from Megatron-Core's source.

Sources (NVIDIA-NeMo/Megatron-Bridge and NVIDIA/Megatron-LM, read with git show at each tag):
1. Llama 3 70B (source megatron-bridge-llama3-70b-pipeline-split): the recipe sets none of
   account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split,
   num_layers_in_first/last_pipeline_stage, pipeline_model_parallel_layout. v0.1.0rc4
   recipes/llama/llama3_70b.py model_config lines 37-66; v0.2.1 / v0.3.0 recipes/llama/llama3.py
   llama3_70b_pretrain_config lines 288-308 (_llama3_common's flags default False, lines
   447-448 / 448-449, set only when True, lines 525-528 / 526-529); v0.3.1 / v0.4.2 lines
   658-747 (layout None at line 677); v0.5.0 lines 659-748; v0.6.0 recipes/llama/h100/llama3.py
   lines 717-810. Only the Llama 3.1 405B functions set the two flags (v0.2.1 lines 413-414).
2. Qwen3-30B-A3B (source megatron-bridge-qwen3-30b-pipeline-split): v0.1.0rc4
   recipes/qwen/qwen3_30b_a3b.py model_config lines 37-77; v0.2.1 / v0.3.0 recipes/qwen/qwen3_moe.py
   qwen3_30b_a3b_pretrain_config lines 127-143 (_qwen3_moe_common's flags default False, lines
   191-192); v0.3.1-v0.5.0 lines 26-132 (layout None at line 46); v0.6.0
   recipes/qwen/h100/qwen3_moe.py lines 32-145.
3. Megatron-Core get_num_layers_to_build (megatron/core/transformer/transformer_block.py; source
   megatron-core-even-split-without-flags) with none of those fields set: assert
   num_layers % pp == 0; num_layers // pp a stage; with interleaving assert that % vp == 0 and
   build that // vp a chunk (core_v0.14.0 lines 144, 166, 169; 0d8e0714 / b0cc2706 / 55ac7082
   lines 156, 175, 178; 2edffadb lines 152, 171, 174; d0b3b775 lines 150, 169, 172; cd4afffa
   lines 151, 170, 173). A count that does not divide stops at the assert (and first at
   Megatron-Bridge's GPTModelProvider.provide assert, gpt_provider.py line 232 at v0.3.1).
Expected splits below come from _megatron_core_chunks, written from 3, not from the planner.
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.planner import check_pipeline_split, make_cluster, make_job, search
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import (
    even_pipeline_split,
    get_framework,
    pipeline_split_of,
    recipe_pipeline_split,
)
from scalemodel.specs.sources import all_sources

NEMO = ("nemo-25.09", "nemo-25.11", "nemo-26.02", "nemo-26.04", "nemo-26.06", "nemo-26.08")
MODELS = {"llama-3-70b": "megatron-bridge-llama3-70b-pipeline-split",
          "qwen3-30b-a3b": "megatron-bridge-qwen3-30b-pipeline-split"}


def _megatron_core_chunks(n_layers: int, pp: int, vpp: int) -> list[int]:
    """Layers built per model chunk in pipeline order (chunk j = vp * pp + rank) by
    get_num_layers_to_build with no split field set, written out from the source."""
    assert n_layers % pp == 0, "num_layers should be divisible by pipeline_model_parallel_size"
    per_rank = n_layers // pp
    assert per_rank % vpp == 0, "num_layers_per_pipeline_rank should be divisible by vp_size"
    return [per_rank // vpp] * (pp * vpp)


def test_the_sources_name_file_tag_and_lines():
    src = all_sources()
    t = src["megatron-bridge-llama3-70b-pipeline-split"].title
    for needle in ("v0.1.0rc4", "llama3_70b.py model_config lines 37-66", "v0.2.1 and v0.3.0",
                   "lines 288-308", "v0.3.1 and v0.4.2 llama3.py lines 658-747",
                   "v0.5.0 lines 659-748", "recipes/llama/h100/llama3.py", "lines 717-810"):
        assert needle in t, needle
    q = src["megatron-bridge-qwen3-30b-pipeline-split"].title
    for needle in ("qwen3_30b_a3b.py model_config lines 37-77", "lines 127-143",
                   "lines 191-192", "qwen3_moe.py lines 26-132", "lines 32-145"):
        assert needle in q, needle
    m = src["megatron-core-even-split-without-flags"].title
    for needle in ("get_num_layers_to_build", "core_v0.14.0", "b0cc2706", "55ac7082",
                   "2edffadb", "d0b3b775", "cd4afffa", "gpt_provider.py"):
        assert needle in m, needle


def test_every_nemo_profile_builds_the_even_split_for_the_two_models():
    for fid in NEMO:
        for model, key in MODELS.items():
            assert pipeline_split_of(fid, model) == "even", (fid, model)
            assert even_pipeline_split(fid, model) and recipe_pipeline_split(fid, model)
            hit = [r for r in get_framework(fid).values["model_recipes"]
                   if r["model"] == model and "pipeline_split" in r]
            assert len(hit) == 1 and hit[0]["source"] == key
    # the default profile keeps any split; NeMo 1.x splits evenly as its release does (a
    # Megatron-Core before core_r0.9.0: no per-stage counts, source megatron-core-r080-even-split),
    # not through a recipe entry, and no recipe entry opens --layout stages there
    for model in MODELS:
        assert pipeline_split_of("megatron-core", model) == "any"
        assert not recipe_pipeline_split("megatron-core", model)
    for fid in ("nemo-24.03", "nemo-24.07"):
        f = get_framework(fid)
        v = f.values
        assert v["pipeline_split"] == "even"
        assert f.sources["pipeline_split"] == "megatron-core-r080-even-split"
        assert all("pipeline_split" not in r for r in v.get("model_recipes") or [])
        # NeMo 1.x inherits none of Megatron-Bridge's 2025 dispatcher presets or module lists
        assert v["moe_recipes"] == []
        assert not any(o.startswith("selective:") for o in v["recompute_options"])
        for model in MODELS:
            assert even_pipeline_split(fid, model) and not recipe_pipeline_split(fid, model)


@pytest.mark.parametrize("model, gpu, n, fixed", [
    # nemo-llama3-70b-gb300-260201-mx's printed layout (TP1 PP4, no interleaving)
    ("llama-3-70b", "gb300", 64, dict(tp=1, pp=4, dp=16, cp=1, vpp=1, micro_batch=1, zero=1)),
    # the H100 rows' TP4 PP8 VP5 (nemo-llama3-70b-h100 and the published_runs_2026 rows)
    ("llama-3-70b", "h100-sxm", 64, dict(tp=4, pp=8, dp=2, cp=1, vpp=5, micro_batch=1, zero=1)),
    # nemo-qwen3-30b-a3b-h100-2602: TP1 PP2 VP12 EP8 on 16 H100
    ("qwen3-30b-a3b", "h100-sxm", 16,
     dict(tp=1, pp=2, dp=8, cp=1, ep=8, vpp=12, micro_batch=1, zero=1)),
])
def test_the_planner_prices_megatron_cores_split(model, gpu, n, fixed):
    job = make_job(get_model(model), seq_len=8192, global_batch_seqs=128,
                   framework_id="nemo-26.02", precision="fp8")
    res = search(job, make_cluster(gpu, n), {**fixed, "recompute": "full"}, top=0)
    want = _megatron_core_chunks(get_model(model).n_layers, fixed["pp"], fixed["vpp"])
    assert list(res.chunk_layers) == want
    per_stage = get_model(model).n_layers // fixed["pp"]
    assert list(res.stage_layers) == [per_stage] * fixed["pp"]


def test_the_free_split_stays_where_no_framework_is_named():
    # the default profile (megatron-core, pipeline_split any) still balances the head: the last
    # stage holds fewer than L / pp decoder layers on the same pinned layout
    job = make_job(get_model("llama-3-70b"), seq_len=8192, global_batch_seqs=128,
                   precision="fp8")
    res = search(job, make_cluster("gb300", 64),
                 dict(tp=1, pp=4, dp=16, cp=1, vpp=1, micro_batch=1, zero=1, recompute="full"),
                 top=0)
    assert sum(res.stage_layers) == 80 and res.stage_layers[-1] < 20
    check_pipeline_split(job, 3, 1)  # 80 layers on 3 stages: offered without a framework


def test_what_megatron_core_asserts_on_is_refused_in_one_line():
    job = make_job(get_model("llama-3-70b"), seq_len=8192, global_batch_seqs=128,
                   framework_id="nemo-26.02")
    check_pipeline_split(job, 4, 5)  # 20 a stage, 4 a chunk: builds
    for pp, vpp in ((3, 1), (4, 3), (16, 2)):  # 80 % 3; 20 % 3; 5 % 2
        with pytest.raises(AssertionError):
            _megatron_core_chunks(80, pp, vpp)
        with pytest.raises(BadInput, match="recipe's even split"):
            check_pipeline_split(job, pp, vpp)


def test_a_run_that_sets_its_own_stage_counts_is_priced_as_given():
    # num_layers_in_first/last_pipeline_stage or a pipeline_model_parallel_layout (fields of
    # every Megatron-Core read) let a run place 19 / 21 / 21 / 19: --layout stages stands
    job = make_job(get_model("llama-3-70b"), seq_len=8192, global_batch_seqs=128,
                   framework_id="nemo-26.02", precision="fp8")
    res = search(job, make_cluster("gb300", 64),
                 dict(tp=1, pp=4, dp=16, cp=1, micro_batch=1, zero=1, recompute="full",
                      stages=(19, 21, 21, 19)), top=0)
    assert res.stage_layers == (19, 21, 21, 19)
    # the release that has no per-stage counts (megatron-core-0.8) still refuses them
    old = make_job(get_model("llama-3-70b"), seq_len=8192, global_batch_seqs=128,
                   framework_id="megatron-core-0.8")
    with pytest.raises(BadInput, match="evenly only"):
        check_pipeline_split(old, 4, 1, (19, 21, 21, 19))


def test_the_cli_refuses_a_split_the_recipe_cannot_build(capsys):
    rc = main(["plan", "train", "--model", "llama-3-70b", "--gpus", "48", "--gpu", "h100-sxm",
               "--seq-len", "8192", "--global-batch", "96", "--framework", "nemo-26.02",
               "--layout", "tp=8,pp=3"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "nemo-26.02: its llama-3-70b recipe's layers split evenly" in err and "80 layers" in err


def test_a_recipe_entry_does_not_open_stages_on_an_even_only_release(monkeypatch):
    # Megatron-Core r0.8 asserts num_layers % pp == 0 and builds L // pp a stage (the
    # megatron-core-0.8 profile's pipeline_split = "even"): a model_recipes entry on such a
    # release must not make an explicit --layout stages acceptable (review of session 18)
    from types import SimpleNamespace

    import scalemodel.specs.frameworks as fw

    recipe = [{"model": "llama-3-70b", "pipeline_split": "even", "source": "x"}]
    for split, opens in (("even", False), ("any", True)):
        vals = {"pipeline_split": split, "model_recipes": recipe}
        monkeypatch.setattr(fw, "get_framework", lambda fid, v=vals: SimpleNamespace(values=v))
        assert fw.recipe_pipeline_split("p", "llama-3-70b") is opens, split
        assert fw.recipe_pipeline_split("p", "qwen3-30b-a3b") is False
