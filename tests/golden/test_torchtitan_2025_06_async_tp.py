"""torchtitan's June-2025 async TP benchmarks on Grand Teton H100 and the two profiles that price
them (issue 16, deliver 4: runs not seen).

Source of the cells: pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md,
read at b5bcd76c (added by PR #1299): Llama 3.1 70B on 256 H100 (FSDP 32, TP 8, torch.compile,
full AC, local batch 16) and Llama 3.1 8B on 64 H100 (FSDP 8, TP 8, torch.compile, per-op SAC,
local batch 12), tokens/s per GPU for bf16, float8 tensorwise and float8 rowwise, vanilla TP and
async TP; versions torchtitan 820504e, torch 38410cf9, torchao 6243040.
Source of the software: torchtitan 820504e config_manager.py (enable_async_tensor_parallel off by
default, optimizer implementation fused), models/llama3/parallelize_llama.py (async TP sets
torch._inductor.config._micro_pipeline_tp and symmetric memory for the TP group; separate wq, wk,
wv and w1, w3 linears), the llama3_70b.toml / llama3_8b.toml presets (seq_len 8192); torch
micro_pipeline_tp.py (a reduce-scatter is fused only with the one matmul producing its input) and
_symmetric_memory (fused_matmul_reduce_scatter in tp row blocks and one reduction kernel)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import validation_rows
from scalemodel.analytic.planner import search
from scalemodel.analytic.step import comm
from scalemodel.analytic.step.comm import tp_chunks
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.step.gemm import gemm_time
from scalemodel.analytic.validate import row_problem
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu
from scalemodel.specs.frameworks import FIELDS, get_framework, load_frameworks_file

NAME = "published_runs_2026.csv"
SOURCE = "torchtitan-h100-asynctp-2025-06"
# (model, quantization) -> (vanilla TP, async TP, the page's speedup), as the page prints them
PAGE = {
    ("70b", "bf16"): (597.3, 652.4, 1.09),
    ("70b", "fp8tw"): (809.8, 942.4, 1.16),
    ("70b", "fp8rw"): (599.6, 624.8, 1.04),
    ("8b", "bf16"): (4378.0, 4809.4, 1.10),
    ("8b", "fp8tw"): (5078.1, 5570.1, 1.10),
    ("8b", "fp8rw"): (3708.5, 3914.9, 1.06),
}
T, H, FFN = 16 * 8192.0, 8192.0, 28672.0  # Llama 3 70B, local batch 16 of 8192 tokens
QKV_N = 8192.0 + 2 * 1024.0  # 64 query heads + 2 x 8 kv heads of 128


def _rows() -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in validation_rows(NAME) if r["source"] == SOURCE}


def test_the_twelve_cells_are_the_pages():
    rows = _rows()
    assert len(rows) == 12
    for (m, q), (tp, atp, speedup) in PAGE.items():
        a, b = rows[f"titan-h100-{m}-{q}-tp"], rows[f"titan-h100-{m}-{q}-asynctp"]
        assert float(a["measured"]) == tp and float(b["measured"]) == atp
        # the page's speedup column is the ratio of its two cells, rounded to 2 places
        assert round(atp / tp, 2) == speedup
        assert a["framework"] == "torchtitan-2025-06"
        assert b["framework"] == "torchtitan-2025-06-async-tp"
        assert a["precision"] == b["precision"] == ("bf16" if q == "bf16" else "fp8")


def test_the_rows_carry_the_pages_layout_and_the_presets_sequence():
    for r in _rows().values():
        assert r["gpu"] == "h100-sxm-hbm2e-500w" and r["inter"] == "ndr-400"
        # seq_len is not on the page: llama3_70b.toml / llama3_8b.toml at 820504e set 8192
        assert r["seq_len"] == "8192" and r["convention"] == "tokens"
        assert (r["tp"], r["pp"], r["cp"], r["zero"]) == ("8", "1", "1", "3")
        if "-70b-" in r["id"]:
            # FSDP 32 x TP 8 = 256 GPUs; global batch = FSDP x local batch 16 = 512
            assert (r["model"], r["gpus"], r["dp"]) == ("llama-3-70b", "256", "32")
            assert (r["global_batch_seqs"], r["micro_batch"], r["recompute"]) == ("512", "16",
                                                                                  "full")
        else:
            # FSDP 8 x TP 8 = 64 GPUs; global batch = 8 x 12 = 96; per-op SAC = recompute op
            assert (r["model"], r["gpus"], r["dp"]) == ("llama-3-8b", "64", "8")
            assert (r["global_batch_seqs"], r["micro_batch"], r["recompute"]) == ("96", "12",
                                                                                  "op")
        assert r["kernels"] == "fused"  # torch.compile on every TransformerBlock


def test_the_profiles_record_what_820504e_ran():
    van, atp = get_framework("torchtitan-2025-06"), get_framework("torchtitan-2025-06-async-tp")
    # config_manager.py at 820504e: enable_async_tensor_parallel = False
    assert van.get("tp_overlap") is False
    assert van.sources["tp_overlap"] == "torchtitan-820504e-config"
    assert atp.get("tp_overlap") is True and atp.get("tp_overlap_kind") == "symm_mem"
    assert atp.sources["tp_overlap_kind"] == "torch-micro-pipeline-tp"
    # Optimizer.implementation 'fused' at 820504e: torch's fused AdamW reads p, g, m, v (4 x 4 B)
    # and writes p, m, v (3 x 4 B) = 28 B; foreach clipping reads g for the norm (4) and scales
    # it in place (4 + 4) = 12 B: 40 B per local parameter (9dec370's foreach step: 92)
    assert van.get("optimizer_step_bytes") == {"adam": 40}
    assert get_framework("torchtitan-2024-12").get("optimizer_step_bytes") == {"adam": 92}
    # the rest is inherited from the Dec-2024 profile (FSDP2's copies on the compute stream)
    assert van.get("fsdp_copy_bytes") == get_framework("torchtitan-2024-12").get(
        "fsdp_copy_bytes")
    # a profile that names no kind keeps Transformer Engine's userbuffers pricing
    assert get_framework("megatron-core").get("tp_overlap_kind") is None


def _cand(fid: str | None) -> SimpleNamespace:
    """A Llama 3 70B layer at the 70B rows' shape (TP 8, local batch 16 x 8192 tokens), as
    tp_chunks reads a candidate (the same fields the unit test of the chunks uses)."""
    gpu = get_gpu("h100-sxm-hbm2e-500w")
    return SimpleNamespace(
        ms=SimpleNamespace(attn_in_n=QKV_N, attn_out_k=H, ffn=FFN, up_k=2), T=T, h=H,
        tp=np.float64(8.0), peak=gpu.peak_flop_per_s("bf16"), e_mm=2.0, e_a=2.0,
        hbm=gpu.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"],
        job=SimpleNamespace(precision="bf16", framework_id=fid), gpu=gpu,
        m=SimpleNamespace(kv_lora_rank=0), fp8_rate_at=lambda K: 1.0)


def _unsplit(c: SimpleNamespace) -> SimpleNamespace:
    def t(M, N, K):
        return gemm_time(M, N, K, c.gpu, c.peak, 2.0, rate=1.0)
    shapes = [(T, QKV_N / 8, H), (T, H, H / 8), (T, 2 * FFN / 8, H), (T, H, FFN / 8)]
    return SimpleNamespace(tp_gemm_f=tuple(t(*x) for x in shapes),
                           tp_gemm_b=tuple(t(M, K, N) + t(K, N, M) for M, N, K in shapes))


def test_symm_mem_reduce_scatters_split_in_tp_row_blocks_and_pay_their_sum():
    """Derivation: fused_matmul_reduce_scatter chunks A (T x K) into tp row blocks and runs tp
    matmuls of T / tp rows; userbuffers runs 4 of N / 4 columns. The reduction kernel reads the
    T x h stacked partials and writes the T / tp x h shard: e_a T h (1 + 1 / tp) bytes at the
    planner's HBM rate (datasheet 2.4 TB/s x hbm_efficiency 0.8), once per forward
    reduce-scatter (output projection and MLP out): 2 x 2 x 131072 x 8192 x 1.125 / 1.92e12 =
    2.517 ms per layer forward. The all-gather side is the same under both kinds."""
    ub_c, sm_c = _cand("torchtitan-2025-06"), _cand("torchtitan-2025-06-async-tp")
    lc = _unsplit(ub_c)
    ub, sm = tp_chunks(ub_c, lc, moe=False), tp_chunks(sm_c, lc, moe=False)
    assert (ub.rs_splits, ub.bwd_rs_fused) == (4.0, True)
    assert (float(sm.rs_splits), sm.bwd_rs_fused) == (8.0, False)
    assert float(sm.fwd[0]) == pytest.approx(float(ub.fwd[0]), rel=1e-12)  # QKV ring
    assert float(sm.fwd[2]) == pytest.approx(float(ub.fwd[2]), rel=1e-12)  # MLP-in ring
    # the output projection as launched: 8 matmuls of T / 8 rows
    t = gemm_time(T / 8, H, H / 8, sm_c.gpu, sm_c.peak, 2.0, rate=1.0)
    assert float(sm.fwd[1]) == pytest.approx(8 * t, rel=1e-12)
    rs_sum = 2.0 * T * H * (1 + 1 / 8) / (2.4e12 * 0.8)
    assert rs_sum == pytest.approx(1.2583e-3, rel=1e-4)
    launched = (sm.fwd[0] - lc.tp_gemm_f[0]) + (sm.fwd[1] - lc.tp_gemm_f[1]) \
        + (sm.fwd[2] - lc.tp_gemm_f[2]) + (sm.fwd[3] - lc.tp_gemm_f[3])
    assert float(sm.extra_f - launched) == pytest.approx(2 * rs_sum, rel=1e-9)
    assert float(sm.extra_mlp_f - (sm.fwd[2] - lc.tp_gemm_f[2])
                 - (sm.fwd[3] - lc.tp_gemm_f[3])) == pytest.approx(rs_sum, rel=1e-9)


def test_the_backward_reduce_scatter_of_a_summed_gradient_runs_exposed():
    """micro_pipeline_tp.py fuse_matmul_reduce_scatter needs the reduce-scatter's input to be one
    matmul's output (_find_producer_matmul); torchtitan's wq / wk / wv (and w1 / w3) input
    gradients are summed first. With T_c the one collective's time and G >> T_c the block's
    backward GEMMs, userbuffers' bulk pair leaves (2 T_c) / inf + max(2 T_c - G, 0) = 0 exposed;
    symm_mem leaves T_c + 0 = T_c. So per layer the async profile exposes exactly 2 T_c more in
    the backward than the same chunks under userbuffers (the attention's and the MLP's pair)."""
    one = np.float64(1e-3)
    gb = (np.float64(1.0), np.float64(0.5), np.float64(1.0), np.float64(0.5))
    lc = type("LC", (), {"tp_gemm_b": gb, "tp_gemm_f": gb})()
    cm = type("CM", (), {"tp_one": one})()
    c = type("C", (), {"tp": np.float64(8.0)})()
    fwd = (np.float64(1.0),) * 4
    dg = (np.float64(0.5), np.float64(0.5))
    ub = comm.TPChunks(fwd=fwd, dgrad=dg, extra_f=0.0, extra_b=0.0, extra_mlp_f=0.0,
                       rs_splits=4.0, bwd_rs_fused=True)
    sm = comm.TPChunks(fwd=fwd, dgrad=dg, extra_f=0.0, extra_b=0.0, extra_mlp_f=0.0,
                       rs_splits=8.0, bwd_rs_fused=False)
    f_ub, b_ub = comm._tp_exposed(c, lc, cm, 1.0, ub)
    f_sm, b_sm = comm._tp_exposed(c, lc, cm, 1.0, sm)
    assert float(b_sm - b_ub) == pytest.approx(2 * 1e-3, rel=1e-12)
    # forward: a hidden collective leaves min(T_c, G) / splits: 4 column blocks against tp = 8
    # row blocks, for the output projection and the MLP out: 2 x (1/4 - 1/8) T_c less exposed
    assert float(f_ub - f_sm) == pytest.approx(2 * (1 / 4 - 1 / 8) * 1e-3, rel=1e-12)


def test_async_tp_is_faster_than_vanilla_and_only_in_the_tp_term():
    rows = _rows()
    for m, q in PAGE:
        pa = row_problem(rows[f"titan-h100-{m}-{q}-tp"])
        pb = row_problem(rows[f"titan-h100-{m}-{q}-asynctp"])
        a = search(pa.job, pa.cluster, pa.stated, top=0).best.values
        b = search(pb.job, pb.cluster, pb.stated, top=0).best.values
        # the same collectives, fewer of them exposed; the chunked launches cost compute
        assert b.tp_raw_s == pytest.approx(a.tp_raw_s, rel=1e-12)
        assert b.tp_s < a.tp_s and b.compute_s > a.compute_s
        assert b.step_time_s < a.step_time_s
        # vanilla TP: the compiled block waits each traced collective where it is issued
        assert a.tp_s == pytest.approx(a.tp_raw_s, rel=1e-12)


def test_a_bad_overlap_kind_is_refused_in_one_line():
    check, allowed = FIELDS["tp_overlap_kind"]
    assert check("symm_mem") and check("userbuffers") and not check("nccl")
    assert allowed == "userbuffers or symm_mem"


def test_a_user_profile_with_a_bad_kind_is_one_line(tmp_path):
    f = tmp_path / "fw.toml"
    f.write_text('[profiles.mine]\nkind = "training"\nname = "x"\nversion = "1"\n'
                 'source = "torchtitan-820504e-config"\n'
                 'tp_overlap_kind = "nccl"\n'
                 'tp_overlap_kind_source = "torch-micro-pipeline-tp"\n')
    with pytest.raises(BadInput) as e:
        load_frameworks_file(str(f))
    msg = str(e.value)
    assert "\n" not in msg and "tp_overlap_kind" in msg and "userbuffers or symm_mem" in msg
