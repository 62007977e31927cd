"""The planner's constants (planner.toml) and the job and cluster types the step model reads."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from ...specs.sources import load_toml

ATTENTION_KINDS = ("flash", "flash3", "triton", "unfused")
KERNEL_MODES = ("fused", "eager")
SCHEDULES = ("1f1b", "dualpipe")
FUSED_ATTENTION = ("flash", "flash3", "triton")  # kernels that never write the score matrix to HBM

# Tensor-parallel collectives per layer and micro-batch with sequence parallelism, each moving
# one gathered activation (Korthikanti et al. 2022, Sec. 4.2.2, as Megatron-LM runs it):
# forward 2 all-gathers + 2 reduce-scatters; backward the mirror 4 plus the inputs re-gathered
# for the weight gradients.
# Full recompute repeats the forward ones.
TP_FWD_COLLECTIVES = 4
TP_BWD_COLLECTIVES = 6

STAGE_COLS = ("n_first", "n_mid", "mid_index", "n_last")  # a fixed split, as stage_shape gives it


@cache
def constants() -> dict[str, Any]:
    return load_toml("planner.toml")


@cache
def _profile_values(fid: str | None) -> dict[str, Any]:
    from ...errors import BadInput
    from ...specs.frameworks import get_framework

    try:
        return dict(get_framework(fid).values)
    except BadInput:  # a profile from a user file: its id is not bundled; the default's fields
        return dict(get_framework(None).values)


def profile_value(job: Any, key: str, default: Any = None) -> Any:
    """A field of the job's framework profile (frameworks.toml; the default profile where the
    job names none): the overlaps and the dispatcher the step model prices by framework."""
    v = _profile_values(getattr(job, "framework_id", None)).get(key)
    return default if v is None else v


def recipe_overlap(job: Any, gpu_id: str | None, key: str, default: bool) -> bool:
    """An overlap switch (tp_overlap, param_gather_overlap) as the job runs it: the profile's
    recipe for this model on this GPU at the job's precision where it sets one (frameworks.toml
    model_recipes: a preset that turns the overlap off, e.g. Megatron-Bridge's Qwen3-235B-A22B
    H100 preset without TP communication overlap), else the profile's own field."""
    from ...specs.frameworks import model_recipe_value

    prec = getattr(job, "precision", "bf16")
    key_prec = fp8_scaling(job, gpu_id)[0] if prec == "fp8" else prec
    hit = model_recipe_value(_profile_values(getattr(job, "framework_id", None)),
                             getattr(getattr(job, "model", None), "id", None), gpu_id, key,
                             key_prec)
    if hit is not None:
        return bool(hit[0])
    return bool(profile_value(job, key, default))


def fp8_scaling(job: Any, gpu_id: str | None) -> tuple[str, str]:
    """(recipe, source key) of the job's fp8 scaling: its --fp8-recipe where given (source
    "--fp8-recipe"), else the profile's for this model on this GPU (frameworks.toml
    fp8_scaling_recipes, else fp8_scaling)."""
    from ...errors import BadInput
    from ...specs.frameworks import fp8_scaling_of, get_framework

    given = getattr(job, "fp8_scaling", None)
    if given:
        return str(given), "--fp8-recipe"
    fid = getattr(job, "framework_id", None)
    try:
        fw = get_framework(fid)
    except BadInput:  # a profile from a user file: the default's fields, as _profile_values
        fw = get_framework(None)
    return fp8_scaling_of(fw, getattr(getattr(job, "model", None), "id", None), gpu_id)


def fp8_weight_bytes(job: Any, gpu: Any, zero: Any, e_w: float) -> tuple[Any, Any]:
    """(HBM bytes per layer-matmul weight, bytes per such weight the DP parameter all-gather
    moves) of the job on ``gpu`` at ZeRO stage ``zero`` (arrays broadcast): where the profile's
    recipe at the job's fp8 scaling keeps fp8 primary weights (frameworks.fp8_param_bytes:
    Megatron-Core --fp8-param-gather), Transformer Engine's fp8 weight and the gather's bytes
    from its buffers: the DDP / distributed-optimizer buffers at ZeRO 0 and 1, Megatron-FSDP's
    (optim_grads, optim_grads_params) at ZeRO 2 and 3 (fp8_param_gather_fsdp); ``e_w`` (the
    16-bit working weight) where the profile records no fp8 buffer for the scaling."""
    from ...specs.frameworks import fp8_param_bytes

    if getattr(job, "precision", "bf16") != "fp8":
        return e_w, e_w
    args = (_profile_values(getattr(job, "framework_id", None)),
            fp8_scaling(job, getattr(gpu, "id", None))[0],
            str(getattr(gpu, "compute_capability", "")))
    ddp, fsdp = fp8_param_bytes(*args), fp8_param_bytes(*args, fsdp=True)
    held_d, ag_d = (e_w, e_w) if ddp is None else ddp[:2]
    held_f, ag_f = (e_w, e_w) if fsdp is None else fsdp[:2]
    z = np.asarray(zero) >= 2
    return np.where(z, held_f, held_d), np.where(z, ag_f, ag_d)


def offload_layers(job: Any, gpu_id: str | None) -> int:
    """Layers the profile's recipe offloads to the host for the job's model on this GPU at its
    precision (bf16, or the fp8 scaling; frameworks.toml activation_offload_recipes), else 0."""
    from ...specs.frameworks import offload_layers_of

    prec = getattr(job, "precision", "bf16")
    key = fp8_scaling(job, gpu_id)[0] if prec == "fp8" else prec
    return offload_layers_of(_profile_values(getattr(job, "framework_id", None)),
                             getattr(getattr(job, "model", None), "id", None), gpu_id, key)


def cast_bytes(scaling: str, weights: bool = False) -> tuple[float, str]:
    """(HBM bytes per element, source key) of one fp8 cast and its transpose under a scaling
    recipe: planner.toml [nongemm] fp8_cast_bytes_<scaling> (activations and gradients) or
    fp8_weight_cast_bytes_<scaling> (the once-per-step weight cast)."""
    from ...errors import BadInput

    ng = constants()["nongemm"]
    key = f"fp8_{'weight_' if weights else ''}cast_bytes_{scaling}"
    if key not in ng:
        raise BadInput(f"planner.toml [nongemm]: no {key}: the fp8 cast bytes of scaling "
                       f"{scaling!r} are not recorded")
    return float(ng[key]), str(ng.get(f"{key}_source", ng.get("fp8_source", "")))


def ep_dispatch(job: Any, gpu_id: str | None) -> str:
    """How the job's dispatcher sends a token (per_expert or per_destination): the dispatcher of
    the profile's recipe for this model on this GPU (frameworks.toml moe_recipes: alltoall, or
    flex with DeepEP / Hybrid-EP), else the profile's ep_dispatch."""
    from ...specs.frameworks import MOE_DISPATCH, moe_recipe

    vals = _profile_values(getattr(job, "framework_id", None))
    recipe = moe_recipe(vals, getattr(getattr(job, "model", None), "id", None), gpu_id)
    if recipe is not None:
        return MOE_DISPATCH[recipe["dispatcher"]]
    return str(vals.get("ep_dispatch") or "per_expert")


def ep_dispatch_kernel(job: Any, gpu_id: str | None) -> str | None:
    """The kernel family of a per-destination dispatch (deepep or hybridep), whose measured
    bandwidth prices its network and NVLink stages: the recipe's flex backend (frameworks.toml
    moe_recipes), else the profile's ep_dispatch_kernel; None for a per-expert dispatch or a
    profile that names none (then the collectives engine alone prices the stages)."""
    from ...specs.frameworks import DISPATCH_KERNEL

    if ep_dispatch(job, gpu_id) != "per_destination":
        return None
    kind = moe_dispatcher(job, gpu_id)
    if kind is not None:
        return DISPATCH_KERNEL.get(kind)
    v = _profile_values(getattr(job, "framework_id", None)).get("ep_dispatch_kernel")
    return None if v is None else str(v)


def ep_comm_sm_share(job: Any, gpu: Any) -> float:
    """Share of the GPU's SMs the dispatch and combine kernels hold while they run: the
    profile's ``ep_comm_sms`` for the job's kernel family (deepep, hybridep) over the GPU's
    sm_count (gpus.toml); 0 where the profile records none for it (the all-to-all dispatcher's
    NCCL channels, a GPU without an SM count). Compute beside those kernels runs on the rest
    (step/comm.py _ep_overlapped)."""
    kernel = ep_dispatch_kernel(job, gpu.id)
    sms = (profile_value(job, "ep_comm_sms", None) or {}).get(kernel) if kernel else None
    n = getattr(gpu, "sm_count", None)
    if not sms or not n:
        return 0.0
    return min(1.0, float(sms) / float(n))


def moe_dispatcher(job: Any, gpu_id: str | None) -> str | None:
    """The token dispatcher of the profile's recipe for this model on this GPU (frameworks.toml
    moe_recipes: alltoall, flex-deepep or flex-hybridep), None where the profile records none."""
    from ...specs.frameworks import moe_recipe

    vals = _profile_values(getattr(job, "framework_id", None))
    recipe = moe_recipe(vals, getattr(getattr(job, "model", None), "id", None), gpu_id)
    return None if recipe is None else str(recipe["dispatcher"])


def moe_graph_scopes(job: Any, gpu_id: str | None) -> tuple[str, ...] | None:
    """The CUDA graph scopes (Megatron-Core --cuda-graph-scope) the profile's recipe for this
    model on this GPU captures at the job's precision (frameworks.toml moe_recipes cuda_graphs),
    None where the recipe records none."""
    from ...specs.frameworks import moe_recipe

    vals = _profile_values(getattr(job, "framework_id", None))
    recipe = moe_recipe(vals, getattr(getattr(job, "model", None), "id", None), gpu_id)
    graphs = (recipe or {}).get("cuda_graphs") or {}
    prec = "fp8" if getattr(job, "precision", "bf16") == "fp8" else "bf16"
    return tuple(graphs[prec]) if prec in graphs else None


def moe_fused_grouped_mlp(job: Any, gpu: Any, scaling: str) -> bool:
    """Whether the routed experts run Transformer Engine's fused MXFP8 grouped MLP (the CuTe DSL
    kernels of cuDNN frontend: fc1 grouped GEMM with the SwiGLU, the routing weight and the
    MXFP8 quantisation of its output in the epilogue; backward the fc2 dgrad with dSwiGLU and the
    quantisation of the fc1 output gradient): the profile's recipe for this model on this GPU
    sets it (frameworks.toml moe_recipes fused_grouped_mlp, the preset's
    NVTE_CUTEDSL_FUSED_GROUPED_MLP=1), the job runs fp8 with MXFP8 scaling and the GPU is
    compute capability 10.x (TE's ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8.is_supported)."""
    from ...specs.frameworks import moe_recipe

    if getattr(job, "precision", "bf16") != "fp8" or scaling != "mxfp8":
        return False
    if not str(getattr(gpu, "compute_capability", "")).startswith("10."):
        return False
    vals = _profile_values(getattr(job, "framework_id", None))
    recipe = moe_recipe(vals, getattr(getattr(job, "model", None), "id", None), gpu.id)
    return bool((recipe or {}).get("fused_grouped_mlp", False))


def sp_split(c: Any) -> Any:
    """The split of norm, dropout and residual work over the TP ranks: tp with sequence
    parallelism (Korthikanti et al. 2022, every current profile), 1 where the framework predates
    it (frameworks.toml sequence_parallel = false: each TP rank repeats that work on the whole
    micro-batch)."""
    return c.sp_div if profile_value(c.job, "sequence_parallel", True) else 1.0


def tp_bwd_collectives(job: Any) -> int:
    """TP collectives of a layer's backward: with sequence parallelism the mirror 4 plus the 2
    re-gathers for the weight gradients; without it the 2 all-reduces of the input gradients,
    each a reduce-scatter and an all-gather (4 in all-gather units)."""
    return TP_BWD_COLLECTIVES if profile_value(job, "sequence_parallel", True) else 4
