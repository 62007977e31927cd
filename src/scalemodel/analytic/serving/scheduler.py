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

import heapq
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
    # the automatic prefix cache (engine profile prefix_cache): "off", "scheduled" (a prompt's
    # full blocks are findable from the step that schedules them) or "prefilled" (once run)
    prefix_cache: str = "off"
    # attention DP (engine profile attention_dp_schedule assign): how the engine hands waiting
    # requests to its ranks (:func:`adp_assign`)
    adp_assign: str = "prompt_tokens_under_count"


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
        prefill_alone=v0, steps_per_schedule=int(eng.host_iters_per_schedule) if v0 else 1,
        prefix_cache=str(getattr(eng, "prefix_cache", "off") or "off"),
        adp_assign=str((getattr(eng, "attention_dp_schedule", None) or {}).get(
            "assign") or "prompt_tokens_under_count"))


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
    prefill_tokens: int = 0  # prompt tokens computed (recomputation included, cache hits not)
    prefix_hit_tokens: int = 0  # prompt tokens taken from the prefix cache
    stopped: bool = False  # ended early: its p99 was sure to exceed a limit (stop_p99)

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        n = np.maximum(self.osl - 1, 1)
        return np.where(self.osl > 1, (self.finish_s - self.first_token_s) / n, 0.0)


def _blocks(tokens: np.ndarray | int, bs: int) -> Any:
    if isinstance(tokens, (int, np.integer)):  # one request's: integer arithmetic, no array
        return -(-int(tokens) // bs)
    return -(-np.asarray(tokens) // bs)


def _inputs(pol: SchedulerPolicy, arrival_s: np.ndarray, isl: np.ndarray, osl: np.ndarray,
            concurrency: int, prefilled: bool
            ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The request arrays every simulation starts from: arrivals (a closed loop of C clients:
    the first C at 0, the others when an answer lets them in), lengths as integers, and each
    request's blocks for its whole life; a request the pool can never hold under the
    guaranteed-no-evict reserve, or a prompt above the budget without chunked prefill, is bad
    input."""
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
    return n, arrival_s, isl, osl, need_full


def _request_state(arrival_s: np.ndarray, isl: np.ndarray, prefilled: bool) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each request's state at the start: the arrival order, prompt tokens done, KV tokens,
    tokens generated, KV blocks held, first-token and finish times (a prefilled request, the
    decode pool's, arrives with its prompt's KV and its first token)."""
    n = int(arrival_s.size)
    order = np.argsort(arrival_s, kind="stable")
    done_p = np.zeros(n, np.int64) if not prefilled else isl.copy()
    kv = np.zeros(n, np.int64) if not prefilled else isl.copy()
    gen = np.zeros(n, np.int64) if not prefilled else np.ones(n, np.int64)
    blocks = np.zeros(n, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    if prefilled:
        first[:] = np.where(np.isfinite(arrival_s), arrival_s, np.nan)
    return order, done_p, kv, gen, blocks, first, finish


def simulate(it: IterationModel, pol: SchedulerPolicy, arrival_s: np.ndarray, isl: np.ndarray,
             osl: np.ndarray, *, prefilled: bool = False, concurrency: int = 0,
             stretch: bool = True, max_iterations: int = 5_000_000, ranks: int = 1,
             prefix: np.ndarray | None = None,
             stop_p99: tuple[float, float] | None = None) -> SimResult:
    """Run every request through the scheduler; ``prefilled``: prompts arrive with their KV
    (a disaggregated decode pool), so only decode work is done; ``concurrency`` C > 0: a closed
    loop of C clients, request j >= C arriving when the (j - C + 1)-th request finishes;
    ``stretch`` False: step every iteration (the one-move stretches are then checked against
    it). ``ranks`` n > 1: the n attention-DP ranks of one replica (:func:`simulate_lockstep`),
    ``pol`` being each rank's limits and KV pool. ``prefix``: each request's tokens of one
    shared prompt prefix (0: none), priced with the policy's ``prefix_cache`` rule.

    The prefix cache (one shared prefix; the cache starts cold). The first sharing request
    admitted while the prefix is not cached computes it; its R = floor(P / block) full prefix
    blocks become findable from the step that schedules the chunk reaching them
    (``"scheduled"``: vLLM V1 caches blocks in allocate_slots, so a later request of the same
    step already hits) or once that chunk has run (``"prefilled"``: SGLang inserts into the
    radix tree after the prefill batch). A later sharing request admitted with nothing of its
    prompt computed (new, or back after a preemption) then starts with
    h = block * min(floor(P_r / block), floor((L - 1) / block), R) tokens in the KV cache, L
    its prompt (with what it had generated, after a preemption): whole blocks only and never the
    last token, whose logits are needed. Those tokens are not computed, but its chunks' attention
    still reads them (the prefill attention is priced after h cached tokens). The R blocks are
    held once in the pool, not per request, while any running request refers to them; when
    none does they count as free but stay cached, and an allocation that needs them evicts the
    prefix (the free blocks other than the prefix's are taken first: LRU with the prefix the
    most recently freed), after which the next sharing request computes it again.

    ``stop_p99`` (TTFT, TPOT limits in seconds): stop as soon as the run's 99th percentile of
    either is sure to exceed its limit (:func:`p99_exceeded_after`), and return the figures so
    far with ``stopped`` set; the verdict is that of the full run (MLPerf Server's bisection
    needs only the verdict of a failing rate). Only this in-flight scheduler stops early; the
    others run to the end."""
    if ranks > 1 and prefix is not None and bool(np.any(prefix)):
        raise BadInput("--prefix-tokens with --layout adp=1 is not priced: the attention-DP "
                       "lock-step has no prefix cache")
    if ranks > 1:
        if pol.prefill_alone or pol.steps_per_schedule > 1:
            raise BadInput("attention DP is simulated with TensorRT-LLM's scheduler only, not "
                           "with vLLM V0's prefill-alone or multi-step rules")
        return simulate_lockstep(it, pol, ranks, arrival_s, isl, osl, prefilled=prefilled,
                                 concurrency=concurrency, stretch=stretch,
                                 max_iterations=max_iterations)
    n, arrival_s, isl, osl, need_full = _inputs(pol, arrival_s, isl, osl, concurrency, prefilled)
    bs, cap = pol.block_tokens, pol.kv_blocks
    sp = it.spec
    ks = int(sp.k) if sp is not None else 0  # draft tokens per decoding sequence and step
    E = float(sp.tokens_per_step) if sp is not None else 1.0
    if pol.prefill_alone or pol.steps_per_schedule > 1:
        if sp is not None:
            raise BadInput("--spec: speculative decoding is simulated with the in-flight "
                           "(V1-style) scheduler only, not vLLM V0's prefill-alone or "
                           "multi-step scheduler")
        if pol.chunked_prefill and not prefilled:
            raise BadInput("a scheduler whose prefill steps run alone or whose decode batch is "
                           "held for several steps (vLLM V0's default scheduler, multi-step) "
                           "is simulated without chunked prefill only")
        if prefix is not None and np.any(prefix) and pol.prefix_cache != "off":
            raise BadInput("a prefix cache under vLLM V0's default scheduler is not simulated")
        return _simulate_v0(it, pol, arrival_s, isl, osl, need_full, prefilled=prefilled,
                            concurrency=concurrency, max_iterations=max_iterations)
    shared = prefix is not None and not prefilled and bool(np.any(prefix))
    if shared and pol.prefix_cache not in ("off", "scheduled", "prefilled"):
        raise BadInput(f"a shared prefix: the engine's prefix cache rule {pol.prefix_cache!r} "
                       "is not priced (off, scheduled or prefilled)")
    pfx = (np.minimum(np.asarray(prefix, dtype=np.int64), isl)
           if shared and pol.prefix_cache != "off" else np.zeros(n, np.int64))
    pc = {"on": bool(pfx.any()), "res": False, "R": 0, "refs": 0, "src": -1, "hits": 0}
    ref = np.zeros(n, bool)  # the request refers to the cached prefix's blocks
    sb = np.zeros(n, np.int64)  # of a request's blocks, those of the cached prefix (held once)
    order, done_p, kv, gen, blocks, first, finish = _request_state(arrival_s, isl, prefilled)
    target = isl.copy()  # prompt tokens to (re)compute
    # speculative decoding: each verify step emits E tokens in expectation; a sequence's
    # fraction of a token not yet emitted carries to its next step (deterministic rounding of
    # the expected count, so j steps emit floor(acc + j E))
    acc = np.zeros(n, np.float64)
    waiting: deque[int] = deque()
    run = np.zeros(0, np.int64)  # running sequences, in admission order
    prefilling: list[int] = []  # of them, prompts not yet whole in the KV cache
    nxt, t, free = 0, 0.0, cap
    iters = pre = peak = 0
    seq_iters = 0.0
    t_dec = t_mix = 0.0
    n_dec_it = n_mix_it = 0
    finished = 0
    computed = 0
    # early stop: requests whose TTFT (TPOT) is known to exceed its limit
    stop_at = p99_exceeded_after(n) if stop_p99 is not None else 0
    over_ttft = over_tpot = 0
    stopped = False

    def hit(r: int) -> int:
        """Prompt tokens request r finds in the prefix cache at admission."""
        if not pc["res"] or not pfx[r] or done_p[r] or kv[r]:
            return 0
        return bs * min(int(pfx[r]) // bs, int(target[r] - 1) // bs, int(pc["R"]))

    def unref(rs: np.ndarray) -> int:
        """Requests rs leave (finish or preempted): blocks the prefix returns to the free
        count when the last reference goes."""
        k = int(np.count_nonzero(ref[rs])) if rs.size else 0
        if k:
            ref[rs] = False
            sb[rs] = 0
            pc["refs"] -= k
            if pc["refs"] == 0 and pc["res"]:
                return int(pc["R"])
        return 0

    def evict_check() -> None:
        """An unreferenced cached prefix whose blocks an allocation took is evicted."""
        if pc["res"] and pc["refs"] == 0 and free < pc["R"]:
            pc["res"] = False

    def publish(r: int, upto: int) -> None:
        """The source's computed (or scheduled) prompt reaches ``upto`` tokens: its full prefix
        blocks become the cached prefix, held once."""
        if r != pc["src"]:
            return
        R = int(pfx[r]) // bs
        if upto >= R * bs:
            sb[r] = R
            pc.update(res=True, R=R, refs=pc["refs"] + 1, src=-1)
            ref[r] = True

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
            grow = int(np.count_nonzero(kv[dec] + 1 + ks > blocks[dec] * bs))
            while grow > free and run.size:
                v = int(run[-1])
                run = run[:-1]
                free += int(blocks[v] - sb[v])
                blocks[v] = 0
                if pc["on"]:
                    free += unref(np.array([v]))
                    if pc["src"] == v:
                        pc["src"] = -1
                target[v] = isl[v] + gen[v]
                done_p[v] = 0
                kv[v] = 0
                if v in prefilling:
                    prefilling.remove(v)
                waiting.appendleft(v)
                pre += 1
                dec = run[done_p[run] >= target[run]]
                grow = int(np.count_nonzero(kv[dec] + 1 + ks > blocks[dec] * bs))
            add = dec[kv[dec] + 1 + ks > blocks[dec] * bs]
            need_b = (np.maximum(_blocks(kv[add] + 1 + ks, bs) - blocks[add], 0) if ks
                      else np.ones(add.size, np.int64))
            blocks[add] += need_b
            free -= int(need_b.sum())
            if pc["on"]:
                evict_check()
        # each decoding sequence takes 1 + k tokens of the budget (its drafts are verified)
        budget = pol.token_budget - int(dec.size) * (1 + ks)
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
                if pc["on"]:
                    evict_check()
            chunk_ids.append(r)
            chunk_len.append(c)
            budget -= c
            if pc["on"] and pol.prefix_cache == "scheduled":
                publish(r, int(done_p[r]) + c)
        admitted: list[int] = []
        while waiting and run.size + len(admitted) < pol.max_batch and (budget > 0 or prefilled):
            r = waiting[0]
            h = hit(r) if pc["on"] else 0
            left = int(target[r] - done_p[r]) - h
            c = min(left, budget) if pol.chunked_prefill else left
            if c > budget:
                break
            hb = h // bs
            again = bool(hb and pc["refs"] == 0)  # an unreferenced cached prefix taken back
            need = (int(need_full[r]) - hb if pol.reserve == "full"
                    else int(_blocks(kv[r] + h + max(c, 1), bs)) - hb)
            if need > free - (int(pc["R"]) if again else 0):
                break
            waiting.popleft()
            if h:
                done_p[r] = kv[r] = h
                ref[r] = True
                sb[r] = hb
                pc["refs"] += 1
                pc["hits"] += h
                if again:
                    free -= int(pc["R"])
            elif pc["on"] and pfx[r] >= bs and not pc["res"] and pc["src"] < 0:
                pc["src"] = r  # computes the prefix
            blocks[r] = need + hb  # the request's blocks, the shared ones included
            free -= need
            if pc["on"]:
                evict_check()
            admitted.append(r)
            if c > 0:
                chunk_ids.append(r)
                chunk_len.append(c)
                budget -= c
                if c < left:
                    prefilling.append(r)
                if pc["on"] and pol.prefix_cache == "scheduled":
                    publish(r, int(done_p[r]) + c)
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
        c_sum = int(clen.sum()) if clen.size else 0
        T = int(dec.size) + c_sum
        n_log = int(dec.size + completes.size)
        kv_dec = kv[dec]
        # integer sums, exact: sum(kv + 1) = sum(kv) + the count
        ctx_sum = float(int(kv_dec.sum()) + int(dec.size)) if dec.size else 0.0
        k = 1
        if stretch and cid.size == 0 and dec.size:
            head_fits = None
            if pc["on"] and waiting and run.size < pol.max_batch:
                r = waiting[0]  # whether the next iteration admits it, its prefix hit counted
                h = hit(r)
                hb = h // bs
                c = min(int(target[r] - done_p[r]) - h, pol.token_budget)
                need = (int(need_full[r]) - hb if pol.reserve == "full"
                        else int(_blocks(kv[r] + h + c, bs)) - hb)
                head_fits = need <= free - (int(pc["R"]) if hb and pc["refs"] == 0 else 0)
            k = _stretch(it, pol, dec, kv, gen, osl, blocks, free, waiting, run.size, nxt, n,
                         arrival_s, order, t, T, n_log, ctx_sum, need_full, target, done_p,
                         acc=acc, E=E, ks=ks, head_fits=head_fits,
                         keep=int(pc["R"]) if pc["res"] and pc["refs"] == 0 else 0)
        nd = int(dec.size)
        mx = float(kv_dec.max() + 1) if dec.size else 0.0  # the longest decode sequence
        if k == 1:
            dt = it.time(T, n_log, ctx_sum, clen, done_p[cid] if cid.size else clen, mx,
                         n_decode=nd)
        else:
            dt = k * it.time(T, n_log, ctx_sum + dec.size * (k - 1) * E / 2.0, clen, clen,
                             mx + k - 1, n_decode=nd)
            if pol.reserve == "on_demand":
                # the last step writes its k + 1 positions after the tokens emitted before it
                ahead = (k if sp is None else
                         np.floor(acc[dec] + (k - 1) * E).astype(np.int64) + ks + 1)
                new_b = np.maximum(_blocks(kv[dec] + ahead, bs) - blocks[dec], 0)
                blocks[dec] += new_b
                free -= int(new_b.sum())
                if pc["on"]:
                    evict_check()
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
        if dec.size and sp is None:
            kv[dec] += k
            gen[dec] += k
        elif dec.size:
            got = acc[dec] + k * E
            emit = np.floor(got + 1e-9).astype(np.int64)
            acc[dec] = np.maximum(got - emit, 0.0)
            emit = np.minimum(emit, osl[dec] - gen[dec])
            kv[dec] += emit
            gen[dec] += emit
        if cid.size:
            done_p[cid] += clen
            kv[cid] += clen
            computed += c_sum
            if pc["on"] and pol.prefix_cache == "prefilled" and pc["src"] >= 0:
                publish(int(pc["src"]), int(done_p[pc["src"]]))
            if completes.size:
                new_first = completes[np.isnan(first[completes])]
                first[new_first] = t
                if stop_p99 is not None and new_first.size:
                    over_ttft += int(np.count_nonzero(t - arrival_s[new_first] > stop_p99[0]))
                gen[completes] += 1
                for r in completes.tolist():
                    if r in prefilling:
                        prefilling.remove(r)
        out = gen[run] >= osl[run]
        if out.any():
            fin = run[out]
            finish[fin] = t
            if stop_p99 is not None:
                o_f = osl[fin]
                tp = np.where(o_f > 1, (t - first[fin]) / np.maximum(o_f - 1, 1), 0.0)
                over_tpot += int(np.count_nonzero(tp > stop_p99[1]))
            free += int((blocks[fin] - sb[fin]).sum())
            blocks[fin] = 0
            if pc["on"]:
                free += unref(fin)
            run = run[~out]
            if concurrency > 0:  # each finish lets one more client request in
                j = np.arange(concurrency + finished, concurrency + finished + fin.size)
                arrival_s[j[j < n]] = t
            finished += int(fin.size)
        if stop_p99 is not None and max(over_ttft, over_tpot) >= stop_at:
            stopped = True
            break
    start = float(arrival_s.min()) if n else 0.0
    return SimResult(arrival_s, first, finish, isl, osl, float(t - start), iters, pre, peak,
                     seq_iters / max(iters, 1), t_dec / max(n_dec_it, 1),
                     t_mix / max(n_mix_it, 1), prefill_tokens=computed,
                     prefix_hit_tokens=int(pc["hits"]), stopped=stopped)


def p99_exceeded_after(n: int, q: float = 0.99) -> int:
    """The count k of n values above a limit L from which their q-quantile (numpy's default,
    linear between order statistics) is sure to exceed L. With the values sorted x_0 <= ... <=
    x_(n-1) and h = q (n - 1), the quantile is x_j + (h - j)(x_(j+1) - x_j) >= x_j, j =
    floor(h); x_j > L as soon as n - j values are above L. j is taken a hair low (h - 1e-9) so
    that a rounding of h cannot make k one too small: k may be one too large (a later stop,
    the same verdict), never too small."""
    if n < 1:
        return 1
    return n - int(np.floor(q * (n - 1) - 1e-9))


def _stretch(it: IterationModel, pol: SchedulerPolicy, dec: np.ndarray, kv: np.ndarray,
             gen: np.ndarray, osl: np.ndarray, blocks: np.ndarray, free: int,
             waiting: deque[int], n_running: int, nxt: int, n: int, arrival_s: np.ndarray,
             order: np.ndarray, t: float, T: int, n_log: int, ctx_sum: float,
             need_full: np.ndarray, target: np.ndarray, done_p: np.ndarray, *,
             acc: np.ndarray | None = None, E: float = 1.0, ks: int = 0,
             head_fits: bool | None = None, keep: int = 0) -> int:
    """Decode-only iterations the batch stays unchanged for (>= 1); with speculative decoding
    (``ks`` drafts, ``E`` tokens per step, ``acc`` the carried fractions) the steps until the
    first sequence has emitted its output; ``head_fits``: whether the next iteration admits
    the queue's head, where the caller knows (a prefix cache hit); ``keep``: free blocks that
    are an unreferenced cached prefix, which the stretch does not take (the iteration that
    evicts it is stepped on its own: admission changes after it)."""
    spec = acc is not None and ks > 0 or E != 1.0
    if spec:
        a = acc[dec] if acc is not None else 0.0
        k = int(np.ceil((osl[dec] - gen[dec] - a) / E - 1e-9).min())
    else:
        k = int((osl[dec] - gen[dec]).min())
    if k <= 1:
        return 1
    bs = pol.block_tokens
    if head_fits is not None:
        if head_fits:
            return 1
    elif waiting and n_running < pol.max_batch:
        r = waiting[0]
        need = (int(need_full[r]) if pol.reserve == "full"
                else int(_blocks(kv[r] + min(int(target[r] - done_p[r]), pol.token_budget), bs)))
        if need <= free:
            return 1  # the next iteration admits it
    if pol.reserve == "on_demand":
        lo, hi = 1, k  # largest j whose new blocks fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            ahead = (np.floor((acc[dec] if acc is not None else 0.0) + (mid - 1) * E)
                     + ks + 1 if spec else mid)
            extra = int(np.maximum(_blocks(kv[dec] + ahead, bs) - blocks[dec], 0).sum())
            if extra <= free - keep:
                lo = mid
            else:
                hi = mid - 1
        k = max(1, lo)
    gap = float(arrival_s[order[nxt]]) - t if nxt < n else float("inf")
    if np.isfinite(gap):
        dt1 = it.time(T, n_log, ctx_sum, np.zeros(0), np.zeros(0), float(kv[dec].max() + 1),
                      n_decode=int(dec.size))
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
    order, _, kv, gen, blocks, first, finish = _request_state(arrival_s, isl, prefilled)
    target = isl.copy()
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


def adp_assign(active_n: list[int], active_tokens: list[int], new_isl: list[int], *,
               rule: str = "prompt_tokens_under_count", dealt: int = 0) -> list[int]:
    """The rank each new request goes to under attention DP, by the engine's ``rule``.
    ``"round_robin"`` (SGLang's DataParallelController, data_parallel_controller.py
    round_robin_scheduler at 0.4.6): the j-th new request goes to rank (dealt + j) mod n,
    ``dealt`` being the requests handed out before, whatever the ranks hold.
    ``"prompt_tokens_under_count"``: TensorRT-LLM's rule
    (executor_request_queue.py ``_schedule_attention_dp_requests`` and
    ``_balance_requests_across_ranks``): each rank's target is ``expected`` = max(ceil((active +
    new) / n), the largest rank's active count); the new requests, longest prompt first (a
    stable sort), each go to the rank with the fewest active prompt tokens (then the fewest
    active requests, then the lowest rank) among the ranks still under the target.
    ``active_n`` / ``active_tokens``: each rank's requests not yet finished and the sum of
    their prompt lengths."""
    n = len(active_n)
    k = len(new_isl)
    if rule == "round_robin":
        return [(int(dealt) + j) % n for j in range(k)]
    if rule != "prompt_tokens_under_count":
        raise BadInput(f"attention DP: no request assignment {rule!r} is simulated")
    expected = max(-(-(sum(active_n) + k) // n), max(active_n))
    heap = [(int(active_tokens[r]), int(active_n[r]), r) for r in range(n)
            if active_n[r] < expected]
    heapq.heapify(heap)
    out = [0] * k
    for j in sorted(range(k), key=lambda j: -int(new_isl[j])):
        tok, cnt, r = heapq.heappop(heap)
        out[j] = r
        if cnt + 1 < expected:
            heapq.heappush(heap, (tok + int(new_isl[j]), cnt + 1, r))
    return out


def simulate_lockstep(it: IterationModel, pol: SchedulerPolicy, n_ranks: int,
                      arrival_s: np.ndarray, isl: np.ndarray, osl: np.ndarray, *,
                      prefilled: bool = False, concurrency: int = 0, stretch: bool = True,
                      max_iterations: int = 5_000_000) -> SimResult:
    """One replica under attention data parallelism: ``n_ranks`` ranks, each with its own batch,
    limits and KV pool (``pol``), all running every iteration together (each MoE layer waits
    for the slowest, :meth:`IterationModel.time_lockstep`). The engine keeps one waiting queue;
    each iteration it hands waiting requests to ranks (:func:`adp_assign`, the profile's rule
    ``pol.adp_assign``) while the ranks hold fewer than n x max_batch unfinished requests
    (TensorRT-LLM's), or all of them on arrival (round robin, SGLang's), and a request stays on
    its rank to the end. Each rank then schedules its own requests by the rules of
    :func:`simulate` with the guaranteed-no-evict reserve (TensorRT-LLM's); an on-demand
    reserve (SGLang's) is taken only where no request decodes (every osl 1, a prefill pool),
    where it preempts nothing and the one difference left is that a prompt's blocks are taken
    whole at admission, not chunk by chunk (it binds only where the KV pool is the limit):
    decode tokens first, prompts in flight, then its assigned requests in order while its batch,
    budget and KV blocks allow. Stretches where no rank's batch can change are advanced in one
    move, as in :func:`simulate`; ``prefilled``: prompts arrive with their KV (a disaggregated
    decode pool), as there."""
    R = int(n_ranks)
    n, arrival_s, isl, osl, need_full = _inputs(pol, arrival_s, isl, osl, concurrency, prefilled)
    if pol.reserve != "full" and (pol.reserve != "on_demand" or (n and int(osl.max()) > 1)):
        raise BadInput("attention DP is simulated with the guaranteed-no-evict reserve, or an "
                       "on-demand one where no request decodes (osl 1: a prefill pool); got "
                       f"reserve {pol.reserve!r}")
    bs, cap = pol.block_tokens, pol.kv_blocks
    order, done_p, kv, gen, blocks, first, finish = _request_state(arrival_s, isl, prefilled)
    gwait: deque[int] = deque()  # the engine's waiting queue, shared by the ranks
    rwait: list[deque[int]] = [deque() for _ in range(R)]  # on a rank, not yet scheduled
    run = [np.zeros(0, np.int64) for _ in range(R)]
    prefilling: list[list[int]] = [[] for _ in range(R)]
    free = [cap] * R
    act_n = [0] * R
    act_tok = [0] * R
    dealt = 0  # requests handed to ranks so far (the round-robin counter)
    nxt, t = 0, 0.0
    iters = peak = finished = 0
    seq_iters = t_dec = t_mix = 0.0
    n_dec_it = n_mix_it = 0
    while finished < n:
        while nxt < n and arrival_s[order[nxt]] <= t:
            gwait.append(int(order[nxt]))
            nxt += 1
        if not gwait and not any(act_n):
            t = float(arrival_s[order[nxt]])
            continue
        if iters > max_iterations:
            raise BadInput("the serving simulation did not finish (no progress); check the "
                           "token budget and KV pool")
        # round robin deals every request on arrival; TensorRT-LLM's queue gives up to
        # n x max_batch unfinished
        room = (len(gwait) if pol.adp_assign == "round_robin"
                else R * pol.max_batch - sum(act_n))
        if gwait and room > 0:
            take = [gwait.popleft() for _ in range(min(room, len(gwait)))]
            for q, r in zip(take, adp_assign(act_n, act_tok, [int(isl[q]) for q in take],
                                             rule=pol.adp_assign, dealt=dealt),
                            strict=True):
                rwait[r].append(q)
                act_n[r] += 1
                act_tok[r] += int(isl[q])
            dealt += len(take)
        decs, cids, clens, dones, comps = [], [], [], [], []
        admitted_any = False
        for r in range(R):
            rr = run[r]
            dec = rr[done_p[rr] >= isl[rr]]
            budget = pol.token_budget - int(dec.size)
            ch_i: list[int] = []
            ch_l: list[int] = []
            for q in prefilling[r]:
                if budget <= 0:
                    break
                c = min(int(isl[q] - done_p[q]), budget)
                ch_i.append(q)
                ch_l.append(c)
                budget -= c
            adm: list[int] = []
            w = rwait[r]
            while w and rr.size + len(adm) < pol.max_batch and (budget > 0 or prefilled):
                q = w[0]
                left = int(isl[q] - done_p[q])
                c = min(left, budget) if pol.chunked_prefill else left
                if c > budget or int(need_full[q]) > free[r]:
                    break
                w.popleft()
                blocks[q] = int(need_full[q])
                free[r] -= int(need_full[q])
                adm.append(q)
                if c > 0:
                    ch_i.append(q)
                    ch_l.append(c)
                    budget -= c
                    if c < left:
                        prefilling[r].append(q)
            if adm:
                run[r] = np.concatenate([rr, np.asarray(adm, dtype=np.int64)])
                admitted_any = True
            cid = np.asarray(ch_i, dtype=np.int64)
            clen = np.asarray(ch_l, dtype=np.int64)
            decs.append(dec)
            cids.append(cid)
            clens.append(clen)
            dones.append(done_p[cid].copy())
            comps.append(cid[done_p[cid] + clen >= isl[cid]] if cid.size else cid)
        n_dec = sum(d.size for d in decs)
        n_ch = sum(c.size for c in cids)
        if n_dec == 0 and n_ch == 0:
            if admitted_any:
                continue
            if nxt < n:
                t = max(t, float(arrival_s[order[nxt]]))
                continue
            raise BadInput(f"the KV pool ({cap * bs:,} tokens) or the batch limits admit no "
                           "waiting request")
        T = np.asarray([d.size + int(c.sum()) for d, c in zip(decs, clens, strict=True)])
        n_log = np.asarray([d.size + c.size for d, c in zip(decs, comps, strict=True)])
        ctx = np.asarray([float((kv[d] + 1).sum()) if d.size else 0.0 for d in decs])
        k = 1
        if stretch and n_ch == 0 and not (gwait and R * pol.max_batch > sum(act_n)):
            k = _stretch_lockstep(it, pol, decs, gen, osl, free, rwait, run, need_full, nxt, n,
                                  arrival_s, order, t, T, n_log, ctx)
        if k == 1:
            dt = it.time_lockstep(T, n_log, ctx, clens, dones)
        else:
            mid = ctx + np.asarray([d.size for d in decs]) * (k - 1) / 2.0
            dt = k * it.time_lockstep(T, n_log, mid, clens, dones)
        t += dt
        iters += k
        seq_iters += k * (n_dec + n_ch) / R
        peak = max(peak, max(int(x.size) for x in run))
        if n_ch:
            t_mix += dt
            n_mix_it += k
        else:
            t_dec += dt
            n_dec_it += k
        for r in range(R):
            dec, cid, clen = decs[r], cids[r], clens[r]
            if dec.size:
                kv[dec] += k
                gen[dec] += k
            if cid.size:
                done_p[cid] += clen
                kv[cid] += clen
                cp = comps[r]
                if cp.size:
                    first[cp[np.isnan(first[cp])]] = t
                    gen[cp] += 1
                    for q in cp.tolist():
                        if q in prefilling[r]:
                            prefilling[r].remove(q)
            rr = run[r]
            out = gen[rr] >= osl[rr]
            if out.any():
                fin = rr[out]
                finish[fin] = t
                free[r] += int(blocks[fin].sum())
                blocks[fin] = 0
                run[r] = rr[~out]
                act_n[r] -= int(fin.size)
                act_tok[r] -= int(isl[fin].sum())
                if concurrency > 0:
                    j = np.arange(concurrency + finished, concurrency + finished + fin.size)
                    arrival_s[j[j < n]] = t
                finished += int(fin.size)
    start = float(arrival_s.min()) if n else 0.0
    return SimResult(arrival_s, first, finish, isl, osl, float(t - start), iters, 0, peak,
                     seq_iters / max(iters, 1), t_dec / max(n_dec_it, 1),
                     t_mix / max(n_mix_it, 1))


def _stretch_lockstep(it: IterationModel, pol: SchedulerPolicy, decs: list[np.ndarray],
                      gen: np.ndarray, osl: np.ndarray, free: list[int],
                      rwait: list[deque[int]], run: list[np.ndarray], need_full: np.ndarray,
                      nxt: int, n: int, arrival_s: np.ndarray, order: np.ndarray, t: float,
                      T: np.ndarray, n_log: np.ndarray, ctx: np.ndarray) -> int:
    """Decode-only lock-step iterations no rank's batch changes for (>= 1): to the first
    finish on any rank, while no rank can admit its next assigned request, and before the
    next arrival."""
    ks = [int((osl[d] - gen[d]).min()) for d in decs if d.size]
    k = min(ks) if ks else 1
    if k <= 1:
        return 1
    for r, w in enumerate(rwait):
        if w and run[r].size < pol.max_batch and int(need_full[w[0]]) <= free[r]:
            return 1  # the next iteration admits it
    gap = float(arrival_s[order[nxt]]) - t if nxt < n else float("inf")
    if np.isfinite(gap):
        dt1 = it.time_lockstep(T, n_log, ctx, [], [])
        k = max(1, min(k, int(gap // dt1) + 1))
    return k
