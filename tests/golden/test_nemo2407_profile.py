"""NeMo 24.07: the `nemo-24.07` profile and the seven DGX-H100 pre-training rows it prices
(issue 16, item 4; session 18, s18-nemo2407).

Sources read for this test (no value below is copied from the code's output):

* NVIDIA/NeMo docs/source/performance/performance_summary.md at 8e3d65dc ("24.07 perf
  numbers", 2024-09-09), table Pretraining (FP8, container NeMo24.07, DGX-H100), lines 16-25:
  #-GPUs, GBS, MBS, sequence, TP, PP, CP, VP, tokens/s/GPU and model TFLOP/s/GPU per row.
* NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/config.yaml at tag 24.07 (8325688d,
  2024-08-01) and at 0b1a110c ("24.07 release", 2024-08-06, the commit whose line 53 names
  nvcr.io/nvidia/nemo:24.07): line 72 `NVTE_FUSED_ATTN: 0`. "Enable cuDNN FA" (a6490ffe) and
  "Enable cuDNN FlashAtt only for 175B" (95c77b59) reached main with PR #384 on 2024-08-13
  (20ab57b3), the line itself left with 04b8d098 on 2024-08-29: after both commits above, so
  Transformer Engine's fused (cuDNN) attention is off in the 24.07 release's jobs.
* The same tag's training recipes: every H100 FP8 example adds
  `+training.model.optim.grad_sync_dtype=bf16` (llama2_7b_fp8.sh line 22, ..., 175b_fp8_16node.sh
  line 24); gpt3/175b.yaml sets ub_tp_comm_overlap False (line 149), llama2_70b.yaml and
  llama3_70b.yaml true (line 136).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from scalemodel.analytic.validate import convention_flops_per_token, validate
from scalemodel.specs import get_model
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

CSV = Path(__file__).resolve().parents[2] / "validation" / "published_runs_2026.csv"

# the page's rows (line: model, GPUs, GBS, MBS, seq, TP, PP, CP, VP, tokens/s/GPU, TFLOP/s/GPU)
PAGE = {
    "nemo-gpt3-175b-h100-128-2407": ("gpt3-175b", 128, 256, 1, 2048, 4, 8, 1, 6, 716, 771),
    "nemo-gpt3-175b-h100-512-2407": ("gpt3-175b", 512, 2048, 2, 2048, 4, 8, 1, 6, 825, 888),
    "nemo-llama2-7b-h100-2407": ("llama-2-7b", 8, 128, 1, 4096, 1, 1, 1, 1, 16934, 780),
    "nemo-llama2-13b-h100-2407": ("llama-2-13b", 16, 128, 1, 4096, 1, 4, 1, 10, 8715, 760),
    "nemo-llama2-70b-h100-2407": ("llama-2-70b", 64, 128, 1, 4096, 4, 4, 1, 20, 1728, 768),
    "nemo-llama3-8b-h100-2407": ("llama-3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12273, 711),
    "nemo-llama3-70b-h100-2407": ("llama-3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1524, 734),
}


def _rows():
    return [r for r in csv.DictReader(io.StringIO(CSV.read_text()))
            if r["framework"] == "nemo-24.07"]


def test_attention_stays_flash_attention_2_read_at_the_24_07_launcher():
    fw = get_framework("nemo-24.07")
    assert fw.attention_for("hopper") == ("flash", "")
    assert fw.sources["attention"] == "nemo-launcher-24-07-env"
    title = all_sources()["nemo-launcher-24-07-env"].title
    # file, tag / commits and the line the reading rests on
    for part in ("launcher_scripts/conf/config.yaml", "tag 24.07", "8325688d", "0b1a110c",
                 "line 72", "NVTE_FUSED_ATTN: 0", "nvcr.io/nvidia/nemo:24.07", "a6490ffe",
                 "95c77b59", "20ab57b3", "04b8d098", "tag 24.09"):
        assert part in title, part
    # the chronology that decides it: the tag and the release commit precede the merge of
    # PR #384 (2024-08-13) and the removal (2024-08-29)
    assert "2024-08-01" in title and "2024-08-06" in title
    assert "2024-08-13" in title and "2024-08-29" in title


def test_gradients_reduce_in_bf16_from_grad_sync_dtype():
    fw = get_framework("nemo-24.07")
    assert fw.values["grad_reduce_bytes"] == 2  # bf16: 2 bytes per reduced gradient
    assert fw.sources["grad_reduce_bytes"] == "nemo-launcher-24-07-recipes"
    assert get_framework("nemo-24.03").values["grad_reduce_bytes"] == 4  # not moved
    title = all_sources()["nemo-launcher-24-07-recipes"].title
    for part in ("tag 24.07", "8325688d", "grad_sync_dtype=bf16", "175b_fp8_16node.sh line 24",
                 "_fp8.sh line 22", "_fp8.sh line 21"):
        assert part in title, part
    nemo = all_sources()["nemo-2-0-0rc1-distributed-adam"].title
    for part in ("r2.0.0rc1", "579983fb", "nemo/core/optim/distributed_adam.py", "lines 146-148"):
        assert part in nemo, part


def test_gpt3_175b_runs_without_tp_overlap_the_70b_llamas_with_it():
    from scalemodel.analytic.step.config import recipe_overlap

    fw = get_framework("nemo-24.07")
    title = all_sources()["nemo-launcher-24-07-recipes"].title
    assert "ub_tp_comm_overlap False line 149" in title
    assert "ub_tp_comm_overlap true line 136" in title

    def job(model):
        return SimpleNamespace(framework_id="nemo-24.07", precision="bf16",
                               model=SimpleNamespace(id=model))

    assert recipe_overlap(job("gpt3-175b"), "h100-sxm", "tp_overlap", True) is False
    assert recipe_overlap(job("llama-2-70b"), "h100-sxm", "tp_overlap", True) is True
    assert fw.values["dp_overlap"] and fw.values["param_gather_overlap"]
    assert fw.values["pp_p2p_overlap"] == "interleaved"


def test_what_was_not_read_stays_inherited():
    fw, base = get_framework("nemo-24.07"), get_framework("nemo-24.03")
    # (grad_buffer_bytes is its own since 2026-12-07: tests/golden/test_nemo_apex_grad_buffer.py)
    for k in ("fp8_scaling", "cp_impl", "recompute_options",
              "fp8_scaling_recipes", "moe_probs_in_expert_act"):
        assert fw.values.get(k) == base.values.get(k), k
        assert fw.sources.get(k) == base.sources.get(k), k
    assert fw.values["fp8_scaling"] == "delayed"
    assert fw.cudnn_version == "unknown"  # a release field: not read for 24.07, not inherited


def test_the_rows_carry_the_page_layout_and_parse_with_their_profile():
    rows = {r["id"]: r for r in _rows()}
    assert set(rows) == set(PAGE)
    for rid, (model, gpus, gbs, mbs, seq, tp, pp, cp, vp, tok, _tf) in PAGE.items():
        r = rows[rid]
        assert r["source"] == "nemo-performance-summary-2407"
        assert (r["model"], r["gpu"], r["precision"], r["convention"]) == (
            model, "h100-sxm", "fp8", "tokens")
        got = tuple(int(r[k]) for k in ("gpus", "global_batch_seqs", "micro_batch", "seq_len",
                                        "tp", "pp", "cp", "vpp"))
        assert got == (gpus, gbs, mbs, seq, tp, pp, cp, vp)
        assert int(r["dp"]) == gpus // (tp * pp * cp)  # no EP: DP is what the GPUs leave
        assert float(r["measured"]) == tok
        # not stated on the page: left to the search
        assert r["zero"] == r["recompute"] == r["attention"] == r["fp8_recipe"] == ""
        assert "8e3d65dc" in r["notes"] and "nemo-24.07" in r["notes"]
    text = CSV.read_text().splitlines()
    mine = [ln for ln in text if ln.split(",", 1)[0] in PAGE]
    results, skipped = validate("\n".join([text[0], *mine]) + "\n")
    assert not skipped and len(results) == len(PAGE)
    for res in results:
        _, _, _, mbs, _, tp, pp, cp, vp, _, _ = PAGE[res.id]
        lay = res.layout if isinstance(res.layout, dict) else vars(res.layout)
        assert (lay["tp"], lay["pp"], lay["cp"], lay["vpp"], lay["micro_batch"]) == (
            tp, pp, cp, vp, mbs)


@pytest.mark.parametrize("rid", sorted(PAGE))
def test_tokens_times_the_page_formula_give_its_tflops(rid):
    """The page's two figures agree through the bundled model's shape: tokens/s/GPU x model
    FLOP per token = the printed TFLOP/s/GPU within 0.5 TFLOP/s. Llama rows: NeMo's Llama formula
    of 2024 (nemo_full_attn); GPT-3 175B: 6 N + 12 l h s per token (the megatron_core
    convention). So the bundle's gpt3-175b and Llama shapes are the ones the runs trained."""
    model, _, _, _, seq, *_, tok, tf = PAGE[rid]
    conv = "megatron_core" if model == "gpt3-175b" else "nemo_full_attn"
    flops = convention_flops_per_token(conv, get_model(model), seq, None)
    assert tok * flops / 1e12 == pytest.approx(tf, abs=0.5)
