"""The GPU floor of the tiny kernels after an MoE dispatcher's wait (analytic/step/host.py).

Source of the floor: Hazy Research, 'Look Ma, No Bubbles' (2025-05-27), H100: about 1.3 us of
GPU idle time per kernel launch even with CUDA graphs (source hazy-no-bubbles-2025; PyTorch
issue 161104 measures 1.1-1.3 us per x + y on 1,024 floats replayed from one CUDA graph).
The kernel count is the one test_moe_host_bound.py derives from Megatron-Core 0.16.1's code path
for the 25.11 B200 Qwen3-30B-A3B FP8 recipe: 74 launches after the wait at EP8 (16 local
experts, current scaling)."""

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster, make_job
from scalemodel.analytic.step import host
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.step.host import host_exposed
from scalemodel.specs import get_model
from scalemodel.specs.evidence import evidence_of
from scalemodel.specs.frameworks import job_settings


def _c():
    m = get_model("qwen3-30b-a3b")
    _, s = job_settings("nemo-25.11", "b200", model=m.id)
    j = make_job(m, seq_len=4096, global_batch_seqs=512, precision="fp8", **s)
    return SimpleNamespace(job=j, gpu=make_cluster("b200", 8).gpu, m=m, ep=np.float64(8.0),
                           etp=np.float64(1.0), fp8=True)


def test_the_constant_is_the_measured_h100_figure():
    h = constants()["host"]
    assert h["gpu_kernel_min_s"] == pytest.approx(1.3e-6)  # Hazy Research, H100, CUDA graphs
    assert evidence_of(h["gpu_kernel_min_source"]) == "microbenchmark"
    # below the host's eager cost per launch (4.5 us, add1): eager, the host binds
    assert h["gpu_kernel_min_s"] < h["op_launch_s"]


def test_eager_the_host_launches_bind():
    c = _c()
    t, ops = host_exposed(c, 0.0)
    assert ops == 74
    assert float(t) == pytest.approx(74 * 4.5e-6)  # not 74 x 1.3 us


def test_a_graphed_moe_scope_keeps_the_gpu_floor(monkeypatch):
    # a captured moe scope replays the 74 launches as one (host 4.5 us), but the GPU still runs
    # 74 kernels of at least 1.3 us each: 96.2 us, less whatever GPU time is already priced
    monkeypatch.setattr(host, "moe_graph_scopes", lambda job, gpu: ("moe",))
    c = _c()
    t, ops = host_exposed(c, 0.0)
    assert ops == 1
    assert float(t) == pytest.approx(74 * 1.3e-6)
    assert float(host_exposed(c, 50e-6)[0]) == pytest.approx(74 * 1.3e-6 - 50e-6)
    assert float(host_exposed(c, 100e-6)[0]) == 0.0  # priced GPU time above the floor
