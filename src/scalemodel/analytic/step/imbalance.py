"""The EP straggler: in dropless expert parallelism every MoE layer's all-to-all is a
synchronisation point, so a layer lasts as long as the EP rank that received the most routed
copies (its expert GEMMs and its share of the dispatch and combine bytes), not the mean.

The slowest rank's load is the mean x (1 + v). What v is depends on how the run routes
(frameworks.toml ``moe_routing``):

* ``force_balanced``: Megatron-Core's ``moe_router_force_load_balancing``, which every
  Megatron-Bridge performance benchmark sets (its performance summary: the token distribution
  among experts force-balanced, every benchmark dropless). The router replaces the gating logits
  by random normal ones (``moe_utils.apply_random_logits``, RandomSTE) before the ordinary top-k
  (and group-limited) selection, so each token's experts are a random draw independent of every
  other token's. v is then the sampling spread of the copies a rank receives, derived below
  (:func:`rank_violation`); no measured constant enters.
* ``learned`` (the default): the trained router with the model's own balancing (Qwen3's
  global-batch balancing loss, DeepSeek-V3's bias balancing). No measurement of the per-micro-
  batch, per-EP-rank violation of those methods was found that could be read at its source
  (docs/planner.md "EP straggler from expert load imbalance"), so v = 0 (no imbalance) there.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .config import profile_value


@cache
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals], by numerical integration of
    x n phi(x) Phi(x)^(n-1) over x (0 for n = 1)."""
    if n <= 1:
        return 0.0
    from math import erf

    x = np.linspace(-10.0, 10.0, 40001)
    phi = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    Phi = 0.5 * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))
    f = x * n * phi * Phi ** (n - 1)
    return float(np.sum(f) * (x[1] - x[0]))


def rank_violation(n_experts: float, top_k: float, ep: float, tokens: float,
                   groups: float = 0.0, groups_per_token: float = 0.0) -> float:
    """v = E[max over the ep ranks of the copies a rank receives] / mean - 1 for one MoE layer
    and micro-batch when every token's top_k experts are a random draw (force-balanced routing),
    ``tokens`` tokens routed by the whole EP group (after the expert-TP gather).

    Derivation. A rank holds n = E / ep experts. For one token let X be how many of its k
    distinct experts are on a given rank: E[X] = k / ep, and E[X^2] = E[X] + n (n - 1) P2 with
    P2 the chance that two given experts of that rank are both picked. Plain top-k draws k of E
    without replacement: P2 = k (k - 1) / (E (E - 1)). Group-limited routing (``groups`` G
    groups, a token's experts in ``groups_per_token`` g of them) where a rank's experts lie in one
    group: the group is picked with chance g / G and, taking the k experts as a uniform draw from
    the g E / G experts of the picked groups (an assumption: under random logits a picked group
    holds larger values, which this does not model), P2 = (g / G) k (k - 1) / (M (M - 1)),
    M = g E / G. Tokens route independently (random logits per token), so the rank's copies R
    over the N tokens have mean N E[X] and variance N Var(X), and are close to normal at the
    thousands of tokens of a micro-batch (the normal approximation). The ep ranks' loads are
    exchangeable and sum to exactly k N, so jointly they are ep independent normals less their
    mean, each of variance N Var(X) ep / (ep - 1); the maximum of such a vector exceeds the mean
    by z_ep sd on average, z_ep the expected maximum of ep independent standard normals:
    v = z_ep sqrt(Var(X) / N ep / (ep - 1)) / E[X]."""
    E, k, ep, N = float(n_experts), float(top_k), float(ep), float(tokens)
    if ep <= 1 or N <= 0 or k <= 0 or k >= E:
        return 0.0
    n = E / ep
    ex = k / ep
    G, g = float(groups), float(groups_per_token)
    if G and 0 < g < G and n <= E / G and (E / G) % n == 0:
        M = g * E / G
        p2 = (g / G) * k * (k - 1) / (M * (M - 1))
    else:
        p2 = k * (k - 1) / (E * (E - 1))
    var = ex + n * (n - 1) * p2 - ex * ex
    sd = float(np.sqrt(max(var, 0.0) / N * ep / (ep - 1)))
    return expected_max_normal(int(round(ep))) * sd / ex


def ep_straggler(c: Any) -> Any:
    """v per candidate (:func:`rank_violation`) for the run's routing (frameworks.toml
    ``moe_routing``; absent: learned, v = 0). The tokens of one layer and micro-batch that reach
    an EP group's experts are those the step model's experts process: each of the ep ranks routes
    T / tp tokens and the expert-TP gather brings etp of them together (layers.moe_layer),
    N = ep etp T / tp."""
    m = c.m
    ep = np.asarray(c.ep, dtype=np.float64)
    if not m.is_moe or profile_value(c.job, "moe_routing", "learned") != "force_balanced":
        return np.zeros_like(ep)
    N = np.broadcast_to(c.ep * c.etp * c.T / c.tp, ep.shape)
    out = np.array([rank_violation(m.n_experts, m.top_k, e, n, m.expert_groups,
                                   m.groups_per_token)
                    for e, n in zip(ep.ravel(), np.asarray(N, dtype=np.float64).ravel(),
                                   strict=True)])
    return out.reshape(ep.shape) if ep.ndim else float(out[0])
