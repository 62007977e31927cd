"""The serving search: layouts (TP, PP, EP, DP replicas), precision, KV dtype, batch limits and
disaggregated prefill / decode pools; the best deployment on N GPUs, or the fewest GPUs that meet
TTFT / TPOT SLAs at a target rate.

Screening is analytic: each candidate's steady state (r requests completing per iteration, each
iteration r ISL prefill tokens and r OSL decode tokens, within the batch, the token budget and
the KV pool; under a rate the fixed point r = lambda t_iter(r)) priced by the same iteration
model; the most promising candidates are then simulated with the full request stream, and only
simulated figures are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...errors import BadInput
from ...specs import GPUSpec, ModelSpec
from .engine import Engine, EngineSetup, setup
from .iteration import (
    SEARCHED_PRECISIONS,
    IterationModel,
    Precision,
    ServeLayout,
    check_layout,
    precision,
)
from .service import ServeResult, iteration_model
from .streams import Stream

BATCH_OPTIONS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
SIMULATE_TOP = 4


@dataclass(frozen=True)
class Candidate:
    layout: ServeLayout
    prec: Precision
    kv_dtype: str
    max_batch: int
    token_budget: int
    est_out_per_s: float  # deployment output tokens/s, steady state
    est_ttft_s: float
    est_tpot_s: float
    es: EngineSetup
    it: IterationModel


@dataclass(frozen=True)
class SearchResult:
    best: ServeResult
    simulated: tuple[ServeResult, ...]
    screened: tuple[Candidate, ...]
    meets_sla: bool
    sla: dict[str, float]
    pareto: tuple[tuple[float, float, str], ...]  # (per-user tokens/s, output tokens/s per GPU, label)


def layouts(m: ModelSpec, n_gpus: int, domain: int, fixed: dict[str, int],
            exact: bool, adp_ok: bool = False) -> list[ServeLayout]:
    """Every (tp, pp, ep, dp) of at most (or, ``exact``, exactly) n_gpus GPUs; with
    ``adp_ok`` (the engine runs attention data parallelism and its exchange is priced) an MoE
    model also gets, for each tp > 1, the attention-DP layout with the experts over ep = tp,
    unless ``fixed`` says adp (1: only those, 0: none)."""
    adp = bool(fixed.get("adp"))  # attention data parallelism: experts over ep = tp
    if fixed:  # a fixed key the model cannot run is said as such
        tp0 = fixed.get("tp", fixed.get("ep", 1))
        check_layout(m, ServeLayout(tp0, fixed.get("pp", 1),
                                    fixed.get("ep", tp0 if adp else 1), fixed.get("dp", 1),
                                    attention_dp=adp))
    out = []
    tps = [fixed["tp"]] if "tp" in fixed else [t for t in (1, 2, 4, 8, 16) if t <= domain]
    pps = [fixed["pp"]] if "pp" in fixed else [1, 2, 4, 8]
    for tp in tps:
        for pp in pps:
            eps = ([fixed["ep"]] if "ep" in fixed else [tp] if adp else
                   ([e for e in (1, 2, 4, 8, 16) if e <= tp and tp % e == 0
                     and m.n_experts % e == 0] if m.is_moe else [1]))
            rep = tp * pp
            if rep > n_gpus:
                continue
            dps = ([fixed["dp"]] if "dp" in fixed else
                   ([n_gpus // rep] if exact else list(range(1, n_gpus // rep + 1))))
            # the attention-DP variant the search may offer beside the plain layouts
            extra = (adp_ok and "adp" not in fixed and m.is_moe and tp > 1
                     and fixed.get("ep", tp) == tp)
            variants = [(ep, adp) for ep in eps] + ([(tp, True)] if extra else [])
            for ep, a in variants:
                for dp in dps:
                    if exact and rep * dp != n_gpus:
                        continue
                    lay = ServeLayout(tp, pp, ep, dp, attention_dp=a)
                    try:
                        check_layout(m, lay)
                    except BadInput:
                        if fixed and a == adp:
                            raise
                        continue
                    out.append(lay)
    return out


def _steady(it: IterationModel, es: EngineSetup, isl: int, osl: int, reserve: str,
            rate_per_replica: float | None, decode_only: bool = False,
            in_flight: float | None = None) -> tuple[float, float, float]:
    """(output tokens/s per replica, TTFT, TPOT) of the steady state: r requests complete per
    iteration, r OSL decode tokens and r ISL prefill tokens per iteration on average, within
    the batch, the token budget and the KV pool. Prompts arrive whole, a Poisson number k of
    them per iteration, and the iteration time is convex in its tokens, so its mean is taken
    over k. Under a rate the fixed point r = lambda t(r) is read off a grid of r.
    ``decode_only``: the prompts arrive cached (a disaggregated decode pool)."""
    kv_seqs = es.kv.max_tokens / (isl + osl if reserve == "full" else isl + osl / 2)
    B = max(1.0, min(es.max_batch, kv_seqs, in_flight or float("inf")))
    budget = es.token_budget
    # speculative decoding: a request takes osl / E verify steps, each of 1 + k budget tokens
    sp = it.spec
    E, kd = (float(sp.tokens_per_step), int(sp.k)) if sp is not None else (1.0, 0)
    steps = osl / E
    per_req = steps * (1 + kd) + (0 if decode_only else isl)
    r_max = max(min(B / max(steps, 1e-9), budget / per_req), 1e-6)
    att1 = it.prefill_attention(np.array([float(isl)]), np.zeros(1))
    rs = np.geomspace(min(1e-4, r_max / 2), r_max, 40)
    K = int(r_max + 4 * np.sqrt(r_max) + 3)
    ks = np.arange(K, dtype=np.float64)
    logfac = np.concatenate([[0.0], np.cumsum(np.log(ks[1:]))])
    pk = np.exp(ks[None, :] * np.log(rs[:, None]) - rs[:, None] - logfac[None, :])
    pk /= pk.sum(axis=1, keepdims=True)
    n_d = np.minimum(rs * steps, B)[:, None]
    n_p = (np.minimum(ks[None, :] * isl, np.maximum(budget - n_d * (1 + kd), 0))
           * (not decode_only))
    n_log = np.ceil(n_d + ks[None, :])
    T_k = np.ceil(n_d + n_p)
    if sp is None:
        rows = it.graph_rows_v(T_k, n_p == 0, float(isl + osl))  # CUDA-graph padding
        gpu_k = (it.dense_part_v(T_k, n_log, rows) + n_p / isl * att1
                 + it.dec_s_per_ctx_token * n_d * (isl + osl / 2))
    else:
        gpu_k = (it.verify_gpu_v(n_d + n_p, n_log, n_d * (isl + osl / 2), n_d * np.ones_like(n_p))
                 + n_p / isl * att1)
    t = (pk * it.with_host(gpu_k, n_log)).sum(axis=1)  # the engine's host loop per iteration
    if rate_per_replica is None:
        r, tr = rs[-1], t[-1]
    else:
        g = rate_per_replica * t - rs
        cross = np.nonzero(g <= 0)[0]
        if cross.size == 0:  # the replica cannot keep up with its share of the rate
            return rs[-1] * osl / t[-1], float("inf"), float("inf")
        j = int(cross[0])
        if j == 0:
            r, tr = rs[0], t[0]
        else:  # linear between the grid points around the crossing
            f = g[j - 1] / (g[j - 1] - g[j])
            r = rs[j - 1] + f * (rs[j] - rs[j - 1])
            tr = t[j - 1] + f * (t[j] - t[j - 1])
    chunk = max(budget - r * osl, 1.0)
    ttft = tr * (0.5 + (0 if decode_only else np.ceil(isl / chunk)))
    return float(r * osl / tr), float(ttft), float(tr / E)


class _Models:
    """Engine setups and iteration models of one search, built once per replica layout."""

    def __init__(self, m: ModelSpec, gpu: GPUSpec, eng: Engine, isl: int, osl: int) -> None:
        self.m, self.gpu, self.eng, self.isl, self.osl = m, gpu, eng, isl, osl
        self.its: dict[Any, IterationModel] = {}

    def get(self, lay: ServeLayout, p: Precision, kd: str, mb: int | None, tb: int | None
            ) -> tuple[EngineSetup, IterationModel]:
        es = setup(self.eng, self.m, self.gpu, lay, p, kd, self.isl, self.osl, max_batch=mb,
                   token_budget=tb)
        if not es.kv.fits:
            raise BadInput(es.kv.lacks)
        key = (lay, p.name, kd)
        it = self.its.get(key)
        need_t, need_s = max(es.token_budget, es.max_batch), es.max_batch
        if it is None or it.tables.dense.size <= it.stage_tokens(need_t) or \
                it.tables.head.size <= need_s:
            big = replace(es, token_budget=max(need_t, 8192), max_batch=max(need_s, 4096))
            it = iteration_model(self.m, self.gpu, lay, p, kd, self.eng, big)
            self.its[key] = it
        return es, it


def screen(m: ModelSpec, gpu: GPUSpec, eng: Engine, lays: list[ServeLayout], precs: list[str],
           kv_dtypes: list[str | None], batches: list[int | None], isl: int, osl: int,
           rate: float | None, token_budget: int | None, ttft_s: float | None = None,
           tpot_s: float | None = None, decode_only: bool = False,
           concurrency: int = 0) -> list[Candidate]:
    """Steady-state estimates; under SLAs each replica configuration stops at the fewest
    replicas whose estimate meets them."""
    models = _Models(m, gpu, eng, isl, osl)
    reps: dict[tuple[int, int, int, bool], list[int]] = {}
    for lay in lays:
        reps.setdefault((lay.tp, lay.pp, lay.ep, lay.attention_dp), []).append(lay.dp)
    out = []
    seen: set[tuple[Any, ...]] = set()
    for (tp, pp, ep, adp), dps in reps.items():
        rep = ServeLayout(tp, pp, ep, 1, attention_dp=adp)
        n_r = tp if adp else 1  # independent rank batches per replica (attention DP)
        for pn in precs:
            p = precision(pn)
            for kvd in kv_dtypes:
                kd = kvd or eng.default_kv_dtype(p)
                for mb in batches:
                    try:
                        es, it = models.get(rep, p, kd, mb, token_budget)
                    except BadInput:
                        continue
                    key = (rep, pn, kd, es.max_batch, es.token_budget)
                    if key in seen:  # the engine's default batch equals a searched one
                        continue
                    seen.add(key)
                    for dp in _dp_probe(sorted(dps), rate, ttft_s, tpot_s, it, es, isl, osl,
                                        eng.reserve, decode_only):
                        rr = None if rate is None else rate / (dp * n_r)
                        o, ttft, tpot = _steady(it, es, isl, osl, eng.reserve, rr, decode_only,
                                                concurrency / (dp * n_r) if concurrency
                                                else None)
                        # C clients keep at most C of the dp x n_r batches busy
                        busy = min(dp * n_r, concurrency) if concurrency else dp * n_r
                        out.append(Candidate(replace(rep, dp=dp), p, kd, es.max_batch,
                                             es.token_budget, o * busy, ttft, tpot, es,
                                             it))
    return out


def _dp_probe(dps: list[int], rate: float | None, ttft_s: float | None, tpot_s: float | None,
              it: IterationModel, es: EngineSetup, isl: int, osl: int, reserve: str,
              decode_only: bool = False) -> list[int]:
    """The replica counts worth screening: all of them without a rate; under a rate the
    fewest whose estimate meets the SLAs (bisection: more replicas only lower each one's
    load), and the largest."""
    if rate is None or len(dps) <= 2:
        return dps

    def ok(dp: int) -> bool:
        _, ttft, tpot = _steady(it, es, isl, osl, reserve, rate / dp, decode_only)
        return (ttft_s is None or ttft <= ttft_s) and (tpot_s is None or tpot <= tpot_s)

    lo, hi = 0, len(dps) - 1
    if not ok(dps[hi]):
        return [dps[hi]]
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(dps[mid]):
            hi = mid
        else:
            lo = mid + 1
    return sorted({dps[lo], dps[-1]})


def simulate_candidate(c: Candidate, m: ModelSpec, eng: Engine, stream: Stream, isl: int,
                       osl: int) -> ServeResult:
    """The candidate's full-stream simulation, as :func:`service.evaluate` runs it (one path:
    the replicas' shares, the engine's dispatch of a rate stream, attention-DP ranks, the
    prefix cache)."""
    from .service import _evaluate_built

    r = _evaluate_built(m, c.layout, c.prec, c.kv_dtype, eng, c.es, c.it, stream, isl, osl)
    assert r is not None  # no stop_p99: the run goes to the end
    return r


def _meets(r: ServeResult, ttft: float | None, tpot: float | None) -> bool:
    return ((ttft is None or r.ttft_p99_s <= ttft) and (tpot is None or r.tpot_p99_s <= tpot))


def pareto(points: list[tuple[float, float, str]]) -> tuple[tuple[float, float, str], ...]:
    """The points no other beats on both per-user speed and throughput per GPU."""
    pts = sorted(points, key=lambda p: (-p[0], -p[1]))
    front, best = [], -1.0
    for p in pts:
        if p[1] > best:
            front.append(p)
            best = p[1]
    return tuple(sorted(front))


def search(m: ModelSpec, gpu: GPUSpec, eng: Engine, stream: Stream, isl: int, osl: int, *,
           n_gpus: int, domain: int, fixed: dict[str, int], precs: list[str] | None,
           kv_dtype: str | None, max_batch: int | None, token_budget: int | None,
           ttft_s: float | None, tpot_s: float | None,
           disaggregated: bool = False) -> SearchResult:
    if isl + osl > m.max_context:
        raise BadInput(f"--isl {isl:,} + --osl {osl:,} exceeds {m.id}'s context of "
                       f"{m.max_context:,} tokens")
    sla = ttft_s is not None or tpot_s is not None
    if disaggregated and stream.kind == "concurrency":
        # disagg.simulate_pair feeds the prefill pool the drawn arrivals, all at t = 0 for a
        # concurrency stream: the closed loop (a client's next request when its answer leaves
        # the decode pool) is not simulated across the two pools
        raise BadInput("--disaggregated with --concurrency: a closed loop across the prefill "
                       "and decode pools is not simulated; give --rate R or --max-load")
    if sla and stream.kind == "max-load":
        raise BadInput("--ttft-ms / --tpot-ms need a target load: give --rate R (requests/s) or "
                       "--concurrency C; under --max-load every request waits in one queue")
    # the lock-step of attention-DP ranks does not price draft verification (time_lockstep), so
    # with speculative decoding the search leaves attention DP out
    adp_ok = (bool(eng.attention_dp.get("supported"))
              and eng.attention_dp.get("exchange") != "unread"
              and not (eng.speculation is not None and eng.speculation.k > 0))
    lays = layouts(m, n_gpus, domain, fixed, exact=not sla, adp_ok=adp_ok)
    if fixed.get("adp"):
        eng.adp_exchange()  # asked for: the engine must run it (one line otherwise)
        if eng.speculation is not None and eng.speculation.k > 0:
            raise BadInput("--spec with --layout adp=1 is not priced: the attention-DP "
                           "lock-step does not verify drafts")
    if not lays:
        raise BadInput(f"--gpus {n_gpus}: no TP x PP x DP layout of {m.id} uses that many GPUs "
                       "(TP must divide the attention heads)")
    precs = precs or [p for p in SEARCHED_PRECISIONS if p != "fp8" or "fp8" in gpu.flop_per_s]
    for pn in precs:  # an asked precision the GPU has no tensor-core path for: say so
        dt = precision(pn).gemm_dtype
        if dt not in gpu.flop_per_s:
            raise BadInput(f"--precision {pn}: {gpu.id} has no {dt} tensor-core path (its "
                           f"spec lists {', '.join(gpu.flop_per_s)})")
    batches: list[int | None] = [max_batch] if max_batch else [None, *BATCH_OPTIONS]
    kvs: list[str | None] = [kv_dtype] if kv_dtype else [None]
    rate = stream.rate_per_s if stream.kind == "rate" else None
    cands = screen(m, gpu, eng, lays, precs, kvs, batches, isl, osl, rate, token_budget,
                   ttft_s, tpot_s, concurrency=stream.concurrency)
    if not cands:
        raise BadInput(f"no layout of {m.id} on up to {n_gpus} x {gpu.id} fits in memory "
                       f"with {eng.id}'s KV pool")
    sims: list[ServeResult] = []
    if sla:
        # fewest GPUs first, then the estimate's throughput; confirm by simulation
        ok = [c for c in cands if (ttft_s is None or c.est_ttft_s <= ttft_s)
              and (tpot_s is None or c.est_tpot_s <= tpot_s)]
        order = sorted(ok, key=lambda c: (c.layout.gpus, -c.est_out_per_s))
        best = None
        for c in order[:3 * SIMULATE_TOP]:
            r = simulate_candidate(c, m, eng, stream, isl, osl)
            sims.append(r)
            if _meets(r, ttft_s, tpot_s):
                best = r
                break
        if best is None:  # the closest: least relative excess over the SLAs
            near = sorted(cands, key=lambda c: _excess(c.est_ttft_s, c.est_tpot_s, ttft_s,
                                                       tpot_s))[:SIMULATE_TOP]
            sims += [simulate_candidate(c, m, eng, stream, isl, osl) for c in near]
            best = min(sims, key=lambda r: _excess(r.ttft_p99_s, r.tpot_p99_s, ttft_s, tpot_s))
        met = _meets(best, ttft_s, tpot_s)
    else:
        top = sorted(cands, key=lambda c: -c.est_out_per_s)[:SIMULATE_TOP]
        sims = [simulate_candidate(c, m, eng, stream, isl, osl) for c in top]
        best = max(sims, key=lambda r: r.output_tokens_per_s)
        met = True
    if disaggregated:
        from .disagg import plan as disagg_plan

        dis_lays = layouts(m, n_gpus, domain, {k: v for k, v in fixed.items() if k != "dp"},
                           exact=False)
        dr = disagg_plan(m, gpu, eng, stream, isl, osl, n_gpus=n_gpus, lays=dis_lays,
                         precs=precs, kvs=kvs, batches=batches, token_budget=token_budget,
                         ttft_s=ttft_s, tpot_s=tpot_s)
        if dr is not None:
            sims.append(dr)
            d_ok = _meets(dr, ttft_s, tpot_s)
            if sla and d_ok and (not met or dr.gpus < best.gpus):
                best, met = dr, True
            elif not sla and dr.output_tokens_per_s > best.output_tokens_per_s:
                best = dr
    pts = [(1.0 / c.est_tpot_s, c.est_out_per_s / c.layout.gpus,
            f"{_label(c.layout)} {c.prec.name} b{c.max_batch}")
           for c in cands if np.isfinite(c.est_tpot_s) and c.est_tpot_s > 0]
    return SearchResult(best, tuple(sims), tuple(cands), met,
                        {"ttft_s": ttft_s or 0.0, "tpot_s": tpot_s or 0.0}, pareto(pts))


def _excess(ttft: float, tpot: float, ttft_s: float | None, tpot_s: float | None) -> float:
    e = 0.0
    if ttft_s:
        e = max(e, ttft / ttft_s - 1)
    if tpot_s:
        e = max(e, tpot / tpot_s - 1)
    return e if np.isfinite(e) else float("inf")


def _label(lay: ServeLayout) -> str:
    return (f"tp{lay.tp} pp{lay.pp}" + (f" ep{lay.ep}" if lay.ep > 1 else "")
            + (" adp" if lay.attention_dp else "") + f" dp{lay.dp}")


__all__ = ["Candidate", "SearchResult", "layouts", "pareto", "screen", "search",
           "simulate_candidate"]
