"""``moe route|place|serve``: the router simulation, the expert placement and the per-phase
serving layout as reports. ``moe global`` is the moe-global-serving answer's report."""

from __future__ import annotations

from typing import Any


def route_report(res: Any, experts: int, top_k: int, balance: str) -> Any:
    """``moe route``: load balance over training, capacity drops, serving imbalance."""
    from ..derive import Headline, Report, Section, Table

    cf = res.config["capacity_factor"]
    x = res.extra
    h = res.history
    marks = sorted({0, len(h) // 10, len(h) // 4, len(h) // 2, len(h) - 1})
    sec = [
        Section(f"Router training: {experts} experts, top-{top_k}, balance "
                f"{balance}, {res.config['score']} scores, Adam",
                text=(f"Load is summed over the last {x['window_steps']} steps (a time average). "
                      "Load entropy is in nats (ln E when perfectly uniform); max/mean is the "
                      "busiest expert's load over the mean. The sampling floor is the max/mean "
                      "a perfectly uniform router shows from finite token draws alone. "
                      "Collapse: entropy falls and max/mean rises as favoured experts learn "
                      "faster and attract more tokens. Router logit size: mean logsumexp of "
                      "the logits (what the z-loss squares)."),
                headlines=(Headline(f"max / mean load ({x['window_steps']}-step load)",
                                    res.max_over_mean_load),
                           Headline("sampling floor of that", x["sampling_floor"]),
                           Headline("max / mean load per step (mean over the window)",
                                    x["max_over_mean_load_per_step"]),
                           Headline("sampling floor per step", x["sampling_floor_per_step"]),
                           Headline("load entropy", res.load_entropy, "nat"),
                           Headline("entropy if uniform (ln E)", res.load_entropy_max, "nat"),
                           Headline(f"dropped at capacity factor {cf:g} (window mean)",
                                    f"{res.dropped_fraction:.2%}"),
                           Headline("experts used in the window", res.experts_used),
                           Headline("router logit size (mean logsumexp)",
                                    x["router_logit_lse_mean"]))),
        Section("", tables=(Table("load over training (one step each)",
                                  ("step", "entropy (nat)", "max/mean", "dropped",
                                   "logit size (lse)"),
                                  tuple((h[i]["step"], h[i]["load_entropy"],
                                         h[i]["max_over_mean_load"],
                                         f"{h[i]['dropped_fraction']:.2%}",
                                         h[i]["router_logit_lse"]) for i in marks)),
                            Table("capacity factor (trained router, fresh tokens)",
                                  ("capacity factor", "dropped fraction", "padding fraction"),
                                  tuple((c["capacity_factor"], c["dropped_fraction"],
                                         c["padding_fraction"]) for c in res.capacity_sweep)),
                            Table("serving, no drops: imbalance vs batch",
                                  ("tokens in batch", "max/mean (mean)", "max/mean (p99)"),
                                  tuple((b["batch_tokens"], b["max_over_mean_load_mean"],
                                         b["max_over_mean_load_p99"]) for b in res.batch_sweep)),
                            Table("serving: per-region traffic mix",
                                  ("region", "entropy (nat)", "max/mean"),
                                  tuple((r["region"], r["load_entropy"], r["max_over_mean_load"])
                                        for r in res.region_mix)))),
    ]

    def draw(path: str) -> None:
        from ..report.plot import shared_x_curves

        shared_x_curves(path, title=f"router load, balance={balance}",
                        x=[e["step"] for e in h],
                        series=[("max/mean load", [e["max_over_mean_load"] for e in h]),
                                ("load entropy (nat)", [e["load_entropy"] for e in h])],
                        xlabel="step")

    return Report(f"scalemodel moe route: balance {balance}", tuple(sec), res.to_dict(),
                  plot=draw)


def place_report(res: Any) -> Any:
    """``moe place``: imbalance before and after placement, against EPLB and the lower bound."""
    from ..derive import Headline, Report, Section, Table

    heads = [Headline("imbalance before (static layout)", res.imbalance_before),
             Headline("imbalance after (ours)", res.imbalance_after),
             Headline("lower bound for this slot budget", res.lower_bound)]
    if res.eplb_hierarchical is not None:
        heads.append(Headline("EPLB hierarchical", res.eplb_hierarchical))
    if res.eplb_global is not None:
        heads.append(Headline("EPLB global", res.eplb_global))
    heads += [Headline("node imbalance before -> after",
                       f"{res.node_imbalance_before:.3f} -> {res.node_imbalance_after:.3f}"),
              Headline("other nodes reached per token per layer (before -> after)",
                       f"{res.remote_nodes_per_token_before:.2f} -> "
                       f"{res.remote_nodes_per_token_after:.2f}"),
              Headline("cross-node dispatch bytes per token (all layers, FP8)",
                       res.cross_node_bytes_per_token_after, "B")]
    pl = res.per_layer
    rows = tuple((i, pl["imbalance_before"][i], pl["imbalance_after"][i], pl["lower_bound"][i],
                  *( [pl["eplb_hierarchical"][i]] if "eplb_hierarchical" in pl else []),
                  *( [pl["eplb_global"][i]] if "eplb_global" in pl else []))
                 for i in range(min(res.layers, 16)))
    cols = ("layer", "before", "after", "bound",
            *(("EPLB hier.",) if "eplb_hierarchical" in pl else ()),
            *(("EPLB global",) if "eplb_global" in pl else ()))
    text = (f"{res.layers} layers x {res.experts} experts into {res.slots} slots on {res.gpus} "
            f"GPUs ({res.slots // res.gpus} per GPU) in {res.nodes} nodes"
            + (", groups kept on their node" if res.keep_groups_on_node else "")
            + ". Imbalance = max GPU load / mean GPU load, tokens spread evenly over an expert's "
            "replicas (as EPLB assumes); the bound is max(mean, t*) with t* the smallest "
            "per-replica load that fits the slots.")
    return Report("scalemodel moe place", (
        Section("Expert placement", text=text, headlines=tuple(heads)),
        Section("", tables=(Table("per layer (first 16)", cols, rows),)),
    ), res.to_dict())


# the breakdown's parts that are not one MoE layer's: what each covers (the model fills in counts)
_NOT_PER_MOE_LAYER = {
    "dense_layer": "one dense layer (the model has {dense})",
    "head": "the output head, once per forward",
    "alltoall_per_token_p99": "all-to-all summed over a token's {moe} MoE layers, p99",
}


def _serve_tables(breakdown_s: dict[str, float], memory_bytes: dict[str, float],
                  m: Any) -> tuple[Any, ...]:
    """The timeline split by what each row covers (one MoE layer, one dense layer, the head,
    the sum over the MoE layers), in ms; memory per GPU in GB. --json keeps seconds and bytes."""
    from ..derive import Table

    counts = {"dense": m.n_layers - m.n_moe_layers, "moe": m.n_moe_layers}
    per_layer = tuple((k, v * 1e3) for k, v in breakdown_s.items() if k not in _NOT_PER_MOE_LAYER)
    other = tuple((k, _NOT_PER_MOE_LAYER[k].format(**counts), v * 1e3)
                  for k, v in breakdown_s.items() if k in _NOT_PER_MOE_LAYER)
    return (Table("one MoE layer on the busiest GPU", ("part", "time (ms)"), per_layer),
            Table("the rest of a forward", ("part", "covers", "time (ms)"), other),
            Table("memory per GPU", ("part", "GB"),
                  tuple((k, v / 1e9) for k, v in memory_bytes.items()),
                  note="1 GB = 1e9 bytes; --json gives bytes"))


def serve_report(res: Any, m: Any, gpu: Any) -> Any:
    """``moe serve``: the layout per phase under the SLAs, with DeepSeek's deployment beside."""
    from ..derive import Headline, Report, Section

    secs = []
    for ph in ("prefill", "decode"):
        pp = getattr(res, ph)
        if pp is None:
            secs.append(Section(f"{ph}: no layout meets the SLA",
                                text="Relax the SLA, use more memory-efficient dtypes or a "
                                     "larger GPU."))
            continue
        lat = (Headline("TPOT p50 / p99", f"{pp.tpot_p50_s * 1e3:.1f} / {pp.tpot_p99_s * 1e3:.1f} ms")
               if ph == "decode" else
               Headline("TTFT p50 / p99", f"{pp.ttft_p50_s * 1e3:.0f} / {pp.ttft_p99_s * 1e3:.0f} ms"))
        secs.append(Section(
            f"{ph}: attention TP{pp.attention['tp']} x DP{pp.attention['dp']}, EP{pp.ep}, "
            f"{pp.redundant_experts} redundant experts, {pp.gpus} GPUs ({pp.extra['nodes']} "
            f"nodes), {pp.extra['placement']} placement, {pp.extra['dispatch']} dispatch",
            headlines=(Headline("tokens per GPU per forward", pp.tokens_per_gpu, "token"),
                       Headline("tokens/s per GPU", pp.tokens_per_s_per_gpu, "token/s"),
                       lat, Headline("all-to-all per layer p99 (dispatch + combine)",
                                     pp.alltoall_p99_s, "s"),
                       Headline("GPUs / other nodes one token's dispatch reaches",
                                f"{pp.extra['gpus_per_token']:.2f} / "
                                f"{pp.extra['remote_nodes_per_token']:.2f}")),
            tables=_serve_tables(pp.breakdown_s, pp.memory_bytes_per_gpu, m)))
    secs.append(Section("Sanity anchor: DeepSeek's published deployment",
                        text="Prefill 4 nodes EP32, decode 18 nodes EP144; ~73.7k input tokens/s "
                             "per H800 node with 56.3% of them prefix-cache hits (so ~32.2k "
                             "computed, the figure our prefill compares with) and ~14.8k output "
                             "tokens/s per node.",
                        derivation=res.derivation))
    return Report(f"scalemodel moe serve: {m.id} on {gpu.id}", tuple(secs), res.to_dict())
