"""moe-global-serving: regional expert skew, replication per region, cross-region hops, and what
a global KV cache can mean in bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analytic.kv import model_kv_bytes_per_token
from ..analytic.moe_global import (
    default_regions,
    expert_placement_by_region,
    kv_transfer,
    max_rtt_for_expert_hop,
    regions_from_table,
)
from ..analytic.moe_serving import published_prefill
from ..analytic.serving.prefill import prefill_rate
from ..derive import Derivation, Headline, Report, Section, Table
from ..errors import BadInput
from ..specs import get_gpu, get_model
from ..specs.sources import all_sources, cite, read_user_toml
from ..units import fmt_bytes
from .params import Param, gpu, model

PROMPT = (
    "Hundreds of experts and users on every continent: where do experts live, how do you route "
    "around regional skew, when does a cross-region hop break the SLA, and what can a 'global "
    "KV cache' mean?"
)

DEFAULTS = {"model": "deepseek-v3", "gpu": "h800", "regions": None, "prefill_tokens_per_s": None,
            "tpot_s": 0.05, "step_s": 0.03, "skew": 1.0, "slots": 288, "gpus": 144,
            "kv_dtype": "bf16", "compare_model": "llama-3-70b"}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    gpu(DEFAULTS["gpu"]),
    Param("tpot_ms", "float", DEFAULTS["tpot_s"] * 1e3, "time-per-output-token SLA", "ms", lo=0.1, hi=1e5, key="tpot_s", scale=1e-3),
    Param("skew", "float", DEFAULTS["skew"], "Zipf exponent of the shared expert popularity", lo=0.0, hi=4.0),
    Param("gpus", "int", DEFAULTS["gpus"], "GPUs per region", "GPUs", lo=1, hi=131072),
    Param("kv_dtype", "str", DEFAULTS["kv_dtype"], "KV-cache element type (bf16, fp16, fp8, int8, int4)"),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    m = get_model(o["model"])
    regs = (regions_from_table(read_user_toml(o["regions"], "--regions"), "--regions")
            if o["regions"] else default_regions())
    if not m.is_moe:
        raise BadInput(f"--model: {m.id} is not a mixture-of-experts model (no routed experts)")
    E = m.n_experts
    rows = expert_placement_by_region(E, float(o["skew"]), regs, int(o["slots"]), int(o["gpus"]))
    s1 = Section(
        "1. Regional skew and expert replication",
        text=(f"Each region's expert popularity mixes a shared Zipf(s={o['skew']:g}) law with a "
              f"region-specific one (weight {regs.mix:g}). A deployment balanced for the global "
              "mix is uneven on one region's traffic; balancing each regional deployment for its "
              f"own loads recovers it. {o['slots']} slots on {o['gpus']} GPUs per region."),
        tables=(Table("imbalance (max GPU / mean) of one layer per region",
                      ("region", "traffic share (%)", "global placement", "regional placement",
                       "bound", "hottest expert share (%)"),
                      tuple((r["region"], 100 * float(sh), r["imbalance_global_placement"],
                             r["imbalance_regional_placement"], r["lower_bound"],
                             100 * r["hottest_expert_share"])
                            for r, sh in zip(rows, regs.shares / regs.shares.sum(), strict=True))),),
    )
    moe_layers = m.n_moe_layers or m.n_layers
    d = Derivation("cross-region expert hop")
    d.given("TPOT budget", "T", o["tpot_s"], "s")
    d.given("local decode step", "t_step", o["step_s"], "s")
    d.given("MoE layers a token crosses", "L_moe", moe_layers, "1", m.source)
    hop = d.calc("largest RTT per layer hop that fits", "RTT_max", "max(0, (T - t_step) / L_moe)",
                 "s", check=max_rtt_for_expert_hop(o["tpot_s"], o["step_s"], moe_layers))
    min_rtt = float(np.min(regs.rtt_s[regs.rtt_s > 0])) if (regs.rtt_s > 0).any() else 0.0
    s2 = Section(
        "2. When a cross-region hop breaks the SLA",
        text=(f"An expert in another region costs one round trip per MoE layer. The budget leaves "
              f"{hop * 1e3:.2f} ms per layer; the closest pair of regions is "
              f"{min_rtt * 1e3:.0f} ms apart, so experts must be complete in every region and "
              "cross-region routing can only move whole requests (one RTT added to TTFT)."),
        derivation=d,
    )
    prefixes = np.array([1024, 4096, 8192, 32768, 131072])
    far = float(regs.rtt_s.max())
    kvs, rates = {}, {}
    cmp_models = [m] + ([get_model(o["compare_model"])] if o["compare_model"] != m.id else [])
    g_spec = get_gpu(o["gpu"])
    for mod in cmp_models:
        # recompute at the prefill rate the serving engine computes for this model (every
        # prompt token computed, no cache hits), unless a rate is given
        if o["prefill_tokens_per_s"]:
            rates[mod.id] = {"tokens_per_s_per_node": float(o["prefill_tokens_per_s"]),
                             "from": "given"}
        else:
            pr = prefill_rate(mod, g_spec)
            rates[mod.id] = {"tokens_per_s_per_node": pr.tokens_per_s_per_node,
                             "from": "plan serve prefill (computed)", "layout": pr.layout,
                             "nodes": pr.nodes, "precision": pr.precision,
                             "engine": pr.engine, "prompt_tokens": pr.prompt_tokens}
        kvs[mod.id] = kv_transfer(mod, prefix_tokens=prefixes, rtt_s=far,
                                  wan_bytes_per_s=regs.wan_bytes_per_s,
                                  prefill_tokens_per_s=rates[mod.id]["tokens_per_s_per_node"],
                                  kv_dtype=o["kv_dtype"])
    x_pub, src_pub = published_prefill()
    krows = []
    for mid, k in kvs.items():
        for i, n in enumerate(prefixes):
            krows.append((mid, int(n), fmt_bytes(k["prefix_bytes"][i]), 1e3 * k["fetch_s"][i],
                          1e3 * k["recompute_s"][i]))  # printed in people's units
    s3 = Section(
        "3. What a global KV cache can and cannot mean",
        text=(f"Fetching a cached prefix across the farthest pair ({far * 1e3:.0f} ms RTT, "
              f"{regs.wan_bytes_per_s * 8 / 1e9:.0f} Gb/s WAN) vs recomputing it at the prefill "
              "rate per node of " + ", ".join(f"{k} {v['tokens_per_s_per_node']:,.0f} tokens/s"
                                              for k, v in rates.items())
              + f" ({'given' if o['prefill_tokens_per_s'] else 'computed by the serving engine, every prompt token computed, on ' + g_spec.id}"
              f"; DeepSeek's published {x_pub['published']:,.0f} input tokens/s per H800 node "
              f"include {100 * x_pub['hit_rate']:.1f}% cache hits, {x_pub['computed']:,.0f} "
              "computed). Fetch wins only beyond the break-even length and "
              "only when the WAN moves KV bytes faster than prefill produces them. Replicating "
              "popular prefixes (system prompts, documents) to every region ahead of time costs "
              "their bytes once per region; session affinity costs one RTT per request; "
              "per-token KV never crosses regions inside a decode step."),
        headlines=tuple(Headline(f"{mid}: break-even prefix (fetch beats recompute)",
                                 k["breakeven_prefix_tokens"], "token") for mid, k in kvs.items())
        + tuple(Headline(f"{mid}: WAN bandwidth at which fetching always wins",
                         k["wan_bytes_per_s_needed_to_beat_recompute"], "B/s")
                for mid, k in kvs.items()),
        tables=(Table("fetch vs recompute", ("model", "prefix tokens", "prefix bytes",
                                            "fetch (ms)", "recompute (ms)"), tuple(krows)),),
    )
    kvb = model_kv_bytes_per_token(m, o["kv_dtype"])
    followups = (
        ("Why not one global pool of experts?",
         f"A per-layer hop must fit in {hop * 1e3:.2f} ms; any inter-region RTT is far above it."),
        ("Which experts get extra replicas per region?",
         "The region's own hot experts: its regional placement reaches "
         f"{rows[0]['imbalance_regional_placement']:.2f} vs {rows[0]['imbalance_global_placement']:.2f} "
         f"with the global one in {rows[0]['region']}."),
        ("How big is one cached 32k prefix?",
         f"{kvb * 32768 / 1e9:.2f} GB for {m.id} ({kvb:,.0f} B/token, {o['kv_dtype']})."),
        ("When is session affinity better than replication?",
         "When prefixes are private to a user (chat history): one RTT per request is cheaper "
         "than copying every session's KV to every region."),
        ("What would change with FP8 KV?",
         "Half the bytes: the break-even prefix shortens and the WAN bandwidth needed halves."),
    )
    assumptions = (f"Regions, shares, RTTs and WAN bandwidth from {cite(regs.source) if regs.source in all_sources() else regs.source}.",
                   "Expert popularity: Zipf law per layer with a regional component.",
                   "Recompute at each model's computed prefill rate per node (plan serve's "
                   "engine, prefill only, no cache hits) unless a rate is given; DeepSeek's "
                   f"published rate is compared on its computed (cache-miss) share ({src_pub}).")
    data = {"question": "moe-global-serving", "options": {k: v for k, v in o.items()},
            "regions": list(regs.names), "shares": regs.shares.tolist(),
            "rtt_s": regs.rtt_s.tolist(), "placement_by_region": rows,
            "max_rtt_per_layer_hop_s": hop, "kv": kvs, "prefill_rates": rates,
            "deepseek_published_prefill": x_pub}
    return Report(f"moe-global-serving: {m.id}", (s1, s2, s3), data, question=PROMPT,
                  assumptions=assumptions, followups=followups)
