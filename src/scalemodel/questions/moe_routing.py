"""moe-routing: the collapse spiral, auxiliary losses, z-loss, bias balancing, capacity factors and
what changes at serving time, from a router trained live."""

from __future__ import annotations

from typing import Any

from ..analytic.moe_data import router_citation, router_constant
from ..derive import Headline, Report, Section, Table
from ..errors import BadInput
from ..sim.moe_routing import RouterConfig, simulate
from .params import Param

PROMPT = (
    "Why do MoE routers collapse onto a few experts, what do auxiliary losses, the router z-loss "
    "and bias-based balancing do about it, what does the capacity factor trade, and what changes "
    "when you serve the model?"
)

DEFAULTS = {"experts": 64, "top_k": 2, "steps": 400, "tokens": 2048, "seed": 0}

PARAMS: tuple[Param, ...] = (
    Param("tokens", "count", DEFAULTS["tokens"], "tokens per training step (2048, 2k)", "tokens", lo=1, hi=32768),
    Param("steps", "int", DEFAULTS["steps"], "training steps of each router", "steps", lo=1, hi=20000),
    Param("model", "str", None, "an MoE model id or config.json whose router shape (routed "
          "experts, experts per token) is trained", metavar="ID|config.json"),
    Param("experts", "int", None, "routed experts (default 64, or the --model's)", "experts",
          lo=2, hi=1024),
    Param("top_k", "int", None, "experts per token (default 2, or the --model's)", lo=1, hi=64),
    Param("skew", "float", None, "Zipf exponent of the token stream's topic mix (default: a "
          "Dirichlet draw)", lo=0.0, hi=4.0),
    Param("seed", "int", DEFAULTS["seed"], "random seed", lo=0, hi=2**32 - 1),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    if isinstance(o["tokens"], float):  # `answer --tokens` parses counts such as 2k as floats
        if not o["tokens"].is_integer():
            raise BadInput(f"--tokens: tokens per step must be a whole number, got {o['tokens']:g}")
        o["tokens"] = int(o["tokens"])
    model = opts.get("model")
    if model:  # the model's routed experts and top-k, unless given explicitly
        from ..specs import get_model

        m = get_model(model)
        if not m.n_experts:
            raise BadInput(f"--model: {m.id} is dense (no routed experts); pick an MoE model")
        o["model"] = m.id
        o["experts"] = opts.get("experts") or m.n_experts
        o["top_k"] = opts.get("top_k") or m.top_k
    skew = opts.get("skew")
    if skew is not None:
        o["skew"] = float(skew)
    runs = {}
    for bal in ("none", "aux", "zloss", "bias"):
        runs[bal] = simulate(RouterConfig(experts=o["experts"], top_k=o["top_k"], balance=bal,
                                          steps=o["steps"], tokens_per_step=o["tokens"],
                                          seed=o["seed"], skew=o.get("skew")))
    none, aux, bias = runs["none"], runs["aux"], runs["bias"]
    x = none.extra
    h0 = none.history[0]
    mix = (f"topic mix Zipf s = {o['skew']:g}" if "skew" in o
           else "topic mix a Dirichlet draw")
    s1 = Section(
        "1. The collapse spiral, simulated",
        text=("A router that is trained only by the task loss moves tokens toward the experts "
              "that are already most useful; those experts get more tokens, learn faster and "
              "become more useful still (Shazeer et al. 2017). Below: the same clustered token "
              f"stream and router ({o['experts']} experts, top-{o['top_k']}"
              + (f", as {o['model']}" if "model" in o else "") + f", {mix}), four ways, each "
              "trained with Adam. Load is time-averaged over the last "
              f"{x['window_steps']} steps; the sampling floor is what a perfectly uniform router "
              "shows from finite token draws alone (max/mean of multinomial loads), so balance "
              "is judged against it, not against 1. Router logit size is the mean logsumexp of "
              "the logits, the quantity the z-loss squares."),
        tables=(Table(f"last {x['window_steps']} steps", (
            "balancing", "router", f"max/mean ({x['window_steps']}-step load)",
            "max/mean per step", f"dropped at cf {none.config['capacity_factor']:g}",
            "experts used", "router logit size (lse)"),
            tuple((b, r.config["score"], r.max_over_mean_load,
                   r.extra["max_over_mean_load_per_step"], f"{r.dropped_fraction:.2%}",
                   r.experts_used, r.extra["router_logit_lse_mean"])
                  for b, r in runs.items())),),
        headlines=(Headline(f"sampling floor, {x['window_steps']}-step load",
                            x["sampling_floor"]),
                   Headline("sampling floor, one step", x["sampling_floor_per_step"]),
                   Headline("no balancing: max/mean at step 0 -> last window",
                            f"{h0['max_over_mean_load']:.2f} -> {none.max_over_mean_load:.2f}")),
    )
    s2 = Section(
        "2. Capacity factor: drops vs padding (auxiliary-loss router)",
        text=("Capacity = cf x tokens x k / E slots per expert. Tokens beyond it are dropped "
              "(they skip the layer through the residual); unused slots are padding that is "
              "computed and thrown away."),
        tables=(Table("", ("capacity factor", "dropped", "padding"),
                      tuple((c["capacity_factor"], c["dropped_fraction"], c["padding_fraction"])
                            for c in aux.capacity_sweep)),),
    )
    s3 = Section(
        "3. Serving: nothing may be dropped",
        text=("At serving time every token must reach its experts, so capacity is whatever the "
              "busiest expert needs, and small batches are imbalanced by chance alone. Traffic "
              "mixes differ by region, so a router balanced on the training mix is not balanced "
              "on one region's traffic."),
        tables=(Table("bias-balanced router: imbalance vs batch", ("tokens", "max/mean mean",
                                                                    "max/mean p99"),
                      tuple((b["batch_tokens"], b["max_over_mean_load_mean"],
                             b["max_over_mean_load_p99"]) for b in bias.batch_sweep)),
                Table("bias-balanced router: per-region mix", ("region", "max/mean"),
                      tuple((r["region"], r["max_over_mean_load"]) for r in bias.region_mix))),
    )
    cf1 = min(aux.capacity_sweep, key=lambda c: abs(c["capacity_factor"] - 1.0))
    followups = (
        ("Does the z-loss balance load by itself?",
         f"No: it penalises the size of the router logits (stability). Here it brings the mean "
         f"logsumexp from {aux.extra['router_logit_lse_mean']:.2f} (aux alone) to "
         f"{runs['zloss'].extra['router_logit_lse_mean']:.2f}, and max/mean goes from "
         f"{aux.max_over_mean_load:.2f} to {runs['zloss'].max_over_mean_load:.2f}: in this toy "
         "a small logsumexp is also reached by sharp routing, which the z-loss does not "
         "penalise and the aux loss's gradient cannot undo (docs/moe.md). "
         "`scalemodel moe route --balance zloss --aux-coef 0` shows it alone."),
        ("Why did DeepSeek-V3 drop the auxiliary loss?",
         "The aux loss trades task quality for balance through the gradient; a selection-only "
         f"bias does not touch the gradient. Here it ends at {bias.max_over_mean_load:.2f} "
         f"max/mean over {x['window_steps']} steps (floor {bias.extra['sampling_floor']:.2f}), "
         f"with gamma = {bias.config['gamma']:g} per step as in V3."),
        (f"What does capacity factor {cf1['capacity_factor']:g} cost with the aux-loss router?",
         f"{cf1['dropped_fraction']:.1%} of routed copies dropped, {cf1['padding_fraction']:.1%} "
         "padding."),
        ("What changes between training and serving?",
         "No drops and no balancing loss: imbalance goes into latency (the busiest expert sets "
         "the step), handled by redundant experts and placement (scalemodel moe place)."),
        ("How does batch size change imbalance?",
         f"From {bias.batch_sweep[0]['max_over_mean_load_mean']:.1f}x at 1 token to "
         f"{bias.batch_sweep[-1]['max_over_mean_load_mean']:.2f}x at "
         f"{bias.batch_sweep[-1]['batch_tokens']:,} tokens (sampling noise averages out)."),
    )
    assumptions = (
        "Synthetic clustered tokens; experts' usefulness follows a learning curve in the tokens "
        "they processed (the mechanism of collapse). The task gradient's weight is a toy "
        "choice, set so that Switch's alpha balances this router: near-uniform load at alpha = "
        "0.01 is a calibration, while collapse without balancing, the ordering over alpha and "
        "the bias method's result are outcomes.",
        "The router trains with Adam (DeepSeek-V3's AdamW betas 0.9 / 0.95, no weight decay): "
        "every weight moves by about the step size whatever its gradient's scale, so a "
        "stronger balancing term cannot overshoot.",
        "Coefficients as published: "
        + "; ".join(f"{sym} = {router_constant(key):g} ({router_citation(key)})"
                    for sym, key in (("Switch alpha", "aux_coef"), ("ST-MoE c_z", "z_coef"),
                                     ("DeepSeek-V3 gamma", "gamma"))) + ".",
        "The toy model's own constants (task gain, learning-curve scale tau, shared learning, "
        "decay, noise, centre radius, traffic mixes) are assumptions listed with what each "
        "controls in moe.toml [router.*].",
    )
    data = {"question": "moe-routing", "options": o,
            "runs": {b: {k: v for k, v in r.to_dict().items() if k != "history"}
                     for b, r in runs.items()}}
    return Report("moe-routing", (s1, s2, s3), data, question=PROMPT, assumptions=assumptions,
                  followups=followups)
