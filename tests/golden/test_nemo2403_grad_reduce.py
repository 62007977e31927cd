"""NeMo 24.03: the bytes per reduced gradient of the `nemo-24.03` profile, read at the release
(session 18, s18-nemo2403).

Sources read for this test (no value below is copied from the code's output):

* NVIDIA/NeMo-Framework-Launcher tag 24.03.01 (5c7e280a, 2024-04-19):
  launcher_scripts/conf/training/llama/llama2_7b.yaml optim block lines 142-153
  (name distributed_fused_adam, bucket_cap_mb 125, overlap_grad_sync / overlap_param_sync,
  contiguous_grad_buffer / contiguous_param_buffer; no grad_sync_dtype); nemotron_8b.yaml and
  nemotron_15b.yaml line 169 on, nemotron_22b.yaml line 171 on, the same. The example scripts
  add ``+training.model.optim.grad_sync_dtype=bf16`` (llama/h100/llama2_7b_fp8.sh line 22,
  llama2_70b_fp8.sh line 21, gpt/h100/175b_fp8_16node.sh line 24); no Nemotron example does.
  At tag 24.03 (d4ec7c8b) llama2_7b_fp8.sh ends at line 21 (gc_interval), without it.
  PR #283 (9ecb0a24, 2024-04-10): fa6d1060 added the key to nine training configs, 9c087b63
  moved it from them to the examples, 79f92438 took it off the six Nemotron examples.
* NVIDIA/apex c5f6b795 apex/contrib/optimizers/distributed_fused_adam.py lines 540 and 574-575:
  grad_sync_dtype None becomes the optimizer dtype; NeMo r1.23.0 megatron_base_model.py
  lines 728-729 (main c9c8408f lines 769-770): that dtype is optim.dtype, default float32.
  So a recipe without the key reduce-scatters fp32 gradients: 4 bytes each.
* NVIDIA/NeMo docs/source/performance/performance_long_sequence.md at 8cfedd72: the LLAMA2-7B
  (FP8) H100 table names the container (NeMo24.03.01.framework) and the layouts, no recipe.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from conftest import LAYOUT_16K, LLAMA2_7B_TP2_LOCAL_PARAMS, nemo_16k_row_problem
from scalemodel.analytic.planner import evaluate_one
from scalemodel.analytic.step.comm import collective_time
from scalemodel.analytic.validate import read_rows
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

ROOT = Path(__file__).resolve().parents[2] / "validation"

# the rows nemo-24.03 prices, and the recipe family the reading gives each: the reading covers
# these rows only; a new row under this profile must say which recipe it ran
ROWS = {
    **{f"nemo-cp-llama2-7b-h100-{k}": "published_runs_2026.csv"
       for k in ("16k", "32k", "64k", "128k", "256k", "512k", "1024k")},
    "nemotron-4-340b-6144": "published_runs_papers.csv",
}


def test_fp32_reduce_read_at_the_24_03_01_release():
    fw = get_framework("nemo-24.03")
    assert fw.values["grad_reduce_bytes"] == 4  # fp32
    assert fw.sources["grad_reduce_bytes"] == "nemo-launcher-24-03-01-grad-sync"
    title = all_sources()["nemo-launcher-24-03-01-grad-sync"].title
    for part in ("tag 24.03.01", "5c7e280a", "llama/llama2_7b.yaml optim block lines 142-153",
                 "distributed_fused_adam", "nemotron_22b.yaml line 171",
                 "llama2_7b_fp8.sh line 22", "llama2_70b_fp8.sh line 21",
                 "175b_fp8_16node.sh line 24", "gpt3/175b_fp8.yaml line 177",
                 "PR #283", "fa6d1060", "9c087b63", "e743722a", "79f92438",
                 "tag 24.03 (d4ec7c8b"):
        assert part in title, part
    default = all_sources()["nemo-1-x-apex-dist-adam-grad-sync"].title
    for part in ("c5f6b795", "distributed_fused_adam.py", "(line 540)", "lines 574-575",
                 "r1.23.0", "lines 728-729", "c9c8408f", "lines 769-770",
                 "lines 1075-1096"):
        assert part in default, part


def test_nemo_24_07_keeps_its_bf16_reading():
    # the 24.07 table is the example scripts' runs (bf16 reduce); 24.03's rows are not
    assert get_framework("nemo-24.07").values["grad_reduce_bytes"] == 2
    assert get_framework("nemo-24.07").sources["grad_reduce_bytes"] == (
        "nemo-launcher-24-07-recipes")


def test_the_reading_covers_exactly_the_profiles_rows():
    found = {}
    for path in sorted(ROOT.glob("*.csv")):  # every file, row files or not
        body = "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("#"))
        for r in csv.DictReader(io.StringIO(body)):
            if r.get("framework") == "nemo-24.03":
                found[r["id"]] = path.name
    assert found == ROWS
    rows = {r["id"]: r for r in read_rows((ROOT / "published_runs_2026.csv").read_text())}
    for rid, fname in ROWS.items():
        if fname == "published_runs_2026.csv":
            r = rows[rid]
            assert r["source"] == "nemo-long-sequence-perf"
            assert int(r["seq_len"]) > 4096  # no 24.03.01 example runs over 4096 tokens


def test_the_dp_traffic_carries_4_byte_gradients():
    # Llama 2 7B, the 16K row's layout TP2 PP1 DP8 CP1 on DGX-H100 (8 GPUs a node: 4 DP ranks
    # a node); the parameters held by one GPU counted by hand in conftest
    local, lay = LLAMA2_7B_TP2_LOCAL_PARAMS, LAYOUT_16K
    assert local == 3_369_340_928
    p = nemo_16k_row_problem()
    assert p.job.framework_id == "nemo-24.03"
    v = evaluate_one(p.job, p.cluster, lay).values
    # fp32 gradients reduce-scattered, bf16 parameters all-gathered (the collective model)
    rs = float(collective_time("reduce_scatter", 4.0 * local, 8.0, 4.0, p.cluster))
    ag = float(collective_time("all_gather", 2.0 * local, 8.0, 4.0, p.cluster))
    assert v.dp_raw_s == pytest.approx(rs + ag, rel=1e-3)
    rs_bf16 = float(collective_time("reduce_scatter", 2.0 * local, 8.0, 4.0, p.cluster))
    assert v.dp_raw_s > rs_bf16 + ag  # not the examples' bf16 reduce
