"""The Llama 3.1 405B GB200 FP8 runs' allocator setting as the nemo profiles record it
(frameworks.toml model_recipes allocator_slack), read at the tag named here, and the usable
memory it gives, derived by hand.

Megatron-Bridge's performance launcher sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for
the Llama 3.1 405B pre-training runs on GB200 at FP8-CS (fp8_cs) and FP8-MX (fp8_mx), and for
no other Llama pre-training run:

- 9a5e7986 (the 25.09 scripts) scripts/performance/setup_experiment.py lines 116-118;
- v0.2.0 scripts/performance/perf_plugins.py PerfEnvPlugin._set_model_specific_environment_variables
  lines 250-252, v0.2.1 and v0.2.2 lines 252-254 (the 25.11 container);
- v0.3.0 and v0.3.1 lines 262-269 (26.02 and 26.02.01);
- v0.4.0 lines 262-269 and v0.4.2 lines 265-272 (26.04 and 26.04.01): gpu in gb200 or gb300.

Before v0.5.0 the Slurm executor's PERF_ENV_VARS (utils/executors.py) carry no allocator setting,
so every other recipe of those containers runs the plain caching allocator (the profile's 0.05
assumption). The release's 256-GPU V2 preset for GB200 FP8-CS
(LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2, configs/llama/llama31_workload_base_configs.py
lines 262-272 at v0.3.0, the same text at v0.3.1, v0.4.0 and v0.4.2) sets TP4 PP16 CP1 VP4,
use_megatron_fsdp=False and cpu_offloading_num_layers=None, and no recompute field (the
WorkloadBaseConfig default None, utils/utils.py line 57 at v0.3.0), so the run recomputes
nothing and offloads nothing. Expandable segments is the launcher setting that differs from what
the profile priced.
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.memory import usable_memory
from scalemodel.specs.frameworks import (
    _model_recipes_ok,
    allocator_slack_of,
    get_framework,
)

MODEL = "llama-3-405b"
SOURCE = "megatron-bridge-405b-expandable-segments"
# GB200: nvidia-smi memory total 189471 MiB (gpus.toml gb200 hbm_bytes, source
# nvidia-smi-memory-gb200); the nemo profiles' CUDA context 723 MiB (reserved_bytes, source
# pytorch-cuda-context-forum) and NCCL buffers 768 MiB per communicator (nccl_comm_bytes:
# 2 connections x 32 channels x (10 + 2) MiB). TP4 PP16 DP4 has 3 communicators (TP, PP, DP).
MIB = 1 << 20
HBM = 189471 * MIB
R = 723 * MIB
R_NCCL = 2 * 32 * (10 + 2) * MIB
N_COMM = 3


@pytest.mark.parametrize("fid", ["nemo-25.09", "nemo-25.11", "nemo-26.02", "nemo-26.04"])
@pytest.mark.parametrize("scaling", ["current", "mxfp8"])
def test_405b_gb200_fp8_runs_have_no_allocator_slack(fid: str, scaling: str) -> None:
    values = get_framework(fid).values
    assert allocator_slack_of(values, MODEL, "gb200", scaling) == (0.0, SOURCE)
    # every other recipe keeps the profile's own assumption
    assert allocator_slack_of(values, MODEL, "gb200", "bf16") == (0.05, None)
    assert allocator_slack_of(values, "llama-3-70b", "gb200", scaling) == (0.05, None)


def test_gb300_joins_at_v040_only() -> None:
    # v0.4.0 perf_plugins.py line 266 adds gb300; v0.3.x line 266 names gb200 alone
    assert allocator_slack_of(get_framework("nemo-26.04").values, MODEL, "gb300",
                              "current") == (0.0, SOURCE)
    assert allocator_slack_of(get_framework("nemo-26.02").values, MODEL, "gb300",
                              "current") == (0.05, None)


def test_usable_memory_of_the_v2_layout_by_hand() -> None:
    # (M_hbm - R - n_comm R_nccl) / (1 + f): f = 0 for the recipe, f = 0.05 for the profile
    plain = (HBM - R - N_COMM * R_NCCL) / 1.05
    expandable = HBM - R - N_COMM * R_NCCL
    assert expandable == 195_500_703_744
    assert float(usable_memory(HBM, N_COMM, "nemo-26.02")) == pytest.approx(plain, rel=1e-12)
    assert float(usable_memory(HBM, N_COMM, "nemo-26.02", model_id=MODEL, gpu_id="gb200",
                               precision="current")) == pytest.approx(expandable, rel=1e-12)
    # --mem-fraction still replaces the whole reserve
    assert float(usable_memory(HBM, N_COMM, "nemo-26.02", 0.9, model_id=MODEL,
                               gpu_id="gb200", precision="current")) == pytest.approx(HBM * 0.9)


def test_bad_allocator_slack_entries_are_refused() -> None:
    ok = {"model": MODEL, "gpu": "gb200", "precision": "current", "allocator_slack": 0.0,
          "source": SOURCE}
    assert _model_recipes_ok([ok])
    assert not _model_recipes_ok([{**ok, "allocator_slack": 1.0}])
    assert not _model_recipes_ok([{**ok, "allocator_slack": -0.1}])
    assert not _model_recipes_ok([{**ok, "allocator_slack": True}])
    assert not _model_recipes_ok([{**ok, "allocator_slack": "0"}])
    assert not _model_recipes_ok([{**ok, "source": "no-such-source"}])
