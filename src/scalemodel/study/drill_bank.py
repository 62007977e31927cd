"""Drills for the questions beyond the first five: each draws realistic parameters, computes the
answer with the engine that answers the question, and lists the classic mistakes a wrong number
may come from (each a value and a name), so grading can say which one a person made.

Every drill returns a :class:`~scalemodel.study.drills.Drill`; ``BANK`` maps question ids to them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from ..derive import Derivation
from .drills import Drill, Mistake


def _fabric(intra: str, inter: str | None = "ndr-400") -> Any:
    from ..analytic.collectives import make_fabric

    return make_fabric(intra, inter, gpus_per_node=8)


def _parallelism_traffic(rng: random.Random) -> Drill:
    from ..analytic.collectives import collective_cost, make_group
    from ..analytic.params import count_params
    from ..specs import get_model

    mid = rng.choice(("llama-3-8b", "llama-2-13b", "mistral-7b", "llama-2-7b"))
    n = rng.choice((8, 16, 32, 64, 128))
    p = count_params(get_model(mid)).total
    S = 2.0 * p  # bf16 gradients
    fab = _fabric("nvlink4")
    c = collective_cost("all-reduce", S, make_group(n, fab, min(n, 8)), fab, algorithm="ring",
                        proto="simple")
    d = Derivation(f"DDP gradient all-reduce of {mid} over {n} GPUs (ring)")
    d.given("parameters", "P", p, "1")
    d.given("bytes per bf16 gradient", "e", 2, "B")
    d.given("data-parallel GPUs", "n", n, "GPU")
    d.calc("gradient buffer", "S", "P * e", "B")
    w = d.calc("bytes each GPU sends (reduce-scatter + all-gather)", "W", "2 * (n - 1) / n * S",
               "B", check=c.bytes_sent_per_rank)
    prompt = (f"{mid} ({p / 1e9:.2f}B parameters) trains with plain DDP on {n} GPUs; bf16 "
              "gradients are all-reduced with a ring once per step. How many GB does each GPU "
              "send per step?")
    return Drill("parallelism-traffic", prompt, {"model": mid, "params": p, "gpus": n},
                 w / 1e9, "GB", 0.05, d, ("comm", "traffic", "--model", mid, "--dp", str(n),
                                          "--zero", "0"),
                 mistakes=(Mistake("reduce-scatter only: an all-reduce is a reduce-scatter plus "
                                   "an all-gather", w / 2e9),
                           Mistake("fp32 gradients where they are reduced in bf16", 2 * w / 1e9),
                           Mistake("total over all GPUs, not per GPU", n * w / 1e9),
                           Mistake("2S: left out the (n-1)/n factor", 2 * S / 1e9)))


def _ring_allreduce(rng: random.Random) -> Drill:
    from ..analytic.collectives import collective_cost, make_group
    from ..specs import get_link

    link = rng.choice(("nvlink3", "nvlink4", "nvlink5"))
    n = rng.choice((2, 4, 8))
    size = rng.choice((2**28, 2**30, 2**32))
    fab = _fabric(link, None)
    c = collective_cost("all-reduce", float(size), make_group(n, fab, n), fab, algorithm="ring",
                        proto="simple")
    B = get_link(link).bytes_per_s_per_direction
    d = Derivation(f"ring all-reduce on {n} x {link}, bandwidth term at line rate")
    d.given("buffer per rank", "K", size, "B")
    d.given("ranks", "N", n, "1")
    d.given(f"{link} rate, one direction", "B", B, "B/s", get_link(link).source_of(
        "bytes_per_s_per_direction"))
    t = d.calc("time at line rate (lower bound)", "t", "2 * (N - 1) / N * K / B", "s",
               bound="lower", check=c.lower_bound_time_s)
    prompt = (f"A ring all-reduce of {size / 2**30:g} GiB per rank on {n} GPUs joined by "
              f"{link} ({B / 1e9:g} GB/s per direction). Ignoring latency, how many ms does it "
              "take at line rate?")
    return Drill("ring-allreduce", prompt, {"link": link, "ranks": n, "bytes": size},
                 t * 1e3, "ms", 0.05, d, ("comm", "cost", "--collective", "all-reduce",
                                          "--algorithm", "ring", "--ranks", str(n), "--bytes",
                                          str(size), "--intra", link),
                 mistakes=(Mistake("K / B: left out the 2(N-1)/N bytes each rank sends",
                                   size / B * 1e3),
                           Mistake("(N-1)/N K: the reduce-scatter half only", t / 2 * 1e3),
                           Mistake("the bidirectional rate where one direction carries the "
                                   "ring", t / 2 * 1e3)))


def _fabric_map(rng: random.Random) -> Drill:
    from ..analytic.layout import TrainLayout
    from ..analytic.step.config import TP_BWD_COLLECTIVES, TP_FWD_COLLECTIVES
    from ..analytic.traffic import layout_traffic, slowest_stage_layers
    from ..specs import get_model

    mid = rng.choice(("llama-3-70b", "llama-2-70b", "qwen2.5-72b"))
    m = get_model(mid)
    pp = rng.choice((2, 4, 8))
    micro = rng.choice((8, 16, 32))
    seq = rng.choice((2048, 4096, 8192))
    lay = TrainLayout(tp=8, pp=pp, dp=8, micro_batch=1, zero=1)
    # the step model's rows, as comm traffic and the fabric-map answer list them
    r = layout_traffic(m, lay, seq_len=seq, global_batch=8 * micro, intra="nvlink4",
                       gpus_per_node=8)
    tp_bytes = r.get("TP").bytes_per_step
    n = int(slowest_stage_layers(r.row.values))
    per_layer = TP_FWD_COLLECTIVES + TP_BWD_COLLECTIVES
    d = Derivation(f"TP bytes one GPU sends per step of {mid} at TP8 PP{pp} (sequence parallel)")
    d.given("sequence length", "s", seq, "token")
    d.given("hidden size", "h", m.hidden, "1", m.source)
    d.given("bytes per bf16 activation", "e", 2, "B")
    d.given("TP ranks", "t", 8, "1")
    d.given("layers on the slowest stage (the planner's split)", "L_s", n, "1")
    d.given("micro-batches per step", "m", micro, "1")
    d.given("TP collectives per layer (4 forward, 6 backward)", "k", per_layer, "1")
    d.calc("calls per step", "c", "k * L_s * m", "1")
    tot = d.calc("bytes sent per step ((t - 1) / t of each gathered activation)", "T",
                 "c * (t - 1) / t * s * h * e", "B", check=tp_bytes)
    prompt = (f"{mid} ({m.n_layers} layers, hidden {m.hidden}) trains at TP8 with sequence "
              f"parallelism, PP{pp} (the slowest stage holds {n} layers), micro-batch 1 of "
              f"{seq:,} tokens, {micro} micro-batches per step, bf16. Each layer issues "
              f"{TP_FWD_COLLECTIVES} TP collectives forward (2 all-gathers, 2 reduce-scatters) "
              f"and {TP_BWD_COLLECTIVES} backward, each over one gathered activation. How many "
              "GB does one GPU of that stage send in TP collectives per step (ring)?")
    return Drill("fabric-map", prompt, {"model": mid, "pp": pp, "micro_batches": micro,
                                        "seq_len": seq, "layers_slowest_stage": n},
                 tot / 1e9, "GB", 0.05, d, ("answer", "fabric-map", "--model", mid),
                 mistakes=(Mistake("the gathered buffers, not the (t - 1) / t a GPU sends",
                                   tot * 8 / 7 / 1e9),
                           Mistake("forward pass only", tot * TP_FWD_COLLECTIVES / per_layer / 1e9),
                           Mistake("one micro-batch, not the whole step", tot / micro / 1e9)))


def _nccl_topology(rng: random.Random) -> Drill:
    from ..analytic.collectives import collective_cost, make_group

    n = rng.choice((8, 16, 32, 64))
    size = rng.choice((2**27, 2**29, 2**31))
    fab = _fabric("nvlink4", "ndr-400")
    c = collective_cost("all-reduce", float(size), make_group(n, fab, min(n, 8)), fab)
    t_ms = round(c.time_s * 1e3, 3)
    d = Derivation("nccl-tests busbw from a measured all-reduce time")
    d.given("bytes", "S", size, "B")
    d.given("ranks", "n", n, "1")
    d.given("measured time", "t", t_ms / 1e3, "s")
    d.calc("algorithm bandwidth", "algbw", "S / t", "B/s")
    bus = d.calc("bus bandwidth (nccl-tests PERFORMANCE.md)", "busbw", "algbw * 2 * (n - 1) / n",
                 "B/s")
    prompt = (f"nccl-tests all_reduce_perf: {size / 2**20:g} MiB on {n} GPUs took {t_ms:g} ms. "
              "What busbw does it print, in GB/s?")
    return Drill("nccl-topology", prompt, {"ranks": n, "bytes": size, "time_ms": t_ms},
                 bus / 1e9, "GB/s", 0.03, d, ("answer", "nccl-topology"),
                 mistakes=(Mistake("algbw: left out the 2(n-1)/n bus factor", size / t_ms * 1e-6),
                           Mistake("MiB read as MB", bus / 1e9 * 1e6 / 2**20),
                           Mistake("bits for bytes (Gb/s)", 8 * bus / 1e9)))


def _roce_vs_ib(rng: random.Random) -> Drill:
    from ..analytic.collectives import efficiency
    from ..specs import get_link

    link = rng.choice(("ndr-400", "roce-400", "hdr-200", "roce-200", "xdr-800"))
    size = rng.choice((2**30, 2**32, 2**34))
    lk = get_link(link)
    eff, src = efficiency("scale-out")
    d = Derivation(f"one {link} NIC sending a buffer")
    d.given("buffer", "S", size, "B")
    d.given(f"{link} rate, one direction", "Bn", lk.bytes_per_s_per_direction, "B/s",
            lk.source_of("bytes_per_s_per_direction"))
    d.given("achievable fraction of line rate", "e_n", eff, "1", src)
    t = d.calc("transfer time", "t", "S / (Bn * e_n)", "s", bound="lower")
    gbit = lk.bytes_per_s_per_direction * 8 / 1e9
    prompt = (f"One {gbit:g} Gb/s {link} NIC sends {size / 2**30:g} GiB at {eff:.0%} of line rate. "
              "How many ms does it take?")
    return Drill("roce-vs-ib", prompt, {"link": link, "bytes": size, "efficiency": eff},
                 t * 1e3, "ms", 0.05, d, ("answer", "roce-vs-ib"),
                 mistakes=(Mistake("bits for bytes (Gb/s taken as GB/s)", t / 8 * 1e3),
                           Mistake("GiB read as GB", t * 1e9 / 2**30 * 1e3),
                           Mistake("line rate without the efficiency", t * eff * 1e3)))


def _moe_latency_layout(rng: random.Random) -> Drill:
    from ..specs import get_model

    mid = rng.choice(("deepseek-v3", "mixtral-8x7b", "qwen3-235b-a22b", "qwen3-30b-a3b"))
    m = get_model(mid)
    ep = rng.choice((8, 16, 32, 64))
    tokens = rng.choice((64, 128, 256, 512))
    d = Derivation(f"EP dispatch of {mid} over {ep} GPUs, uniform routing")
    d.given("tokens per GPU", "B", tokens, "token")
    d.given("experts per token", "k", m.top_k, "1", m.source)
    d.given("hidden size", "h", m.hidden, "1", m.source)
    d.given("bytes per bf16 activation", "e", 2, "B")
    d.given("EP ranks", "n", ep, "1")
    w = d.calc("bytes each GPU sends in one dispatch", "W", "B * k * h * e * (n - 1) / n", "B",
               note="each token copy goes to the GPU of its expert; 1/n of them stay local")
    prompt = (f"{mid} (hidden {m.hidden}, top-{m.top_k}) serves with EP{ep}; each GPU holds "
              f"{tokens} tokens of a decode step. With uniform routing, how many MB does each GPU "
              "send in one layer's dispatch all-to-all (bf16)?")
    return Drill("moe-latency-layout", prompt, {"model": mid, "ep": ep, "tokens": tokens},
                 w / 1e6, "MB", 0.05, d, ("answer", "moe-latency-layout", "--model", mid),
                 mistakes=(Mistake("one copy per token: forgot top-k", w / m.top_k / 1e6),
                           Mistake("dispatch and combine together", 2 * w / 1e6),
                           Mistake("counted the copies that stay local",
                                   w * ep / (ep - 1) / 1e6)))


def _moe_global_serving(rng: random.Random) -> Drill:
    from ..analytic.params import count_params
    from ..specs import get_model

    mid = rng.choice(("deepseek-v3", "qwen3-235b-a22b"))
    m = get_model(mid)
    pc = count_params(m)
    px = next(lp.expert_one for i, lp in enumerate(pc.layers) if m.layer_is_moe(i))
    n = rng.choice((8, 16, 32, 64))
    d = Derivation(f"routed-expert weights of {mid} per GPU at EP{n}, fp8")
    d.given("MoE layers", "L_moe", m.n_moe_layers, "1", m.source)
    d.given("routed experts per layer", "E", m.n_experts, "1", m.source)
    d.given("parameters of one expert", "P_x", px, "1", m.source)
    d.given("bytes per fp8 weight", "e", 1, "B")
    d.given("GPUs the experts spread over", "n", n, "GPU")
    w = d.calc("expert bytes per GPU", "W", "L_moe * E * P_x * e / n", "B")
    prompt = (f"{mid}: {m.n_moe_layers} MoE layers of {m.n_experts} routed experts, "
              f"{px / 1e6:.1f}M parameters each, stored in fp8 and spread evenly over {n} GPUs. "
              "How many GB of routed-expert weights does each GPU hold?")
    return Drill("moe-global-serving", prompt, {"model": mid, "gpus": n, "expert_params": px},
                 w / 1e9, "GB", 0.05, d, ("answer", "moe-global-serving"),
                 mistakes=(Mistake("total over all GPUs, not per GPU", w * n / 1e9),
                           Mistake("bf16 bytes where the weights are fp8", 2 * w / 1e9),
                           Mistake("GiB for GB", w / 2**30)))


def _moe_routing(rng: random.Random) -> Drill:
    E = rng.choice((8, 16, 64, 128, 256))
    k = rng.choice((1, 2, 8)) if E >= 64 else rng.choice((1, 2))
    T = rng.choice((2048, 4096, 8192, 16384))
    cf = rng.choice((1.0, 1.25, 1.5, 2.0))
    d = Derivation("expert capacity (Switch Transformer, GShard)")
    d.given("tokens in the batch", "T", T, "token")
    d.given("experts per token", "k", k, "1")
    d.given("experts", "E", E, "1")
    d.given("capacity factor", "cf", cf, "1")
    c = d.calc("token slots per expert", "C", "ceil(cf * T * k / E)", "token")
    prompt = (f"A router sends each of {T:,} tokens to its top-{k} of {E} experts with capacity "
              f"factor {cf:g}. How many token slots does each expert get?")
    return Drill("moe-routing", prompt, {"tokens": T, "k": k, "experts": E, "capacity_factor": cf},
                 c, "tokens", 0.01, d, ("answer", "moe-routing"),
                 mistakes=(Mistake("forgot top-k: one slot per token", math.ceil(cf * T / E)),
                           Mistake("the whole batch's slots, not one expert's",
                                   math.ceil(cf * T * k)),
                           Mistake("no capacity factor", math.ceil(T * k / E))))


def _gpu_hierarchy(rng: random.Random) -> Drill:
    from ..analytic.occupancy import limits_for_gpu, occupancy
    from ..specs import get_gpu

    gid = rng.choice(("h100-sxm", "a100-sxm-80gb", "h200"))
    gpu = get_gpu(gid)
    threads = rng.choice((128, 256, 512, 1024))
    regs = rng.choice((32, 64, 128))
    blocks = rng.choice((1000, 4096, 10000, 65536))
    occ = occupancy(limits_for_gpu(gpu), threads, regs)
    while occ.active_blocks_per_sm == 0:
        # a block that needs more registers than an SM has never launches (1024 threads x 128
        # registers is twice the 64K file): draw fewer registers, so every drill has an answer
        regs = rng.choice(tuple(r for r in (32, 64, 128) if r < regs))
        occ = occupancy(limits_for_gpu(gpu), threads, regs)
    bps = occ.active_blocks_per_sm
    d = Derivation(f"waves of a {blocks}-block launch on {gid}")
    d.given("blocks in the grid", "G", blocks, "1")
    d.given("SMs", "n_sm", gpu.sm_count, "1", gpu.source_of("sm_count"))
    d.given("resident blocks per SM (occupancy engine)", "b", bps, "1", note=occ.reason)
    waves = d.calc("waves", "W", "ceil(G / (n_sm * b))", "1")
    prompt = (f"{gid} ({gpu.sm_count} SMs): a kernel of {blocks:,} blocks x {threads} threads, "
              f"{regs} registers per thread, no shared memory. How many waves does the grid "
              "run in?")
    return Drill("gpu-hierarchy", prompt, {"gpu": gid, "threads": threads, "regs": regs,
                                           "blocks": blocks, "blocks_per_sm": bps},
                 waves, "waves", 0.0, d, ("gpu", "occupancy", "--gpu", gid, "--threads",
                                          str(threads), "--regs", str(regs)),
                 mistakes=(Mistake("one block per SM", math.ceil(blocks / gpu.sm_count)),
                           Mistake("the block limit of 32 per SM, ignoring registers",
                                   math.ceil(blocks / (gpu.sm_count * min(
                                       32, 2048 // threads))))))


def _memory_hierarchy(rng: random.Random) -> Drill:
    from ..analytic.gpu_lab import arch_latencies
    from ..specs import get_gpu

    gid = rng.choice(("h100-sxm", "a100-sxm-80gb", "h200", "h100-pcie"))
    gpu = get_gpu(gid)
    lat = arch_latencies(gpu.arch)
    cyc = float(lat.get("dram", 480))
    d = Derivation(f"bytes in flight to keep {gid}'s HBM busy (Little's law)")
    d.given("HBM bandwidth", "beta", gpu.hbm_bytes_per_s, "B/s", gpu.source_of("hbm_bytes_per_s"))
    d.given("DRAM load latency", "c", cyc, "cycle", note="pointer chase, unloaded")
    d.given("boost clock", "f", gpu.boost_clock_hz, "Hz")
    d.given("SMs", "n_sm", gpu.sm_count, "1")
    d.calc("latency", "t", "c / f", "s")
    q = d.calc("bytes in flight per SM", "Q", "beta * t / n_sm", "B")
    prompt = (f"{gid}: HBM {gpu.hbm_bytes_per_s / 1e12:.2f} TB/s, DRAM latency {cyc:g} cycles at "
              f"{gpu.boost_clock_hz / 1e9:.3g} GHz, {gpu.sm_count} SMs. How many KB must each SM "
              "keep in flight to saturate HBM?")
    return Drill("memory-hierarchy", prompt, {"gpu": gid, "latency_cycles": cyc}, q / 1e3, "KB",
                 0.05, d, ("answer", "memory-hierarchy", "--gpu", gid),
                 mistakes=(Mistake("the whole GPU, not per SM", q * gpu.sm_count / 1e3),
                           Mistake("cycles read as nanoseconds",
                                   q * gpu.boost_clock_hz / 1e9 / 1e3)))


def _occupancy(rng: random.Random) -> Drill:
    from ..analytic.occupancy import occupancy, sm_limits

    cc = rng.choice(("8.0", "9.0"))
    lim = sm_limits(cc)
    threads = rng.choice((64, 128, 256, 512))
    regs = rng.choice((32, 40, 64, 96, 128, 168))
    smem = rng.choice((0, 16384, 32768, 49152))
    r = occupancy(lim, threads, regs, smem)
    no_regs = occupancy(lim, threads, 16, smem).occupancy
    no_smem = occupancy(lim, threads, regs, 0).occupancy
    prompt = (f"Compute capability {cc}: a kernel with {threads} threads per block, {regs} "
              f"registers per thread and {smem // 1024} KiB of shared memory per block. What is "
              "its theoretical occupancy, in %?")
    return Drill("occupancy", prompt, {"cc": cc, "threads": threads, "regs": regs, "smem": smem},
                 100 * r.occupancy, "%", 0.01, r.derivation,
                 ("gpu", "occupancy", "--cc", cc, "--threads", str(threads), "--regs", str(regs),
                  "--smem", str(smem)),
                 mistakes=(Mistake("ignored the register limit", 100 * no_regs),
                           Mistake("ignored the shared-memory limit", 100 * no_smem)))


def _coalescing(rng: random.Random) -> Drill:
    from ..sim import simt

    stride = rng.choice((1, 2, 4, 8, 16, 32, 33))
    elem = rng.choice((4, 8))
    r = simt.analyze(simt.strided_kernel(stride, "global"), elem_bytes=elem)
    sectors = r.instructions[0].sectors / max(1, r.instructions[0].requests)
    d = Derivation(f"32-byte sectors one warp's load touches at stride {stride}")
    d.given("element bytes", "e", elem, "B")
    d.given("stride in elements", "k", stride, "1")
    d.given("lanes", "w", 32, "1")
    d.given("sector", "q", 32, "B")
    d.calc("bytes between neighbouring lanes", "g", "k * e", "B")
    d.calc("sectors touched (distinct 32 B sectors of the 32 addresses)", "N",
           f"{sectors:g}", "1", note="from the SIMT access analysis (scalemodel gpu coalesce)")
    prompt = (f"A warp loads a[threadIdx.x * {stride}] with {elem}-byte elements from global "
              "memory. How many 32-byte sectors does that one instruction touch?")
    lines = r.instructions[0].lines / max(1, r.instructions[0].requests)
    return Drill("coalescing-transpose", prompt, {"stride": stride, "elem_bytes": elem},
                 sectors, "sectors", 0.0, d, ("gpu", "access", "--stride", str(stride), "--dtype",
                                                 "fp32" if elem == 4 else "fp64"),
                 mistakes=(Mistake("128-byte cache lines, not 32-byte sectors", lines),
                           Mistake("bytes requested, not sectors", 32 * elem)))


def _warp_divergence(rng: random.Random) -> Drill:
    from ..sim import simt

    k = rng.choice((2, 4, 8, 16, 32, 64))
    block = rng.choice((64, 128, 256))
    pred = f"threadIdx.x % {k} == 0"
    r = simt.divergence([pred], simt.Launch((1, 1, 1), (block, 1, 1)))
    prompt = (f"if ({pred}) a(); else b(); with one instruction on each side, block of {block} "
              "threads. What is the SIMT efficiency of the branch, in %?")
    d = Derivation(f"SIMT efficiency of '{pred}'")
    d.given("lanes that take the then-side per warp", "t", max(1, 32 // k) if k <= 32 else 1,
            "1")
    d.given("lanes per warp", "w", 32, "1")
    d.calc("SIMT efficiency (simulated, per warp instruction)", "eff",
           f"{r.simt_efficiency:.6g}", "1", note="scalemodel gpu divergence")
    return Drill("warp-divergence", prompt, {"predicate": pred, "block": block},
                 100 * r.simt_efficiency, "%", 0.02, d,
                 ("gpu", "divergence", "--predicate", pred, "--block", str(block)),
                 mistakes=(Mistake("the share of lanes on the then-side only",
                                   100 * (1 / k if k <= 32 else 1 / 32)),))


def _billing(rng: random.Random) -> Drill:
    inc = rng.choice((60, 300, 3600))
    rate = rng.choice((2.49, 3.99, 1.89))
    gpus = rng.choice((1, 8))
    durs = [rng.randrange(30, 20000) for _ in range(rng.choice((2, 3, 4)))]
    billed = sum(math.ceil(s / inc) * inc for s in durs)
    d = Derivation("a bill with billing increments (each job rounded up)")
    d.given("job durations", "t", sum(durs), "s", note=", ".join(f"{s:,} s" for s in durs))
    d.given("billing increment", "i", inc, "s")
    d.given("price per GPU-hour", "p", rate, "USD")
    d.given("GPUs per job", "g", gpus, "GPU")
    d.given("billed seconds: sum of ceil(t_j / i) x i", "T_b", billed, "s")
    amt = d.calc("amount", "A", "T_b / 3600 * p * g", "USD")
    exact = sum(durs) / 3600 * rate * gpus
    total_round = math.ceil(sum(durs) / inc) * inc / 3600 * rate * gpus
    prompt = (f"{len(durs)} jobs on {gpus} GPU(s) each ran {', '.join(f'{s:,}' for s in durs)} "
              f"seconds. Price ${rate}/GPU-hour, billed in {inc}-second increments rounded up per "
              "job. What is the bill, in USD?")
    return Drill("billing", prompt, {"durations_s": durs, "increment_s": inc, "rate": rate,
                                     "gpus": gpus}, amt, "USD", 0.001, d,
                 ("answer", "billing"),
                 mistakes=(Mistake("no rounding: exact seconds", exact),
                           Mistake("rounded the total, not each job", total_round)))


def _blast_radius(rng: random.Random) -> Drill:
    tp = 8
    pp = rng.choice((4, 8, 16))
    dp = rng.choice((16, 32, 64, 128))
    n = tp * pp * dp
    d = Derivation("GPUs one node failure stops in a synchronous job")
    d.given("tensor parallel", "tp", tp, "1")
    d.given("pipeline stages", "pp", pp, "1")
    d.given("data-parallel replicas", "dp", dp, "1")
    g = d.calc("GPUs stopped: the whole job waits at the next collective", "G", "tp * pp * dp",
               "GPU", note="one synchronous step needs every rank; the job restarts from a "
               "checkpoint on a replacement node")
    prompt = (f"A synchronous training job runs TP{tp} x PP{pp} x DP{dp} with TP inside each "
              "8-GPU node. One node's power supply fails. How many GPUs stop doing useful work?")
    return Drill("blast-radius", prompt, {"tp": tp, "pp": pp, "dp": dp}, g, "GPUs", 0.0, d,
                 ("reliability", "blast-radius", "--gpus", str(n), "--layout",
                  f"tp={tp},pp={pp},dp={dp}"),
                 mistakes=(Mistake("only the failed node", 8),
                           Mistake("only its data-parallel replica (one model copy)", tp * pp)))


def _checkpoint_failures(rng: random.Random) -> Drill:
    from ..analytic.reliability import young_interval

    gpus = rng.choice((2048, 4096, 8192, 16384))
    mtbf_gpu_h = rng.choice((20000, 50000, 100000))
    delta = rng.choice((30, 60, 120, 300))
    M = mtbf_gpu_h * 3600 / gpus
    tau = float(young_interval(delta, M))
    d = Derivation("checkpoint interval (Young 1974)")
    d.given("GPUs", "n", gpus, "GPU")
    d.given("mean time between failures of one GPU (with its share of the node)", "M_1",
            mtbf_gpu_h * 3600, "s")
    d.given("checkpoint stall", "delta", delta, "s")
    d.calc("job MTBF", "M", "M_1 / n", "s")
    d.calc("interval", "tau", "sqrt(2 * delta * M)", "s", check=tau)
    prompt = (f"{gpus:,} GPUs, each failing once per {mtbf_gpu_h:,} hours on average; a "
              f"checkpoint stalls the job {delta} s. What checkpoint interval does Young's "
              "formula give, in minutes?")
    return Drill("checkpoint-failures", prompt, {"gpus": gpus, "mtbf_gpu_h": mtbf_gpu_h,
                                                 "delta_s": delta}, tau / 60, "min", 0.05, d,
                 ("reliability", "checkpoint", "--gpus", str(gpus),
                  "--checkpoint-write-s", str(delta)),
                 mistakes=(Mistake("used one GPU's MTBF, not the job's", math.sqrt(
                     2 * delta * mtbf_gpu_h * 3600) / 60),
                           Mistake("sqrt(delta M): dropped the 2", math.sqrt(delta * M) / 60),
                           Mistake("answered in seconds", tau)))


def _hang_triage(rng: random.Random) -> Drill:
    n = rng.choice((8, 16, 32))
    hung = rng.randrange(n)
    base = rng.randrange(1000, 90000)
    counts = [base + 1] * n
    counts[hung] = base
    d = Derivation("the rank behind a hang, from NCCL flight-recorder sequence numbers")
    d.given("collectives completed by every other rank", "s_ok", base + 1, "1")
    d.given("collectives completed by the laggard", "s_min", base, "1")
    d.calc("hung rank: the one that never entered collective s_ok", "r", f"{hung}", "1",
           note="the others wait inside collective s_min + 1 at 100% GPU-Util")
    prompt = (f"A job of {n} ranks hangs. The flight recorder's last completed collective per "
              f"rank: {', '.join(str(c) for c in counts)} (rank 0 first). Which rank do you "
              "look at first?")
    far = (hung + n // 2) % n
    return Drill("hang-triage", prompt, {"ranks": n, "counts": counts}, hung, "rank", 0.0, d,
                 ("answer", "hang-triage"),
                 mistakes=(Mistake("off by one: counted ranks from 1", hung + 1),
                           Mistake("a rank that moved on (its peers are waiting on the laggard)",
                                   far)))


def _slowdown_triage(rng: random.Random) -> Drill:
    n = rng.choice((64, 256, 1024, 4096))
    t = rng.choice((800, 1200, 2500))
    slow = rng.choice((10, 20, 50, 100))
    d = Derivation("synchronous step time with one straggler")
    d.given("workers", "n", n, "1")
    d.given("step time of a healthy worker", "t", t / 1e3, "s")
    d.given("straggler's slowdown", "x", slow / 100, "1")
    s = d.calc("step time: every step waits for the slowest worker", "T", "t * (1 + x)", "s")
    prompt = (f"{n:,} workers run synchronous data parallel at {t} ms per step. One worker "
              f"becomes {slow}% slower. What is the job's step time now, in ms?")
    return Drill("slowdown-triage", prompt, {"workers": n, "step_ms": t, "slow_percent": slow},
                 s * 1e3, "ms", 0.01, d, ("answer", "slowdown-triage"),
                 mistakes=(Mistake("the average worker, not the slowest", t * (1 + slow / 100 / n)),
                           Mistake("no change: one worker of many", t)))


def _cluster_scheduler(rng: random.Random) -> Drill:
    nodes = rng.choice((8, 12, 16))
    free = [rng.choice((0, 0, 2, 3, 4, 5, 8)) for _ in range(nodes)]
    if 8 not in free:
        free[0] = 8
    d = Derivation("GPUs an 8-GPU gang cannot use")
    d.given("free GPUs per node", "f", sum(free), "GPU", note=", ".join(map(str, free)))
    d.given("nodes with all 8 free", "N8", sum(1 for f in free if f == 8), "node")
    s = d.calc("stranded GPUs", "S", "f - 8 * N8", "GPU", check=sum(f for f in free if f < 8))
    prompt = (f"Nodes of 8 GPUs have these free GPUs: {free}. Jobs are 8-GPU gangs that must sit "
              "in one node. How many free GPUs are stranded?")
    return Drill("cluster-scheduler", prompt, {"free": free}, s, "GPUs", 0.0, d,
                 ("answer", "cluster-scheduler"),
                 mistakes=(Mistake("nodes, not GPUs", sum(1 for f in free if 0 < f < 8)),
                           Mistake("all free GPUs", sum(free))))


def _scale_scoping(rng: random.Random) -> Drill:
    from ..analytic.params import count_params
    from ..specs import get_gpu, get_model

    mid = rng.choice(("llama-3-8b", "llama-2-13b", "llama-3-70b", "qwen2.5-72b"))
    gid = rng.choice(("h100-sxm", "a100-sxm-80gb", "h200"))
    n = rng.choice((4, 64, 512, 4096))
    tokens = rng.choice((0.3e12, 1e12, 2e12))
    mfu = rng.choice((0.35, 0.40, 0.45))
    N = count_params(get_model(mid)).total
    gpu = get_gpu(gid)
    d = Derivation(f"days to train {mid} on {n:,} x {gid}")
    d.given("parameters", "N", N, "1", get_model(mid).source)
    d.given("tokens", "D", tokens, "token")
    d.given("GPUs", "n", n, "GPU")
    d.given("dense bf16 peak", "pi", gpu.peak_flop_per_s("bf16"), "FLOP/s",
            gpu.source_of("flop_per_s.bf16"))
    d.given("MFU", "u", mfu, "1")
    days = d.calc("days", "T", "6 * N * D / (n * pi * u) / 86400", "day")
    prompt = (f"How many days does {mid} ({N / 1e9:.1f}B parameters) take for "
              f"{tokens / 1e12:g}T tokens on {n:,} x {gid} at {mfu:.0%} MFU (6ND FLOPs, dense "
              "bf16 peak)?")
    return Drill("scale-scoping", prompt, {"model": mid, "gpu": gid, "gpus": n, "tokens": tokens,
                                           "mfu": mfu}, days, "days", 0.05, d,
                 ("answer", "scale-scoping", "--model", mid),
                 mistakes=(Mistake("2ND: forward FLOPs only", days / 3),
                           Mistake("the sparse (2:4) peak, not the dense one", days / 2),
                           Mistake("answered in hours", days * 24)))


BANK: dict[str, Callable[[random.Random], Drill]] = {
    "parallelism-traffic": _parallelism_traffic,
    "ring-allreduce": _ring_allreduce,
    "fabric-map": _fabric_map,
    "nccl-topology": _nccl_topology,
    "roce-vs-ib": _roce_vs_ib,
    "moe-latency-layout": _moe_latency_layout,
    "moe-global-serving": _moe_global_serving,
    "moe-routing": _moe_routing,
    "gpu-hierarchy": _gpu_hierarchy,
    "memory-hierarchy": _memory_hierarchy,
    "occupancy": _occupancy,
    "coalescing-transpose": _coalescing,
    "warp-divergence": _warp_divergence,
    "billing": _billing,
    "blast-radius": _blast_radius,
    "checkpoint-failures": _checkpoint_failures,
    "hang-triage": _hang_triage,
    "slowdown-triage": _slowdown_triage,
    "cluster-scheduler": _cluster_scheduler,
    "scale-scoping": _scale_scoping,
}
