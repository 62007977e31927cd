"""NeMo 1.x (24.03, 24.07): the gradient memory of Apex's DistributedFusedAdam, frameworks.toml
``grad_buffer_bytes``, read from the code (session 18, s18-gradbuf).

Sources read for this test (no expected value below is taken from the code's output):

* NVIDIA/NeMo-Framework-Launcher tag 24.03.01 (5c7e280a) launcher_scripts/conf/training/
  llama/llama2_7b.yaml: megatron_amp_O2 true (line 107: bf16 parameters), optim
  distributed_fused_adam (lines 142-153) with contiguous_grad_buffer true (line 152), no dtype
  and no grad_sync_dtype. Tag 24.07 (8325688d): the same block, lines 149-160 (line 159), and
  the H100 FP8 examples add grad_sync_dtype=bf16 (source nemo-launcher-24-07-recipes).
* NVIDIA/NeMo megatron_base_model.py setup_optimization: optimizer dtype default torch.float32
  (r1.23.0 lines 728-729; main c9c8408f lines 769-770), contiguous_grad_buffer default True
  (line 720 / line 761). NeMo 1.x has no Megatron-Core DDP here: at r2.0.0rc1 (the 24.07 era)
  use_mcore_dist_optim is only optim name mcore_distributed_optim (lines 142-143).
  nemo/core/optim/distributed_adam.py zero_grad: every main_grad a view of the buffer
  (c9c8408f lines 386-393; r2.0.0rc1 line 494).
* NVIDIA/apex c5f6b795 apex/contrib/optimizers/distributed_fused_adam.py: grad_sync_dtype =
  dtype when none is given (lines 574-575); bucket_size = shard_size * distributed_size, each
  bucket at the previous one's offset + size (lines 1373-1376); _init_grad_buffer (lines
  1075-1096): one buffer per dtype group, as long as the last bucket's offset + size, in
  grad_sync_dtype; zero_grad makes param.grad a view only where param.dtype == grad_sync_dtype
  (lines 1491-1494); _grad_copy adds .grad into the bucket, then param.grad = None (line 1571).

Derivation: the buffer spans every bucket in full, so it holds a gradient for every local
parameter whatever the DP degree, in grad_sync_dtype: float32 (32 bits) where the recipe sets
none, 4 bytes; bfloat16 (16 bits) with the 24.07 examples' key, 2 bytes. No 16-bit .grad is
kept beside the fp32 buffer (freed by the hook); with bf16 the .grad is the buffer itself.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import LAYOUT_16K, LLAMA2_7B_TP2_LOCAL_PARAMS, nemo_16k_row_problem
from scalemodel.analytic.planner import evaluate_one
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

ROOT = Path(__file__).resolve().parents[2] / "validation"

BITS = {"float32": 32, "bfloat16": 16}


def _sync_dtype(grad_sync_dtype: str | None, dtype: str = "float32") -> str:
    # Apex lines 574-575 (None -> the optimizer dtype); NeMo's optimizer dtype default float32
    return dtype if grad_sync_dtype is None else grad_sync_dtype


def test_source_entries_name_files_commits_and_lines():
    t = all_sources()["nemo-1-x-apex-dist-adam-grad-buffer"].title
    for part in ("5c7e280a", "llama2_7b.yaml", "line 107", "(line 152)", "lines 142-153",
                 "e772dbf5", "c9c8408f", "lines 761 and 769-770", "c5f6b795",
                 "distributed_fused_adam.py", "lines 574-575", "lines 1373-1376",
                 "lines 1075-1096", "lines 1491-1494", "(line 1571)", "lines 386-393"):
        assert part in t, part
    t = all_sources()["nemo-2407-apex-dist-adam-bf16-grad-buffer"].title
    for part in ("8325688d", "(line 159)", "579983fb", "lines 142-143", "line 777",
                 "line 494", "f3f04924", "line 587", "lines 1099-1129", "lines 1534-1537"):
        assert part in t, part


def test_nemo_24_03_keeps_a_4_byte_buffer_and_24_07_a_2_byte_one():
    b2403 = BITS[_sync_dtype(None)] // 8  # the 24.03.01 recipes set no grad_sync_dtype
    b2407 = BITS[_sync_dtype("bfloat16")] // 8  # the 24.07 examples' grad_sync_dtype=bf16
    assert (b2403, b2407) == (4, 2)
    f03, f07 = get_framework("nemo-24.03"), get_framework("nemo-24.07")
    assert f03.values["grad_buffer_bytes"] == b2403
    assert f03.sources["grad_buffer_bytes"] == "nemo-1-x-apex-dist-adam-grad-buffer"
    assert f07.values["grad_buffer_bytes"] == b2407  # its own, not inherited from 24.03
    assert f07.sources["grad_buffer_bytes"] == "nemo-2407-apex-dist-adam-bf16-grad-buffer"
    # Apex reduce-scatters the buffer it keeps: one dtype for both fields (read separately)
    for fw in (f03, f07):
        assert fw.values["grad_buffer_bytes"] == fw.values["grad_reduce_bytes"]


def test_the_16k_rows_memory_carries_the_fp32_buffer():
    # Llama 2 7B at the 16K row's layout TP2 PP1 DP8: parameters per GPU counted by hand in
    # conftest (LLAMA2_7B_TP2_LOCAL_PARAMS)
    local, lay = LLAMA2_7B_TP2_LOCAL_PARAMS, LAYOUT_16K
    assert local == 3_369_340_928
    p = nemo_16k_row_problem()
    assert p.job.framework_id == "nemo-24.03"
    v = evaluate_one(p.job, p.cluster, lay).values
    # the same job under the bf16-buffer profile: every other memory term is the same, so the
    # difference is (4 - 2) bytes for every local parameter
    v2 = evaluate_one(dataclasses.replace(p.job, framework_id="nemo-24.07"), p.cluster, lay).values
    assert float(v.memory_per_gpu_bytes - v2.memory_per_gpu_bytes) == pytest.approx(
        (4 - 2) * local, rel=1e-9)
    assert bool(v.fits)  # 57.0 GB against the 79.2 GB the row's H100 leaves usable


def test_memory_command_prices_4_bytes_unsharded_by_the_distributed_optimizer(capsys):
    from scalemodel.cli import main

    out = {}
    for dp in (8, 16):
        args = ["memory", "--model", "llama-2-7b", "--framework", "nemo-24.03", "--tp", "2",
                "--dp", str(dp), "--zero", "1", "--seq-len", "16384", "--json"]
        assert main(args) == 0
        out[dp] = json.loads(capsys.readouterr().out)["breakdown"]
    # bf16 weights 2 B, the fp32 buffer 4 B, per local parameter, at either DP degree
    assert out[8]["grads"] == pytest.approx(2 * out[8]["params"], rel=1e-12)
    assert out[8]["grads"] == pytest.approx(4 * 3_369_340_928, rel=1e-12)
    assert out[16]["grads"] == pytest.approx(out[8]["grads"], rel=1e-12)
