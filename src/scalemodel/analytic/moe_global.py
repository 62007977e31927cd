"""Global MoE serving: regions with user shares and RTTs, regional expert skew, where to replicate
experts, when a cross-region hop breaks the SLA, and what a 'global KV cache' can mean in bytes.

* Regional skew: each region's expert popularity per layer is a mix of a shared Zipf law and a
  region-specific permutation of it (weight ``mix``). A placement balanced for the global mix is
  evaluated on each region's traffic, and against a placement balanced for that region.
* Cross-region expert hop: a token whose expert lives in another region pays one RTT per MoE
  layer it crosses; the largest RTT the TPOT budget allows is (T_tpot - t_step) / L_moe.
* KV across regions: moving a cached prefix of n tokens costs RTT + n b / B_wan (b = KV bytes
  per token, MLA or GQA); recomputing it costs n / X_prefill. Fetch wins when
  n > RTT / (1 / X_prefill - b / B_wan), and never when b / B_wan >= 1 / X_prefill.
  Replicating a prefix to every region costs its bytes once per region; session affinity costs
  one RTT to the home region per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput
from ..specs import ModelSpec
from .kv import model_kv_bytes_per_token
from .moe_placement import _global_plan, _gpu_loads, lower_bound


@dataclass(frozen=True)
class Regions:
    names: tuple[str, ...]
    shares: np.ndarray
    rtt_s: np.ndarray
    wan_bytes_per_s: float
    mix: float
    source: str = ""

    def check(self) -> None:
        from .moe_data import check_limit

        n = len(self.names)
        if n < 1:
            raise BadInput("regions: at least one region is needed")
        check_limit("regions: number of regions", n, "global_regions")
        if self.shares.shape != (n,) or (self.shares < 0).any() or self.shares.sum() <= 0:
            raise BadInput(f"regions: shares needs {n} non-negative numbers with a positive sum")
        if self.rtt_s.shape != (n, n) or (self.rtt_s < 0).any():
            raise BadInput(f"regions: rtt_s must be a {n} x {n} matrix of non-negative seconds")
        if self.wan_bytes_per_s <= 0:
            raise BadInput("regions: wan_bytes_per_s must be positive")
        if not 0 <= self.mix <= 1:
            raise BadInput("regions: regional_skew_mix must be in [0, 1]")


def regions_from_table(t: dict[str, Any], where: str = "regions") -> Regions:
    try:
        r = Regions(tuple(str(x) for x in t["regions"]), np.asarray(t["shares"], dtype=float),
                    np.asarray(t["rtt_s"], dtype=float), float(t["wan_bytes_per_s"]),
                    float(t.get("regional_skew_mix", 0.5)), str(t.get("source", where)))
    except (KeyError, TypeError, ValueError) as e:
        raise BadInput(f"{where}: needs regions, shares, rtt_s and wan_bytes_per_s ({e})") from None
    r.check()
    return r


def default_regions() -> Regions:
    from ..specs.sources import load_toml

    return regions_from_table(load_toml("moe.toml")["global"], "moe.toml [global]")


def regional_popularity(E: int, s: float, regs: Regions, seed: int = 0) -> np.ndarray:
    """(regions x experts) popularity of one layer: shared Zipf + region-specific permutation."""
    rng = np.random.default_rng(seed)
    z = np.arange(1, E + 1, dtype=np.float64) ** -s
    z /= z.sum()
    shared = z[rng.permutation(E)]
    out = np.stack([(1 - regs.mix) * shared + regs.mix * z[rng.permutation(E)]
                    for _ in regs.names])
    return out


def expert_placement_by_region(E: int, s: float, regs: Regions, slots: int, gpus: int,
                               seed: int = 0) -> list[dict[str, Any]]:
    """Per region: imbalance of its traffic on the globally balanced placement vs on a placement
    balanced for the region itself, and the bound."""
    from .moe_data import check_limit

    if E < 1:
        raise BadInput(f"experts: the model needs routed experts, got {E}")
    check_limit("--slots", slots, "global_slots")
    if slots < E:
        raise BadInput(f"--slots: {slots} physical slots is fewer than the model's {E} experts")
    if gpus > slots or slots % gpus:
        raise BadInput(f"--slots: {slots} is not divisible by --gpus {gpus}; each GPU must hold "
                       "the same number of slots")
    pop = regional_popularity(E, s, regs, seed)
    glob = (regs.shares[:, None] * pop).sum(axis=0) / regs.shares.sum()
    gplan = _global_plan(glob, slots, gpus)
    rows = []
    for name, p in zip(regs.names, pop, strict=True):
        mean = p.sum() / gpus
        rplan = _global_plan(p, slots, gpus)
        rows.append({"region": name,
                     "imbalance_global_placement": float(_gpu_loads(p, gplan, gpus).max() / mean),
                     "imbalance_regional_placement": float(_gpu_loads(p, rplan, gpus).max() / mean),
                     "lower_bound": lower_bound(p, slots, gpus),
                     "hottest_expert_share": float(p.max())})
    return rows


def kv_transfer(m: ModelSpec, *, prefix_tokens: np.ndarray, rtt_s: float, wan_bytes_per_s: float,
                prefill_tokens_per_s: float, kv_dtype: str = "bf16") -> dict[str, Any]:
    """Fetch vs recompute for cached prefixes of the given lengths (vectorised)."""
    b = model_kv_bytes_per_token(m, kv_dtype)
    n = np.asarray(prefix_tokens, dtype=np.float64)
    fetch = rtt_s + n * b / wan_bytes_per_s
    recompute = n / prefill_tokens_per_s
    per_tok = 1 / prefill_tokens_per_s - b / wan_bytes_per_s
    breakeven = rtt_s / per_tok if per_tok > 0 else float("inf")
    return {"kv_bytes_per_token": b, "prefix_tokens": n.tolist(), "prefix_bytes": (n * b).tolist(),
            "fetch_s": fetch.tolist(), "recompute_s": recompute.tolist(),
            "breakeven_prefix_tokens": breakeven,
            "wan_bytes_per_s_needed_to_beat_recompute": b * prefill_tokens_per_s}


def max_rtt_for_expert_hop(tpot_s: float, step_s: float, moe_layers: int) -> float:
    """Largest RTT a per-layer cross-region expert hop may have within the TPOT budget."""
    return max(0.0, (tpot_s - step_s) / moe_layers)
