"""roofline: the H100's ridge point, and why batch-1 decode is memory-bound."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analytic import roofline as rl
from ..derive import Headline, Report, Section, Table
from ..specs import get_gpu, get_model
from ..units import fmt_rate
from .params import Param, gpu, model

PROMPT = (
    "What is the ridge point of an H100, and what does it tell you? Take a 70B model decoding "
    "one token at batch 1: is it compute-bound or memory-bound, how fast can it go, and at "
    "what batch does that change?"
)

DEFAULTS = {"model": "llama-3-70b", "gpu": "h100-sxm", "dtype": "bf16", "kv_dtype": "bf16",
            "context": 4096, "batch": 1}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    gpu(DEFAULTS["gpu"]),
    Param("dtype", "str", DEFAULTS["dtype"], "weight / compute precision"),
    Param("kv_dtype", "str", DEFAULTS["kv_dtype"], "KV-cache element type (bf16, fp16, fp8, int8, int4)"),
    Param("context", "tokens", DEFAULTS["context"], "tokens of context per decoded sequence", "tokens", lo=1, hi=2**21),
    Param("batch", "int", DEFAULTS["batch"], "decode batch", "sequences", lo=1, hi=65536),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    gpu = get_gpu(o["gpu"])
    m = get_model(o["model"])
    ridges = rl.ridge_points(gpu)
    s1 = Section(
        "1. The ridge point",
        text=("Attainable FLOP/s is the lower of the compute roof and intensity x bandwidth "
              "(Williams et al. 2009). The ridge is where they meet: a kernel needs that many "
              "FLOPs per byte of HBM traffic to use the tensor cores fully. Lower precisions "
              "raise the roof but not the bandwidth, so their ridge moves right."),
        tables=(Table(f"{gpu.name}", ("precision", "peak TFLOP/s", "ridge FLOP/byte"),
                      tuple((k, pk / 1e12, r) for k, pk, r in ridges)),),
    )
    g = rl.gemm(gpu, 4096, 4096, 4096, o["dtype"])
    s2 = Section(
        "2. A large GEMM sits far right of it",
        text=(f"A 4096^3 GEMM does {g.flops / 1e9:,.0f} GFLOP on {g.bytes / 1e6:,.0f} MB: "
              f"{g.arithmetic_intensity:,.0f} FLOP/B, {g.arithmetic_intensity / g.ridge_flop_per_byte:.1f}x "
              f"the ridge, so it is compute-bound. With N = K = 4096 the GEMM reaches the ridge at "
              f"M = {g.crossover_batch} rows: the token count of a matmul decides its side."),
        derivation=g.derivation,
    )
    dec = rl.decode_step(gpu, m, batch=o["batch"], context=o["context"], dtype_name=o["dtype"],
                         kv_dtype=o["kv_dtype"])
    tok_s = o["batch"] / dec.time_s
    from ..specs.numerics import dtype

    w_dtype = dtype(o["dtype"])
    s3 = Section(
        f"3. {m.id}: decode at batch {o['batch']}, context {o['context']:,}",
        text=("Each decode step multiplies every weight by one token per sequence: two FLOPs per "
              f"weight per sequence against {_bytes_words(w_dtype.bytes)} per weight "
              f"read ({w_dtype.name}). At batch 1 the intensity is "
              f"about {dec.arithmetic_intensity:.2f} FLOP/B, against a ridge of "
              f"{dec.ridge_flop_per_byte:.0f}: the GPU waits on HBM. The step cannot be faster "
              f"than reading the weights (and cache) once: at most {tok_s:,.1f} tokens/s per "
              f"sequence on one {gpu.id} if the model fit on it (split over t GPUs with TP, both "
              "time and bytes per GPU divide by t)."),
        headlines=(Headline("arithmetic intensity", dec.arithmetic_intensity, "FLOP/B"),
                   Headline("bound", dec.bound),
                   Headline("time per step (lower bound)", dec.time_s, "s"),
                   Headline("tokens/s per sequence (upper bound)", tok_s, "token/s")),
        derivation=dec.derivation,
    )
    w_only = rl.decode_step(gpu, m, batch=1, context=1, dtype_name=o["dtype"],
                            kv_dtype=o["kv_dtype"])
    batches = np.array([1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096])
    sw_kv = rl.decode_sweep(gpu, m, batches, o["context"], o["dtype"], o["kv_dtype"])
    sw_w = rl.decode_sweep(gpu, m, batches, 1, o["dtype"], o["kv_dtype"])
    rows = tuple(
        (int(b), float(sw_w["intensity"][i]), float(sw_kv["intensity"][i]),
         "compute" if sw_kv["intensity"][i] >= dec.ridge_flop_per_byte else "memory",
         float(sw_kv["tokens_per_s"][i]))
        for i, b in enumerate(batches)
    )
    lim = dec.extra["intensity_limit_large_batch"]
    cross_txt = (f"never: with the cache read per sequence, intensity tends to {lim:.0f} FLOP/B, "
                 "below the ridge" if dec.crossover_batch is None
                 else f"from batch {dec.crossover_batch}")
    s4 = Section(
        "4. The batch at which decode turns compute-bound",
        text=(f"Weights are read once per step whatever the batch, so intensity grows with the "
              f"batch: ignoring the KV cache, the crossover is at batch "
              f"{w_only.crossover_batch} (about the ridge divided by one FLOP per weight byte). "
              f"With {o['context']:,} tokens of context per sequence, each sequence also reads "
              f"its own cache, which does not amortise: compute-bound {cross_txt}. Long-context "
              "decode stays memory-bound; GQA, MLA and fp8 caches move that limit."),
        headlines=(Headline("crossover batch, weights only", w_only.crossover_batch, "seq"),
                   Headline(f"crossover batch at context {o['context']:,}",
                            dec.crossover_batch if dec.crossover_batch else "never")),
        tables=(Table("decode step by batch",
                      ("batch", "FLOP/B (weights only)", f"FLOP/B (context {o['context']:,})",
                       "bound", "tokens/s (upper bound)"), rows),),
    )
    h200 = get_gpu("h200") if gpu.id != "h200" else gpu
    followups = (
        ("Why does an H200 decode faster than an H100 with the same tensor cores?",
         f"Decode is memory-bound and the H200 has {fmt_rate(h200.hbm_bytes_per_s)} of HBM "
         f"against {fmt_rate(gpu.hbm_bytes_per_s)}: step time falls with bandwidth, not FLOPs."),
        ("Does FP8 weights help decode?",
         "Yes, by halving the bytes read per step: the memory-bound time halves. It also doubles "
         "the peak, so the ridge doubles and the crossover batch stays about the same."),
        ("What do speculative decoding and batching have in common?",
         "Both put more tokens through each read of the weights: intensity rises with tokens "
         "per weight read, whether they come from more sequences or from drafted tokens."),
        ("Is prefill memory-bound too?",
         "No: a prefill of thousands of tokens is a GEMM with M = tokens, far right of the ridge "
         "(see part 2); that is why prefill and decode are often served on separate pools."),
        ("What does the roofline leave out?",
         "Kernel launch and synchronisation latency, cache effects (L2 reuse makes real bytes "
         "lower), achieved rather than peak bandwidth (about 80-90% in practice), and "
         "communication under TP. Its times are lower bounds."),
    )
    data = {"question": "roofline", "options": o,
            "ridge_points": [{"dtype": k, "peak_flop_per_s": pk, "ridge_flop_per_byte": r}
                             for k, pk, r in ridges],
            "gemm": g.to_dict(), "decode": dec.to_dict(),
            "crossover_batch_weights_only": w_only.crossover_batch,
            "crossover_batch": dec.crossover_batch}

    def draw(path: str) -> None:
        from ..report import plot

        bs = np.unique(np.round(np.logspace(0, 13, 40, base=2))).astype(int)
        sw = rl.decode_sweep(gpu, m, bs, o["context"], o["dtype"], o["kv_dtype"])
        plot.roofline(path, title=f"Roofline: {gpu.name}", bandwidth=gpu.hbm_bytes_per_s,
                      roofs=[(k, pk) for k, pk, _ in ridges[:3]],
                      points=[("GEMM 4096^3", g.arithmetic_intensity, g.attainable_flop_per_s),
                              ("decode b=1", dec.arithmetic_intensity, dec.attainable_flop_per_s)],
                      curve=(sw["intensity"].tolist(), sw["attainable"].tolist(),
                             f"{m.id} decode, batch 1..{bs[-1]}"))

    return Report(f"roofline: {gpu.id} and {m.id} decode", (s1, s2, s3, s4), data,
                  question=PROMPT, followups=followups,
                  assumptions=(f"Dense {o['dtype']} peak and datasheet HBM bandwidth of {gpu.id}.",
                               "Each weight and each cached byte crosses HBM once per step.",
                               "Times are roofline lower bounds (perfect overlap)."),
                  plot=draw)


def _bytes_words(b: float) -> str:
    """'one byte', 'two bytes', 'half a byte' (what a weight of that precision costs)."""
    words = {0.5: "half a byte", 1: "one byte", 2: "two bytes", 4: "four bytes"}
    return words.get(b, f"{b:g} bytes")
