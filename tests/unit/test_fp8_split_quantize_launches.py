"""TE GroupedLinear's per-expert fp8 quantisation launches (analytic/step/host.py).

Source: NVIDIA TransformerEngine v2.9 (read also at v2.10-v2.18, unchanged), source
te-split-quantize-per-split. module/grouped_linear.py quantises the input with
tex.split_quantize(inp_view, m_splits, input_quantizers), and the backward its grad_output the
same way; csrc/extensions/cast.cpp multi_tensor_quantize_impl fuses the splits into one
nvte_multi_cast_transpose only when every quantiser is a delayed-scaling Float8Quantizer, else
it calls quantizer->quantize once per split. Float8CurrentScalingQuantizer::quantize_impl
(csrc/quantizer.cpp) then launches, per split: nvte_compute_amax_with_config
(common/recipe/current_scaling.cu: zero_amax_kernel<<<1, 1>>> and the amax kernel, 2),
nvte_compute_scale_from_amax (compute_scale_from_amax_kernel<<<1, 1>>>, 1) and nvte_quantize_v2
(the cast with its transpose, 1): 4. MXFP8 and blockwise quantisers compute their block scales
in the one cast kernel: 1 per split. Delayed scaling: one fused launch for all splits, 0 per split.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster, make_job
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.step.host import after_sync_launches, split_quantize_launches
from scalemodel.specs import get_model
from scalemodel.specs.evidence import evidence_of
from scalemodel.specs.frameworks import job_settings


def test_launches_per_split_from_the_source():
    h = constants()["host"]
    assert h["fp8_split_launches_current"] == 2 + 1 + 1  # zero + amax, scale, cast
    assert h["fp8_split_launches_mxfp8"] == 1
    assert h["fp8_split_launches_blockwise"] == 1
    assert h["fp8_split_launches_delayed"] == 0
    assert evidence_of(h["fp8_split_launches_source"]) == "framework source"


def _c(fid, gpu, prec):
    m = get_model("qwen3-30b-a3b")
    _, s = job_settings(fid, gpu, model=m.id)
    job = make_job(m, seq_len=4096, global_batch_seqs=512, precision=prec, **s)
    return SimpleNamespace(job=job, gpu=make_cluster(gpu, 8).gpu, m=m, ep=np.float64(8.0),
                           etp=np.float64(1.0), fp8=prec == "fp8")


def test_recipe_scaling_picks_the_count():
    # 25.11 DGX-H100 rows are FP8-CS (current), DGX-B200 FP8-MX (frameworks.toml labels)
    assert split_quantize_launches(_c("nemo-25.11", "h100-sxm", "fp8")) == 4
    assert split_quantize_launches(_c("nemo-25.11", "b200", "fp8")) == 1
    assert split_quantize_launches(_c("nemo-25.11", "h100-sxm", "bf16")) == 0


def test_after_wait_count_by_hand():
    # all-to-all, 16 local experts, etp 1, FP8-CS: 2 all-to-alls + 1 sort + (2 x 16 GEMMs + 1
    # SwiGLU + 3 padding) + 1 sort back + 1 all-to-all + 1 unpermute = 42, plus 4 kernels x 16
    # splits x 2 inputs (fc1, fc2) = 128: 170
    assert after_sync_launches("alltoall", 16.0, 1.0, True, 4.0) == pytest.approx(170.0)
    # without fp8 the quantisation count is not charged even if given
    assert after_sync_launches("alltoall", 16.0, 1.0, False, 4.0) == pytest.approx(
        2 + 1 + 33 + 1 + 1 + 1)
