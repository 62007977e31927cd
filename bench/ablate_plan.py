"""What each framework-level term of the planner moves on the validation rows.

    PYTHONPATH=src python bench/ablate_plan.py

Prints the mean / max absolute error over validation/training_runs.csv and the per-group range
for the final model and with one term switched off at a time: a CSV column set back to its
default (Triton attention, eager mode, unfused gradient accumulation, flash3, DualPipe) or a
mechanism
replaced by its earlier form (the measured sustained GEMM ratio of Hopper and B200, the measured fp8/bf16 GEMM
efficiency ratio, the A100
sustained-clock factor, batched GEMMs sharing waves).
Nothing is tuned here; the figures are quoted in docs/planner.md.
"""

from __future__ import annotations

import collections
import csv
import io
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalemodel.analytic.step import gemm as gemm_mod  # noqa: E402
from scalemodel.analytic.validate import summary, validate  # noqa: E402
from scalemodel.specs import gpu as gpu_spec  # noqa: E402

TEXT = (ROOT / "validation" / "training_runs.csv").read_text()


def group(row_id: str, gpu: str) -> str:
    head = row_id.split("-")[0]
    return f"{head}-{gpu.split('-')[0]}" if head == "mpt" else head


def report(text: str, label: str) -> None:
    results, skipped = validate(text)
    by = collections.defaultdict(list)
    for r in results:
        by[group(r.id, r.gpu)].append(r.error)
    s = summary(results)
    ranges = "  ".join(f"{k} {100 * min(v):+.0f}..{100 * max(v):+.0f}" for k, v in by.items())
    print(f"{label:34s} MAPE {100 * s['mape']:.1f}% max {100 * s['max_ape']:.1f}%"
          f"{' (' + str(len(skipped)) + ' skipped)' if skipped else ''} | {ranges}")


def edited(fn: Callable[[dict[str, str]], None]) -> str:
    rows = list(csv.DictReader(io.StringIO(TEXT)))
    for r in rows:
        fn(r)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


def swap(column: str, old: str, new: str) -> Callable[[dict[str, str]], None]:
    def fn(r: dict[str, str]) -> None:
        if r.get(column) == old:
            r[column] = new
    return fn


def main() -> None:
    report(TEXT, "final")
    report(edited(swap("attention", "triton", "flash")), "MPT triton -> flash")
    report(edited(swap("kernels", "eager", "fused")), "torchtitan eager -> fused")
    report(edited(swap("grad_accum_fusion", "0", "1")), "Megatron grad-accum fused")
    report(edited(swap("attention", "flash3", "flash")), "Megatron-Bridge flash3 -> flash")
    report(edited(swap("schedule", "dualpipe", "1f1b")), "DeepSeek-V3 dualpipe -> 1f1b")
    prop = gpu_spec.GPUSpec.sustained_fraction
    clock_only = property(lambda self: (min(1.0, self.sustained_clock_hz / self.peak_clock_hz)
                                        if self.peak_clock_hz and self.sustained_clock_hz
                                        else 1.0))
    gpu_spec.GPUSpec.sustained_fraction = clock_only  # type: ignore[method-assign]
    try:
        report(TEXT, "no measured sustained GEMM ratio")
    finally:
        gpu_spec.GPUSpec.sustained_fraction = prop  # type: ignore[method-assign]
    gpu_spec.GPUSpec.sustained_fraction = property(  # type: ignore[method-assign]
        lambda self: 1.0 if self.arch == "ampere" else prop.fget(self))
    try:
        report(TEXT, "no A100 sustained-clock factor")
    finally:
        gpu_spec.GPUSpec.sustained_fraction = prop  # type: ignore[method-assign]
    dtype_factor = gpu_spec.GPUSpec.gemm_dtype_factor
    gpu_spec.GPUSpec.gemm_dtype_factor = lambda self, dtype: 1.0  # type: ignore[method-assign]
    try:
        report(TEXT, "fp8 GEMMs at the bf16 efficiency")
    finally:
        gpu_spec.GPUSpec.gemm_dtype_factor = dtype_factor  # type: ignore[method-assign]
    gpu_spec.GPUSpec.sustained_fraction = property(lambda self: 1.0)  # type: ignore[method-assign]
    try:
        report(TEXT, "no sustained factor at all")
    finally:
        gpu_spec.GPUSpec.sustained_fraction = prop  # type: ignore[method-assign]
    shape = gemm_mod._shape_factor
    gemm_mod._shape_factor = lambda M, N, K, sms, batch=1.0, tile=(128, 128, 64), k0=0.0: shape(
        M, N, K, sms, 1.0, tile, k0)
    try:
        report(TEXT, "batched GEMMs priced per product")
    finally:
        gemm_mod._shape_factor = shape


if __name__ == "__main__":
    main()
