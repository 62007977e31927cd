"""The gradient buffer Megatron-Core's DistributedDataParallel keeps and reduces from, per profile
(frameworks.toml ``grad_buffer_bytes`` for memory, ``grad_reduce_bytes`` for the DP traffic),
read from the code:

* Megatron-LM core_v0.16.0, megatron/training/arguments.py validate_args: with --bf16,
  accumulate_allreduce_grads_in_fp32 is set unless --grad-reduce-in-bf16 is given or
  --main-grads-dtype is bf16 (its default is fp32); training.py get_model passes it as
  DistributedDataParallelConfig(grad_reduce_in_fp32=...). distributed_data_parallel.py:
  ``grad_dtype = torch.float if self.ddp_config.grad_reduce_in_fp32 else param.dtype``, the
  dtype of the buffer every main_grad lives in and that the bucket's reduce runs on. The same
  line at the Megatron-Core commits that Megatron-Bridge v0.2.1 (0d8e0714), v0.3.0 (b0cc2706)
  and v0.4.2 (2edffadb) pin; v0.5.0 (d0b3b775) and v0.6.0 (cd4afffa) group buffers with
  param_and_grad_buffer.py group_params_for_buffers, grad dtype by the same rule.
  So the buffer and the reduce are one fact: 4 and 4 bytes for the megatron-core profile.
* Megatron-Bridge performance presets: 9a5e7986 (the 25.09 scripts)
  scripts/performance/configs/qwen3/qwen3_235b_a22b_llm_pretrain.yaml (and the llama3, llama31
  and deepseek yaml files) ``ddp: grad_reduce_in_fp32: false``; v0.2.1 to v0.5.0
  scripts/performance/configs/qwen3 (qwen)/qwen3_llm_pretrain.py set_qwen3_common_configs and
  deepseek/deepseek_llm_pretrain.py set_deepseek_v3_common_configs (llama3, llama31 likewise):
  ``cfg.mixed_precision.grad_reduce_in_fp32 = False; cfg.ddp.grad_reduce_in_fp32 = False``;
  v0.6.0 src/megatron/bridge/perf_recipes/_common.py _benchmark_common sets both False (the
  library's MixedPrecisionConfig default and bf16_mixed are True). With the rule above: a bf16
  buffer and a bf16 reduce, 2 and 2 bytes, for every nemo-25.09+ profile.
"""

from __future__ import annotations

import json

import pytest

from scalemodel.specs.frameworks import get_framework

NEMO = ["nemo-25.09", "nemo-25.11", "nemo-26.02", "nemo-26.04", "nemo-26.06", "nemo-26.08"]


def test_megatron_core_keeps_and_reduces_fp32_main_grads() -> None:
    fw = get_framework("megatron-core")
    assert fw.get("grad_buffer_bytes") == 4  # torch.float main_grad buffer
    assert fw.get("grad_reduce_bytes") == 4  # the reduce runs on that buffer
    assert fw.sources["grad_buffer_bytes"] == "megatron-core-v016-fp32-grad-buffer"
    # core_r0.8.0's profile: the same rule read at its own release
    assert get_framework("megatron-core-0.8").get("grad_buffer_bytes") == 4


@pytest.mark.parametrize("fid", NEMO)
def test_megatron_bridge_perf_presets_reduce_in_bf16(fid: str) -> None:
    fw = get_framework(fid)
    assert fw.get("grad_buffer_bytes") == 2  # grad_reduce_in_fp32 False: params dtype (bf16)
    assert fw.get("grad_reduce_bytes") == 2  # reduced from that buffer
    assert fw.sources["grad_buffer_bytes"] == "megatron-bridge-perf-grad-reduce-bf16"
    assert fw.sources["grad_reduce_bytes"] == "megatron-bridge-perf-grad-reduce-bf16"


@pytest.mark.parametrize("fid", ["megatron-core", "megatron-core-0.8", "megatron-lm-2021", *NEMO])
def test_megatron_ddp_profiles_reduce_the_buffer_they_keep(fid: str) -> None:
    # one fact in Megatron's DDP: the bytes kept per gradient are the bytes reduced
    fw = get_framework(fid)
    assert fw.get("grad_buffer_bytes") == fw.get("grad_reduce_bytes")


def test_profiles_without_their_own_reading_keep_their_earlier_gradient_memory() -> None:
    # not Megatron-Core's DDP (or not read): an explicit 2 that the megatron-core change leaves
    # (deepseek-hai-llm has its reading since 2026-12-03: tests/golden/test_deepseek_v3_storage.py;
    # nemo-24.03 and nemo-24.07 since 2026-12-07: tests/golden/test_nemo_apex_grad_buffer.py)
    for fid in ("meta-llama3-2024",):
        fw = get_framework(fid)
        assert fw.get("grad_buffer_bytes") == 2
        assert fw.sources["grad_buffer_bytes"] == "scalemodel-assumption"


def test_memory_prices_the_profiles_buffer(capsys) -> None:
    from scalemodel.cli import main

    args = ["memory", "--model", "llama-3-8b", "--tp", "1", "--dp", "8", "--zero", "1", "--json"]
    out = {}
    for fid in ("megatron-core", "nemo-26.04"):
        assert main([*args, "--framework", fid]) == 0
        out[fid] = json.loads(capsys.readouterr().out)["breakdown"]
    mc, nemo = out["megatron-core"], out["nemo-26.04"]
    assert mc["params"] == pytest.approx(nemo["params"], rel=1e-12)  # bf16 weights both
    # fp32 main_grad (4 B) against the bf16 weights' 2 B; bf16 main_grad equal to the weights
    assert mc["grads"] == pytest.approx(4 / 2 * mc["params"], rel=1e-12)
    assert nemo["grads"] == pytest.approx(nemo["params"], rel=1e-12)
