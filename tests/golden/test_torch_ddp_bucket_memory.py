"""torch DDP's bucket copy of the gradients in the SC21 Megatron-LM runs launched with
--DDP-impl torch (frameworks.toml megatron-lm-2021-torch-ddp ddp_bucket_bytes; sources
megatron-lm-2021-torch-ddp and torch-ddp-bucket-copy).

Derivation: Megatron-LM 6985e589 get_model wraps each model chunk in
torch.nn.parallel.DistributedDataParallel without gradient_as_bucket_view, whose default is
False (torch 1.7 docs). The reducer then allocates its all-reduce buckets as flat tensors of the
parameters' dtype (fp16 under Float16Module) covering every gradient, beside each parameter's
own .grad (torch PR 41954: making .grad a view of the bucket cut peak memory by the gradients'
size). Per local parameter, under ZeRO-0:

    weights 2 B (fp16), .grad 2 B, bucket 2 B  ->  gradients 4 B = 2 x the weights' bytes

--DDP-impl local (megatron-lm-2021: LocalDDP reduces main_grad in place) keeps 2 B.
"""

from __future__ import annotations

import pytest

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.memory import ddp_bucket_bytes, memory_report
from scalemodel.specs import get_model


def test_profile_states_the_bucket_copy():
    assert ddp_bucket_bytes("megatron-lm-2021-torch-ddp") == (2.0, "torch-ddp-bucket-copy")
    assert ddp_bucket_bytes("megatron-lm-2021")[0] == 0.0


def test_gradients_double_under_torch_ddp():
    m = get_model("llama-3-8b")
    lay = TrainLayout(tp=2, pp=1, dp=4, zero=0, micro_batch=1, recompute="full")
    kw = {"seq_len": 2048, "weight_dtype": "fp16"}
    local = memory_report(m, lay, framework="megatron-lm-2021", **kw)
    torch_ddp = memory_report(m, lay, framework="megatron-lm-2021-torch-ddp", **kw)
    weights = local.breakdown["params"]
    assert local.breakdown["grads"] == pytest.approx(weights, rel=1e-12)  # 2 B = 2 B
    assert torch_ddp.breakdown["grads"] == pytest.approx(2 * weights, rel=1e-12)  # 2 + 2 B
    assert torch_ddp.per_gpu_bytes - local.per_gpu_bytes == pytest.approx(weights, rel=1e-12)
    assert torch_ddp.derivation["e_bkt"] == 2.0  # the derivation names the term
