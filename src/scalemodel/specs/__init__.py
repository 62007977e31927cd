"""Spec data with provenance: GPUs, links, models, numeric formats and planning assumptions.

The bundled files under ``data/`` are the embedded default; users extend them with their own
files (``--gpu my_gpu.toml``, ``--model path/to/config.json``). Nothing is fetched at run time.
"""

from .gpu import GPUSpec, LinkSpec, get_gpu, get_link, gpu_ids, link_ids
from .model import ModelSpec, from_hf_config, get_model, model_ids, model_info, supported_families
from .numerics import (
    Assumption,
    DType,
    Optimizer,
    assumption,
    dtype,
    dtype_names,
    optimizer,
    optimizer_ids,
)
from .sources import Source, all_sources, cite, source

__all__ = [
    "Assumption",
    "DType",
    "GPUSpec",
    "LinkSpec",
    "ModelSpec",
    "Optimizer",
    "Source",
    "all_sources",
    "assumption",
    "cite",
    "dtype",
    "dtype_names",
    "from_hf_config",
    "get_gpu",
    "get_link",
    "get_model",
    "gpu_ids",
    "link_ids",
    "model_ids",
    "model_info",
    "optimizer",
    "optimizer_ids",
    "source",
    "supported_families",
]
