"""moe-latency-layout: EP vs TP for experts, the per-layer timeline, the all-to-all tail, and the
layout that meets a TPOT / TTFT SLA."""

from __future__ import annotations

from typing import Any

from ..analytic.moe_serving import ep_vs_tp_bytes, plan
from ..derive import Headline, Report, Section, Table
from ..specs import get_gpu, get_model
from ..units import fmt_bytes
from .params import Param, gpu, model

PROMPT = (
    "You serve a sparse MoE model under a tight latency SLA and the all-to-all is on the critical "
    "path. Which layout do you choose, EP or TP for the experts, and what drives the tail?"
)

DEFAULTS = {"model": "deepseek-v3", "gpu": "h800", "tpot_s": 0.05, "ttft_s": 2.0,
            "context": None, "dtype": "fp8", "skew": None}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    gpu(DEFAULTS["gpu"]),
    Param("tpot_ms", "float", DEFAULTS["tpot_s"] * 1e3, "time-per-output-token SLA", "ms", lo=0.1, hi=1e5, key="tpot_s", scale=1e-3),
    Param("ttft_ms", "float", DEFAULTS["ttft_s"] * 1e3, "time-to-first-token SLA", "ms", lo=0.1, hi=1e6, key="ttft_s", scale=1e-3),
    Param("context", "tokens", DEFAULTS["context"], "tokens of context per request (default: the planner's)", "tokens", lo=1, hi=2**21),
    Param("dtype", "str", DEFAULTS["dtype"], "weight / compute precision"),
    Param("skew", "float", DEFAULTS["skew"], "Zipf exponent of expert popularity (default: the planner's)", lo=0.0, hi=4.0),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    m, gpu = get_model(o["model"]), get_gpu(o["gpu"])
    res = plan(m, gpu, tpot_s=o["tpot_s"], ttft_s=o["ttft_s"], context=o["context"],
               dtype_name=o["dtype"], skew=o["skew"], draws=128)
    secs = []
    for ph in ("prefill", "decode"):
        pp = getattr(res, ph)
        if pp is None:
            secs.append(Section(f"{ph}: no layout meets the SLA"))
            continue
        secs.append(Section(
            f"{ph}: TP{pp.attention['tp']} x DP{pp.attention['dp']} attention, EP{pp.ep}, "
            f"{pp.redundant_experts} redundant experts on {pp.gpus} GPUs",
            headlines=(Headline("tokens/s per GPU", pp.tokens_per_s_per_gpu, "token/s"),
                       Headline("latency p50 (s)", pp.tpot_p50_s if ph == "decode" else pp.ttft_p50_s, "s"),
                       Headline("latency p99 (s)", pp.tpot_p99_s if ph == "decode" else pp.ttft_p99_s, "s"),
                       Headline("all-to-all per layer p99", pp.alltoall_p99_s, "s"),
                       Headline("busiest GPU's routed copies p99 / mean",
                                pp.extra["recv_copies_p99"] / pp.extra["recv_copies_mean_gpu"])),
            tables=(Table("per-layer timeline (busiest GPU)", ("part", "time (ms)"),
                          tuple((k, 1e3 * v) for k, v in pp.breakdown_s.items())),)))
    dec = res.decode
    if dec is None:
        secs.append(Section("EP vs TP for the experts, in bytes per GPU per MoE layer",
                            text="No decode layout meets the SLA, so there is no step to compare."))
    else:  # the chosen decode step; TP over one node's GPUs for the experts
        n = dec.tokens_per_gpu * dec.gpus
        tp = dec.gpus // dec.extra["nodes"]
        b = ep_vs_tp_bytes(m, n, tp, dec.ep)
        secs.append(Section(
            "EP vs TP for the experts, in bytes per GPU per MoE layer",
            text=(f"{n:,} tokens in the chosen decode step, EP{dec.ep} vs TP{tp} (one node). EP "
                  "sends each token's k copies once (FP8) and back (BF16) and reads only its own "
                  "experts; TP reads a slice of every touched expert on every GPU and "
                  "all-reduces the layer output."),
            tables=(Table("", ("quantity", "bytes"),  # scaled for people; --json keeps bytes
                         tuple((k, fmt_bytes(v)) for k, v in b.items())),)))
    secs.append(Section("Sanity anchor", derivation=res.derivation))
    followups = (
        ("Why DP attention instead of TP for MLA?",
         "The MLA latent is not split by TP: every TP rank reads the whole KV of its group, so "
         "TP multiplies KV reads per GPU; DP keeps one copy per sequence."),
        ("What sets the all-to-all tail?",
         "The busiest GPU's received copies: max over ranks of a multinomial draw, made worse by "
         "skew and reduced by redundant experts."),
        ("Why are redundant experts worth their memory?",
         "They cut the max GPU load toward the mean (scalemodel moe place), which cuts both the "
         "expert GEMM and the receive volume of the busiest GPU."),
        ("Where does overlap stop helping?",
         "When communication exceeds compute per layer: the layer then costs the all-to-all."),
        ("How does our throughput compare with DeepSeek's?",
         "Roofline times at assumed efficiencies are lower bounds, so our figures should lie above "
         "DeepSeek's published per-GPU rates (H800, Day-6; prefill on its computed tokens: "
         "56.3% of the published 73.7k input tokens/s per node were prefix-cache hits)"
         + "".join(f"; {ph}: {getattr(res, ph).tokens_per_s_per_gpu / res.anchors[key]:.2f}x"
                   for ph, key in (("prefill", "deepseek_prefill_tokens_per_s_per_gpu"),
                                   ("decode", "deepseek_decode_tokens_per_s_per_gpu"))
                   if getattr(res, ph) is not None) + "."),
    )
    assumptions = ("Roofline times at assumed GEMM and HBM efficiencies (moe.toml).",
                   "All-to-all and TP all-reduce priced by the collectives engine "
                   "(analytic/collectives.py); DeepEP's kernels per phase: node-limited "
                   "(one copy per node over the NIC, NVLink fan-out) in prefill, per-expert "
                   "RDMA in decode.",
                   "Expert popularity Zipf(s) per layer, balanced by our placement planner.")
    return Report(f"moe-latency-layout: {m.id} on {gpu.id}", tuple(secs), res.to_dict(),
                  question=PROMPT, assumptions=assumptions, followups=followups)
