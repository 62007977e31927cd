"""Transformer Engine's fused MXFP8 grouped MLP (frameworks.toml moe_recipes fused_grouped_mlp).

Sources:
* Megatron-Bridge v0.5.0 scripts/performance/configs/qwen/qwen3_workload_base_configs.py:
  QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1 sets cutedsl_fused_grouped_mlp=True (line 363),
  and scripts/performance/perf_plugins.py (line 308-309) exports NVTE_CUTEDSL_FUSED_GROUPED_MLP=1
  for it; the BF16 and B200 presets do not set it.
* TransformerEngine 4220403e (pinned by v0.5.0 pyproject.toml line 131),
  pytorch/ops/fused/forward_grouped_mlp.py: the fc1 kernel returns the GLU input (c_tensor) and
  the SwiGLU output already quantised MXFP8 row- and column-wise (d_tensor, d_col_tensor);
  backward_grouped_mlp.py: the fc2 dgrad kernel reads c_tensor and writes the fc1 output
  gradient quantised both ways (d_row_tensor, d_col_tensor).

Derivation, in the planner's own byte accounting (planner.toml [nongemm], 2-byte activations):
forward, the SwiGLU pass (read 2 x width, write width: 3 x 2 B) and the MXFP8 cast's read of
its input (2 B) go: 8 B per routed width element; backward, the dSwiGLU pass (2 x 6 B) and the
cast's read of the 2 x width gradient (2 x 2 B) go, the epilogue's read of c (2 x 2 B) stays:
12 B. Qwen3-30B-A3B: top_k 8, expert width 768 -> 6,144 routed width per token; micro-batch 8 x
4,096 = 32,768 tokens; 48 layers; TP1. Per micro-batch 20 B x 32,768 x 6,144 x 48 bytes at
0.8 x 8.0 TB/s (GB300 HBM, planner.toml [gemm] hbm_efficiency).
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.planner import constants, evaluate_one, make_cluster, make_job
from scalemodel.analytic.step import elementwise
from scalemodel.specs import get_gpu, get_model

LAYOUT = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 8, "zero": 1, "vpp": 1, "micro_batch": 8,
          "recompute": "none"}


def _values(framework: str, gpu: str = "gb300", fp8_scaling: str = "mxfp8"):
    j = make_job(get_model("qwen3-30b-a3b"), seq_len=4096, global_batch_seqs=512,
                 precision="fp8", framework_id=framework, fp8_scaling=fp8_scaling)
    return evaluate_one(j, make_cluster(gpu, 8, nvlink_domain=72), LAYOUT).values


def test_saving_is_the_derived_bytes(monkeypatch):
    fused = _values("nemo-26.06")
    monkeypatch.setattr(elementwise, "moe_fused_grouped_mlp", lambda *a, **k: False)
    plain = _values("nemo-26.06")
    hbm = get_gpu("gb300").hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    per_mb = (8 + 12) * 32768 * (8 * 768) * 48 / hbm  # 30.2 ms
    mb = 512 // 8 // 8  # micro-batches per step on each data-parallel rank
    assert plain.nongemm_s - fused.nongemm_s == pytest.approx(mb * per_mb, rel=1e-9)
    assert per_mb == pytest.approx(0.0302, abs=2e-4)


def test_off_where_the_recipe_or_the_scaling_does_not_run_it():
    # nemo-26.04 (Megatron-Bridge v0.4.2) presets do not set it; under current scaling the
    # MXFP8-only fused op is not taken
    from scalemodel.analytic.step.config import moe_fused_grouped_mlp

    gb300 = get_gpu("gb300")
    j = make_job(get_model("qwen3-30b-a3b"), seq_len=4096, global_batch_seqs=512,
                 precision="fp8", framework_id="nemo-26.06")
    assert moe_fused_grouped_mlp(j, gb300, "mxfp8")
    assert not moe_fused_grouped_mlp(j, gb300, "current")
    j4 = make_job(get_model("qwen3-30b-a3b"), seq_len=4096, global_batch_seqs=512,
                  precision="fp8", framework_id="nemo-26.04")
    assert not moe_fused_grouped_mlp(j4, gb300, "mxfp8")
    jb = make_job(get_model("qwen3-30b-a3b"), seq_len=4096, global_batch_seqs=512,
                  precision="bf16", framework_id="nemo-26.06")
    assert not moe_fused_grouped_mlp(jb, gb300, "mxfp8")
    # DeepSeek-V3 and Qwen3-235B-A22B on B300 (v0.5.0 FP8_MX_V2 = FP8_CS_V2): not set
    jd = make_job(get_model("deepseek-v3"), seq_len=4096, global_batch_seqs=4096,
                  precision="fp8", framework_id="nemo-26.06")
    assert not moe_fused_grouped_mlp(jd, get_gpu("b300"), "mxfp8")
    assert moe_fused_grouped_mlp(jd, get_gpu("gb200"), "mxfp8")
