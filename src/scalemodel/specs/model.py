"""Model architectures read from Hugging Face ``config.json`` files.

One normalised record, :class:`ModelSpec`, covers dense and MoE decoders with MHA, GQA, MQA or
MLA attention, gated (SwiGLU) or plain MLPs, tied or untied embeddings. Each supported
``model_type`` has a small reader that maps its config keys onto that record; configs are parsed
as JSON (data only) and checked for the nonsense that would make every later number wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import BadInput, close_matches
from .quant import WeightQuant, read_quantization
from .sources import cite, data_path, is_user_file, load_toml


@dataclass(frozen=True)
class ModelSpec:
    """Architecture hyper-parameters, in the symbols of docs/notation.md.

    Attention: ``n_heads`` query heads of ``head_dim``; ``n_kv_heads`` K/V heads (MHA when equal
    to n_heads, MQA when 1). MLA models (DeepSeek-V2/V3) set ``kv_lora_rank`` > 0 and cache the
    compressed latent plus the decoupled RoPE key instead of per-head K and V.
    MoE: ``n_experts`` routed experts of width ``moe_ffn``, ``top_k`` per token, ``n_shared_experts``
    always-on experts; the first ``first_dense_layers`` layers (and every layer not on the
    ``moe_every`` stride) use a dense MLP of width ``ffn``.
    """

    id: str
    family: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    max_context: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    norm: str = "rms"  # "rms" (weight only) or "layer" (weight and bias)
    qkv_bias: bool = False
    linear_bias: bool = False  # biases on every linear layer (GPT-2, OPT, NeoX)
    learned_positions: int = 0  # rows of a learned position table (GPT-2, OPT)
    dropout: bool = False  # dropout layers present in training (their masks cost memory)
    qk_norm: bool = False  # an RMSNorm over each query and key head before rotary (Qwen3)
    # MLA (DeepSeek)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # MoE
    n_experts: int = 0
    top_k: int = 0
    moe_ffn: int = 0
    n_shared_experts: int = 0
    shared_ffn: int = 0  # width of the shared expert block (0: n_shared_experts * moe_ffn)
    shared_expert_gate: bool = False
    first_dense_layers: int = 0
    moe_every: int = 1
    moe_offset: int = 0  # layer i is MoE when (i + moe_offset) % moe_every == 0 (and past the dense ones)
    router_bias: bool = False  # DeepSeek-V3's e_score_correction_bias
    expert_groups: int = 0  # n_group: experts split into groups (DeepSeek: one per node)
    groups_per_token: int = 0  # topk_group: a token's experts lie in at most this many groups
    mtp_layers: int = 0  # multi-token-prediction modules (not counted in the main model)
    # layer structure beyond Llama's
    norms_per_layer: int = 2  # input + post-attention; Gemma 2/3 add two post-norms, Falcon-7B has 1
    qk_norm_full: bool = False  # QK-norm over the whole q and k projections (OLMo 2), not per head
    # attention span: layers in ``sliding_layers`` attend to the last ``sliding_window`` tokens only,
    # so their KV cache holds at most that many tokens
    sliding_window: int = 0
    sliding_layers: tuple[int, ...] = ()
    # what bounds those layers: "window" (a sliding window: a token sees the last W tokens) or
    # "chunk" (chunked local attention, Llama 4: a token sees its own W-token chunk's earlier
    # tokens, priced as a window of W); an engine may run chunked layers over the whole context
    # and keep their whole KV (a serving profile's chunked_attention_kv)
    sliding_kind: str = "window"
    attn_softcap: float = 0.0  # tanh soft-capping of attention logits (Gemma 2), 0 = none
    final_softcap: float = 0.0  # tanh soft-capping of the output logits (Gemma 2/3), 0 = none
    quant: WeightQuant | None = None  # the checkpoint's quantization_config, priced per module
    notes: tuple[str, ...] = ()  # what the reader read and what it assumed
    source: str = ""
    origin: str = "bundled"

    @property
    def n_sliding_layers(self) -> int:
        return len(self.sliding_layers) if self.sliding_window else 0

    def kv_tokens_held(self, context: int) -> float:
        """Token-layers of KV one sequence at ``context`` tokens keeps, summed over layers:
        L_full * s + L_slide * min(s, W). Divided by L it is the mean tokens held per layer."""
        n_slide = self.n_sliding_layers
        return (self.n_layers - n_slide) * context + n_slide * min(context, self.sliding_window)

    @property
    def attention(self) -> str:
        if self.kv_lora_rank:
            return "mla"
        if self.n_kv_heads == self.n_heads:
            return "mha"
        return "mqa" if self.n_kv_heads == 1 else "gqa"

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def n_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        return sum(1 for i in range(self.n_layers) if self.layer_is_moe(i))

    def layer_is_moe(self, i: int) -> bool:
        return (
            self.is_moe
            and i >= self.first_dense_layers
            and (i + self.moe_offset) % self.moe_every == 0
        )

    @property
    def rope(self) -> bool:
        """Rotary position embedding applied to Q and K (every decoder without a learned
        position table)."""
        return self.learned_positions == 0

    @property
    def q_dim(self) -> int:
        """Width of all query heads together (n_heads * head_dim; MLA uses nope + rope dims)."""
        if self.kv_lora_rank:
            return self.n_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection output: n_kv_heads * head_dim."""
        return self.n_kv_heads * self.head_dim

    def with_overrides(self, **kw: Any) -> ModelSpec:
        return replace(self, **kw)


# --- config readers, one per model_type ---------------------------------------------------------


def _get(cfg: Mapping[str, Any], key: str, where: str, default: Any = ...) -> Any:
    if key in cfg and cfg[key] is not None:
        return cfg[key]
    if default is ...:
        raise BadInput(f"{where}: config.json is missing field {key!r}")
    return default


def _number(cfg: Mapping[str, Any], key: str, where: str, default: float = 0.0,
            whole: bool = False) -> Any:
    """An optional numeric field (a rate, a count): its value, ``default`` when absent or null,
    one line naming the key when it is not a number (a whole number where ``whole``)."""
    v = cfg.get(key)
    if v is None:
        return int(default) if whole else default
    ok = (not isinstance(v, bool) and isinstance(v, (int, float))
          and (not whole or float(v).is_integer()))
    if not ok:
        kind = "a whole number" if whole else "a number"
        raise BadInput(f"{where}: {key} must be {kind}, got {v!r}")
    return int(v) if whole else float(v)


def _sliding(cfg: Mapping[str, Any], n_layers: Any, where: str,
             pattern: Callable[[int], bool] | None = None) -> dict[str, Any]:
    """Sliding-window layers: ``layer_types`` when the config lists them, else the family's
    pattern (``pattern(i)`` true for a sliding layer), else Qwen2's ``max_window_layers`` rule,
    else every layer (Mistral v0.1, Phi-3)."""
    w = cfg.get("sliding_window")
    if w is None or w is False or cfg.get("use_sliding_window") is False:
        return {}
    if isinstance(w, bool) or not isinstance(w, int) or w <= 0:
        raise BadInput(f"{where}: sliding_window must be a positive whole number or null, got {w!r}")
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers <= 0:
        return {}  # the layer count check reports this
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            raise BadInput(f"{where}: layer_types must list one entry per layer ({n_layers})")
        bad = sorted({t for t in types if t not in ("sliding_attention", "full_attention")}, key=str)
        if bad:
            raise BadInput(f"{where}: layer_types has {bad[0]!r}; allowed: sliding_attention, "
                           "full_attention")
        layers = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    elif pattern is not None:
        layers = tuple(i for i in range(n_layers) if pattern(i))
    elif cfg.get("max_window_layers") is not None and cfg.get("use_sliding_window"):
        first = cfg["max_window_layers"]
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise BadInput(f"{where}: max_window_layers must be a whole number, got {first!r}")
        layers = tuple(range(first, n_layers))  # Qwen2: layers from max_window_layers on slide
    else:
        layers = tuple(range(n_layers))
    return {"sliding_window": w, "sliding_layers": layers} if layers else {}


def _softcap(cfg: Mapping[str, Any], key: str, where: str) -> float:
    v = cfg.get(key)
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise BadInput(f"{where}: {key} must be a positive number or null, got {v!r}")
    return float(v)


def _llama_like(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    h = _get(cfg, "hidden_size", where)
    heads = _get(cfg, "num_attention_heads", where)
    n_layers = _get(cfg, "num_hidden_layers", where)
    return dict(
        n_layers=n_layers,
        hidden=h,
        n_heads=heads,
        n_kv_heads=_get(cfg, "num_key_value_heads", where, heads),
        head_dim=_get(cfg, "head_dim", where, None),
        ffn=_get(cfg, "intermediate_size", where),
        vocab=_get(cfg, "vocab_size", where),
        max_context=_get(cfg, "max_position_embeddings", where),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=bool(cfg.get("attention_bias", False)),
        dropout=_number(cfg, "attention_dropout", where) > 0,
        **_sliding(cfg, n_layers, where),
    )


def _read_llama(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    return _llama_like(cfg, where)


def _read_qwen2(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    d["qkv_bias"] = True  # Qwen2 always has q/k/v biases
    return d


def _read_mixtral(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    d.update(
        n_experts=_get(cfg, "num_local_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where),
        moe_ffn=d["ffn"],
    )
    return d


def _read_qwen2_moe(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    d["qkv_bias"] = True
    shared = int(_get(cfg, "shared_expert_intermediate_size", where, 0))
    mlp_only = cfg.get("mlp_only_layers") or []
    if mlp_only:
        raise BadInput(f"{where}: qwen2_moe configs with mlp_only_layers are not supported yet")
    d.update(
        n_experts=_get(cfg, "num_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where),
        moe_ffn=_get(cfg, "moe_intermediate_size", where),
        n_shared_experts=1 if shared else 0,
        shared_ffn=shared,
        shared_expert_gate=bool(shared),
        moe_every=_get(cfg, "decoder_sparse_step", where, 1),
        moe_offset=1,  # Qwen2-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0
    )
    return d


def _read_qwen3(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)  # Qwen3: no q/k/v biases (attention_bias false), explicit head_dim
    d["qk_norm"] = True
    return d


def _read_qwen3_moe(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _read_qwen3(cfg, where)
    if cfg.get("mlp_only_layers"):
        raise BadInput(f"{where}: qwen3_moe configs with mlp_only_layers are not supported yet")
    d.update(
        n_experts=_get(cfg, "num_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where),
        moe_ffn=_get(cfg, "moe_intermediate_size", where),
        moe_every=_get(cfg, "decoder_sparse_step", where, 1),
        moe_offset=1,  # as Qwen2-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0
    )
    return d


def _read_deepseek_v3(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    nope = _get(cfg, "qk_nope_head_dim", where)
    rope = _get(cfg, "qk_rope_head_dim", where)
    d.update(
        head_dim=nope + rope,
        q_lora_rank=_number(cfg, "q_lora_rank", where, whole=True),
        kv_lora_rank=_get(cfg, "kv_lora_rank", where),
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=_get(cfg, "v_head_dim", where),
        n_experts=_get(cfg, "n_routed_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where),
        moe_ffn=_get(cfg, "moe_intermediate_size", where),
        n_shared_experts=_get(cfg, "n_shared_experts", where, 0),
        first_dense_layers=_get(cfg, "first_k_dense_replace", where, 0),
        moe_every=_get(cfg, "moe_layer_freq", where, 1),
        router_bias=cfg.get("topk_method") == "noaux_tc",
        expert_groups=_number(cfg, "n_group", where, whole=True),
        groups_per_token=_number(cfg, "topk_group", where, whole=True),
        mtp_layers=_number(cfg, "num_nextn_predict_layers", where, whole=True),
    )
    return d



def _read_deepseek_family(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """DeepSeek-V2 and configs that reuse DeepSeek-V3's modelling code under their own
    model_type (Kimi K2: ``kimi_k2`` with architectures DeepseekV3ForCausalLM): the same keys,
    MLA and the same routed / shared expert layout."""
    d = _read_deepseek_v3(cfg, where)
    d["notes"] = (f"model_type {cfg.get('model_type')!r} read with the DeepSeek-V3 reader (the "
                  "same MLA and MoE keys)",)
    return d


def _read_glm4_moe(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """GLM-4.5 / GLM-4.5-Air (transformers models/glm4_moe): GQA attention with q/k/v biases
    (``attention_bias``) and optional per-head QK-norm (``use_qk_norm``), the first
    ``first_k_dense_replace`` layers dense, then routed experts plus shared ones with DeepSeek-V3's
    sigmoid router and its correction bias (``e_score_correction_bias``)."""
    d = _llama_like(cfg, where)
    d.update(
        qk_norm=bool(cfg.get("use_qk_norm", False)),
        n_experts=_get(cfg, "n_routed_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where),
        moe_ffn=_get(cfg, "moe_intermediate_size", where),
        n_shared_experts=_get(cfg, "n_shared_experts", where, 0),
        first_dense_layers=_get(cfg, "first_k_dense_replace", where, 0),
        router_bias=True,
        expert_groups=_number(cfg, "n_group", where, whole=True),
        groups_per_token=_number(cfg, "topk_group", where, whole=True),
        mtp_layers=_number(cfg, "num_nextn_predict_layers" if "num_nextn_predict_layers" in cfg
                           else "num_mtp_layers", where, whole=True),
    )
    return d


def _read_gpt_oss(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """gpt-oss (transformers models/gpt_oss): every layer MoE, experts of width
    ``intermediate_size`` with biases on both projections, a router with a bias, q/k/v/o
    biases (``attention_bias``), and sliding-window (``sliding_window``) and full attention
    alternating (``layer_types``; without it the even layers slide, as GptOssConfig sets)."""
    d = _llama_like(cfg, where)
    if isinstance(d["n_layers"], int) and not isinstance(d["n_layers"], bool) and d["n_layers"] > 0:
        d.update(_sliding(cfg, d["n_layers"], where, pattern=lambda i: i % 2 == 0))
    bias = bool(cfg.get("attention_bias", True))
    d.update(
        n_experts=_get(cfg, "num_local_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where, cfg.get("experts_per_token")),
        moe_ffn=d["ffn"],
        qkv_bias=bias,
        linear_bias=True,  # the experts' gate_up_proj_bias and down_proj_bias (and o_proj's)
        router_bias=True,  # GptOssTopKRouter.bias, one per expert
        notes=("gpt-oss attention sinks (one learned logit per head and layer) are not counted: "
               f"{cfg.get('num_attention_heads', 0)} parameters a layer",),
    )
    if d["top_k"] is None:
        raise BadInput(f"{where}: config.json is missing field 'num_experts_per_tok'")
    return d


# transformers' Llama4TextConfig defaults (models/llama4/configuration_llama4.py, 5.24.0) for the
# keys that steer the layer pattern, used when a config leaves them out
_LLAMA4_PATTERN_DEFAULTS = {"interleave_moe_layer_step": 1, "no_rope_layer_interval": 4,
                            "attention_chunk_size": 8192}


def _read_llama4_text(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Llama 4 text decoder (transformers models/llama4): MoE layers on the
    ``interleave_moe_layer_step`` stride (``moe_layers`` when listed) with one shared expert of
    ``intermediate_size`` beside the routed ones, dense layers of ``intermediate_size_mlp``, and
    chunked local attention (``attention_chunk_size``) on the RoPE layers, full attention on the
    NoPE ones (``no_rope_layers``: 1 = RoPE; default every fourth layer NoPE)."""
    d = _llama_like(cfg, where)
    n = d["n_layers"]
    used = sorted(k for k in _LLAMA4_PATTERN_DEFAULTS if k not in cfg)
    cfg = {**_LLAMA4_PATTERN_DEFAULTS, **cfg}
    step = cfg["interleave_moe_layer_step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise BadInput(f"{where}: interleave_moe_layer_step must be a whole number of at least 1, "
                       f"got {step!r}")
    notes: tuple[str, ...] = ()
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        moe = cfg.get("moe_layers")
        if moe is not None and list(moe) != list(range(step - 1, n, step)):
            raise BadInput(f"{where}: llama4 moe_layers off the interleave_moe_layer_step stride are "
                           "not supported yet")
        chunk = cfg["attention_chunk_size"]
        types = cfg.get("layer_types")
        if types is not None:
            if not isinstance(types, list) or len(types) != n:
                raise BadInput(f"{where}: layer_types must list one entry per layer ({n})")
            bad = sorted({t for t in types if t not in ("chunked_attention", "full_attention")},
                         key=str)
            if bad:
                raise BadInput(f"{where}: layer_types has {bad[0]!r}; allowed: chunked_attention, "
                               "full_attention")
            chunked = tuple(i for i, t in enumerate(types) if t == "chunked_attention")
        else:
            rope = cfg.get("no_rope_layers")
            every = cfg["no_rope_layer_interval"]
            if isinstance(every, bool) or not isinstance(every, int) or every < 1:
                raise BadInput(f"{where}: no_rope_layer_interval must be a whole number of at least "
                               f"1, got {every!r}")
            if not rope:
                rope = [int((i + 1) % every != 0) for i in range(n)]
            if not isinstance(rope, list) or len(rope) != n or any(r not in (0, 1) for r in rope):
                raise BadInput(f"{where}: no_rope_layers must list 0 or 1 for each of the {n} layers")
            chunked = tuple(i for i, r in enumerate(rope) if r) if chunk else ()
        if chunked:
            if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0:
                raise BadInput(f"{where}: attention_chunk_size must be a positive whole number or "
                               f"null, got {chunk!r}")
            d.update(sliding_window=chunk, sliding_layers=chunked, sliding_kind="chunk")
            notes += (f"chunked local attention on {len(chunked)} layers (chunks of {chunk:,} "
                      "tokens): their KV is bounded by one chunk and they are priced as a sliding "
                      "window of that size (within a chunk a token attends to the chunk's earlier "
                      "tokens only, so this over-counts their attention work up to 2x)",)
    d.update(
        ffn=_get(cfg, "intermediate_size_mlp", where, d["ffn"]),
        n_experts=_get(cfg, "num_local_experts", where),
        top_k=_get(cfg, "num_experts_per_tok", where),
        moe_ffn=_get(cfg, "intermediate_size", where),
        n_shared_experts=1,
        shared_ffn=_get(cfg, "intermediate_size", where),
        moe_every=step,
        moe_offset=1,  # layer i is MoE when (i + 1) % step == 0, as Llama4TextConfig lists them
        notes=notes + ((f"config omits {', '.join(used)}: transformers' Llama4TextConfig defaults "
                        "used",) if used else ()),
    )
    return d


def _read_llama4(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        return _read_llama4_text(cfg, where)
    d = _read_llama4_text(text, where)
    d["notes"] = tuple(d.get("notes", ())) + (
        "multimodal Llama 4: the text_config decoder is counted, the vision encoder and projector "
        "are not",)
    return d


@dataclass(frozen=True)
class _ClassicKeys:
    """Where one classic decoder family (GPT-2's layout: LayerNorm, a plain two-matrix MLP, K
    and V for every head, biased linears) keeps its shape in config.json."""

    hidden: str
    heads: str
    rest: tuple[tuple[str, str], ...]  # (field, key) read in order: the first missing is named
    dropout: tuple[str, ...]  # the rates; dropout is on when any is positive
    tied: bool  # tie_word_embeddings when the config leaves it out
    qkv_bias: str = ""  # the key that switches the Q/K/V biases off ("": always on)
    linear_bias: str = ""  # the same for every linear layer
    embed_proj: str = ""  # a key that must equal hidden when set (OPT's word_embed_proj_dim)
    family: str = ""  # the family's name in the embed_proj message


_GPT2_KEYS = _ClassicKeys(
    "n_embd", "n_head",
    (("max_context", "n_positions"), ("n_layers", "n_layer"), ("vocab", "vocab_size")),
    ("attn_pdrop", "resid_pdrop"), tied=True)
_GPT_NEOX_KEYS = _ClassicKeys(
    "hidden_size", "num_attention_heads",
    (("n_layers", "num_hidden_layers"), ("ffn", "intermediate_size"), ("vocab", "vocab_size"),
     ("max_context", "max_position_embeddings")),
    ("attention_dropout", "hidden_dropout"), tied=False, qkv_bias="attention_bias")
_OPT_KEYS = _ClassicKeys(
    "hidden_size", "num_attention_heads",
    (("max_context", "max_position_embeddings"), ("n_layers", "num_hidden_layers"),
     ("ffn", "ffn_dim"), ("vocab", "vocab_size")),
    ("dropout",), tied=True, qkv_bias="enable_bias", linear_bias="enable_bias",
    embed_proj="word_embed_proj_dim", family="OPT")


def _classic(cfg: Mapping[str, Any], where: str, k: _ClassicKeys) -> dict[str, Any]:
    """The fields a classic decoder family shares, read by that family's keys."""
    h = _get(cfg, k.hidden, where)
    heads = _get(cfg, k.heads, where)
    if k.embed_proj and cfg.get(k.embed_proj, h) not in (None, h):
        raise BadInput(f"{where}: {k.family} configs with {k.embed_proj} != {k.hidden} are not "
                       "supported")
    return dict(
        hidden=h,
        n_heads=heads,
        n_kv_heads=heads,
        head_dim=None,
        **{field: _get(cfg, key, where) for field, key in k.rest},
        gated_mlp=False,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", k.tied)),
        norm="layer",
        qkv_bias=bool(cfg.get(k.qkv_bias, True)) if k.qkv_bias else True,
        linear_bias=bool(cfg.get(k.linear_bias, True)) if k.linear_bias else True,
        dropout=any(_number(cfg, r, where) > 0 for r in k.dropout),
    )


def _read_gpt2(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _classic(cfg, where, _GPT2_KEYS)
    d["ffn"] = cfg.get("n_inner") or 4 * d["hidden"]
    d["learned_positions"] = d["max_context"]
    return d


def _read_gpt_neox(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    return _classic(cfg, where, _GPT_NEOX_KEYS)  # rotary positions: no learned table


def _read_opt(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _classic(cfg, where, _OPT_KEYS)
    n = d["max_context"]
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise BadInput(f"{where}: max_position_embeddings must be a positive whole number, "
                       f"got {n!r}")
    d["learned_positions"] = n + 2  # OPT's learned table has 2 offset rows
    return d


def _read_gemma(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    d["tied_embeddings"] = bool(cfg.get("tie_word_embeddings", True))  # Gemma ties by default
    return d


def _read_gemma2(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _read_gemma(cfg, where)
    d.update(
        norms_per_layer=4,  # input, post-attention, pre-feed-forward, post-feed-forward
        attn_softcap=_softcap(cfg, "attn_logit_softcapping", where),
        final_softcap=_softcap(cfg, "final_logit_softcapping", where),
        # Gemma 2 alternates: even layers slide, odd layers attend globally
        **_sliding(cfg, d["n_layers"], where, pattern=lambda i: i % 2 == 0),
    )
    return d


# transformers' Gemma3TextConfig defaults, which a multimodal Gemma 3 config's text_config
# leaves out (transformers models/gemma3/configuration_gemma3.py)
_GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4,
                         "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096,
                         "sliding_window_pattern": 6}


def _read_gemma3_text(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _read_gemma(cfg, where)
    every = cfg.get("sliding_window_pattern", 6)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise BadInput(f"{where}: sliding_window_pattern must be a whole number of at least 1, "
                       f"got {every!r}")
    d.update(
        norms_per_layer=4,
        qk_norm=True,
        attn_softcap=_softcap(cfg, "attn_logit_softcapping", where),
        final_softcap=_softcap(cfg, "final_logit_softcapping", where),
        # Gemma 3: every ``sliding_window_pattern``-th layer is global, the others slide
        **_sliding(cfg, d["n_layers"], where, pattern=lambda i: (i + 1) % every != 0),
    )
    return d


def _read_gemma3(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        return _read_gemma3_text(cfg, where)
    filled = {**_GEMMA3_TEXT_DEFAULTS, **text}
    d = _read_gemma3_text(filled, where)
    used = sorted(k for k in _GEMMA3_TEXT_DEFAULTS if k not in text)
    d["notes"] = ("multimodal Gemma 3: the text_config decoder is counted, the vision tower and "
                  "projector are not",) + ((
        f"text_config omits {', '.join(used)}: transformers' Gemma3TextConfig defaults used",)
        if used else ())
    return d


def _read_phi3(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    # fused qkv_proj and gate_up_proj hold the same weights as Llama's separate projections
    return _llama_like(cfg, where)


def _read_falcon(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    h = _get(cfg, "hidden_size", where)
    heads = _get(cfg, "num_attention_heads", where)
    new_arch = bool(cfg.get("new_decoder_architecture", False))
    if new_arch:
        kv = _get(cfg, "num_kv_heads", where)
        norms = 2 if cfg.get("num_ln_in_parallel_attn", 2) == 2 else 1
    else:
        kv = 1 if cfg.get("multi_query", True) else heads
        norms = 1 if cfg.get("parallel_attn", True) else 2
    bias = bool(cfg.get("bias", False))
    notes = ("falcon: max_position_embeddings absent, transformers' FalconConfig default 2048 used",
             ) if "max_position_embeddings" not in cfg else ()
    if cfg.get("alibi"):
        notes += ("falcon: ALiBi positions (no rotary); elementwise costs are priced as for RoPE",)
    return dict(
        n_layers=_get(cfg, "num_hidden_layers", where),
        hidden=h,
        n_heads=heads,
        n_kv_heads=kv,
        head_dim=_get(cfg, "head_dim", where, None),
        ffn=cfg.get("ffn_hidden_size") or 4 * h,
        vocab=_get(cfg, "vocab_size", where),
        max_context=cfg.get("max_position_embeddings", 2048),
        gated_mlp=False,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        norm="layer",
        qkv_bias=bias,
        linear_bias=bias,
        norms_per_layer=norms,
        dropout=_number(cfg, "attention_dropout", where) > 0
        or _number(cfg, "hidden_dropout", where) > 0,
        notes=notes,
    )


def _read_olmo2(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    # OLMo 2 normalises after attention and after the MLP (two norms, as Llama has two), and
    # applies an RMSNorm over the whole q and k projections
    d["qk_norm"] = True
    d["qk_norm_full"] = True
    return d


def _read_granite(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    d = _llama_like(cfg, where)
    if cfg.get("mlp_bias"):
        d["linear_bias"] = True
    mult = {k: cfg[k] for k in ("embedding_multiplier", "attention_multiplier",
                                "residual_multiplier", "logits_scaling") if k in cfg}
    if mult:
        d["notes"] = ("granite scaling multipliers (no parameters): "
                      + ", ".join(f"{k} {v}" for k, v in mult.items()),)
    return d


_READERS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "llama": _read_llama,
    "mistral": _read_llama,
    "qwen2": _read_qwen2,
    "mixtral": _read_mixtral,
    "qwen2_moe": _read_qwen2_moe,
    "qwen3": _read_qwen3,
    "qwen3_moe": _read_qwen3_moe,
    "deepseek_v3": _read_deepseek_v3,
    "deepseek_v2": _read_deepseek_family,
    "kimi_k2": _read_deepseek_family,
    "glm4_moe": _read_glm4_moe,
    "gpt_oss": _read_gpt_oss,
    "llama4": _read_llama4,
    "llama4_text": _read_llama4_text,
    "gpt2": _read_gpt2,
    "gpt_neox": _read_gpt_neox,
    "opt": _read_opt,
    "gemma": _read_gemma,
    "gemma2": _read_gemma2,
    "gemma3": _read_gemma3,
    "gemma3_text": _read_gemma3_text,
    "phi3": _read_phi3,
    "falcon": _read_falcon,
    "olmo2": _read_olmo2,
    "granite": _read_granite,
}
# older Falcon checkpoints name their model_type after the RefinedWeb code
_ALIASES = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon"}


class _Recording(Mapping[str, Any]):
    """A config that remembers which keys a reader looked at (for the generic reader's notes)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self._cfg, self.read = cfg, set()

    def __getitem__(self, k: str) -> Any:
        self.read.add(k)
        return self._cfg[k]

    def __contains__(self, k: object) -> bool:
        if isinstance(k, str):
            self.read.add(k)
        return k in self._cfg

    def __iter__(self) -> Any:
        return iter(self._cfg)

    def __len__(self) -> int:
        return len(self._cfg)


GENERIC_ASSUMPTIONS = (
    "a Llama-style pre-norm decoder: two RMSNorms per layer and a final one, each a weight only",
    "a gated (SwiGLU-style) MLP of three projections of intermediate_size",
    "rotary positions (no learned position table), no QK-norm",
    "K/V heads = num_attention_heads when num_key_value_heads is absent; head_dim = "
    "hidden_size / num_attention_heads when head_dim is absent",
    "untied embeddings when tie_word_embeddings is absent; biases only where attention_bias / "
    "mlp_bias say so",
    "sliding_window (when set) applies to every layer unless layer_types says which",
)


def _read_generic(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Any decoder-only config with the standard keys, read as a Llama-style decoder."""
    if cfg.get("is_encoder_decoder"):
        raise BadInput(f"{where}: model_type {cfg.get('model_type')!r} is an encoder-decoder; "
                       "only decoder-only configs are read")
    arch = cfg.get("architectures") or []
    if isinstance(arch, list) and arch and not any(
            isinstance(a, str) and a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration"))
            for a in arch):
        raise BadInput(f"{where}: architectures {arch!r} name no causal language model; only "
                       "decoder-only configs are read")
    for k in ("num_local_experts", "num_experts", "n_routed_experts", "kv_lora_rank"):
        if cfg.get(k):
            raise BadInput(f"{where}: model_type {cfg.get('model_type')!r} has {k} (MoE or MLA), "
                           "which the generic reader cannot price; supported: "
                           f"{', '.join(supported_families())}")
    rec = _Recording(cfg)
    try:
        d = _llama_like(rec, where)
    except BadInput as e:
        raise BadInput(f"{e} (model_type {cfg.get('model_type')!r} has no dedicated reader; the "
                       "generic reader needs the standard keys)") from None
    if cfg.get("mlp_bias"):
        d["linear_bias"] = True
    rec.read.add("mlp_bias")
    read = sorted(k for k in rec.read if k in cfg)
    d["notes"] = (f"generic reader (no dedicated reader for model_type {cfg.get('model_type')!r}); "
                  f"keys read: {', '.join(read)}",) + tuple(
        f"assumed: {a}" for a in GENERIC_ASSUMPTIONS)
    return d


def supported_families() -> list[str]:
    return list(_READERS)


def from_hf_config(cfg: Mapping[str, Any], model_id: str, where: str, source: str = "") -> ModelSpec:
    """Normalise one HF config dict; BadInput names the first problem found.

    A ``model_type`` without a dedicated reader goes to the generic reader, which says in the
    model's notes which keys it read and what it assumed."""
    if not isinstance(cfg, Mapping):
        raise BadInput(f"{where}: config.json must hold a JSON object")
    family = cfg.get("model_type")
    if not isinstance(family, str) or not family:
        raise BadInput(f"{where}: config.json has no model_type string; supported: "
                       f"{', '.join(supported_families())} or any decoder-only config with the "
                       "standard keys")
    family = _ALIASES.get(family, family)
    reader = _READERS.get(family, _read_generic)
    try:
        d = reader(cfg, where)
    except BadInput:
        raise
    except (TypeError, ValueError) as e:
        # a field of the wrong JSON type met by a reader's arithmetic (OPT's text
        # max_position_embeddings + 2): one line, not a traceback
        raise BadInput(f"{where}: config.json (model_type {family}) has a field of the wrong "
                       f"type: {e}") from None
    quant, qnotes = read_quantization(cfg, where)
    notes = tuple(d.pop("notes", ())) + qnotes
    if d.get("sliding_window") and not any(n.startswith("chunked local attention") for n in notes):
        n_s = len(d["sliding_layers"])
        notes += (f"sliding-window attention: {n_s} of {d['n_layers']} layers attend to the last "
                  f"{d['sliding_window']:,} tokens (their KV is bounded by that window)",)
    caps = [f"{k} {d[k]:g}" for k in ("attn_softcap", "final_softcap") if d.get(k)]
    if caps:
        notes += (f"logit soft-capping (tanh): {', '.join(caps)}; no parameters, elementwise only",)
    for k in ("n_layers", "hidden", "n_heads", "n_kv_heads", "ffn", "vocab", "max_context"):
        v = d[k]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise BadInput(f"{where}: {k} must be a positive whole number, got {v!r}")
    if d["head_dim"] is None:
        if d["hidden"] % d["n_heads"]:
            raise BadInput(
                f"{where}: num_attention_heads ({d['n_heads']}) does not divide hidden_size "
                f"({d['hidden']})"
            )
        d["head_dim"] = d["hidden"] // d["n_heads"]
    if d["n_heads"] % d["n_kv_heads"]:
        raise BadInput(
            f"{where}: num_key_value_heads ({d['n_kv_heads']}) does not divide "
            f"num_attention_heads ({d['n_heads']})"
        )
    hd = d["head_dim"]
    if isinstance(hd, bool) or not isinstance(hd, int) or hd <= 0:
        raise BadInput(f"{where}: head_dim must be a positive whole number, got {hd!r}")
    every = d.get("moe_every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise BadInput(f"{where}: the MoE layer stride (decoder_sparse_step / moe_layer_freq) "
                       f"must be a whole number of at least 1, got {every!r}")
    for k in ("n_experts", "top_k", "moe_ffn", "kv_lora_rank", "q_lora_rank"):
        v = d.get(k, 0)
        if not isinstance(v, int) or v < 0:
            raise BadInput(f"{where}: {k} must be a non-negative whole number, got {v!r}")
    if d.get("n_experts") and not 0 < d.get("top_k", 0) <= d["n_experts"]:
        raise BadInput(f"{where}: experts per token must be between 1 and the number of experts")
    return ModelSpec(id=model_id, family=family, source=source, origin=where, quant=quant,
                     notes=notes, **d)


# --- the catalogue ------------------------------------------------------------------------------


@cache
def _catalogue() -> dict[str, Mapping[str, Any]]:
    return load_toml("models.toml")


def model_ids() -> list[str]:
    return list(_catalogue())


def model_info(model_id: str) -> Mapping[str, Any]:
    """The models.toml entry (hf repo, sources, published parameter counts) of a bundled model."""
    return _catalogue().get(model_id, {})


def get_model(name: str) -> ModelSpec:
    """A bundled model id (``llama-3-70b``) or a path to any supported ``config.json``."""
    p = Path(name)
    # a bundled id wins over a stray file of the same name in the working directory
    if name.lower() not in _catalogue() and (name.endswith(".json") or is_user_file(name)):
        if not is_user_file(name):
            raise BadInput(f"--model: no such file {name!r}")
        from .bounds import read_model_config  # size, depth and every number bounded

        cfg = read_model_config(p, "--model")
        mid = (p.parent.name or p.stem) if p.name == "config.json" else p.stem
        return from_hf_config(cfg, mid, where=name, source=f"user file {name}")
    key = name.lower()
    if key not in _catalogue():
        hint = close_matches(key, model_ids()) or ", ".join(model_ids())
        raise BadInput(
            f"--model: unknown model {name[:80]!r}; did you mean: {hint}? (or pass a config.json path)"
        )
    return _bundled_model(key)


@cache
def _bundled_model(key: str) -> ModelSpec:
    info = _catalogue()[key]
    cfg = json.loads(data_path(f"models/{key}.json").read_text())
    return from_hf_config(cfg, key, where=f"models/{key}.json", source=cite(info.get("source", key)))
