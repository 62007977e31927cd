"""Passes over the gradient buffer that two frameworks make beyond the fused optimizer step, priced
as HBM traffic (frameworks.toml ``unsharded_step_grad_bytes`` once per step and
``unsharded_grad_pass_bytes`` per micro-batch, analytic/step/optimizer.py), derived from the code:

* Megatron-Core at core_r0.8.0 (baf94af3), the README's H100 table: train_step calls
  zero_grad_buffer() every iteration (ParamAndGradBuffer.reset: grad_data.zero_(), 4 bytes
  written per local parameter of the fp32 buffer, which --bf16 forces and the distributed
  optimizer does not shard under bf16), and Bucket.start_grad_sync takes grad_data.norm(p=2) of
  every bucket before its reduce-scatter while check_for_nan_in_loss_and_grad is on (the
  default): 4 bytes read. 8 bytes per local parameter per step.
  The same buffer is the gradient memory: fp32, 4 bytes per local parameter where the
  planner's default counts the 16-bit weights' 2 (theoretical_memory_usage.py at core_r0.8.0:
  6 + 12 / dp bytes per parameter with the distributed optimizer = 2 + 4 + 12 / dp).
* DeepSpeed's BF16_Optimizer at 56c522386 (PR #1801, bf16 with the pipeline engine; BLOOM 176B):
  after every micro-batch's backward update_hp_grads runs hp_grad.add_(lp.grad.to(fp32)): the
  cast writes a new fp32 tensor (2 read, 4 written) and the add reads both and writes (4 + 4 + 4),
  18 bytes where Megatron's DDP hook of the parent profile counts 10 (planner.toml
  grad_accum_bytes); step() takes the norm of the fp32 gradients (4 read) and clear_hp_grads
  zeroes them (4 written): 8 per step; _bf16_reduce_grads all-reduces the fp32 gradients (4 bytes
  per element where the parent's fp16-era profile reduces 2).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from scalemodel.analytic.params import count_params
from scalemodel.analytic.planner import search
from scalemodel.analytic.validate import row_model, row_problem
from scalemodel.specs import get_gpu

ROWS = Path(__file__).resolve().parents[2] / "validation" / "published_runs_papers.csv"
HBM_EFFICIENCY = 0.8  # planner.toml [gemm] hbm_efficiency (memory-bound kernels)


def _row(rid: str, **over: str) -> dict[str, str]:
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(ROWS.read_text()))}
    return {**rows[rid], **over}


def _priced_cluster(row: dict[str, str]):
    return row_problem(row).cluster


def _priced(row: dict[str, str], layout: dict):
    p = row_problem(row)
    return search(p.job, p.cluster, {**p.stated, **layout}, top=0).best.values


def test_megatron_core_r080_zeroes_and_norms_the_fp32_grad_buffer_each_step() -> None:
    lay = {"tp": 1, "pp": 1, "dp": 48, "cp": 1, "ep": 1, "etp": 1, "zero": 1, "vpp": 1,
           "micro_batch": 4, "recompute": "none"}
    row = _row("mcore-r080-gpt-1.7b-h100")
    assert row["framework"] == "megatron-core-0.8"
    with_passes = _priced(row, lay)
    # the parent profile prices the same optimizer step without the two passes
    without = _priced(_row("mcore-r080-gpt-1.7b-h100", framework="megatron-core"), lay)
    gpu = get_gpu("h100-sxm")
    assert gpu.hbm_bytes_per_s == pytest.approx(3.35e12, rel=0.01)  # H100 SXM datasheet
    n_local = count_params(row_model(row)).total  # TP1 PP1: every parameter on every GPU
    want = n_local * (4 + 4) / (gpu.hbm_bytes_per_s * HBM_EFFICIENCY)
    assert float(with_passes.optimizer_s - without.optimizer_s) == pytest.approx(want, rel=1e-6)
    assert want == pytest.approx(5.2e-3, rel=0.03)  # 1.75e9 x 8 B / 2.68 TB/s


def test_deepspeed_bf16_optimizer_accumulates_in_fp32_with_a_separate_cast() -> None:
    lay = {"tp": 4, "pp": 12, "dp": 8, "cp": 1, "ep": 1, "etp": 4, "zero": 0, "vpp": 1,
           "micro_batch": 1, "recompute": "full"}
    row = _row("bloom-176b-384")
    assert row["framework"] == "megatron-deepspeed-2022-bf16"
    bf16 = _priced(row, lay)
    fp16_era = _priced(_row("bloom-176b-384", framework="megatron-deepspeed-2021"), lay)
    mb = float(bf16.microbatches)
    assert mb == 2048 / 8
    # per micro-batch: 2 + 4 (cast) + 4 + 4 + 4 (add) = 18 bytes against the hook's 10
    assert float(bf16.grad_acc_s / fp16_era.grad_acc_s) == pytest.approx(18 / 10, rel=1e-9)
    # once per step over the same local parameters: norm 4 + zero 4 = 8 bytes (8/18 of one
    # micro-batch's accumulation pass); the Adam step itself runs on the 1/dp partition the
    # optimizer keeps (bf16_optimizer.py at 56c522386 lines 146-159, 202: optimizer_shards_states)
    per_mb_pass = float(bf16.grad_acc_s) / mb
    assert float(bf16.optimizer_s) == pytest.approx(
        float(fp16_era.optimizer_s) / 8 + per_mb_pass * 8 / 18, rel=1e-6)
    # the gradient all-reduce in fp32: twice the bytes of the 2021 profile's 16-bit reduce
    # (ring time is bandwidth-bound at 3.7 GB per GPU; the latency term moves it by < 1%), and
    # the bf16 weights all-gathered over DP after the step (all_gather_dp_groups, line 359; DP
    # ranks TP 4 apart, two to a node)
    from scalemodel.analytic.step.comm import collective_time

    ag = float(collective_time("all_gather", float(fp16_era.mem_params), 8.0, 2.0,
                               _priced_cluster(row)))
    assert float((bf16.dp_raw_s - ag) / fp16_era.dp_raw_s) == pytest.approx(2.0, rel=0.01)
    # compute other than the accumulation pass is the same code
    assert float(bf16.attention_s) == pytest.approx(float(fp16_era.attention_s), rel=1e-9)


def test_megatron_core_r080_keeps_fp32_main_grads_in_memory(capsys) -> None:
    lay = {"tp": 8, "pp": 4, "dp": 48, "cp": 1, "ep": 1, "etp": 8, "zero": 1, "vpp": 23,
           "micro_batch": 2, "recompute": "none"}
    row = _row("mcore-r080-gpt-119b-h100")
    fp32 = _priced(row, lay)
    # a profile with a bf16 main_grad buffer (Megatron-Bridge's performance presets set
    # grad_reduce_in_fp32 False; megatron-core itself now keeps fp32, test_grad_buffer_profiles.py)
    bf16 = _priced(_row("mcore-r080-gpt-119b-h100", framework="nemo-25.09"), lay)
    assert float(fp32.mem_grads / bf16.mem_grads) == pytest.approx(4 / 2, rel=1e-12)
    assert float(fp32.mem_params) == pytest.approx(float(bf16.mem_params), rel=1e-12)
    # theoretical_memory_usage.py: 6 + 12 / dp bytes per parameter of the stage (weights,
    # gradients and the distributed optimizer's shard) - here in bytes per weight byte
    per_param = (fp32.mem_params + fp32.mem_grads + fp32.mem_optimizer) / (fp32.mem_params / 2)
    assert float(per_param) == pytest.approx(6 + 12 / 48, rel=1e-6)
    # `scalemodel memory --framework` reads the same profile field, and --grad-dtype overrides it
    from scalemodel.cli import main

    args = ["memory", "--model", "llama-3-8b", "--tp", "1", "--dp", "8", "--zero", "1",
            "--json"]
    assert main([*args, "--framework", "megatron-core-0.8"]) == 0
    g4 = json.loads(capsys.readouterr().out)
    assert main([*args, "--framework", "megatron-core-0.8", "--grad-dtype", "bf16"]) == 0
    g2 = json.loads(capsys.readouterr().out)
    assert g4["breakdown"]["grads"] == pytest.approx(2 * g2["breakdown"]["grads"], rel=1e-12)
    assert g4["breakdown"]["grads"] == pytest.approx(4 * g4["breakdown"]["params"] / 2, rel=1e-12)
