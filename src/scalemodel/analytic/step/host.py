"""Host-bound execution after an MoE dispatcher's host synchronisation.

Dropless, each dispatcher a NeMo recipe names (frameworks.toml moe_recipes) waits on the host
for the tokens-per-expert counts before it can size the buffers that follow (Megatron-Core
0.16.1 token_dispatcher.py: the all-to-all dispatcher's ``_maybe_dtoh_and_synchronize`` at
``before_ep_alltoall``; the flex dispatcher's DeepEP / Hybrid-EP dispatch, blocking where
``num_permuted_tokens`` is None, fused_a2a.py; TEGroupedMLP.forward's
``tokens_per_expert.tolist()``). The GPU queue is then empty, and the kernels after the
wait run no faster than the host launches them. The layer's forward after the wait therefore
lasts at least its launches times the host's cost per launched op
(planner.toml [host] op_launch_s); what exceeds the GPU time of the same kernels is exposed.

Launches counted from the code path at Megatron-Core 0.16.1 (fused permutation, TE grouped
experts), forward after the wait, per MoE layer and micro-batch:

* all-to-all dispatcher: token_dispatch 2 all-to-alls (tokens, probs); dispatch_postprocess
  2 gathers over expert-TP when etp > 1 and one fused sort_chunks_by_idxs with more than one
  local expert; the experts; combine_preprocess the sort back (n_local > 1) and a
  reduce-scatter with its two casts (etp > 1); token_combine 1 all-to-all; combine_postprocess
  1 fused unpermute;
* flex, the wait inside the dispatch: with DeepEP (_DeepepManager) the permutation by expert
  (1), the experts, the unpermutation (1) and the combine (1), the conversion of the dispatched
  indices to a multi-hot map not counted (unfused by default: about a dozen ops with host
  syncs of their own); with Hybrid-EP (_HybridEPManager) the permutation is fused into the
  dispatch and the unpermutation into the combine: the experts and the combine (1);
* experts (TEGroupedMLP.forward): fp8 pads the tokens and the probabilities to the
  quantisation alignment (quantization_padding, 2) and unpads fc2's output
  (quantization_unpadding, 1), except after Hybrid-EP, whose dispatch already pads (the three
  calls return their input, TE fp8_padding.py; layers.fp8_padding_bytes); fc1 one GEMM per
  local expert (TE GroupedLinear runs one cuBLAS GEMM per group); the weighted SwiGLU (1); fc2
  one GEMM per local expert.

* fp8: TE's GroupedLinear quantises each local expert's split of fc1's and fc2's inputs apart
  (tex.split_quantize, TE v2.9-v2.18): 4 kernels per split under per-tensor current scaling
  (zero the amax, the amax, the scale, the cast), 1 under MXFP8 / blockwise, none under delayed
  scaling (one fused multi-tensor cast); planner.toml [host] fp8_split_launches_<scaling>.

The GPU side of the same kernels has a floor of its own: a tiny kernel holds its stream about
1.3 us from launch to completion on an H100 even replayed from a CUDA graph (planner.toml [host]
gpu_kernel_min_s, Hazy Research's H100 measurement), while their bytes at HBM roofline cost next
to nothing. The stretch after the wait therefore lasts at least max(launches x op_launch_s,
kernels x gpu_kernel_min_s). Eager, the host's 4.5 us per launch exceeds the GPU's floor, so the
floor binds only where a captured moe scope replays the launches as one.

This is a lower bound on the launches (the allocations and the weight casts are not counted)
and on the cost of each (the per-op figure is PyTorch's dispatch alone). The backward does not
wait (the splits and counts are on the host since the forward), so it is not bounded here; a
recomputed MoE layer dispatches, and waits, again.

CUDA graphs (frameworks.toml moe_recipes cuda_graphs, per precision, from each release's
Megatron-Bridge perf configs): a captured scope replays as one launch. The scopes the recipes
capture, attn, moe_router and moe_preprocess, all run before the wait (Megatron-LM PR 1917:
moe_router captures up to MoELayer.router, moe_preprocess the dispatcher's preprocess); only
the moe scope (an MoE layer's whole MLP, fixed shapes) covers the launches after it, and then
there is no wait in the layer: one launch, the graph's. The full_iteration scope (Megatron-Core's
cuda_graph_impl "full_iteration", the MXFP8 presets of Megatron-Bridge v0.5.0 on and v0.6.0:
the whole step as one graph, the experts padded to a fixed per-rank capacity, factor 1.5, so
that dropless shapes are static) holds the moe scope and is priced as it; the padded rows'
compute is not priced (the experts are priced at the routed rows).

The eager layer's host floor (``eager_layer_floor``): between two host synchronisations the
host queues kernels while the GPU runs earlier ones, so a stretch lasts max(GPU, host). A
dropless MoE layer's forward is one such stretch (dispatcher wait to dispatcher wait) and its
backward runs without a wait, so one MoE layer per micro-batch lasts at least its host time,
forward and backward apart. The host time of the layer without its experts' module loop
(attention, norms, residuals, router, dispatcher, permutation; Megatron-Core 0.16.1's modules,
autograd) is measured: bench/bench_moe_host.py of 2026-12-02 (planner.toml [host] layer_fwd_s,
layer_bwd_s, docs/benchmarks.md), on a CPU, without CUDA launches: a lower bound. The experts
add what TEGroupedMLP launches per local expert, at op_launch_s: forward fc1 and fc2 (2 n) and
the one SwiGLU, backward the dgrad and wgrad of both (4 n, TE GroupedLinear's backward runs one
grouped dgrad and one grouped wgrad call, n cuBLAS GEMMs each) and the SwiGLU's backward; the
bench's SequentialMLP slope (one Python module set per expert) is not the runs' path and is not
used. Priced only where the profile runs Megatron-Core's layer (frameworks.toml
``moe_layer_host = "megatron-core-eager"``); a recomputed layer repeats its forward's host time
in the backward.

A partly graphed layer (the recipe's TE-scoped ``attn``, ``moe_router``, ``moe_preprocess`` at
the job's precision) keeps the floor of its eager part: the fixed part less the host seconds of
the captured scopes, measured by the same bench (``--scopes``, 2026-12-07: each scope's share of
the layer's CPU time within one pass, forward and backward, at 8 and 16 experts, times the
2026-12-02 layer figures; planner.toml [host] scope_fwd_s / scope_bwd_s), plus one launch a
pass for the replayed graph. A recipe capturing ``moe`` or ``full_iteration`` gets no floor (the
MoE MLP replays whole, and the wait is gone).

Not priced: dense layers (the bench's dense layer takes 2.2 ms of host time forward and
backward; the task measured it for contrast only); docs/planner.md "Host time of an eager MoE
layer" and "Eager MoE host time on a GPU host: the search of session 16".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .candidates import Candidates
from .config import constants, fp8_scaling, moe_dispatcher, moe_graph_scopes, profile_value


def split_quantize_launches(c: Candidates) -> float:
    """Kernels TE's GroupedLinear launches to quantise one expert's split of one fp8 GEMM input
    (planner.toml [host] fp8_split_launches_<scaling>, TE v2.9-v2.18 tex.split_quantize): 4
    under per-tensor current scaling, 1 under MXFP8 / blockwise, 0 under delayed scaling (one
    fused multi-tensor cast for all splits); 0 without fp8."""
    if not getattr(c, "fp8", False):
        return 0.0
    scaling, _ = fp8_scaling(c.job, c.gpu.id)
    return float(constants()["host"].get(f"fp8_split_launches_{scaling}", 0.0))


def after_sync_launches(kind: str | None, n_local: Any, etp: Any, fp8: bool,
                        q: float = 0.0) -> Any:
    """Kernels the forward of one MoE layer launches after the dispatcher's host wait (the
    module docstring's count); 0 for a dispatcher the profile does not name. ``q``: the
    quantisation kernels per expert split and fp8 GEMM input (:func:`split_quantize_launches`),
    charged for fc1's and fc2's inputs of every local expert."""
    n = np.asarray(n_local, dtype=np.float64)
    experts = (2 * n + 1 + (3 if fp8 and kind != "flex-hybridep" else 0)
               + (2 * q * n if fp8 else 0.0))
    many = (n > 1).astype(np.float64)
    if kind == "alltoall":
        split = (np.asarray(etp, dtype=np.float64) > 1).astype(np.float64)
        return 2 + 2 * split + many + experts + many + 3 * split + 1 + 1
    if kind == "flex-deepep":
        return 3 + experts
    if kind == "flex-hybridep":
        return 1 + experts
    return np.zeros_like(n)


def host_exposed(c: Candidates, gpu_after: Any) -> tuple[Any, Any]:
    """(exposed seconds of one MoE layer's forward after the wait, launches after it):
    max(0, max(launches x op_launch_s, kernels x gpu_kernel_min_s) - gpu_after); the caller
    charges it again where recompute repeats the layer. ``gpu_after``: GPU seconds of the same
    kernels as priced (experts, permutation and the forward all-to-all traffic after the wait).
    The kernels are the launches before a captured moe scope folds them into one: a replayed
    graph still runs each kernel, and a tiny one holds the stream about gpu_kernel_min_s
    (module docstring)."""
    kind = moe_dispatcher(c.job, c.gpu.id)
    n_local = c.m.n_experts / c.ep
    kernels = after_sync_launches(kind, n_local, c.etp, c.fp8, split_quantize_launches(c))
    ops = kernels
    if {"moe", "full_iteration"} & set(moe_graph_scopes(c.job, c.gpu.id) or ()):
        ops = np.minimum(ops, 1.0)  # the whole MoE MLP (or the whole step) replays as one graph
    h = constants()["host"]
    # the same kernels on the GPU last at least their count x the tiny-kernel floor
    # (gpu_kernel_min_s), however few bytes they move; eager, the host's launches cost more
    floor = np.maximum(ops * float(h["op_launch_s"]), kernels * float(h["gpu_kernel_min_s"]))
    return np.maximum(0.0, floor - gpu_after), ops


def eager_layer_floor(c: Candidates) -> tuple[Any, Any]:
    """(forward, backward) host seconds of one MoE layer and micro-batch run by Megatron-Core
    with its eager part (module docstring): the fixed measured part, less the measured host
    seconds of the scopes the recipe captures (planner.toml [host] scope_fwd_s / scope_bwd_s)
    plus one graph launch a pass where it captures any, + TEGroupedMLP's launches per local
    expert x op_launch_s; (0, 0) where the profile is not Megatron-Core's layer or the recipe
    captures a scope not measured (moe, full_iteration: the MoE MLP replays whole, no wait)."""
    if profile_value(c.job, "moe_layer_host", "none") != "megatron-core-eager":
        return 0.0, 0.0
    scopes = set(moe_graph_scopes(c.job, c.gpu.id) or ())
    h = constants()["host"]
    cap_f, cap_b = h.get("scope_fwd_s", {}), h.get("scope_bwd_s", {})
    if scopes - set(cap_f) or scopes - set(cap_b):
        return 0.0, 0.0
    n = np.asarray(c.m.n_experts / c.ep, dtype=np.float64)
    per_op = float(h["op_launch_s"])
    q = split_quantize_launches(c)  # fp8: per expert, fc1 / fc2 inputs and their output grads
    graph = per_op if scopes else 0.0  # the captured scopes replay as one graph a pass
    left_f = max(0.0, float(h["layer_fwd_s"]) - sum(float(cap_f[s]) for s in scopes))
    left_b = max(0.0, float(h["layer_bwd_s"]) - sum(float(cap_b[s]) for s in scopes))
    fwd = left_f + graph + (2 * n + 1 + 2 * q * n) * per_op
    bwd = left_b + graph + (4 * n + 1 + 2 * q * n) * per_op
    return fwd, bwd
