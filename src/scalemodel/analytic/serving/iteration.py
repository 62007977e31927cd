"""What one engine iteration costs: prefill chunks, decode tokens and mixed batches, priced by
the step model's parts (analytic/step/) at the batch's token count.

Per layer on one rank, a batch of T tokens (decode tokens and prefill chunk tokens together):

* GEMMs (step/gemm.py ``gemm_time``, its tiles-in-waves efficiency): the attention projections,
  the MLP (or the router, the local experts and the shared experts), each on its own roofline
  max(2 M N K / (pi eta), bytes / (beta eta_m)) with the serving precision's bytes per weight and
  per activation (weight-only INT4 reads 0.52 B per weight and runs the 16-bit tensor cores);
* memory-bound kernels (step/elementwise.py ``nongemm_time``, the forward part);
* attention over paged KV: a prefill chunk of c tokens after p cached ones is a causal call of
  c (p + c / 2) query-key pairs at the fused kernel's efficiency for p + c (step/attention.py
  ``attention_efficiency``); a decode token reads its sequence's whole KV from HBM, the larger of
  that read at the memory-bound kernels' HBM efficiency and its FLOPs; the read is counted once
  per KV head on the rank, or once per query head where the engine's decode kernel runs one
  thread block per query head (its profile's ``decode_kv_reads``, :func:`decode_kv_read_factor`);
* TP: two all-reduces of the layer's T x h activations (step/comm.py ``collective_time``, the
  collectives engine's NCCL choice);
* MoE: the router, the experts some token reached (each with its tokens; with experts over EP
  ranks the busiest rank's share, the routing tail of analytic/moe_serving.py at the batch's
  copies; where the engine's profile names its grouped GEMM kernel, each of those expert GEMMs
  also pays that kernel's measured per-expert cost, step/gemm.py ``grouped_overhead``), the
  shared experts, and the permutation of the routed copies in HBM;
* kernel boundaries: where the engine's profile counts the kernels a decoder layer runs one
  after another on its critical path (``layer_kernels``), each adds the GPU's idle time per
  kernel boundary (:func:`layer_launch_s`), whatever the batch;
* PP: the batch runs as pp micro-batches through pp stages, so a sequence advances one token per
  pp stage times of T / pp tokens, plus the pp - 1 activation sends;
* per iteration: the output head and sampling for every sequence that emits a token (where the
  engine all-gathers the vocabulary-parallel logits, as TensorRT-LLM's engines do, that gather
  and sampling over the whole row on every rank);
* the engine's host (CPU) work per iteration (its profile): ``host_s_per_iter`` plus
  ``host_s_per_seq`` per sequence that emits a token. An engine whose loop prepares iteration
  n + 1 while the GPU runs n (``host_overlap``: TensorRT-LLM's PyTorch overlap scheduler,
  SGLang's overlap scheduler) takes max(GPU, host) per iteration; a loop that waits for the GPU
  before it does its host work takes their sum. A loop that schedules once for several
  iterations (``host_iters_per_schedule``: vLLM's multi-step scheduling, ``--num-scheduler-steps``)
  spreads that host work over them. ``overhead_s`` is host time the GPU always waits
  for, added on top (the profiles' former single field, kept as that: a profile that sets only
  it prices as before).

All GEMM, elementwise and collective terms are tabulated once per layout over every token count
the engine's budget allows, so an iteration costs table look-ups plus the attention sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ...errors import BadInput
from ...specs import GPUSpec, ModelSpec, dtype
from ...specs.sources import load_toml


@cache
def serving_constants() -> dict[str, Any]:
    return load_toml("serving.toml")


@dataclass(frozen=True)
class Precision:
    """A serving precision: bytes per weight and per activation element, the GEMM path."""

    name: str
    weight_bytes: float
    activation_bytes: float
    gemm_dtype: str
    kv_dtype: str  # the KV dtype engines use for such checkpoints unless told otherwise
    source: str
    # how the engine's quantizer stores a 16-bit checkpoint at this precision (specs.quant
    # WeightQuant fields; empty: stored as it is)
    checkpoint: tuple[tuple[str, Any], ...] = ()
    # bytes per parameter trtllm-bench's tuning estimate takes for this precision where it
    # differs from weight_bytes (tuning.py BYTES_PER_ELEM); 0: weight_bytes
    bench_weight_bytes: float = 0.0


PRECISIONS = ("bf16", "fp8", "int4", "fp4")
# what a search tries when no --precision is given: fp4 (NVFP4 W4A4) only when asked
SEARCHED_PRECISIONS = ("bf16", "fp8", "int4")


def precision(name: str) -> Precision:
    t = serving_constants()["precisions"].get(name)
    if t is None:
        raise BadInput(f"--precision: {name!r} is not one of {', '.join(PRECISIONS)}")
    return Precision(name, float(t["weight_bytes"]), float(t["activation_bytes"]),
                     str(t["gemm_dtype"]), str(t["kv_dtype"]), str(t["source"]),
                     tuple(sorted(dict(t.get("checkpoint", {})).items())),
                     float(t.get("bench_weight_bytes", 0.0)))


CHECKPOINT_FORMAT_FIELDS = ("method", "weight_bits", "strategy", "group_size", "scale_bytes")


def read_checkpoint(key: str, t: dict[str, Any]) -> Any:
    """A serving.toml [checkpoints.KEY] entry as a specs.quant WeightQuant: its linears at
    ``format``, the modules its ``exclude_modules`` patterns match (fnmatch on the HF module
    name) 16-bit. One line for an entry that cannot be read."""
    from ...specs.quant import WeightQuant

    where = f"serving.toml checkpoints.{key}"
    fmt = t.get("format")
    if not isinstance(fmt, dict) or set(fmt) != set(CHECKPOINT_FORMAT_FIELDS):
        raise BadInput(f"{where}: format must be a table of {', '.join(CHECKPOINT_FORMAT_FIELDS)}")
    if fmt["strategy"] not in ("tensor", "channel", "group", "block"):
        raise BadInput(f"{where}: format.strategy {fmt['strategy']!r} is not one of tensor, "
                       "channel, group, block")
    for f in ("weight_bits", "scale_bytes", "group_size"):
        v = fmt[f]
        num = not isinstance(v, bool) and isinstance(v, (int, float))
        if not num or not (v > 0 if f == "weight_bits" else v >= 0):
            raise BadInput(f"{where}: format.{f} must be a number "
                           f"{'above 0' if f == 'weight_bits' else '>= 0'}, got {v!r}")
    ex = t.get("exclude_modules")
    if not isinstance(ex, list) or not all(isinstance(x, str) and x for x in ex):
        raise BadInput(f"{where}: exclude_modules must be a list of module-name patterns")
    if not isinstance(t.get("model"), str) or t.get("precision") not in PRECISIONS:
        raise BadInput(f"{where}: needs model (a model id) and precision (one of "
                       f"{', '.join(PRECISIONS)})")
    return WeightQuant(str(fmt["method"]), float(fmt["weight_bits"]), str(fmt["strategy"]),
                       int(fmt["group_size"]), scale_bytes=float(fmt["scale_bytes"]),
                       quantize_head=True, ignore=tuple(ex), ignore_rule="glob",
                       label=f"{t.get('hf_repo', key)} as stored ({fmt['method']}, "
                             f"16-bit: {', '.join(ex)})")


def checkpoint_quant(m: ModelSpec, prec: Precision) -> Any:
    """How the weights a run at ``prec`` reads are stored, module by module (a specs.quant
    WeightQuant, or None: every linear at the precision): a published release of this model at
    this precision where serving.toml [checkpoints] lists one (its exclude list keeps some
    modules 16-bit); else, for a 16-bit checkpoint the engine quantizes, the precision's
    ``checkpoint`` record (linears quantized, the output head 16-bit); else the model's own
    ``quantization_config``. The one record the iteration's GEMMs (a module it leaves
    unquantized runs on the 16-bit path at 2 B per weight) and the engine's weight bytes read."""
    for key, t in (serving_constants().get("checkpoints") or {}).items():
        if t.get("model") == m.id and t.get("precision") == prec.name:
            return read_checkpoint(key, t)
    if m.quant is None and prec.checkpoint:
        from ...specs.quant import WeightQuant

        return WeightQuant(**dict(prec.checkpoint),
                           label=f"{prec.name} linears, the output head and embeddings 16-bit")
    return m.quant


@dataclass(frozen=True)
class ServeLayout:
    """One serving deployment: tp x pp GPUs per replica, dp replicas, experts over ep of the tp
    ranks (each expert split over tp / ep of them)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    # attention data parallelism (TensorRT-LLM enable_attention_dp, its perf-overview's DEPn;
    # SGLang --enable-dp-attention): each of the tp ranks runs attention, the dense layers, the
    # shared experts and the head on its own batch with full (replicated) weights, no TP
    # all-reduce; the routed experts are split over ep = tp ranks and each MoE layer gathers
    # every rank's tokens and reduce-scatters the expert outputs back (the engine's
    # attention_dp exchange, read in TensorRT-LLM 1.0.0rc4)
    attention_dp: bool = False

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def to_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "dp": self.dp}


def check_layout(m: ModelSpec, lay: ServeLayout) -> None:
    """One line where the layout cannot run the model."""
    for k, v in lay.to_dict().items():
        if v < 1:
            raise BadInput(f"--layout {k}: must be a whole number >= 1, got {v}")
    if m.n_heads % lay.tp and not lay.attention_dp:
        raise BadInput(f"--layout tp={lay.tp}: {m.id} has {m.n_heads} attention heads, which tp "
                       "must divide")
    if lay.pp > m.n_layers:
        raise BadInput(f"--layout pp={lay.pp}: {m.id} has only {m.n_layers} layers")
    if lay.ep > 1 and not m.is_moe:
        raise BadInput(f"--layout ep={lay.ep}: {m.id} is dense (no experts to split)")
    if lay.tp % lay.ep:
        raise BadInput(f"--layout ep={lay.ep}: experts are split over EP ranks inside the TP "
                       f"group, so ep must divide tp={lay.tp}")
    if lay.attention_dp and not m.is_moe:
        raise BadInput(f"--layout adp=1: {m.id} is dense (attention data parallelism splits "
                       "experts over the attention ranks)")
    if lay.attention_dp and lay.ep != lay.tp:
        raise BadInput(f"--layout adp=1: attention data parallelism runs the experts over all "
                       f"tp={lay.tp} ranks, so ep must equal tp (got ep={lay.ep})")
    if m.is_moe and m.n_experts % lay.ep:
        raise BadInput(f"--layout ep={lay.ep}: {m.id}'s {m.n_experts} experts do not split "
                       "evenly")


@dataclass(frozen=True)
class Tables:
    """Per-layer seconds on one rank by tokens in the (micro-)batch, index = tokens."""

    dense_c: np.ndarray  # a dense layer's GEMMs, compute side of each GEMM's roofline
    dense: np.ndarray  # a dense layer's GEMMs, each on its roofline
    moe: np.ndarray  # an MoE layer's GEMMs (router, busiest rank's experts, shared)
    moe_c: np.ndarray
    nongemm: np.ndarray  # memory-bound kernels of a layer
    allreduce: np.ndarray  # the layer's TP all-reduces
    p2p: np.ndarray  # one activation send between pipeline stages
    head: np.ndarray  # output head + sampling, index = sequences that emit a token
    # attention DP only: of ``moe``, the part every rank runs on the n ranks' tokens together
    # (the routed experts and the exchange), index = a rank's tokens with all n ranks at that
    # count; the rest of ``moe`` is the rank's own (attention, router, shared experts)
    moe_shared: np.ndarray | None = None
    # an MoE layer's seconds in an iteration without prefill tokens: differs from ``moe`` where
    # the engine's dispatcher switches to another kernel for such batches (DeepEP low-latency
    # mode under SGLang's --deepep-mode auto), equal to it otherwise; None: the same as ``moe``
    moe_ll: np.ndarray | None = None
    # attention DP with such a dispatcher: ``moe_shared`` for an iteration without prefill
    # tokens (None: the same as ``moe_shared``)
    moe_shared_ll: np.ndarray | None = None


@dataclass(frozen=True)
class TBOParts:
    """An MoE layer's parts as SGLang's two-batch overlap runs them in a prefill iteration
    (frameworks.toml two_batch_overlap), seconds on one rank by a micro-batch's tokens (index):
    the engine launches its DeepGEMM kernels on the SMs DeepEP's kernels leave (``*_dg``, their
    compute side at S / (S - comm_sms)); the other kernels share the SMs with a running
    dispatch or combine (``*_ot``, at 1 - ``sm_share`` of their rate while it runs)."""

    a_dg: np.ndarray  # attention's FP8 projections (DeepGEMM)
    a_ot: np.ndarray  # router (16-bit) and the layer's memory-bound kernels
    e_dg: np.ndarray  # the routed experts' grouped GEMMs (DeepGEMM)
    e_ot: np.ndarray  # the routed copies' permutation
    s_dg: np.ndarray  # the shared expert's FP8 GEMMs (DeepGEMM)
    dispatch: np.ndarray  # DeepEP normal dispatch (communication stream)
    combine: np.ndarray  # DeepEP normal combine
    sm_share: float  # the SMs DeepEP's kernels hold while they run, over the GPU's


def _split_k(M: np.ndarray, N: float, K: float, gpu: GPUSpec) -> np.ndarray:
    """K splits a thin GEMM's kernel takes so its tiles fill the SMs (split-K / stream-K, as
    cuBLAS and TensorRT-LLM pick for decode-sized M): SMs over output tiles, at most one split
    per 256 of K."""
    from ..step.gemm import tiles

    tm, tn, _ = tiles(gpu.arch)
    out_tiles = np.ceil(np.maximum(M, 1.0) / tm) * np.ceil(N / tn)
    return np.clip(np.floor(gpu.sm_count / out_tiles), 1.0, max(1.0, K // 256))


def _roofline(gpu: GPUSpec, peak: float, dt: str, hbm: float, M: np.ndarray, N: float,
              K: float, e_w: float, e_a: float, count: Any = 1.0, touched: Any = 1.0
              ) -> tuple[np.ndarray, np.ndarray]:
    """(time, compute-side time) of ``count`` (M x K) @ (K x N) GEMMs: the step model's compute
    time (gemm_time without HBM bytes; a thin GEMM split over K as a batch of s products of
    K / s, its tiles spread over the SMs together) against the bytes at this precision
    (``touched`` of the weights read: experts no token of the batch reached are not)."""
    from ..step.gemm import gemm_time

    Mx = np.maximum(M, 1.0)
    s = _split_k(Mx, N, K, gpu)
    tc = count * gemm_time(Mx, N, K / s, gpu, peak, 0.0, batch=s, dtype_name=dt) * (M > 0)
    tm = count * (touched * K * N * e_w + e_a * M * (K + N)) / hbm
    return np.maximum(tc, tm), tc


@dataclass(frozen=True)
class IterationModel:
    """The priced parts of one iteration for one (model, GPU, layout, precision, engine)."""

    model: ModelSpec
    gpu: GPUSpec
    layout: ServeLayout
    prec: Precision
    kv_dtype: str
    tables: Tables
    n_dense: int
    n_moe: int
    dec_s_per_ctx_token: float  # decode attention, seconds per (sequence, context token), all layers
    attn_flops_per_pair: float  # prefill attention FLOPs per (query, key) pair per layer per rank
    attention_kind: str
    head_dim: float
    peak16: float
    overhead_s: float  # host seconds per iteration the GPU always waits for (added)
    dec_bound: str  # "memory (KV read)" or "compute"
    eff_x: np.ndarray  # log2 lengths at which the prefill kernel's efficiency is tabulated
    eff_y: np.ndarray
    # the engine's host loop (engine profile): seconds per iteration and per sequence that emits
    # a token, and whether that host work overlaps the GPU's (max) or follows it (sum)
    host_s_per_iter: float = 0.0
    host_s_per_seq: float = 0.0
    host_overlap: bool = False
    # iterations the loop runs per scheduler call: the host seconds above are one call's work,
    # spread over that many iterations
    host_iters_per_schedule: int = 1
    # attention DP: every rank's rows padded to the largest rank's before the exchange
    adp_gather_padding: bool = False
    # attention DP: what a rank with no request runs ("dummy_generation": one generation token;
    # "empty_batch": nothing of its own, it only joins the exchange)
    adp_idle: str = "dummy_generation"
    # speculative decoding (speculative.py): the decode attention's two sides per context token
    # (all layers, a stage's share), the Speculation, and the drafter's priced parts: one
    # drafter pass by sequences (MTP module or EAGLE head: its layer, projection and head), its
    # attention per context token, or the draft model's own iteration model
    dec_mem_s: float = 0.0
    dec_cmp_s: float = 0.0
    spec: Any = None
    draft_pass: Any = None
    draft_per_ctx: float = 0.0
    draft_it: Any = None
    # CUDA-graph batch-size buckets (engine profile, engine.py capture_sizes): the sizes the
    # engine captured, ascending (empty: none, every iteration eager and unpadded); what a graph
    # is chosen by ("decode_seqs": decode-only iterations by their sequences, vLLM V0, SGLang,
    # TensorRT-LLM's PyTorch backend; "tokens": any iteration by its scheduled tokens, vLLM V1's
    # piecewise graphs); whether a batch between sizes is padded up (else it runs eager); the
    # longest sequence a decode graph takes (0: no limit; vLLM V0's max_seq_len_to_capture)
    graph_sizes: tuple[int, ...] = ()
    graph_batch: str = "decode_seqs"
    graph_padding: bool = True
    graph_max_ctx: int = 0
    # two-batch overlap (frameworks.toml two_batch_overlap, :meth:`tbo_moe`): an MoE layer's
    # parts by a micro-batch's tokens, None where the engine runs none
    tbo: TBOParts | None = None
    # GPU seconds per layer that the kernel boundaries of a dense and of an MoE decoder layer
    # add, every iteration (:func:`layer_launch_s`; 0 where the engine's kernels were not counted)
    launch_dense_s: float = 0.0
    launch_moe_s: float = 0.0

    def graph_rows(self, T: int, decode_only: bool, max_ctx: float | None = None) -> int:
        """The rows the iteration's GEMMs and per-token kernels run at: T padded up to the
        smallest captured size >= T where the iteration replays a graph, T itself where it
        runs eager (no graph fits: above the largest size, a prefill in a decode-graph engine,
        a sequence longer than ``graph_max_ctx``, or between sizes without padding)."""
        import bisect

        sizes = self.graph_sizes
        if not sizes or T <= 0 or sizes[-1] < T:
            return T
        if self.graph_batch == "decode_seqs":
            if not decode_only:
                return T
            if self.graph_max_ctx and max_ctx is not None and max_ctx > self.graph_max_ctx:
                return T
        b = sizes[bisect.bisect_left(sizes, T)]
        if b != T and not self.graph_padding:
            return T
        return b

    def graph_rows_v(self, T: np.ndarray, decode_only: np.ndarray,
                     max_ctx: float | None = None) -> np.ndarray:
        """:meth:`graph_rows` for arrays of token counts (``decode_only`` per entry)."""
        T = np.asarray(T, dtype=np.int64)
        sizes = np.asarray(self.graph_sizes, dtype=np.int64)
        if not sizes.size:
            return T
        ok = (T > 0) & (sizes[-1] >= T)
        if self.graph_batch == "decode_seqs":
            ok &= np.asarray(decode_only, dtype=bool)
            if self.graph_max_ctx and max_ctx is not None and max_ctx > self.graph_max_ctx:
                ok &= False
        b = sizes[np.minimum(np.searchsorted(sizes, T, side="left"), sizes.size - 1)]
        if not self.graph_padding:
            ok &= b == T
        return np.where(ok, b, T)

    def with_host(self, gpu_s: Any, n_logits: Any) -> Any:
        """An iteration's seconds from its GPU seconds: the host loop's work for ``n_logits``
        sampling sequences (one scheduler call's, over ``host_iters_per_schedule`` iterations),
        overlapped (max) or not (sum), plus ``overhead_s``."""
        if isinstance(gpu_s, float) and isinstance(n_logits, (int, np.integer)):
            # one iteration, in scalars: the same operations, in order
            h = (self.host_s_per_iter + self.host_s_per_seq * float(n_logits)
                 ) / self.host_iters_per_schedule
            g = float(gpu_s)
            return (max(g, h) if self.host_overlap else g + h) + self.overhead_s
        host = (self.host_s_per_iter + self.host_s_per_seq * np.asarray(n_logits, dtype=np.float64)
                ) / self.host_iters_per_schedule
        t = np.maximum(gpu_s, host) if self.host_overlap else gpu_s + host
        return t + self.overhead_s

    def stage_tokens(self, T: int) -> int:
        return -(-T // self.layout.pp)

    def dense_part(self, T: int, n_logits: int, rows: int | None = None,
                   decode_only: bool = False) -> float:
        """GPU seconds of an iteration of T tokens without attention cores (GEMMs, elementwise,
        collectives, head), the pp micro-batches included; no host time (:meth:`with_host`).
        ``rows``: the rows the GEMMs, per-token kernels and collectives run at where a CUDA
        graph pads the batch (:meth:`graph_rows`); the head samples ``n_logits`` rows.
        ``decode_only``: the iteration holds no prefill tokens (its MoE layers take
        ``Tables.moe_ll`` where the engine's dispatcher has such a mode)."""
        pp = self.layout.pp
        i = min(self.stage_tokens(T if rows is None else rows), self.tables.dense.size - 1)
        tb = self.tables
        moe = tb.moe_ll if decode_only and tb.moe_ll is not None else tb.moe
        per_mb = (self.n_dense * (tb.dense[i] + tb.nongemm[i] + tb.allreduce[i]
                                  + self.launch_dense_s)
                  + self.n_moe * (moe[i] + tb.nongemm[i] + tb.allreduce[i]
                                  + self.launch_moe_s)) / pp
        j = min(-(-n_logits // pp), tb.head.size - 1)
        return float(pp * per_mb + (pp - 1) * tb.p2p[i] + pp * tb.head[j])

    def dense_part_v(self, T: np.ndarray, n_logits: np.ndarray,
                     rows: np.ndarray | None = None) -> np.ndarray:
        """:meth:`dense_part` for arrays of token and logit counts (``rows``: the padded rows,
        :meth:`graph_rows_v`)."""
        pp = self.layout.pp
        tb = self.tables
        R = np.asarray(T if rows is None else rows, dtype=np.int64)
        i = np.minimum(-(-R // pp), tb.dense.size - 1)
        j = np.minimum(-(-np.asarray(n_logits, dtype=np.int64) // pp), tb.head.size - 1)
        per_mb = (self.n_dense * (tb.dense[i] + tb.nongemm[i] + tb.allreduce[i]
                                  + self.launch_dense_s)
                  + self.n_moe * (tb.moe[i] + tb.nongemm[i] + tb.allreduce[i]
                                  + self.launch_moe_s)) / pp
        return pp * per_mb + (pp - 1) * tb.p2p[i] + pp * tb.head[j]

    def prefill_attention(self, chunks: np.ndarray, cached: np.ndarray) -> float:
        """All layers' attention seconds of prefill chunks (c tokens after p cached)."""
        if chunks.size == 0:
            return 0.0
        L = self.n_dense + self.n_moe
        if chunks.size == 1:  # the common case, in scalars: the same operations, in order
            c1, p1 = float(chunks[0]), float(cached[0])
            f1 = self.attn_flops_per_pair * c1 * (p1 + 0.5 * c1)
            e1 = float(np.interp(np.log2(p1 + c1), self.eff_x, self.eff_y))
            return float(L * (f1 / e1) / (self.peak16 * self.layout.pp))
        c = chunks.astype(np.float64)
        p = cached.astype(np.float64)
        flops = self.attn_flops_per_pair * c * (p + 0.5 * c)
        eff = np.interp(np.log2(p + c), self.eff_x, self.eff_y)
        return float(L * np.sum(flops / eff) / (self.peak16 * self.layout.pp))

    def tbo_moe(self, T: int, chunks: np.ndarray, cached: np.ndarray,
                shared_T: float | None = None) -> tuple[float, float] | None:
        """(seconds of the MoE layers as the engine's two-batch overlap runs them, seconds the
        same layers take without it) for a prefill iteration of T tokens on a rank with these
        ``chunks`` (after ``cached``); None where the engine runs none (no
        :class:`TBOParts`, or no prefill chunk). The batch is cut at a sequence boundary
        (:func:`split_half_sum`); each micro-batch's attention, router, shared expert and
        memory-bound kernels run at its own tokens and its experts and DeepEP calls at
        ``shared_T`` tokens a rank (the lock-step's mean; T itself by default) split in the
        same proportion (:func:`tbo_layers_time`). The second figure is what the iteration
        otherwise charges these layers (their tables at T and ``shared_T``, their attention)."""
        tb = self.tables
        p = self.tbo
        if p is None or chunks.size == 0 or self.n_moe == 0:
            return None
        n = p.a_dg.size - 1
        cut = split_half_sum(chunks)
        ca, cb = chunks[:cut], chunks[cut:]
        pa, pb = cached[:cut], cached[cut:]
        tok = float(np.sum(chunks))
        share_a = float(np.sum(ca)) / tok if tok > 0 else 0.0
        # decode rows in the batch (none in a prefill pool) go with micro-batch B
        ta = int(round(float(np.sum(ca))))
        tb_ = max(int(T) - ta, 0)
        x = float(T if shared_T is None else shared_T)
        xa, xb = x * share_a, x * (1.0 - share_a)
        L = self.n_dense + self.n_moe

        def own(arr: np.ndarray) -> tuple[float, float]:
            return float(arr[min(ta, n)]), float(arr[min(tb_, n)])

        def shared(arr: np.ndarray) -> tuple[float, float]:
            k = np.arange(arr.size)
            return float(np.interp(xa, k, arr)), float(np.interp(xb, k, arr))

        att = (self.prefill_attention(ca, pa) / L if ca.size else 0.0,
               self.prefill_attention(cb, pb) / L if cb.size else 0.0)
        a_ot = own(p.a_ot)
        t = tbo_layers_time(self.n_moe, own(p.a_dg), (a_ot[0] + att[0], a_ot[1] + att[1]),
                            shared(p.e_dg), shared(p.e_ot), own(p.s_dg), shared(p.dispatch),
                            shared(p.combine), p.sm_share)
        i = min(int(T), tb.moe.size - 1)
        ms = tb.moe_shared if tb.moe_shared is not None else np.zeros_like(tb.moe)
        whole = self.n_moe * (tb.moe[i] - ms[i] + float(np.interp(x, np.arange(ms.size), ms))
                              + tb.nongemm[i] + tb.allreduce[i])
        return float(t), float(whole + self.prefill_attention(chunks, cached) * self.n_moe / L)

    def time(self, T: int, n_logits: int, decode_ctx_sum: float, chunks: np.ndarray,
             cached: np.ndarray, max_ctx: float | None = None, n_decode: int = 0) -> float:
        """Seconds of one iteration: T tokens, ``n_logits`` sequences sampling, decode
        sequences holding ``decode_ctx_sum`` KV tokens (the longest ``max_ctx``, where known),
        prefill ``chunks`` after ``cached``: the GPU's seconds with the engine's host work
        (:meth:`with_host`). Where the engine replays a CUDA graph the GEMMs and per-token
        kernels run at the padded batch (:meth:`graph_rows`); the padded rows read no KV. With
        speculative decoding (``spec``) the ``n_decode`` decoding sequences (counted once in T
        and ``n_logits``) each verify k drafts (:meth:`verify_gpu`), at their own rows: the
        padding of a verify step to a graph size is not priced."""
        if self.spec is not None and n_decode > 0:
            gpu = self.verify_gpu(T, n_logits, decode_ctx_sum, n_decode)
        else:
            rows = self.graph_rows(T, chunks.size == 0, max_ctx)
            gpu = (self.dense_part(T, n_logits, rows, decode_only=chunks.size == 0)
                   + self.dec_s_per_ctx_token * decode_ctx_sum)
        gpu += self.prefill_attention(chunks, cached)
        tbo = self.tbo_moe(T, chunks, cached) if self.spec is None else None
        if tbo is not None:
            gpu += tbo[0] - tbo[1]
        return float(self.with_host(gpu, n_logits))

    def time_lockstep(self, T: np.ndarray, n_logits: np.ndarray, decode_ctx_sum: np.ndarray,
                      chunks: list[np.ndarray], cached: list[np.ndarray]) -> float:
        """Seconds of one iteration of the n attention-DP ranks in lock-step, rank r with
        ``T[r]`` tokens, ``n_logits[r]`` sampling sequences, ``decode_ctx_sum[r]`` decode KV
        tokens and its own prefill chunks: every MoE layer waits for the slowest rank, so the
        ranks' own work (attention, dense layers, router, shared experts, head: all they run on
        their own tokens alone) counts as its maximum over the ranks, and the experts and the
        exchange once, at the ranks' tokens together: n times their mean where the gather is
        sized by each rank's own count (``all_rank_num_tokens``: CutlassFusedMoE without DP
        padding), n times their largest where the engine pads (``adp_gather_padding``). A
        rank with no work runs the engine's one-token dummy generation request
        (``adp_idle`` "dummy_generation") or a batch of no tokens ("empty_batch": its own work
        and its rows in the exchange are zero). Host work as
        :meth:`time`, for the rank with the most sampling sequences."""
        tb = self.tables
        if tb.moe_shared is None:
            raise BadInput("time_lockstep: the layout is not attention data parallel")
        if self.spec is not None and self.spec.k > 0:
            raise BadInput("--spec with --layout adp=1 is not priced: the attention-DP lock-step "
                           "does not verify drafts")
        pp = self.layout.pp
        T = np.asarray(T, dtype=np.int64)
        idle = T == 0
        T = np.where(idle, 1, T)
        n_logits = np.where(idle, 1, np.asarray(n_logits, dtype=np.int64))
        ctx = np.where(idle, 1.0, np.asarray(decode_ctx_sum, dtype=np.float64))
        i = np.minimum(-(-T // pp), tb.dense.size - 1)
        own = (self.dense_part_v(T, n_logits) - self.n_moe * tb.moe_shared[i]
               + self.dec_s_per_ctx_token * ctx
               + np.asarray([self.prefill_attention(c, p) for c, p in zip(chunks, cached, strict=True)]
                            + [0.0] * (T.size - len(chunks))))
        if self.adp_idle == "empty_batch":
            own = np.where(idle, 0.0, own)
            i = np.where(idle, 0, i)
        x = float(i.max()) if self.adp_gather_padding else float(i.mean())
        # no rank with prefill tokens: the engine's decode-mode dispatcher where it has one
        # (DeepEP low-latency under --deepep-mode auto, Tables.moe_shared_ll)
        decode_only = all(np.asarray(c).size == 0 for c in chunks)
        ms = (tb.moe_shared_ll if decode_only and tb.moe_shared_ll is not None
              else tb.moe_shared)
        shared = self.n_moe * float(np.interp(x, np.arange(ms.size), ms))
        if not decode_only and self.tbo is not None:
            # two-batch overlap: the MoE layers of the rank with the most work of its own, its
            # experts and calls at the ranks' mean, as the overlap runs them (:meth:`tbo_moe`),
            # in place of what the sum charges them
            r = int(np.argmax(own))
            c_r = np.asarray(chunks[r]) if r < len(chunks) else np.zeros(0)
            p_r = np.asarray(cached[r]) if r < len(cached) else np.zeros(0)
            tbo = self.tbo_moe(int(T[r]), c_r, p_r, shared_T=x)
            if tbo is not None:
                return float(self.with_host(float(own.max()) + shared + tbo[0] - tbo[1],
                                            int(n_logits.max())))
        return float(self.with_host(float(own.max()) + shared, int(n_logits.max())))

    def verify_gpu(self, T: int, n_logits: int, decode_ctx_sum: float, n_decode: int) -> float:
        """GPU seconds of an iteration's non-prefill-attention work when its ``n_decode``
        decoding sequences each run k + 1 tokens through the target (the GEMMs, kernels,
        collectives and the head at k more rows each; the decode attention reading each
        sequence's KV once for its k + 1 queries: max(KV read, (k + 1) x FLOPs) per context
        token) and the drafter's k passes (:meth:`draft_time`). The host's work stays per
        sequence."""
        k = int(self.spec.k)
        extra = k * n_decode
        att = max(self.dec_mem_s, (k + 1) * self.dec_cmp_s) * decode_ctx_sum
        return (self.dense_part(T + extra, n_logits + extra) + att
                + self.draft_time(n_decode, decode_ctx_sum))

    def verify_gpu_v(self, T: np.ndarray, n_logits: np.ndarray, ctx_sum: np.ndarray,
                     n_decode: np.ndarray) -> np.ndarray:
        """:meth:`verify_gpu` for arrays (the search's steady state; sequence counts rounded
        up to whole sequences for the table look-ups)."""
        k = int(self.spec.k)
        nd = np.ceil(np.asarray(n_decode, dtype=np.float64))
        att = max(self.dec_mem_s, (k + 1) * self.dec_cmp_s) * np.asarray(ctx_sum)
        out = self.dense_part_v(np.ceil(np.asarray(T) + k * nd), np.ceil(np.asarray(n_logits)
                                                                      + k * nd)) + att
        if k == 0:
            return out
        if self.draft_it is not None:
            d = self.draft_it
            return out + k * (d.dense_part_v(nd, nd) + d.dec_s_per_ctx_token
                              * np.asarray(ctx_sum))
        tb = self.draft_pass
        i1 = np.minimum(((k + 1) * nd).astype(np.int64), tb.size - 1)
        i0 = np.minimum(nd.astype(np.int64), tb.size - 1)
        return (out + tb[i1] + (k - 1) * tb[i0] + k * self.draft_per_ctx
                * np.asarray(ctx_sum)) * (nd > 0) + out * (nd <= 0)

    def draft_time(self, n_seq: int, ctx_sum: float) -> float:
        """GPU seconds of the drafter's k sequential passes for ``n_seq`` sequences holding
        ``ctx_sum`` KV tokens. An MTP module or EAGLE head: the first pass over the k + 1
        verified positions of each sequence (it takes the target's hidden states of all of
        them), the k - 1 others at one token per sequence (vLLM's EagleProposer.propose, read
        at commit 008603a3, which also runs DeepSeek MTP), each pass with its one layer's
        attention over the context. A draft model: k decode steps of it."""
        k = int(self.spec.k)
        if k == 0 or n_seq <= 0:
            return 0.0
        if self.draft_it is not None:
            d = self.draft_it
            return k * (d.dense_part(n_seq, n_seq) + d.dec_s_per_ctx_token * ctx_sum)
        tb = self.draft_pass
        first = float(tb[min((k + 1) * n_seq, tb.size - 1)])
        rest = (k - 1) * float(tb[min(n_seq, tb.size - 1)])
        return first + rest + k * self.draft_per_ctx * ctx_sum


def split_half_sum(lengths: Any) -> int:
    """Where SGLang's two-batch overlap cuts a prefill batch (two_batch_overlap.py
    ``_split_array_by_half_sum``, sglang 0.4.7): the first index i >= 1 after which the
    difference between the two halves' token sums stops falling (the last of equal ones);
    0 for fewer than two sequences (micro-batch A empty)."""
    arr = [float(x) for x in lengths]
    total, left, best, best_i = sum(arr), 0.0, float("inf"), 0
    for i in range(1, len(arr)):
        left += arr[i - 1]
        diff = abs(left - (total - left))
        if diff > best:
            break
        best, best_i = diff, i
    return best_i


def beside_comm(t0: float, work: float, busy_until: float, share: float) -> float:
    """When ``work`` seconds of kernels that start at ``t0`` end while a communication kernel
    that holds ``share`` of the SMs runs until ``busy_until``: at 1 - share of their rate while it
    runs, at full rate after (the step model's rule for compute beside DeepEP's kernels,
    step/comm.py ``_ep_overlapped``: w beside a kernel of c seconds ends at max(c, w + s c)
    while it outlasts it, at w / (1 - s) otherwise)."""
    c = max(0.0, busy_until - t0)
    if work <= 0.0:
        return t0
    if share <= 0.0 or c <= 0.0:
        return t0 + work
    if work <= (1.0 - share) * c:
        return t0 + work / (1.0 - share)
    return t0 + work + share * c


def tbo_layers_time(n_layers: int, a_dg: tuple[float, float], a_ot: tuple[float, float],
                    e_dg: tuple[float, float], e_ot: tuple[float, float],
                    s_dg: tuple[float, float], dispatch: tuple[float, float],
                    combine: tuple[float, float], sm_share: float) -> float:
    """Seconds of ``n_layers`` consecutive MoE layers run as SGLang's two-batch overlap runs a
    prefill (sglang 0.4.7 operations_strategy.py ``_compute_moe_deepseek_blog_prefill``,
    operations.py ``execute_overlapped_operations`` with delta_stages 0): each micro-batch's
    layer is three stages cut at its yield points,

        1: attention (projections, core), router, top-k, then the dispatch is launched
        2: wait for the dispatch, routed experts, then the combine is launched
        3: shared expert, wait for the combine, output (run with the next layer's stage 1)

    and the host runs A1, B1, A2, B2, A3+A1', B3+B1', ... on one compute stream while DeepEP's
    dispatches and combines queue on one communication stream in launch order. Each argument
    is the pair (micro-batch A, micro-batch B); ``*_dg`` kernels keep their own SMs, ``*_ot``
    kernels slow beside a running call (:func:`beside_comm`). A stage that waits for its call
    idles the compute stream (the wait is a stream wait, so a call that finishes early costs
    nothing). Host launch gaps are not priced."""
    tc = tm = 0.0  # compute stream's clock; the communication stream's end of queued work
    d_end = [0.0, 0.0]
    c_end = [0.0, 0.0]
    for layer in range(n_layers):
        for x in (0, 1):
            if layer:
                tc = max(tc + s_dg[x], c_end[x])
            tc = beside_comm(tc + a_dg[x], a_ot[x], tm, sm_share)
            tm = d_end[x] = max(tc, tm) + dispatch[x]
        for x in (0, 1):
            tc = max(tc, d_end[x]) + e_dg[x]
            tc = beside_comm(tc, e_ot[x], tm, sm_share)
            tm = c_end[x] = max(tc, tm) + combine[x]
    if n_layers:
        for x in (0, 1):
            tc = max(tc + s_dg[x], c_end[x])
    return tc


def _expert_imbalance(m: ModelSpec, ep: int, copies: np.ndarray) -> np.ndarray:
    """Busiest EP rank's routed copies over the mean, by the batch's routed copies (median draw
    of the routing Monte Carlo of analytic/moe_serving.py)."""
    if ep <= 1:
        return np.ones_like(copies)
    from ..moe_serving import layout_stats, recv_tail

    skew = float(serving_constants()["moe"]["skew"])
    st = layout_stats(m.n_experts, m.top_k, 0, 0, ep, 0, "global", ep, skew, draws=64,
                      patterns=2)
    probe = np.unique(np.clip(np.round(np.geomspace(1, max(copies.max(), 2), 12)), 1, None))
    recv, _ = recv_tail(st, probe, gpus_per_node=ep)
    ratio = np.median(recv, axis=1) / (probe / ep)
    return np.interp(copies, probe, ratio)


def decode_kv_read_factor(m: ModelSpec, tp: int, decode_kv_reads: str) -> float:
    """How many times a decode step reads each KV byte held on a rank: 1 for a kernel that reads
    a KV head once for all its query heads (``"kv_head"``); the rank's query heads over its KV
    heads for a kernel with one thread block per query head, each loading its KV head's cache
    (``"query_head"``: TensorRT-LLM 0.5's masked MHA, grid = heads x batch, block ``hi`` reads KV
    head ``hi / (n_heads / n_kv_heads)``). MLA caches one latent per token: 1."""
    if decode_kv_reads == "kv_head" or m.kv_lora_rank:
        return 1.0
    if decode_kv_reads != "query_head":
        raise BadInput(f"decode_kv_reads: {decode_kv_reads!r} is not kv_head or query_head")
    n_kv = max(m.n_kv_heads, 1)
    q_per_rank = m.n_heads / tp
    kv_per_rank = max(n_kv / tp, 1.0)  # KV heads are replicated once tp exceeds them
    return q_per_rank / kv_per_rank


def build(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision, kv_dtype: str, *,
          max_tokens: int, max_seqs: int, attention_kind: str, overhead_s: float,
          cluster: Any, decode_kv_reads: str = "kv_head",
          moe_gemm_kernel: str | None = None, logits_gather: str = "none",
          host_s_per_iter: float = 0.0, host_s_per_seq: float = 0.0,
          host_overlap: bool = False, host_iters_per_schedule: int = 1,
          adp_exchange: dict[str, Any] | None = None,
          adp_gather_padding: bool = False, adp_idle: str = "dummy_generation",
          spec: Any = None, layer_kernels: dict[str, Any] | None = None,
          graph_sizes: tuple[int, ...] = (), graph_batch: str = "decode_seqs",
          graph_padding: bool = True, graph_max_ctx: int = 0,
          tbo: dict[str, Any] | None = None,
          replicated_modules: tuple[str, ...] = (),
          fp8_input_cast_bytes: float | None = None) -> IterationModel:
    """Tabulate every per-token-count term for token counts 0..max_tokens / pp.
    ``moe_gemm_kernel`` names the engine's grouped expert-GEMM kernel (kernels.toml
    [grouped_gemm] kernels): each expert GEMM some token reached is charged that kernel's
    per-expert cost beyond its shape's price (step/gemm.py ``grouped_overhead``).
    ``logits_gather`` "all_gather" (the engine's profile): the head's vocab / tp logits of every
    sampling sequence are all-gathered in 16 bits and every TP rank samples the full row. The
    host fields are the engine's host loop (:meth:`IterationModel.with_host`).
    ``adp_exchange``: the engine's attention-DP exchange (frameworks.toml attention_dp), needed
    when the layout runs attention data-parallel; ``adp_gather_padding``: the engine pads every
    rank's rows to the largest rank's before the exchange (frameworks.toml
    attention_dp_schedule gather_padding), so the lock-step's experts and exchange take n times
    the largest rank's tokens (:meth:`IterationModel.time_lockstep`); ``adp_idle``: what a
    rank with no request runs (attention_dp_schedule idle). ``spec``
    (speculative.Speculation): the tables reach k + 1 tokens per sequence and the drafter is
    priced (:meth:`IterationModel.verify_gpu`). ``layer_kernels``: the engine's kernel count
    per decoder layer (frameworks.toml layer_kernels), each kernel boundary charged the GPU's
    idle time (:func:`layer_launch_s`). ``graph_*``: the
    engine's CUDA-graph buckets (:meth:`IterationModel.graph_rows`). ``tbo``: the engine's
    two-batch overlap (frameworks.toml two_batch_overlap), read for an attention-DP layout
    with the DeepEP exchange (:class:`TBOParts`, :meth:`IterationModel.tbo_moe`).
    ``replicated_modules``: attention projections the engine keeps whole on every TP rank
    (frameworks.toml replicated_modules), each priced at its full width on every rank. Every
    linear runs at the precision the checkpoint stores it (:func:`checkpoint_quant`): a module
    it leaves unquantized on the 16-bit path, a layer at a time (the first dense layer for the
    dense layers, the first MoE layer for the MoE layers, layer n_layers for the MTP module).
    ``fp8_input_cast_bytes``: HBM bytes per element of the engine's quantize before each FP8 GEMM
    (frameworks.toml fp8_input_cast_bytes; :func:`_nongemm`), None for the step model's
    training-recipe cast."""
    if graph_batch not in ("decode_seqs", "tokens"):
        raise BadInput(f"cuda_graph_batch: {graph_batch!r} is not decode_seqs or tokens")
    steps = zip(graph_sizes, graph_sizes[1:], strict=False)
    if any(x < 1 for x in graph_sizes) or any(b <= a for a, b in steps):
        raise BadInput(f"cuda_graph_sizes: must be whole numbers >= 1 in increasing order, got "
                       f"{list(graph_sizes)}")
    from ..kv import model_kv_bytes_per_token
    from ..step.comm import collective_time, ranks_per_node
    from ..step.config import constants
    from ..step.shapes import model_shapes

    check_layout(m, lay)
    if lay.attention_dp and not adp_exchange:
        raise BadInput("--layout adp=1: the engine's attention-DP exchange is not given "
                       "(frameworks.toml attention_dp)")
    ms = model_shapes(m)
    tp, ep = float(lay.tp), float(lay.ep)
    dt = prec.gemm_dtype
    peak = gpu.peak_flop_per_s(dt)
    peak16 = gpu.peak_flop_per_s("bf16")
    hbm = gpu.hbm_bytes_per_s * float(constants()["gemm"]["hbm_efficiency"])
    e_w, e_a = prec.weight_bytes, prec.activation_bytes
    rows = max(max_seqs, 1) * (spec.k + 1) if spec is not None else 0
    n_tok = -(-max(max_tokens, rows) // lay.pp) + 1
    M = np.arange(n_tok, dtype=np.float64)
    h = float(m.hidden)

    # each linear at the precision the checkpoint stores it (checkpoint_quant): a module the
    # checkpoint leaves unquantized runs on the 16-bit path at 2 B per weight and activation
    q_store = checkpoint_quant(m, prec)
    low = (peak, dt, e_w, e_a)
    high = (peak16, "bf16", 2.0, 2.0)

    def rate(name: str) -> tuple[float, str, float, float]:
        return low if q_store is None or q_store.is_quantized(name) else high

    def g(N: float, K: float, name: str | None = None, **kw: Any
          ) -> tuple[np.ndarray, np.ndarray]:
        pk, d_, w_, a_ = low if name is None else rate(name)
        return _roofline(gpu, pk, d_, hbm, M, N, K, w_, a_, **kw)

    # attention data parallelism: attention, dense MLPs, shared experts and the head are
    # replicated (full width at the rank's own tokens); only the routed experts are split, over
    # all n = tp ranks, at the n ranks' tokens together
    adp = bool(lay.attention_dp)
    n_adp = tp if adp else 1.0
    tpa = 1.0 if adp else tp
    # projections the engine keeps whole on every TP rank (its profile's replicated_modules)
    whole = () if adp else tuple(replicated_modules)

    def attention(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(input projections, their compute side, output projection, its compute side) of
        layer i on one rank: the input projections as one GEMM on K = h per (precision, split)
        group, a replicated one at its full width, the others split by TP."""
        from ..weights import attention_linears

        pre = f"model.layers.{i}.self_attn."
        ins = [(nm, float(a * b)) for nm, a, b in attention_linears(m) if nm != "o_proj"]

        def key(nm: str) -> tuple[tuple[float, str, float, float], bool]:
            return rate(pre + nm), nm in whole

        if all(key(nm) == (low, False) for nm, _ in ins):
            groups = {(low, False): float(ms.attn_in_n)}
        else:
            groups = {}
            for nm, p_ in ins:
                groups[key(nm)] = groups.get(key(nm), 0.0) + p_ / h
            # what the projections do not hold (biases) goes with the first one
            groups[key(ins[0][0])] += float(ms.attn_in_n) - sum(p_ for _, p_ in ins) / h
        qkv = qkv_c = np.zeros_like(M)
        for (r, rep), n in groups.items():
            t, tc = _roofline(gpu, r[0], r[1], hbm, M, n / (1.0 if rep else tpa), h, r[2], r[3])
            qkv, qkv_c = qkv + t, qkv_c + tc
        ro, o_rep = key("o_proj")
        o, o_c = _roofline(gpu, ro[0], ro[1], hbm, M, h, ms.attn_out_k / (1.0 if o_rep else tpa),
                           ro[2], ro[3])
        return qkv, qkv_c, o, o_c

    def up_name(prefix: str) -> str:
        return prefix + ("gate_proj" if m.gated_mlp else "up_proj")

    i_dense = next((i for i in range(m.n_layers) if not m.layer_is_moe(i)), 0)
    i_moe = next((i for i in range(m.n_layers) if m.layer_is_moe(i)), 0)
    qkv, qkv_c, o, o_c = attention(i_dense)
    attn, attn_c = qkv + o, qkv_c + o_c
    dp_ = f"model.layers.{i_dense}.mlp."
    up, up_c = g(ms.up_k * ms.ffn / tpa, h, up_name(dp_))
    down, down_c = g(h, ms.ffn / tpa, dp_ + "down_proj")
    dense, dense_c = attn + up + down, attn_c + up_c + down_c
    if m.is_moe:
        E, k = float(m.n_experts), float(m.top_k)
        etp = tp / ep
        n_local = E / ep
        Mx = M * n_adp  # tokens the experts see: every attention rank's under attention DP
        imb = _expert_imbalance(m, lay.ep, Mx * k)
        # of a rank's n_local experts, the share some token reached (1 - (1 - k / E)^T), each
        # with the busiest rank's tokens spread over them
        touched = np.maximum(1.0 - (1.0 - k / E) ** Mx, 1e-12)
        Me = Mx * k / E * imb / touched
        rt, rt_c = _roofline(gpu, peak16, "bf16", hbm, M, E, h, 2.0, 2.0)  # router in 16 bits

        def moe_layer(i: int) -> dict[str, np.ndarray]:
            """Layer i's MoE GEMMs on one rank, each at its stored precision."""
            xp = f"model.layers.{i}.mlp.experts.0."
            ru, rd = rate(up_name(xp)), rate(xp + "down_proj")
            eu, eu_c = _roofline(gpu, ru[0], ru[1], hbm, Me, ms.up_k * ms.moe_ffn / etp, h,
                                 ru[2], ru[3], n_local * touched)
            ed, ed_c = _roofline(gpu, rd[0], rd[1], hbm, Me, h, ms.moe_ffn / etp, rd[2], rd[3],
                                 n_local * touched)
            if moe_gemm_kernel:
                # the grouped kernel's cost per expert GEMM (up and down) of the experts the
                # batch reached, beyond each one's tiles-in-waves price, at the rows each holds
                from ..step.gemm import grouped_overhead_at

                t0 = (grouped_overhead_at(gpu.arch, moe_gemm_kernel, Me) * n_local * touched
                      * (M > 0))
                eu, eu_c, ed, ed_c = eu + t0, eu_c + t0, ed + t0, ed_c + t0
            sp = f"model.layers.{i}.mlp.shared_experts."
            if ms.shared_ffn:
                su, su_c = g(ms.up_k * ms.shared_ffn / tpa, h, up_name(sp))
                sd, sd_c = g(h, ms.shared_ffn / tpa, sp + "down_proj")
            else:
                su = su_c = sd = sd_c = np.zeros_like(M)
            # the routed copies' permutation: each token's hidden vector is copied to its k
            # expert rows (read k, write k) and the k expert outputs are gathered back and
            # summed (read k, write 1): (3 k + 1) h activations per token, memory-bound
            permute = (3 * k + 1) * M * h * ru[3] / hbm
            permute_shared = np.zeros_like(M)
            if adp and (adp_exchange or {}).get("exchange") == "allgather_reducescatter":
                # the all-gather form (TensorRT-LLM 1.0.0rc4 CutlassFusedMoE.forward_chunk): the
                # fused op runs on the n ranks' gathered rows, so a rank copies the k / ep local
                # expert rows of each of the n M gathered tokens (read and write), reads them
                # back and writes one output row for every gathered token (finalize, one block
                # per original row) before the reduce-scatter: (3 k / ep + 1) n M h, all of it
                # sized by the ranks' tokens together (the lock-step's shared part)
                permute_shared = gathered_permute_bytes(m, prec, lay, M) / hbm
                permute = permute_shared
            return {"eu": eu, "eu_c": eu_c, "ed": ed, "ed_c": ed_c, "su": su, "su_c": su_c,
                    "sd": sd, "sd_c": sd_c, "permute": permute, "permute_shared": permute_shared}

        qkv, qkv_c, o, o_c = attention(i_moe)
        attn_m, attn_m_c = qkv + o, qkv_c + o_c
        x = moe_layer(i_moe)
        eu, eu_c, ed, ed_c = x["eu"], x["eu_c"], x["ed"], x["ed_c"]
        su, su_c, sd, sd_c = x["su"], x["su_c"], x["sd"], x["sd_c"]
        permute, permute_shared = x["permute"], x["permute_shared"]
        moe = attn_m + eu + ed + rt + su + sd + permute
        moe_c = attn_m_c + eu_c + ed_c + rt_c + su_c + sd_c
    else:
        moe, moe_c = dense, dense_c
    nongemm = _nongemm(m, gpu, lay, prec, cluster, M, ms, fp8_input_cast_bytes)
    dom = cluster.nvlink_domain
    # collectives priced on a geometric grid of token counts and read in between
    grid = np.unique(np.round(np.geomspace(1, max(n_tok - 1, 2), 48)))
    act = grid * h * 2.0  # 16-bit activations between layers
    moe_x_ll = None
    if adp and (adp_exchange or {}).get("exchange") == "deepep":
        # wide EP: each MoE layer dispatches its tokens to the experts' ranks and combines the
        # outputs back with DeepEP's kernels (deepep_exchange_time), normal mode and, where the
        # engine switches for batches without prefill, low-latency mode
        ar = np.zeros_like(M)
        calls: dict[str, np.ndarray] = {}
        norm_g, ll_g = deepep_exchange_time(m, lay, grid, adp_exchange or {}, cluster, gpu,
                                            calls)
        moe_x = np.where(M > 0, np.interp(M, grid, norm_g), 0.0)
        mode = str((adp_exchange or {}).get("deepep_mode", "normal"))
        if mode not in ("normal", "low_latency", "auto"):
            raise BadInput(f"attention_dp deepep_mode: {mode!r} is not normal, low_latency or "
                           "auto")
        ll_x = np.where(M > 0, np.interp(M, grid, ll_g), 0.0)
        if mode == "low_latency":
            moe_x = ll_x
        elif mode == "auto":
            moe_x_ll = ll_x
    elif adp:
        # no all-reduce in attention; each MoE layer all-gathers the n ranks' tokens with
        # their routing (the gathered output, nccl-tests size convention) and reduce-scatters
        # the expert outputs back, as the engine's profile says (exchange_bytes); charged on
        # the MoE layers' table only
        ag_b, rs_b = exchange_bytes(m, prec, lay, grid, adp_exchange or {})
        rpn = ranks_per_node(1, lay.tp, dom)
        ex_g = (np.asarray(collective_time("all_gather", ag_b, tp, rpn, cluster))
                + np.asarray(collective_time("reduce_scatter", rs_b, tp, rpn, cluster)))
        ar = np.zeros_like(M)
        moe_x = np.where(M > 0, np.interp(M, grid, ex_g * np.ones_like(grid)), 0.0)
    else:
        ar_g = 2 * collective_time("all_reduce", act, tp, ranks_per_node(1, lay.tp, dom),
                                   cluster)
        ar = np.where(M > 0, np.interp(M, grid, np.asarray(ar_g) * np.ones_like(grid)), 0.0)
        moe_x = np.zeros_like(M)
    tbo_parts = None
    tbo_mode = str((tbo or {}).get("prefill") or "off")
    if tbo_mode not in ("off", "sglang_prefill"):
        raise BadInput(f"two_batch_overlap prefill: {tbo_mode!r} is not sglang_prefill or off")
    if (tbo_mode == "sglang_prefill" and m.is_moe and adp and lay.pp == 1
            and (adp_exchange or {}).get("exchange") == "deepep"):
        # SGLang's two-batch overlap (prefill): the DeepGEMM kernels run on the SMs DeepEP's
        # kernels leave (deep_gemm_num_sms = SMs - DeepEP's num_sms), so their compute side
        # takes S / (S - comm_sms); the other kernels share the SMs only while a call runs
        n_sm = float(gpu.sm_count)
        c_sm = float((tbo or {}).get("comm_sms") or 0)
        if c_sm and (not n_sm or c_sm >= n_sm):
            raise BadInput(f"two_batch_overlap comm_sms: {c_sm:g} leaves no SMs of {gpu.id}'s "
                           f"{n_sm:g} (gpus.toml sm_count)")
        f_sm = n_sm / (n_sm - c_sm) if c_sm else 1.0

        def dg(t: np.ndarray, tc: np.ndarray) -> np.ndarray:
            return np.maximum(t, tc * f_sm)

        def on_m(x: np.ndarray) -> np.ndarray:
            return np.where(M > 0, np.interp(M, grid, x), 0.0)

        tbo_parts = TBOParts(
            a_dg=dg(qkv, qkv_c) + dg(o, o_c), a_ot=rt + nongemm,
            e_dg=dg(eu, eu_c) + dg(ed, ed_c), e_ot=permute, s_dg=dg(su, su_c) + dg(sd, sd_c),
            dispatch=on_m(calls["dispatch"]), combine=on_m(calls["combine"]),
            sm_share=c_sm / n_sm if c_sm else 0.0)
    moe_shared = moe_shared_ll = None
    if m.is_moe:
        moe_ll = moe + (moe_x if moe_x_ll is None else moe_x_ll)
        moe = moe + moe_x
        if adp:
            moe_shared = eu + ed + permute_shared + moe_x
            moe_shared_ll = eu + ed + permute_shared + (moe_x if moe_x_ll is None else moe_x_ll)
    else:
        moe_ll = moe
    if lay.pp > 1:
        p2p_g = collective_time("send_recv", act, 2.0, 2.0 if lay.tp * lay.pp <= dom else 1.0,
                                cluster)
        p2p = np.interp(M, grid, np.asarray(p2p_g) * np.ones_like(grid))
    else:
        p2p = np.zeros_like(M)
    # output head and sampling; the head is stored as the precision's checkpoint says
    # (serving.toml precisions.*.checkpoint quantize_head: 16-bit for FP8 and INT4 alike, the
    # same record the engine's KV budget prices the weights with)
    S = np.arange(max(max_seqs, 1, rows) + 1, dtype=np.float64)
    vocab = float(m.vocab)
    head_q = (q_store.is_quantized("lm_head") if q_store is not None
              else bool(dict(prec.checkpoint).get("quantize_head")))
    head, _ = _roofline(gpu, peak if head_q else peak16, dt if head_q else "bf16", hbm, S,
                        vocab / tpa, h, e_w if head_q else 2.0, 2.0)
    gathered = logits_gather == "all_gather" and lay.tp > 1 and not adp
    if logits_gather not in ("none", "all_gather"):
        raise BadInput(f"logits_gather: {logits_gather!r} is not none or all_gather")
    # sampling reads and writes each logit of the row a rank samples: its vocab / tp columns, or
    # the whole row where the engine gathers the logits to every rank
    row = vocab if gathered else vocab / tpa
    head = head + S * row * float(serving_constants()["sampling"]["bytes_per_logit"]) / hbm
    if gathered:
        # the gather of S x vocab 16-bit logits over the TP group (nccl-tests size convention:
        # the gathered output), priced on a geometric grid of sequence counts like the
        # all-reduces
        sgrid = np.unique(np.round(np.geomspace(1, max(S.size - 1, 2), 32)))
        ag = collective_time("all_gather", sgrid * vocab * 2.0, tp,
                             ranks_per_node(1, lay.tp, cluster.nvlink_domain), cluster)
        head = head + np.where(S > 0, np.interp(S, sgrid, np.asarray(ag) * np.ones_like(sgrid)),
                               0.0)
    # decode attention: each decode token reads its sequence's KV on this rank
    kv_layer = model_kv_bytes_per_token(m, kv_dtype) / m.n_layers
    split = 1.0 if m.kv_lora_rank or adp else float(min(lay.tp, max(m.n_kv_heads, 1)))
    att_pair = 2.0 * (ms.qk_dim + ms.v_dim) / tpa
    from ..step.attention import attention_efficiency

    eff_dec = float(attention_efficiency(gpu, 1.0, causal=False, kind=attention_kind,
                                         head_dim=ms.qk_dim / m.n_heads))
    if not m.kv_lora_rank:
        # GQA / MHA decode: one batched call over every sequence's cached KV (a grid of
        # sequences x KV heads, each block scanning its sequence's keys), not a one-token call;
        # its compute side takes the family's rate at a call of the model's context, not the
        # length-1 extrapolation of a batch-1 prefill curve (on Blackwell that curve's short
        # end, measured on a 512-token single-sequence grid, would price a decode step
        # compute-bound at 0.7% of peak). MLA's compute-heavy decode keeps the length-1 rate.
        eff_dec = max(eff_dec, float(attention_efficiency(
            gpu, float(m.max_context), causal=False, kind=attention_kind,
            head_dim=ms.qk_dim / m.n_heads)))
    mem_s = kv_layer / split * decode_kv_read_factor(m, 1 if adp else lay.tp,
                                                      decode_kv_reads) / hbm
    cmp_s = att_pair / (peak16 * eff_dec)
    per_ctx = m.n_layers * max(mem_s, cmp_s) / lay.pp
    eff_x = np.linspace(0.0, np.log2(max(m.max_context, 2)) + 1, 96)
    eff_y = np.asarray(attention_efficiency(gpu, 2.0 ** eff_x, causal=True, kind=attention_kind,
                                            head_dim=ms.qk_dim / m.n_heads))
    launch_dense, launch_moe = layer_launch_s(m, lay, layer_kernels)
    tables = Tables(dense_c, dense, moe, moe_c, nongemm, ar, np.asarray(p2p) * np.ones_like(M),
                    head, moe_shared, moe_ll, moe_shared_ll)
    draft_pass = draft_it = None
    draft_ctx = 0.0
    if spec is not None and spec.k > 0:
        if spec.drafter == "model":
            draft_it = _draft_model(spec, m, gpu, lay, prec, kv_dtype, max_seqs, attention_kind,
                                    cluster, decode_kv_reads, logits_gather)
        else:
            if spec.drafter == "mtp" and not m.mtp_layers:
                raise BadInput(f"--spec draft=mtp: {m.id}'s config has no multi-token-prediction "
                               "module (num_nextn_predict_layers = 0)")
            if adp and spec.drafter == "eagle":
                raise BadInput("--spec draft=eagle with --layout adp=1 is not priced")
            # one pass at B tokens (the drafter runs on the last stage at the whole batch):
            # the module's layer (an MoE layer where the model's MTP module is one, a dense
            # layer of the target's width for an EAGLE head), its [hidden; embedding] -> h
            # projection (replicated, not TP-split) and the output head at B sequences
            # the MTP module's layer is the target's MoE decoder layer: its kernels too
            # (layer_launch_s; its projection, norms and head kernels are not counted); an
            # EAGLE head's kernels were not counted
            mtp_moe = m.is_moe and spec.drafter == "mtp"
            # the MTP module is the checkpoint's layer n_layers: its GEMMs at the precision the
            # checkpoint stores that layer at (a release may keep it 16-bit)
            n_l = m.n_layers
            if mtp_moe:
                a_q, _, a_o, _ = attention(n_l)
                y = moe_layer(n_l)
                moe_mtp = (a_q + a_o + y["eu"] + y["ed"] + rt + y["su"] + y["sd"]
                           + y["permute"] + moe_x)
            layer = ((moe_mtp if mtp_moe else dense) + nongemm + ar + moe_x * mtp_moe
                     + (launch_moe if mtp_moe else 0.0))
            fc, _ = g(h, 2.0 * h, f"model.layers.{n_l}.eh_proj" if spec.drafter == "mtp" else None)
            hb = head[np.minimum(np.arange(M.size), head.size - 1)]
            draft_pass = layer + fc + hb
            draft_ctx = max(mem_s, cmp_s)
    return IterationModel(
        model=m, gpu=gpu, layout=lay, prec=prec, kv_dtype=kv_dtype, tables=tables,
        n_dense=m.n_layers - m.n_moe_layers, n_moe=m.n_moe_layers, dec_s_per_ctx_token=per_ctx,
        attn_flops_per_pair=att_pair, attention_kind=attention_kind,
        head_dim=ms.qk_dim / m.n_heads, peak16=peak16, overhead_s=overhead_s,
        dec_bound="memory (KV read)" if mem_s >= cmp_s else "compute", eff_x=eff_x,
        eff_y=eff_y, host_s_per_iter=float(host_s_per_iter), host_s_per_seq=float(host_s_per_seq),
        host_overlap=bool(host_overlap), host_iters_per_schedule=int(host_iters_per_schedule),
        adp_gather_padding=bool(adp_gather_padding), adp_idle=str(adp_idle),
        dec_mem_s=m.n_layers * mem_s / lay.pp, dec_cmp_s=m.n_layers * cmp_s / lay.pp,
        spec=spec, draft_pass=draft_pass, draft_per_ctx=draft_ctx, draft_it=draft_it,
        graph_sizes=tuple(int(x) for x in graph_sizes), graph_batch=graph_batch,
        graph_padding=bool(graph_padding), graph_max_ctx=int(graph_max_ctx), tbo=tbo_parts,
        launch_dense_s=launch_dense, launch_moe_s=launch_moe)


def layer_launch_s(m: ModelSpec, lay: ServeLayout, layer_kernels: dict[str, Any] | None
                   ) -> tuple[float, float]:
    """(dense layer, MoE layer) GPU seconds that kernel boundaries add per decoder layer and
    iteration: the kernels the engine's modeling file launches one after another on the
    layer's critical path (frameworks.toml ``layer_kernels``: attention, plus dense_ffn or
    moe_ffn), each paying the GPU's idle time between kernels (planner.toml [host]
    ``gpu_kernel_min_s``: on an H100 with CUDA graphs about 1.3 us per kernel during which no
    useful work is done, Hazy Research 2025; the same figure step/host.py takes as a tiny
    kernel's launch-to-completion floor). Added to the layer's priced work: the bubble is time
    between kernels, not inside them. The TP all-reduces are not counted (the collectives model
    prices each with its own latency), nor kernels on a side stream.

    Applies where the profile counted the kernels of the model's modeling file:
    ``"deepseekv3"`` for models with MLA (``kv_lora_rank`` > 0: TensorRT-LLM runs DeepSeek-V3,
    R1 and their kin through modeling_deepseekv3.py), on tensor-parallel attention. Not under
    attention DP (no all-reduce, an all-gather / reduce-scatter exchange instead: that layer's
    kernels were not counted), nor for other models or profiles: (0, 0)."""
    lk = layer_kernels or {}
    if lk.get("modeling") != "deepseekv3" or not m.kv_lora_rank or lay.attention_dp:
        return 0.0, 0.0
    from ..step.config import constants

    bubble = float(constants()["host"]["gpu_kernel_min_s"])
    attn = float(lk["attention"])
    return (attn + float(lk["dense_ffn"])) * bubble, (attn + float(lk["moe_ffn"])) * bubble


def _draft_model(spec: Any, m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision,
                 kv_dtype: str, max_seqs: int, attention_kind: str, cluster: Any,
                 decode_kv_reads: str, logits_gather: str) -> IterationModel:
    """The draft model's iteration model: the target's tp and precision, one stage, its
    experts (if any) over the tp ranks' ep; decode steps of up to ``max_seqs`` sequences."""
    from ...specs import get_model

    d = get_model(spec.draft_model)
    if d.vocab != m.vocab:
        raise BadInput(f"--spec model={d.id}: its vocabulary ({d.vocab:,}) is not {m.id}'s "
                       f"({m.vocab:,}); a draft model must share the target's tokenizer")
    if lay.attention_dp:
        raise BadInput("--spec draft=model with --layout adp=1 is not priced")
    dl = ServeLayout(lay.tp, 1, lay.ep if d.is_moe and d.n_experts % lay.ep == 0 else 1)
    return build(d, gpu, dl, prec, kv_dtype, max_tokens=max_seqs, max_seqs=max_seqs,
                 attention_kind=attention_kind, overhead_s=0.0, cluster=cluster,
                 decode_kv_reads=decode_kv_reads, logits_gather=logits_gather)


def gathered_permute_bytes(m: ModelSpec, prec: Any, lay: ServeLayout, T: Any) -> Any:
    """HBM bytes one rank's fused MoE op moves to permute and un-permute the routed copies when
    the attention-DP ranks all-gather their tokens first (TensorRT-LLM 1.0.0rc4
    ``CutlassFusedMoE.forward_chunk``, fused_moe_cutlass.py at commit 000a01de: ``fused_moe``
    takes the gathered ``x`` of n T rows, its output has n T rows and is reduce-scattered after;
    source ``trtllm-cutlass-moe-adp-10rc4``), T tokens on each of the n = tp ranks: the expand
    kernel copies the k / ep copies per gathered token that go to the rank's own experts (read
    and write), the finalize kernel (one block per original row) reads them back and writes one
    row for every gathered token: (3 k / ep + 1) n T h elements at the activation's bytes, the
    (3 k + 1) T h of a rank that runs only its own tokens when n = ep = 1."""
    n = float(lay.tp)
    k, ep = float(m.top_k), float(lay.ep)
    return (3.0 * k / ep + 1.0) * n * np.asarray(T, dtype=np.float64) * m.hidden \
        * prec.activation_bytes


def exchange_bytes(m: ModelSpec, prec: Precision, lay: ServeLayout, T: Any,
                   exchange: dict[str, Any]) -> tuple[Any, Any]:
    """Bytes of one MoE layer's token exchange under attention data parallelism with T tokens
    on each of the n = tp ranks, in the engine's form (frameworks.toml attention_dp; TensorRT-LLM
    1.0.0rc4's CutlassFusedMoE: all-gather, then reduce-scatter): the all-gather's gathered
    output, n T tokens each of h elements at the dispatch precision plus k routed experts'
    ``route_bytes_per_expert`` (expert id and weight), and the reduce-scatter's input, n T x h
    expert outputs of ``output_bytes`` each (nccl-tests' size conventions, as collective_time
    takes them). The dispatch precision is the checkpoint's activation precision (FP8
    per-tensor: 1 B; NVFP4: 0.5 B and one 1-byte scale per 16), or 16 bits where the engine
    sends that checkpoint kind unquantized (``dispatch_16bit``: "fp8_block", DeepSeek's FP8
    block scales, quantized inside the fused MoE op after the exchange)."""
    if exchange.get("exchange") != "allgather_reducescatter":
        raise BadInput(f"attention-DP exchange {exchange.get('exchange')!r} is not priced")
    n = float(lay.tp)
    T = np.asarray(T, dtype=np.float64)
    block_fp8 = (prec.name == "fp8" and m.quant is not None and m.quant.method == "fp8"
                 and m.quant.strategy == "block")
    e_d = (dtype("bf16").bytes if block_fp8 and "fp8_block" in exchange["dispatch_16bit"]
           else prec.activation_bytes)
    per_tok = float(m.hidden) * e_d + float(m.top_k) * float(exchange["route_bytes_per_expert"])
    return (n * T * per_tok, n * T * float(m.hidden) * float(exchange["output_bytes"]))


def deepep_rows(m: ModelSpec, exchange: dict[str, Any]) -> tuple[float, float, float]:
    """Bytes of one dispatched row (normal mode), one low-latency dispatched row, and one
    combined row, of a token's hidden vector, as the engine sends it (frameworks.toml
    attention_dp: ``dispatch_bytes_per_element`` FP8 with one 4-byte scale per 128 elements,
    the low-latency row's ``ll_row_extra_bytes`` as DeepEP's test counts it,
    ``combine_bytes_per_element`` 16 bits)."""
    h = float(m.hidden)
    d = h * float(exchange["dispatch_bytes_per_element"])
    return d, d + float(exchange.get("ll_row_extra_bytes", 0.0)), h * float(
        exchange["combine_bytes_per_element"])


def deepep_exchange_time(m: ModelSpec, lay: ServeLayout, T: Any, exchange: dict[str, Any],
                         cluster: Any, gpu: GPUSpec, calls: dict[str, np.ndarray] | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(normal-mode, low-latency-mode) seconds of one MoE layer's dispatch plus combine under
    attention data parallelism with T tokens on each of the ep = tp ranks, with the engine's
    DeepEP-class dispatcher (``exchange["dispatcher"]``, a collectives.toml kernel), priced by
    the step model's kernel-rate functions (step/comm.py):

    * normal mode: a token goes once to every node its experts reach and, inside a node, once
      to every GPU (``dedup_rows``); the network stage (``kernel_network_stage``) and the NVLink
      stage (``kernel_nvlink_stage``) pipeline, so each call takes the longer; dispatch rows
      of :func:`deepep_rows`' dispatch bytes, combine rows of its combine bytes;
    * low-latency mode: every (token, expert) pair is its own row, T top_k of them per rank,
      at the low-latency kernels' measured rate at ep ranks (``low_latency_stage_time``).

    ``calls``, where given, receives the normal mode's "dispatch" and "combine" seconds apart
    (two-batch overlap queues them one by one, :func:`tbo_layers_time`).

    No straggler (the busiest rank's rows over the mean) is charged on the exchange: the
    published figures ran with EPLB's redundant experts, and the expert GEMMs already take the
    busiest rank's share."""
    from ..step.comm import (
        dedup_rows,
        kernel_network_stage,
        kernel_nvlink_stage,
        low_latency_stage_time,
        ranks_per_node,
    )

    kernel = str(exchange.get("dispatcher") or "")
    if kernel != "deepep":
        raise BadInput(f"attention_dp dispatcher {kernel!r} is not priced (deepep)")
    T = np.asarray(T, dtype=np.float64)
    ep = float(lay.ep)
    r_ep = float(ranks_per_node(1, lay.ep, cluster.nvlink_domain))
    nodes, n_nodes, gpus = dedup_rows(m, ep, r_ep)
    row_d, row_ll, row_c = deepep_rows(m, exchange)
    up = gpu.scale_up_bytes_per_s
    normal = np.zeros_like(T)
    for call, row in (("dispatch", row_d), ("combine", row_c)):
        net = kernel_network_stage(kernel, cluster, T * row * nodes, n_nodes, call)
        nvl = kernel_nvlink_stage(kernel, cluster, up, T * row * gpus, r_ep, call)
        t_call = np.maximum(np.asarray(net), np.asarray(nvl))
        if calls is not None:
            calls[call] = t_call * np.ones_like(T)
        normal = normal + t_call
    k = float(m.top_k)
    ll = (np.asarray(low_latency_stage_time(kernel, cluster, T * k * row_ll, ep, "dispatch"))
          + np.asarray(low_latency_stage_time(kernel, cluster, T * k * row_c, ep, "combine")))
    return normal * np.ones_like(T), ll * np.ones_like(T)


def _nongemm(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision, cluster: Any,
             M: np.ndarray, ms: Any, fp8_input_cast_bytes: float | None = None) -> np.ndarray:
    """Forward memory-bound kernels of a layer at M tokens (step/elementwise.py), the layer's
    MLP width that of a dense layer or of the experts a token visits. The FP8 GEMM inputs'
    quantize is the step model's forward cast (its elements at the training recipe's bytes,
    which count a transposed copy kept for the backward) unless the engine's profile gives its
    own bytes per element (``fp8_input_cast_bytes``): the same elements at that width."""
    import dataclasses

    from ..planner import make_job
    from ..step.candidates import candidates
    from ..step.config import cast_bytes
    from ..step.elementwise import elementwise_bytes, nongemm_time

    job = make_job(m, seq_len=1, global_batch_seqs=1,
                   precision="fp8" if prec.gemm_dtype == "fp8" else "bf16")
    one = np.ones_like(M)
    cols = {"tp": (1 if lay.attention_dp else lay.tp) * one, "pp": lay.pp * one, "dp": one, "cp": one, "ep": lay.ep * one,
            "zero": 0 * one, "vpp": one, "rc": 0 * one, "micro_batch": one, "microbatches": one}
    c = dataclasses.replace(candidates(job, cluster, cols), T=M, sp_div=one)
    width = float(m.top_k * ms.moe_ffn + ms.shared_ffn) if m.is_moe else float(ms.ffn)
    f, _ = nongemm_time(c, width)
    if fp8_input_cast_bytes is not None and c.fp8:
        # the forward casts' elements (their bytes over the recipe's width) at the engine's own
        # bytes per element
        cast_f = elementwise_bytes(c, width).cast_f
        recipe = cast_bytes(c.fp8_scaling[0])[0]
        f = f + cast_f * (float(fp8_input_cast_bytes) / recipe - 1.0) / c.hbm
    return np.asarray(f) * one
