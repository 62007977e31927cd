"""Megatron-Bridge's recipe facts as the nemo profiles' model_recipes (frameworks.toml), each read
from the source named below, and the split they give derived by hand.

1. The Llama 3.1 405B recipe sets account_for_embedding_in_pipeline_split = True and
   account_for_loss_in_pipeline_split = True (Megatron-Bridge v0.1.0rc4
   src/megatron/bridge/recipes/llama/llama31_405b.py lines 97-98; v0.2.1 / v0.3.0
   recipes/llama/llama3.py lines 413-414; v0.4.2 lines 1132-1133; v0.5.0 lines 1146-1147), and
   every GPU's performance preset builds on that recipe. Megatron-Core (megatron/core/transformer
   at b0cc2706, the commit v0.3.0 pins; the same rule at core_v0.14.0, 0d8e0714, 2edffadb,
   d0b3b775): get_num_layers_to_build takes L + 2 layers, asserts (L + 2) % pp == 0 and
   ((L + 2) / pp) % vpp == 0, gives each chunk (L + 2) / (pp vpp) layers and builds one less in
   the first chunk (vp 0 of pp rank 0) and in the last (vp v - 1 of the last rank);
   get_transformer_layer_offset puts chunk (vp, pp) at vp (L + 2) / vpp + pp (L + 2) / (pp vpp)
   less one (except the first chunk). TransformerConfig.__post_init__ raises otherwise.
2. The 25.11 DGX-GB300 and DGX-GB200 DeepSeek-V3 rows are labelled "DeepSeekV3 (w/o MTP)" in
   docs/performance-summary.md at v0.2.1 (model TFLOP per token 961 / 3848 = 0.2497, the figure
   without MTP); the B200 row of the same table, and every 26.02-26.08 row, ran with it
   (0.260).
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.memory import chunk_partition, stage_partition
from scalemodel.errors import BadInput
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import (
    edge_chunk_split,
    even_edge_split,
    get_framework,
    job_settings,
    pipeline_split_of,
)
from scalemodel.specs.sources import all_sources

NEMO = ("nemo-25.09", "nemo-25.11", "nemo-26.02", "nemo-26.04", "nemo-26.06", "nemo-26.08")


def _megatron_core_chunks(n_layers: int, pp: int, vpp: int) -> list[tuple[int, int]]:
    """(offset, layers built) of every model chunk in pipeline order (chunk j = vp * pp + rank),
    as get_num_layers_to_build and get_transformer_layer_offset compute them with both flags
    set, written out from the source (not from the planner)."""
    n = n_layers + 2
    assert n % pp == 0 and (n // pp) % vpp == 0  # TransformerConfig.__post_init__'s checks
    per_rank = n // pp
    per_chunk = per_rank // vpp
    out = []
    for vp in range(vpp):
        for rank in range(pp):
            build = per_chunk
            if vp == 0 and rank == 0:
                build -= 1  # the embedding takes a layer's slot
            if vp == vpp - 1 and rank == pp - 1:
                build -= 1  # the loss takes a layer's slot
            offset = vp * (n // vpp) + rank * per_chunk
            if not (vp == 0 and rank == 0):
                offset -= 1  # the embedding is not a decoder layer
            out.append((offset, build))
    return out


def test_405b_pp16_vp8_by_hand():
    """126 + 2 = 128 slots, 128 / 16 = 8 per rank, 8 / 8 = 1 per chunk: the first chunk holds the
    embedding alone, the last the loss alone, the other 126 one decoder layer each; rank 0 and
    rank 15 hold 7 decoder layers, ranks 1-14 hold 8 (7 + 14 x 8 + 7 = 126)."""
    mc = _megatron_core_chunks(126, 16, 8)
    assert [b for _, b in mc] == [0] + [1] * 126 + [0]
    ours = chunk_partition(126, 16, vpp=8, edge_chunks=True)
    assert list(ours) == [b for _, b in mc]
    # contiguous chunks: each chunk starts where Megatron-Core's offset puts it
    starts = [sum(ours[:j]) for j in range(len(ours))]
    assert starts == [o for o, _ in mc]
    assert stage_partition(126, 16, vpp=8, edge_chunks=True) == (7,) + (8,) * 14 + (7,)


@pytest.mark.parametrize(("pp", "vpp"), [(16, 4), (8, 4), (8, 8), (8, 2), (16, 1), (4, 2)])
def test_the_other_405b_layouts_match_megatron_core(pp, vpp):
    """Every 405B layout of the validation files (and a plain pipeline): the edge-chunk split the
    planner prices is Megatron-Core's where L + 2 divides evenly."""
    mc = _megatron_core_chunks(126, pp, vpp)
    ours = chunk_partition(126, pp, vpp=vpp, edge_chunks=True)
    assert list(ours) == [b for _, b in mc]
    assert [sum(ours[:j]) for j in range(len(ours))] == [o for o, _ in mc]


def test_the_nemo_profiles_read_the_405b_flags():
    src = all_sources()["megatron-bridge-llama31-405b-pipeline-split"]
    title = src.title
    for tag in ("v0.1.0rc4", "v0.2.1", "v0.3.0", "v0.4.2", "v0.5.0"):
        assert tag in title
    assert "llama31_405b.py lines 97-98" in title and "lines 413-414" in title
    for fid in NEMO:
        assert pipeline_split_of(fid, "llama-3-405b") == "edge_chunks_even"
        assert edge_chunk_split(fid, "llama-3-405b") and even_edge_split(fid, "llama-3-405b")
        # a model without a recipe entry keeps the profile's split (DeepSeek-V3's presets set a
        # pipeline_model_parallel_layout the planner does not read; Llama 3 70B and
        # Qwen3-30B-A3B: test_megatron_even_split_recipes_golden.py)
        assert pipeline_split_of(fid, "deepseek-v3") == "any"
    # NeMo 1.x: no Megatron-Bridge split flags; its Megatron-Core (before core_r0.9.0) builds
    # L // pp a stage (megatron-core-r080-even-split), so the even split, not the 405B edge one
    assert pipeline_split_of("nemo-24.03", "llama-3-405b") == "even"
    # Meta's profile keeps its own (balanced, not even) edge split
    assert pipeline_split_of("meta-llama3-2024", "llama-3-405b") == "edge_chunks"


def test_the_even_rule_refuses_what_megatron_core_refuses():
    """PP16 VP6: 128 / 16 = 8 layers a rank do not divide by 6 (Megatron-Core raises); PP12:
    128 does not divide by 12. PP16 VP8 and VP4 build."""
    from scalemodel.analytic.planner import check_pipeline_split, make_job

    job = make_job(get_model("llama-3-405b"), seq_len=8192, global_batch_seqs=1536,
                   framework_id="nemo-26.02")
    check_pipeline_split(job, 16, 8)
    check_pipeline_split(job, 16, 4)
    for pp, vpp in ((16, 6), (12, 1)):
        with pytest.raises(BadInput, match="embedding and the loss"):
            check_pipeline_split(job, pp, vpp)


def test_the_25_11_dsv3_runs_without_mtp():
    src = all_sources()["megatron-bridge-dsv3-2511-without-mtp"]
    title = src.title
    assert "w/o MTP" in title and "v0.2.1" in title
    m = get_model("deepseek-v3")
    assert m.mtp_layers == 1  # the model config's num_nextn_predict_layers
    for gpu in ("gb300", "gb200"):
        assert job_settings("nemo-25.11", gpu, model="deepseek-v3")[1]["mtp_layers"] == 0
    # B200 25.11 (w/ MTP) and the later releases keep the model config's
    assert "mtp_layers" not in job_settings("nemo-25.11", "b200", model="deepseek-v3")[1]
    for fid in ("nemo-26.02", "nemo-26.04", "nemo-26.06", "nemo-26.08"):
        assert "mtp_layers" not in job_settings(fid, "gb300", model="deepseek-v3")[1]
    assert get_framework("nemo-25.11").sources["model_recipes"]


def test_the_recipe_switches_mtp_off_in_the_job():
    """One place: make_job builds the job's model with the recipe's MTP count, which the step
    model, the memory model and the split read."""
    from pathlib import Path

    from scalemodel.analytic.step.shapes import model_shapes
    from scalemodel.analytic.validate import read_rows, row_problem

    text = (Path(__file__).resolve().parents[2] / "validation"
            / "published_runs_nvl72.csv").read_text()
    rows = {r["id"]: r for r in read_rows(text)}
    off = row_problem(rows["nemo-deepseek-v3-gb300-2511-fp8"])
    on = row_problem(rows["nemo-deepseek-v3-gb300-2602"])
    assert off.job.model.mtp_layers == 0 and off.model.mtp_layers == 0
    assert on.job.model.mtp_layers == 1
    assert model_shapes(off.job.model).n_layers_run == 61
    assert model_shapes(on.job.model).n_layers_run == 62
