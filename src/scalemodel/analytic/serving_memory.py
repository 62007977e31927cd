"""The KV pool a serving engine allocates: one accounting for every engine profile.

A serving engine sizes its paged KV cache once at start-up, and each engine takes its fraction
of a different total (frameworks.toml, kind = "serving", field ``kv_pool``):

* ``util_of_total`` (vLLM V0 and V1): ``K = u * M - W - A - N``: the utilisation fraction of the
  GPU's whole memory, less the weights, the activation peak of a profiling forward pass of
  ``max_num_batched_tokens`` tokens and the memory outside the torch allocator (CUDA context,
  cuBLAS workspaces, NCCL and custom all-reduce buffers). CUDA graphs are captured after the
  KV cache is allocated and live in the ``1 - u`` margin.
* ``fraction_of_free_after_profile`` (TensorRT-LLM 1.x, PyTorch backend):
  ``K = f * (M - W - A - N - G)``: the fraction of what is free after a profiling run, CUDA
  graphs (G) included in what is not free.
* ``fraction_of_free_after_load`` (TensorRT-LLM 0.17, TensorRT engines):
  ``K = f * (M - W - A - N)``: the engine's activation buffers are allocated with it.
* ``static_fraction`` (SGLang): ``K = f * (M - N) - W``: weights and KV share the static
  fraction of the memory free at start; activations and CUDA graphs use the rest.

The activation peak of the profiling pass is the largest live set of one layer: ``c_h``
vectors of the hidden size and ``c_f`` of the per-rank MLP width per token (the engine's layer
code says which tensors are alive at once), or the fp32 logits of the sampled rows when that
is larger. KV bytes per token are the exact per-GPU figure of :mod:`scalemodel.analytic.kv`;
weight bytes are priced per module by :mod:`scalemodel.analytic.weights` (quantized checkpoints
keep the modules their ``quantization_config`` leaves out in the unquantized dtype).

Symbols (docs/notation.md, docs/serving-memory.md): M device memory, u / f the engine's
fraction, W weights per GPU, A profile activation peak, N non-torch memory, G CUDA graphs,
K KV budget per GPU, b_gpu KV bytes per token per GPU, k_blk block size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..derive import Derivation
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, dtype
from ..specs.device_memory import (
    context_stack_bytes,
    engine_visible_bytes,
    nccl_comm_bytes,
    nccl_device_code_bytes,
    nccl_kernel_stack_bytes,
    nccl_table,
    nccl_versions,
    nvls_bytes,
    resident_threads,
    torch_cublas_workspace_bytes,
)
from ..specs.frameworks import Framework, get_engine
from ..specs.sources import cite
from .kv import check_tp
from .params import count_params, shard_params
from .weights import weight_bytes

# the engine `kv --gpu` and the answers price when no --framework is given
DEFAULT_ENGINE = "vllm-v1"


@dataclass(frozen=True)
class EngineKV:
    """The KV pool one engine allocates on one GPU of a replica (bytes; JSON keys are public)."""

    engine: str
    engine_name: str
    engine_version: str
    model: str
    gpu: str
    tp: int
    pp: int
    weight_dtype: str
    kv_dtype: str
    util: float
    util_flag: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    profile_tokens: int  # tokens of the profiling pass (0: the engine runs none)
    total_bytes: float  # device memory as the engine reads it
    weights_bytes: float  # per GPU
    profile_activation_bytes: float  # per GPU, counted in the budget (0 where it is not)
    non_torch_bytes: float  # per GPU
    cuda_graph_bytes: float  # per GPU, counted in the budget (0 where it is not)
    kv_budget_bytes: float  # per GPU
    bytes_per_token: float  # KV bytes per token per GPU
    block_size: int
    blocks: int
    max_tokens: int  # KV tokens the engine can hold (per replica: every GPU holds its share)
    max_concurrency: float  # max_tokens / max_model_len, as vLLM logs it
    fits: bool
    lacks: str  # why the engine refuses to start ("" when it starts)
    derivation: Derivation

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "derivation"}
        d["derivation"] = self.derivation.to_dict()
        return d


def engine_util(fw: Framework, tp: int) -> tuple[float, str]:
    """The engine's default fraction at a TP degree, and the field it came from."""
    table = fw.get("util_by_tp")
    if table:
        keys = sorted((int(k) for k in table), reverse=True)
        for k in keys:
            if tp >= k:
                return float(table[str(k)]), "util_by_tp"
        return float(table[str(keys[-1])]), "util_by_tp"
    return float(fw.get("util_default")), "util_default"


def engine_token_budget(fw: Framework, total_bytes: float, max_model_len: int,
                        device_name: str = "") -> tuple[int, str]:
    """max_num_batched_tokens the engine picks when the user gives none, and why.

    ``device_name`` is the GPU's name (the engine reads torch's device name): a profile with
    ``token_budget_by_device_name`` picks its budget by a substring of it first (vLLM V1
    0.7.x: 8192 on "h100" / "h200", its default elsewhere)."""
    rule = fw.get("token_budget_rule") or "fixed"
    by_name = fw.get("token_budget_by_device_name") or {}
    low = device_name.lower()
    for key, budget in by_name.items():
        if key.lower() in low:
            return int(budget), f"the engine's budget for a device named *{key}*"
    above = int(fw.get("chunked_prefill_above_len") or 0)
    if rule == "max_model_len_unless_chunked":
        if above and max_model_len > above:
            return int(fw.get("chunked_token_budget")), (
                f"chunked prefill switched on (max_model_len > {above:,})")
        return max(max_model_len, int(fw.get("token_budget_default"))), (
            "max(max_model_len, default) without chunked prefill")
    if _small_gpu(fw, total_bytes, device_name):
        return int(fw.get("small_gpu_token_budget")), "the engine's budget on a smaller GPU"
    return int(fw.get("token_budget_default")), "the engine's default budget"


def _small_gpu(fw: Framework, total_bytes: float, device_name: str) -> bool:
    """Whether the engine takes its smaller-GPU defaults: the device under ``small_gpu_bytes``,
    or its name holding one of ``small_gpu_device_names`` (vLLM's A100 exclusion)."""
    small = float(fw.get("small_gpu_bytes") or 0)
    if not small:
        return False
    low = device_name.lower()
    return total_bytes < small or any(n.lower() in low
                                      for n in fw.get("small_gpu_device_names") or ())


def engine_max_num_seqs(fw: Framework, total_bytes: float,
                        device_name: str = "") -> tuple[int, str]:
    """max_num_seqs the engine picks when the user gives none, and why: a profile with
    ``small_gpu_max_num_seqs`` takes it on a smaller GPU (``_small_gpu``; vLLM V1 0.9-0.10:
    256 under 70 GiB or on an A100, 1024 otherwise), else ``max_num_seqs_default``."""
    seqs = fw.get("small_gpu_max_num_seqs")
    if seqs and _small_gpu(fw, total_bytes, device_name):
        return int(seqs), "the engine's max_num_seqs on a smaller GPU"
    return int(fw.get("max_num_seqs_default")), "the engine's default max_num_seqs"


def _widest_mlp(m: ModelSpec) -> int:
    if m.is_moe:
        shared = m.shared_ffn or m.n_shared_experts * m.moe_ffn
        return max(m.ffn if m.first_dense_layers else 0, m.top_k * m.moe_ffn + shared)
    return m.ffn


def _weights_per_gpu(d: Derivation, m: ModelSpec, e_w: float, name: str, tp: int,
                     pp: int, attention_dp: bool = False, fw: Framework | None = None) -> float:
    """Weight bytes on one GPU as the engine's load figure counts them: the modules
    (:func:`_module_weights_per_gpu`) plus, where the profile says so, the rotary cos/sin cache
    buffer the model allocates on the device while it is built."""
    rope = (fw is not None and fw.values.get("rope_cache_in_weights") and m.rope
            and m.attention != "mla")
    rep = _replicated_modules(m, fw)
    if not rope:
        return _module_weights_per_gpu(d, m, e_w, name, tp, pp, attention_dp, "W", rep, fw)
    _module_weights_per_gpu(d, m, e_w, name, tp, pp, attention_dp, "W_m", rep, fw)
    assert fw is not None
    d.given("positions of the rotary cos/sin cache (max_position_embeddings)", "P_rope",
            m.max_context, "token", m.source)
    d.given("rotary width per head (head_dim)", "d_rot", m.head_dim, "1", m.source)
    d.given(f"bytes per cache element (model dtype, {name})", "e_r", e_w, "B")
    d.calc("rotary cos/sin cache, one per GPU (shared by all layers)", "B_rope",
           "P_rope * d_rot * e_r", "B", source=cite(fw.sources["rope_cache_in_weights"]),
           note=fw.notes.get("rope_cache_in_weights", ""))
    return float(d.calc("weight bytes per GPU as loaded, rotary cache included", "W",
                        "W_m + B_rope", "B"))


def _replicated_modules(m: ModelSpec, fw: Framework | None) -> tuple[str, ...]:
    """The model's attention projections the engine keeps whole on every TP rank (its profile's
    ``replicated_modules``, names as analytic/weights.py prices them; those the model has)."""
    from .weights import attention_linear_names

    if fw is None:
        return ()
    names = attention_linear_names(m)
    return tuple(x for x in (fw.values.get("replicated_modules") or ()) if x in names)


def _module_weights_per_gpu(d: Derivation, m: ModelSpec, e_w: float, name: str, tp: int,
                            pp: int, attention_dp: bool, sym: str,
                            replicated: tuple[str, ...] = (), fw: Framework | None = None) -> float:
    """Weight bytes on one GPU. Under attention data parallelism every one of the tp ranks
    holds the attention, dense MLP, shared-expert, embedding and head weights whole and a
    1/tp share of the routed experts (expert parallelism over the tp ranks). ``replicated``:
    attention projections the engine keeps whole on every TP rank (its profile's
    ``replicated_modules``), counted unsplit."""
    src = m.source
    tp_d, ep_x = (1, tp) if attention_dp else (tp, 1)
    how = f"attention DP over {tp}: all but the experts whole" if attention_dp else f"TP {tp}"
    if replicated and tp_d > 1:
        wb = weight_bytes(m, e_w, replicated)
        what = (m.quant.label if m.quant is not None else f"every weight at {name}")
        assert fw is not None
        return float(d.given(
            f"weight bytes on one GPU, each module as stored ({what}); "
            f"{', '.join(replicated)} whole on every rank", sym,
            shard_params(wb, tp_d, pp, ep_x).total, "B", src,
            note=f"{how}; the engine keeps {', '.join(replicated)} unsplit on each TP rank "
                 f"({cite(fw.sources['replicated_modules'])})"))
    if m.quant is None:
        pc = count_params(m)
        d.given(f"parameters on one GPU (heaviest of {pp} stage(s), {how})", "P_gpu",
                shard_params(pc, tp_d, pp, ep_x).total, "1", src)
        d.given(f"bytes per {name} weight", "e_w", e_w, "B")
        return float(d.calc("weight bytes per GPU", sym, "P_gpu * e_w", "B"))
    wb = weight_bytes(m, e_w)
    return float(d.given(
        f"weight bytes on one GPU, each module as stored ({m.quant.label}; modules the "
        f"quantization_config leaves out at {name})", sym,
        shard_params(wb, tp_d, pp, ep_x).total, "B",
        src, note=f"{how}; quantized linear weights with their scales; embeddings, norms, routers and "
                  "ignored modules in the unquantized dtype"))


def engine_view(m: ModelSpec, engine_id: str | Framework) -> tuple[ModelSpec, str]:
    """(the model as the engine's KV cache keeps it, a note saying what changed or ""). An
    engine whose profile says ``chunked_attention_kv = "full_context"`` sizes every layer of a
    model with chunked local attention (``sliding_kind == "chunk"``, Llama 4) for the whole
    sequence: those layers keep all their tokens, as full-attention layers do. A sliding window
    (``sliding_kind == "window"``) is left as it is."""
    fw = get_engine(engine_id)
    if not (fw.get("chunked_attention_kv") == "full_context" and m.sliding_kind == "chunk"
            and m.n_sliding_layers > 0):
        return m, ""
    from dataclasses import replace

    why = fw.notes.get("chunked_attention_kv", "")
    note = (f"{fw.id} keeps the whole context's KV on the model's {m.n_sliding_layers} chunked-"
            f"attention layers (chunks of {m.sliding_window:,} tokens), as on its full-attention "
            f"ones ({cite(fw.sources['chunked_attention_kv'])})" + (f": {why}" if why else ""))
    return replace(m, sliding_window=0, sliding_layers=()), note


def engine_kv_budget(
    m: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    engine_id: str | Framework = "vllm-v1",
    util: float | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    total_bytes: float | None = None,
    block_size: int | None = None,
    attention_dp: bool = False,
) -> EngineKV:
    """The KV pool ``engine_id`` allocates for ``m`` on each of ``tp * pp`` GPUs of one replica.

    ``kv_dtype`` None is the engine's "auto": the checkpoint's unquantized dtype. ``total_bytes``
    overrides the device memory the engine reads (torch.cuda.mem_get_info's total; default
    the GPU spec's figure).
    """
    fw = get_engine(engine_id)
    check_tp(m, tp, pp)
    v = fw.values
    m, chunk_note = engine_view(m, fw)
    ew = dtype(weight_dtype, "--dtype")
    ekv = dtype(kv_dtype or weight_dtype, "--kv-dtype")
    mml = int(max_model_len or m.max_context)
    if mml <= 0:
        raise BadInput(f"--context / max_model_len must be a positive number of tokens, got {mml}")
    if util is not None and not 0 < util <= 1:
        raise BadInput(f"--util must be in (0, 1], got {util}")
    if total_bytes is not None:
        M, m_src = float(total_bytes), "given"
    else:
        M, m_src = engine_visible_bytes(gpu)
    if M <= 0:
        raise BadInput(f"total GPU memory must be positive, got {M}")
    pool = v["kv_pool"]
    d = Derivation(f"KV pool of {m.id} on {tp * pp} x {gpu.id} as {fw.name} {fw.version} "
                   f"sizes it")
    if chunk_note:
        d.note(chunk_note)
    d.note(f"{fw.id}: {fw.notes.get('kv_pool', pool)}")
    d.given(f"{gpu.name} memory the engine reads (cudaMemGetInfo total)", "M", M, "B", m_src)
    if util is None:
        u, key = engine_util(fw, tp)
        d.given(f"engine's default memory fraction (TP {tp})", "u", u, "1", cite(fw.sources[key]))
    else:
        u = util
        d.given("memory fraction (--util)", "u", u, "1", "--util")
    W = _weights_per_gpu(d, m, ew.bytes, ew.name, tp, pp, attention_dp, fw)

    budget_src = cite(fw.sources["token_budget_default"])
    if max_num_batched_tokens is None:
        T, why = engine_token_budget(fw, M, mml, gpu.name)
        if why.startswith("chunked prefill") and "chunked_token_budget" in fw.sources:
            budget_src = cite(fw.sources["chunked_token_budget"])
        d.given(f"max_num_batched_tokens ({why})", "T_b", T, "token", budget_src)
    else:
        T = int(max_num_batched_tokens)
        d.given("max_num_batched_tokens (given)", "T_b", T, "token", "given")
    if max_num_seqs:
        R = int(max_num_seqs)
        d.given("max_num_seqs (given)", "R", R, "seq", "given")
    else:
        R, why_r = engine_max_num_seqs(fw, M, gpu.name)
        key = ("small_gpu_max_num_seqs" if int(v["max_num_seqs_default"]) != R
               else "max_num_seqs_default")
        d.given(f"max_num_seqs ({why_r})", "R", R, "seq", cite(fw.sources[key]))

    A = 0.0
    profile_tokens = 0
    if v["profile_run"] != "none":
        profile_tokens = T
        A = _activation_peak(d, m, fw, ew.bytes, tp, T, R, gpu)
    nt = _non_torch(d, fw, gpu, tp)
    G = float(v.get("cuda_graph_bytes") or 0) if v.get("cuda_graph_in_budget") else 0.0
    if v.get("cuda_graph_in_budget"):
        d.given("CUDA-graph memory counted before the KV pool", "G", G, "B",
                cite(fw.sources["cuda_graph_bytes"]), note=fw.notes.get("cuda_graph_bytes", ""))
    elif v.get("cuda_graphs"):
        d.note(f"CUDA graphs: {fw.notes.get('cuda_graph_in_budget', 'outside the budget')}.")
    formula = {
        "util_of_total": "u * M - W - A - N",
        "fraction_of_free_after_profile": "u * (M - W - A - N - G)",
        "fraction_of_free_after_load": "u * (M - W - A - N)",
        "static_fraction": "u * (M - N) - W",
    }[pool]
    if "A" not in d.env:
        d.env["A"] = 0.0
    if "G" not in d.env:
        d.env["G"] = 0.0
    K = float(d.calc("KV budget per GPU", "K", formula, "B", source=cite(fw.sources["kv_pool"])))
    return _finish(d, m, fw, gpu, tp=tp, pp=pp, kv_tp=1 if attention_dp else tp,
                   ew=ew.name, ekv=ekv, u=u, mml=mml, R=R, T=T,
                   profile_tokens=profile_tokens, M=M, W=W, A=A, N=nt, G=G, K=K,
                   block_size=block_size)


def _non_torch(d: Derivation, fw: Framework, gpu: GPUSpec, tp: int) -> float:
    """Memory outside the torch allocator per GPU: the engine's base, its TP communicators' buffers
    and, on NVSwitch GPUs, NCCL's NVLS buffers for the TP group."""
    v = fw.values
    _base_non_torch(d, fw, gpu)
    if tp == 1:
        return float(d.calc("memory outside torch per GPU", "N", "N_0", "B"))
    version = str(v.get("nccl_version", "unread"))
    if version != "unread" and nccl_table(version) is None:
        raise BadInput(f"{fw.id}: nccl_version {version!r} has no buffer table in "
                       "device_memory.toml (known: " + ", ".join(nccl_versions()) + ")")
    comm = (nccl_comm_bytes(gpu, tp, version, bool(v.get("nccl_eager_connect", False)))
            if version != "unread" else None)
    if comm is not None:
        parts, src = comm
        ver = cite(fw.sources.get("nccl_version", fw.source))
        d.given(f"NCCL {version} ring / tree channels per communicator ({tp} GPUs)", "C_nccl",
                parts["channels"], "1", src)
        d.given("P2P connection pairs per channel (ring, plus the tree chain's other neighbour "
                "above 2 GPUs)", "P_nccl", parts["pairs"], "1", src)
        d.given("one send + receive buffer pair (Simple, LL, LL128, headers; 2 MiB granules)", "B_pair",
                parts["pair"], "B", src)
        d.given(f"NCCL {version} NVLS buffers and credits per communicator", "B_nvls",
                parts["nvls"], "B", src if parts["nvls"] else "none: 2 GPUs or no NVLS on the GPU")
        d.given("NCCL communicators of the TP ranks per GPU", "n_comm",
                float(v.get("tp_nccl_communicators", 1)),
                "1", cite(fw.sources.get("tp_nccl_communicators", fw.source)),
                note=fw.notes.get("tp_nccl_communicators", "") + f" (NCCL {version}: {ver})")
        d.given("custom all-reduce IPC buffers", "B_car", float(v.get("custom_all_reduce_bytes", 0)),
                "B", cite(fw.sources.get("custom_all_reduce_bytes", fw.source)),
                note=fw.notes.get("custom_all_reduce_bytes", ""))
        d.calc("TP communicator buffers", "N_tp",
               "n_comm * (C_nccl * P_nccl * B_pair + B_nvls) + B_car", "B")
        if not v.get("nccl_library_in_budget"):
            return float(d.calc("memory outside torch per GPU", "N", "N_0 + N_tp", "B"))
        return _nccl_library(d, fw, gpu, version)
    d.given("TP communicator buffers (NCCL rings, custom all-reduce)", "N_tp",
            float(v.get("non_torch_tp_bytes") or 0), "B",
            cite(fw.sources.get("non_torch_tp_bytes", fw.source)),
            note=fw.notes.get("non_torch_tp_bytes", ""))
    nv, nv_src = nvls_bytes(gpu, tp)
    d.given(f"NCCL NVLS buffers of the TP group ({tp} GPUs)", "N_nvls", nv, "B",
            nv_src or "none: the GPU has no NVLS entry or the group is too small")
    return float(d.calc("memory outside torch per GPU", "N", "N_0 + N_tp + N_nvls", "B"))


def _nccl_library(d: Derivation, fw: Framework, gpu: GPUSpec, version: str) -> float:
    """``N`` with what loading and first running NCCL costs once per process, for a profile whose
    baseline predates it: the kernel module's device code and the context's local memory grown
    to the kernels' stack. Each term only where its figure is read for the GPU's architecture."""
    lib = cite(fw.sources["nccl_library_in_budget"])
    why = fw.notes.get("nccl_library_in_budget", "")
    terms = ["N_0", "N_tp"]
    code = nccl_device_code_bytes(gpu, version)
    if code is not None:
        d.given(f"NCCL {version}'s kernel module, loaded at its first kernel (sm "
                f"{gpu.compute_capability})", "N_code", code[0], "B", code[1])
        terms.append("N_code")
    stack = nccl_kernel_stack_bytes(gpu, version)
    threads = resident_threads(gpu)
    if stack is not None and threads is not None:
        l0, l0_src = context_stack_bytes()
        d.given("per-thread stack a CUDA context starts with (default limit)", "L_0", l0, "B",
                l0_src)
        d.given(f"per-thread stack NCCL {version}'s collective kernels need (sm "
                f"{gpu.compute_capability})", "L_nccl", stack[0], "B", stack[1])
        d.given("threads the GPU keeps resident (SMs x max threads per SM)", "T_res",
                threads[0], "1", threads[1])
        d.calc("context local memory grown at NCCL's first kernel launch, after the engine's "
               "baseline", "N_stk", "max(L_nccl - L_0, 0) * T_res", "B", source=lib, note=why)
        terms.append("N_stk")
    return float(d.calc("memory outside torch per GPU", "N", " + ".join(terms), "B"))


def _base_non_torch(d: Derivation, fw: Framework, gpu: GPUSpec) -> float:
    """``N_0``: the engine's memory outside torch at TP 1. A profile whose figure includes the
    CUDA context and was logged on another GPU (``non_torch_ref_resident_threads``) moves the
    context's stack allocation, default per-thread stack x resident threads, to this GPU's count;
    the rest of the figure is taken as it was logged."""
    v = fw.values
    src, note = cite(fw.sources["non_torch_bytes"]), fw.notes.get("non_torch_bytes", "")
    ref = v.get("non_torch_ref_resident_threads")
    threads = resident_threads(gpu) if ref else None
    if not ref or threads is None:
        return float(d.given("memory outside torch at TP 1 (context / workspaces the engine "
                             "counts)", "N_0", float(v["non_torch_bytes"]), "B", src, note=note))
    d.given("memory outside torch at TP 1 as logged on the reference GPU (context included)",
            "N_0r", float(v["non_torch_bytes"]), "B", src, note=note)
    d.given("threads the reference GPU keeps resident", "T_ref", float(ref), "1",
            cite(fw.sources["non_torch_ref_resident_threads"]),
            note=fw.notes.get("non_torch_ref_resident_threads", ""))
    l0, l0_src = context_stack_bytes()
    d.given("per-thread stack a CUDA context starts with (default limit)", "L_0", l0, "B", l0_src)
    d.given("threads this GPU keeps resident (SMs x max threads per SM)", "T_res", threads[0],
            "1", threads[1])
    return float(d.calc("memory outside torch at TP 1 on this GPU (the context's stack moved to "
                        "its thread count)", "N_0", "N_0r + L_0 * (T_res - T_ref)", "B"))


def _activation_peak(d: Derivation, m: ModelSpec, fw: Framework, e_a: float, tp: int, T: int,
                     R: int, gpu: GPUSpec | None = None) -> float:
    """Peak of the profiling pass: one layer's live set for T tokens, or the sampled rows' logits,
    plus what the engine's profile says it also counts there (the model runner's inputs_embeds
    buffer; torch's cuBLAS workspace, made at the pass's first cuBLAS GEMM and kept)."""
    v = fw.values
    d.given("tokens of the profiling pass", "T_p", T, "token", cite(fw.sources["profile_run"]),
            note=fw.notes.get("profile_run", ""))
    d.given("hidden size", "h", m.hidden, "1", m.source)
    d.given("widest MLP per token (all active experts)", "f", _widest_mlp(m), "1", m.source)
    d.given("tensor-parallel degree", "t", tp, "1")
    d.given("hidden-size vectors alive per token", "c_h", v["act_hidden_copies"], "1",
            cite(fw.sources["act_hidden_copies"]), note=fw.notes.get("act_hidden_copies", ""))
    d.given("MLP-width vectors alive per token", "c_f", v["act_ffn_copies"], "1",
            cite(fw.sources["act_ffn_copies"]), note=fw.notes.get("act_ffn_copies", ""))
    d.given("experts per token (0: dense MLP)", "k", m.top_k if m.is_moe else 0, "1", m.source)
    d.given("hidden-size vectors per routed expert alive per token", "c_e",
            v.get("act_expert_hidden_copies", 0), "1",
            cite(fw.sources.get("act_expert_hidden_copies", fw.source)),
            note=fw.notes.get("act_expert_hidden_copies", ""))
    d.given("bytes per activation", "e_a", e_a, "B")
    a_layer = d.calc("one layer's live set in the profiling pass", "A_l",
                     "T_p * (c_h * h + c_f * f / t + c_e * k * h) * e_a", "B")
    d.given("vocabulary", "V", m.vocab, "1", m.source)
    d.given("bytes per logit in the sampling step", "e_l", v.get("logits_bytes_per_element", 4),
            "B", cite(fw.sources.get("logits_bytes_per_element", fw.source)),
            note=fw.notes.get("logits_bytes_per_element", ""))
    src_rows = cite(fw.sources.get("profile_logits_rows", fw.source))
    for key, sym, what in (("profile_held_hidden_tokens", "n_T", "every profiled token"),
                           ("profile_held_hidden_rows", "n_R", "each logits row")):
        if key in v:
            d.given(f"hidden-state copies of {what} held while the logits exist", sym, v[key],
                    "1", cite(fw.sources[key]), note=fw.notes.get(key, ""))
        else:  # a profile that does not say holds none here
            d.env[sym] = 0
    if (v.get("profile_logits_rows") or "sampled") == "all_tokens":
        d.given("rows whose logits the profiling pass computes (every profiled token)", "R_l", T,
                "token", src_rows, note=fw.notes.get("profile_logits_rows", ""))
        if v.get("profile_logits_all_gather") and tp > 1:
            d.given("logits copies alive in the TP all-gather (shard, gathered, reshaped copy)",
                    "g", 2 + 1 / tp, "1", cite(fw.sources["profile_logits_all_gather"]),
                    note=fw.notes.get("profile_logits_all_gather", ""))
        else:
            d.given("logits copies alive (no gather at TP 1)", "g", 1, "1")
    else:
        d.calc("rows sampled by the profiling pass", "R_l", "min(R, T_p)", "token",
               source=src_rows)
        d.given("logits copies (e_l counts the sampling step's whole set)", "g", 1, "1")
    d.calc("logits of those rows and the hidden states held with them", "A_s",
           "R_l * g * V * e_l + (n_T * T_p + n_R * R_l) * h * e_a", "B")
    a_peak = d.calc("peak of the profiling pass", "A_p", "max(A_l, A_s)", "B",
                    check=max(a_layer, d["A_s"]))
    terms = ["A_p"]
    check = a_peak
    if v.get("inputs_embeds_in_peak"):
        d.calc("inputs_embeds buffer [max_num_batched_tokens, h] the model runner allocates "
               "before the weights (in the torch peak, not in the weights figure)", "B_emb",
               "T_b * h * e_a", "B", source=cite(fw.sources["inputs_embeds_in_peak"]),
               note=fw.notes.get("inputs_embeds_in_peak", ""))
        check += T * m.hidden * e_a
        terms.append("B_emb")
    if v.get("cublas_workspace_in_peak"):
        version = str(v.get("torch_version", "unread"))
        ws = torch_cublas_workspace_bytes(gpu, version) if gpu is not None else None
        if ws is None:
            d.note(f"torch {version}'s cuBLAS workspace is not priced on {getattr(gpu, 'id', '?')}"
                   " (compute capability not recorded for that version in device_memory.toml)")
        else:
            d.given(f"cuBLAS workspace torch {version} allocates at the pass's first cuBLAS "
                    f"GEMM (sm {gpu.compute_capability}), kept", "B_cublas", ws[0], "B",
                    ws[1] + "; " + cite(fw.sources["cublas_workspace_in_peak"]),
                    note=fw.notes.get("cublas_workspace_in_peak", ""))
            check += ws[0]
            terms.append("B_cublas")
    if terms == ["A_p"]:
        return float(d.calc("activation peak of the profiling pass", "A", "A_p", "B"))
    return float(d.calc("activation peak of the profiling pass, persistent buffers included",
                        "A", " + ".join(terms), "B", check=check))


def _finish(d: Derivation, m: ModelSpec, fw: Framework, gpu: GPUSpec, *, tp: int, pp: int,
            kv_tp: int | None = None,
            ew: str, ekv: Any, u: float, mml: int, R: int, T: int, profile_tokens: int,
            M: float, W: float, A: float, N: float, G: float, K: float,
            block_size: int | None) -> EngineKV:
    from .kv import kv_report

    # attention DP: a rank caches its own sequences' every KV head (kv_tp = 1)
    kr = kv_report(m, tp=tp if kv_tp is None else kv_tp, pp=pp, kv_dtype=ekv.name,
                   weight_dtype=ew, context=mml)
    per_gpu = kr.kv_bytes_per_token_per_gpu
    if kr.sliding_layers:
        # sliding-window layers keep at most W tokens: the pool holds more tokens of context
        per_gpu *= kr.kv_bytes_per_sequence / (kr.kv_bytes_per_token * mml)
        d.given(f"KV bytes per GPU per token of a max_model_len sequence ({ekv.name} cache, "
                f"{kr.sliding_layers} sliding-window layers bounded by {kr.sliding_window:,})",
                "b_gpu", per_gpu, "B", note="kv's exact count, averaged over the window bound")
    else:
        d.given(f"KV bytes per token per GPU ({ekv.name} cache)", "b_gpu", per_gpu, "B",
                note="2 * ceil(L / p) * max(1, h_kv // t) * d_h * e_kv (kv's exact count)")
    bs = int(block_size or fw.get("block_size"))
    d.given("KV block (page) size", "k_blk", bs, "token",
            "given" if block_size else cite(fw.sources["block_size"]))
    lacks = ""
    if K <= 0:
        blocks = tokens = 0
        lacks = (f"no memory left for KV on {tp * pp} x {gpu.id}: weights {W / 2**30:.2f} GiB"
                 f" + activations {A / 2**30:.2f} GiB + outside torch {N / 2**30:.2f} GiB "
                 f"exceed the fraction {u:g} of {M / 2**30:.2f} GiB by {-K / 2**30:.2f} GiB")
        d.note("The budget is not positive: the engine stops before allocating a KV block.")
    else:
        blocks = int(d.calc("KV blocks", "n_blk", "floor(K / (b_gpu * k_blk))", "1"))
        tokens = int(d.calc("KV tokens the engine holds", "N_tok", "n_blk * k_blk", "token"))
    conc = tokens / mml
    if K > 0 and fw.get("requires_max_len_fits") and tokens < mml:
        lacks = (f"max_model_len {mml:,} needs {mml:,} KV tokens but {fw.id} holds "
                 f"{tokens:,} ({(mml - tokens) * per_gpu / 2**30:.2f} GiB more KV per GPU); "
                 "lower the context or raise the memory fraction")
        d.note(f"{fw.id} refuses to start: one sequence of max_model_len does not fit.")
    d.given("max_model_len", "s_max", mml, "token")
    if tokens:
        d.calc("maximum concurrency at max_model_len (as logged)", "c_max", "N_tok / s_max", "1")
    return EngineKV(
        engine=fw.id, engine_name=fw.name, engine_version=fw.version, model=m.id, gpu=gpu.id,
        tp=tp, pp=pp, weight_dtype=ew, kv_dtype=ekv.name, util=u,
        util_flag=_UTIL_FLAG.get(fw.get("kv_pool"), "util"), max_model_len=mml,
        max_num_seqs=R, max_num_batched_tokens=T, profile_tokens=profile_tokens, total_bytes=M,
        weights_bytes=W, profile_activation_bytes=A, non_torch_bytes=N, cuda_graph_bytes=G,
        kv_budget_bytes=K, bytes_per_token=per_gpu, block_size=bs, blocks=blocks,
        max_tokens=tokens, max_concurrency=conc, fits=not lacks, lacks=lacks, derivation=d)


_UTIL_FLAG = {
    "util_of_total": "gpu_memory_utilization",
    "fraction_of_free_after_profile": "free_gpu_memory_fraction",
    "fraction_of_free_after_load": "free_gpu_memory_fraction",
    "static_fraction": "mem_fraction_static",
}


__all__ = ["DEFAULT_ENGINE", "EngineKV", "engine_kv_budget", "engine_token_budget", "engine_util",
           "engine_view"]
