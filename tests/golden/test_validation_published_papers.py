"""The fourth validation file, validation/published_runs_papers.csv (issue 16, item 4): published
MFU / TFLOP/s tables at scale that no planner constant was read against - the Megatron-LM
README's H100 model table (Megatron-Core r0.8.0, 1.7B-462B on 48-6,144 GPUs), Megatron-Turing NLG
530B on 2,240-3,360 A100 (Smith et al. 2022, Sec. 2.4), BLOOM 176B on 384 A100 and Nemotron-4 340B
on 6,144 H100 (its report's Table 2, as quoted). Each row names
its source key (its table, and the commit it was read at, in its notes) and its framework
profile. Rows that do not fit stay in the file; docs/planner.md lists them as they fall."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_published_rows_known, validation_guard, validation_rows
from scalemodel.analytic.validate import convention_flops_per_token, row_model
from scalemodel.specs import get_model

ROOT = Path(__file__).resolve().parents[2] / "validation"
NAME = "published_runs_papers.csv"
H100_BF16 = 989e12  # the table's MFU column divides by 989 TF (462B: 459.9 / 989 = 46.50 -> 47%)

# Megatron-LM README.md 'Performance Benchmarking', images/model_table.png (read at d98e8a64):
# size, heads, hidden, layers, TP, PP, DP, GPUs, batch, per-GPU teraFLOP/s, MFU %, petaFLOP/s
MCORE_TABLE = [
    ("1.7b", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8, 41, 19.6),
    ("7.1b", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9, 47, 44.7),
    ("16b", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1, 49, 93.9),
    ("32b", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6, 46, 176.5),
    ("70b", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7, 42, 322.3),
    ("119b", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5, 43, 645.9),
    ("177b", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8, 44, 997.2),
    ("314b", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4, 48, 1457.4),
    ("462b", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9, 47, 2825.6),
]
# Smith et al. 2022 Sec. 2.4 (as quoted in cli99/llm-analysis at d841e40): batch 1920 on 280 /
# 350 / 420 DGX A100 servers, seconds per iteration, TFLOP/s per GPU
MTNLG = [(2240, 60.1, 126), (2800, 50.2, 121), (3360, 44.4, 113)]


_rows = validation_rows


def _by_id():
    return {r["id"]: r for r in _rows(NAME)}


def test_rows_name_known_sources_and_profiles():
    rows = _rows(NAME)
    assert len(rows) == 14
    assert_published_rows_known(rows, ("training_runs.csv", "holdout_mosaicml.csv",
                                       "published_runs_2026.csv"))


@pytest.mark.parametrize("size, a, h, L, tp, pp, dp, gpus, batch, tflops, mfu, agg", MCORE_TABLE)
def test_megatron_readme_rows_are_the_table(size, a, h, L, tp, pp, dp, gpus, batch, tflops, mfu,
                                            agg):
    r = _by_id()[f"mcore-r080-gpt-{size}-h100"]
    got = {k: int(r[k]) for k in ("heads", "hidden", "layers", "tp", "pp", "dp", "gpus",
                                  "global_batch_seqs")}
    assert got == {"heads": a, "hidden": h, "layers": L, "tp": tp, "pp": pp, "dp": dp,
                   "gpus": gpus, "global_batch_seqs": batch}
    assert float(r["measured"]) == tflops and r["metric"] == "tflops_per_gpu"
    assert tp * pp * dp == gpus
    # the table's own columns agree: aggregate = per-GPU x GPUs; MFU = per-GPU / 989 TF (bf16)
    assert tflops * gpus / 1e3 == pytest.approx(agg, abs=0.1)
    assert round(100 * tflops * 1e12 / H100_BF16) == mfu
    # the size label is the parameter count of the shape the row prices (MLP 4h, untied
    # embeddings of the 131,072 vocabulary): the label rounds it
    from scalemodel.analytic.params import count_params

    n = count_params(row_model(r)).total / 1e9
    assert n == pytest.approx(float(size.rstrip("b")), rel=0.03)


@pytest.mark.parametrize("gpus, iter_s, tflops", MTNLG)
def test_mt_nlg_rows_and_eq3(gpus, iter_s, tflops):
    r = _by_id()[f"mt-nlg-530b-{gpus}"]
    assert float(r["measured"]) == tflops and r["convention"] == "megatron_eq3"
    assert int(r["global_batch_seqs"]) == 1920 and int(r["tp"]) * int(r["pp"]) == 280
    assert int(r["tp"]) * int(r["pp"]) * int(r["dp"]) == gpus
    # the paper's TFLOP/s are Narayanan et al. eq. 3 over its own iteration time: 96 B s l h^2
    # (1 + s/6h + V/16lh) / (t x GPUs) reproduces each published pair to 1 TFLOP/s
    m = row_model(r)
    per_step = convention_flops_per_token("megatron_eq3", m, 2048, None) * 1920 * 2048
    assert per_step / iter_s / gpus / 1e12 == pytest.approx(tflops, abs=1.0)


@pytest.mark.parametrize("gpus", [g for g, _, _ in MTNLG])
def test_mt_nlg_recompute_is_the_papers_activation_count(gpus):
    # Smith et al. 2022 Sec. 2.1.1 (quoted in the reading notes the rows name): with each
    # transformer block checkpointed and recomputed, only the block-boundary activations are kept,
    # 'approximately 16.9 terabytes' for the run's configuration = 2 bytes x B s h per layer x l,
    # i.e. full recompute; micro-batch and ZeRO stage are stated nowhere read, so they stay blank
    r = _by_id()[f"mt-nlg-530b-{gpus}"]
    assert r["recompute"] == "full" and not r["micro_batch"] and not r["zero"]
    boundary = 2 * int(r["global_batch_seqs"]) * int(r["seq_len"]) * int(r["hidden"]) * int(r["layers"])
    assert boundary / 1e12 == pytest.approx(16.9, abs=0.05)


def test_bloom_row():
    r = _by_id()["bloom-176b-384"]
    # BigScience 176B page: 384 A100 80GB, one copy of the model on 48 GPUs, 'about 150 TFLOPs'
    assert float(r["measured"]) == 150 and int(r["gpus"]) == 384 and int(r["dp"]) == 384 // 48
    assert (int(r["layers"]), int(r["hidden"]), int(r["heads"]), int(r["seq_len"])) == (
        70, 14336, 112, 2048)
    # the split of the 48: 4-way tensor x 12-way pipeline (Zhao et al.'s survey, as quoted)
    assert (int(r["tp"]), int(r["pp"])) == (4, 12)


def test_nemotron4_row():
    r = _by_id()["nemotron-4-340b-6144"]
    # Table 2 as quoted: 6144 H100, batch 2304, 8.0 s per iteration, sequence 4096; TP8 PP12
    assert float(r["measured"]) == pytest.approx(2304 * 4096 / 8.0 / 6144)
    assert r["metric"] == "tokens_per_s_per_gpu" and r["convention"] == "tokens"
    assert (int(r["tp"]), int(r["pp"]), int(r["dp"])) == (8, 12, 6144 // 96)
    assert (int(r["layers"]), int(r["hidden"]), int(r["heads"]), int(r["kv_heads"]),
            int(r["ffn"]), int(r["vocab"])) == (96, 18432, 96, 8, 73728, 256000)
    # the shape is the 340B of the name (untied embeddings, squared ReLU: no gating)
    from scalemodel.analytic.params import count_params

    assert count_params(row_model(r)).total / 1e9 == pytest.approx(340, rel=0.02)


def test_megatron_core_convention():
    # Megatron-LM megatron/training/training.py num_floating_point_operations at core_r0.8.0,
    # per token 12 l h^2 ((1 + g/a + s/h) q/h + f/h x (3/2 if swiglu) + V / 2lh); the README
    # table's 1.7B shape (q = h, f = 4h, not gated) at s = 4096, V = 131072:
    r = _by_id()["mcore-r080-gpt-1.7b-h100"]
    m = row_model(r)
    L, h = 24, 2048
    want = 12 * L * h * h * ((1 + 1 + 4096 / h) + 4 + 131072 / (2 * L * h))
    assert convention_flops_per_token("megatron_core", m, 4096, None) == pytest.approx(want)
    # for a gated model the same count is NeMo's Llama formula of 2024 (nemo_full_attn)
    llama = get_model("llama-3-8b")
    assert convention_flops_per_token("megatron_core", llama, 8192, None) == pytest.approx(
        convention_flops_per_token("nemo_full_attn", llama, 8192, None))


def test_every_row_is_predicted_and_the_error_does_not_regress():
    """Regression guard: on 2026-12-02 `python -m scalemodel validate --file
    validation/published_runs_papers.csv` gave 12.7% mean and 28.7% max absolute error when the
    rows came in (max: the Megatron-Core 1.7B row, +28.7%; MT-NLG +23% to +29%; BLOOM +18.1%;
    Nemotron-4 340B +17.4%; the Megatron-Core H100 table 7.5% mean, -13.0% to +28.7%); 8.0% /
    28.7% once the layout grid kept to each profile's recompute options (MT-NLG priced with the
    2021 code's full recompute: -5.0% to -0.6%); 11.4% / 28.7% once the stage split no longer
    rounded the heaviest stage's load up to a whole layer (MT-NLG's 105 layers on PP35 are 3 per
    stage, where one stage held 4: +20.1% to +25.7%; tests/golden/test_sc21_golden.py); 11.1% /
    28.7% with DeepSpeed's two blocking P2P transfers per crossing (profile
    megatron-deepspeed-2021: MT-NLG +19.1% to +24.6%, BLOOM +16.0%); 11.1% / 27.6% with the
    embedding whole in the last DP bucket (the 1.7B row +27.6%); about 16% / 27.6% once the
    megatron-core-0.8 profile took the README's --tp-comm-overlap and core_r0.8.0's even split
    (the Megatron-Core 16B-462B rows, -13.0%..+3.2% before, +4.0%..+18.4% after: an honest term
    that makes them over-predict, the guard raised with it and said so in docs/planner.md
    "Layout agreement"); 15.6% / 26.3% with the profile's vpp search at the time; 14.4% / 24.6% with
    the passes over the whole gradient buffer (megatron-core-0.8: zeroed and normed each step,
    core_r0.8.0) and BLOOM on megatron-deepspeed-2022-bf16 (DeepSpeed's BF16_Optimizer: +16.0% ->
    +8.3%; tests/golden/test_grad_buffer_passes.py); 13.8% / 24.6% with megatron-core-0.8's fp32
    main gradients in memory (119B +17.7% -> +13.9%, 314B +12.5% -> +7.2%); 14.6% / 30.9% with each
    GPU's own burst GEMM ceiling (gpus.toml gemm_burst_efficiency, ml-engineering's MAMF table:
    A100 0.869, H100 0.803, where the H200 anchor gave 0.815: MT-NLG +19.1..+24.6% ->
    +25.2..+30.9%, BLOOM +8.3% -> +13.5%, the H100 rows about 1 point lower). Limits: the latest
    values plus about 2 points."""
    validation_guard((ROOT / NAME).read_text(), rows=14, mape=0.16, max_ape=0.33)
