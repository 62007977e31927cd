"""The training planner: every parallel layout of a training step, its step time, MFU and memory.

For one model, cluster and global batch, :func:`search` builds the grid of layouts (TP with
sequence parallelism, PP with interleaved stages and uneven stage splits, DP with ZeRO 0-3, CP,
EP with experts split over TP or folded, recompute, micro-batch), drops the invalid ones rule by
rule, and prices every remaining layout at once with numpy. Memory comes from
:func:`scalemodel.analytic.memory.training_bytes` (the same model that ``scalemodel memory``
shows; that command keeps the experts split over TP, etp = tp); time is the sum of

* compute: every GEMM of a layer (forward, the two backward GEMMs, recompute) at an efficiency
  that depends on its shape (tile and wave quantization on the SMs, the HBM roofline for thin
  GEMMs) below a ceiling measured on one large GEMM; attention at the FlashAttention efficiency
  of the length each call sees (smaller under context parallelism); norms, residuals,
  activations, rotary, dropout masks, fp8 casts and the fp32 loss as HBM traffic;
* TP/SP, CP and EP collectives per layer, the pipeline bubble (p - 1) / v and send/recv, the
  DP gradient reduction and ZeRO gathers overlapped with compute where the framework does so;
* the optimizer step as HBM traffic.

Collectives are priced by the collectives engine (analytic/collectives.py, NCCL-like choice of
algorithm and protocol per query) through one adapter, :func:`collective_time`. Compute that runs
beside a hidden collective pays a measured slowdown (planner.toml, overlap.compute_slowdown).

Symbols follow docs/planner.md. Times are seconds per step unless named otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import numpy as np

from ..errors import BadInput
from ..specs import GPUSpec, LinkSpec, ModelSpec, assumption, dtype, get_gpu, get_link, optimizer
from ..specs.sources import cite, load_toml
from .memory import (
    PLAN_RECOMPUTE,
    StaticModel,
    stage_partition,
    stage_shape,
    static_model,
    tp_options,
)
from .memory import training_bytes as _training_bytes

# Tensor-parallel collectives per layer and micro-batch with sequence parallelism, each moving
# one gathered activation (Korthikanti et al. 2022, Sec. 4.2.2, as Megatron-LM runs it):
# forward 2 all-gathers + 2 reduce-scatters; backward the mirror 4 plus the inputs re-gathered
# for the weight gradients.
# Full recompute repeats the forward ones.
TP_FWD_COLLECTIVES = 4
TP_BWD_COLLECTIVES = 6

LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch", "recompute")
STRATEGIES = ("tp", "cp", "ep", "pp", "dp")
STAGE_COLS = ("n_first", "n_mid", "mid_index", "n_last")  # a fixed split, as stage_shape gives it


@cache
def constants() -> dict[str, Any]:
    return load_toml("planner.toml")


# --- the cluster and the job ---------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    """GPUs, their NVLink domain and the scale-out fabric (per-GPU, one-way bandwidths)."""

    gpu: GPUSpec
    n_gpus: int
    gpus_per_node: int
    nvlink_domain: int
    intra: LinkSpec | None
    inter: LinkSpec
    nics_per_gpu: int

    @cached_property
    def fabric(self) -> Any:
        """The collectives engine's view of this cluster: one tier per NVLink domain (the
        "node" of analytic/collectives.py), the scale-out NICs of each GPU beyond it."""
        from .collectives import make_fabric

        intra = self.intra.id if self.intra else "pcie5"
        return make_fabric(intra, self.inter.id, gpus_per_node=self.nvlink_domain,
                           nics_per_gpu=self.nics_per_gpu,
                           intra_bytes_per_s=self.gpu.scale_up_bytes_per_s or None)


def make_cluster(gpu: str | GPUSpec, n_gpus: int, *, gpus_per_node: int | None = None,
                 nvlink_domain: int | None = None, inter: str | None = None,
                 nics_per_gpu: int | None = None) -> Cluster:
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    ic = g.interconnect
    node = gpus_per_node or int(assumption("gpus_per_node").value)
    dom = nvlink_domain or node
    if n_gpus < 1:
        raise BadInput(f"--gpus must be at least 1, got {n_gpus}")
    if dom < 1 or node < 1:
        raise BadInput("--gpus-per-node and --nvlink-domain must be at least 1")
    intra = get_link(ic["scale_up_link"]) if ic.get("scale_up_link") else None
    inter_id = inter or ic.get("scale_out_link") or "ndr-400"
    try:
        inter_link = get_link(inter_id)
    except BadInput:
        from ..specs import link_ids

        raise BadInput(f"--inter: unknown link {inter_id!r}; choose one of "
                       f"{', '.join(link_ids())}") from None
    nics = nics_per_gpu or int(ic.get("nics_per_gpu", 1))
    return Cluster(g, int(n_gpus), int(node), int(dom), intra, inter_link, int(nics))


ATTENTION_KINDS = ("flash", "flash3", "triton", "unfused")
KERNEL_MODES = ("fused", "eager")
SCHEDULES = ("1f1b", "dualpipe")
FUSED_ATTENTION = ("flash", "flash3", "triton")  # kernels that never write the score matrix to HBM


@dataclass(frozen=True)
class Job:
    """What is trained: model, sequence length, global batch, precision and optimizer."""

    model: ModelSpec
    seq_len: int
    global_batch_seqs: int
    precision: str = "bf16"
    optimizer_id: str = "adam"
    memory_fraction: float | None = None
    # "flash" (FlashAttention-2-class fused kernel), "flash3" (FlashAttention-3 / cuDNN, Hopper),
    # "triton" (the older Triton FlashAttention kernel) - planner.toml [attention] - or
    # "unfused" (scores in HBM)
    attention: str = "flash"
    # MoE all-to-alls overlapped with another micro-batch's compute (DualPipe, Megatron's EP
    # overlap)
    ep_overlap: bool = False
    # "fused": every elementwise step of a norm, rotary or gated activation is one kernel
    # (Megatron/Transformer Engine, torch.compile); "eager": PyTorch eager mode runs the
    # reference code op by op (planner.toml [nongemm] eager_*)
    kernels: str = "fused"
    # Megatron's gradient-accumulation fusion (the wgrad GEMM adds into the fp32 main gradient);
    # False = a separate add pass per micro-batch (Megatron before 2022, or
    # --no-gradient-accumulation-fusion)
    grad_accum_fusion: bool = True
    # pipeline schedule: "1f1b" (Megatron's, interleaved when vpp > 1) or "dualpipe" (DeepSeek-V3:
    # bidirectional, a forward and a backward chunk overlapped; bubble (p/2 - 1)(F&B + B - 3W),
    # two copies of the parameters, p + 1 micro-batches of activations)
    schedule: str = "1f1b"

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.global_batch_seqs


def make_job(model: ModelSpec, *, seq_len: int, global_batch_tokens: int | None = None,
             global_batch_seqs: int | None = None, precision: str = "bf16",
             optimizer_id: str = "adam", memory_fraction: float | None = None,
             attention: str = "flash", ep_overlap: bool = False,
             kernels: str = "fused", grad_accum_fusion: bool = True,
             schedule: str = "1f1b") -> Job:
    if precision not in ("bf16", "fp8"):
        raise BadInput(f"--precision must be bf16 or fp8, got {precision!r}")
    if attention not in ATTENTION_KINDS:
        raise BadInput(f"--attention must be one of {', '.join(ATTENTION_KINDS)}, "
                       f"got {attention!r}")
    if schedule not in SCHEDULES:
        raise BadInput(f"--schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if kernels not in KERNEL_MODES:
        raise BadInput(f"--kernels must be one of {', '.join(KERNEL_MODES)}, got {kernels!r}")
    if seq_len < 1:
        raise BadInput(f"--seq-len must be at least 1, got {seq_len}")
    if (global_batch_tokens is None) == (global_batch_seqs is None):
        raise BadInput("give exactly one of --global-batch-tokens or --global-batch (sequences)")
    if global_batch_tokens is not None:
        if global_batch_tokens % seq_len:
            raise BadInput(f"--global-batch-tokens {global_batch_tokens:,} is not a multiple of "
                           f"--seq-len {seq_len:,}; nearest: "
                           f"{max(1, round(global_batch_tokens / seq_len)) * seq_len:,}")
        global_batch_seqs = global_batch_tokens // seq_len
    optimizer(optimizer_id)  # validates the id
    if global_batch_seqs < 1:
        raise BadInput("the global batch must hold at least one sequence")
    return Job(model, int(seq_len), int(global_batch_seqs), precision, optimizer_id,
               memory_fraction, attention, bool(ep_overlap), kernels, bool(grad_accum_fusion),
               schedule)


# --- GEMM efficiency --------------------------------------------------------------------------------


def _shape_factor(M: Any, N: Any, K: Any, sms: int, batch: Any = 1.0) -> Any:
    """Fraction of the ceiling left after tile padding and wave quantization (first principles).
    A batched GEMM (``batch`` independent products in one launch, as bmm / baddbmm run the
    attention heads) spreads the tiles of every product over the SMs together."""
    g = constants()["gemm"]
    tm, tn, tk = g["tile_m"], g["tile_n"], g["tile_k"]
    tiles_m, tiles_n = np.ceil(M / tm), np.ceil(N / tn)
    tiles = tiles_m * tiles_n * batch
    waves = np.ceil(tiles / sms)
    wave = tiles / (waves * sms)
    pad = (M / (tiles_m * tm)) * (N / (tiles_n * tn)) * (K / (np.ceil(K / tk) * tk))
    return wave * pad


@cache
def gemm_ceiling() -> float:
    """The shape-free ceiling that makes the anchor shape come out at its measured efficiency."""
    g = constants()["gemm"]
    anchor = get_gpu(g["anchor_gpu"])
    f = float(_shape_factor(np.float64(g["anchor_m"]), np.float64(g["anchor_n"]),
                            np.float64(g["anchor_k"]), anchor.sm_count))
    return g["anchor_efficiency"] / f


def gemm_time(M: Any, N: Any, K: Any, gpu: GPUSpec, peak: float, elem_bytes: float,
              batch: Any = 1.0, dtype_name: str = "bf16") -> Any:
    """Seconds for one (M x K) @ (K x N) GEMM, or one launch of ``batch`` of them: compute at the
    shape's efficiency or HBM traffic, whichever is longer (roofline). ``peak`` is the dense
    peak of ``dtype_name``; an fp8 GEMM also takes the GPU's measured fp8/bf16 efficiency ratio."""
    g = constants()["gemm"]
    if not gpu.sm_count:
        raise BadInput(f"GPU {gpu.id}: sm_count is missing; the GEMM model (tiles in waves over "
                       "the SMs) needs it: add sm_count = N to the GPU's TOML")
    # the ceiling is a short-run (burst) fraction of the dense peak; a training step keeps the
    # GPU's sustained share of it, and an fp8 GEMM its measured fp8/bf16 ratio (gpus.toml)
    eff = (gemm_ceiling() * _shape_factor(M, N, K, gpu.sm_count, batch) * gpu.sustained_fraction
           * gpu.gemm_dtype_factor(dtype_name))
    t_c = batch * 2.0 * M * N * K / (peak * eff)
    t_m = batch * elem_bytes * (M * K + K * N + M * N) / (gpu.hbm_bytes_per_s
                                                           * g["hbm_efficiency"])
    return np.maximum(t_c, t_m)


def gemm_efficiency(M: Any, N: Any, K: Any, gpu: GPUSpec, dtype_name: str = "bf16") -> Any:
    """Achieved fraction of the dense peak for one GEMM (the curve docs/planner.md plots)."""
    peak = gpu.peak_flop_per_s(dtype_name)
    e = dtype(dtype_name).bytes
    t = gemm_time(M, N, K, gpu, peak, e, dtype_name=dtype_name)
    return 2.0 * M * N * K / (t * peak)


@cache
def _attention_curves(arch: str) -> dict[str, np.ndarray]:
    """Fractions of the 16-bit peak by call length: forward/backward, causal/full (see
    planner.toml [attention]). Hopper and later use the H100 measurements; Ampere scales their
    shape to the A100 maxima of the FlashAttention-2 paper."""
    a = constants()["attention"]
    fc = np.asarray(a["h100_fa2_fwd_causal"], dtype=np.float64)
    ff = np.asarray(a["h100_fa2_fwd_full"], dtype=np.float64)
    bf = np.asarray(a["h100_fa2_bwd_full"], dtype=np.float64)
    if arch == "ampere":
        fwd_full = a["a100_fwd_max"] * ff / ff[-1]
        bwd_full = a["a100_bwd_max"] * bf / bf[-1]
    else:
        fwd_full = ff / a["h100_peak_tflops"]
        bwd_full = bf / a["h100_peak_tflops"]
    mask = fc / ff  # what the causal mask costs at each length
    return {"x": np.log2(np.asarray(a["lengths"], dtype=np.float64)),
            "fwd_full": fwd_full, "fwd_causal": fwd_full * mask,
            "bwd_full": bwd_full, "bwd_causal": bwd_full * mask}


def attention_efficiency(gpu: GPUSpec, length: Any = 8192.0, *, causal: bool = True,
                         backward: bool = False) -> Any:
    """Fraction of the 16-bit peak a FlashAttention call of ``length`` tokens reaches
    (FLOPs counted as the planner counts them: causal half, backward
    ``backward_flop_factor`` x the forward)."""
    c = _attention_curves(gpu.arch)
    y = c[("bwd_" if backward else "fwd_") + ("causal" if causal else "full")]
    x = np.log2(np.maximum(np.asarray(length, dtype=np.float64), 1.0))
    slope = (y[1] - y[0]) / (c["x"][1] - c["x"][0])
    short = np.maximum(y[0] + slope * (x - c["x"][0]),
                       constants()["attention"]["short_floor"] * y[0])
    out = np.where(x < c["x"][0], short, np.interp(x, c["x"], y))
    return out if out.ndim else float(out)


def attention_core_time(flops_fwd: Any, S: float, cp: Any, peak16: float,
                        gpu: GPUSpec, kind: str = "flash") -> tuple[Any, Any]:
    """(forward, backward) seconds of the FlashAttention calls of one layer on one rank.

    ``flops_fwd`` are the executed (causal half) forward FLOPs. Without CP it is one causal call
    of S tokens. With load-balanced CP (2 cp chunks) a rank runs one causal call of S/cp tokens
    (1/cp of the FLOPs) and cp - 1 unmasked calls of half that size (the rest), read at the
    geometric-mean length S / (cp sqrt 2). The backward executes ``backward_flop_factor``
    (planner.toml [attention], 2.5 in the FlashAttention papers) times the forward FLOPs.
    ``kind`` scales the FlashAttention-2 rates (:func:`attention_slowdown`).
    """
    cp = np.asarray(cp, dtype=np.float64)
    diag_l = S / cp
    off_l = S / (cp * math.sqrt(2.0))
    share = 1.0 / cp
    f = (flops_fwd * share / attention_efficiency(gpu, diag_l)
         + flops_fwd * (1 - share) / attention_efficiency(gpu, off_l, causal=False))
    b = constants()["attention"]["backward_flop_factor"] * (flops_fwd * share / attention_efficiency(gpu, diag_l, backward=True)
               + flops_fwd * (1 - share) / attention_efficiency(gpu, off_l, causal=False,
                                                                  backward=True))
    return (attention_slowdown(kind) * f / peak16,
            attention_slowdown(kind, backward=True) * b / peak16)


def attention_slowdown(kind: str, backward: bool = False) -> float:
    """How much slower than the FlashAttention-2 curves a fused attention kind runs (below 1:
    faster): the Triton kernel by ``triton_slowdown``; FlashAttention-3 / cuDNN on Hopper by the
    inverse of ``flash3_fwd_speedup`` / ``flash3_bwd_speedup``."""
    a = constants()["attention"]
    if kind == "triton":
        return float(a["triton_slowdown"])
    if kind == "flash3":
        return 1.0 / float(a["flash3_bwd_speedup" if backward else "flash3_fwd_speedup"])
    return 1.0


# --- collectives: priced by the collectives engine (analytic/collectives.py) ---------------------

_ENGINE_NAMES = {"all_reduce": "all-reduce", "all_gather": "all-gather",
                 "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all",
                 "send_recv": "send-recv"}


def collective_time(kind: str, nbytes: Any, ranks: Any, ranks_per_node: Any,
                    cluster: Cluster) -> Any:
    """Seconds for one collective on every row: the collectives engine's NCCL-like choice.

    ``nbytes`` follows the nccl-tests convention of analytic/collectives.py (the gathered size
    for all_gather, the input for reduce_scatter and all_reduce, the per-rank buffer for
    all_to_all, the message for send_recv). ``ranks_per_node`` is how many members of the group
    share one NVLink domain (the engine's "node"). Every (algorithm, protocol) NCCL implements
    is priced (ring, tree and NVLS/SHARP for all-reduce; rings elsewhere; grouped send/recv
    for all-to-all) and the fastest is taken, as NCCL's tuner does. Queries are de-duplicated
    first: a layout grid repeats the same (size, ranks, placement) many times.
    """
    from .collectives import price_best

    S, n, r = np.broadcast_arrays(np.asarray(nbytes, dtype=np.float64),
                                  np.asarray(ranks, dtype=np.float64),
                                  np.asarray(ranks_per_node, dtype=np.float64))
    n = np.maximum(n, 1.0)
    r = np.clip(r, 1.0, n)
    if kind == "send_recv":
        n = np.where(n > 1, 2.0, 1.0)
        r = np.minimum(r, n)
    live = (n > 1) & (S > 0)
    out = np.zeros(S.shape)
    if live.any():
        q = np.stack([S[live], n[live], r[live]], axis=1)
        uq, inv = np.unique(q, axis=0, return_inverse=True)
        t = price_best(_ENGINE_NAMES[kind], uq[:, 0], uq[:, 1], uq[:, 2],
                       fabric=cluster.fabric).time_s
        out[live] = np.asarray(t)[inv.ravel()]
    return out if out.ndim else float(out)


def ranks_per_node(stride: Any, size: Any, domain: int) -> Any:
    """Members of a group (``size`` ranks, ``stride`` apart) that share one NVLink domain."""
    stride = np.asarray(stride, dtype=np.float64)
    return np.where(stride * size <= domain, size, np.maximum(1.0, np.floor(domain / stride)))


def dispatch_copies(m: ModelSpec, ep: Any, ranks_per_domain: Any) -> Any:
    """Copies of a token's hidden state an all-to-all dispatch sends: top_k, or, when the
    router limits a token to ``groups_per_token`` of ``expert_groups`` expert groups and the EP
    group spans several NVLink domains, at most one copy per reached group (DeepSeek-V3's
    node-limited routing: one copy crosses the network per target node, NVLink fans it out)."""
    k = float(m.top_k)
    if not (m.expert_groups and m.groups_per_token and m.groups_per_token < m.expert_groups):
        return np.full(np.shape(ep), k) if np.ndim(ep) else k
    spans = np.asarray(ep, dtype=np.float64) > np.asarray(ranks_per_domain, dtype=np.float64)
    return np.where(spans, min(k, float(m.groups_per_token)), k)


# --- model quantities used per token ----------------------------------------------------------------


@dataclass(frozen=True)
class ModelShapes:
    """Per-layer GEMM widths and FLOP counts of a model, computed once."""

    sm: StaticModel
    attn_in_n: float  # output width of the input projections (q, k, v / MLA paths) on K = h
    attn_out_k: float  # width into the output projection
    qk_dim: float  # per-token width of Q (and K) over all heads
    v_dim: float  # per-token width of V over all heads
    kv_dim: float  # K and V width actually sent in ring attention (per token)
    up_k: int  # 2 for gated MLPs (gate and up), 1 otherwise
    ffn: int
    moe_ffn: int
    shared_ffn: int
    n_moe: int
    n_dense: int
    matmul_params_per_token: float  # model-FLOP parameters: active, no embedding lookup
    last_extra_layers: float  # output head + loss, in layers (for the stage split)


def model_shapes(m: ModelSpec) -> ModelShapes:
    sm = static_model(m)
    pc = sm.pc
    h = m.hidden
    big_attn = max(lp.attention for lp in pc.layers)
    if m.kv_lora_rank:
        qk = m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        v = m.n_heads * m.v_head_dim
        kv_send = m.kv_lora_rank + m.qk_rope_head_dim
    else:
        qk, v = m.q_dim, m.q_dim
        kv_send = 2 * m.kv_dim
    o_k = v
    attn_in_n = (big_attn - o_k * h) / h
    shared = m.shared_ffn or m.n_shared_experts * m.moe_ffn
    head_params = pc.lm_head or pc.embedding
    matmul = pc.active - pc.embedding - pc.lm_head + head_params
    per_layer_active = (pc.active - pc.embedding - pc.lm_head - pc.final_norm) / m.n_layers
    return ModelShapes(
        sm=sm, attn_in_n=attn_in_n, attn_out_k=o_k, qk_dim=qk, v_dim=v, kv_dim=kv_send,
        up_k=2 if m.gated_mlp else 1, ffn=m.ffn, moe_ffn=m.moe_ffn, shared_ffn=shared,
        n_moe=m.n_moe_layers, n_dense=m.n_layers - m.n_moe_layers,
        matmul_params_per_token=float(matmul),
        last_extra_layers=head_params / per_layer_active,
    )


def model_flops_per_token(m: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per token (PaLM, Appendix B): 6 N + 6 L s H (d_qk + d_v); N = matmul
    parameters a token uses (no embedding lookup), attention counted without the causal half."""
    ms = model_shapes(m)
    return 6 * ms.matmul_params_per_token + 6 * m.n_layers * seq_len * (ms.qk_dim + ms.v_dim)


# --- the grid of layouts -------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@dataclass
class Grid:
    cols: dict[str, np.ndarray]
    rejected: dict[str, int]  # rule -> rows it removed (in the order the rules apply)
    total: int


def layout_grid(job: Job, cl: Cluster, fixed: dict[str, Any] | None = None) -> Grid:
    """All layouts of ``cl.n_gpus`` GPUs for ``job``; ``fixed`` pins any of the searched layout
    keys. The rules are analytic/layout.py RULES, applied in order; ``rejected`` counts the rows
    each removed."""
    from .layout import RULES, Context, derived

    fixed = dict(fixed or {})
    m, N = job.model, cl.n_gpus
    if "stages" in fixed:
        from .layout import check_stages

        st = tuple(fixed["stages"])
        fixed.setdefault("pp", len(st))
        fixed.setdefault("vpp", 1)  # a split given per stage is one of a plain pipeline
        check_stages(st, fixed["pp"], m)
    unknown = set(fixed) - set(LAYOUT_KEYS) - {"stages"}
    if unknown:
        raise BadInput(f"--layout {sorted(unknown)[0]}: plan train cannot use this key; keys: "
                       f"{', '.join(LAYOUT_KEYS)}, stages")
    if "recompute" in fixed and fixed["recompute"] not in PLAN_RECOMPUTE:
        raise BadInput(f"--layout recompute must be one of {', '.join(PLAN_RECOMPUTE)}")
    tps = [fixed["tp"]] if "tp" in fixed else [t for t in tp_options(m, cl.nvlink_domain)
                                                if N % t == 0]
    cps = [fixed["cp"]] if "cp" in fixed else [c for c in (1, 2, 4, 8, 16, 32)
                                                if job.seq_len % c == 0 and N % c == 0]
    pps = [fixed["pp"]] if "pp" in fixed else [p for p in _divisors(N) if p <= m.n_layers]
    eps = ([fixed["ep"]] if "ep" in fixed else
           ([e for e in _divisors(m.n_experts) if e <= N] if m.is_moe else [1]))
    # expert tensor parallelism: 0 stands for "as the attention's tp" (Megatron's default); a
    # folded layout (MoE parallel folding) runs the experts unsplit (etp 1) with EP drawn from
    # the tp x dp x cp ranks
    etps = ([fixed["etp"]] if "etp" in fixed else ([0, 1] if m.is_moe else [0]))
    zeros = [fixed["zero"]] if "zero" in fixed else [0, 1, 2, 3]
    vpps = [fixed["vpp"]] if "vpp" in fixed else [1, 2, 3, 4, 6, 8]
    rcs = [PLAN_RECOMPUTE.index(fixed["recompute"])] if "recompute" in fixed else [0, 1, 2]
    mbs = [fixed["micro_batch"]] if "micro_batch" in fixed else [1, 2, 4, 8, 16, 32]
    names = ("tp", "pp", "cp", "ep", "etp", "zero", "vpp", "rc", "micro_batch")
    grids = np.meshgrid(*(np.asarray(v, dtype=np.int64) for v in
                          (tps, pps, cps, eps, etps, zeros, vpps, rcs, mbs)), indexing="ij")
    c = {k: a.ravel() for k, a in zip(names, grids, strict=True)}
    # etp 0 stands for the attention's tp; where tp is 1 the two etp choices are one layout
    once = ~((c["etp"] == 1) & (c["tp"] == 1) & (len(etps) > 1))
    c = {k: a[once] for k, a in c.items()}
    c["etp"] = np.where(c["etp"] == 0, c["tp"], c["etp"])
    total = int(c["tp"].size)
    rejected: dict[str, int] = {}
    ctx = Context(m, N, job.global_batch_seqs, job.seq_len, job.schedule)
    pinned_dp = np.full(total, fixed["dp"], dtype=np.int64) if "dp" in fixed else None
    if pinned_dp is not None:
        c["dp"] = pinned_dp
    for r in RULES:
        if not r.applies(ctx) or (r.derived_key is not None and r.derived_key not in fixed):
            continue
        ok = np.asarray(r.ok(derived(c, ctx), ctx), dtype=bool)
        bad = int((~ok).sum())
        if bad:
            key = r.message(ctx)
            rejected[key] = rejected.get(key, 0) + bad
            c = {k: a[ok] for k, a in c.items()}
    c = derived({k: v for k, v in c.items() if k != "dp"}, ctx)
    cols = {k: np.asarray(c[k], dtype=np.int64) for k in ("tp", "pp", "dp", "cp", "ep", "etp",
                                                          "zero", "vpp", "rc", "micro_batch",
                                                          "microbatches")}
    if "stages" in fixed:  # one split for every row (pp is pinned to its length)
        for k, v in zip(STAGE_COLS, stage_shape(tuple(fixed["stages"])), strict=True):
            cols[k] = np.full(cols["tp"].shape, v, dtype=np.int64)
    return Grid(cols, rejected, total)


# --- pricing every layout -------------------------------------------------------------------------------


def evaluate(job: Job, cl: Cluster, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Step time, its breakdown, FLOPs and memory for every row of ``cols`` (numpy arrays)."""
    m = job.model
    ms = model_shapes(m)
    gpu = cl.gpu
    if job.attention == "flash3" and gpu.arch != "hopper":
        raise BadInput(f"--attention flash3 (FlashAttention-3 / cuDNN attention) is measured on "
                       f"Hopper only; {gpu.id} is {gpu.arch or 'of unknown architecture'}: "
                       "use --attention flash")
    f = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    tp, pp, dp, cp, ep, zero = f["tp"], f["pp"], f["dp"], f["cp"], f["ep"], f["zero"]
    etp = f.get("etp", tp)  # expert tensor parallelism (1 or tp)
    vpp, rc, b, mb = f["vpp"], f["rc"], f["micro_batch"], f["microbatches"]
    S = float(job.seq_len)
    h = float(m.hidden)
    e_a = 2.0  # activations travel and are stored in 16 bits (bf16 or fp8 training alike)
    peak = gpu.peak_flop_per_s(job.precision)
    peak16 = gpu.peak_flop_per_s("bf16")
    e_mm = dtype(job.precision).bytes
    hbm = gpu.hbm_bytes_per_s * constants()["gemm"]["hbm_efficiency"]
    T = b * S / cp  # tokens of one micro-batch on one rank

    def gemm3(Mx: Any, Nx: Any, Kx: Any, batch: Any = 1.0) -> tuple[Any, Any]:
        """(forward, backward) seconds: backward = dgrad (M x N @ N x K) + wgrad (K x M @ M x N);
        ``batch`` products per launch (batched GEMMs)."""
        fw = gemm_time(Mx, Nx, Kx, gpu, peak, e_mm, batch, job.precision)
        bw = (gemm_time(Mx, Kx, Nx, gpu, peak, e_mm, batch, job.precision)
              + gemm_time(Kx, Nx, Mx, gpu, peak, e_mm, batch, job.precision))
        return fw, bw

    keep_bf16 = set(constants()["nongemm"]["fp8_bf16_modules"])

    def gemm3_of(module: str, Mx: Any, Nx: Any, Kx: Any, batch: Any = 1.0) -> tuple[Any, Any]:
        """gemm3 for a module that fp8 training may keep in bf16 (planner.toml [nongemm]
        fp8_bf16_modules: the output head, an MoE router, the attention matmuls)."""
        if module not in keep_bf16:
            return gemm3(Mx, Nx, Kx, batch)
        fw = gemm_time(Mx, Nx, Kx, gpu, peak16, 2.0, batch)
        bw = (gemm_time(Mx, Kx, Nx, gpu, peak16, 2.0, batch)
              + gemm_time(Kx, Nx, Mx, gpu, peak16, 2.0, batch))
        return fw, bw

    def mlp(Mx: Any, width: float, count: Any = 1.0, split: Any = None) -> tuple[Any, Any]:
        """An MLP's GEMMs, its width split over ``split`` ranks (the tp unless given)."""
        k = tp if split is None else split
        uf, ub = gemm3(Mx, ms.up_k * width / k, h)
        df, db = gemm3(Mx, h, width / k)
        return count * (uf + df), count * (ub + db)

    # attention projections and core (FlashAttention: causal half executed, backward
    # backward_flop_factor x the forward)
    af1, ab1 = gemm3(T, ms.attn_in_n / tp, h)
    af2, ab2 = gemm3(T, h, ms.attn_out_k / tp)
    ng = constants()["nongemm"]
    if job.attention in FUSED_ATTENTION:
        core_flops = 2 * b * (S / cp) * S * (ms.qk_dim + ms.v_dim) / tp * 0.5
        core_f, core_b = attention_core_time(core_flops, S, cp, peak16, gpu, job.attention)
        # ring attention (CP): each of the cp - 1 extra calls merges its partial output into the
        # running result forward, and accumulates dq, dk, dv backward (online-softmax merge)
        merge = float(constants()["attention"]["cp_merge_bytes"]) * (cp - 1) * T / tp
        cp_merge_f = merge * ms.v_dim / hbm
        cp_merge_b = merge * (ms.qk_dim + ms.kv_dim) / hbm
        core_f = core_f + cp_merge_f
        core_b = core_b + cp_merge_b
    else:  # unfused: two batched GEMMs per head over the whole s x s score matrix (their own
        # roofline pays for writing scores and reading probabilities), plus the fused
        # scale-mask-softmax and dropout passes over the scores in HBM
        heads = m.n_heads / tp
        sl = S / cp
        dq, dv = ms.qk_dim / m.n_heads, ms.v_dim / m.n_heads
        # one batched launch over the micro-batch's sequences and this rank's heads (bmm)
        nb = b * heads
        qk_f, qk_b = gemm3_of("attention_matmuls", sl, S, dq, nb)
        av_f, av_b = gemm3_of("attention_matmuls", sl, dv, S, nb)
        per_f = ng["unfused_fwd_bytes_per_score"] + (ng["unfused_dropout_fwd_bytes"]
                                                     if m.dropout else 0)
        per_b = ng["unfused_bwd_bytes_per_score"] + (ng["unfused_dropout_bwd_bytes"]
                                                     if m.dropout else 0)
        scores = b * heads * sl * S
        core_f = qk_f + av_f + scores * per_f / hbm
        core_b = qk_b + av_b + scores * per_b / hbm
    # elementwise traffic per layer, forward (norms, residuals, activation function, rotary)
    sp_div = np.where(tp > 1, tp, 1.0)

    # QK-norm (Qwen3): an RMSNorm reads and writes every query and key element
    qkn_w = float(ms.qk_dim + m.kv_dim) if m.qk_norm else 0.0

    def ew_bytes(width: float) -> Any:
        return e_a * T * ((2 * 2 * h + 2 * 3 * h) / sp_div
                          + (3 if ms.up_k == 2 else 2) * width / tp
                          + 2 * (ms.qk_dim + ms.v_dim) / tp
                          + 2 * qkn_w / tp)

    mask_b = float(ng["dropout_mask_bytes"]) * 2 * T * h / sp_div if m.dropout else 0.0
    fp8 = job.precision == "fp8"

    def cast_bytes(width: float, copies: float) -> tuple[Any, Any]:
        """fp8 cast + transpose of every GEMM input (forward) and output gradient (backward):
        QKV and up/gate read the gathered h, the output projection v/tp, the down projection
        width/tp; ``copies`` = token copies entering the MLP (top_k for routed experts)."""
        if not fp8:
            return 0.0, 0.0
        cb = float(ng["fp8_cast_bytes"])
        fin = T * (h + ms.v_dim / tp + copies * h + width / tp)
        bout = T * (ms.attn_in_n / tp + h + ms.up_k * width / tp + copies * h)
        return cb * fin, cb * bout

    eager = job.kernels == "eager"
    rms_n = 2.0 if (eager and m.norm == "rms") else 0.0  # two RMSNorms per layer
    if m.kv_lora_rank:  # MLA: rotary only on the decoupled rope slices of Q and K
        rope_w = float(m.n_heads * m.qk_rope_head_dim + m.qk_rope_head_dim)
    else:
        rope_w = float(ms.qk_dim + m.kv_dim)
    rope_w = rope_w if (eager and m.rope) else 0.0
    n_rep = m.n_heads / max(m.n_kv_heads, 1)
    rep_w = float(m.kv_dim + ms.qk_dim) if (eager and not m.kv_lora_rank and n_rep > 1) else 0.0

    def eager_bytes(width: float) -> tuple[Any, Any]:
        """Extra HBM bytes per layer of PyTorch eager mode over the fused accounting of
        ew_bytes (forward, backward): RMSNorm, rotary and SwiGLU run op by op, grouped-query
        K/V are materialised per query head, the attention output is copied contiguous."""
        if not eager:
            return 0.0, 0.0
        f = (rms_n * (ng["eager_rmsnorm_fwd"] - ng["fused_norm_fwd"]) * h / sp_div
             + rope_w * (ng["eager_rope_fwd"] - ng["fused_rope_fwd"]) / tp
             + (ng["eager_swiglu_fwd"] - ng["fused_swiglu_fwd"]) * width / tp
             * (ms.up_k == 2)
             + ng["eager_repeat_kv"] * rep_w / tp
             + ng["eager_attn_out_copy"] * ms.v_dim / tp)
        b_ = (rms_n * (ng["eager_rmsnorm_bwd"] - 2 * ng["fused_norm_fwd"]) * h / sp_div
              + rope_w * (ng["eager_rope_bwd"] - 2 * ng["fused_rope_fwd"]) / tp
              + (ng["eager_swiglu_bwd"] - 2 * ng["fused_swiglu_fwd"]) * width / tp
              * (ms.up_k == 2)
              + ng["eager_repeat_kv"] * rep_w / tp
              + ng["eager_attn_out_copy"] * ms.v_dim / tp)
        return T * f, T * b_

    def nongemm(width: float, copies: float = 1.0) -> tuple[Any, Any]:
        """Seconds of memory-bound kernels per layer (forward, backward): norms, residual adds,
        the activation function and rotary (backward twice the forward), dropout masks, fp8
        casts."""
        cf, cb_ = cast_bytes(width, copies)
        ew = ew_bytes(width)
        xf, xb = eager_bytes(width)
        return (ew + mask_b + cf + xf) / hbm, (2 * ew + mask_b + cb_ + xb) / hbm

    # dense and MoE layer compute (forward, backward), seconds per micro-batch
    df_, db_ = mlp(T, ms.ffn)
    up_f, _ = gemm3(T, ms.up_k * ms.ffn / tp, h)
    down_f, _ = gemm3(T, h, ms.ffn / tp)
    ng_df, ng_db = nongemm(ms.ffn)
    dense_f = af1 + af2 + core_f + df_ + ng_df
    dense_b = ab1 + ab2 + core_b + db_ + ng_db
    if m.is_moe:
        n_local = m.n_experts / ep
        # tokens per local expert (balanced routing): the EP group's ranks each route their
        # T / tp sequence-parallel tokens (T after the expert-TP gather when etp = tp), so an
        # expert sees T top_k etp / (tp n_local) tokens and holds moe_ffn / etp of its width
        Me = T * m.top_k * etp / (tp * n_local)
        ef, eb = mlp(Me, ms.moe_ffn, n_local, etp)
        sf, sb = mlp(T, ms.shared_ffn) if ms.shared_ffn else (0.0, 0.0)
        rf, rb = gemm3_of("router", T, float(m.n_experts), h)
        width = m.top_k * ms.moe_ffn + ms.shared_ffn
        # the routed copies a rank casts: T top_k etp / tp tokens enter its experts
        ng_mf, ng_mb = nongemm(width, m.top_k * etp / tp + (1 if ms.shared_ffn else 0))
        moe_f = af1 + af2 + core_f + ef + sf + rf + ng_mf
        moe_b = ab1 + ab2 + core_b + eb + sb + rb + ng_mb
    else:
        moe_f = moe_b = np.zeros_like(dense_f)
    # recompute: full repeats the forward, selective repeats the attention core, the op-level
    # policy repeats every second matmul of the block (k, o, and up or down) and every
    # elementwise kernel, not the attention kernel (its output is kept)
    k_share = (m.kv_dim / ms.attn_in_n) if ms.attn_in_n else 0.0
    op_mm = af1 * k_share + af2 + (0.5 * up_f if ms.up_k == 2 else down_f)
    op_f = op_mm + ng_df
    rc_dense = np.where(rc == 2, dense_f, np.where(rc == 1, core_f,
                                                   np.where(rc == 3, op_f, 0.0)))
    rc_moe = np.where(rc == 2, moe_f, np.where(rc == 1, core_f, 0.0))

    # --- communication inside a layer (per micro-batch) ---
    dom = cl.nvlink_domain
    inner_tp = tp <= dom
    act_bytes = e_a * T * h  # a full (gathered) activation of the micro-batch on this rank
    tp_one = collective_time("all_gather", act_bytes, tp, ranks_per_node(1, tp, dom), cl)
    tp_f_all = TP_FWD_COLLECTIVES * tp_one
    tp_b_all = TP_BWD_COLLECTIVES * tp_one
    # the op-level policy keeps reduce-scatter outputs and repeats the all-gathers (half of them)
    tp_rc_all = np.where(rc == 2, tp_f_all, np.where(rc == 3, 0.5 * tp_f_all, 0.0))
    cp_intra = tp * cp <= dom
    kv_bytes = e_a * b * (S / cp) * ms.kv_dim / np.minimum(tp, max(m.n_kv_heads, 1)) \
        if not m.kv_lora_rank else e_a * b * (S / cp) * ms.kv_dim
    cp_step = collective_time("send_recv", kv_bytes, 2.0, np.where(cp_intra, 2.0, 1.0), cl)
    cp_f_raw = (cp - 1) * cp_step
    cp_b_raw = 2 * cp_f_raw  # K, V and their gradients travel back
    cp_f = np.maximum(0.0, cp_f_raw - core_f)
    cp_b = np.maximum(0.0, cp_b_raw - core_b)
    ov = constants()["overlap"]
    if m.is_moe:
        # an EP group strides over the DP ranks (past TP and CP) when the experts are split
        # like the dense MLP; a folded group (etp < tp) takes consecutive ranks, etp apart
        r_ep = ranks_per_node(np.where(etp == tp, tp * cp, etp), ep, dom)
        # with sequence parallelism a rank holds T / tp tokens of the micro-batch and dispatches
        # only those; experts split over etp ranks then gather the tokens an EP rank received
        # across those etp ranks (and reduce-scatter them on the way back) inside the node
        a2a = collective_time("all_to_all", e_a * (T / sp_div) * dispatch_copies(m, ep, r_ep)
                              * h, ep, r_ep, cl)
        e_gather = np.where(ep > 1, collective_time("all_gather",
                                                    e_a * T * etp / tp * m.top_k * h, etp,
                                                    ranks_per_node(1, etp, dom), cl), 0.0)
        ep_f_raw = ep_b_raw = 2 * a2a + 2 * e_gather
    else:
        ep_f_raw = ep_b_raw = np.zeros_like(tp)
    tp_exp = 1 - ov["tp"]
    ep_exp = 1 - ov["ep"]

    # with EP an MoE layer's tokens move by dispatch and the expert-TP gather (in ep_f_raw), so
    # of the layer's TP collectives only the attention block's half remains
    moe_tp_keep = np.where(ep > 1, 0.5, 1.0)

    def layer_time(fw: Any, bw: Any, rcx: Any, moe: bool) -> dict[str, Any]:
        e_f = ep_f_raw if moe else 0.0
        e_b = ep_b_raw if moe else 0.0
        k_tp = moe_tp_keep if moe else 1.0
        tp_f, tp_b, tp_rc = k_tp * tp_f_all, k_tp * tp_b_all, k_tp * tp_rc_all
        rc_ep = np.where(rc == 2, e_f, 0.0)
        rc_cp = np.where(rc == 2, cp_f, 0.0)
        if moe and job.ep_overlap:
            # DualPipe-style: a forward chunk of one micro-batch runs beside a backward chunk of
            # another, so each layer's all-to-alls hide behind the other chunk's compute
            x_f = np.maximum(0.0, e_f - bw)
            x_b = np.maximum(0.0, e_b + rc_ep - fw)
        else:
            x_f, x_b = ep_exp * e_f, ep_exp * (e_b + rc_ep)
        cp_raw = cp_f_raw + cp_b_raw + np.where(rc == 2, cp_f_raw, 0.0)
        return {
            "compute": fw + bw + rcx,
            "tp": tp_exp * (tp_f + tp_b + tp_rc),
            "cp": cp_f + cp_b + rc_cp,
            "ep": x_f + x_b,
            "fwd": fw + tp_exp * tp_f + cp_f + x_f,
            "bwd": bw + rcx + tp_exp * (tp_b + tp_rc) + cp_b + rc_cp + x_b,
            "raw_comm": tp_f + tp_b + tp_rc + cp_raw + (e_f + e_b + rc_ep),
            # communication that runs beside compute (hidden): it slows that compute down
            "hidden": (1 - tp_exp) * (tp_f + tp_b + tp_rc) + cp_raw - (cp_f + cp_b + rc_cp)
            + (e_f + e_b + rc_ep) - x_f - x_b,
        }

    # weight-gradient GEMMs do the forward GEMMs' FLOPs on the same shapes (W of DualPipe)
    w_dense = af1 + af2 + df_
    w_moe = (af1 + af2 + ef + sf + rf) if m.is_moe else w_dense
    Ld = layer_time(dense_f, dense_b, rc_dense, False)
    Lm = layer_time(moe_f, moe_b, rc_moe, True) if m.is_moe else Ld
    # of the compute: attention kernels and memory-bound kernels (shown in the derivation)
    attn_l = core_f + core_b + np.where((rc == 1) | (rc == 2), core_f, 0.0)
    Ld = {**Ld, "attn": attn_l, "ng": ng_df + ng_db + np.where(rc >= 2, ng_df, 0.0)}
    if m.is_moe:
        Lm = {**Lm, "attn": attn_l, "ng": ng_mf + ng_mb + np.where(rc == 2, ng_mf, 0.0)}
    else:
        Lm = Ld

    # --- stages: uneven split, the slowest stage sets the pace ---
    keys = np.stack([pp, vpp], axis=1).astype(np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    shape = np.array([stage_shape(stage_partition(m.n_layers, int(p), vpp=int(v),
                                                  last_extra=ms.last_extra_layers))
                      for p, v in uniq], dtype=np.float64)
    nf, nm, mi, nl = (shape[inv.ravel(), i] for i in range(4))
    if "n_first" in f:  # a stage split the layout fixes (--layout stages=...)
        nf, nm, mi, nl = (np.broadcast_to(f[k], pp.shape) for k in STAGE_COLS)
    one = pp == 1

    # a pipeline stage is priced as n copies of its heavier layer kind, judged on the whole
    # per-layer time (so every part comes from the same kind); dense-only or MoE-only models
    # use their one kind
    tot_d = Ld["compute"] + Ld["tp"] + Ld["cp"] + Ld["ep"]
    tot_m = Lm["compute"] + Lm["tp"] + Lm["cp"] + Lm["ep"]
    use_m = (ms.n_moe > 0) & ((ms.n_dense == 0) | (tot_m >= tot_d))

    def heavy(part: str) -> Any:
        return np.where(use_m, Lm[part], Ld[part])

    def stage(n: Any, part: str) -> Any:
        """A stage's per-micro-batch seconds of one part: heaviest layer kind unless pp == 1."""
        big = heavy(part)
        whole = ms.n_dense * Ld[part] + ms.n_moe * Lm[part]
        return np.where(one, whole, n * big)

    head_f, head_b = gemm3_of("output_head", T, m.vocab / tp, h)
    # the loss over the vocabulary: unfused fp32 passes over every logit (planner.toml [nongemm])
    logits = T * m.vocab / tp
    head_fw = head_f + logits * float(ng["loss_fwd_bytes_per_logit"]) / hbm
    head_bw = head_b + logits * float(ng["loss_bwd_bytes_per_logit"]) / hbm
    parts = ("compute", "tp", "cp", "ep")
    first = {k: stage(nf, k) for k in parts}
    last = {k: stage(nl, k) for k in parts}
    mid = {k: np.where(nm > 0, stage(nm, k), 0.0) for k in parts}
    last["compute"] = last["compute"] + head_fw + head_bw
    first["compute"] = np.where(one, first["compute"] + head_fw + head_bw, first["compute"])
    loss_ng = logits * float(ng["loss_fwd_bytes_per_logit"] + ng["loss_bwd_bytes_per_logit"]) / hbm
    t_first = sum(first[k] for k in parts)
    t_last = np.where(one, t_first, sum(last[k] for k in parts))
    t_mid = sum(mid[k] for k in parts)
    t_slow = np.maximum(np.maximum(t_first, t_last), t_mid)
    which = np.where(t_slow == t_first, 0, np.where(t_slow == t_mid, 1, 2))

    def pick(dct: str) -> dict[str, Any]:
        return {k: np.where(which == 0, first[k], np.where(which == 1, mid[k], last[k]))
                for k in parts}

    slow = pick("")
    n_slow = np.where(which == 0, nf, np.where(which == 1, nm, nl))
    fwd_mb = np.where(one, ms.n_dense * Ld["fwd"] + ms.n_moe * Lm["fwd"] + head_fw,
                      n_slow * heavy("fwd"))
    bwd_mb = t_slow - fwd_mb
    w_mb = np.where(one, ms.n_dense * w_dense + ms.n_moe * w_moe,
                    n_slow * np.where(use_m, w_moe, w_dense))
    dual = (job.schedule == "dualpipe") & (pp > 1)

    def bubble_of(t_mb: Any, f_mb: Any) -> Any:
        """Pipeline bubble: 1F1B (p - 1) / v t_mb (Narayanan 2021); DualPipe
        (p / 2 - 1)(F&B + B - 3 W) with F&B = F + B (the overlapped pair's compute, its
        communication hidden) (DeepSeek-V3 report, Table 2)."""
        b_mb = t_mb - f_mb
        return np.where(dual, (pp / 2 - 1) * np.maximum(0.0, f_mb + 2 * b_mb - 3 * w_mb),
                        (pp - 1) / vpp * t_mb)

    bubble = bubble_of(t_slow, fwd_mb)

    # pipeline send/recv on the critical path: v m + p - 1 crossings, forward and backward
    pp_intra = tp * cp * dp * pp <= dom
    pp_msg = e_a * T * h / sp_div
    t_p2p = collective_time("send_recv", pp_msg, 2.0, np.where(pp_intra, 2.0, 1.0), cl)
    pp_raw = np.where(pp > 1, 2 * (vpp * mb + pp - 1) * t_p2p, 0.0)
    pp_exposed = (1 - ov["pp"]) * pp_raw

    # --- memory (the shared model), then DP / ZeRO traffic from the same parameter counts ---
    opt = optimizer(job.optimizer_id)
    e_w = 2.0  # bf16 working weights (fp8 GEMMs cast on the fly)
    mem = _training_bytes(ms.sm, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, zero=zero, rc=rc,
                          sp=True,
                          micro_batch=b, seq_len=S, vpp=vpp, microbatches=mb, e_w=e_w, e_g=e_w,
                          k_opt=opt.bytes_per_param, n_first=nf, n_mid=nm, mid_index=mi,
                          n_last=nl, fused_attention=job.attention in FUSED_ATTENTION)
    if job.schedule == "dualpipe":  # two parameter copies, p + 1 micro-batches of activations
        extra = np.where(dual, np.asarray(mem["params"])
                         + np.asarray(mem["activations"]) / np.maximum(pp, 1), 0.0)
        mem = {**mem, "params": np.where(dual, 2 * np.asarray(mem["params"]), mem["params"]),
               "activations": np.where(dual, np.asarray(mem["activations"]) * (pp + 1) / pp,
                                       mem["activations"]),
               "total": np.asarray(mem["total"]) + extra}
    frac = job.memory_fraction or assumption("training_memory_fraction").value
    cap = gpu.hbm_bytes * frac
    # parameters held by a GPU of the slowest stage (unsharded count)
    pc = ms.sm.pc
    lay_d = ms.sm.big_split / tp + ms.sm.big_rep
    lay_e = ms.sm.big_exp / (etp * ep)
    head_p = (pc.lm_head or pc.embedding) / tp
    # (the final norm sits with the output head, as in the memory model)
    dense_local = np.where(one, ms.sm.sum_split / tp + ms.sm.sum_rep
                           + (pc.embedding + pc.lm_head) / tp + pc.final_norm,
                           n_slow * lay_d + np.where(which == 0, pc.embedding / tp,
                                                     np.where(which == 2, head_p + pc.final_norm,
                                                              0.0)))
    exp_local = np.where(one, ms.sm.sum_exp / (etp * ep), n_slow * lay_e)
    group = dp * cp
    egroup = tp * group / (etp * ep)  # ranks holding the same expert shard (tp x dp x cp / etp ep)
    dp_intra = tp * cp * dp <= dom
    r_dp = ranks_per_node(tp, group, dom)
    r_edp = ranks_per_node(np.where(etp == tp, tp, etp * ep), egroup, dom)
    e_red = float(ov["grad_reduce_bytes"])
    g_bytes = dense_local * e_red
    ge_bytes = exp_local * e_red
    rs = (collective_time("reduce_scatter", g_bytes, group, r_dp, cl)
          + collective_time("reduce_scatter", ge_bytes, egroup, r_edp, cl))
    ag = (collective_time("all_gather", dense_local * e_w, group, r_dp, cl)
          + collective_time("all_gather", exp_local * e_w, egroup, r_edp, cl))
    ar = 2 * rs  # a ring all-reduce is a reduce-scatter then an all-gather of the same size
    bucket = float(ov["dp_bucket_bytes"])
    last_bucket = np.minimum(1.0, bucket / np.maximum(g_bytes + ge_bytes, 1.0))
    # ZeRO 0: all-reduce in the last micro-batch's backward; 1-2: reduce-scatter there and the
    # parameter all-gather in the first forward; 3: gathers and reduce-scatter every micro-batch
    # ZeRO 2 shards the gradients, so it reduce-scatters in every micro-batch's backward
    grad_sync = np.where(zero == 0, ar, rs)
    n_sync = np.where(zero == 2, mb, 1.0)
    dp_raw_01 = n_sync * grad_sync + np.where(zero >= 1, ag, 0.0)
    exp01 = (n_sync * np.maximum(grad_sync * last_bucket, grad_sync - bwd_mb)
             + np.where(zero >= 1, np.maximum(ag * last_bucket, ag - fwd_mb), 0.0))
    # ZeRO-3: per micro-batch, gather for forward and backward and reduce-scatter the grads
    z3_raw = mb * (2 * ag + rs)
    z3_exposed = mb * (np.maximum(ag * last_bucket, ag - fwd_mb)
                       + np.maximum((ag + rs) * last_bucket, ag + rs - bwd_mb))
    dp_raw = np.where(zero >= 3, z3_raw, dp_raw_01)
    dp_exposed = np.where(zero >= 3, z3_exposed, exp01)
    # (folded experts can be replicated over TP ranks even where dp x cp = 1)
    synced = (group > 1) | (egroup > 1)
    dp_raw = np.where(synced, dp_raw, 0.0)
    dp_exposed = np.where(synced, dp_exposed, 0.0)

    # --- optimizer step: read and write the states, read gradients, write weights ---
    p_opt = np.asarray(mem["optimizer"]) / opt.bytes_per_param
    t_opt = p_opt * (2 * opt.bytes_per_param + 2 * e_w) / hbm
    if fp8:  # bf16 weights cast (and transposed) to fp8 once per step (Transformer Engine)
        t_opt = t_opt + (dense_local + exp_local) * float(ng["fp8_weight_cast_bytes"]) / hbm

    # weight-gradient accumulation: without Megatron's fused wgrad GEMM (which accumulates into
    # the fp32 main gradient itself), every micro-batch adds each 16-bit weight gradient into it
    # in a separate pass (planner.toml [nongemm] grad_accum_bytes per local parameter); ZeRO-3
    # reduce-scatters each micro-batch's gradients instead, so it has no such pass
    t_acc = np.zeros_like(t_slow)
    if not job.grad_accum_fusion:
        t_acc = np.where(zero >= 3, 0.0, (dense_local + exp_local)
                         * float(ng["grad_accum_bytes"]) / hbm)
    t_slow = t_slow + t_acc
    bubble = bubble_of(t_slow, fwd_mb)
    slow["compute"] = slow["compute"] + t_acc
    compute = mb * slow["compute"]
    has_head = one | (which == 2)
    attn_s = mb * np.where(one, m.n_layers * attn_l, n_slow * attn_l)
    ng_s = mb * (np.where(one, ms.n_dense * Ld["ng"] + ms.n_moe * Lm["ng"],
                          n_slow * heavy("ng"))
                 + np.where(has_head, loss_ng, 0.0) + t_acc)
    tp_t, cp_t, ep_t = mb * slow["tp"], mb * slow["cp"], mb * slow["ep"]
    # compute that runs beside a collective is slowed down (SMs, HBM and power shared with the
    # communication kernels): sigma x the hidden communication time, added to the step
    sigma = float(ov["compute_slowdown"])
    hidden_layer = np.where(one, ms.n_dense * Ld["hidden"] + ms.n_moe * Lm["hidden"],
                            n_slow * heavy("hidden"))
    hidden = (mb * hidden_layer + (pp_raw - pp_exposed) + np.maximum(0.0, dp_raw - dp_exposed))
    t_ov = sigma * hidden
    step = mb * t_slow + bubble + pp_exposed + dp_exposed + t_opt + t_ov
    bubble_lower = bubble * slow["compute"] / np.maximum(t_slow, 1e-30)
    lower = compute + bubble_lower + t_opt
    raw_layer = np.where(one, ms.n_dense * Ld["raw_comm"] + ms.n_moe * Lm["raw_comm"],
                         n_slow * heavy("raw_comm"))
    upper_mb = slow["compute"] + raw_layer
    upper = mb * upper_mb + (pp - 1) / vpp * upper_mb + pp_raw + dp_raw + t_opt

    # share of a layer's TP collectives the slowest stage runs (moe_tp_keep, see layer_time)
    tp_share = np.where(one, (ms.n_dense + ms.n_moe * moe_tp_keep) / m.n_layers,
                        np.where(ms.n_moe > 0, moe_tp_keep, 1.0)) if m.is_moe else 1.0

    # FLOPs: model (PaLM convention) and hardware (+ recompute)
    tokens = float(job.tokens_per_step)
    fpt = model_flops_per_token(m, job.seq_len)
    model_flops = fpt * tokens
    attn_fwd_tok = 2 * m.n_layers * S * (ms.qk_dim + ms.v_dim)
    op_tok = 2 * m.n_layers * m.hidden * (m.kv_dim + ms.attn_out_k + ms.ffn)
    rc_tok = np.where(rc == 2, fpt / 3, np.where(rc == 1, attn_fwd_tok,
                                                 np.where(rc == 3, op_tok, 0.0)))
    hw_flops = (fpt + rc_tok) * tokens
    n = float(cl.n_gpus)
    return {
        "step_time_s": step,
        "lower_s": lower,
        "upper_s": upper,
        "compute_s": compute,
        "attention_s": attn_s,
        "nongemm_s": ng_s,
        "tp_s": tp_t,
        "cp_s": cp_t,
        "ep_s": ep_t,
        "pp_s": pp_exposed,
        "dp_s": dp_exposed,
        "bubble_s": bubble,
        "overlap_s": t_ov,
        "optimizer_s": t_opt,
        "grad_acc_s": mb * t_acc,
        "tp_raw_s": mb * n_slow * tp_share * (tp_f_all + tp_b_all + tp_rc_all),
        "pp_raw_s": pp_raw,
        "dp_raw_s": dp_raw,
        "t_slow_s": t_slow,
        "fwd_mb_s": fwd_mb,
        "w_mb_s": w_mb,
        "bwd_mb_s": bwd_mb,
        "slow_stage": which,
        "n_first": nf, "n_mid": nm, "n_last": nl, "mid_index": mi,
        "tokens_per_s": tokens / step,
        "tokens_per_s_per_gpu": tokens / step / n,
        "tflops_per_gpu": model_flops / step / n,
        "mfu": model_flops / step / n / peak,
        "hfu": hw_flops / step / n / peak,
        "model_flops": np.full_like(step, model_flops),
        "hw_flops": hw_flops,
        "memory_per_gpu_bytes": np.asarray(mem["total"]),
        "mem_params": np.asarray(mem["params"]),
        "mem_grads": np.asarray(mem["grads"]),
        "mem_optimizer": np.asarray(mem["optimizer"]),
        "mem_activations": np.asarray(mem["activations"]),
        "capacity_bytes": np.full_like(step, cap),
        "fits": np.asarray(mem["total"]) <= cap,
        # traffic per step per GPU on each tier, for the explanation
        "tp_bytes": mb * n_slow * tp_share * (TP_FWD_COLLECTIVES
                                              * (1 + (rc == 2) + 0.5 * (rc == 3))
                                              + TP_BWD_COLLECTIVES)
        * (tp - 1) / tp * act_bytes,
        "cp_bytes": mb * n_slow * 3 * (cp - 1) * kv_bytes,
        "ep_bytes": mb * n_slow * (4 + 2 * (rc == 2)) * (ep - 1) / ep * e_a * T / sp_div * h
        * dispatch_copies(m, ep, ranks_per_node(np.where(etp == tp, tp * cp, etp), ep, dom))
        if m.is_moe else np.zeros_like(step),
        "pp_bytes": np.where(pp > 1, 2 * vpp * mb * pp_msg, 0.0),
        # the dense shard moves over its dp x cp group, the expert shard over its own group
        "dp_bytes": sum(np.where(grp > 1, (grp - 1) / grp * np.where(
            zero >= 3, mb * (2 * p_loc * e_w + gb),
            np.where(zero == 0, 2, np.where(zero == 2, mb, 1)) * gb
            + np.where((zero >= 1) & (zero < 3), p_loc * e_w, 0.0)), 0.0)
            for grp, p_loc, gb in ((group, dense_local, g_bytes), (egroup, exp_local, ge_bytes))),
        "tp_intra": inner_tp, "cp_intra": cp_intra, "pp_intra": pp_intra, "dp_intra": dp_intra,
        "ep_intra": (np.where(etp == tp, tp * cp, etp) * ep <= dom),
    }


# --- the search -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    """One evaluated layout (scalars), in the issue's JSON keys."""

    layout: Any  # analytic/layout.py TrainLayout (reads as a dict of its keys)
    values: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        v = self.values
        return {
            "layout": self.layout.as_dict(),
            "step_time_s": v["step_time_s"],
            "tokens_per_s": v["tokens_per_s"],
            "tokens_per_s_per_gpu": v["tokens_per_s_per_gpu"],
            "tflops_per_gpu": v["tflops_per_gpu"],
            "mfu": v["mfu"],
            "hfu": v["hfu"],
            "memory_per_gpu_bytes": v["memory_per_gpu_bytes"],
            "breakdown_s": breakdown(v),
            "lower_bound_s": v["lower_s"],
            "upper_bound_s": v["upper_s"],
        }


def breakdown(v: dict[str, Any]) -> dict[str, float]:
    return {"compute": v["compute_s"], "tp_exposed": v["tp_s"], "cp_exposed": v["cp_s"],
            "ep_exposed": v["ep_s"], "pp_exposed": v["pp_s"], "dp_exposed": v["dp_s"],
            "bubble": v["bubble_s"], "optimizer": v["optimizer_s"],
            "overlap_slowdown": v["overlap_s"]}


@dataclass(frozen=True)
class PlanResult:
    job: Job
    cluster: Cluster
    rows: list[PlanRow]  # best first (fitting layouts by throughput)
    pareto: list[PlanRow]
    candidates_evaluated: int
    valid: int
    fitting: int
    rejected: dict[str, int]
    grid_total: int
    stage_layers: tuple[int, ...] = field(default=())

    @property
    def best(self) -> PlanRow:
        return self.rows[0]


def row_at(cols: dict[str, np.ndarray], res: dict[str, np.ndarray], i: int,
           stages: tuple[int, ...] | None = None) -> PlanRow:
    from .layout import TrainLayout

    lay = TrainLayout(**{k: int(cols[k][i]) for k in ("tp", "pp", "dp", "cp", "ep", "etp",
                                                      "zero", "vpp", "micro_batch")},
                      recompute=PLAN_RECOMPUTE[int(cols["rc"][i])], stages=stages)
    vals = {k: (v[i].item() if isinstance(v, np.ndarray) else v) for k, v in res.items()}
    vals["microbatches"] = int(cols["microbatches"][i])
    return PlanRow(lay, vals)


def search(job: Job, cl: Cluster, fixed: dict[str, Any] | None = None, top: int = 5) -> PlanResult:
    """Enumerate, price and rank every valid layout; BadInput when none is valid or fits."""
    fixed = dict(fixed or {})
    grid = layout_grid(job, cl, fixed)
    cols = grid.cols
    n_valid = int(cols["tp"].size)
    if n_valid == 0:
        raise BadInput(_nothing_valid(job, cl, fixed, grid))
    res = evaluate(job, cl, cols)
    fits = res["fits"]
    if not fits.any():
        raise BadInput(_nothing_fits(job, cl, fixed, cols, res))
    idx = np.flatnonzero(fits)
    order = idx[np.lexsort((res["memory_per_gpu_bytes"][idx], -res["tokens_per_s"][idx]))]
    st = fixed.get("stages")
    rows = [row_at(cols, res, int(i), st) for i in order[: top + 1]]
    # Pareto front: throughput against memory headroom
    head = res["capacity_bytes"][idx] - res["memory_per_gpu_bytes"][idx]
    thr = res["tokens_per_s"][idx]
    o = np.lexsort((-head, -thr))
    front, best_head = [], -np.inf
    for j in o:
        if head[j] > best_head:
            front.append(int(idx[j]))
            best_head = head[j]
    pareto = [row_at(cols, res, i, st) for i in front[:8]]
    b = rows[0].layout
    sl = st or stage_partition(job.model.n_layers, b["pp"], vpp=b["vpp"],
                               last_extra=model_shapes(job.model).last_extra_layers)
    return PlanResult(job, cl, rows, pareto, grid.total, n_valid, int(fits.sum()),
                      grid.rejected, grid.total, sl)


def _nothing_valid(job: Job, cl: Cluster, fixed: dict[str, Any], grid: Grid) -> str:
    # the rule that removed the last candidates is the one to name
    first = list(grid.rejected)[-1] if grid.rejected else "no layout"
    hint = ""
    if fixed:
        free = {k: v for k, v in fixed.items() if k != "recompute"}
        try:
            near = layout_grid(job, cl, {k: v for k, v in fixed.items()
                                         if k in ("recompute", "zero")})
            if near.cols["tp"].size:
                res = evaluate(job, cl, near.cols)
                score = sum(np.abs(np.log2(near.cols[k] / v)) for k, v in free.items()
                            if k in near.cols and isinstance(v, int) and v > 0)
                score = score + np.where(res["fits"], 0, 100)
                i = int(np.argmin(score))
                r = row_at(near.cols, res, i).layout
                hint = "; nearest valid layout: " + ",".join(f"{k}={r[k]}" for k in LAYOUT_KEYS)
        except BadInput:
            pass
    return f"no valid layout: {first}{hint}"


def _nothing_fits(job: Job, cl: Cluster, fixed: dict[str, Any], cols: dict[str, np.ndarray],
                  res: dict[str, np.ndarray]) -> str:
    i = int(np.argmin(res["memory_per_gpu_bytes"]))
    need = res["memory_per_gpu_bytes"][i]
    cap = res["capacity_bytes"][i]
    lay = row_at(cols, res, i).layout
    more = math.ceil(cl.n_gpus * need / cap / cl.gpus_per_node) * cl.gpus_per_node
    tips = [f"about {more:,} GPUs"]
    if "recompute" in fixed and fixed["recompute"] != "full":
        tips.append("recompute=full")
    if "zero" in fixed and fixed["zero"] < 3:
        tips.append("a higher ZeRO stage")
    # dp follows from the others and etp is optional, so nine keys (eight without dp) pin a layout
    given = len(set(fixed) - {"etp", "dp"})
    what = "the given layout" if given >= len(LAYOUT_KEYS) - 2 else "the smallest layout"
    return (f"does not fit in memory: {what} "
            f"({','.join(f'{k}={lay[k]}' for k in LAYOUT_KEYS)}) needs {need / 1e9:.1f} GB per "
            f"GPU, usable {cap / 1e9:.1f} GB; try {' or '.join(tips)}")


def evaluate_one(job: Job, cl: Cluster, layout: dict[str, Any]) -> PlanRow:
    """Price one complete layout (the keys of LAYOUT_KEYS; an MoE model's etp, when not given,
    is searched); BadInput if invalid."""
    res = search(job, cl, layout, top=0)
    return res.best


def cite_key(key: str) -> str:
    return cite(key)


# --- the worked derivation of one shown layout ---------------------------------------------------------


def derive_row(res: PlanResult, row: PlanRow) -> Any:
    """The step time, throughput and MFU of one layout as a worked derivation (checked against
    the vectorised values)."""
    from ..derive import Derivation

    v, lay, job, cl = row.values, row.layout, res.job, res.cluster
    m = job.model
    gpu = cl.gpu
    mb = v["microbatches"]
    stage = ("first", "middle", "last")[int(v["slow_stage"])] if lay["pp"] > 1 else "only"
    d = Derivation(f"Step time of {m.id} on {cl.n_gpus:,} x {gpu.id}: "
                   + ", ".join(f"{k}={lay[k]}" for k in LAYOUT_KEYS))
    g = constants()["gemm"]
    T = lay["micro_batch"] * job.seq_len / lay["cp"]
    e_mlp = float(gemm_efficiency(np.float64(T), np.float64(model_shapes(m).up_k * m.ffn
                                                            / lay["tp"]),
                                  np.float64(m.hidden), gpu, job.precision))
    d.given("GEMM ceiling (shape-free)", "eta_0", gemm_ceiling(), "1", cite(g["anchor_source"]),
            note=g["anchor_note"])
    if gpu.sustained_basis == "gemm":
        d.given(f"{gpu.id}: sustained over short-burst throughput of large GEMMs (measured on "
                "this GPU's die)", "f_clk", gpu.sustained_fraction, "1",
                gpu.source_of("sustained_gemm_ratio"),
                note="measured with every GPU of the node busy; eta_0 comes from short runs, a "
                     "training step is one long power-saturated run")
    elif gpu.sustained_basis == "clock":
        d.given(f"{gpu.id}: clock sustained under dense math over the clock its peak is quoted "
                "at", "f_clk", gpu.sustained_fraction, "1", gpu.source_of("sustained_clock_hz"),
                note=f"{gpu.sustained_clock_hz / 1e9:.3f} / {gpu.peak_clock_hz / 1e9:.2f} GHz; "
                     "eta_0 comes from short runs at the quoted clock")
    else:
        d.given(f"{gpu.id}: sustained share of a burst GEMM rate", "f_clk", 1.0, "1",
                cite("scalemodel-assumption"),
                note="not measured for this GPU (no sustained_gemm_ratio or sustained clock in "
                     "its TOML): 1 assumed, so its GEMMs may be priced fast")
    if gpu.gemm_dtype_factor(job.precision) != 1.0:
        d.given(f"{gpu.id}: {job.precision} GEMM efficiency over bf16's (each against its own "
                "peak)", "k_fp8", gpu.gemm_dtype_factor(job.precision), "1",
                gpu.source_of("fp8_gemm_ratio"),
                note="the output head, an MoE router and the attention matmuls stay bf16")
    d.given(f"efficiency of the MLP up-projection GEMM ({T:.0f} x {m.hidden})", "eta_mlp",
            e_mlp, "1", cite(g["tile_source"]),
            note="eta_0 x f_clk" + (" x k_fp8" if gpu.gemm_dtype_factor(job.precision) != 1.0
                                    else "")
                 + f" x tile padding and wave quantization on {gpu.sm_count} SMs, or the HBM "
                 "roofline when thin")
    if job.attention in FUSED_ATTENTION:
        a = constants()["attention"]
        src = a["a100_source"] if gpu.arch == "ampere" else a["h100_source"]
        if job.attention == "triton":
            d.given("Triton FlashAttention: time over the FlashAttention-2 curves", "k_att",
                    attention_slowdown("triton"), "1", cite(a["triton_source"]),
                    note=a["triton_note"])
        elif job.attention == "flash3":
            d.given("FlashAttention-3 / cuDNN: forward time over the FlashAttention-2 curve",
                    "k_att", attention_slowdown("flash3"), "1", cite(a["flash3_source"]),
                    note=a["flash3_note"])
        S, cp = job.seq_len, lay["cp"]
        d.given(f"FlashAttention forward efficiency, causal call of {S // cp:,} tokens", "eta_af",
                attention_efficiency(gpu, S / cp), "1", cite(src),
                note=a["a100_note"] if gpu.arch == "ampere" else a["h100_note"])
        d.given("FlashAttention backward efficiency, same call", "eta_ab",
                attention_efficiency(gpu, S / cp, backward=True), "1", cite(src))
        if cp > 1:
            d.given(f"unmasked ring-attention calls ({S / cp / math.sqrt(2):,.0f}-token "
                    "geometric mean), forward efficiency", "eta_ar",
                    attention_efficiency(gpu, S / cp / math.sqrt(2), causal=False), "1",
                    cite(a["cp_source"]), note=a["cp_note"])
    d.given(f"compute per micro-batch on the slowest ({stage}) stage", "t_c",
            v["compute_s"] / mb, "s",
            note="every GEMM forward + dgrad + wgrad at its shape's efficiency, attention, "
                 "memory-bound kernels, recompute")
    ng = constants()["nongemm"]
    d.given("  of which attention kernels", "t_att", v["attention_s"] / mb, "s",
            note="causal half of the score FLOPs at the efficiencies above; backward "
                 f"{constants()['attention']['backward_flop_factor']:g}x"
            + (" (times k_att)" if job.attention in ("triton", "flash3") else "")
            if job.attention in FUSED_ATTENTION
            else "unfused: batched GEMMs and score passes in HBM")
    d.given("  of which memory-bound kernels (roofline on HBM bytes)", "t_ng",
            v["nongemm_s"] / mb, "s", cite(ng["loss_source"]),
            note="norms" + (" (and QK-norm)" if m.qk_norm else "")
                 + ", residual adds, activation function, rotary, dropout masks, fp8 casts "
                 f"and the loss ({ng['loss_fwd_bytes_per_logit']} + "
                 f"{ng['loss_bwd_bytes_per_logit']} bytes per logit) at "
                 f"{g['hbm_efficiency']} of {gpu.hbm_bytes_per_s / 1e12:.2f} TB/s"
                 + ("; eager mode: RMSNorm, rotary, SwiGLU op by op, K/V copied per query head "
                    "(planner.toml [nongemm] eager_*)" if job.kernels == "eager" else "")
                 + ("; includes the gradient-accumulation pass t_acc" if not job.grad_accum_fusion
                    else ""))
    if not job.grad_accum_fusion:
        d.given("  of which adding weight gradients into the fp32 main gradient (no "
                "accumulation fusion)", "t_acc", v["grad_acc_s"] / mb, "s",
                cite(ng["grad_accum_source"]),
                note=f"{ng['grad_accum_bytes']} bytes per local parameter per micro-batch")
    d.given("exposed TP/SP collectives per micro-batch", "t_tp", v["tp_s"] / mb, "s",
            note="4 forward + 6 backward all-gather/reduce-scatter of s b h per layer, priced by "
                 "the collectives engine (NCCL-like choice)")
    d.given("exposed ring-attention (CP) traffic per micro-batch", "t_cp", v["cp_s"] / mb, "s")
    if m.is_moe:
        folded = lay["etp"] != lay["tp"]
        d.given("MoE all-to-all per micro-batch", "t_ep", v["ep_s"] / mb, "s",
                note=(f"experts whole on a rank (etp 1), EP{lay['ep']} drawn from the tp x dp x cp "
                      "ranks (MoE parallel folding): dispatch and combine only"
                      if folded else
                      f"experts split over the {lay['tp']} TP ranks (etp = tp): dispatch and "
                      "combine, then the tokens gathered over the TP group")
                if lay["ep"] > 1 else "")
    else:
        d.given("MoE all-to-all per micro-batch (dense model)", "t_ep", 0.0, "s")
    d.calc("one micro-batch through the slowest stage", "t_mb", "t_c + t_tp + t_cp + t_ep", "s",
           check=v["t_slow_s"], rel_tol=1e-6)
    d.given("micro-batches per step per pipeline", "m", mb, "1")
    d.given("pipeline stages", "p", lay["pp"], "1")
    d.given("interleaved chunks per stage", "v", lay["vpp"], "1")
    if job.schedule == "dualpipe" and lay["pp"] > 1:
        d.given("forward of one micro-batch on the slowest stage", "t_f", v["fwd_mb_s"], "s")
        d.given("its weight-gradient GEMMs (the forward GEMMs' FLOPs)", "t_w", v["w_mb_s"], "s")
        d.calc("DualPipe bubble, (p/2 - 1)(F&B + B - 3W) with F&B = F + B", "t_bub",
               "(p / 2 - 1) * max(0, t_f + 2 * (t_mb - t_f) - 3 * t_w)", "s",
               check=v["bubble_s"], rel_tol=1e-6, source=cite("deepseek-2024-v3-dualpipe"),
               note="two parameter copies and p + 1 micro-batches of activations are held")
    else:
        d.calc("pipeline bubble", "t_bub", "(p - 1) / v * t_mb", "s", check=v["bubble_s"],
               rel_tol=1e-6, source=cite("narayanan-2021-megatron"))
    d.given("exposed pipeline send/recv", "t_pp", v["pp_s"], "s",
            note="2 (v m + p - 1) crossings on the critical path")
    d.given("exposed DP gradient / ZeRO traffic", "t_dp", v["dp_s"], "s",
            note="overlapped with backward (gradients) and forward (parameters); "
                 "the last bucket and any excess stay exposed")
    d.given("optimizer step", "t_opt", v["optimizer_s"], "s",
            note="states read and written once at HBM speed")
    ov = constants()["overlap"]
    d.given("compute slowdown beside a running collective", "sigma", ov["compute_slowdown"], "1",
            cite(ov["compute_slowdown_source"]), note=ov["compute_slowdown_note"])
    d.given("communication hidden behind compute per step", "t_hid",
            v["overlap_s"] / ov["compute_slowdown"] if ov["compute_slowdown"] else 0.0, "s")
    d.calc("overlap slowdown", "t_ov", "sigma * t_hid", "s", check=v["overlap_s"], rel_tol=1e-6)
    step = d.calc("step time", "t_step", "m * t_mb + t_bub + t_pp + t_dp + t_opt + t_ov", "s",
                  check=v["step_time_s"], rel_tol=1e-6)
    d.given("tokens per step", "D", job.tokens_per_step, "token")
    d.calc("throughput", "X", "D / t_step", "token/s", check=v["tokens_per_s"], rel_tol=1e-6)
    d.given("model FLOPs per token (6 N + attention, PaLM convention)", "F",
            model_flops_per_token(m, job.seq_len), "FLOP", cite("chowdhery-2022-palm"))
    d.given("GPUs", "N", cl.n_gpus, "1")
    d.given(f"{gpu.id} dense {job.precision} peak", "R", gpu.peak_flop_per_s(job.precision),
            "FLOP/s", gpu.source_of(f"flop_per_s.{job.precision}"))
    d.calc("model FLOP/s per GPU", "Q", "F * D / t_step / N", "FLOP/s",
           check=v["tflops_per_gpu"], rel_tol=1e-6)
    d.calc("MFU", "MFU", "Q / R", "1", check=v["mfu"], rel_tol=1e-6)
    d.given("compute-only time per step (lower bound: all communication hidden)", "t_lo",
            v["lower_s"], "s")
    d.given("time with nothing overlapped (upper bound)", "t_hi", v["upper_s"], "s")
    d.calc("estimate within the bounds", "t_est", "min(max(t_step, t_lo), t_hi)", "s",
           check=v["step_time_s"], rel_tol=1e-6)
    del step
    return d


def schedule_1f1b(p: int, m: int, t_f: float, t_b: float) -> list[tuple[int, int, str, float,
                                                                           float]]:
    """The 1F1B schedule as (stage, micro-batch, "F"|"B", start, end), for the Gantt chart.

    Stage s runs min(p - s - 1, m) warm-up forwards, then alternates one forward and one
    backward, then drains its backwards; each op starts when its stage is free and its input
    (the previous stage's forward, the next stage's backward) has arrived.
    """
    order: list[list[tuple[str, int]]] = []
    for s in range(p):
        warm = min(p - s - 1, m)
        ops = [("F", i) for i in range(warm)]
        f_next, b_next = warm, 0
        while b_next < m:
            if f_next < m:
                ops.append(("F", f_next))
                f_next += 1
            ops.append(("B", b_next))
            b_next += 1
        order.append(ops)
    done: dict[tuple[str, int, int], float] = {}
    free = [0.0] * p
    pos = [0] * p
    out = []
    remaining = sum(len(o) for o in order)
    while remaining:
        progressed = False
        for s in range(p):
            if pos[s] >= len(order[s]):
                continue
            kind, i = order[s][pos[s]]
            if kind == "F":
                dep = 0.0 if s == 0 else done.get(("F", s - 1, i))
            else:
                dep = done.get(("F", s, i)) if s == p - 1 else done.get(("B", s + 1, i))
            if dep is None:
                continue
            start = max(free[s], dep)
            end = start + (t_f if kind == "F" else t_b)
            done[(kind, s, i)] = end
            free[s] = end
            out.append((s, i, kind, start, end))
            pos[s] += 1
            remaining -= 1
            progressed = True
        if not progressed:  # pragma: no cover - the order above is always feasible
            break
    return out
