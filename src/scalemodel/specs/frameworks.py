"""Framework profiles (specs/data/frameworks.toml): what a framework does, each field sourced.

A profile states the kernels a framework runs (attention per GPU architecture, fused or eager
elementwise kernels), what it overlaps, how it reduces gradients, its MoE dispatcher, its context
parallelism, the recompute options it offers, its fp8 recipe and what memory it leaves unused.
``plan train``, ``memory`` and ``comm traffic`` take ``--framework ID``; explicit flags
(``--attention``, ``--kernels``, ...) override the profile's value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..errors import BadInput
from .sources import all_sources, load_toml, read_user_toml

_MERGE_BYTES_WANT = "a table fwd_out, fwd_kv, bwd_q, bwd_kv = bytes >= 0 per element"


def _optimizer_ids() -> list[str]:
    from .numerics import optimizer_ids

    return optimizer_ids()


def _merge_bytes_ok(v: object) -> bool:
    return (isinstance(v, dict) and set(v) == {"fwd_out", "fwd_kv", "bwd_q", "bwd_kv"}
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0
                    for x in v.values()))

KINDS = ("training", "serving")
ATTENTION_KINDS = ("flash", "flash3", "triton", "unfused")
# the parallelisms a training framework may offer (frameworks.toml ``parallelisms``): tensor,
# sequence, pipeline, interleaved (virtual) pipeline, context and expert parallelism, and the
# ZeRO stages of sharded data parallelism (FSDP's SHARD_GRAD_OP is zero2, FULL_SHARD zero3).
# Plain replicated data parallelism (zero 0) is in every framework. A profile that omits the
# field offers all of them (the planner's whole grid).
PARALLELISMS = ("tp", "sp", "pp", "vpp", "cp", "ep", "zero1", "zero2", "zero3")
PP_P2P_OVERLAP = ("none", "interleaved", "all")
# the TP-overlap implementations the step model prices (frameworks.toml tp_overlap_kind):
# "userbuffers", Transformer Engine's comm-GEMM overlap (ring-exchange all-gathers in tp chunks,
# pipelined reduce-scatters in planner.toml tp_pipeline_splits column blocks, the backward's
# input-gradient reduce-scatter in bulk); "symm_mem", torch Inductor's micro-pipeline TP
# (fused_all_gather_matmul / fused_matmul_reduce_scatter: reduce-scatters in tp row blocks and
# a reduction kernel over the stacked partials; a reduce-scatter whose input is not one matmul
# is not fused)
TP_OVERLAP_KINDS = ("userbuffers", "symm_mem")
# the fp8 scaling recipes (Transformer Engine's names: DelayedScaling, Float8CurrentScaling,
# Float8BlockScaling, MXFP8BlockScaling; Megatron-LM --fp8-recipe delayed / tensorwise /
# blockwise / mxfp8): per-tensor scale from the amax history, per-tensor scale from the tensor
# itself, 1x128 / 128x128 fp32-scaled blocks (Hopper), 32-element E8M0-scaled blocks (Blackwell)
FP8_SCALINGS = ("delayed", "current", "blockwise", "mxfp8")
# field -> (check, what is allowed); every field needs <field>_source
FIELDS: dict[str, tuple[Any, str]] = {
    "attention": (lambda v: isinstance(v, dict) and all(x in ATTENTION_KINDS
                                                          for x in v.values()),
                  "a table of GPU architecture = flash | flash3 | triton | unfused"),
    "kernels": (lambda v: v in ("fused", "eager"), "fused or eager"),
    "grad_accum_fusion": (lambda v: isinstance(v, bool), "true or false"),
    "schedule": (lambda v: v in ("1f1b", "dualpipe"), "1f1b or dualpipe"),
    "ep_overlap": (lambda v: isinstance(v, bool), "true or false"),
    "ep_overlap_full_recompute": (lambda v: isinstance(v, bool), "true or false"),
    "moe_routing": (lambda v: v in ("learned", "force_balanced"), "learned or force_balanced"),
    "expert_ranks": (lambda v: v in ("own_grid", "dp_split"),
                     "own_grid (the expert layers' own rank grid, Megatron-Core core_r0.10.0 on) "
                     "or dp_split (EP cut out of DP after TP and CP, core_r0.8.0 / r0.9.0)"),
    "moe_fp8_padding": (lambda v: v in ("grouped_mlp", "none"), "grouped_mlp or none"),
    "moe_layer_host": (lambda v: v in ("megatron-core-eager", "none"),
                       "megatron-core-eager or none"),
    "tp_overlap": (lambda v: isinstance(v, bool), "true or false"),
    # how the TP overlap (tp_overlap) pairs each collective with its GEMM (step/comm.py
    # _tp_exposed): Transformer Engine's userbuffers, or torch's micro-pipeline TP on symmetric
    # memory (TP_OVERLAP_KINDS)
    "tp_overlap_kind": (lambda v: v in TP_OVERLAP_KINDS, " or ".join(TP_OVERLAP_KINDS)),
    "sequence_parallel": (lambda v: isinstance(v, bool), "true or false"),
    "dp_overlap": (lambda v: isinstance(v, bool), "true or false"),
    "param_gather_overlap": (lambda v: isinstance(v, bool), "true or false"),
    "a2a_overlap": (lambda v: isinstance(v, bool), "true or false"),
    "grad_reduce_bytes": (lambda v: v in (1, 2, 4), "1, 2 or 4 (bytes per reduced gradient)"),
    "dp_bucket_params": (lambda v: isinstance(v, int) and v > 0, "a whole number of parameters"),
    # the optimizer shards its fp32 master weights and states over DP by itself at ZeRO stage 0
    # and all-gathers the 16-bit weights after its step (DeepSpeed's BF16_Optimizer;
    # analytic/memory.py state_zero, analytic/step/data_parallel.py)
    "optimizer_shards_states": (lambda v: isinstance(v, bool), "true or false"),
    # HBM bytes per local parameter of the optimizer step as the framework's optimizer runs it,
    # per optimizer id (numerics.toml [optimizers]); an id not listed keeps the planner's one
    # fused pass (analytic/step/optimizer.py)
    "optimizer_step_bytes": (lambda v: isinstance(v, dict) and bool(v) and all(
        isinstance(k, str) and isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
        for k, x in v.items()), "a table of optimizer id = bytes per parameter > 0"),
    # HBM bytes the framework moves per local parameter outside the GEMMs and the optimizer:
    # over each micro-batch's unsharded gradient (before the reduction), and over the sharded
    # gradient once per step (analytic/step/optimizer.py)
    "unsharded_grad_pass_bytes": (lambda v: isinstance(v, (int, float))
                                  and not isinstance(v, bool) and v >= 0,
                                  "bytes per parameter >= 0"),
    "sharded_grad_pass_bytes": (lambda v: isinstance(v, (int, float))
                                and not isinstance(v, bool) and v >= 0,
                                "bytes per parameter >= 0"),
    # ... and over the whole (unsharded) gradient buffer once per step: zeroing it, a norm of it
    # bytes per local parameter of the gradient kept through the step (memory)
    "grad_buffer_bytes": (lambda v: v in (2, 4, 6), "2, 4 or 6 (bytes per kept gradient; 6: a 16-bit .grad kept beside an fp32 copy)"),
    "unsharded_step_grad_bytes": (lambda v: isinstance(v, (int, float))
                                  and not isinstance(v, bool) and v >= 0,
                                  "bytes per parameter >= 0"),
    "moe_dispatcher": (lambda v: isinstance(v, str), "text"),
    "ep_dispatch": (lambda v: v in ("per_expert", "per_destination"),
                    "per_expert or per_destination"),
    "ep_dispatch_kernel": (lambda v: v in ("deepep", "hybridep"), "deepep or hybridep"),
    # SMs a dispatch / combine kernel family holds while it runs (step/comm.py _ep_overlapped)
    "ep_comm_sms": (lambda v: isinstance(v, dict) and bool(v) and all(
        k in ("deepep", "hybridep") and isinstance(x, int) and not isinstance(x, bool) and x > 0
        for k, x in v.items()), "a table deepep / hybridep = SMs (a whole number > 0)"),
    "cp_impl": (lambda v: isinstance(v, str), "text"),
    "cp_exchange": (lambda v: v in ("ring", "all_gather", "all_to_all"),
                    "ring, all_gather or all_to_all"),
    "cp_merge_bytes": (lambda v: _merge_bytes_ok(v), _MERGE_BYTES_WANT),
    "cp_merge_bytes_compiled": (lambda v: _merge_bytes_ok(v), _MERGE_BYTES_WANT),
    "cp_kv_heads": (lambda v: v in ("kv", "query"), "kv or query"),
    "cp_gather_overlap": (lambda v: isinstance(v, bool), "true or false"),
    "cp_compiled_overlap": (lambda v: isinstance(v, bool), "true or false"),
    "cp_load_balance": (lambda v: isinstance(v, bool), "true or false"),
    "cp_grad_bytes": (lambda v: v in (1, 2, 4), "1, 2 or 4 (bytes per dK/dV element sent)"),
    "recompute_options": (lambda v: isinstance(v, list)
                          and all(str(x).partition(":")[0] in ("none", "selective", "full", "op")
                                  for x in v),
                          "a list of none, selective, full, op, selective:MODULE+MODULE, "
                          "full:N, full:min"),
    "fp8_recipe": (lambda v: isinstance(v, str), "text"),
    "fp8_scaling": (lambda v: v in FP8_SCALINGS, " | ".join(FP8_SCALINGS)),
    "fp8_scaling_recipes": (lambda v: _fp8_recipes_ok(v),
                            "a list of tables {model, gpu, scaling = "
                            + " | ".join(FP8_SCALINGS) + ", source = a source key}"),
    # bytes per layer-matmul weight the DP parameter all-gather moves, per fp8 scaling whose
    # recipe keeps the weights as fp8 primary weights (Megatron-Core --fp8-param-gather); what
    # those weights hold in memory is Transformer Engine's (numerics.toml [fp8_params])
    "fp8_param_gather": (lambda v: isinstance(v, dict) and all(
        k in FP8_SCALINGS and v[k] in (1, 2) and not isinstance(v[k], bool) for k in v),
        "a table of fp8 scaling (" + " | ".join(FP8_SCALINGS) + ") = 1 or 2 (bytes per "
        "weight the DP all-gather moves)"),
    # the same at ZeRO 2 / 3, which Megatron-Core runs through Megatron-FSDP (its own buffers)
    "fp8_param_gather_fsdp": (lambda v: isinstance(v, dict) and all(
        k in FP8_SCALINGS and v[k] in (1, 2) and not isinstance(v[k], bool) for k in v),
        "a table of fp8 scaling (" + " | ".join(FP8_SCALINGS) + ") = 1 or 2 (bytes per "
        "weight the Megatron-FSDP all-gather moves)"),
    "fp8_bf16_modules": (lambda v: isinstance(v, list) and all(
        x in ("output_head", "router", "attention_matmuls") for x in v),
        "a list of output_head, router, attention_matmuls"),
    "fp8_saved_input": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                        and 0 < v <= 2, "bytes per input element in (0, 2]"),
    "fp8_attn_out_saved": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                           and 0 < v <= 4, "bytes per attention-output element in (0, 4]"),
    "fp8_moe_act_input_saved": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                                and 0 < v <= 2, "bytes per SwiGLU-input element in (0, 2]"),
    "optimizer": (lambda v: isinstance(v, str) and v in _optimizer_ids(),
                  "an optimizer id of numerics.toml [optimizers]"),
    "loss_logit_bytes": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                         and 4 <= v <= 64, "bytes per logit element in [4, 64]"),
    "loss_logit_bytes_tp": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                            and 4 <= v <= 64, "bytes per logit element in [4, 64]"),
    "pp_reshard_after_forward": (lambda v: isinstance(v, bool), "true or false"),
    "fsdp_root_group": (lambda v: isinstance(v, bool), "true or false"),
    "fsdp_root_exposed_blocks": (lambda v: isinstance(v, int) and not isinstance(v, bool)
                                 and 0 <= v <= 2, "0, 1 or 2 (blocks exposed beside the root)"),
    "fsdp_copy_bytes": (lambda v: isinstance(v, dict) and set(v) == {"gather_out", "reduce_in"}
                        and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                and x >= 0 for x in v.values()),
                        "a table gather_out, reduce_in = bytes >= 0 per unsharded parameter"),
    "ddp_bucket_bytes": (lambda v: v in (0, 2, 4) and not isinstance(v, bool),
                         "0, 2 or 4 (bytes per gradient element of the DP reducer's buckets)"),
    "pp_grad_accum_bytes": (lambda v: v in (0, 2, 4) and not isinstance(v, bool),
                            "0, 2 or 4 (bytes per unsharded gradient element)"),
    "moe_probs_in_expert_act": (lambda v: isinstance(v, bool), "true or false"),
    "mtp_embedding_copy": (lambda v: isinstance(v, bool), "true or false"),
    "fp8_block_gemm": (lambda v: v in ("deepgemm",), "deepgemm (kernels.toml fp8_block_gemm)"),
    "pp_ep_overlap_warmup": (lambda v: v in (0, 1) and not isinstance(v, bool),
                             "0 or 1 (extra interleaved warmup chunk forwards)"),
    "reserved_bytes": (lambda v: isinstance(v, (int, float)) and v >= 0, "bytes >= 0"),
    "nccl_comm_bytes": (lambda v: isinstance(v, (int, float)) and v >= 0, "bytes >= 0"),
    "allocator_slack": (lambda v: isinstance(v, (int, float)) and 0 <= v < 1,
                        "a fraction in [0, 1)"),
    "parallelisms": (lambda v: isinstance(v, list) and all(x in PARALLELISMS for x in v),
                     f"a list of {', '.join(PARALLELISMS)}"),
    "pp_p2p_overlap": (lambda v: v in PP_P2P_OVERLAP, ", ".join(PP_P2P_OVERLAP)),
    "pp_recv_gather": (lambda v: isinstance(v, bool), "true or false"),
    "pp_p2p_calls": (lambda v: v in (1, 2) and not isinstance(v, bool),
                     "1 or 2 (blocking P2P calls per pipeline crossing)"),
    "pipeline_zero_max": (lambda v: v in (0, 1, 2, 3) and not isinstance(v, bool),
                          "the highest ZeRO stage beside pipeline stages, 0-3"),
    "replicate_1d_only": (lambda v: isinstance(v, bool), "true or false"),
    "pipeline_split": (lambda v: v in PIPELINE_SPLITS,
                       "even (L divisible by pp x vpp, every chunk L / (pp x vpp) layers), any, "
                       "edge_chunks (the first chunk the embedding only, the last chunk the "
                       "output layer and loss only) or edge_chunks_even (edge_chunks where L + 2 "
                       "divides into pp x vpp equal chunks only)"),
    "model_recipes": (lambda v: _model_recipes_ok(v),
                      "a list of tables {model, gpu (optional: every GPU), precision "
                      "(optional: bf16 or an fp8 scaling), pipeline_split = one of the "
                      "pipeline_split values (no gpu, no precision), mtp_layers = an integer "
                      ">= 0, tp_overlap / param_gather_overlap = true | false, "
                      "allocator_slack = a fraction in [0, 1), source = a source key}"),
    "moe_recipes": (lambda v: _moe_recipes_ok(v),
                    "a list of tables {model, gpu, dispatcher = alltoall | flex-deepep | "
                    "flex-hybridep, a2a_overlap = true | false, cuda_graphs = {bf16 = [scopes], "
                    "fp8 = [scopes]}, fused_grouped_mlp = true | false (optional)}"),
    # the cuDNN library the release's container ships (a dotted version, "9.13.1.26", as the
    # release's component table states it less any package revision such as "-1"), or "unknown"
    # where its source does not state one. Recorded per release so that the attention kernel's
    # timing by release can key on it; no step, memory or layout term reads it yet. A release
    # field: a profile that extends another does not take it (RELEASE_FIELDS)
    "cudnn_version": (lambda v: _cudnn_version_ok(v),
                      'a dotted cuDNN version ("9.13.1.26") or "unknown"'),
    "activation_offload_recipes": (lambda v: _offload_recipes_ok(v),
                                   "a list of tables {model, gpu, precision = bf16 | "
                                   + " | ".join(FP8_SCALINGS) + ", layers = a whole number "
                                   "of at least 1}"),
}
HEADER = ("kind", "name", "version", "source", "extends")
# fields that state what one release shipped, not what its framework does: a profile that extends
# another does not take them (NeMo 26.08 extends 26.06 but ships its own libraries); a profile
# that does not set one has the loader's default (RELEASE_DEFAULTS)
RELEASE_FIELDS = ("cudnn_version",)
RELEASE_DEFAULTS = {"cudnn_version": "unknown"}
_CUDNN_VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,3}")


def _cudnn_version_ok(v: object) -> bool:
    return isinstance(v, str) and (v == "unknown" or _CUDNN_VERSION.fullmatch(v) is not None)


# The token dispatchers Megatron-Core offers (moe_token_dispatcher_type alltoall, or flex with
# moe_flex_dispatcher_backend deepep / hybridep) and how each sends a token (ep_dispatch): the
# all-to-all dispatcher one row per (token, expert) pair; DeepEP's and Hybrid-EP's kernels one
# copy per destination GPU, across nodes once per node and forwarded over NVLink.
MOE_DISPATCH = {"alltoall": "per_expert", "flex-deepep": "per_destination",
                "flex-hybridep": "per_destination"}
# the kernel family of each per-destination dispatcher, whose measured bandwidth prices the
# dispatch's network stage (collectives.toml [ep_dispatch_kernel.<family>])
DISPATCH_KERNEL = {"flex-deepep": "deepep", "flex-hybridep": "hybridep"}
_RECIPE_KEYS = {"model", "gpu", "dispatcher", "a2a_overlap", "cuda_graphs",
                "fused_grouped_mlp"}
# Megatron-Core's --cuda-graph-scope values under --cuda-graph-impl transformer_engine (Megatron-LM
# PR 1917): attn, mlp (a dense layer's MLP), moe (an MoE layer's whole MLP), moe_router (up to
# the router), moe_preprocess (the dispatcher's preprocess), mamba; and full_iteration, the
# whole forward-backward step captured as one graph (cuda_graph_impl "full_iteration", which
# Megatron-Bridge v0.5.0's scripts/performance/argument_parser.py lists among the scopes), which
# holds every scope above
GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba", "full_iteration")


def _graphs_ok(v: Any) -> bool:
    return isinstance(v, dict) and set(v) <= {"bf16", "fp8"} and all(
        isinstance(s, list) and all(x in GRAPH_SCOPES for x in s) for s in v.values())


def _moe_recipes_ok(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(x, dict) and set(x) <= _RECIPE_KEYS and isinstance(x.get("model"), str)
        and isinstance(x.get("gpu"), str) and x.get("dispatcher") in MOE_DISPATCH
        and isinstance(x.get("a2a_overlap", False), bool)
        and isinstance(x.get("fused_grouped_mlp", False), bool)
        and _graphs_ok(x.get("cuda_graphs", {})) for x in v)


_FP8_RECIPE_KEYS = {"model", "gpu", "scaling", "source"}
# how a profile may split the layers over pipeline chunks (frameworks.toml pipeline_split)
PIPELINE_SPLITS = ("even", "any", "edge_chunks", "edge_chunks_even")
_MODEL_RECIPE_KEYS = {"model", "gpu", "precision", "pipeline_split", "mtp_layers",
                      "tp_overlap", "param_gather_overlap", "allocator_slack", "source"}
# the per-recipe overlap switches a model_recipes entry may set in place of the profile's own
# field of that name (a preset that turns an overlap off for one model on one GPU)
RECIPE_OVERLAPS = ("tp_overlap", "param_gather_overlap")


def _model_recipes_ok(v: Any) -> bool:
    """model_recipes entries: what a framework's recipe for a model sets of the model's own
    build, or of the overlaps it runs with. A pipeline_split entry names no GPU (the split is
    read where the job's GPU is not known; Megatron-Bridge sets its flags in the model's base
    recipe, which every GPU's preset calls). ``precision`` (bf16, or an fp8 scaling: current,
    mxfp8, ...) limits an entry to the preset of that precision; without it every precision."""
    known = all_sources()
    return isinstance(v, list) and all(
        isinstance(x, dict) and set(x) <= _MODEL_RECIPE_KEYS and isinstance(x.get("model"), str)
        and isinstance(x.get("gpu", ""), str) and x.get("source") in known
        and len(set(x) & {"pipeline_split", "mtp_layers", "allocator_slack",
                          *RECIPE_OVERLAPS}) >= 1
        and ("pipeline_split" not in x or (x["pipeline_split"] in PIPELINE_SPLITS
                                           and "gpu" not in x and "precision" not in x))
        and ("precision" not in x or x["precision"] in ("bf16", *FP8_SCALINGS))
        and all(isinstance(x[k], bool) for k in RECIPE_OVERLAPS if k in x)
        and ("mtp_layers" not in x or (isinstance(x["mtp_layers"], int)
                                       and not isinstance(x["mtp_layers"], bool)
                                       and x["mtp_layers"] >= 0))
        and ("allocator_slack" not in x or (isinstance(x["allocator_slack"], (int, float))
                                            and not isinstance(x["allocator_slack"], bool)
                                            and 0 <= x["allocator_slack"] < 1)) for x in v)


def model_recipe_value(values: dict[str, Any], model_id: str | None, gpu_id: str | None,
                       key: str, precision: str | None = None) -> tuple[Any, str] | None:
    """(value, source key) of ``key`` in the profile's model_recipes for a model on a GPU at a
    precision (bf16 or the fp8 scaling; None: only entries that name no precision): an entry
    naming that GPU, else one naming no GPU (every GPU); of those, one naming the precision
    before one naming none; None where none sets it."""
    hits = [r for r in values.get("model_recipes") or ()
            if r["model"] == model_id and key in r and r.get("gpu") in (gpu_id, None)
            and r.get("precision") in (precision, None)]
    # the GPU's own entry first, then the precision's own
    hits.sort(key=lambda r: (r.get("gpu") is None, r.get("precision") is None))
    return (hits[0][key], str(hits[0]["source"])) if hits else None


def allocator_slack_of(values: dict[str, Any], model_id: str | None, gpu_id: str | None,
                       precision: str | None = None) -> tuple[float, str | None]:
    """(caching-allocator slack, model_recipes source key or None) for a model on a GPU at a
    precision (bf16 or the fp8 scaling): the profile's recipe entry where it sets one (a launcher
    that sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for that recipe only, e.g.
    Megatron-Bridge's Llama 3.1 405B fp8 runs on GB200), else the profile's own
    ``allocator_slack`` (source None: the profile's field)."""
    hit = model_recipe_value(values, model_id, gpu_id, "allocator_slack", precision)
    if hit is not None:
        return float(hit[0]), hit[1]
    return float(values.get("allocator_slack") or 0.0), None


def fp8_param_bytes(values: dict[str, Any], scaling: str | None,
                    compute_capability: str, fsdp: bool = False
                    ) -> tuple[float, float, str] | None:
    """(HBM bytes per layer-matmul weight, bytes per such weight the DP all-gather moves, the
    storage's citation) where the profile's recipes at this fp8
    ``scaling`` keep the transformer layers' Linear weights as fp8 primary weights
    (frameworks.toml fp8_param_gather; Megatron-Core --fp8-param-gather), on a GPU of
    ``compute_capability`` (numerics.toml [fp8_params]); None where they do not (the weights
    are the 16-bit working weights). ``fsdp``: ZeRO 2 / 3, Megatron-FSDP's buffers
    (fp8_param_gather_fsdp), which hold and gather a scaling only where read."""
    from .numerics import fp8_param_storage

    gathers = values.get("fp8_param_gather_fsdp" if fsdp else "fp8_param_gather") or {}
    if scaling not in gathers:
        return None
    held = fp8_param_storage(str(scaling), compute_capability)
    if held is None:
        return None
    return held[0], float(gathers[scaling]), held[1]


def _fp8_recipes_ok(v: Any) -> bool:
    known = all_sources()
    return isinstance(v, list) and all(
        isinstance(x, dict) and set(x) == _FP8_RECIPE_KEYS and isinstance(x["model"], str)
        and isinstance(x["gpu"], str) and x["scaling"] in FP8_SCALINGS
        and x["source"] in known for x in v)


_OFFLOAD_KEYS = {"model", "gpu", "precision", "layers"}


def _offload_recipes_ok(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(x, dict) and set(x) == _OFFLOAD_KEYS and isinstance(x["model"], str)
        and isinstance(x["gpu"], str) and x["precision"] in ("bf16", *FP8_SCALINGS)
        and isinstance(x["layers"], int) and not isinstance(x["layers"], bool)
        and x["layers"] >= 1 for x in v)


def offload_layers_of(values: dict[str, Any], model_id: str | None, gpu_id: str | None,
                      precision: str) -> int:
    """Layers whose activations the profile's recipe offloads to the host for a model on a GPU
    at ``precision`` (bf16, or the fp8 scaling: current, mxfp8, ...); 0 where it names none
    (frameworks.toml activation_offload_recipes)."""
    for r in values.get("activation_offload_recipes") or ():
        if r["model"] == model_id and r["gpu"] == gpu_id and r["precision"] == precision:
            return int(r["layers"])
    return 0


def fp8_scaling_of(fw: Framework, model_id: str | None,
                   gpu_id: str | None) -> tuple[str, str]:
    """(scaling, source key) of a profile's fp8 recipe for a model on a GPU: the entry of
    ``fp8_scaling_recipes`` for that pair, else the profile's ``fp8_scaling``, else delayed
    (Megatron-LM's --fp8-recipe default, for a user's profile that states none)."""
    for r in fw.values.get("fp8_scaling_recipes") or ():
        if r["model"] == model_id and r["gpu"] == gpu_id:
            return str(r["scaling"]), str(r["source"])
    v = fw.values.get("fp8_scaling")
    if v is None:
        return "delayed", "megatron-lm-fp8-recipe-arg"
    return str(v), fw.sources.get("fp8_scaling", "")


def moe_recipe(values: dict[str, Any], model_id: str | None,
               gpu_id: str | None) -> dict[str, Any] | None:
    """The profile's MoE recipe entry (moe_recipes) for a model on a GPU, or None: what the
    framework's published performance recipe for that pair sets (dispatcher, EP overlap)."""
    for r in values.get("moe_recipes") or ():
        if r["model"] == model_id and r["gpu"] == gpu_id:
            return r
    return None


def _num(lo: float = 0.0, hi: float | None = None, whole: bool = False) -> Any:
    def check(v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if whole and not isinstance(v, int):
            return False
        return v >= lo and (hi is None or v <= hi)
    return check


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _fraction_table(v: Any) -> bool:
    return isinstance(v, dict) and bool(v) and all(
        k.isdigit() and int(k) >= 1 and _num(0.0, 1.0)(x) and x > 0 for k, x in v.items())


def _name_budget_table(v: Any) -> bool:
    return isinstance(v, dict) and bool(v) and all(
        isinstance(k, str) and k.strip() and _num(1, whole=True)(x) for k, x in v.items())


# which rows the profiling pass computes logits for: "sampled" (one per dummy request,
# min(max_num_seqs, tokens), then a sampling step) or "all_tokens" (every profiled token, no
# sampler: vLLM V1 0.7.0-0.7.1)
PROFILE_LOGITS_ROWS = ("sampled", "all_tokens")
KV_POOLS = ("util_of_total", "fraction_of_free_after_profile", "fraction_of_free_after_load",
            "static_fraction")
# serving engines (kind = "serving"): how the engine sizes its KV pool and schedules; read by
# analytic/serving_memory.py. field -> (check, what is allowed); every field needs <field>_source
# how often the generation-phase attention kernel reads a KV head's cache per decode token:
# once per KV head (a GQA-aware kernel: XQA, FlashAttention's grouped decode, FlashInfer) or once
# per query head (a kernel with one thread block per query head, e.g. TensorRT-LLM 0.5's masked MHA)
DECODE_KV_READS = ("kv_head", "query_head")
# the attention projections analytic/weights.py prices (MLA and GQA / MHA), which a profile's
# replicated_modules may name
ATTENTION_LINEARS = ("q_proj", "q_a_proj", "q_b_proj", "k_proj", "v_proj", "kv_a_proj_with_mqa",
                     "kv_b_proj", "o_proj")
# the modeling files whose decoder-layer kernels a profile's layer_kernels may count
LAYER_KERNEL_MODELING = ("deepseekv3", "unread")


def _layer_kernels_ok(v: dict[str, Any]) -> bool:
    if v.get("modeling") not in LAYER_KERNEL_MODELING:
        return False
    if v["modeling"] == "unread":
        return set(v) == {"modeling"}
    parts = {"attention", "moe_ffn", "dense_ffn"}
    return set(v) == {"modeling", *parts} and all(_num(0, whole=True)(v[k]) for k in parts)
ADP_EXCHANGES = ("allgather_reducescatter", "deepep", "unread")
ADP_PRICED = ("route_bytes_per_expert", "output_bytes", "dispatch_16bit")
# a DeepEP exchange (wide EP): the dispatcher kernel (collectives.toml), its mode (SGLang
# --deepep-mode: normal, low_latency, or auto = low-latency for batches without prefill), the
# bytes per element of a dispatched and a combined row, the low-latency row's extra bytes
ADP_DEEPEP = ("dispatcher", "deepep_mode", "dispatch_bytes_per_element",
              "combine_bytes_per_element", "ll_row_extra_bytes")


ADP_ASSIGN = ("prompt_tokens_under_count", "round_robin")
ADP_IDLE = ("dummy_generation", "empty_batch")


def _adp_ok(v: dict[str, Any]) -> bool:
    def num(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0

    if not isinstance(v.get("supported"), bool) or v.get("exchange") not in ADP_EXCHANGES:
        return False
    if v["exchange"] == "unread" or not v["supported"]:
        return set(v) <= {"supported", "exchange", *ADP_PRICED}
    if v["exchange"] == "deepep":
        return (set(v) == {"supported", "exchange", *ADP_DEEPEP}
                and v["dispatcher"] in ("deepep",)
                and v["deepep_mode"] in ("normal", "low_latency", "auto")
                and all(num(v[k]) for k in ADP_DEEPEP[2:]))
    return (set(v) == {"supported", "exchange", *ADP_PRICED}
            and num(v["route_bytes_per_expert"]) and num(v["output_bytes"])
            and isinstance(v["dispatch_16bit"], list)
            and all(x in ("fp8_block",) for x in v["dispatch_16bit"]))


PREFIX_CACHE_RULES = ("off", "scheduled", "prefilled", "unread")
# how requests of a Poisson stream reach the dp replicas (analytic/serving/service.py)
DISPATCH_RULES = ("random", "least_busy")
SERVING_FIELDS: dict[str, tuple[Any, str]] = {
    "kv_pool": (lambda v: v in KV_POOLS, " | ".join(KV_POOLS)),
    "util_default": (lambda v: _num(0.0, 1.0)(v) and v > 0, "a fraction in (0, 1]"),
    "util_by_tp": (_fraction_table, 'a table of TP degree ("1", "8", ...) = fraction in (0, 1]'),
    "profile_run": (lambda v: v in ("max_num_batched_tokens", "none"),
                    "max_num_batched_tokens or none"),
    "token_budget_default": (_num(1, whole=True), "a whole number of tokens >= 1"),
    "token_budget_rule": (lambda v: v in ("fixed", "max_model_len_unless_chunked"),
                          "fixed or max_model_len_unless_chunked"),
    "small_gpu_bytes": (_num(0), "bytes >= 0 (0: no smaller budget)"),
    "small_gpu_token_budget": (_num(1, whole=True), "a whole number of tokens >= 1"),
    "small_gpu_max_num_seqs": (_num(1, whole=True), "a whole number of sequences >= 1"),
    "small_gpu_device_names": (lambda v: isinstance(v, list) and all(
        isinstance(x, str) and x.strip() for x in v),
        'a list of device-name substrings (["a100"])'),
    "token_budget_by_device_name": (_name_budget_table,
                                    'a table of device-name substring ("h100", ...) = tokens'),
    "chunked_prefill_above_len": (_num(0, whole=True), "a whole number of tokens (0: never)"),
    "chunked_token_budget": (_num(1, whole=True), "a whole number of tokens >= 1"),
    "max_num_seqs_default": (_num(1, whole=True), "a whole number of sequences >= 1"),
    "block_size": (_num(1, whole=True), "a whole number of tokens >= 1"),
    "act_hidden_copies": (_num(0), "a number >= 0"),
    "act_ffn_copies": (_num(0), "a number >= 0"),
    "act_expert_hidden_copies": (_num(0), "a number >= 0"),
    "logits_bytes_per_element": (_num(0), "bytes >= 0"),
    # what the profiling pass holds while its logits exist (analytic/serving_memory.py)
    "profile_logits_rows": (lambda v: v in PROFILE_LOGITS_ROWS, " | ".join(PROFILE_LOGITS_ROWS)),
    "profile_logits_all_gather": (lambda v: isinstance(v, bool), "true or false"),
    "profile_held_hidden_tokens": (_num(0), "a number >= 0"),
    "profile_held_hidden_rows": (_num(0), "a number >= 0"),
    "inputs_embeds_in_peak": (lambda v: isinstance(v, bool), "true or false"),
    "rope_cache_in_weights": (lambda v: isinstance(v, bool), "true or false"),
    "non_torch_bytes": (_num(0), "bytes >= 0"),
    "non_torch_tp_bytes": (_num(0), "bytes >= 0"),
    "nccl_version": (lambda v: isinstance(v, str) and bool(v), "an NCCL version (\"2.26.2\") or \"unread\""),
    "nccl_eager_connect": (lambda v: isinstance(v, bool), "true or false"),
    "tp_nccl_communicators": (_num(0, whole=True), "a whole number of communicators >= 0"),
    "custom_all_reduce_bytes": (_num(0), "bytes >= 0"),
    "nccl_library_in_budget": (lambda v: isinstance(v, bool), "true or false"),
    # the PyTorch the engine pins and whether its cuBLAS workspace is made inside the profile run
    # (device_memory.toml ["torch-VERSION"], analytic/serving_memory.py)
    "torch_version": (lambda v: isinstance(v, str) and bool(v), "a PyTorch version (\"2.7.0\") or \"unread\""),
    "cublas_workspace_in_peak": (lambda v: isinstance(v, bool), "true or false"),
    "non_torch_ref_resident_threads": (_num(1), "threads >= 1"),
    "cuda_graphs": (lambda v: isinstance(v, bool), "true or false"),
    "cuda_graph_in_budget": (lambda v: isinstance(v, bool), "true or false"),
    "cuda_graph_bytes": (_num(0), "bytes >= 0"),
    "requires_max_len_fits": (lambda v: isinstance(v, bool), "true or false"),
    "scheduler": (_text, "text"),
    "attention_kernels": (_text, "text"),
    "gemm_kernels": (_text, "text"),
    # how plan serve runs the engine (analytic/serving/engine.py)
    "attention": FIELDS["attention"],
    "fp8_checkpoint_kv": (lambda v: v in ("bf16", "fp16", "fp8"), "bf16, fp16 or fp8"),
    "reserve": (lambda v: v in ("full", "on_demand"), "full or on_demand"),
    "batch_rule": (lambda v: v in ("profile", "trtllm-bench"), "profile or trtllm-bench"),
    "chunked_prefill": (lambda v: isinstance(v, bool), "true or false"),
    # trtllm-bench on the PyTorch backend without chunked prefill raises the tuned token budget
    # to the dataset's longest prompt plus the batch (bench/benchmark/utils/general.py)
    "unchunked_budget_floor": (lambda v: v in ("none", "max_isl_plus_batch"),
                               "none or max_isl_plus_batch"),
    "kv_fraction": (lambda v: _num(0.0, 1.0)(v) and v > 0, "a fraction in (0, 1]"),
    # what the KV cache keeps on a model's chunked-local-attention layers (Llama 4): "window"
    # (one chunk, as the model reader prices them) or "full_context" (the engine's KV manager
    # sizes every layer for the whole sequence: analytic/serving_memory.py)
    "chunked_attention_kv": (lambda v: v in ("window", "full_context"),
                             "window or full_context"),
    # host (CPU) time per iteration the GPU waits for, on top of the host loop below (the former
    # single field: a profile that sets only it prices as before)
    "overhead_s": (_num(0), "seconds >= 0"),
    # the engine's host loop per iteration (analytic/serving/iteration.py with_host): fixed
    # seconds, seconds per sequence that emits a token, and whether the loop prepares the next
    # iteration while the GPU runs this one (max(GPU, host)) or after it (GPU + host)
    "host_s_per_iter": (_num(0), "seconds >= 0"),
    "host_s_per_seq": (_num(0), "seconds >= 0"),
    "host_overlap": (lambda v: isinstance(v, bool), "true or false"),
    # iterations the loop runs per scheduler call (vLLM V0's multi-step scheduling): the host
    # seconds above are one call's work, spread over that many iterations
    "host_iters_per_schedule": (_num(1, whole=True), "an integer >= 1"),
    # whether a step that runs prefills runs no decodes (vLLM V0's _schedule_default without
    # chunked prefill: prefills first, decodes only in a step with none); with
    # host_iters_per_schedule n > 1 the decode batch is also held for n steps (scheduler.py)
    "prefill_alone": (lambda v: isinstance(v, bool), "true or false"),
    # the automatic prefix cache as the engine runs it by default (analytic/serving/scheduler.py):
    # "off"; "scheduled" (a prompt's full blocks are findable from the step that schedules them,
    # vLLM V1); "prefilled" (findable once the prompt's prefill has run, SGLang's radix tree);
    # "unread" (the engine has one but its rule was not read: plan serve refuses a shared prefix).
    # A hit covers whole blocks of block_size tokens and never the prompt's last token
    "prefix_cache": (lambda v: v in PREFIX_CACHE_RULES, " | ".join(PREFIX_CACHE_RULES)),
    # how a harness in front of dp replicas dispatches arriving requests: "random" (the
    # planner's default: each replica a Poisson share at rate / dp) or "least_busy" (the replica
    # with the fewest requests in flight takes the next one)
    "dispatch": (lambda v: v in DISPATCH_RULES, " | ".join(DISPATCH_RULES)),
    "decode_kv_reads": (lambda v: v in DECODE_KV_READS, " | ".join(DECODE_KV_READS)),
    # where the output head's vocabulary-parallel logits go before sampling: "none" (each rank
    # samples from its own vocab / tp columns, or only one rank samples them) or "all_gather"
    # (the head's output is all-gathered so every TP rank holds and samples the full row)
    "logits_gather": (lambda v: v in ("none", "all_gather"), "none or all_gather"),
    # HBM bytes per element of the engine's quantize of each FP8 GEMM's 16-bit input
    # (analytic/serving/iteration.py _nongemm): read the input, write the fp8 copy, plus any
    # amax pass a dynamic scale needs; absent: the step model's training-recipe cast
    # (planner.toml [nongemm] fp8_cast_bytes_<recipe>, which counts Transformer Engine's
    # transposed copy for the backward)
    "fp8_input_cast_bytes": (_num(1e-9), "bytes per element > 0"),
    # kernels one decoder layer launches one after another on the critical path, outside its TP
    # all-reduces (priced by the collectives model) and kernels on side streams, as counted for
    # one modeling file of the engine (analytic/serving/iteration.py layer_launch_s): each pays
    # the GPU's idle time per kernel boundary (planner.toml [host] gpu_kernel_min_s). modeling
    # "deepseekv3" (the DeepSeek-V3 decoder layer: MLA models) with counts attention, moe_ffn,
    # dense_ffn (whole numbers >= 0); "unread" (no count read: no term)
    "layer_kernels": (lambda v: isinstance(v, dict) and _layer_kernels_ok(v),
                      "a table modeling = " + " | ".join(LAYER_KERNEL_MODELING)
                      + " and, for a read modeling, attention, moe_ffn, dense_ffn (whole numbers"
                      " >= 0)"),
    # attention projections the engine keeps whole on every TP rank instead of splitting them by
    # TP (analytic/weights.py names: q_a_proj, kv_a_proj_with_mqa, ... ; TensorRT-LLM's MLA
    # fused_a): priced unsplit in the iteration's GEMMs (iteration.py) and in the weight bytes
    # (serving_memory.py); names a model does not have are skipped
    "replicated_modules": (lambda v: isinstance(v, list) and all(x in ATTENTION_LINEARS for x in v),
                           "a list of attention projection names from "
                           + ", ".join(ATTENTION_LINEARS)),
    # the grouped expert-GEMM kernel the engine runs, by GPU architecture: a kernel the
    # kernels.toml [grouped_gemm] benchmark measured (its per-launch cost is charged per expert)
    "moe_gemm": (lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
                 "a table of GPU architecture = a kernels.toml [grouped_gemm] kernel name"),
    # attention data parallelism (TensorRT-LLM enable_attention_dp, SGLang
    # --enable-dp-attention): whether the engine has it (supported), how each MoE layer moves
    # the ranks' tokens to the experts and back (exchange: ADP_EXCHANGES; "unread" where the
    # engine's code for it was not read, which plan serve then refuses to price), and for a
    # read exchange the bytes each token carries beside its hidden vector per routed expert
    # (route_bytes_per_expert: its expert id and weight), the bytes per element of the expert
    # outputs sent back (output_bytes), and the checkpoint kinds whose tokens go out unquantized
    # at 16 bits (dispatch_16bit: "fp8_block")
    # how the engine's attention-DP ranks share the requests and meet at each MoE layer
    # (analytic/serving/scheduler.py simulate_lockstep): assign "prompt_tokens_under_count" (a
    # new request goes to the rank with the fewest unfinished prompt tokens among those under
    # the count target ceil(unfinished / n)); idle "dummy_generation" (a rank with no request
    # runs a one-token generation request); assign "round_robin" (request i, in arrival order,
    # goes to rank i mod n as it arrives, whatever the ranks hold: SGLang's DataParallelController);
    # idle "empty_batch" (a rank with no request runs a zero-token batch: no work of its own,
    # it only joins the exchange); gather_padding false (the exchange and the experts
    # take each rank's own tokens) or true (every rank padded to the largest rank's count)
    "attention_dp_schedule": (
        lambda v: (isinstance(v, dict) and set(v) == {"assign", "idle", "gather_padding"}
                   and v["assign"] in ADP_ASSIGN and v["idle"] in ADP_IDLE
                   and isinstance(v["gather_padding"], bool)),
        "a table assign = " + " | ".join(ADP_ASSIGN) + ", idle = "
        + " | ".join(ADP_IDLE) + ", "
        "gather_padding = true | false"),
    # CUDA-graph batch-size buckets (analytic/serving/engine.py capture_sizes): the default
    # capture list (a list, or {small, step, start, stop} for small + range(start, stop + 1,
    # step)), sizes added on GPUs above some memory ({above_mib, sizes}), what the list is cut
    # at and how, what a graph is chosen by, whether a batch between sizes is padded up, the
    # longest sequence a decode graph covers (0: none), and whether eager launches are priced.
    # The sizes' order and sign are checked where they are read (one line, exit 2)
    "cuda_graph_sizes": (lambda v: isinstance(v, (list, dict)),
                         "a list of batch sizes or a table small, step, start, stop"),
    "cuda_graph_sizes_large_gpu": (lambda v: isinstance(v, dict)
                                   and set(v) == {"above_mib", "sizes"},
                                   "a table above_mib, sizes"),
    "cuda_graph_batch": (lambda v: v in ("decode_seqs", "tokens"), "decode_seqs or tokens"),
    "cuda_graph_limit": (lambda v: v in ("none", "token_budget", "max_batch",
                                         "max_batch_and_token_budget"),
                         "none | token_budget | max_batch | max_batch_and_token_budget"),
    "cuda_graph_over_limit": (lambda v: v in ("drop", "first_at_or_above", "append",
                                              "append_pool"),
                              "drop | first_at_or_above | append | append_pool"),
    "cuda_graph_padding": (lambda v: isinstance(v, bool), "true or false"),
    "cuda_graph_max_seq_len": (_num(0, whole=True), "an integer >= 0"),
    "cuda_graph_eager_launch": (lambda v: v in ("unpriced",), "unpriced"),
    "attention_dp": (lambda v: isinstance(v, dict) and _adp_ok(v),
                     "a table supported = true | false, exchange = "
                     + " | ".join(ADP_EXCHANGES) + " and, for a read exchange, "
                     "route_bytes_per_expert, output_bytes (numbers >= 0) and dispatch_16bit "
                     "(a list of fp8_block); for deepep: dispatcher = deepep, deepep_mode = "
                     "normal | low_latency | auto, dispatch_bytes_per_element, "
                     "combine_bytes_per_element, ll_row_extra_bytes (numbers >= 0)"),
    # two-batch overlap under attention DP with DeepEP (SGLang --enable-two-batch-overlap):
    # prefill "sglang_prefill" (an iteration with prefill tokens runs its MoE layers as two
    # micro-batches split at a sequence boundary, in the engine's operation order with one
    # compute and one communication stream: analytic/serving/iteration.py tbo_moe_layers) or
    # "off"; comm_sms (the SMs DeepEP's normal kernels hold while they run; the DeepGEMM
    # kernels inside the overlapped layers are launched on the others)
    "two_batch_overlap": (lambda v: (isinstance(v, dict) and set(v) == {"prefill", "comm_sms"}
                                     and v["prefill"] in ("sglang_prefill", "off")
                                     and _num(0, whole=True)(v["comm_sms"])),
                          "a table prefill = sglang_prefill | off, comm_sms = an integer >= 0"),
    # speculative decoding: the drafters the engine's source runs (analytic/serving/
    # speculative.py DRAFTERS: mtp, eagle, model)
    "speculative": (lambda v: isinstance(v, dict) and isinstance(v.get("drafters"), list)
                    and all(x in ("mtp", "eagle", "model") for x in v["drafters"]),
                    "a table drafters = a list of mtp | eagle | model"),
}
# what plan serve needs of a serving profile beyond its pool sizing
SERVING_ENGINE_REQUIRED = ("reserve", "batch_rule", "chunked_prefill", "fp8_checkpoint_kv")
# the host loop's fields; a serving profile sets them, or overhead_s alone (summed host time)
SERVING_HOST_FIELDS = ("host_s_per_iter", "host_s_per_seq", "host_overlap")
# every serving profile must say how it sizes its pool
SERVING_REQUIRED = ("kv_pool", "util_default", "profile_run", "token_budget_default",
                    "max_num_seqs_default", "block_size", "non_torch_bytes")


@dataclass(frozen=True)
class Framework:
    id: str
    kind: str
    name: str
    version: str
    source: str
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def attention_for(self, arch: str | None) -> tuple[str, str]:
        """(kernel, note) for a GPU architecture; an architecture the profile does not name
        takes its Hopper entry (else any entry), and the note says so."""
        table = self.values.get("attention") or {}
        if arch in table:
            return table[arch], ""
        fallback = "hopper" if "hopper" in table else next(iter(table), None)
        if fallback is None:
            return "flash", f"{self.id} names no attention kernel; flash assumed"
        return table[fallback], (f"{self.id} names no attention kernel for "
                                 f"{arch or 'this architecture'}; its {fallback} one is used")

    @property
    def cudnn_version(self) -> str | None:
        """The cuDNN version the release ships (frameworks.toml cudnn_version), "unknown" where
        a training profile does not state it; None for a serving engine (no such field)."""
        if self.kind != "training":
            return None
        return str(self.values.get("cudnn_version", RELEASE_DEFAULTS["cudnn_version"]))

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "kind": self.kind, "name": self.name, "version": self.version,
               "source": self.source, "fields": dict(self.values),
               "sources": dict(self.sources), "notes": dict(self.notes)}
        if self.kind == "training":
            out["cudnn_version"] = self.cudnn_version
        return out


def _parse(raw: dict[str, Any], where: str) -> tuple[str, dict[str, Framework]]:
    known = all_sources()
    profiles = raw.get("profiles")
    if not isinstance(profiles, dict) or not profiles:
        raise BadInput(f"{where}: no [profiles.ID] tables")
    extra = set(raw) - {"default", "profiles"}
    if extra:
        raise BadInput(f"{where}: unknown top-level key {sorted(extra)[0]!r}; allowed: default, "
                       "profiles")

    def own(pid: str, t: dict[str, Any]) -> tuple[dict, dict, dict]:
        vals, srcs, notes = {}, {}, {}
        table = SERVING_FIELDS if t.get("kind") == "serving" else FIELDS
        for k, v in t.items():
            if k in HEADER:
                continue
            base = k.removesuffix("_source").removesuffix("_note")
            if base not in table:
                raise BadInput(f"{where}: profile {pid}: unknown field {k!r} for a "
                               f"{t.get('kind')} profile; fields: {', '.join(table)}")
            if k.endswith("_note"):
                notes[base] = str(v)
            elif k.endswith("_source"):
                if v not in known:
                    raise BadInput(f"{where}: profile {pid}: {k} = {v!r} is not a known source "
                                   "key (sources*.toml)")
                srcs[base] = v
            else:
                check, allowed = table[k]
                if not check(v):
                    raise BadInput(f"{where}: profile {pid}: {k} must be {allowed}, got {v!r}")
                vals[k] = v
        for k in vals:
            if k not in srcs:
                raise BadInput(f"{where}: profile {pid}: field {k} has no {k}_source")
        return vals, srcs, notes

    out: dict[str, Framework] = {}

    def build(pid: str, seen: tuple[str, ...] = ()) -> Framework:
        if pid in out:
            return out[pid]
        if pid not in profiles:
            raise BadInput(f"{where}: profile {seen[-1] if seen else pid}: extends unknown "
                           f"profile {pid!r}")
        if pid in seen:
            raise BadInput(f"{where}: profile {pid}: extends itself through {' -> '.join(seen)}")
        t = profiles[pid]
        for k in ("kind", "name", "version", "source"):
            if k not in t:
                raise BadInput(f"{where}: profile {pid}: missing {k}")
        if t["kind"] not in KINDS:
            raise BadInput(f"{where}: profile {pid}: kind must be training or serving, got "
                           f"{t['kind']!r}")
        if t["source"] not in known:
            raise BadInput(f"{where}: profile {pid}: source {t['source']!r} is not a known "
                           "source key")
        vals, srcs, notes = own(pid, t)
        if "extends" in t:
            base = build(str(t["extends"]), (*seen, pid))
            if base.kind != t["kind"]:
                raise BadInput(f"{where}: profile {pid}: a {t['kind']} profile cannot extend the "
                               f"{base.kind} profile {base.id!r}")
            # a release field is the release's own: not taken from the profile extended
            vals = {**{k: v for k, v in base.values.items() if k not in RELEASE_FIELDS},
                    **vals}
            srcs = {**{k: v for k, v in base.sources.items() if k not in RELEASE_FIELDS},
                    **srcs}
            notes = {**{k: v for k, v in base.notes.items() if k not in RELEASE_FIELDS
                        and (k not in srcs or srcs[k] == base.sources.get(k))}, **notes}
        if t["kind"] == "serving":
            missing = [k for k in SERVING_REQUIRED if k not in vals]
            if missing:
                raise BadInput(f"{where}: profile {pid}: a serving profile needs {missing[0]}")
        fw = Framework(pid, t["kind"], str(t["name"]), str(t["version"]), t["source"], vals,
                       srcs, notes)
        out[pid] = fw
        return fw

    for pid in profiles:
        build(pid)
    default = raw.get("default", next(iter(profiles)))
    if default not in out:
        raise BadInput(f"{where}: default {default!r} is not a profile")
    return default, out


@cache
def _bundled() -> tuple[str, dict[str, Framework]]:
    return _parse(load_toml("frameworks.toml"), "frameworks.toml")


def default_framework_id() -> str:
    return _bundled()[0]


def framework_ids() -> list[str]:
    return list(_bundled()[1])


def load_frameworks_file(path: str) -> dict[str, Framework]:
    """A user's profile file (same schema; checked the same way)."""
    return _parse(read_user_toml(path, "--framework"), str(path))[1]


def get_framework(fid: str | None = None) -> Framework:
    """A bundled profile by id (None: the default, Megatron-Core)."""
    default, table = _bundled()
    fid = default if fid is None else fid
    if fid not in table:
        raise BadInput(f"--framework: unknown framework {fid!r}; choose one of "
                       f"{', '.join(table)}")
    return table[fid]



# --- what a training profile offers (its parallelisms and recompute_options), read by every
# layout search (planner.layout_grid, memory.find_min_gpus) and every explicit-layout check

# the parallelism a layout key needs where its value is above the plain one (1, or ZeRO 0)
PARALLELISM_OF = {"tp": "tp", "pp": "pp", "vpp": "vpp", "cp": "cp", "ep": "ep", "zero": "zero"}


def offered_parallelisms(fid: str | None) -> frozenset[str] | None:
    """The parallelisms a framework profile offers (frameworks.toml ``parallelisms``); None
    where the profile does not say (every layout)."""
    v = get_framework(fid).values.get("parallelisms")
    return None if v is None else frozenset(v)


def needed_parallelism(key: str, value: int) -> str | None:
    """The parallelism a layout key's value needs (None: the plain value, offered everywhere)."""
    if key not in PARALLELISM_OF:
        return None
    v = int(value)
    if key == "zero":
        return f"zero{v}" if v > 0 else None
    return PARALLELISM_OF[key] if v > 1 else None


def offered_values(fid: str | None, key: str, values: list[int]) -> list[int]:
    """The values of one layout key that the framework profile offers."""
    par = offered_parallelisms(fid)
    if par is None:
        return list(values)
    return [v for v in values if (n := needed_parallelism(key, v)) is None or n in par]


def pipeline_zero_max(fid: str | None) -> int | None:
    """The highest ZeRO stage a profile runs beside pipeline stages (``pipeline_zero_max``:
    DeepSpeed's pipeline engine takes ZeRO-1 only); None where any stage it offers may pair."""
    v = get_framework(fid).values.get("pipeline_zero_max")
    return None if v is None else int(v)


def replicate_1d_only(fid: str | None) -> bool:
    """Whether a profile replicates (ZeRO 0 across data-parallel ranks) only on a one-dimensional
    mesh (``replicate_1d_only``: torchtitan 9dec370 applies DDP only where data parallelism is
    the only dimension and FSDP over the DP and CP ranks wherever CP is on); False by default."""
    return bool(get_framework(fid).values.get("replicate_1d_only", False))


def pipeline_split_of(fid: str | None, model_id: str | None = None) -> str:
    """How a profile splits a model's layers over the pipeline chunks: the profile's recipe for
    that model (model_recipes pipeline_split, every GPU), else its ``pipeline_split``, else
    "any"."""
    vals = get_framework(fid).values
    hit = model_recipe_value(vals, model_id, None, "pipeline_split")
    return str(hit[0]) if hit is not None else str(vals.get("pipeline_split", "any"))


def even_pipeline_split(fid: str | None, model_id: str | None = None) -> bool:
    """Whether a profile splits the layers evenly only (``pipeline_split = "even"``: the layer
    count divisible by pp x vpp, every model chunk L / (pp x vpp) layers, no head-aware or
    first/last-stage counts); False where any split is offered (the default)."""
    return pipeline_split_of(fid, model_id) == "even"


def recipe_pipeline_split(fid: str | None, model_id: str | None = None) -> bool:
    """Whether the profile's split for that model is what its recipe leaves to the framework
    (a model_recipes pipeline_split entry) rather than all the framework can build: Megatron-Core
    of 2025-2026 builds L / pp layers a stage where a recipe sets no split flag, and builds
    the per-stage counts a run sets (num_layers_in_first/last_pipeline_stage,
    pipeline_model_parallel_layout; source megatron-core-even-split-without-flags), so an
    explicit ``--layout stages`` stands where only the recipe's split is even."""
    if fid is None:
        return False
    vals = get_framework(fid).values
    # a release that itself splits evenly only (Megatron-Core r0.8, Megatron-LM 2021) builds no
    # per-stage counts, whatever a recipe entry says
    return (model_recipe_value(vals, model_id, None, "pipeline_split") is not None
            and vals.get("pipeline_split", "any") != "even")


def edge_chunk_split(fid: str | None, model_id: str | None = None) -> bool:
    """Whether a profile's first model chunk holds only the embedding and its last only the
    output projection and the loss (``pipeline_split = "edge_chunks"``: Dubey et al. 2024 Sec.
    3.3.2, one transformer layer less on the first and the last stage; ``"edge_chunks_even"``:
    Megatron-Core's account_for_embedding_in_pipeline_split and
    account_for_loss_in_pipeline_split): the L decoder layers and those two layer-free slots are
    split over pp x vpp chunks."""
    return pipeline_split_of(fid, model_id) in ("edge_chunks", "edge_chunks_even")


def even_edge_split(fid: str | None, model_id: str | None = None) -> bool:
    """Whether the edge-chunk split must also be even (``pipeline_split =
    "edge_chunks_even"``): Megatron-Core's TransformerConfig raises unless L + 2 divides by pp
    and (L + 2) / pp by vpp, i.e. L + 2 splits into pp x vpp equal chunks."""
    return pipeline_split_of(fid, model_id) == "edge_chunks_even"


def recompute_modes(fid: str | None) -> list[str]:
    """The recompute modes a profile offers (the modes of its ``recompute_options``, in order);
    empty where the profile lists none (every mode)."""
    opts = get_framework(fid).values.get("recompute_options", ())
    return list(dict.fromkeys(str(o).partition(":")[0] for o in opts))

def engine_ids() -> list[str]:
    """Bundled serving-engine profiles (kind = "serving")."""
    return [k for k, f in _bundled()[1].items() if f.kind == "serving"]


def get_engine(fid: str | Framework) -> Framework:
    """A serving-engine profile by id (or a profile already loaded); a training id or an unknown
    one is bad input naming the engine ids."""
    if isinstance(fid, Framework):
        fw = fid
    else:
        table = _bundled()[1]
        fw = table.get(fid)  # type: ignore[assignment]
        if fw is None:
            raise BadInput(f"--framework: unknown serving engine {fid!r}; choose one of "
                           f"{', '.join(engine_ids())}")
    if fw.kind != "serving":
        raise BadInput(f"--framework: {fw.id!r} is a {fw.kind} framework, not a serving engine; "
                       f"choose one of {', '.join(engine_ids())}")
    return fw


def _has_attention_entry(kind: str, arch: str | None) -> bool:
    """Whether kernels.toml's family for an ``--attention`` kind has an entry (measured or
    borrowing) for ``arch``."""
    from .kernels import attention_family

    return isinstance(attention_family(kind)[1].get(arch or ""), dict)


def job_kernels(fid: str | None, gpu: Any, *, attention: str | None = None,
                kernels: str | None = None) -> tuple[Framework, dict[str, str]]:
    """The profile and the attention / kernels a job runs on ``gpu`` (an id or a GPUSpec):
    explicit values override the profile's."""
    from . import get_gpu

    fw = get_framework(fid)
    if fw.kind != "training":
        raise BadInput(f"--framework: {fw.id!r} is a {fw.kind} engine, not a training framework;"
                       " choose one of " + ", ".join(k for k, f in _bundled()[1].items()
                                                    if f.kind == "training"))
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    att, _ = fw.attention_for(getattr(g, "arch", None))
    if att == "flash3" and not _has_attention_entry("flash3", getattr(g, "arch", None)):
        att = "flash"  # no FA-3-class curve on this architecture (kernels.toml): the FA-2 class
    return fw, {"attention": attention or att, "kernels": kernels or fw.get("kernels") or "fused"}


def job_settings(fid: str | None, gpu: Any, **explicit: Any) -> tuple[Framework, dict[str, Any]]:
    """Every make_job setting the profile gives (attention, kernels, grad_accum_fusion,
    schedule, ep_overlap, grad_reduce_bytes, dp_bucket_bytes, and the profile id for its memory
    reserve); entries of ``explicit`` that are
    not None override it. ``model`` (a model id, not a setting) picks the profile's MoE recipe
    for that model on this GPU (moe_recipes), whose EP overlap stands where no flag sets one."""
    fw, kern = job_kernels(fid, gpu, attention=explicit.get("attention"),
                           kernels=explicit.get("kernels"))
    out: dict[str, Any] = dict(kern)
    for k in ("grad_accum_fusion", "schedule", "ep_overlap"):
        v = explicit.get(k)
        out[k] = fw.get(k) if v is None else v
    # a recipe the profile records for this model on this GPU sets the EP overlap it ran with
    gpu_id = gpu if isinstance(gpu, str) else getattr(gpu, "id", None)
    recipe = moe_recipe(fw.values, explicit.get("model"), gpu_id)
    if recipe is not None and explicit.get("ep_overlap") is None:
        out["ep_overlap"] = bool(recipe.get("a2a_overlap", False))
    # the MTP modules the recipe builds for this model on this GPU (model_recipes mtp_layers),
    # where it overrides the model config's
    mtp = model_recipe_value(fw.values, explicit.get("model"), gpu_id, "mtp_layers")
    if mtp is not None:
        out["mtp_layers"] = int(mtp[0])
    out["framework_id"] = fw.id  # the step model reads the profile's overlap fields through it
    return fw, out
