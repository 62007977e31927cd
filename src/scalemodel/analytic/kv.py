"""KV-cache bytes and serving capacity.

Two paths share these formulas:

* the functions on plain numbers and numpy arrays (``kv_bytes_per_token``, ``capacity_rows``)
  evaluate many configurations at once for sweeps and the planner;
* :func:`kv_report` evaluates one configuration as a :class:`~scalemodel.derive.Derivation`
  whose steps *are* the computation, and checks itself against the vectorised path.

Symbols (docs/notation.md): L layers, h_kv K/V heads, d_h head dim, e_kv bytes per cached
element, r_kv MLA latent rank, d_rope MLA decoupled RoPE key dim, t TP degree, p PP degree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, assumption, dtype
from .params import count_params, shard_params
from .weights import weight_bytes


def kv_bytes_per_token(n_layers: Any, n_kv_heads: Any, head_dim: Any, elem_bytes: Any) -> Any:
    """K and V for one token in every layer: 2 * L * h_kv * d_h * e_kv (MHA/GQA/MQA)."""
    return 2 * n_layers * n_kv_heads * head_dim * elem_bytes


def mla_bytes_per_token(n_layers: Any, kv_lora_rank: Any, rope_dim: Any, elem_bytes: Any) -> Any:
    """MLA caches one latent plus one RoPE key per layer, shared by all heads: L*(r_kv+d_rope)*e."""
    return n_layers * (kv_lora_rank + rope_dim) * elem_bytes


def kv_heads_per_gpu(n_kv_heads: Any, tp: Any) -> Any:
    """K/V heads stored on one TP rank: h_kv / t, or 1 (replicated) when t > h_kv."""
    return np.maximum(1, np.floor_divide(n_kv_heads, tp))


def model_kv_bytes_per_token(m: ModelSpec, kv_dtype: str = "bf16") -> float:
    e = dtype(kv_dtype, "--kv-dtype").bytes
    if m.attention == "mla":
        return float(mla_bytes_per_token(m.n_layers, m.kv_lora_rank, m.qk_rope_head_dim, e))
    return float(kv_bytes_per_token(m.n_layers, m.n_kv_heads, m.head_dim, e))


def model_kv_bytes_per_sequence(m: ModelSpec, context: float, kv_dtype: str = "bf16") -> float:
    """KV bytes one sequence of ``context`` tokens keeps: sliding-window layers hold at most
    their window, b_tok / L * ((L - L_w) * s + L_w * min(s, W))."""
    per_tok = model_kv_bytes_per_token(m, kv_dtype)
    if not m.n_sliding_layers:
        return per_tok * context
    return per_tok / m.n_layers * m.kv_tokens_held(int(context))


def check_tp(m: ModelSpec, tp: int, pp: int = 1) -> None:
    """TP must split attention heads evenly, and K/V heads evenly or by whole replication."""
    if tp < 1 or pp < 1:
        raise BadInput(f"--tp and --pp must be at least 1 (got tp={tp}, pp={pp})")
    if m.n_heads % tp:
        raise BadInput(f"--tp {tp} does not divide the {m.n_heads} attention heads of {m.id}")
    if m.attention != "mla" and m.n_kv_heads % tp and tp % m.n_kv_heads:
        raise BadInput(
            f"--tp {tp} neither divides nor is a multiple of the {m.n_kv_heads} K/V heads of {m.id}"
        )
    if pp > m.n_layers:
        raise BadInput(f"--pp {pp} exceeds the {m.n_layers} layers of {m.id}")


@dataclass(frozen=True)
class KVReport:
    """The KV-cache answer for one configuration (all bytes; JSON keys are public)."""

    model: str
    gpu: str | None
    kv_dtype: str
    weight_dtype: str
    context: int
    batch: int
    tp: int
    pp: int
    attention: str
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_bytes_per_sequence: float
    sliding_window: int  # 0: every layer attends to the whole context
    sliding_layers: int  # layers whose KV the window bounds
    kv_bytes_total: float
    weights_bytes: float  # whole model
    weights_bytes_per_gpu: float
    reserve_bytes_per_gpu: float | None
    kv_budget_bytes_per_gpu: float | None
    max_tokens: int | None  # KV tokens that fit per model replica (all its GPUs together)
    max_concurrent_sequences: int | None
    fits_batch: bool | None
    warnings: tuple[str, ...]
    derivation: Derivation
    # the serving engine whose KV accounting gave the capacity (None: --reserve, or no GPU)
    engine: Any = None  # serving_memory.EngineKV

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("derivation", "engine")}
        d["warnings"] = list(self.warnings)
        d["derivation"] = self.derivation.to_dict()
        d["framework"] = self.engine.engine if self.engine is not None else None
        d["engine"] = self.engine.to_dict() if self.engine is not None else None
        return d


def kv_report(
    m: ModelSpec,
    *,
    gpu: GPUSpec | None = None,
    context: int = 4096,
    batch: int = 1,
    tp: int = 1,
    pp: int = 1,
    kv_dtype: str = "bf16",
    weight_dtype: str = "bf16",
    utilization: float | None = None,
    reserve_bytes: float | None = None,
    block_tokens: int | None = None,
    engine: str | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> KVReport:
    """KV bytes per token, sequence and batch; with a GPU, the KV pool a serving engine sizes
    there (``engine``, default the serving default profile: analytic/serving_memory.py), or
    with ``reserve_bytes`` the simple budget ``M * u - W_gpu - R``."""
    if context <= 0:
        raise BadInput(f"--context must be a positive number of tokens, got {context}")
    if batch <= 0:
        raise BadInput(f"--batch must be a positive number of sequences, got {batch}")
    check_tp(m, tp, pp)
    warnings: list[str] = []
    view_note = ""
    if gpu is not None and reserve_bytes is None:
        # the model as the engine's KV cache keeps it (chunked layers whole where it says so)
        from .serving_memory import DEFAULT_ENGINE, engine_view

        m, view_note = engine_view(m, engine or DEFAULT_ENGINE)
    if context > m.max_context:
        warnings.append(
            f"context {context:,} exceeds {m.id}'s max_position_embeddings {m.max_context:,}; "
            "computed anyway (the model needs RoPE scaling or will degrade)"
        )
    e = dtype(kv_dtype, "--kv-dtype")
    ew = dtype(weight_dtype, "--dtype")
    src = m.source
    d = Derivation(f"KV cache of {m.id}")
    for n in m.notes:
        d.note(f"{m.id}: {n}")
    if view_note:
        d.note(view_note)
    d.given("layers", "L", m.n_layers, "1", src)
    if m.attention == "mla":
        d.given("MLA latent rank (kv_lora_rank)", "r_kv", m.kv_lora_rank, "1", src)
        d.given("decoupled RoPE key dim", "d_rope", m.qk_rope_head_dim, "1", src)
        d.given(f"bytes per {e.name} element", "e_kv", e.bytes, "B", e.source)
        per_tok = d.calc(
            "KV bytes per token (latent + RoPE key, shared by all heads)",
            "b_tok",
            "L * (r_kv + d_rope) * e_kv",
            "B",
            check=model_kv_bytes_per_token(m, kv_dtype),
        )
        d.note("MLA's latent is not split by attention TP: every TP rank holds the whole latent.")
        d.given("tensor-parallel degree", "t", tp, "1")
        d.given("pipeline-parallel degree", "p", pp, "1")
        per_gpu_tok = d.calc(
            "KV bytes per token per GPU (TP does not split the latent)",
            "b_gpu",
            "ceil(L / p) * (r_kv + d_rope) * e_kv",
            "B",
        )
    else:
        d.given(f"K/V heads ({m.attention.upper()})", "h_kv", m.n_kv_heads, "1", src)
        d.given("head dim", "d_h", m.head_dim, "1", src)
        d.given(f"bytes per {e.name} element", "e_kv", e.bytes, "B", e.source)
        per_tok = d.calc(
            "KV bytes per token (K and V, every layer)",
            "b_tok",
            "2 * L * h_kv * d_h * e_kv",
            "B",
            check=model_kv_bytes_per_token(m, kv_dtype),
        )
        d.given("tensor-parallel degree", "t", tp, "1")
        d.given("pipeline-parallel degree", "p", pp, "1")
        if tp > m.n_kv_heads:
            d.note(
                f"t = {tp} > h_kv = {m.n_kv_heads}: each K/V head is replicated on "
                f"{tp // m.n_kv_heads} ranks, so a rank still holds one whole head."
            )
        per_gpu_tok = d.calc(
            "KV bytes per token per GPU",
            "b_gpu",
            "2 * ceil(L / p) * max(1, h_kv // t) * d_h * e_kv",
            "B",
        )
    d.given("context length", "s", context, "token")
    d.given("batch (concurrent sequences)", "B", batch, "seq")
    sliding = m.n_sliding_layers > 0
    if sliding:
        d.given("sliding-window layers (their KV holds at most W tokens)", "L_w",
                m.n_sliding_layers, "1", src)
        d.given("sliding window", "W", m.sliding_window, "token", src)
        per_seq = d.calc("KV bytes per sequence (full layers keep s tokens, sliding ones min(s, W))",
                         "b_seq", "b_tok / L * ((L - L_w) * s + L_w * min(s, W))", "B",
                         check=model_kv_bytes_per_sequence(m, context, kv_dtype))
        d.calc("KV bytes per GPU per token of context, averaged over the window bound", "b_eff",
               "b_gpu * b_seq / (b_tok * s)", "B",
               note="the stage's layers are taken to mix sliding and full layers as the model does")
    else:
        per_seq = d.calc("KV bytes per sequence", "b_seq", "b_tok * s", "B")
    total = d.calc("KV bytes for the batch (whole model)", "b_kv", "b_seq * B", "B")

    pc = count_params(m)
    d.given("parameters (exact count from the config)", "P", pc.total, "1", src)
    d.given(f"bytes per {ew.name} weight", "e_w", ew.bytes, "B", ew.source)
    sp = shard_params(pc, tp, pp)
    if m.quant is None:
        weights = d.calc("weight bytes (whole model)", "W", "P * e_w", "B")
        d.given(
            f"parameters on one GPU (heaviest of {pp} stage(s), TP {tp})", "P_gpu", sp.total, "1",
            note="norm weights are replicated on every TP rank; embeddings are vocab-parallel",
        )
        w_gpu = d.calc("weight bytes per GPU", "W_gpu", "P_gpu * e_w", "B")
    else:
        wb = weight_bytes(m, ew.bytes)
        weights = d.given(f"weight bytes (whole model), each module priced as stored "
                          f"({m.quant.label})", "W", wb.total, "B", src,
                          note="quantized linear weights with their scales; embeddings, norms, "
                               "biases, routers and ignored modules at e_w")
        w_gpu = d.given(f"weight bytes on one GPU (heaviest of {pp} stage(s), TP {tp})", "W_gpu",
                        shard_params(wb, tp, pp).total, "B",
                        note="the same sharding rules as the parameter count, applied to bytes")

    reserve = budget = max_tok = max_seq = fits = eng = None
    if gpu is not None and reserve_bytes is None:
        from .serving_memory import DEFAULT_ENGINE, engine_kv_budget

        eng = engine_kv_budget(m, gpu, tp=tp, pp=pp, weight_dtype=weight_dtype,
                               kv_dtype=kv_dtype, engine_id=engine or DEFAULT_ENGINE,
                               util=utilization, max_model_len=context,
                               max_num_seqs=max_num_seqs,
                               max_num_batched_tokens=max_num_batched_tokens,
                               block_size=block_tokens)
        d.note(f"Capacity on {tp * pp} x {gpu.id}: the KV pool {eng.engine_name} "
               f"{eng.engine_version} allocates (its own derivation follows).")
        reserve = eng.profile_activation_bytes + eng.non_torch_bytes + eng.cuda_graph_bytes
        budget = eng.kv_budget_bytes
        max_tok = eng.max_tokens if budget > 0 else 0
        max_seq = max_tok // context
        if not eng.fits:
            warnings.append(eng.lacks)
        fits = bool(max_seq >= batch)
    elif gpu is not None:
        util_a = assumption("gpu_memory_utilization")
        u = util_a.value if utilization is None else utilization
        if not 0 < u <= 1:
            raise BadInput(f"--util must be in (0, 1], got {u}")
        d.given(f"{gpu.name} memory", "M", gpu.hbm_bytes, "B", gpu.source_of("hbm_bytes"))
        d.given("memory fraction the engine may use", "u", u, "1",
                util_a.source if utilization is None else "--util")
        reserve = d.given("runtime reserve per GPU", "R", reserve_bytes, "B", "--reserve")
        budget = d.calc("KV budget per GPU", "K_gpu", "M * u - W_gpu - R", "B")
        if budget <= 0:
            warnings.append(
                f"weights ({w_gpu / 1e9:.1f} GB/GPU) and reserve leave no room for KV on "
                f"{tp * pp} x {gpu.id}; raise --tp/--pp or use a smaller --dtype"
            )
            max_tok, max_seq = 0, 0
            d.note("The budget is negative: the weights alone do not fit at this layout.")
        else:
            blk_a = assumption("kv_block_tokens")
            bt = int(blk_a.value if block_tokens is None else block_tokens)
            d.given("KV block (page) size", "k_blk", bt, "token",
                    blk_a.source if block_tokens is None else "--block")
            per = "b_eff" if sliding else "b_gpu"
            max_tok = int(d.calc("KV tokens that fit (whole blocks)", "N_tok",
                                 f"floor(K_gpu / ({per} * k_blk)) * k_blk", "token"))
            max_seq = int(d.calc(f"concurrent sequences at {context:,} tokens", "N_seq",
                                 "floor(N_tok / s)", "seq"))
        fits = bool(max_seq is not None and max_seq >= batch)
    return KVReport(
        model=m.id, gpu=gpu.id if gpu else None, kv_dtype=e.name, weight_dtype=ew.name,
        context=context, batch=batch, tp=tp, pp=pp, attention=m.attention,
        kv_bytes_per_token=float(per_tok), kv_bytes_per_token_per_gpu=float(per_gpu_tok),
        kv_bytes_per_sequence=float(per_seq), kv_bytes_total=float(total),
        sliding_window=m.sliding_window if sliding else 0, sliding_layers=m.n_sliding_layers,
        weights_bytes=float(weights), weights_bytes_per_gpu=float(w_gpu),
        reserve_bytes_per_gpu=reserve, kv_budget_bytes_per_gpu=budget,
        max_tokens=max_tok, max_concurrent_sequences=max_seq, fits_batch=fits,
        warnings=tuple(warnings), derivation=d, engine=eng,
    )


# --- vectorised path ------------------------------------------------------------------------------


def capacity_rows(
    kv_per_token: np.ndarray,
    weights_per_gpu: np.ndarray,
    hbm_bytes: np.ndarray,
    utilization: np.ndarray,
    reserve_bytes: np.ndarray,
    context: np.ndarray,
    block_tokens: int = 16,
) -> tuple[np.ndarray, np.ndarray]:
    """(max_tokens, max_concurrent_sequences) for many rows at once; 0 where nothing fits.

    ``kv_per_token`` is per GPU. Same formulas as :func:`kv_report`.
    """
    budget = hbm_bytes * utilization - weights_per_gpu - reserve_bytes
    tokens = np.floor(np.maximum(budget, 0) / (kv_per_token * block_tokens)) * block_tokens
    return tokens, np.floor(tokens / context)


def mitigation_table(m: ModelSpec, context: int, batch: int) -> list[tuple[str, float, float]]:
    """KV bytes per token and for the batch under common mitigations of the same model.

    Rows: the model as configured, then the same layer count and head dim with MHA, GQA-8, MQA,
    and the model's own attention with fp8 and int4 caches. Each row is computed by the formula,
    not scaled from another row.
    """
    rows: list[tuple[str, float, float]] = []
    L, d = m.n_layers, m.head_dim

    def add(label: str, per_tok: float) -> None:
        rows.append((label, per_tok, per_tok * context * batch))

    add(f"{m.id} as configured ({m.attention}, bf16)", model_kv_bytes_per_token(m, "bf16"))
    if m.attention != "mla":
        add(f"MHA ({m.n_heads} K/V heads), bf16", kv_bytes_per_token(L, m.n_heads, d, 2))
        if m.n_heads >= 8:
            add("GQA with 8 K/V heads, bf16", kv_bytes_per_token(L, 8, d, 2))
        add("MQA (1 K/V head), bf16", kv_bytes_per_token(L, 1, d, 2))
    add(f"{m.attention}, fp8 cache", model_kv_bytes_per_token(m, "fp8"))
    add(f"{m.attention}, int4 cache", model_kv_bytes_per_token(m, "int4"))
    return rows


__all__ = [
    "KVReport",
    "capacity_rows",
    "check_tp",
    "kv_bytes_per_token",
    "kv_heads_per_gpu",
    "kv_report",
    "mitigation_table",
    "mla_bytes_per_token",
    "model_kv_bytes_per_sequence",
    "model_kv_bytes_per_token",
]
