"""One serving configuration end to end: engine setup, iteration model, the stream through the
scheduler simulation, and the figures the CLI's JSON keys name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...errors import BadInput
from ...specs import GPUSpec, ModelSpec
from .engine import Engine, EngineSetup, setup
from .iteration import IterationModel, Precision, ServeLayout, build
from .scheduler import SimResult, policy, simulate
from .streams import Stream, check_prefix, draw, prefix_lengths


@dataclass(frozen=True)
class ServeResult:
    """One configuration's figures (deployment-wide unless named per GPU)."""

    layout: ServeLayout
    disaggregated: bool
    precision: str
    kv_dtype: str
    engine: str
    max_batch: int
    token_budget: int
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    kv_capacity_tokens: int  # per replica (per attention-DP rank under attention DP)
    max_concurrency: float  # requests of the workload's length the KV pool holds at once
    memory_per_gpu_bytes: float
    gpus: int
    bounds: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)
    # means over the requests, as vLLM's benchmark_serving.py reports them (mean TTFT; mean of
    # each request's (latency - TTFT) / (output tokens - 1)); NaN where not simulated
    ttft_mean_s: float = float("nan")
    tpot_mean_s: float = float("nan")

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def per_user_tokens_per_s(self) -> float:
        return 1.0 / self.tpot_p50_s if self.tpot_p50_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        best = {**self.layout.to_dict(), "disaggregated": self.disaggregated,
                "max_batch": self.max_batch, "attention_dp": bool(self.layout.attention_dp)}
        return {
            "best": best, "gpus": self.gpus, "precision": self.precision,
            "kv_dtype": self.kv_dtype, "framework": self.engine,
            "token_budget": self.token_budget,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "total_tokens_per_s": self.total_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "ttft_s": {"p50": self.ttft_p50_s, "p99": self.ttft_p99_s},
            "tpot_s": {"p50": self.tpot_p50_s, "p99": self.tpot_p99_s},
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "max_concurrency": self.max_concurrency,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "bounds": self.bounds, **self.extra,
        }


def iteration_model(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision,
                    kv_dtype: str, eng: Engine, es: EngineSetup) -> IterationModel:
    from ..planner import make_cluster
    from .engine import capture_sizes

    cl = make_cluster(gpu, lay.replica_gpus)
    sizes = capture_sizes(eng, es.max_batch, es.token_budget, float(gpu.hbm_bytes))
    g = eng.cuda_graph
    return build(m, gpu, lay, prec, kv_dtype,
                 max_tokens=max(es.token_budget, es.max_batch, *sizes),
                 max_seqs=es.max_batch, attention_kind=eng.attention_kind(gpu),
                 overhead_s=eng.overhead_s, cluster=cl, decode_kv_reads=eng.decode_kv_reads,
                 logits_gather=eng.logits_gather,
                 moe_gemm_kernel=eng.moe_gemm_kernel(gpu), host_s_per_iter=eng.host_s_per_iter,
                 host_s_per_seq=eng.host_s_per_seq, host_overlap=eng.host_overlap,
                 host_iters_per_schedule=eng.host_iters_per_schedule,
                 adp_exchange=eng.adp_exchange() if lay.attention_dp else None,
                 adp_gather_padding=(bool(eng.attention_dp_schedule.get("gather_padding", False))
                                     if lay.attention_dp else False),
                 adp_idle=str(eng.attention_dp_schedule.get("idle") or "dummy_generation"),
                 tbo=eng.two_batch_overlap if lay.attention_dp else None,
                 # k = 0 drafts verify nothing (E = 1): the plain decode step
                 spec=eng.speculation if eng.speculation is not None and eng.speculation.k > 0
                 else None, layer_kernels=eng.layer_kernels,
                 replicated_modules=eng.replicated_modules,
                 fp8_input_cast_bytes=eng.fp8_input_cast_bytes,
                 graph_sizes=sizes, graph_batch=str(g.get("cuda_graph_batch", "decode_seqs")),
                 graph_padding=bool(g.get("cuda_graph_padding", True)),
                 graph_max_ctx=int(g.get("cuda_graph_max_seq_len") or 0))


def bounds(it: IterationModel, es: EngineSetup, isl: int) -> dict[str, str]:
    """The bound each phase sits at: a full prefill chunk and a full decode batch."""
    tb = it.tables
    i_p = min(it.stage_tokens(es.token_budget), tb.dense.size - 1)
    i_d = min(it.stage_tokens(es.max_batch), tb.dense.size - 1)

    def gemm_bound(i: int) -> str:
        t = it.n_dense * tb.dense[i] + it.n_moe * tb.moe[i]
        c = it.n_dense * tb.dense_c[i] + it.n_moe * tb.moe_c[i]
        comm = (it.n_dense + it.n_moe) * tb.allreduce[i]
        if comm > t:
            return "communication (TP all-reduce)"
        return "compute (GEMMs)" if c >= 0.5 * t else "memory (weight reads)"

    kv_read = it.dec_s_per_ctx_token * es.max_batch * isl
    weights = it.n_dense * tb.dense[i_d] + it.n_moe * tb.moe[i_d]
    dec = gemm_bound(i_d)
    if kv_read > weights:  # attention over the KV outweighs the GEMMs
        dec = "memory (KV reads)" if it.dec_bound.startswith("memory") else "compute (attention)"
    return {"prefill": gemm_bound(i_p), "decode": dec}


def _pct(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.quantile(x, q)) if x.size else float("nan")


def _mean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")


def evaluate(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision, kv_dtype: str,
             eng: Engine, stream: Stream, isl: int, osl: int, *, max_batch: int | None = None,
             token_budget: int | None = None) -> ServeResult:
    """Simulate one replica under its share of the stream; dp replicas serve the stream side by
    side, each a 1/dp share of the requests and of the rate. How a Poisson stream reaches them
    is the engine's ``dispatch``: "random" (split at random, Poisson at rate / dp on each
    replica) or "least_busy" (the replica with the fewest requests in flight takes the next;
    with requests of one length leaving in arrival order that deals them in turn, so a replica
    sees every dp-th arrival, Erlang-dp gaps: :func:`dispatch_every`)."""
    es, it = _built(m, gpu, lay, prec, kv_dtype, eng, isl, osl, max_batch, token_budget)
    return _evaluate_built(m, lay, prec, kv_dtype, eng, es, it, stream, isl, osl)


def _built(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision, kv_dtype: str,
           eng: Engine, isl: int, osl: int, max_batch: int | None, token_budget: int | None
           ) -> tuple[EngineSetup, IterationModel]:
    """The engine setup and iteration model of a configuration: they do not depend on the
    stream, so a search over its rate (:func:`slo_rate`) builds them once."""
    if isl + osl > m.max_context:
        raise BadInput(f"--isl {isl:,} + --osl {osl:,} exceeds {m.id}'s context of "
                       f"{m.max_context:,} tokens")
    es = setup(eng, m, gpu, lay, prec, kv_dtype, isl, osl, max_batch=max_batch,
               token_budget=token_budget)
    if not es.kv.fits:
        raise BadInput(f"--layout {_lay(lay)}: {es.kv.lacks}")
    return es, iteration_model(m, gpu, lay, prec, kv_dtype, eng, es)


def _evaluate_built(m: ModelSpec, lay: ServeLayout, prec: Precision, kv_dtype: str,
                    eng: Engine, es: EngineSetup, it: IterationModel, stream: Stream, isl: int,
                    osl: int, stop_p99: tuple[float, float] | None = None
                    ) -> ServeResult | None:
    """:func:`evaluate` on a built configuration; with ``stop_p99`` (the p99 TTFT and TPOT
    limits), None where the simulation stopped early, its p99 sure to exceed one of them."""
    # attention DP: the replica's tp ranks each run their own batch (their own KV pool and
    # engine limits), in lock-step at each MoE layer; the scheduler simulates them together,
    # handing requests to ranks by the engine's rule (scheduler.simulate_lockstep)
    sh = _shares(lay, eng, osl)
    share = replace(stream, requests=max(1, -(-stream.requests // sh)),
                    rate_per_s=stream.rate_per_s / sh,
                    concurrency=-(-stream.concurrency // sh) if stream.concurrency else 0)
    a, i, o = draw(share, isl, osl, m.max_context, every=dispatch_every(lay, eng, stream, sh))
    pol = policy(eng, es)
    r = simulate(it, pol, a, i, o, concurrency=share.concurrency,
                 ranks=adp_ranks(lay, eng, osl), prefix=stream_prefix(eng, share, isl, i),
                 stop_p99=stop_p99)
    if r.stopped:
        return None
    # the deployment's figures are the simulated share's times the requests the deployment
    # holds at once over those the share holds: a closed loop of C clients over sh shares of
    # ceil(C / sh) each holds min(C, N) in flight, not sh ceil(C / sh) (C alone where C < sh,
    # the other replicas idle); max load, N requests over shares of ceil(N / sh) (N alone
    # where N < sh); a rate is split exactly (sh)
    if stream.kind == "concurrency" and share.concurrency:
        scale = (min(stream.concurrency, stream.requests)
                 / min(share.concurrency, share.requests))
    elif stream.kind == "max-load":
        scale = stream.requests / share.requests
    else:
        scale = None
    return _result(m, lay, prec, kv_dtype, eng, es, it, r, isl, osl, scale=scale)


def dispatch_every(lay: ServeLayout, eng: Engine, stream: Stream, shares: int) -> int:
    """Arrivals of the system stream per arrival at the simulated replica: dp where the engine's
    harness dispatches a Poisson stream to the least-busy of dp replicas (frameworks.toml
    ``dispatch = "least_busy"``), else 1 (a random split: the replica's own Poisson stream).
    The least-busy rule is taken as dealing in turn, which holds while requests leave in the
    order they came (one length each, about the same latency); with drawn lengths it is an
    approximation (docs/serving.md). Attention-DP ranks inside a replica keep their own rule."""
    if (stream.kind != "rate" or eng.dispatch != "least_busy" or lay.dp < 2
            or shares != lay.dp):
        return 1
    return int(lay.dp)


def stream_prefix(eng: Engine, stream: Stream, isl: int, i: np.ndarray) -> np.ndarray | None:
    """Each drawn prompt's tokens of the stream's shared prefix (streams.prefix_lengths), or
    None without one; a prefix on an engine whose prefix-cache rule was not read is bad
    input."""
    if not stream.prefix_tokens:
        return None
    check_prefix(stream.prefix_tokens, stream.prefix_share, isl)
    if eng.prefix_cache == "unread":
        raise BadInput(f"--prefix-tokens: {eng.id}'s prefix cache (KV block reuse) was not read "
                       "at its version (frameworks.toml prefix_cache = unread); it is not priced")
    return prefix_lengths(stream, i)


def _shares(lay: ServeLayout, eng: Engine | None = None, osl: int | None = None) -> int:
    """Independent batches the stream is split over: the dp replicas (the tp attention-DP
    ranks of a replica are simulated together, :func:`adp_ranks`), times the tp ranks where
    the engine's rank assignment was not read and one simulated rank stands for each."""
    if lay.attention_dp and adp_ranks(lay, eng, osl) == 1:
        return lay.dp * lay.tp
    return lay.dp


def adp_ranks(lay: ServeLayout, eng: Engine | None = None, osl: int | None = None) -> int:
    """Ranks of a replica simulated together: tp under attention DP where the engine's rule for
    handing requests to ranks was read (frameworks.toml attention_dp_schedule) and the
    lock-step can run its KV reserve (guaranteed-no-evict, or on-demand where no request
    decodes: ``osl`` 1, scheduler.simulate_lockstep), else 1. Otherwise (an engine without that
    reading; SGLang's on-demand reserve with decoding requests) a replica is simulated as one
    rank on a 1/tp share of its requests, the ranks taken as equal: an assumption, stated in
    docs/serving.md."""
    if not lay.attention_dp:
        return 1
    if eng is not None and not eng.attention_dp_schedule.get("assign"):
        return 1
    if eng is not None and eng.reserve != "full" and (osl is None or int(osl) > 1):
        return 1
    return lay.tp


def _lay(lay: ServeLayout) -> str:
    return ",".join(f"{k}={v}" for k, v in lay.to_dict().items())


def _result(m: ModelSpec, lay: ServeLayout, prec: Precision, kv_dtype: str, eng: Engine,
            es: EngineSetup, it: IterationModel, r: SimResult, isl: int, osl: int,
            scale: float | None = None) -> ServeResult:
    """The deployment's figures from one simulated share; ``scale``: the shares the
    deployment's throughput is of that one (default: the independent batches, :func:`_shares`)."""
    span = r.makespan_s
    sh = _shares(lay, eng, osl) if scale is None else scale
    out = float(r.osl.sum()) / span * sh
    tot = float((r.isl + r.osl).sum()) / span * sh
    kv = es.kv
    # TPOT over the requests that decode (output > 1 token), as benchmark_serving.py takes its
    # mean and percentiles: a one-token answer has no time per output token (where none
    # decodes, a prefill-only stream, its TPOT stays 0 as before)
    dec = r.osl > 1
    dec_tpot = r.tpot_s[dec] if bool(dec.any()) else r.tpot_s
    return ServeResult(
        layout=lay, disaggregated=False, precision=prec.name, kv_dtype=kv_dtype, engine=eng.id,
        max_batch=es.max_batch, token_budget=es.token_budget, output_tokens_per_s=out,
        total_tokens_per_s=tot, requests_per_s=r.isl.size / span * sh,
        ttft_p50_s=_pct(r.ttft_s, 0.5), ttft_p99_s=_pct(r.ttft_s, 0.99),
        tpot_p50_s=_pct(dec_tpot, 0.5), tpot_p99_s=_pct(dec_tpot, 0.99),
        kv_capacity_tokens=int(kv.max_tokens),
        max_concurrency=float(kv.max_tokens / max(isl + osl, 1)),
        memory_per_gpu_bytes=float(kv.weights_bytes + kv.profile_activation_bytes
                                   + kv.non_torch_bytes + kv.cuda_graph_bytes
                                   + kv.blocks * kv.block_size * kv.bytes_per_token),
        gpus=lay.gpus, bounds=bounds(it, es, isl),
        extra={"iterations": r.iterations, "preemptions": r.preemptions,
               "peak_batch": r.peak_batch, "mean_batch": r.mean_batch,
               "decode_iteration_s": r.decode_iter_s, "mixed_iteration_s": r.mixed_iter_s,
               "makespan_s": span, "requests_simulated": int(r.isl.size),
               "chunked_prefill": es.chunked_prefill, "reserve": eng.reserve,
               "batch_limits": es.why_batch, "max_model_len": es.max_model_len,
               "prefill_tokens_computed": r.prefill_tokens,
               "prefix_cache": eng.prefix_cache, "prefix_hit_tokens": r.prefix_hit_tokens},
        ttft_mean_s=_mean(r.ttft_s), tpot_mean_s=_mean(r.tpot_s[dec]))


@dataclass(frozen=True)
class SLORate:
    """The highest Poisson rate whose simulated run meets the p99 TTFT and TPOT limits (MLPerf
    Server's rule), with that run's figures; ``runs``: the simulations the search took."""

    rate_per_s: float
    result: ServeResult
    runs: int


def meets_p99(r: ServeResult, ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """LoadGen's Server constraints (results.cc PerfConstraintsMet with use_token_latencies):
    the 99th percentile first-token latency within ``ttft_p99_s`` and the 99th percentile time
    per output token within ``tpot_p99_s``."""
    return bool(r.ttft_p99_s <= ttft_p99_s and r.tpot_p99_s <= tpot_p99_s)


def slo_rate(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision, kv_dtype: str,
             eng: Engine, stream: Stream, isl: int, osl: int, *, ttft_p99_s: float,
             tpot_p99_s: float, max_batch: int | None = None, token_budget: int | None = None,
             rel_tol: float = 0.01) -> SLORate:
    """The MLPerf Server result as the planner prices it: bisect the Poisson rate of
    ``stream`` (its requests and seed; the rate it names is only the first guess) for the highest
    one whose run meets both p99 limits, to ``rel_tol`` of the rate. The figures returned are
    that run's (``requests_per_s`` is its completed requests over its span, as LoadGen's
    Completed samples per second). Seeded arrivals scale as 1 / rate, so the runs differ only by
    the rate."""
    if not (ttft_p99_s > 0 and tpot_p99_s > 0):
        raise BadInput(f"SLO limits must be positive, got TTFT {ttft_p99_s} s, TPOT "
                       f"{tpot_p99_s} s")
    if not stream.rate_per_s > 0:
        raise BadInput(f"--rate: the first guess must be positive, got {stream.rate_per_s}")
    runs = 0
    seen: dict[float, ServeResult | None] = {}  # None: a run stopped early, failing the limits
    # the engine setup and iteration model do not depend on the rate: built once; each run
    # stops as soon as its p99 is sure to exceed a limit (scheduler.simulate stop_p99), since
    # a failing rate's figures are never returned; a passing run always runs to the end
    es, it = _built(m, gpu, lay, prec, kv_dtype, eng, isl, osl, max_batch, token_budget)
    limits = (float(ttft_p99_s), float(tpot_p99_s))

    def meets(rate: float) -> bool:
        nonlocal runs
        if rate not in seen:
            runs += 1
            seen[rate] = _evaluate_built(m, lay, prec, kv_dtype, eng, es, it,
                                         replace(stream, rate_per_s=rate), isl, osl,
                                         stop_p99=limits)
        r = seen[rate]
        return r is not None and meets_p99(r, ttft_p99_s, tpot_p99_s)

    lo = hi = float(stream.rate_per_s)
    if meets(lo):
        for _ in range(40):
            hi = lo * 1.25
            if not meets(hi):
                break
            lo = hi
        else:
            raise BadInput("the SLO rate search found no rate the limits reject")
    else:
        for _ in range(40):
            lo = hi / 1.25
            if meets(lo):
                break
            hi = lo
        else:
            raise BadInput(f"no rate meets p99 TTFT {ttft_p99_s} s and TPOT {tpot_p99_s} s")
    while (hi - lo) > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if meets(mid):
            lo = mid
        else:
            hi = mid
    best = seen[lo]
    assert best is not None  # lo met the limits: its run went to the end
    return SLORate(lo, best, runs)
