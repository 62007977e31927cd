"""Llama 3 70B on 64 GB300 at MXFP8, NeMo 26.02.01 (validation row nemo-llama3-70b-gb300-260201-mx):
the table's printed layout against the preset of the release (s18-l70gb300, 2026-12-07, issue 16).

Sources, read at the named tags of NVIDIA-NeMo/Megatron-Bridge:
- Which tag the 26.02.01 container ran: docs/releases/known-issues.md line 8 at v0.4.0 marks a fix
  "in 26.02.01 (r0.3.1)"; v0.3.1 is tagged 2026-03-20, the day before the table's commit
  (cfeddcd94, "2602_perf_table_reorder and patch container data").
- The preset at v0.3.1 (and unchanged at v0.3.0, on r0.3.0 and on malay/260201_perf, the branch
  whose commit e40d00050 added the 26.02.01 rows): scripts/performance/configs/llama/
  llama3_workload_base_configs.py lines 219-223, LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 =
  replace(BASE_LLAMA3_70B_CONFIG_GBS256, pipeline_model_parallel_size=4,
  virtual_pipeline_model_parallel_size=5); micro_batch_size is WorkloadBaseConfig's default 1
  (scripts/performance/utils/utils.py line 50), and cpu_offloading_num_layers,
  recompute_num_layers, recompute_modules, cuda_graph_impl and use_megatron_fsdp stay None
  (lines 52-58), so utils/overrides.py _set_recompute_overrides (line 127) sets nothing and
  src/megatron/bridge/recipes/llama/llama3.py llama3_70b_pretrain_config keeps
  recompute_granularity None and cuda_graph_impl "none". The table prints MBS 2 and VP n/a,
  which no preset at any tag or branch read carries.
- Megatron-Core's non-interleaved 1F1B (schedules.py, read in test_pipeline_memory_golden.py):
  rank 0 runs p - 1 warmup forwards and holds p micro-batches at its peak; the pipeline idles
  p - 1 micro-batch slots beside the m it computes (Narayanan et al. 2021, Sec. 2.2.1); with v
  interleaved chunks, (p - 1) / v slots (Sec. 2.2.2).
- Megatron-Core splits 80 layers on PP4 as 20 a stage: v0.3.1's 70B recipe sets neither
  account_for_embedding_in_pipeline_split nor account_for_loss_in_pipeline_split (only the
  405B functions do, llama3.py lines 1132-1133).
Expected values are derived below from these sources and from the two rows' published figures;
none is copied from the code's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.analytic.layout import TrainLayout, parse_layout
from scalemodel.analytic.planner import evaluate_layout
from scalemodel.analytic.validate import read_rows, row_problem

ROOT = Path(__file__).resolve().parents[2] / "validation"
NAME = "published_runs_nvl72.csv"

ROW = "nemo-llama3-70b-gb300-260201-mx"
SIBLING = "nemo-llama3-70b-gb300-2602-mx"  # 26.02: PP4 VP5 MBS 1, the preset's layout
PRINTED = "tp=1,pp=4,dp=16,cp=1,vpp=1,micro_batch=2,zero=1,stages=20/20/20/20"
PRESET = "tp=1,pp=4,dp=16,cp=1,vpp=5,micro_batch=1,zero=1,recompute=none"


def _rows() -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in read_rows((ROOT / NAME).read_text())}


def _price(row: dict[str, str], text: str):
    p = row_problem(row)
    return evaluate_layout(p.job, p.cluster, TrainLayout(**parse_layout(text))).values


def test_the_row_keeps_the_layout_the_table_prints():
    r = _rows()[ROW]
    assert (r["tp"], r["pp"], r["cp"], r["vpp"], r["micro_batch"]) == ("1", "4", "1", "1", "2")
    assert r["fp8_recipe"] == "mxfp8" and r["recompute"] == ""  # recompute not stated: searched
    assert "v0.3.1" in r["notes"] and "lines 219-223" in r["notes"]
    s = _rows()[SIBLING]  # the preset's layout, as the 26.02 table prints it
    assert (s["pp"], s["vpp"], s["micro_batch"]) == ("4", "5", "1")


def test_the_printed_layout_cannot_hold_its_activations_without_recompute():
    # Per token and layer at TP 1 under TE's fp8 autocast (test_fp8_saved_inputs_golden.py):
    # two RMSNorms keep their 16-bit input and fp32 rstd, the QKV and fc1 inputs are kept as
    # 1-byte casts, q / k / v and the attention output in 16 bits (plus proj's 1-byte copy of
    # it), the fp32 log-sum-exp per head, the fc1 output (gate and up) in 16 bits and fc2's
    # 1-byte input. Stage 0 holds 20 layers and p = 4 micro-batches of 2 x 8192 tokens.
    h, q, kv, f, a = 8192, 8192, 1024, 28672, 64
    per_token = (2 * (2 * h + 4) + 2 * 1 * h + 2 * q + 2 * (2 * kv) + (2 + 1) * q + 4 * a
                 + 4 * f + 1 * f)
    stage0 = 20 * 4 * (2 * 8192) * per_token
    assert stage0 == pytest.approx(311.7e9, rel=1e-3)
    v = _price(_rows()[ROW], PRINTED + ",recompute=none")
    assert float(v.mem_activations) == pytest.approx(stage0, rel=1e-6)
    # the activations alone exceed what the GPU offers, whatever the ZeRO stage
    assert stage0 > float(v.capacity_bytes)
    # the preset's layout (MBS 1, VP5) fits with no recompute, as the preset runs it
    w = _price(_rows()[ROW], PRESET)
    assert float(w.memory_per_gpu_bytes) < float(w.capacity_bytes)


def test_the_measured_rate_outruns_the_printed_pipeline():
    rows = _rows()
    tokens = 256 * 8192  # GBS x sequence, both rows
    gpus = 64
    step_row = tokens / (gpus * float(rows[ROW]["measured"]))
    step_sib = tokens / (gpus * float(rows[SIBLING]["measured"]))
    p, m_row, m_sib, v_sib = 4, 256 // (16 * 2), 256 // (16 * 1), 5
    # busy time per GPU a step: the step less the idle slots of each schedule
    busy_sib = step_sib * m_sib / (m_sib + (p - 1) / v_sib)
    busy_row = step_row * m_row / (m_row + (p - 1))
    # at the printed layout the measured step needs each token computed about 1.38x as fast as
    # in the 26.02 run of the same model, part, precision and batch
    assert busy_sib / busy_row == pytest.approx(1.384, abs=0.005)
    # the planner prices the two micro-batch sizes alike on this job (GEMMs of 8192 and 16384
    # rows: the same stages at MBS 1 and 2), and the printed layout's bubble as the schedule's
    # p - 1 slots beside m = 8
    r = _price(rows[ROW], PRINTED + ",recompute=none")
    s = _price(rows[ROW], PRINTED.replace("micro_batch=2", "micro_batch=1") + ",recompute=none")
    assert float(s.compute_s) / float(r.compute_s) == pytest.approx(1.0, abs=0.03)
    assert float(r.bubble_s) / float(r.compute_s) == pytest.approx((p - 1) / m_row, rel=0.01)
    # so even with memory set aside the printed layout reads well under the measurement
    assert tokens / gpus / float(r.step_time_s) < 0.75 * float(rows[ROW]["measured"])
