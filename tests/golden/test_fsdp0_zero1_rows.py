"""Megatron-Bridge rows that run without Megatron-FSDP state ZeRO-1 (s18-fsdp0, 2026-12-07, issue 16).

The performance tables print an FSDP column; a row printing FSDP 0 ran Megatron-Core's own data
parallelism, not Megatron-FSDP (the planner's ZeRO-2 / ZeRO-3 for these profiles: frameworks.toml
megatron-core parallelisms_note). Its ZeRO stage is then the recipe's distributed optimizer, read at
the Megatron-Bridge tag of each row's container (source megatron-bridge-recipes-distributed-optimizer;
`git grep -n use_distributed_optimizer <tag> -- src/megatron/bridge/recipes scripts/performance`):

- which tag a container ran: docs/releases/software-versions.md at v0.6.0, the Megatron-Bridge row
  of each table (25.09 0.1.0rc3 line 102, 25.11 0.2.0 line 79, 26.02 0.3.0 line 55, 26.04 0.4.0
  line 33, 26.06 0.5.0 line 10); 26.02.01 ran r0.3.1 (docs/releases/known-issues.md at v0.4.0:
  "Fixed in 26.02.01 (r0.3.1)"); 26.04.01 is cited at v0.4.2, the tag whose performance summary adds
  its table, beside v0.4.0 (the same lines at v0.4.0, v0.4.1 and v0.4.2);
- RECIPE below: the line of each pre-training recipe that sets use_distributed_optimizer True
  (DistributedDataParallelConfig(use_distributed_optimizer=True, ...) up to v0.3.0,
  cfg.ddp.use_distributed_optimizer = True beside cfg.ddp.use_megatron_fsdp = False from v0.3.1);
  no performance script of any of these tags sets it False (the only use_distributed_optimizer
  lines under scripts/performance are the Llama 3 finetune config's, which set it True);
- Megatron-Core builds DistributedOptimizer for it (core_v0.14.0 megatron/core/optimizer/__init__.py
  lines 431-432): optimizer states and fp32 master weights sharded over the data-parallel ranks,
  the gradient buffer whole: ZeRO-1.

The 26.06 tables have no FSDP column: the four 26.06 Llama 3.1 405B rows take "no Megatron-FSDP"
from the v0.5.0 256-GPU presets of their layouts instead (llama31_workload_base_configs.py: FP8-CS
V2 use_megatron_fsdp=False, lines 233 GB300 and 271 GB200; the MXFP8 V2 presets, lines 238-243 and
276-282, leave it at WorkloadBaseConfig's None, utils/utils.py line 52). Rows printing FSDP 64 (or
8) keep ZeRO-3."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scalemodel.analytic.validate import read_rows, row_problem
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

ROOT = Path(__file__).resolve().parents[2] / "validation"
FILES = ("published_runs_nvl72.csv", "published_runs_2026.csv", "training_runs.csv")
R = "src/megatron/bridge/recipes/"

# container -> the Megatron-Bridge tag cited for it (module docstring)
TAG = {"25.09": "v0.1.0rc3", "25.11": "v0.2.0", "26.02": "v0.3.0", "26.02.01": "v0.3.1",
       "26.04": "v0.4.0", "26.04.01": "v0.4.2", "26.06": "v0.5.0"}
# (tag, model) -> (recipe file, line setting use_distributed_optimizer True), read with git grep
_LL = ("llama-3-8b", "llama-3-70b", "llama-3-405b")
_QW = ("qwen3-30b-a3b", "qwen3-235b-a22b")
RECIPE: dict[tuple[str, str], tuple[str, int]] = {
    ("v0.1.0rc3", "llama-3-8b"): ("llama/llama3_8b.py", 187),
    ("v0.1.0rc3", "llama-3-70b"): ("llama/llama3_70b.py", 184),
    ("v0.1.0rc3", "llama-3-405b"): ("llama/llama31_405b.py", 200),
    ("v0.1.0rc3", "qwen3-30b-a3b"): ("qwen/qwen3_30b_a3b.py", 199),
    ("v0.1.0rc3", "qwen3-235b-a22b"): ("qwen/qwen3_235b_a22b.py", 196),
    ("v0.1.0rc3", "deepseek-v3"): ("deepseek/deepseek_v3.py", 275),
}
for _t, (_l, _q, _d) in {"v0.2.0": (559, 318, 307), "v0.3.0": (560, 318, 314)}.items():
    RECIPE.update({(_t, m): ("llama/llama3.py", _l) for m in _LL})
    RECIPE.update({(_t, m): ("qwen/qwen3_moe.py", _q) for m in _QW})
    RECIPE[(_t, "deepseek-v3")] = ("deepseek/deepseek_v3.py", _d)
for _t, _lines in {"v0.3.1": (297, 730, 1181, 185), "v0.4.0": (297, 730, 1181, 185),
                   "v0.4.2": (297, 730, 1181, 185), "v0.5.0": (298, 731, 1195, 229)}.items():
    RECIPE.update({(_t, m): ("llama/llama3.py", n) for m, n in zip(_LL, _lines[:3], strict=True)})
    RECIPE.update({(_t, "qwen3-30b-a3b"): ("qwen/qwen3_moe.py", 122),
                   (_t, "qwen3-235b-a22b"): ("qwen/qwen3_moe.py", 235),
                   (_t, "deepseek-v3"): ("deepseek/deepseek_v3.py", _lines[3])})
PATCH_BASE = {"26.02.01": "v0.3.0", "26.04.01": "v0.4.0"}  # cited beside the patch container's tag
NO_FSDP_COLUMN = {f"nemo-llama31-405b-{g}-2606-{p}": line
                  for g, lines in (("gb300", (233, "238-243")), ("gb200", (271, "276-282")))
                  for p, line in zip(("cs", "mx"), lines, strict=True)}


def _bridge_rows() -> list[tuple[str, dict[str, str]]]:
    return [(name, r) for name in FILES for r in read_rows((ROOT / name).read_text())
            if r["source"] == "megatron-bridge-perf"]


def _container(row: dict[str, str]) -> str:
    m = re.match(r"(\d\d\.\d\d(?:\.\d\d)?) NeMo [Cc]ontainer", row["table"])
    assert m, row["id"]
    return m.group(1)


def _no_fsdp(row: dict[str, str]) -> bool:
    return bool(re.search(r"FSDP 0\b", row["notes"])) or row["id"] in NO_FSDP_COLUMN


def test_the_counts_of_rows_without_and_with_megatron_fsdp():
    rows = _bridge_rows()
    by_file = {n: sum(_no_fsdp(r) for f, r in rows if f == n) for n in FILES}
    # 82 NVL72 rows (50 dense less the 12 FSDP 64 rows is 38, plus 44 MoE rows of 25.11-26.04.01),
    # 24 in published_runs_2026.csv (DGX-H100 / DGX-B200), 4 DGX-H100 rows in training_runs.csv
    assert by_file == {"published_runs_nvl72.csv": 82, "published_runs_2026.csv": 24,
                       "training_runs.csv": 4}
    fsdp = [r for _, r in rows if re.search(r"FSDP [1-9]\d*\b", r["notes"]) and not _no_fsdp(r)]
    assert len(fsdp) == 12 + 1 + 1  # the NVL72 FSDP 64 rows, 25.09 H100 8B FSDP 8, 25.11 H100 8B


def test_every_row_without_megatron_fsdp_states_zero1_with_its_recipe_line():
    assert "megatron-bridge-recipes-distributed-optimizer" in all_sources()
    n = 0
    for _, r in _bridge_rows():
        if not _no_fsdp(r):
            continue
        c = _container(r)
        tag = TAG[c]
        f, line = RECIPE[(tag, r["model"])]
        assert r["zero"] == "1", r["id"]
        assert f"{R}{f} line {line} at {tag}" in r["notes"], r["id"]
        if c in PATCH_BASE:
            bf, bl = RECIPE[(PATCH_BASE[c], r["model"])]
            assert f"line {bl} at {PATCH_BASE[c]}" in r["notes"] and bf == f, r["id"]
        assert "use_distributed_optimizer True" in r["notes"] and "ZeRO-1" in r["notes"]
        # the old wording is gone: the stage is stated, not searched
        assert "ZeRO stage" not in r["notes"], r["id"]
        # the stated stage reaches the planner as a fixed key, within what the profile offers
        assert row_problem(r).stated["zero"] == 1
        assert "zero1" in get_framework(r["framework"]).values["parallelisms"]
        n += 1
    assert n == 82 + 24 + 4


def test_rows_printing_a_non_zero_fsdp_keep_zero3():
    for _, r in _bridge_rows():
        m = re.search(r"FSDP (\d+)\b", r["notes"])
        if m and int(m.group(1)) > 0 and not _no_fsdp(r):
            assert r["zero"] == "3", r["id"]


@pytest.mark.parametrize("rid, line", sorted(NO_FSDP_COLUMN.items()))
def test_the_2606_rows_take_no_fsdp_from_the_presets(rid, line):
    r = {x["id"]: x for x in read_rows((ROOT / FILES[0]).read_text())}[rid]
    # the 26.06 table prints no FSDP column: the note no longer transcribes one
    assert "FSDP 0" not in r["notes"] and "the 26.06 table has no FSDP column" in r["notes"]
    word = "lines" if isinstance(line, str) else "line"
    assert f"llama31_workload_base_configs.py {word} {line} at v0.5.0" in r["notes"]
    assert r["zero"] == "1" and "llama3.py line 1196 at v0.5.0" in r["notes"]
