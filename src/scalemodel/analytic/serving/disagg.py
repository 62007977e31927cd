"""Disaggregated serving: a prefill pool that only runs prompts and a decode pool that only
decodes, the KV cache of every prompt moved between them on the GPUs' scale-out link.

A request's first token is computed by the prefill pool; its KV (ISL x KV bytes per token, each
of the prefill replica's tp GPUs sending its shard on its own NICs) then crosses the link in
RTT + bytes / (tp n_nic B_nic); the decode pool admits it with its prompt already cached. Both
pools are simulated by the same scheduler; the decode pool's arrivals are the prefill pool's
first tokens plus the transfer. The user's tokens are streamed by the decode pool, which starts
a request once its KV has arrived (Dynamo's SGLang disaggregation flow: "KV received, start
decode", then the decode worker streams each token to the client), so a request's TTFT ends at
its arrival there (the transfer included, as :func:`plan` screens it) and its TPOT runs from
there to its last token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...specs import GPUSpec, ModelSpec
from .engine import Engine
from .search import Candidate, screen
from .service import ServeResult, _pct
from .streams import Stream, draw


@dataclass(frozen=True)
class Link:
    id: str
    bytes_per_s: float  # per GPU, one direction (all its NICs)
    latency_s: float


def pool_link(gpu: GPUSpec) -> Link:
    """The link between the pools: the GPU's scale-out NICs (a pool per node or more)."""
    from ...errors import BadInput
    from ...specs import get_link

    ic = gpu.interconnect
    lid = ic.get("scale_out_link")
    if not lid:
        raise BadInput(f"--disaggregated: {gpu.id} has no interconnect.scale_out_link in its spec "
                       "to move KV between the pools")
    ln = get_link(str(lid))
    return Link(ln.id, ln.bytes_per_s_per_direction * float(ic.get("nics_per_gpu", 1)),
                ln.latency_s)


def kv_transfer_s(m: ModelSpec, kv_dtype: str, isl: Any, tp: int, link: Link) -> Any:
    from ..kv import model_kv_bytes_per_token

    b = model_kv_bytes_per_token(m, kv_dtype)
    return link.latency_s + np.asarray(isl) * b / (tp * link.bytes_per_s)


def _estimate(p: Candidate, d: Candidate) -> float:
    """Deployment output tokens/s of a pair: the slower pool sets the request rate."""
    return min(p.est_out_per_s, d.est_out_per_s)


def plan(m: ModelSpec, gpu: GPUSpec, eng: Engine, stream: Stream, isl: int, osl: int, *,
         n_gpus: int, lays: list[Any], precs: list[str], kvs: list[str | None],
         batches: list[int | None], token_budget: int | None, ttft_s: float | None,
         tpot_s: float | None) -> ServeResult | None:
    """The best (or, under SLAs, the fewest-GPU) prefill / decode split, simulated; None when
    no split fits."""
    link = pool_link(gpu)
    rate = stream.rate_per_s if stream.kind == "rate" else None
    # each pool screened on its own work: prompts only (OSL 1), decode only (prompt cached)
    pre = screen(m, gpu, eng, lays, precs, kvs, batches, isl, 1, rate, token_budget,
                 ttft_s, None)
    dec = screen(m, gpu, eng, lays, precs, kvs, batches, isl, osl, rate, token_budget,
                 None, tpot_s, decode_only=True)
    # output tokens/s of the prefill pool in prompts: OSL output tokens per prompt
    pre = [replace(c, est_out_per_s=c.est_out_per_s * osl) for c in pre]
    best, key = None, None
    for p in pre:
        t_x = float(kv_transfer_s(m, p.kv_dtype, isl, p.layout.tp, link))
        if ttft_s is not None and p.est_ttft_s + t_x > ttft_s:
            continue
        for d in dec:
            if d.prec.name != p.prec.name or d.kv_dtype != p.kv_dtype:
                continue
            g = p.layout.gpus + d.layout.gpus
            if g > n_gpus or (ttft_s is None and tpot_s is None and g != n_gpus):
                continue
            if tpot_s is not None and d.est_tpot_s > tpot_s:
                continue
            if rate is not None and _estimate(p, d) < 0.98 * rate * osl:
                continue
            k = (g, -_estimate(p, d)) if (ttft_s or tpot_s) else (-_estimate(p, d), g)
            if key is None or k < key:
                best, key = (p, d), k
    if best is None:
        return None
    return simulate_pair(best[0], best[1], m, eng, stream, isl, osl, link)


def simulate_pair(p: Candidate, d: Candidate, m: ModelSpec, eng: Engine, stream: Stream,
                  isl: int, osl: int, link: Link) -> ServeResult:
    from ...errors import BadInput
    from .scheduler import policy, simulate
    from .service import adp_ranks

    for c in (p, d):
        if c.layout.attention_dp and adp_ranks(c.layout, eng, 1 if c is p else None) == 1:
            raise BadInput(f"--disaggregated with --layout adp=1: {eng.id}'s attention-DP ranks "
                           "are not simulated in lock-step (rank assignment not read in "
                           "frameworks.toml attention_dp_schedule, or an on-demand KV reserve "
                           "with decoding requests)")
    a, i, o = draw(stream, isl, osl, m.max_context)
    n = a.size
    # prefill pool: requests dealt round robin to its replicas, OSL 1 each
    first = np.empty(n)
    for k in range(p.layout.dp):
        idx = np.arange(k, n, p.layout.dp)
        pol = policy(eng, p.es)
        r = simulate(p.it, pol, a[idx], i[idx], np.ones(idx.size, np.int64),
                     concurrency=0, ranks=adp_ranks(p.layout, eng, 1))
        first[idx] = r.first_token_s
    ready = first + kv_transfer_s(m, p.kv_dtype, i, p.layout.tp, link)
    finish = np.empty(n)
    f_dec = np.empty(n)
    iters = 0
    for k in range(d.layout.dp):
        idx = np.arange(k, n, d.layout.dp)
        pol = policy(eng, d.es, chunked_prefill=True)
        r = simulate(d.it, pol, ready[idx], i[idx], o[idx], prefilled=True,
                     ranks=adp_ranks(d.layout, eng))
        finish[idx] = r.finish_s
        f_dec[idx] = ready[idx]
        iters += r.iterations
    ttft = ready - a  # the first token reaches the user from the decode pool
    tpot = np.where(o > 1, (finish - f_dec) / np.maximum(o - 1, 1), 0.0)
    dec_tpot = tpot[o > 1] if bool(np.any(o > 1)) else tpot  # as service._result
    span = float(finish.max() - a.min())
    g = p.layout.gpus + d.layout.gpus
    return ServeResult(
        layout=d.layout, disaggregated=True, precision=d.prec.name, kv_dtype=d.kv_dtype,
        engine=eng.id, max_batch=d.es.max_batch, token_budget=d.es.token_budget,
        output_tokens_per_s=float(o.sum()) / span, total_tokens_per_s=float((i + o).sum()) / span,
        requests_per_s=n / span, ttft_p50_s=_pct(ttft, 0.5), ttft_p99_s=_pct(ttft, 0.99),
        tpot_p50_s=_pct(dec_tpot, 0.5), tpot_p99_s=_pct(dec_tpot, 0.99),
        kv_capacity_tokens=int(d.es.kv.max_tokens),
        max_concurrency=float(d.es.kv.max_tokens / (isl + osl)),
        memory_per_gpu_bytes=float(max(_mem(p), _mem(d))), gpus=g,
        bounds={"prefill": "compute (GEMMs, prefill pool)", "decode": "see the decode pool"},
        extra={"prefill_pool": {**p.layout.to_dict(), "gpus": p.layout.gpus,
                                "max_batch": p.es.max_batch, "token_budget": p.es.token_budget},
               "decode_pool": {**d.layout.to_dict(), "gpus": d.layout.gpus,
                               "max_batch": d.es.max_batch},
               "kv_transfer_s": float(kv_transfer_s(m, p.kv_dtype, isl, p.layout.tp, link)),
               "kv_link": link.id, "kv_link_bytes_per_s_per_gpu": link.bytes_per_s,
               "iterations": iters, "makespan_s": span, "requests_simulated": int(n)},
        ttft_mean_s=float(ttft.mean()), tpot_mean_s=float(tpot[o > 1].mean())
        if bool(np.any(o > 1)) else float("nan"))


def _mem(c: Candidate) -> float:
    kv = c.es.kv
    return float(kv.weights_bytes + kv.profile_activation_bytes + kv.non_torch_bytes
                 + kv.cuda_graph_bytes + kv.blocks * kv.block_size * kv.bytes_per_token)
