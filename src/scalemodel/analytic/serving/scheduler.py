"""An iteration-level simulation of a serving engine's scheduler on one replica.

Each iteration the engine (vLLM V1's and TensorRT-LLM's in-flight batching alike):

1. runs one decode token for every running sequence whose prompt is in the KV cache, each
   counting one token of the budget;
2. continues partly prefilled prompts, then admits waiting requests first come first served,
   while the batch holds fewer than ``max_batch`` sequences and the token budget lasts: with
   chunked prefill a prompt takes what is left of the budget, without it a prompt enters only
   whole;
3. allocates KV blocks of ``block_tokens`` tokens: ``reserve = "full"`` admits a request only
   when the blocks of its whole prompt and output are free (TensorRT-LLM's guaranteed-no-evict
   policy), ``reserve = "on_demand"`` allocates block by block and, when a decode token finds no
   free block, preempts the most recently admitted sequence: its blocks are freed and it waits
   at the head of the queue to recompute its prompt and what it had generated (vLLM's
   recompute preemption).

A prompt's last chunk emits the request's first token; each decode iteration one more. Stretches
where the batch cannot change (nothing to admit, no prefill in flight) are advanced in one move
up to the next finish, KV exhaustion or arrival: the iteration time grows linearly with the KV
the decode tokens read, so the stretch costs k times its mid-point iteration.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import BadInput
from .iteration import IterationModel


@dataclass(frozen=True)
class SchedulerPolicy:
    max_batch: int  # sequences per iteration (max_num_seqs / max_batch_size)
    token_budget: int  # tokens per iteration (max_num_batched_tokens / max_num_tokens)
    chunked_prefill: bool
    reserve: str  # "full" (guaranteed no evict) or "on_demand" (preempt by recompute)
    block_tokens: int
    kv_blocks: int  # blocks in the replica's KV pool
    # vLLM V0 (engine profile prefill_alone, host_iters_per_schedule): a step with prefills runs
    # no decodes, and a decode batch, once scheduled, runs steps_per_schedule steps unchanged
    prefill_alone: bool = False
    steps_per_schedule: int = 1


def policy(eng: Any, es: Any, *, chunked_prefill: bool | None = None) -> SchedulerPolicy:
    """The scheduler policy of engine profile ``eng`` (engine.Engine) with its setup ``es``
    (engine.EngineSetup): a profile with ``prefill_alone`` (vLLM V0's default scheduler, taken
    only without chunked prefill: V0 with chunking mixes decodes and prefill chunks) holds each
    decode batch for its ``host_iters_per_schedule`` steps (multi-step scheduling); for other
    profiles that figure only spreads the host seconds (iteration.py)."""
    chunked = es.chunked_prefill if chunked_prefill is None else chunked_prefill
    v0 = bool(eng.prefill_alone) and not chunked  # V0 with chunking mixes (decode first)
    return SchedulerPolicy(
        es.max_batch, es.token_budget, chunked, eng.reserve, es.kv.block_size, es.kv.blocks,
        prefill_alone=v0, steps_per_schedule=int(eng.host_iters_per_schedule) if v0 else 1)


@dataclass(frozen=True)
class SimResult:
    """Per-request times of one replica (seconds) and the run's totals."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    makespan_s: float
    iterations: int
    preemptions: int
    peak_batch: int
    mean_batch: float  # sequences per iteration, iteration-weighted
    decode_iter_s: float  # mean seconds of an iteration without prefill
    mixed_iter_s: float  # mean seconds of an iteration with prefill

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        n = np.maximum(self.osl - 1, 1)
        return np.where(self.osl > 1, (self.finish_s - self.first_token_s) / n, 0.0)


def _blocks(tokens: np.ndarray | int, bs: int) -> Any:
    return -(-np.asarray(tokens) // bs)


def simulate(it: IterationModel, pol: SchedulerPolicy, arrival_s: np.ndarray, isl: np.ndarray,
             osl: np.ndarray, *, prefilled: bool = False, concurrency: int = 0,
             stretch: bool = True, max_iterations: int = 5_000_000) -> SimResult:
    """Run every request through the scheduler; ``prefilled``: prompts arrive with their KV
    (a disaggregated decode pool), so only decode work is done; ``concurrency`` C > 0: a closed
    loop of C clients, request j >= C arriving when the (j - C + 1)-th request finishes;
    ``stretch`` False: step every iteration (the one-move stretches are then checked against
    it)."""
    n = int(arrival_s.size)
    arrival_s = np.asarray(arrival_s, dtype=np.float64).copy()
    if concurrency > 0:
        arrival_s[concurrency:] = np.inf
        arrival_s[:concurrency] = 0.0
    isl = np.asarray(isl, dtype=np.int64)
    osl = np.asarray(osl, dtype=np.int64)
    bs, cap = pol.block_tokens, pol.kv_blocks
    need_full = _blocks(isl + osl - 1, bs)
    if pol.reserve == "full" and n and int(need_full.max()) > cap:
        raise BadInput(f"the KV pool ({cap * bs:,} tokens) cannot hold one request of "
                       f"{int((isl + osl).max()):,} tokens")
    if not pol.chunked_prefill and not prefilled and n and int(isl.max()) > pol.token_budget:
        raise BadInput(f"a {int(isl.max()):,}-token prompt exceeds the token budget "
                       f"{pol.token_budget:,} and chunked prefill is off")
    if pol.prefill_alone or pol.steps_per_schedule > 1:
        if pol.chunked_prefill and not prefilled:
            raise BadInput("a scheduler whose prefill steps run alone or whose decode batch is "
                           "held for several steps (vLLM V0's default scheduler, multi-step) "
                           "is simulated without chunked prefill only")
        return _simulate_v0(it, pol, arrival_s, isl, osl, need_full, prefilled=prefilled,
                            concurrency=concurrency, max_iterations=max_iterations)
    order = np.argsort(arrival_s, kind="stable")
    target = isl.copy()  # prompt tokens to (re)compute
    done_p = np.zeros(n, np.int64) if not prefilled else isl.copy()
    kv = np.zeros(n, np.int64) if not prefilled else isl.copy()
    gen = np.zeros(n, np.int64) if not prefilled else np.ones(n, np.int64)
    blocks = np.zeros(n, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    if prefilled:
        first[:] = np.where(np.isfinite(arrival_s), arrival_s, np.nan)
    waiting: deque[int] = deque()
    run = np.zeros(0, np.int64)  # running sequences, in admission order
    prefilling: list[int] = []  # of them, prompts not yet whole in the KV cache
    nxt, t, free = 0, 0.0, cap
    iters = pre = peak = 0
    seq_iters = 0.0
    t_dec = t_mix = 0.0
    n_dec_it = n_mix_it = 0
    finished = 0
    while finished < n:
        while nxt < n and arrival_s[order[nxt]] <= t:
            waiting.append(int(order[nxt]))
            nxt += 1
        if not run.size and not waiting:
            t = float(arrival_s[order[nxt]])
            continue
        if iters > max_iterations:
            raise BadInput("the serving simulation did not finish (no progress); check the "
                           "token budget and KV pool")
        dec = run[done_p[run] >= target[run]]
        # KV for this iteration's decode tokens (on demand: preempt the newest when short)
        if dec.size and pol.reserve == "on_demand":
            grow = int(np.count_nonzero(kv[dec] + 1 > blocks[dec] * bs))
            while grow > free and run.size:
                v = int(run[-1])
                run = run[:-1]
                free += int(blocks[v])
                blocks[v] = 0
                target[v] = isl[v] + gen[v]
                done_p[v] = 0
                kv[v] = 0
                if v in prefilling:
                    prefilling.remove(v)
                waiting.appendleft(v)
                pre += 1
                dec = run[done_p[run] >= target[run]]
                grow = int(np.count_nonzero(kv[dec] + 1 > blocks[dec] * bs))
            add = dec[kv[dec] + 1 > blocks[dec] * bs]
            blocks[add] += 1
            free -= int(add.size)
        budget = pol.token_budget - int(dec.size)
        chunk_ids: list[int] = []
        chunk_len: list[int] = []
        for r in prefilling:  # prompts in flight first, then admission
            if budget <= 0:
                break
            c = min(int(target[r] - done_p[r]), budget)
            if pol.reserve == "on_demand":
                c = int(min(c, (blocks[r] + free) * bs - kv[r]))
                if c <= 0:
                    continue
                extra = max(int(_blocks(kv[r] + c, bs)) - int(blocks[r]), 0)
                blocks[r] += extra
                free -= extra
            chunk_ids.append(r)
            chunk_len.append(c)
            budget -= c
        admitted: list[int] = []
        while waiting and run.size + len(admitted) < pol.max_batch and (budget > 0 or prefilled):
            r = waiting[0]
            left = int(target[r] - done_p[r])
            c = min(left, budget) if pol.chunked_prefill else left
            if c > budget:
                break
            need = (int(need_full[r]) if pol.reserve == "full"
                    else int(_blocks(kv[r] + max(c, 1), bs)))
            if need > free:
                break
            waiting.popleft()
            blocks[r] = need
            free -= need
            admitted.append(r)
            if c > 0:
                chunk_ids.append(r)
                chunk_len.append(c)
                budget -= c
                if c < left:
                    prefilling.append(r)
        if admitted:
            run = np.concatenate([run, np.asarray(admitted, dtype=np.int64)])
        cid = np.asarray(chunk_ids, dtype=np.int64)
        clen = np.asarray(chunk_len, dtype=np.int64)
        if dec.size == 0 and cid.size == 0:
            if admitted:
                continue
            if nxt < n:  # blocked until something arrives
                t = max(t, float(arrival_s[order[nxt]]))
                continue
            raise BadInput(f"the KV pool ({cap * bs:,} tokens) or the batch limits admit no "
                           "waiting request")
        completes = cid[done_p[cid] + clen >= target[cid]] if cid.size else cid
        T = int(dec.size + clen.sum())
        n_log = int(dec.size + completes.size)
        ctx_sum = float((kv[dec] + 1).sum()) if dec.size else 0.0
        k = 1
        if stretch and cid.size == 0 and dec.size:
            k = _stretch(it, pol, dec, kv, gen, osl, blocks, free, waiting, run.size, nxt, n,
                         arrival_s, order, t, T, n_log, ctx_sum, need_full, target, done_p)
        mx = float(kv[dec].max() + 1) if dec.size else 0.0  # the longest decode sequence
        if k == 1:
            dt = it.time(T, n_log, ctx_sum, clen, done_p[cid] if cid.size else clen, mx)
        else:
            dt = k * it.time(T, n_log, ctx_sum + dec.size * (k - 1) / 2.0, clen, clen,
                             mx + k - 1)
            if pol.reserve == "on_demand":
                new_b = np.maximum(_blocks(kv[dec] + k, bs) - blocks[dec], 0)
                blocks[dec] += new_b
                free -= int(new_b.sum())
        t += dt
        iters += k
        seq_iters += k * (dec.size + cid.size)
        peak = max(peak, int(run.size))
        if cid.size:
            t_mix += dt
            n_mix_it += k
        else:
            t_dec += dt
            n_dec_it += k
        if dec.size:
            kv[dec] += k
            gen[dec] += k
        if cid.size:
            done_p[cid] += clen
            kv[cid] += clen
            if completes.size:
                first[completes[np.isnan(first[completes])]] = t
                gen[completes] += 1
                for r in completes.tolist():
                    if r in prefilling:
                        prefilling.remove(r)
        out = gen[run] >= osl[run]
        if out.any():
            fin = run[out]
            finish[fin] = t
            free += int(blocks[fin].sum())
            blocks[fin] = 0
            run = run[~out]
            if concurrency > 0:  # each finish lets one more client request in
                j = np.arange(concurrency + finished, concurrency + finished + fin.size)
                arrival_s[j[j < n]] = t
            finished += int(fin.size)
    start = float(arrival_s.min()) if n else 0.0
    return SimResult(arrival_s, first, finish, isl, osl, float(t - start), iters, pre, peak,
                     seq_iters / max(iters, 1), t_dec / max(n_dec_it, 1),
                     t_mix / max(n_mix_it, 1))


def _stretch(it: IterationModel, pol: SchedulerPolicy, dec: np.ndarray, kv: np.ndarray,
             gen: np.ndarray, osl: np.ndarray, blocks: np.ndarray, free: int,
             waiting: deque[int], n_running: int, nxt: int, n: int, arrival_s: np.ndarray,
             order: np.ndarray, t: float, T: int, n_log: int, ctx_sum: float,
             need_full: np.ndarray, target: np.ndarray, done_p: np.ndarray) -> int:
    """Decode-only iterations the batch stays unchanged for (>= 1)."""
    k = int((osl[dec] - gen[dec]).min())
    if k <= 1:
        return 1
    bs = pol.block_tokens
    if waiting and n_running < pol.max_batch:
        r = waiting[0]
        need = (int(need_full[r]) if pol.reserve == "full"
                else int(_blocks(kv[r] + min(int(target[r] - done_p[r]), pol.token_budget), bs)))
        if need <= free:
            return 1  # the next iteration admits it
    if pol.reserve == "on_demand":
        lo, hi = 1, k  # largest j whose new blocks fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            extra = int(np.maximum(_blocks(kv[dec] + mid, bs) - blocks[dec], 0).sum())
            if extra <= free:
                lo = mid
            else:
                hi = mid - 1
        k = max(1, lo)
    gap = float(arrival_s[order[nxt]]) - t if nxt < n else float("inf")
    if np.isfinite(gap):
        dt1 = it.time(T, n_log, ctx_sum, np.zeros(0), np.zeros(0),
                      float(kv[dec].max() + 1))
        k = max(1, min(k, int(gap // dt1) + 1))
    return k


def _simulate_v0(it: IterationModel, pol: SchedulerPolicy, arrival_s: np.ndarray,
                 isl: np.ndarray, osl: np.ndarray, need_full: np.ndarray, *, prefilled: bool,
                 concurrency: int, max_iterations: int) -> SimResult:
    """vLLM V0's default scheduler (core/scheduler.py _schedule_default at 0.6.0) with
    multi-step scheduling (n = ``steps_per_schedule``). At each scheduler call: waiting prompts
    are admitted whole, first come first served, while the batch and the token budget allow and
    their blocks are free; if any is, that step is a prefill step and runs alone, one step (each
    prompt's last position samples its first token). Otherwise every running sequence decodes
    for n steps as one frozen batch: a sequence that reaches its output length at step j < n is
    answered then (its finish time), but it keeps its slot and is computed for the remaining
    n - j steps, whose tokens are dropped; nothing joins before the n-th step ends. KV: whole
    prompt blocks at admission; each decode batch appends n slots per sequence (one plus n - 1
    lookahead), and on demand a shortfall preempts the newest sequence (recompute)."""
    n = int(arrival_s.size)
    ns = max(int(pol.steps_per_schedule), 1)
    bs, cap = pol.block_tokens, pol.kv_blocks
    order = np.argsort(arrival_s, kind="stable")
    target = isl.copy()
    kv = np.zeros(n, np.int64) if not prefilled else isl.copy()
    gen = np.zeros(n, np.int64) if not prefilled else np.ones(n, np.int64)
    blocks = np.zeros(n, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    if prefilled:
        first[:] = np.where(np.isfinite(arrival_s), arrival_s, np.nan)
    waiting: deque[int] = deque()
    run = np.zeros(0, np.int64)
    nxt, t, free = 0, 0.0, cap
    iters = pre = peak = finished = 0
    seq_iters = t_dec = t_mix = 0.0
    n_dec_it = n_mix_it = 0

    def done(fin: np.ndarray, at: np.ndarray) -> None:
        nonlocal finished
        o = np.argsort(at, kind="stable")
        fin, at = fin[o], at[o]
        finish[fin] = at
        if concurrency > 0:  # each answer lets one more client request in
            j = np.arange(concurrency + finished, concurrency + finished + fin.size)
            arrival_s[j[j < n]] = at[j < n]
        finished += int(fin.size)

    while finished < n:
        while nxt < n and arrival_s[order[nxt]] <= t:
            waiting.append(int(order[nxt]))
            nxt += 1
        if not run.size and not waiting:
            if nxt >= n or not np.isfinite(arrival_s[order[nxt]]):
                raise BadInput("the serving simulation did not finish (no progress)")
            t = float(arrival_s[order[nxt]])
            continue
        if iters > max_iterations:
            raise BadInput("the serving simulation did not finish (no progress); check the "
                           "token budget and KV pool")
        # the scheduler call: prefills first (whole prompts, FCFS, within the budget)
        adm: list[int] = []
        budget = pol.token_budget
        while waiting and run.size + len(adm) < pol.max_batch:
            r = waiting[0]
            c = int(target[r] - kv[r])  # 0 for a prompt that arrived with its KV
            if c > budget:
                break
            need = (int(need_full[r]) if pol.reserve == "full"
                    else int(_blocks(max(int(target[r]), 1), bs)))
            if need > free:
                break
            waiting.popleft()
            blocks[r] = need
            free -= need
            budget -= c
            adm.append(r)
        if adm:
            a = np.asarray(adm, dtype=np.int64)
            run = np.concatenate([run, a])
            a_p = a[kv[a] < target[a]]
            if not a_p.size:
                continue  # prompts that arrived with their KV join the next decode batch
            clen = target[a_p] - kv[a_p]
            dt = it.time(int(clen.sum()), int(a_p.size), 0.0, clen, np.zeros_like(clen))
            t += dt
            iters += 1
            seq_iters += a_p.size
            t_mix += dt
            n_mix_it += 1
            peak = max(peak, int(run.size))
            kv[a_p] = target[a_p]
            first[a_p[np.isnan(first[a_p])]] = t
            gen[a_p] += 1
            out = a_p[gen[a_p] >= osl[a_p]]
            if out.size:
                free += int(blocks[out].sum())
                blocks[out] = 0
                run = run[~np.isin(run, out)]
                done(out, np.full(out.size, t))
            continue
        if not run.size:
            if nxt < n and np.isfinite(arrival_s[order[nxt]]):
                t = max(t, float(arrival_s[order[nxt]]))
                continue
            raise BadInput(f"the KV pool ({cap * bs:,} tokens) or the batch limits admit no "
                           "waiting request")
        # a decode batch: every running sequence appends ns slots; preempt the newest if short
        if pol.reserve == "on_demand":
            grow = np.maximum(_blocks(kv[run] + ns, bs) - blocks[run], 0)
            while int(grow.sum()) > free and run.size:
                v = int(run[-1])
                run = run[:-1]
                free += int(blocks[v])
                blocks[v] = 0
                target[v] = isl[v] + gen[v]
                kv[v] = 0
                waiting.appendleft(v)
                pre += 1
                grow = np.maximum(_blocks(kv[run] + ns, bs) - blocks[run], 0)
            if not run.size:
                continue
            blocks[run] += grow
            free -= int(grow.sum())
        B = int(run.size)
        s0 = float((kv[run] + 1).sum())
        empty = np.zeros(0, np.int64)
        m0 = float(kv[run].max() + 1)
        step = np.array([it.time(B, B, s0 + B * j, empty, empty, m0 + j) for j in range(ns)])
        ends = t + np.cumsum(step)
        left = osl[run] - gen[run]
        out = left <= ns
        if out.any():
            done(run[out], ends[left[out] - 1])
        t = float(ends[-1])
        iters += ns
        seq_iters += ns * B
        t_dec += float(step.sum())
        n_dec_it += ns
        peak = max(peak, B)
        kv[run] += ns
        gen[run] += np.minimum(left, ns)
        if out.any():
            fin = run[out]
            free += int(blocks[fin].sum())
            blocks[fin] = 0
            run = run[~out]
    # the run ends with the last answer: the dropped steps after it are not waited for
    start = float(arrival_s.min()) if n else 0.0
    end = float(finish.max()) if n else 0.0
    return SimResult(arrival_s, first, finish, isl, osl, float(end - start), iters, pre, peak,
                     seq_iters / max(iters, 1), t_dec / max(n_dec_it, 1),
                     t_mix / max(n_mix_it, 1))
