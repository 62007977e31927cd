"""torchtitan's Dec-2024 H100 benchmark of Llama 3.1 405B (FSDP 8 + TP 8 + PP 8 on 512 GPUs,
local batch 32, global batch 256; Table 5 of benchmarks/llama3_h100_202412_torchtitan.md) does not
state the pipeline micro-batch count or, for Interleaved 1F1B, the stages per rank. The validation
rows take torchtitan 9dec370's defaults (source `torchtitan-9dec370-pp-defaults`):

* config_manager.py: --experimental.pipeline_parallel_microbatches defaults to None, and
  pipelining_utils.build_pipeline_schedule then uses n_microbatches = pipeline_parallel_degree;
* pipelining_utils.generate_split_points (no split points given): 1 stage per rank for a
  single-stage schedule (1F1B), 2 per rank for a looped one (Interleaved 1F1B).

So each of the 8 micro-batches of a data-parallel rank's 32 sequences holds 32 / 8 = 4, and the
interleaved run has 2 virtual stages per rank. The textbook bubbles follow: (p - 1) / m = 7/8 of
the per-rank work for 1F1B and (p - 1) / (v m) = 7/16 for the interleaved schedule (Narayanan et
al. 2021, Sec. 2.2)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from scalemodel.analytic.planner import search
from scalemodel.analytic.validate import predict_row, row_problem
from scalemodel.specs.sources import all_sources

CSV = Path(__file__).resolve().parents[2] / "validation" / "published_runs_2026.csv"

PP, FSDP, GLOBAL_BATCH = 8, 8, 256  # the page's Table 5
LOCAL_BATCH = GLOBAL_BATCH // FSDP  # 32, as the page states
N_MICROBATCHES = PP  # torchtitan 9dec370 default: pipeline_parallel_degree
MICRO_BATCH = LOCAL_BATCH // N_MICROBATCHES  # 4
LOOPED_STAGES_PER_RANK = 2  # generate_split_points for a PipelineScheduleMulti schedule


def _row(row_id: str) -> dict[str, str]:
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(CSV.read_text()))}
    return rows[row_id]


def test_the_default_is_a_known_source():
    assert "torchtitan-9dec370-pp-defaults" in all_sources()
    for rid in ("titan-h100-405b-3d-1f1b", "titan-h100-405b-3d-interleaved"):
        assert "torchtitan-9dec370-pp-defaults" in _row(rid)["notes"]


@pytest.mark.parametrize("row_id, vpp", [("titan-h100-405b-3d-1f1b", 1),
                                         ("titan-h100-405b-3d-interleaved",
                                          LOOPED_STAGES_PER_RANK)])
def test_rows_state_the_default_split_and_the_validator_keeps_it(row_id, vpp):
    row = _row(row_id)
    assert int(row["global_batch_seqs"]) == GLOBAL_BATCH and int(row["pp"]) == PP
    assert int(row["dp"]) == FSDP
    assert int(row["micro_batch"]) == MICRO_BATCH == 4
    assert int(row["vpp"]) == vpp
    layout = predict_row(row).layout
    assert layout["micro_batch"] == MICRO_BATCH and layout["vpp"] == vpp


@pytest.mark.parametrize("row_id, bubble_share", [
    ("titan-h100-405b-3d-1f1b", (PP - 1) / N_MICROBATCHES),  # 7/8
    ("titan-h100-405b-3d-interleaved",
     (PP - 1) / (LOOPED_STAGES_PER_RANK * N_MICROBATCHES)),  # 7/16
])
def test_the_bubble_is_the_schedules_share_at_eight_micro_batches(row_id, bubble_share):
    p = row_problem(_row(row_id))
    v = search(p.job, p.cluster, p.stated, top=0).best.values
    assert v.microbatches == N_MICROBATCHES
    # the bubble idles each rank for (p - 1) micro-batch slots of its compute and TP time
    assert v.bubble_s == pytest.approx(bubble_share * (v.compute_s + v.tp_s), rel=1e-3)
