"""Kernel curves as data (specs/data/kernels.toml): every architecture's entry is measured with a
source or borrows one explicitly, the derivation says when a curve is borrowed, and no code in
analytic/ branches on a GPU architecture or SKU."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from scalemodel.analytic.planner import attention_efficiency, make_cluster, make_job, search
from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs import get_gpu, get_model, gpu_ids
from scalemodel.specs.kernels import kernels, resolve

ANALYTIC = Path(__file__).resolve().parents[2] / "src" / "scalemodel" / "analytic"


def _arch_and_sku_names() -> set[str]:
    names = {get_gpu(g).arch for g in gpu_ids()} | set(gpu_ids())
    names |= {"volta", "turing", "ada", "ampere", "hopper", "blackwell", "cdna3"}
    return {n for n in names if n}


def _branches(path: Path, names: set[str]) -> list[str]:
    """Comparisons in code that test an architecture or a GPU id: ``x.arch == ...``, or any
    comparison against a string that names an architecture or a GPU."""
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if not isinstance(n, ast.Compare):
            continue
        sides = [n.left, *n.comparators]
        arch_attr = any(isinstance(s, ast.Attribute) and s.attr == "arch" for s in sides)
        literal = any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                      and c.value.lower() in names for s in sides for c in ast.walk(s))
        if arch_attr or literal:
            out.append(f"{path.name}:{n.lineno}")
    return out


def test_no_per_architecture_or_per_sku_branch_in_analytic():
    names = _arch_and_sku_names()
    found = [b for p in sorted(ANALYTIC.rglob("*.py")) for b in _branches(p, names)]
    assert not found, "branches on a GPU architecture or SKU: " + ", ".join(found)


def test_the_branch_check_sees_one(tmp_path):
    p = tmp_path / "x.py"
    p.write_text('if gpu.arch == "ampere":\n    pass\nif name in ("h100-sxm",):\n    pass\n')
    assert len(_branches(p, _arch_and_sku_names())) == 2


def test_every_gpu_architecture_has_or_borrows_each_curve():
    for g in gpu_ids():
        arch = get_gpu(g).arch
        assert resolve(kernels()["gemm"], arch, "gemm").data["source"]
        assert resolve(kernels()["attention"]["fa2"], arch, "attention.fa2").data["source"]


def test_a_borrow_needs_a_note_and_a_measured_lender():
    table = {"hopper": {"tile_m": 128, "source": "cutlass-gemm-tiles"},
             "newarch": {"borrows": "hopper"}}
    with pytest.raises(BadInput, match="needs a note"):
        resolve(table, "newarch", "gemm")
    with pytest.raises(BadInput, match="has no entry for architecture 'volta'"):
        resolve(table, "volta", "gemm")
    with pytest.raises(BadInput, match="source is missing"):
        resolve({"hopper": {"tile_m": 128}}, "hopper", "gemm")
    e = resolve({**table, "newarch": {"borrows": "hopper", "note": "why"}}, "newarch", "gemm")
    assert e.borrowed_from == "hopper" and e.borrow_note == "why"


def test_mi300x_borrows_the_h100_curve_and_the_derivation_says_so():
    # kernels.toml: cdna3 has no FlashAttention-2 measurement and borrows hopper's, so the
    # fractions of peak are the H100 ones (FlashAttention-3 paper Fig. 5: 335 / 989.4 at 16k)
    assert attention_efficiency(get_gpu("mi300x"), 16384) == pytest.approx(335 / 989.4, rel=1e-9)
    from scalemodel.analytic.planner import derive_row

    job = make_job(get_model("llama-3-8b"), seq_len=4096, global_batch_seqs=64)
    res = search(job, make_cluster("mi300x", 16), top=0)
    text = json.dumps(derive_row(res, res.best).to_dict())
    assert "Borrowed curve: FlashAttention-2 on cdna3: borrows hopper" in text
    assert "Borrowed GEMM tile: cdna3 uses hopper" in text


def test_b200_attention_is_measured_not_borrowed():
    # cudnn-frontend SDPA benchmark (commit f937055, sdpa_benchmark_results_NVIDIA_B200.csv,
    # B200, bf16, causal, head dim 128): flash-attn 2.7.3 forward 428.611 TFLOP/s at 16k,
    # cuDNN (pyt_cudnn) 1358.566 forward and 1074.499 backward; B200 dense bf16 peak 2250
    # the benchmark's rates are burst rates (each call timed alone, free clocks): a step keeps
    # the B200's sustained share, MSMF 1426.4 / MAMF 1751.2 (Bekman, 8 GPUs busy)
    k = 1426.4 / 1751.2
    b200 = get_gpu("b200")
    assert attention_efficiency(b200, 16384) == pytest.approx(428.611 / 2250 * k, rel=1e-3)
    assert attention_efficiency(b200, 16384, kind="flash3") == pytest.approx(
        1358.566 / 2250 * k, rel=1e-3)
    assert attention_efficiency(b200, 16384, kind="flash3", backward=True) == pytest.approx(
        1074.499 / 2250 * k, rel=1e-3)
    # only the causal mask is measured: the unmasked call is read at the causal rate
    assert attention_efficiency(b200, 32768, kind="flash3", causal=False) == pytest.approx(
        1435.072 / 2250 * k, rel=1e-3)
    from scalemodel.analytic.planner import derive_row

    job = make_job(get_model("llama-3-8b"), seq_len=4096, global_batch_seqs=64)
    res = search(job, make_cluster("b200", 16), top=0)
    text = json.dumps(derive_row(res, res.best).to_dict())
    assert "Borrowed curve" not in text
    assert "Borrowed GEMM tile: blackwell uses hopper" in text


def test_flash3_on_ampere_is_one_line_naming_the_file(capsys):
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--gpus", "8",
               "--attention", "flash3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "kernels.toml [attention.fa3] has: blackwell, hopper" in err[0]


def test_gpu_latency_on_b200_borrows_hopper(capsys):
    assert main(["gpu", "latency", "--gpu", "b200", "--json"]) == 0
    assert "borrowed" in capsys.readouterr().out
