"""Megatron-Core --fp8-param-gather as the Megatron-Bridge performance presets run it (issue 16):
what the fp8 primary weights hold and what the DP parameter all-gather then moves, derived by
hand from the sources below for Llama 3 8B (h 4096, 32 layers, 32 heads, 8 KV heads of 128,
FFN 14336, vocabulary 128256, untied).

Sources read (frameworks.toml fp8_param_gather, source megatron-bridge-fp8-param-gather;
numerics.toml [fp8_params], source te-fp8-primary-weight-storage):

- NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/mixed_precision.py: the FP8-CS preset
  bf16_with_fp8_current_scaling_mixed sets fp8_param_gather = True (line 268 at v0.1.0rc4, 289 at
  v0.2.1 and v0.3.0, 308 at v0.4.2, 302 at v0.5.0); the FP8-MX preset bf16_with_mxfp8_mixed sets
  it with reuse_grad_buf_for_mxfp8_param_ag = True (lines 230-231, 251-252, 270-271, 264-265);
  delayed scaling sets it (197, 218, 237, 231); the blockwise (subchannel) preset sets it False
  (350, 371, 390, 384).
- Megatron-Core at the commits those tags pin (0d8e0714 for v0.2.1):
  distributed_data_parallel.py line 167 makes the param buffer of a Float8Tensor torch.uint8 (one
  byte a weight, what the all-gather moves) and line 168 keeps its gradient in the bf16 params
  dtype; param_and_grad_buffer.py lines 698-711 give MXFP8 params one shared buffer in the
  gradient dtype into which bf16 values are gathered; fp8_utils.py get_fp8_context(is_init=True)
  (lines 505-538) builds each transformer layer under fp8_model_init; the output layer is a
  ColumnParallelLinear (gpt_model.py line 233), the embedding a VocabParallelEmbedding: bf16.
- NVIDIA/TransformerEngine v2.9 (the 25.11 container; the same at v2.7, v2.12, v2.14, v2.16):
  base.py line 1288 quantizes the weight with columnwise usage while grad is enabled;
  quantizer.cpp line 340 allocates the transpose of a current-scaling fp8 tensor only where
  !nvte_is_non_tn_fp8_gemm_supported(), which transformer_engine.cpp line 719 returns false below
  compute capability 10.0 (Hopper: data + transpose, 1 + 1 B; Blackwell: 1 B); MXFP8 tensors keep
  rowwise and columnwise data and a uint8 scale per 32 values of each (lines 905-938):
  1 + 1 + 2/32 B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.analytic.planner import evaluate_one
from scalemodel.analytic.validate import read_rows, row_problem
from scalemodel.specs.frameworks import fp8_param_bytes, get_framework
from scalemodel.specs.numerics import fp8_param_storage
from scalemodel.specs.sources import all_sources

ROOT = Path(__file__).resolve().parents[2] / "validation"

# Llama 3 8B by hand
H, L, KV, HD, FFN, V = 4096, 32, 8, 128, 14336, 128256
P_LIN = L * (2 * H * H + 2 * H * KV * HD + 3 * H * FFN)  # q, o + k, v + gate, up, down
P_ALL = P_LIN + 2 * V * H + (2 * L + 1) * H  # + untied embedding and head, + RMSNorms
LAYOUT = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 1, "vpp": 1,
          "micro_batch": 2, "recompute": "none"}


def _values(row_id: str, **lay: object):  # noqa: ANN202
    rows = {r["id"]: r for r in read_rows((ROOT / "published_runs_2026.csv").read_text())}
    p = row_problem(rows[row_id])
    return evaluate_one(p.job, p.cluster, {**LAYOUT, **lay}).values


def test_parameter_counts_by_hand():
    assert P_LIN == 6_979_321_856
    assert P_ALL == 8_030_261_248


def test_storage_per_weight_by_scaling_and_gpu():
    # Float8Tensor: 1 B of data, the transpose only without non-TN fp8 GEMMs (cc < 10.0)
    assert fp8_param_storage("current", "9.0")[0] == 2.0
    assert fp8_param_storage("current", "10.0")[0] == 1.0
    assert fp8_param_storage("delayed", "10.3")[0] == 1.0
    assert fp8_param_storage("current", "12.0")[0] == 2.0  # consumer Blackwell: TN only
    # MXFP8Tensor: rowwise + columnwise data and one E8M0 byte per 32 values of each
    assert fp8_param_storage("mxfp8", "10.0")[0] == 1 + 1 + 2 / 32
    assert fp8_param_storage("blockwise", "9.0") is None  # not recorded: not kept in fp8
    assert fp8_param_storage("current", "gfx942") is None


@pytest.mark.parametrize("fid", ["nemo-25.09", "nemo-25.11", "nemo-26.02", "nemo-26.04",
                                 "nemo-26.06", "nemo-26.08"])
def test_the_presets_keep_fp8_weights(fid):
    values = get_framework(fid).values
    # the all-gather: a Float8Tensor's uint8 buffer, MXFP8's bf16 gather into the grad buffer
    assert fp8_param_bytes(values, "current", "10.0")[:2] == (1.0, 1.0)
    assert fp8_param_bytes(values, "current", "9.0")[:2] == (2.0, 1.0)
    assert fp8_param_bytes(values, "mxfp8", "10.0")[:2] == (2.0625, 2.0)
    assert fp8_param_bytes(values, "blockwise", "9.0") is None
    assert get_framework(fid).sources["fp8_param_gather"] == "megatron-bridge-fp8-param-gather"


@pytest.mark.parametrize("fid", ["nemo-24.03", "nemo-24.07", "megatron-core"])
def test_profiles_without_it(fid):
    # NeMo 1.x launcher recipes set no fp8_params; Megatron-LM's own flag is off by default
    assert fp8_param_bytes(get_framework(fid).values, "current", "10.0") is None


def test_the_sources_name_the_lines():
    mb = all_sources()["megatron-bridge-fp8-param-gather"].title
    for s in ("v0.2.1 (1c43b392)", "218, 251-252, 289, 371", "0d8e0714", "line 56",
              "167 at 0d8e0714", "698-711 at 0d8e0714"):
        assert s in mb
    te = all_sources()["te-fp8-primary-weight-storage"].title
    for s in ("v2.9 lines 137 and 340", "line 719 at v2.9", ">= 100 and < 120",
              "v2.9 quantizer.cpp lines 905-938"):
        assert s in te


def test_b200_fp8_cs_weights_and_gather():
    v = _values("nemo-llama3-8b-b200-2509-cs")
    # weights: the layers' matmuls at 1 B, embedding, head and norms at 2 B
    w = (P_ALL - P_LIN) * 2 + P_LIN * 1
    assert w == 9_081_200_640
    assert float(v.mem_params) == pytest.approx(w, rel=1e-9)
    # DP over 8 ranks at ZeRO-1: a bf16 gradient reduce-scatter (grad_reduce_bytes 2) and the
    # gather of w; a ring sends (n - 1) / n of each
    assert float(v.dp_bytes) == pytest.approx(7 / 8 * (2 * P_ALL + w), rel=1e-9)


def test_b200_mxfp8_weights_and_gather():
    v = _values("nemo-llama3-8b-b200-2509-mx")
    w = (P_ALL - P_LIN) * 2 + P_LIN * (2 + 2 / 32)
    assert float(v.mem_params) == pytest.approx(w, rel=1e-9)
    # the MXFP8 gather runs in bf16 through the gradient buffer: 2 B a weight
    assert float(v.dp_bytes) == pytest.approx(7 / 8 * (2 * P_ALL + 2 * P_ALL), rel=1e-9)


def test_h100_fp8_cs_keeps_two_bytes_but_gathers_one():
    v = _values("nemo-llama3-8b-h100-2509", micro_batch=1, recompute="full")
    # data + transpose: 2 B a weight held, the uint8 data gathered
    assert float(v.mem_params) == pytest.approx(2 * P_ALL, rel=1e-9)
    w = (P_ALL - P_LIN) * 2 + P_LIN * 1
    assert float(v.dp_bytes) == pytest.approx(7 / 8 * (2 * P_ALL + w), rel=1e-9)


def test_megatron_fsdp_holds_and_gathers_the_uint8_buffer():
    # ZeRO 2 and 3 are Megatron-FSDP (optim_grads, optim_grads_params; source
    # megatron-fsdp-fp8-param-buffer): at 0d8e0714 param_and_grad_buffer.py lines 1812-1818 give a
    # group of Transformer Engine fp8 weights a torch.uint8 model-weight buffer and a bf16
    # gradient buffer; lines 1736-1753 shard that buffer only at optim_grads_params, and
    # async_bucket_gather (3355-3365) all-gathers it: 1 B a layer-matmul weight on B200 (no
    # transpose, cc 10.0), 2 B for the embedding, head and norms (bf16 parameters).
    w = (P_ALL - P_LIN) * 2 + P_LIN * 1
    # ZeRO 3: the shard over 8 ranks plus two gathered layers (the one computing and the one
    # prefetched), both at the fp8 weights' 1 B
    v = _values("nemo-llama3-8b-b200-2509-cs", zero=3)
    assert float(v.mem_params) == pytest.approx(w / 8 + 2 * P_LIN / L * 1, rel=1e-9)
    # ZeRO 2: every weight whole
    v = _values("nemo-llama3-8b-b200-2509-cs", zero=2)
    assert float(v.mem_params) == pytest.approx(w, rel=1e-9)
    # the bytes sent at ZeRO 2: the bf16 gradient reduce-scatter after each of the 8
    # micro-batches (global batch 128 / (dp 8 x micro-batch 2)) and one gather of w
    assert float(v.dp_bytes) == pytest.approx(7 / 8 * (8 * 2 * P_ALL + w), rel=1e-9)
    # MXFP8 under Megatron-FSDP was not read: 2 B a weight held and gathered at ZeRO 2 / 3
    v = _values("nemo-llama3-8b-b200-2509-mx", zero=2)
    assert float(v.mem_params) == pytest.approx(2 * P_ALL, rel=1e-9)


def test_the_fsdp_source_names_the_lines():
    t = all_sources()["megatron-fsdp-fp8-param-buffer"].title
    for s in ("0d8e0714", "lines 1812-1818", "lines 3355-3365", "d0b3b775 (2222)"):
        assert s in t
    assert get_framework("nemo-26.04").sources["fp8_param_gather_fsdp"] == (
        "megatron-fsdp-fp8-param-buffer")
    assert fp8_param_bytes(get_framework("nemo-26.04").values, "current", "10.0",
                           fsdp=True)[:2] == (1.0, 1.0)
    assert fp8_param_bytes(get_framework("nemo-26.04").values, "mxfp8", "10.0",
                           fsdp=True) is None
    assert fp8_param_bytes(get_framework("nemo-24.03").values, "current", "10.0",
                           fsdp=True) is None


def test_memory_command_prices_the_same_weights(capsys):
    from conftest import cli_json

    out = cli_json(capsys, "memory", "--model", "llama-3-8b", "--gpu", "b200",
                   "--framework", "nemo-25.09", "--precision", "fp8", "--seq-len", "8192",
                   "--layout", "tp=1,pp=1,dp=8,zero=1,micro_batch=2,recompute=none")
    assert out["breakdown"]["params"] == pytest.approx((P_ALL - P_LIN) * 2 + P_LIN, rel=1e-9)


@pytest.mark.parametrize("field, value, source, says", [
    ("fp8_param_gather", "{ current = 3 }", "megatron-bridge-fp8-param-gather", "1 or 2"),
    ("fp8_param_gather_fsdp", "{ tensorwise = 1 }", "megatron-fsdp-fp8-param-buffer",
     "Megatron-FSDP"),
])
def test_bad_fp8_param_gather_is_one_line(tmp_path, field, value, source, says):
    from conftest import frameworks_file_refusal

    msg = frameworks_file_refusal(
        tmp_path, '[profiles.x]\nkind = "training"\nname = "x"\nversion = "1"\n'
        f'source = "deepspeed-config"\n{field} = {value}\n{field}_source = "{source}"\n')
    assert field in msg and says in msg
