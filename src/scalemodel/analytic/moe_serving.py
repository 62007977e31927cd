"""MoE serving under a latency SLA: attention TP/DP, expert parallelism and redundant experts per
phase, the per-layer timeline and the all-to-all tail.

Per MoE layer and GPU (tokens n per GPU per forward, DP attention groups of t GPUs):

* attention: roofline time max(FLOPs / (pi eff_c), bytes / (beta eff_m)) of the projections
  (weights / t) and the core attention (decode: the whole KV read; MLA's latent is not split by
  TP, GQA heads are), plus a TP all-reduce of the output when t > 1;
* dispatch all-to-all: n k h bytes (FP8) leave each GPU, the busiest GPU receives
  recv_max h bytes; remote copies cross the scale-out NIC, the rest NVLink;
* expert GEMMs: the busiest GPU's routed copies recv_max x 2 P_x FLOPs, and its m = (E + R) / EP
  experts' weights read once;
* combine all-to-all: the same copies back in BF16 (2 bytes);
* shared experts and dense layers: like attention projections, per GPU for its own tokens.

With two micro-batches overlapped (DeepSeek's dual-batch overlap in prefill and its decode
pipeline), a layer costs max(compute, communication); without, their sum.

recv_max is the tail: expert popularity is Zipf(s) per layer (a random permutation per layer),
placed with our planner (``moe_placement``) with R redundant slots; each Monte Carlo draw routes
n x EP x k copies multinomially, spreads each expert's copies evenly over its replicas and takes
the busiest GPU. Per-token latency sums independent layers; p50 and p99 over draws.

The all-to-all cost sits behind :func:`alltoall_time_s` (alpha-beta with links.toml figures)
so that it can be replaced by the collectives engine (scalemodel.analytic.collectives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import numpy as np

from ..derive import Derivation
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, dtype, get_link
from ..specs.sources import cite, load_toml
from .kv import model_kv_bytes_per_token
from .moe_placement import _global_plan
from .params import attention_params, count_params, mlp_params


@cache
def moe_constants() -> dict[str, Any]:
    return load_toml("moe.toml")


def constant(name: str) -> tuple[float, str]:
    """(value, citation) of a [serving.*] figure in moe.toml."""
    t = moe_constants()["serving"][name]
    return float(t["value"]), cite(t["source"])


# --- the all-to-all, alpha-beta ----------------------------------------------------------------


def alltoall_time_s(send_bytes: Any, recv_bytes: Any, ranks: int, ranks_per_node: int,
                    gpu: GPUSpec) -> Any:
    """Time of one all-to-all step (dispatch or combine) for one GPU, vectorised over bytes.

    A share (ranks - ranks_per_node) / ranks of the traffic (uniform destinations) crosses the
    GPU's scale-out NIC, the rest its scale-up link; the two proceed in parallel and the larger
    of send and receive volume counts (full duplex). Time = overhead + link latency +
    max(remote bytes / (NIC bandwidth x measured efficiency), local bytes / scale-up bandwidth).
    Replace with scalemodel.analytic.collectives once merged.
    """
    over, _ = constant("alltoall_overhead_s")
    vol = np.maximum(send_bytes, recv_bytes)
    if ranks <= 1:
        return np.zeros_like(np.asarray(vol, dtype=np.float64))
    rpn = min(ranks_per_node, ranks)
    remote = (ranks - rpn) / ranks
    local = (rpn - 1) / ranks
    out_link = gpu.interconnect.get("scale_out_link", "ndr-400")
    ln = get_link(out_link)
    nic_bw = ln.bytes_per_s_per_direction * float(ln.extra.get("efficiency_measured", 1.0))
    nic_bw *= float(gpu.interconnect.get("nics_per_gpu", 1))
    up_bw = gpu.scale_up_bytes_per_s or ln.bytes_per_s_per_direction
    lat = ln.latency_s if remote > 0 else 0.6e-6
    return over + lat + np.maximum(vol * remote / nic_bw, vol * local / up_bw)


# --- model pieces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    L: int
    L_moe: int
    E: int
    k: int
    h: int
    P_x: float  # one routed expert
    P_shared: float  # shared experts of one MoE layer
    P_dense_mlp: float  # dense MLP of one dense layer
    P_attn: float  # attention projections of one layer
    attn_flops_per_ctx: float  # core attention FLOPs per (query token, key token), all heads
    kv_tok_layer: float  # KV bytes per token per layer
    kv_split: int  # how many ways TP can split the KV (1 for MLA, n_kv_heads for GQA)
    P_embed_head: float


def _model(m: ModelSpec, kv_dtype: str) -> _Model:
    if not m.is_moe:
        raise BadInput(f"--model: {m.id} is not a mixture-of-experts model (no routed experts)")
    pc = count_params(m)
    attn, _ = attention_params(m)
    moe_layer = next(lp for i, lp in enumerate(pc.layers) if m.layer_is_moe(i))
    dense_layers = [lp for i, lp in enumerate(pc.layers) if not m.layer_is_moe(i)]
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim if m.kv_lora_rank else m.head_dim
    v = m.v_head_dim if m.kv_lora_rank else m.head_dim
    kv_tok = model_kv_bytes_per_token(m, kv_dtype)
    return _Model(
        L=m.n_layers, L_moe=m.n_moe_layers, E=m.n_experts, k=m.top_k, h=m.hidden,
        P_x=float(moe_layer.expert_one), P_shared=float(moe_layer.shared),
        P_dense_mlp=float(mlp_params(m, m.ffn)) if dense_layers else 0.0,
        P_attn=float(attn), attn_flops_per_ctx=2.0 * m.n_heads * (qk + v),
        kv_tok_layer=kv_tok / m.n_layers,
        kv_split=1 if m.kv_lora_rank else max(1, m.n_kv_heads),
        P_embed_head=float(pc.embedding + pc.lm_head),
    )


# --- Monte Carlo of the routed load --------------------------------------------------------------


def zipf_popularity(E: int, s: float, patterns: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.arange(1, E + 1, dtype=np.float64) ** -s
    p /= p.sum()
    return np.stack([p[rng.permutation(E)] for _ in range(patterns)])


@cache
def _plans(E: int, s: float, ep: int, redundant: int, patterns: int, seed: int
           ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    pop = zipf_popularity(E, s, patterns, seed)
    plans = tuple(_global_plan(row, E + redundant, ep) for row in pop)
    return pop, plans


@lru_cache(maxsize=4096)
def recv_tail(E: int, k: int, ep: int, redundant: int, tokens_per_gpu: int, s: float, *,
              draws: int = 256, patterns: int = 4, seed: int = 0) -> np.ndarray:
    """Routed copies received by the busiest GPU, one value per draw (draws of layers)."""
    pop, plans = _plans(E, s, ep, redundant, patterns, seed)
    rng = np.random.default_rng(seed + 7)
    n_copies = tokens_per_gpu * ep * k
    out = np.empty(draws)
    per = draws // patterns
    for i, (p, plan) in enumerate(zip(pop, plans, strict=True)):
        cnt = np.bincount(plan, minlength=E)
        cnts = rng.multinomial(n_copies, p, size=per if i < patterns - 1 else draws - per * i)
        piece = cnts[:, plan] / cnt[plan]
        gpu = piece.reshape(piece.shape[0], ep, -1).sum(axis=2)
        out[i * per: i * per + piece.shape[0]] = gpu.max(axis=1)
    return out


# --- one configuration --------------------------------------------------------------------------


@dataclass(frozen=True)
class PhasePlan:
    """One phase's layout and its figures. JSON keys fixed by the issue: attention (tp, dp), ep,
    redundant_experts, gpus, tokens_per_s_per_gpu, tpot_p50_s, tpot_p99_s, alltoall_p99_s."""

    phase: str
    attention: dict[str, int]
    ep: int
    redundant_experts: int
    gpus: int
    tokens_per_gpu: int
    tokens_per_s_per_gpu: float
    tpot_p50_s: float
    tpot_p99_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    alltoall_p99_s: float
    layer_p50_s: float
    layer_p99_s: float
    breakdown_s: dict[str, float]
    memory_bytes_per_gpu: dict[str, float]
    meets_sla: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "extra"} | self.extra


@dataclass(frozen=True)
class Knobs:
    gpu: GPUSpec
    weight_bytes: float
    dispatch_bytes: float = 1.0
    combine_bytes: float = 2.0
    kv_dtype: str = "bf16"
    compute_dtype: str = "fp8"
    gpus_per_node: int = 8
    skew: float = 0.6
    overlap: bool = True
    draws: int = 256
    seed: int = 0


def evaluate(mm: _Model, kb: Knobs, *, phase: str, tp: int, ep: int, redundant: int,
             tokens_per_gpu: int, context: int, prompt: int) -> PhasePlan:
    """Timeline, tail and memory of one (phase, tp, ep, redundant, tokens per GPU) choice."""
    gpu = kb.gpu
    eff_c, _ = constant("compute_efficiency")
    eff_m, _ = constant("memory_efficiency")
    util, _ = constant("memory_utilization")
    peak = gpu.peak_flop_per_s(kb.compute_dtype) * eff_c
    bw = gpu.hbm_bytes_per_s * eff_m
    n = tokens_per_gpu
    e_w = kb.weight_bytes
    kv_l = mm.kv_tok_layer
    # attention per layer on one GPU (group of tp GPUs handles tp * n tokens)
    proj_f = 2 * mm.P_attn * n  # tp * n tokens x P_attn / tp
    proj_b = mm.P_attn * e_w / tp
    if phase == "decode":
        seqs = n * tp  # sequences in the group; each GPU holds its share of KV heads
        core_f = mm.attn_flops_per_ctx * context * n
        kv_b = seqs * context * kv_l / min(tp, mm.kv_split)
        ctx_len = context
    else:
        core_f = mm.attn_flops_per_ctx * n * prompt / 2  # causal: half the score matrix
        kv_b = n * kv_l  # written once
        ctx_len = prompt
    t_attn = max((proj_f + core_f) / peak, (proj_b + kv_b) / bw)
    t_tp = 0.0
    if tp > 1:
        up = gpu.scale_up_bytes_per_s or 1e11
        t_tp = 2 * (tp - 1) / tp * (n * tp) * mm.h * 2 / up + 2 * (tp - 1) * 0.6e-6
    t_shared = max(2 * mm.P_shared * n / peak, mm.P_shared * e_w / bw) if mm.P_shared else 0.0
    t_dense = max(2 * mm.P_dense_mlp * n / peak, mm.P_dense_mlp * e_w / bw)
    # routed experts: the busiest GPU
    slots_per_gpu = (mm.E + redundant) // ep
    recv = recv_tail(mm.E, mm.k, ep, redundant, n, kb.skew, draws=kb.draws, seed=kb.seed)
    t_exp = np.maximum(2 * mm.P_x * recv / peak, slots_per_gpu * mm.P_x * e_w / bw)
    send = n * mm.k * mm.h
    t_disp = alltoall_time_s(send * kb.dispatch_bytes, recv * mm.h * kb.dispatch_bytes, ep,
                             kb.gpus_per_node, gpu)
    t_comb = alltoall_time_s(send * kb.combine_bytes, recv * mm.h * kb.combine_bytes, ep,
                             kb.gpus_per_node, gpu)
    comp = t_attn + t_tp + t_shared + t_exp
    comm = t_disp + t_comb
    layer = np.maximum(comp, comm) if kb.overlap else comp + comm
    dense_layer = t_attn + t_tp + t_dense
    head = max(2 * mm.P_embed_head / 2 * n / peak, mm.P_embed_head / 2 * e_w / bw)
    # per token: independent draws per layer; sum L_moe layers by resampling the layer times
    rng = np.random.default_rng(kb.seed + 11)
    idx = rng.integers(0, layer.size, size=(kb.draws, mm.L_moe))
    step = layer[idx].sum(axis=1) + (mm.L - mm.L_moe) * dense_layer + head
    a2a = t_disp + t_comb
    a2a_tok = a2a[idx].sum(axis=1)
    # memory per GPU
    nonexp = (mm.L * mm.P_attn / tp + mm.L_moe * mm.P_shared + (mm.L - mm.L_moe) * mm.P_dense_mlp
              + mm.P_embed_head / tp) * e_w
    exp_b = mm.L_moe * slots_per_gpu * mm.P_x * e_w
    kv_total = (n * tp * ctx_len * kv_l * mm.L / min(tp, mm.kv_split)
                if phase == "decode" else n * kv_l * mm.L)
    cap = gpu.hbm_bytes * util
    fits = nonexp + exp_b + kv_total <= cap
    p50, p99 = float(np.median(step)), float(np.quantile(step, 0.99))
    if phase == "decode":
        tpot50, tpot99 = p50, p99
        ttft50 = ttft99 = float("nan")
        tput = n / p50
    else:
        chunks = max(1, -(-prompt // n))
        ttft50, ttft99 = chunks * p50, chunks * p99
        tpot50 = tpot99 = float("nan")
        tput = n / p50
    return PhasePlan(
        phase=phase, attention={"tp": tp, "dp": ep // tp}, ep=ep, redundant_experts=redundant,
        gpus=ep, tokens_per_gpu=n, tokens_per_s_per_gpu=float(tput),
        tpot_p50_s=tpot50, tpot_p99_s=tpot99, ttft_p50_s=ttft50, ttft_p99_s=ttft99,
        alltoall_p99_s=float(np.quantile(a2a, 0.99)),
        layer_p50_s=float(np.median(layer)), layer_p99_s=float(np.quantile(layer, 0.99)),
        breakdown_s={"attention": t_attn, "tp_allreduce": t_tp, "shared_expert": t_shared,
                     "experts_p50": float(np.median(t_exp)), "experts_p99": float(np.quantile(t_exp, 0.99)),
                     "dispatch_p99": float(np.quantile(t_disp, 0.99)),
                     "combine_p99": float(np.quantile(t_comb, 0.99)),
                     "dense_layer": dense_layer, "head": head,
                     "alltoall_per_token_p99": float(np.quantile(a2a_tok, 0.99))},
        memory_bytes_per_gpu={"non_expert_weights": nonexp, "expert_weights": exp_b,
                              "kv_cache": kv_total, "usable": cap},
        meets_sla=bool(fits),
        extra={"recv_copies_p50": float(np.median(recv)), "recv_copies_p99": float(np.quantile(recv, 0.99)),
               "recv_copies_mean_gpu": n * mm.k, "slots_per_gpu": slots_per_gpu},
    )


# --- the search ----------------------------------------------------------------------------------

NODE_COUNTS = (1, 2, 4, 8, 12, 16, 18, 24, 32, 36, 40)


def _redundancy_options(E: int, ep: int) -> list[int]:
    base = (-E) % ep
    opts = [base, base + ep]
    return [r for r in opts if r <= E]


@dataclass(frozen=True)
class ServingPlan:
    model: str
    gpu: str
    tpot_sla_s: float
    ttft_sla_s: float
    prefill: PhasePlan | None
    decode: PhasePlan | None
    candidates: dict[str, list[dict[str, Any]]]
    derivation: Derivation
    anchors: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "tpot_sla_s": self.tpot_sla_s,
                "ttft_sla_s": self.ttft_sla_s,
                "prefill": self.prefill.to_dict() if self.prefill else None,
                "decode": self.decode.to_dict() if self.decode else None,
                "candidates": self.candidates, "anchors": self.anchors,
                "derivation": self.derivation.to_dict()}


def plan(m: ModelSpec, gpu: GPUSpec, *, tpot_s: float, ttft_s: float, context: int | None = None,
         prompt: int = 4096, dtype_name: str = "fp8", kv_dtype: str = "bf16",
         skew: float | None = None, gpus_per_node: int = 8, overlap: bool = True,
         draws: int = 256, seed: int = 0, node_counts: tuple[int, ...] = NODE_COUNTS
         ) -> ServingPlan:
    if tpot_s <= 0 or ttft_s <= 0:
        raise BadInput("--tpot-ms and --ttft-ms must be positive")
    mm = _model(m, kv_dtype)
    e = dtype(dtype_name)
    if e.name not in gpu.flop_per_s:
        raise BadInput(f"--dtype: {gpu.id} has no {e.name} peak; it lists {', '.join(gpu.flop_per_s)}")
    ctx = int(context or constant("decode_context")[0])
    s = float(skew if skew is not None else constant("default_skew")[0])
    if s < 0:
        raise BadInput("--skew must be 0 or more")
    kb = Knobs(gpu=gpu, weight_bytes=e.bytes, kv_dtype=kv_dtype, compute_dtype=e.name,
               gpus_per_node=gpus_per_node, skew=s, overlap=overlap, draws=draws, seed=seed)
    cands: dict[str, list[dict[str, Any]]] = {"prefill": [], "decode": []}
    best: dict[str, PhasePlan | None] = {"prefill": None, "decode": None}
    tps = [t for t in (1, 2, 4, 8) if t <= gpus_per_node]
    for phase, sizes in (("prefill", (1024, 2048, 4096, 8192, 16384)),
                         ("decode", (8, 16, 32, 64, 96, 128, 192, 256, 384, 512))):
        for nodes in node_counts:
            ep = nodes * gpus_per_node
            for red in _redundancy_options(mm.E, ep):
                for tp in tps:
                    for n in sizes:
                        if phase == "decode" and n * tp < tp:
                            continue
                        pp = evaluate(mm, kb, phase=phase, tp=tp, ep=ep, redundant=red,
                                      tokens_per_gpu=n, context=ctx, prompt=prompt)
                        lat = pp.tpot_p99_s if phase == "decode" else pp.ttft_p99_s
                        ok = pp.meets_sla and lat <= (tpot_s if phase == "decode" else ttft_s)
                        row = {"nodes": nodes, "ep": ep, "redundant_experts": red, "tp": tp,
                               "tokens_per_gpu": n, "fits_memory": pp.meets_sla,
                               "latency_p99_s": lat, "tokens_per_s_per_gpu": pp.tokens_per_s_per_gpu,
                               "meets_sla": ok}
                        cands[phase].append(row)
                        if not ok:
                            continue
                        cur = best[phase]
                        key = (pp.tokens_per_s_per_gpu, -pp.gpus)
                        if cur is None or key > (cur.tokens_per_s_per_gpu * (1 + 1e-9), -cur.gpus):
                            best[phase] = pp
    d = Derivation(f"MoE serving plan for {m.id} on {gpu.id}")
    d.given("TPOT SLA (p99)", "T_tpot", tpot_s, "s")
    d.given("TTFT SLA (p99)", "T_ttft", ttft_s, "s")
    d.given("decode context (KV length)", "C", ctx, "token", constant("decode_context")[1])
    d.given("expert popularity Zipf exponent", "s", s, "1", constant("default_skew")[1])
    d.given("GEMM efficiency", "eta_c", constant("compute_efficiency")[0], "1",
            constant("compute_efficiency")[1])
    d.given("HBM efficiency", "eta_m", constant("memory_efficiency")[0], "1",
            constant("memory_efficiency")[1])
    anchors = {}
    for ph, key in (("prefill", "prefill_tokens_per_node_s"), ("decode", "decode_tokens_per_node_s")):
        v, src = constant(key)
        d.given(f"DeepSeek published {ph} tokens/s per H800 node", f"X_{ph}", v, "token/s", src)
        anchors[f"deepseek_{ph}_tokens_per_s_per_gpu"] = v / 8
        b = best[ph]
        if b is not None:
            d.given(f"our {ph} tokens/s per GPU", f"x_{ph}", b.tokens_per_s_per_gpu, "token/s")
            d.calc(f"ours / DeepSeek's per GPU ({ph})", f"r_{ph}", f"x_{ph} / (X_{ph} / 8)", "1",
                   note="roofline times are lower bounds, so ratios above 1 are expected")
    return ServingPlan(m.id, gpu.id, tpot_s, ttft_s, best["prefill"], best["decode"], cands, d,
                       anchors)


def ep_vs_tp_bytes(m: ModelSpec, tokens: int, tp: int, ep: int, weight_bytes: float = 1.0
                   ) -> dict[str, float]:
    """Per MoE layer and GPU: what EP and TP (for the experts) move and read.

    EP: each token's k copies are sent (h bytes FP8) and returned (h bytes x 2, BF16); each GPU
    reads the weights of its E / EP experts. TP over the experts: every GPU reads 1/TP of every
    expert the batch touches and all-reduces the layer output (2 (TP-1)/TP x tokens x h x 2 B)."""
    mm = _model(m, "bf16")
    touched = mm.E * (1 - (1 - mm.k / mm.E) ** tokens)
    return {
        "ep_dispatch_bytes_per_gpu": tokens / ep * mm.k * mm.h * 1.0,
        "ep_combine_bytes_per_gpu": tokens / ep * mm.k * mm.h * 2.0,
        "ep_weight_bytes_per_gpu": mm.E / ep * mm.P_x * weight_bytes,
        "tp_allreduce_bytes_per_gpu": 2 * (tp - 1) / tp * tokens * mm.h * 2.0,
        "tp_weight_bytes_per_gpu": touched * mm.P_x * weight_bytes / tp,
    }
