"""The training layout: one type, one parser for ``--layout K=V,...``, one rule list.

Every command that takes a parallel layout (``plan train``, ``memory``, ``comm traffic``,
``reliability blast-radius``) reads :class:`TrainLayout`. A layout key is declared once in
:data:`KEYS` (its parser, its range, its help); the rules a layout must satisfy for a model, a
GPU count and a batch are declared once in :data:`RULES`, each with a name. The planner applies
the rules to arrays of candidates (each rule removes the rows it rejects and is counted by
name); :func:`check` applies the same rules to one layout and stops at the first it breaks with
a one-line message naming the rule.

Ranks are numbered as Megatron-LM does: TP fastest, then CP, then DP, then PP. Expert
parallelism does not multiply the GPU count: an expert group of ``ep`` ranks is drawn from the
dp x cp ranks of one stage (from tp x dp x cp when the experts run unsplit below the tp, etp = 1:
Megatron-Core's MoE parallel folding).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ..errors import BadInput

RECOMPUTE = ("none", "selective", "full", "op")  # op: torchtitan's op-level policy
# Megatron-Core's selective recompute modules (TransformerConfig.recompute_modules, core_v0.16),
# in bit order of the planner's recompute code; no module given = its default, core_attn
RECOMPUTE_MODULES = ("core_attn", "mlp", "moe", "moe_act", "shared_experts", "layernorm",
                     "mla_up_proj")
_MOD_SPAN = 1 << len(RECOMPUTE_MODULES)


def recompute_code(mode: str, modules: tuple[str, ...] = (), layers: Any = 0) -> Any:
    """The planner's recompute code of one policy: mode index + 4 x module bits + 4 x 2^7 x
    layers (layers: the N layers per stage fully recomputed, 0 = all; an int, or an array of
    them for an array of codes)."""
    bits = sum(1 << RECOMPUTE_MODULES.index(x) for x in modules)
    return RECOMPUTE.index(mode) + 4 * bits + 4 * _MOD_SPAN * layers


# "full:min" in a framework profile's recompute_options: block recompute of the fewest layers per
# model chunk that make the layout fit, found per layout by the search from the memory model
# (planner._evaluate_two_phase, step/memory_terms.fewest_block_layers). It stands in the search's
# list of policies as this layer count, which no layout can hold (the "recompute layers" rule
# refuses it), and never reaches a priced row.
BLOCK_MIN = "min"
BLOCK_MIN_LAYERS = 1 << 16


def decode_recompute(code: Any) -> tuple[Any, Any, Any]:
    """(mode code 0-3, module bits, layers) of recompute codes (arrays or ints)."""
    return code % 4, (code // 4) % _MOD_SPAN, code // (4 * _MOD_SPAN)


def modules_of(bits: int) -> tuple[str, ...]:
    return tuple(x for i, x in enumerate(RECOMPUTE_MODULES) if int(bits) >> i & 1)


def _int(lo: int, hi: int | None = None) -> Callable[[str, str], int]:
    def parse(key: str, text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise BadInput(f"--layout {key} must be a whole number, got {text!r}") from None
        if n < lo or (hi is not None and n > hi):
            allowed = (", ".join(str(i) for i in range(lo, hi + 1)) if hi is not None
                       else f"at least {lo}")
            raise BadInput(f"--layout {key} must be {allowed}, got {n}")
        return n
    return parse


def _bool(key: str, text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "on", "yes"):
        return True
    if t in ("0", "false", "off", "no"):
        return False
    raise BadInput(f"--layout {key} must be 1 or 0 (on or off), got {text!r}")


def _recompute(key: str, text: str) -> str:
    if text not in RECOMPUTE:
        raise BadInput(f"--layout recompute must be one of {', '.join(RECOMPUTE)} (op: "
                       f"torchtitan's op-level policy), got {text!r}")
    return text


def _modules(key: str, text: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in text.replace("/", "+").split("+") if p.strip())
    bad = [x for x in names if x not in RECOMPUTE_MODULES]
    if bad or not names:
        raise BadInput(f"--layout recompute_modules must be module names joined by '+' from "
                       f"{', '.join(RECOMPUTE_MODULES)}, got {text!r}")
    return tuple(x for x in RECOMPUTE_MODULES if x in names)  # canonical order, no repeats


def recompute_spec(text: str, search: bool = False) -> dict[str, Any]:
    """A recompute policy written as one value, as a framework profile's ``recompute_options``
    and a validation row's ``recompute`` column write it: ``selective:mla_up_proj+mlp``,
    ``full:2`` (2 layers per chunk), or a plain mode -> the layout keys it sets. With
    ``search`` (a profile's options) ``full:min`` is taken too: recompute_layers
    :data:`BLOCK_MIN_LAYERS`, the search's stand-in for the fewest layers that fit."""
    mode, _, arg = text.strip().partition(":")
    out: dict[str, Any] = {"recompute": _recompute("recompute", mode)}
    if arg and mode == "selective":
        out["recompute_modules"] = _modules("recompute_modules", arg)
    elif arg and mode == "full" and arg.strip() == BLOCK_MIN:
        if not search:
            raise BadInput(f"recompute {text!r}: full:min (the fewest layers per chunk that "
                           "fit) is a search option of a framework profile, searched where the "
                           "profile offers it; a layout takes full:N, N layers per model chunk")
        out["recompute_layers"] = BLOCK_MIN_LAYERS
    elif arg and mode == "full":
        out["recompute_layers"] = _int(1)("recompute_layers", arg)
    elif arg:
        raise BadInput(f"recompute {text!r}: only selective:MODULES and full:N take a value")
    return out


def _stages(key: str, text: str) -> tuple[int, ...]:
    parts = [p for p in text.replace("+", "/").split("/") if p.strip()]
    try:
        counts = tuple(int(p) for p in parts)
    except ValueError:
        raise BadInput(f"--layout stages must be layer counts per stage joined by '/', e.g. "
                       f"stages=7/8/8/7, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise BadInput(f"--layout stages: every stage needs at least one layer, got {text!r}")
    return counts


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str, str], Any]
    help: str


# The layout keys, in the order the planner prints them. Adding a key: one line here, its field
# in TrainLayout, and its pricing where it changes a number.
KEYS: tuple[Key, ...] = (
    Key("tp", _int(1), "tensor-parallel degree"),
    Key("pp", _int(1), "pipeline stages"),
    Key("dp", _int(1), "data-parallel degree (follows from the GPU count when not given)"),
    Key("cp", _int(1), "context-parallel degree (ring attention)"),
    Key("ep", _int(1), "expert-parallel degree (MoE), drawn from dp x cp (tp x dp x cp folded)"),
    Key("etp", _int(1), "expert tensor parallelism: 1 or the tp (etp=1 < tp with ep > 1 is "
        "MoE parallel folding)"),
    Key("zero", _int(0, 3), "ZeRO stage: 1 optimizer states, 2 also gradients, 3 (FSDP) also "
        "weights"),
    Key("vpp", _int(1), "interleaved pipeline chunks per stage"),
    Key("micro_batch", _int(1), "sequences per micro-batch"),
    Key("recompute", _recompute, "activation recomputation: none, selective, full or op "
        "(selective:MODULES and full:N set recompute_modules or recompute_layers too)"),
    Key("recompute_modules", _modules, "with recompute=selective: the modules recomputed, "
        "joined by '+' (Megatron-Core --recompute-modules; default core_attn)"),
    Key("recompute_layers", _int(0), "with recompute=full: layers per model chunk (a stage "
        "with vpp 1) fully recomputed, the rest not (Megatron-Core --recompute-method block --recompute-num-layers; 0 = all)"),
    Key("sp", _bool, "sequence parallelism with TP (1 on, the default; 0 off)"),
    Key("stages", _stages, "layers per pipeline stage, first to last, e.g. 7/8/8/7 (default: "
        "the planner's balanced split)"),
    Key("adp", _bool, "serving: attention data parallelism (1: each of the tp ranks runs "
        "attention on its own batch, the experts split over ep = tp ranks)"),
)
# keys only plan serve takes (the training commands refuse them)
SERVE_ONLY = ("adp",)
KEY_NAMES = tuple(k.name for k in KEYS if k.name not in SERVE_ONLY)
# the keys the planner's search enumerates (sp and stages are fixed or derived)
SEARCHED = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch", "recompute")
# searched through the recompute code with recompute; in the JSON only where set
RECOMPUTE_KEYS = ("recompute_modules", "recompute_layers")
ALIASES = {"mb": "micro_batch", "micro-batch": "micro_batch", "microbatch": "micro_batch"}


@dataclass(frozen=True)
class TrainLayout(Mapping):
    """A complete parallel layout of one training step (per-key meaning in :data:`KEYS`).

    It reads as a mapping of its :meth:`as_dict` keys (``layout["tp"]``, ``{**layout}``), the
    form the planner's JSON and the exporters take."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None  # None: as the tp (Megatron-Core's default)
    zero: int = 0
    vpp: int = 1
    micro_batch: int = 1
    recompute: str = "none"
    recompute_modules: tuple[str, ...] = ()  # selective: () = Megatron's default, core_attn
    recompute_layers: int = 0  # full: layers per stage recomputed, 0 = all
    sp: bool = True  # sequence parallelism; only meaningful when tp > 1
    stages: tuple[int, ...] | None = None  # layers per stage; None: the balanced split

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        return self.tp if self.etp is None else self.etp

    @property
    def folded(self) -> bool:
        return self.expert_tp != self.tp

    @property
    def rc(self) -> int:
        """The recompute mode as the planner's array code (index in RECOMPUTE)."""
        return RECOMPUTE.index(self.recompute)

    @property
    def rc_code(self) -> int:
        """The whole recompute policy as one planner code (:func:`recompute_code`)."""
        return recompute_code(self.recompute, self.recompute_modules, self.recompute_layers)

    def recompute_text(self) -> str:
        """The policy in words: selective(mla_up_proj+mlp), full(2 per chunk), ..."""
        if self.recompute_modules:
            return f"{self.recompute}({'+'.join(self.recompute_modules)})"
        if self.recompute_layers:
            return f"{self.recompute}({self.recompute_layers} per chunk)"
        return self.recompute

    @classmethod
    def from_keys(cls, keys: dict[str, Any], **defaults: Any) -> TrainLayout:
        unknown = set(keys) - set(KEY_NAMES)
        if unknown:
            raise BadInput(f"--layout: unknown key {sorted(unknown)[0]!r}; keys: "
                           f"{', '.join(KEY_NAMES)}")
        return cls(**(defaults | keys))

    def as_dict(self) -> dict[str, Any]:
        """The searched keys as plain values (the planner's JSON ``layout`` and the exporters'
        input): tp, pp, dp, cp, ep, etp, zero, vpp, micro_batch, recompute; sp and stages only
        where they differ from their defaults."""
        d: dict[str, Any] = {k: getattr(self, k) for k in SEARCHED}
        d["etp"] = self.expert_tp
        if self.recompute_modules:
            d["recompute_modules"] = "+".join(self.recompute_modules)
        if self.recompute_layers:
            d["recompute_layers"] = self.recompute_layers
        if not self.sp:
            d["sp"] = False
        if self.stages is not None:
            d["stages"] = list(self.stages)
        return d

    def as_text(self) -> str:
        """The layout in ``--layout`` syntax (parse_layout reads it back)."""
        out = []
        for k, v in self.as_dict().items():
            if k == "stages":
                v = "/".join(str(x) for x in v)
            elif isinstance(v, bool):
                v = int(v)
            out.append(f"{k}={v}")
        return ",".join(out)

    def describe(self) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}", f"DP{self.dp}"]
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.folded:
            parts.append(f"ETP{self.expert_tp}")
        if self.vpp > 1:
            parts.append(f"VPP{self.vpp}")
        parts.append(f"ZeRO-{self.zero}")
        parts.append(f"mb={self.micro_batch}")
        parts.append(f"recompute={self.recompute_text()}")
        if self.tp > 1:
            parts.append("SP" if self.sp else "no-SP")
        if self.stages is not None:
            parts.append("stages=" + "/".join(str(x) for x in self.stages))
        return " ".join(parts)

    def __getitem__(self, key: str) -> Any:
        if key == "etp":
            return self.expert_tp
        if key == "recompute_modules" and self.recompute_modules:
            return "+".join(self.recompute_modules)
        if key not in KEY_NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())

    def with_(self, **kw: Any) -> TrainLayout:
        return replace(self, **kw)


def parse_layout(text: str, allowed: tuple[str, ...] = KEY_NAMES,
                 command: str = "this command") -> dict[str, Any]:
    """``tp=8,pp=16,recompute=selective`` -> {"tp": 8, "pp": 16, "recompute": "selective"}.

    Only the keys given are returned (a partial layout: a planner searches the rest). A key
    outside ``allowed`` is refused with the keys ``command`` takes."""
    out: dict[str, Any] = {}
    by_name = {k.name: k for k in KEYS}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise BadInput(f"--layout: expected key=value, got {part!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        k = ALIASES.get(k, k.replace("-", "_"))
        if k not in by_name:
            raise BadInput(f"--layout: unknown key {k!r}; keys: {', '.join(allowed)}")
        if k not in allowed:
            raise BadInput(f"--layout {k}: {command} cannot use this key; keys: "
                           f"{', '.join(allowed)}")
        if k == "recompute" and ":" in v:
            # the one-value form profiles and validation rows write (selective:mla_up_proj+mlp,
            # full:2) sets the mode and its modules or layers
            spec = recompute_spec(v)
            if set(spec) - {"recompute"} - set(allowed):
                raise BadInput(f"--layout recompute={v}: {command} cannot take recompute "
                               f"modules or layers; keys: {', '.join(allowed)}")
        else:
            spec = {k: by_name[k].parse(k, v)}
        for key, value in spec.items():
            if key in out:
                raise BadInput(f"--layout: {key} given twice")
            out[key] = value
    return out


# --- the rules ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a layout is checked against: the model, the GPU count, the batch and the schedule."""

    model: Any  # ModelSpec
    gpus: int
    global_batch: int  # sequences per step
    seq_len: int
    schedule: str = "1f1b"
    # model chunks that may hold no decoder layer (the edge-chunk split: the embedding-only
    # first chunk and the loss-only last one, frameworks.toml pipeline_split = "edge_chunks")
    edge_slots: int = 0
    # the job's framework (its split: step/shapes.split_extras) and a split given per stage for
    # every row (--layout stages), which the "recompute layers" rule bounds N by
    framework_id: str | None = None
    stages: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Rule:
    """One rule: ``ok(c, ctx)`` is True (elementwise) for the layouts it allows; ``text`` says
    what it requires. ``c`` holds arrays (or scalars) tp, pp, dp, cp, ep, etp, zero, vpp, rc,
    micro_batch and microbatches (per pipeline per step)."""

    name: str
    text: Callable[[Context], str]
    ok: Callable[[dict[str, Any], Context], Any]
    applies: Callable[[Context], bool] = lambda ctx: True
    # a search derives this key from the others; the rule then holds by construction and only
    # a pinned value is checked
    derived_key: str | None = None

    def message(self, ctx: Context) -> str:
        return f"{self.name}: {self.text(ctx)}"


def _heads_ok(c: dict[str, Any], ctx: Context) -> Any:
    m, t = ctx.model, c["tp"]
    return (m.n_heads % t == 0) & ((m.n_kv_heads % t == 0) | (t % m.n_kv_heads == 0)
                                   | (m.attention == "mla"))


def ep_from_dp_only(framework_id: str | None) -> bool:
    """The profile states the core_r0.8.0 rank grid (frameworks.toml expert_ranks =
    "dp_split": megatron-core-0.8), where EP is cut out of the DP digit alone:
    initialize_model_parallel raises unless data_parallel_size % expert_model_parallel_size ==
    0 (parallel_state.py line 442 at core_r0.8.0). Profiles that state no grid keep the rule.
    Read by the layout rule and by memory.find_min_gpus."""
    from ..specs.frameworks import get_framework

    try:
        return get_framework(framework_id).values.get("expert_ranks") == "dp_split"
    except BadInput:  # a profile from a user file: the default's rule
        return False


def _ep_from_dp_only(ctx: Context) -> bool:
    """:func:`ep_from_dp_only` of the context's framework."""
    return ep_from_dp_only(ctx.framework_id)


def _ep_group(c: dict[str, Any], ctx: Context) -> Any:
    """Ranks an expert group is drawn from: dp x cp, or tp x dp x cp when folded; dp alone
    under the core_r0.8.0 grid (:func:`_ep_from_dp_only`)."""
    dense = c["dp"] if _ep_from_dp_only(ctx) else c["dp"] * c["cp"]
    return np.where(c["etp"] == c["tp"], dense, c["tp"] * c["dp"] * c["cp"])


def _cp_balanced(ctx: Context) -> bool:
    """Whether the job's framework splits the sequence head-tail for causal load balance
    (frameworks.toml cp_load_balance, default true, as step/attention.py prices it): the
    sequence is cut into 2 x cp equal chunks (Megatron-Core get_batch_on_this_cp_rank views it
    as (2 cp, S / (2 cp)))."""
    from .step.config import profile_value

    return bool(profile_value(ctx, "cp_load_balance", True))


def _is_moe(ctx: Context) -> bool:
    return bool(ctx.model.is_moe)


RULES: tuple[Rule, ...] = (
    Rule("gpu count", lambda ctx: "tp x pp x cp must divide the GPUs",
         lambda c, ctx: ctx.gpus % (c["tp"] * c["pp"] * c["cp"]) == 0),
    Rule("gpu count", lambda ctx: f"tp x pp x dp x cp must equal {ctx.gpus}",
         lambda c, ctx: c["tp"] * c["pp"] * c["dp"] * c["cp"] == ctx.gpus, derived_key="dp"),
    Rule("divisibility", lambda ctx: f"tp must divide the {ctx.model.n_heads} attention heads "
         f"(and the {ctx.model.n_kv_heads} KV heads, or be a multiple of them)", _heads_ok),
    Rule("layers", lambda ctx: f"pp x vpp must be at most the {ctx.model.n_layers} layers"
         + (f" + {ctx.edge_slots} layer-free edge chunks" if ctx.edge_slots else ""),
         lambda c, ctx: ctx.model.n_layers + ctx.edge_slots >= c["pp"] * c["vpp"]),
    Rule("divisibility", lambda ctx: "etp must be 1 or the tp (experts split like the dense "
         "MLP)", lambda c, ctx: (c["etp"] == 1) | (c["etp"] == c["tp"]), _is_moe),
    Rule("divisibility", lambda ctx: "experts unsplit below the tp (etp = 1 < tp) are "
         "modelled with ep > 1 (MoE parallel folding)",
         lambda c, ctx: (c["etp"] == c["tp"]) | (c["ep"] > 1), _is_moe),
    Rule("divisibility", lambda ctx: f"ep must divide the {ctx.model.n_experts} experts and "
         + ("dp (the core_r0.8.0 rank grid cuts EP out of DP)" if _ep_from_dp_only(ctx)
            else "dp x cp") + " (tp x dp x cp when etp = 1)",
         lambda c, ctx: (ctx.model.n_experts % c["ep"] == 0)
         & (_ep_group(c, ctx) % c["ep"] == 0), _is_moe),
    Rule("divisibility", lambda ctx: f"{ctx.model.id} has no experts, ep must be 1",
         lambda c, ctx: c["ep"] == 1, lambda ctx: not ctx.model.is_moe),
    Rule("divisibility", lambda ctx: f"{ctx.model.id} has no experts, etp must be its tp",
         lambda c, ctx: c["etp"] == c["tp"], lambda ctx: not ctx.model.is_moe),
    Rule("sequence", lambda ctx: f"cp must divide the sequence length {ctx.seq_len}"
         + (" into 2 x cp equal chunks (the head-tail causal split: chunks r and 2cp-1-r on "
            "rank r)" if _cp_balanced(ctx) else ""),
         lambda c, ctx: ctx.seq_len % np.where((c["cp"] > 1) & _cp_balanced(ctx), 2 * c["cp"],
                                               c["cp"]) == 0),
    Rule("batch", lambda ctx: "dp x micro-batch must divide the global batch (--global-batch) "
         f"of {ctx.global_batch} sequences",
         lambda c, ctx: ctx.global_batch % (c["dp"] * c["micro_batch"]) == 0),
    Rule("pipeline", lambda ctx: "vpp > 1 needs pp > 1 and micro-batches divisible by pp",
         lambda c, ctx: (c["vpp"] == 1) | ((c["pp"] > 1)
                                           & (c["microbatches"] % np.maximum(c["pp"], 1) == 0))),
    Rule("pipeline", lambda ctx: "DualPipe needs an even number of stages, vpp = 1 and an even "
         "number of micro-batches",
         lambda c, ctx: (c["pp"] == 1) | ((c["pp"] % 2 == 0) & (c["vpp"] == 1)
                                          & (c["microbatches"] % 2 == 0)),
         lambda ctx: ctx.schedule == "dualpipe"),
    Rule("zero", lambda ctx: "ZeRO stages need dp x cp > 1",
         lambda c, ctx: (c["zero"] == 0) | (c["dp"] * c["cp"] > 1)),
    Rule("recompute", lambda ctx: "recompute=op (torchtitan's op-level policy) is modelled for "
         f"dense models without MLA; {ctx.model.id} is "
         f"{'MoE' if ctx.model.is_moe else 'MLA'}: use selective or full",
         lambda c, ctx: c["rc"] % 4 != RECOMPUTE.index("op"),
         lambda ctx: bool(ctx.model.is_moe or ctx.model.kv_lora_rank)),
    Rule("recompute modules", lambda ctx: "recompute_modules needs recompute=selective "
         "(Megatron-Core reads --recompute-modules with --recompute-granularity selective)",
         lambda c, ctx: (_rc_bits(c) == 0) | (c["rc"] % 4 == 1)),
    Rule("recompute modules", lambda ctx: f"{ctx.model.id} has no "
         f"{'experts' if not ctx.model.is_moe else 'dense MLP layers'} for the module named "
         "(mlp: dense MLP layers; moe, moe_act, shared_experts: MoE layers)",
         lambda c, ctx: _bits_ok(c, ctx, ("mlp",), _has_dense(ctx))
         & _bits_ok(c, ctx, ("moe", "moe_act"), bool(ctx.model.is_moe))
         & _bits_ok(c, ctx, ("shared_experts",), bool(ctx.model.n_shared_experts
                                                      or ctx.model.shared_ffn))),
    Rule("recompute modules", lambda ctx: f"mla_up_proj needs multi-latent attention; "
         f"{ctx.model.id} has none",
         lambda c, ctx: _bits_ok(c, ctx, ("mla_up_proj",), bool(ctx.model.kv_lora_rank))),
    Rule("recompute layers", lambda ctx: "recompute_layers needs recompute=full and at most "
         "the layers of the largest model chunk of the split (Megatron-Core's block method)",
         lambda c, ctx: _layers_ok(c, ctx)),
)


def _layers_ok(c: dict[str, Any], ctx: Context) -> Any:
    """The "recompute layers" rule: no N, or recompute=full with N at most the largest chunk."""
    n = c["rc"] // (4 * _MOD_SPAN)
    if not np.any(n):  # the split is only looked at where some row gives an N
        return n == 0
    rows = np.flatnonzero(np.atleast_1d(n))
    top = np.zeros(np.shape(np.atleast_1d(n)), dtype=np.int64)
    sub = {k: (np.atleast_1d(v)[rows] if k in ("pp", "vpp", "stages_top") else v)
           for k, v in c.items()}
    top[rows] = _chunk_top(sub, ctx)
    ok = (n == 0) | ((c["rc"] % 4 == 2) & (n <= top))
    return ok if np.ndim(n) else ok[0]


def _chunk_top(c: dict[str, Any], ctx: Context) -> Any:
    """Per row, the decoder layers of the largest model chunk of the split it builds
    (step/shapes.largest_chunk_layers): a split given for every row (ctx.stages), one given
    per row (``stages_top``: its largest count, 0 where none; or a single layout's
    ``stages``), else the planner's split at the row's pp and vpp."""
    from .step.shapes import largest_chunk_layers

    pp, vpp = np.atleast_1d(c["pp"]), np.atleast_1d(c["vpp"])
    if ctx.stages is not None:
        return largest_chunk_layers(ctx.model, ctx.framework_id, pp, vpp, ctx.stages)
    given = c.get("stages")
    if isinstance(given, tuple):
        return largest_chunk_layers(ctx.model, ctx.framework_id, pp, vpp, given)
    top = largest_chunk_layers(ctx.model, ctx.framework_id, pp, vpp)
    if "stages_top" in c:
        st = np.atleast_1d(c["stages_top"])
        top = np.where(st > 0, np.ceil(st / np.maximum(vpp, 1) - 1e-9), top)
    return top


def _rc_bits(c: dict[str, Any]) -> Any:
    return (c["rc"] // 4) % _MOD_SPAN


def _bits_ok(c: dict[str, Any], ctx: Context, names: tuple[str, ...], present: bool) -> Any:
    mask = sum(1 << RECOMPUTE_MODULES.index(x) for x in names)
    return True if present else (_rc_bits(c) & mask) == 0


def _has_dense(ctx: Context) -> bool:
    m = ctx.model
    return (not m.is_moe) or m.n_moe_layers < m.n_layers


def derived(c: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Add dp (from the GPU count) when absent and the micro-batches per pipeline per step."""
    c = dict(c)
    if "dp" not in c:
        c["dp"] = ctx.gpus // np.maximum(c["tp"] * c["pp"] * c["cp"], 1)
    per_step = np.maximum(c["dp"] * c["micro_batch"], 1)
    c["microbatches"] = ctx.global_batch // per_step
    return c


def check(lay: TrainLayout, ctx: Context) -> int:
    """Apply every rule to one layout; BadInput naming the first rule broken. Returns the
    micro-batches per pipeline per step."""
    c = {f.name: getattr(lay, f.name) for f in fields(lay)}
    c["etp"] = lay.expert_tp
    c["rc"] = lay.rc_code
    c = derived(c, ctx)
    for r in RULES:
        if r.applies(ctx) and not bool(r.ok(c, ctx)):
            raise BadInput(f"--layout {lay.as_text()}: rule {r.message(ctx)}")
    if lay.stages is not None:
        check_stages(lay.stages, lay.pp, ctx.model)
    return int(c["microbatches"])


def check_stages(stages: tuple[int, ...], pp: int, model: Any) -> None:
    """Decoder layers per stage: pp counts adding up to the model's layers, each at least 1;
    the last may be 0 where the model has multi-token-prediction modules, which that stage
    then holds with the output head (Megatron-Bridge's 'Et|(tt|)*30mL' layouts; step/shapes.py
    split_extras)."""
    mtp = bool(getattr(model, "mtp_layers", 0))
    ok_last = stages and stages[-1] >= (0 if mtp else 1)
    if (len(stages) != pp or sum(stages) != model.n_layers or min(stages[:-1] or (1,)) < 1
            or not ok_last):
        raise BadInput(f"--layout stages={'/'.join(str(s) for s in stages)}: rule stages: "
                       f"{pp} counts of at least 1 (the last at least "
                       f"{0 if mtp else 1}) adding up to the {model.n_layers} layers of "
                       f"{model.id}")
