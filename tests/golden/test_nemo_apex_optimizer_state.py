"""NeMo 1.x (24.03, 24.07): the optimizer state of Apex's DistributedFusedAdam with 16-bit
parameter remainders, and the parallelisms of that path (session 18, s18-nemo1x).

Sources read for this test (no expected value below is taken from the code's output):

* NVIDIA/NeMo megatron_base_model.py setup_optimization with distributed_fused_adam: the
  optimizer dtype defaults to torch.float32, param_sync_dtype is the bf16 autocast dtype under
  megatron_amp_O2, and with an fp32 optimizer over bf16 parameters (no fp8_params) it sets
  store_params False and store_param_remainders True (main c9c8408f lines 783-785; branch
  r1.23.0 lines 748-750; tag r2.0.0rc1 lines 802-804). MegatronDistributedFusedAdam shards over
  the data-parallel group with context parallelism (nemo/core/optim/distributed_adam.py
  c9c8408f lines 72-73). The same file refuses FP8 under PyTorch FSDP (c9c8408f lines
  983-984), NeMo 1.x's only other sharding.
* NVIDIA/NeMo-Framework-Launcher tags 24.03.01 / 24.07: the Llama, Nemotron and GPT-3 recipes
  train bf16 with megatron_amp_O2 true and distributed_fused_adam with no dtype, store_params
  or fp8_params (llama/llama2_7b.yaml lines 18, 107 and 142-153 at 24.03.01).
* NVIDIA/apex c5f6b795 apex/contrib/optimizers/distributed_fused_adam.py: a StateBucket keeps
  an int16 param_remainders_shard of shard_size (lines 447-453) instead of the fp32
  params_shard, beside exp_avg_shard and exp_avg_sq_shard of shard_size in the fp32 optimizer
  dtype (lines 455-466); shard_size = bucket_size / distributed_size (lines 1345-1347).
  csrc/optimizers/multi_tensor_distopt_adam_kernel.cu DistAdamWithParamRemaindersFunctor
  (line 204 on): loads the bf16 parameter, the remainder, m, v and the gradient in the bucket's
  grad_sync_dtype (lines 264-268), stores remainder, m, v and the bf16 sync shard (315-318).

Derivation: per parameter of the rank's shard, int16 (16 bits) + 2 x float32 (32 bits) =
2 + 4 + 4 = 10 bytes, where the default Adam's fp32 master + m + v is 4 + 4 + 4 = 12; the
kernel moves 2 + 2 + 4 + 4 + g read and 2 + 4 + 4 + 2 written, g = 4 (fp32 gradients, 24.03)
or 2 (bf16, the 24.07 examples): 28 or 26 bytes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import LAYOUT_16K, LLAMA2_7B_TP2_LOCAL_PARAMS
from scalemodel.analytic.planner import evaluate_one, search
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.validate import read_rows, row_problem
from scalemodel.specs import get_gpu, optimizer
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

ROOT = Path(__file__).resolve().parents[2] / "validation"
BYTES = {"int16": 16 // 8, "bfloat16": 16 // 8, "float32": 32 // 8}
# Llama 2 7B at TP2 (the 16K row's layout): parameters per GPU counted by hand in conftest
LOCAL_TP2, LAY_16K = LLAMA2_7B_TP2_LOCAL_PARAMS, LAYOUT_16K


def _row(fname: str, rid: str):
    rows = {r["id"]: r for r in read_rows((ROOT / fname).read_text())}
    return row_problem(rows[rid])


def test_source_entries_name_files_commits_and_lines():
    src = all_sources()
    t = src["apex-dist-adam-param-remainders"].title
    for part in ("c5f6b795", "distributed_fused_adam.py", "lines 647-662", "lines 447-453",
                 "lines 455-466", "lines 1302-1306", "lines 1345-1347", "f3f04924",
                 "f9f19d5c", "10 B"):
        assert part in t, part
    t = src["nemo-1-x-apex-dist-adam-remainders"].title
    for part in ("megatron_base_model.py", "c9c8408f", "lines 783-785", "e772dbf5",
                 "749-750", "579983fb", "802-804", "distributed_adam.py", "lines 72-73",
                 "5c7e280a", "8325688d", "fp8_params"):
        assert part in t, part
    t = src["apex-dist-adam-remainder-kernel"].title
    for part in ("multi_tensor_distopt_adam_kernel.cu", "c5f6b795", "line 204",
                 "lines 264-268", "lines 315-318", "line 412"):
        assert part in t, part
    t = src["nemo-1-x-parallelisms"].title
    for part in ("c9c8408f", "line 150", "line 244", "lines 603-610", "lines 983-984",
                 "lines 944-947", "lines 975-981", "24.03.01", "24.07"):
        assert part in t, part


def test_optimizer_entry_is_the_apex_buckets_bytes():
    rem = BYTES["int16"]  # param_remainders_shard
    m = v = BYTES["float32"]  # exp_avg_shard, exp_avg_sq_shard in the fp32 optimizer dtype
    assert rem + m + v == 10
    o = optimizer("adam-apex-param-remainders")
    assert (o.master_bytes, o.state_bytes) == (rem, m + v)
    # the inherited default: an fp32 master copy (store_params, as with fp8_params)
    a = optimizer("adam")
    assert a.master_bytes + a.state_bytes == BYTES["float32"] * 3 == 12


def test_both_profiles_price_the_remainders_and_the_kernels_bytes():
    read = lambda g: BYTES["bfloat16"] + BYTES["int16"] + 2 * BYTES["float32"] + g  # noqa: E731
    written = BYTES["int16"] + 2 * BYTES["float32"] + BYTES["bfloat16"]
    for fid, g in (("nemo-24.03", BYTES["float32"]), ("nemo-24.07", BYTES["bfloat16"])):
        fw = get_framework(fid)
        assert fw.values["optimizer"] == "adam-apex-param-remainders"
        assert fw.sources["optimizer"] == "nemo-1-x-apex-dist-adam-remainders"
        # the gradient the kernel reads is the reduced shard, in the reduce dtype
        assert fw.values["grad_reduce_bytes"] == g
        assert fw.values["optimizer_step_bytes"] == {"adam-apex-param-remainders":
                                                     read(g) + written}
    assert read(4) + written == 28 and read(2) + written == 26


def test_profiles_offer_no_zero2_or_zero3():
    for fid in ("nemo-24.03", "nemo-24.07"):
        fw = get_framework(fid)
        par = set(fw.values["parallelisms"])
        assert "zero1" in par and not par & {"zero2", "zero3"}
        assert fw.sources["parallelisms"] == "nemo-1-x-parallelisms"


def test_the_16k_rows_optimizer_state_is_10_bytes_over_dp():
    assert LOCAL_TP2 == 3_369_340_928
    p = _row("published_runs_2026.csv", "nemo-cp-llama2-7b-h100-16k")
    assert p.job.framework_id == "nemo-24.03"
    assert p.job.optimizer_id == "adam-apex-param-remainders"
    v = evaluate_one(p.job, p.cluster, LAY_16K).values
    assert float(v.mem_optimizer) == pytest.approx(LOCAL_TP2 / 8 * 10, rel=1e-9)
    # the same job with an fp32 master copy (--optimizer adam): 2 B more per shard parameter,
    # and the same optimizer-step time (28 B per shard parameter either way, fp32 gradients)
    va = evaluate_one(dataclasses.replace(p.job, optimizer_id="adam"), p.cluster, LAY_16K).values
    assert float(va.memory_per_gpu_bytes - v.memory_per_gpu_bytes) == pytest.approx(
        2 * LOCAL_TP2 / 8, rel=1e-9)
    assert float(va.optimizer_s) == pytest.approx(float(v.optimizer_s), rel=1e-12)


def test_the_24_07_step_moves_2_bytes_less_per_shard_parameter():
    p = _row("published_runs_2026.csv", "nemo-llama2-7b-h100-2407")
    assert p.job.framework_id == "nemo-24.07"
    lay = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 1, "vpp": 1,
           "micro_batch": 1, "recompute": "none"}
    v = evaluate_one(p.job, p.cluster, lay).values
    va = evaluate_one(dataclasses.replace(p.job, optimizer_id="adam"), p.cluster, lay).values
    # Llama 2 7B unsplit: 6,738,415,616 parameters, a shard of 1/8 each over DP 8
    shard = 6_738_415_616 / 8
    assert float(v.mem_optimizer) == pytest.approx(shard * 10, rel=1e-9)
    hbm = get_gpu("h100-sxm").hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    # adam: the planner's one fused pass, 2 x 12 + 2 x 2 = 28 B; the remainder kernel: 26 B
    assert float(va.optimizer_s - v.optimizer_s) == pytest.approx(shard * (28 - 26) / hbm,
                                                                  rel=1e-9)


def test_the_long_sequence_rows_search_zero1():
    # the 1M row (TP8 CP32 DP4): the search tied ZeRO-2 with ZeRO-1 in time and reported ZeRO-2
    p = _row("published_runs_2026.csv", "nemo-cp-llama2-7b-h100-1024k")
    fixed = {"tp": 8, "pp": 1, "dp": 4, "cp": 32, "ep": 1, "vpp": 1, "micro_batch": 1,
             "recompute": "none"}
    best = search(p.job, p.cluster, fixed, top=0).best
    assert int(best.layout["zero"]) == 1


def test_memory_command_shows_10_bytes_and_refuses_zero2(capsys):
    from scalemodel.cli import main

    args = ["memory", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--framework", "nemo-24.03",
            "--precision", "fp8", "--tp", "2", "--dp", "8", "--seq-len", "16384",
            "--global-batch", "256", "--zero", "1", "--json"]
    assert main(args) == 0
    b = json.loads(capsys.readouterr().out)["breakdown"]
    assert b["optimizer"] == pytest.approx(LOCAL_TP2 / 8 * 10, rel=1e-12)
    assert b["grads"] == pytest.approx(4 * LOCAL_TP2, rel=1e-12)
    bad = [*args[:-2], "2", "--json"]  # --zero 2
    assert main(bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "zero=2" in err[0] and "nemo-24.03" in err[0]
