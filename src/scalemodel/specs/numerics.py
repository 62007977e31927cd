"""Element sizes, optimizer state sizes and planning assumptions, read from numerics.toml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..errors import BadInput, close_matches
from .sources import cite, load_toml


@dataclass(frozen=True)
class DType:
    name: str
    bytes: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class Optimizer:
    """Bytes per parameter that an optimizer keeps beyond the working weights and gradients."""

    id: str
    label: str
    master_bytes: float
    state_bytes: float
    source: str
    note: str = ""

    @property
    def bytes_per_param(self) -> float:
        return self.master_bytes + self.state_bytes


@dataclass(frozen=True)
class Assumption:
    name: str
    value: float
    unit: str
    source: str
    note: str = ""


@cache
def _data() -> dict:
    return load_toml("numerics.toml")


def dtype_names() -> list[str]:
    return list(_data()["dtypes"])


def dtype(name: str, field: str = "--dtype") -> DType:
    """Element size of a numeric format: dtype('bf16').bytes == 2."""
    key = name.lower().replace("bfloat16", "bf16").replace("float16", "fp16")
    key = {"float32": "fp32", "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8"}.get(key, key)
    t = _data()["dtypes"].get(key)
    if t is None:
        raise BadInput(f"{field}: unknown dtype {name!r}; choose one of {', '.join(dtype_names())}")
    return DType(key, float(t["bytes"]), cite(t["source"]), t.get("note", ""))


def optimizer_ids() -> list[str]:
    return list(_data()["optimizers"])


def optimizer(name: str) -> Optimizer:
    t = _data()["optimizers"].get(name)
    if t is None:
        hint = close_matches(name, optimizer_ids()) or ", ".join(optimizer_ids())
        raise BadInput(f"--optimizer: unknown optimizer {name!r}; choose one of: {hint}")
    return Optimizer(
        id=name,
        label=t["label"],
        master_bytes=float(t["master_bytes"]),
        state_bytes=float(t["state_bytes"]),
        source=cite(t["source"]),
        note=t.get("note", ""),
    )


def assumption(name: str) -> Assumption:
    t = _data()["assumptions"][name]
    return Assumption(name, float(t["value"]), t["unit"], cite(t["source"]), t.get("note", ""))


def _cc_number(compute_capability: str) -> float | None:
    """A CUDA compute capability ("9.0", "10.3") as a number; None for another kind ("gfx942")."""
    try:
        return float(compute_capability)
    except (TypeError, ValueError):
        return None


def fp8_param_storage(scaling: str, compute_capability: str) -> tuple[float, str, str] | None:
    """(HBM bytes per parameter, citation, note) of a Transformer Engine weight built as an fp8
    primary weight (fp8_model_init) under an fp8 ``scaling`` on a GPU of ``compute_capability``
    (numerics.toml [fp8_params]: the fp8 data, plus its transpose where the GPU's cuBLASLt has no
    non-TN fp8 GEMM); None where the scaling is not recorded or the GPU is not a CUDA one."""
    t = _data().get("fp8_params") or {}
    row = t.get(scaling)
    cc = _cc_number(compute_capability)
    if not isinstance(row, dict) or cc is None:
        return None
    non_tn = any(lo <= cc < hi for lo, hi in t.get("non_tn_fp8_gemm_cc") or ())
    total = float(row["bytes"]) + (0.0 if non_tn else float(row.get("transpose_bytes", 0.0)))
    return total, cite(row["source"]), str(row.get("note", ""))
