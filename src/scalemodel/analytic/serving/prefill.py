"""Computed prefill rates: input tokens per second per node that the serving engine's prefill
iterations reach (no prefix-cache hits: every prompt token is computed), for the questions
that price recomputing a prompt against fetching its KV."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BadInput
from ...specs import GPUSpec, ModelSpec


@dataclass(frozen=True)
class PrefillRate:
    model: str
    gpu: str
    tokens_per_s_per_node: float
    layout: dict[str, int]
    nodes: int
    precision: str
    engine: str
    prompt_tokens: int
    bound: str


def prefill_rate(m: ModelSpec, gpu: GPUSpec, *, prompt_tokens: int = 4096,
                 gpus_per_node: int = 8, engine: str = "sglang", requests: int = 64
                 ) -> PrefillRate:
    """The best prefill-only deployment on the fewest whole nodes that hold the model: every
    TP x PP x DP split of those nodes (EP over the TP ranks for an MoE model) simulated with
    ``requests`` prompts of ``prompt_tokens`` queued at once and one output token each."""
    from .engine import get_serving_engine
    from .iteration import ServeLayout, precision
    from .service import evaluate
    from .streams import Stream

    eng = get_serving_engine(engine)
    prec = precision("fp8" if "fp8" in gpu.flop_per_s else "bf16")
    kv = eng.default_kv_dtype(prec)
    for nodes in (1, 2, 4, 8):
        n = nodes * gpus_per_node
        best = None
        for tp in (gpus_per_node, gpus_per_node // 2, gpus_per_node // 4, 1):
            if tp < 1 or m.n_heads % tp or n % tp:
                continue
            for pp in (1, 2, 4, 8):
                if n % (tp * pp):
                    continue
                ep = tp if m.is_moe and m.n_experts % tp == 0 else 1
                lay = ServeLayout(tp, pp, ep, n // (tp * pp))
                try:
                    r = evaluate(m, gpu, lay, prec, kv, eng, Stream("max-load", requests),
                                 prompt_tokens, 1)
                except BadInput:
                    continue
                rate = (r.total_tokens_per_s - r.output_tokens_per_s) / nodes
                if best is None or rate > best.tokens_per_s_per_node:
                    best = PrefillRate(m.id, gpu.id, rate, lay.to_dict(), nodes, prec.name,
                                       eng.id, prompt_tokens, r.bounds["prefill"])
        if best is not None:
            return best
    raise BadInput(f"{m.id} does not fit on up to 8 nodes of {gpus_per_node} x {gpu.id} for a "
                   "prefill rate")
