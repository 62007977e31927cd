"""The third validation file, validation/published_runs_2026.csv (issue 16, item 4): 89 published
runs the planner's constants were never read against - Megatron-Bridge's archive tables on
DGX-B200 and DGX-H100 (dense and MoE), NeMo's long-sequence tables with context parallelism up to
CP32 at 1M tokens, torchtitan's H100 benchmarks of 2024-12, one more torchtitan A100 row, and
Megatron-Bridge's eager / CUDA-graph A/B of 2026-05-18 (PRs 3868 and 3880, three rows). Session 18
(s18-newruns) added 26 more DGX-H100 / DGX-B200 rows of the same archive at 067f987d that no file
held (25.09 to 26.06 containers; the FP8-MX runs of the 25.09 / 25.11 Llama B200 lines through the
fp8_recipe column, which this file and published_runs_skills.csv gained). Session 18
(s18-nemo2407) added NeMo 24.07's seven DGX-H100 pre-training rows (NeMo
docs/source/performance/performance_summary.md at 8e3d65dc) whose models the bundle holds.
Session 19 (s19-titanatp) added torchtitan's June-2025 async TP page (Llama 3.1 70B on 256 and
8B on 64 Grand Teton H100, bf16 / float8 tensorwise / float8 rowwise, vanilla and async TP: 12
rows; tests/golden/test_torchtitan_2025_06_async_tp.py checks them against the page).
Each row names its source (with the table and commit in its notes) and its framework profile.
Rows that do not fit stay in the file; docs/planner.md lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_published_rows_known, validation_guard, validation_rows
from scalemodel.analytic.validate import convention_flops_per_token, validate
from scalemodel.specs import get_model

ROOT = Path(__file__).resolve().parents[2] / "validation"
NAME = "published_runs_2026.csv"


_rows = validation_rows


def test_rows_name_known_sources_and_profiles():
    rows = _rows(NAME)
    assert len(rows) == 89
    assert_published_rows_known(rows, ("training_runs.csv", "holdout_mosaicml.csv"))


def test_every_row_is_predicted_and_the_error_does_not_regress():
    """Regression guard: on 2026-12-02 `python -m scalemodel validate --file
    validation/published_runs_2026.csv` gave 39.7% mean and 233.2% max absolute error when the
    rows came in, and 23.8% / 118.9% after the issue-16 pricing, the NeMo 24.03 profile of the
    long-context rows and partial recompute (max: Qwen3-30B-A3B on 8 B200 at micro-batch 1,
    25.11); 22.0% / 118.9% once the torchtitan 2024-12 rows ran on their own part
    (h100-sxm-hbm2e-500w, HBM 2.4 TB/s); 22.4% / 125.0% with cuDNN's measured B200 attention
    curve for Transformer Engine on Blackwell and torch's eager fp32 CP merge (the max row,
    Qwen3-30B-A3B on 8 B200, got worse, +118.9% -> +125.0%: its attention now runs at cuDNN's
    measured rate; its miss is the MoE part); then fp8 runs count Transformer Engine's 1-byte
    saved Linear inputs, 23.6% / 125.2% (memory only: Qwen3-30B-A3B on 16 H100, 25.11, is no longer forced to
    full recompute, and its step-time miss shows whole; docs/planner.md "fp8 saved inputs");
    25.7% / 162.1% with each NeMo recipe's MoE dispatcher and EP overlap priced (moe_recipes:
    the MoE rows are now predicted too fast, their unpriced remainder in docs/planner.md "Issue
    16 pricing"; the max is Qwen3-30B-A3B on 16 H100, 25.11); 25.6% / 161.8% with the EP
    straggler of the benchmarks' force-balanced routing (docs/planner.md "EP straggler from
    expert load imbalance": 0.2-1.8 points per MoE row, none worse); 24.3% / 161.8% with
    torchtitan 9dec370's pipeline defaults on its two 405B rows (+28.8% / +33.3% -> +5.1% /
    +5.7%); 26.0% / 167.4% with one in-flight rule for every pipeline schedule and, for NeMo
    from 25.09, Megatron-Core's routing weights applied inside the expert activation (memory
    only; docs/memory.md "Micro-batches in flight"): the NeMo MoE rows now fit at the recompute
    their published configs ran (none for Qwen3 25.11, selective mla_up_proj+mlp for
    DeepSeek-V3 B200), so their step-time misses show whole: Qwen3-235B on 64 B200 +15.5% ->
    +82.7%, Qwen3-30B on 16 H100 (the max) +161.8% -> +167.4%; with torch's foreach AdamW,
    gradient clipping, FSDP2's copies on the compute stream and FSDP2's root group priced for
    torchtitan 2024-12, 23.2% -> 22.4% / 143% on main c3ad95e (the 8B FSDP rows 4-7 points lower;
    docs/planner.md "torchtitan 2024-12: the optimizer step, FSDP2's copies and root group, the
    attention backend"); at the end of the ninth session (all of 2026-12-02's pricing merged:
    fp8 recipes, MoE fp8 padding, MTP, the eager MoE host floor, the SC21 and Llama 3 profiles)
    22.7% / 143.3%, the max still Qwen3-30B on 16 H100 (25.11); at the end of the tenth session
    18.5% / 142.0% (B200 attention held to the sustained clock: the seven NeMo long-sequence
    B200 rows +17..+22% -> -2..+8%; the K-dependent GEMM tile cost); 18.7% / 142.0% at the start
    of the thirteenth, and 23.6% / 142.0% with the 26.02 table's two Qwen3-30B-A3B rows added
    (16 H100 +137.8%, 8 B200 +99.1%; docs/planner.md "The 25.11 rows beside 26.02's"); 23.1% ->
    22.5% / 141.4% -> 135.3% at session 15 with the Hopper attention curves held to the sustained
    clock (the FlashAttention-3 authors' scripts time each kernel after a 1 s cool-down; the
    torchtitan 8B rows 3-22 points lower, NeMo's Llama 2 7B CP rows on H100 7-13 points too fast;
    docs/planner.md "Hopper attention at sustained clocks"); 22.5% -> 26.1% / 135.3% the same
    session with NeMo 24.03 (Transformer Engine 1.4) priced with the cuDNN (flash3) class on
    Hopper, which TE 1.4's attention.py selects on sm90 (lines 2834-2839 at v1.4) and cuDNN 9.1.0
    measures at on GH100: the seven Llama 2 7B CP rows -8..-17% -> +21..+40% (docs/planner.md
    "NeMo 24.03 runs cuDNN attention on Hopper"); 26.1% -> 22.5% / 135.3% at session 16 with
    the release's launcher read: NeMo-Framework-Launcher 24.03.01 exports NVTE_FUSED_ATTN=0 into
    every job, so flash-attn 2.x ran (the seven rows back to -8..-17%; docs/planner.md "NeMo
    24.03: the launcher turns cuDNN attention off"; 22.1% with main of 11642d9); 22.1% -> 21.7% /
    135.3% the same session with
    the three Megatron-Bridge 2026-05-18 rows added (Qwen3-30B-A3B, 16 H100 BF16 EP16, the
    all-to-all dispatcher eager and with TE-scoped graphs: +14.8%, +16.6%, +17.2%; no other row
    moved; docs/planner.md "Eager MoE host time on a GPU host: the search of session 16"); 21.7%
    -> 21.0% / 135.3% at session 17 with the Qwen3-235B-A22B recipe facts read at their tags
    (the recipe's edge-chunk pipeline split, the H100 preset without TP overlap, the 25.11 B200
    FP8-MX preset without the parameter-gather overlap): Qwen3-235B on 64 B200 +71.1% -> +58.3%,
    on 256 H100 (25.11) +29.3% -> +20.4%, on 256 B200 (26.04) +31.3% -> +21.8%; no other row
    moved (docs/planner.md "Qwen3-235B-A22B: the presets read at their tags"); 21.2% / 135.3%
    (44 rows) -> 17.4% / 135.3% (70 rows) at session 18 (s18-newruns) with 26 rows of the same
    Megatron-Bridge archive added as they fall, no constant moved and none of the 44 rows'
    predictions changed: 14 Llama rows (H100 26.06 / 26.04.01 / 26.04 / 26.02.01 / 25.09, B200
    25.11 FP8-MX and 25.09 FP8-CS / FP8-MX) within -8.1..+9.4%, 12 MoE rows -8.9..+31.9%; the
    guard's mean moved down with them (docs/planner.md "Rows added in session 18"); 17.4% ->
    17.5% / 135.3% (s18-dsv3b200) with the DeepSeek-V3 B200 presets read at v0.2.1 and v0.3.0:
    the 26.02 / 26.02.01 rows run Hybrid-EP, +10.8% / +6.8% -> +14.0% / +9.8%; the 25.11 row's
    alltoall preset is what was priced, +31.9% as before (docs/planner.md "DeepSeek-V3 on B200:
    the presets of v0.2.1 and v0.3.0"); -> 16.3% / 135.3% (77 rows, s18-nemo2407) with NeMo
    24.07's seven DGX-H100 FP8 pre-training rows added as they fall under their own nemo-24.07
    profile, no constant moved and none of the 70 rows' predictions changed: GPT-3 175B on 128 /
    512 GPUs -4.5% / -14.1%, Llama 2 7B / 13B / 70B -3.8% / -5.3% / -2.7%, Llama 3 8B / 70B (CP2)
    -4.5% / -2.7% (docs/planner.md "NeMo 24.07"); 16.41% / 135.3% -> 16.25% / 133.9%
    (s18-a2a) with NCCL's all-to-all priced at its own nccl-tests plateau inside a node, 0.711
    of the NVLink line rate (NVIDIA GTC25 S72583), not the rings' 0.80: the eight MoE rows on
    the all-to-all dispatcher 1-4 points lower (Qwen3-30B-A3B on 8 B200 +106.4% / +98.1% ->
    +102.7% / +94.5%, DeepSeek-V3 25.11 +31.9% -> +30.9%; docs/comm.md "All-to-all inside a
    node"); 16.46% / 133.9% (main 3f74cab) -> 16.42% / 133.9% (s18-epagree) with the expert
    data-parallel group placed as Megatron-Core numbers it (members ep_stride x ep apart, so an
    EP8 group's expert gradients cross the NICs): the DeepSeek-V3 and Qwen3-235B B200 rows
    whose expert groups span nodes 0.3-0.7 points lower (nemo-deepseek-v3-b200-2511 +31.0% ->
    +30.2%; docs/planner.md "Smaller EP picks"); 16.45% / 133.9% (77 rows, ed93ddd) -> 17.24% /
    133.9% (89 rows, s19-titanatp) with torchtitan's June-2025 async TP page added as it falls
    under the torchtitan-2025-06 and torchtitan-2025-06-async-tp profiles (22.3% mean, 52.5% max
    over the 12; the float8 rowwise rows +33..+53% are priced with tensorwise costs), none of
    the 77 rows' predictions changed (docs/planner.md "torchtitan's June-2025 async TP rows").
    Limits: the later values plus about 2 points
    (the issue's target for runs not seen is 12% mean; these rows show how far it is)."""
    validation_guard((ROOT / NAME).read_text(), rows=89, mape=0.183, max_ape=1.36)


def test_nemo_full_attention_convention():
    # NeMo nemo/utils/flops_formulas.py llama3() before commit 6251117f (2025-08-09):
    # per token l h^2 (12 + 12 g/a + 18 f/h + 12 s/h + 6 V/(l h)). Llama 3 8B at 8192:
    # 32 x 4096^2 = 536.87M; 12 + 3 + 63 + 24 + 5.871 = 107.871 -> 57.913 GFLOP per token.
    m = get_model("llama-3-8b")
    got = convention_flops_per_token("nemo_full_attn", m, 8192, None)
    assert got == pytest.approx(536.870912e6 * 107.871, rel=1e-4)
    # the code after that commit halves the 12 s/h term for the causal mask; with that change the
    # convention reproduces a published pair of the 25.11 DGX-H100 table (Megatron-Bridge archive):
    # LLAMA3_8B 14451 tokens/s/GPU = 744 model TFLOP/s/GPU
    causal = got - 536.870912e6 * 6 * 8192 / 4096
    assert 14451 * causal / 1e12 == pytest.approx(744, abs=1)


def test_the_26_02_and_26_02_01_h100_rows_share_every_planner_input():
    """The 26.02 table (line 530 of docs/performance-summary-archive.md at 067f987d) and the
    26.02.01 table (line 445) print the same Qwen3-30B-A3B layout on 16 H100 (FP8, GBS 1024,
    MBS 1, TP1 PP2 VP12 EP8), and both rows take the nemo-26.02 profile (the v0.3.0 preset:
    DeepEP, moe_a2a_overlap), yet measure 5113 and 9058 tokens/s: the planner gives one figure
    for both, so no planner term can close both rows; the 1.77x is in what ran, not in the
    recorded inputs (v0.3.1 moved this preset to Hybrid-EP at EP16 PP1 without the overlap;
    both rows' notes say so)."""
    rows = {r["id"]: r for r in _rows(NAME)}
    a = rows["nemo-qwen3-30b-a3b-h100-2602"]
    b = rows["nemo-qwen3-30b-a3b-h100-260201"]
    own = {"id", "table", "measured", "notes"}
    assert {k: v for k, v in a.items() if k not in own} == {
        k: v for k, v in b.items() if k not in own}
    assert (float(a["measured"]), float(b["measured"])) == (5113.0, 9058.0)
    results, _ = validate((ROOT / NAME).read_text())
    pred = {r.id: r.predicted for r in results}
    assert pred[a["id"]] == pytest.approx(pred[b["id"]], rel=1e-9)


@pytest.mark.parametrize("dispatcher, overlap", [
    ("flex-deepep", True),     # the v0.3.0 preset as written (lines 421-429)
    ("alltoall", True),        # the Qwen3 provider's default dispatcher in DeepEP's place
    ("flex-hybridep", False),  # v0.3.1's preset (commit f29a269f8, lines 408-415)
])
def test_no_dispatcher_reading_makes_the_26_02_h100_row_slower_than_26_02_01(
        monkeypatch, dispatcher, overlap):
    """Megatron-Bridge docs/releases/known-issues.md (v0.3.0 line 9): DeepEP is not supported
    in the NeMo 26.02 container, while the v0.3.0 Qwen3-30B-A3B H100 preset names it and
    Megatron-Core b0cc2706 token_dispatcher.py lines 1148-1150 refuse a flex-deepep dispatcher
    without DeepEP; so the 26.02 row (5113 tokens/s) ran some other dispatcher, not stated.
    Whichever of the three the recipes name is priced, the row stays above 1.5x its
    measurement (the 26.02.01 table has 9058 = 1.77x 5113 at the same printed layout): the
    dispatcher is not what separates the two tables (docs/planner.md "What the 26.02
    container could run on H100")."""
    import scalemodel.specs.frameworks as fw
    orig = fw.moe_recipe

    def patched(values, model_id, gpu_id):
        r = orig(values, model_id, gpu_id)
        if r and model_id == "qwen3-30b-a3b" and gpu_id == "h100-sxm" \
                and r["dispatcher"] == "flex-deepep":
            r = {**r, "dispatcher": dispatcher, "a2a_overlap": overlap}
        return r

    monkeypatch.setattr(fw, "moe_recipe", patched)
    text = (ROOT / NAME).read_text().splitlines()
    row = [ln for ln in text if ln.startswith("nemo-qwen3-30b-a3b-h100-2602,")]
    results, skipped = validate("\n".join([text[0], *row]) + "\n")
    assert not skipped and len(results) == 1
    assert results[0].predicted > 1.5 * 5113


def test_the_2026_05_18_eager_and_graphed_rows_reproduce_their_sources():
    """NVIDIA-NeMo/Megatron-Bridge PR 3868's hand-off comment (2026-05-18): Qwen3-30B-A3B, 16 H100,
    BF16, TP1 PP1 CP1 EP16, MBS 1, GBS 1024, all-to-all dispatcher, no A2A overlap; eager
    iterations 5-8 41.36 s a step, TE-scoped attn + moe_router + moe_preprocess graphs 42.00 s.
    Commit da871ee8 (PR 3880), perf-activation-recompute SKILL.md: the same recipe family with
    recompute_modules None, CUDA graphs off, EP overlap off, 42.21 s. Seq 4096 is the v1
    preset's (qwen3_llm_pretrain.py set_qwen3_common_configs at 1faf74e3).
    tokens/s/GPU = GBS x seq / (step x GPUs)."""
    rows = {r["id"]: r for r in _rows(NAME)}
    step_s = {"mbridge-pr3868-qwen3-30b-a3b-h100-eager": 41.36,
              "mbridge-pr3868-qwen3-30b-a3b-h100-graphed": 42.00,
              "mbridge-pr3880-qwen3-30b-a3b-h100-eager-norecompute": 42.21}
    for rid, s in step_s.items():
        r = rows[rid]
        assert float(r["measured"]) == pytest.approx(1024 * 4096 / (s * 16), abs=0.06)
        assert (r["gpu"], r["gpus"], r["tp"], r["pp"], r["cp"], r["ep"], r["micro_batch"],
                r["global_batch_seqs"], r["seq_len"], r["precision"], r["ep_overlap"]) == (
            "h100-sxm", "16", "1", "1", "1", "16", "1", "1024", "4096", "bf16", "0")
    # the two arms differ only in their profile: the graphed arm captures the three scopes
    from types import SimpleNamespace

    from scalemodel.analytic.step.config import moe_dispatcher, moe_graph_scopes

    model = SimpleNamespace(id="qwen3-30b-a3b")
    eager = SimpleNamespace(framework_id="mbridge-2026-05-18-eager", model=model, precision="bf16")
    graphed = SimpleNamespace(framework_id="mbridge-2026-05-18-graphed", model=model,
                              precision="bf16")
    assert moe_dispatcher(eager, "h100-sxm") == moe_dispatcher(graphed, "h100-sxm") == "alltoall"
    assert moe_graph_scopes(eager, "h100-sxm") == ()
    assert moe_graph_scopes(graphed, "h100-sxm") == ("attn", "moe_router", "moe_preprocess")
    a, b = rows["mbridge-pr3868-qwen3-30b-a3b-h100-eager"], rows[
        "mbridge-pr3868-qwen3-30b-a3b-h100-graphed"]
    own = {"id", "table", "measured", "notes", "framework"}
    assert {k: v for k, v in a.items() if k not in own} == {
        k: v for k, v in b.items() if k not in own}
