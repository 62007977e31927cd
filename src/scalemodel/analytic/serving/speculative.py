"""Speculative decoding in the one iteration / scheduler model.

A drafter proposes k tokens per sequence; the target model then verifies them in one forward
pass over the k + 1 positions (the k drafts and the token sampled last step) and keeps the
longest accepted prefix plus one token of its own (the correction at the first rejection, or a
bonus token when all k are accepted).

Assumption (stated, not measured here): each draft token is accepted with the same probability
alpha, independently of the others (Leviathan, Kalman and Matias, "Fast Inference from
Transformers via Speculative Decoding", ICML 2023, section 3.1, the i.i.d. acceptance under
which their expected number of tokens per run of the target is derived). The tokens a verify
step emits are then 1 + X with X truncated geometric on 0..k, and

    E = sum_{i=0..k} alpha^i = (1 - alpha^(k+1)) / (1 - alpha)      (alpha < 1)

(E = 1 at alpha = 0; E -> k + 1 as alpha -> 1). Engines report this E as the "acceptance
length" (TensorRT-LLM, SGLang's accept length, vLLM's mean acceptance length): a user who
states a measured acceptance length gives E directly and alpha follows from E by inverting the
sum (monotone in alpha).

What a verify step costs (iteration.py prices it):

* the target runs (k + 1) tokens per decoding sequence through every GEMM, elementwise kernel,
  collective and the output head (the head samples all k + 1 positions);
* decode attention reads each sequence's KV once for its k + 1 query tokens: per context token
  max(KV read, (k + 1) x its FLOPs);
* the KV cache grows by the tokens emitted (the rejected drafts' slots are rolled back), and
  the scheduler holds blocks for the k + 1 positions written;
* the drafter, k sequential passes each at one token per sequence:
  - ``mtp``: DeepSeek-V3's multi-token-prediction module (technical report section 2.2): per
    draft token one projection of the concatenated [hidden; embedding] (2h -> h), one
    transformer layer of the main model's form (an MoE layer for DeepSeek-V3) with its own KV,
    and the shared output head; the model config's num_nextn_predict_layers modules are
    reused in turn where k exceeds them (TensorRT-LLM's MTP runs one module k times);
  - ``eagle``: an EAGLE head (Li et al. 2024): one dense decoder layer of the target's width
    over the fused (2h -> h) features, with its own KV, and the target's output head;
  - ``model``: a separate draft model, k decode steps of it at the same layout and precision
    (its weights and KV are not taken from the KV pool here: not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import BadInput

DRAFTERS = ("mtp", "eagle", "model")


def expected_tokens(k: int, alpha: float) -> float:
    """Tokens one verify step emits per sequence under i.i.d. acceptance alpha of k drafts."""
    check(k, alpha)
    if alpha == 0.0:
        return 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_from_length(k: int, length: float) -> float:
    """The per-token acceptance alpha whose expected tokens per step is ``length`` (a stated
    acceptance length, 1 <= length < k + 1): the inverse of :func:`expected_tokens`."""
    if k < 1:
        raise BadInput(f"--spec k={k}: an acceptance length needs k >= 1 draft tokens")
    if not (length == length) or not 1.0 <= length < k + 1:
        raise BadInput(f"--spec al={length}: an acceptance length must lie in [1, k + 1 = "
                       f"{k + 1}) tokens per step")
    lo, hi = 0.0, 1.0
    for _ in range(80):  # E is increasing in alpha
        mid = 0.5 * (lo + hi)
        if (1.0 - mid ** (k + 1)) / (1.0 - mid) < length:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def check(k: int, alpha: float) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise BadInput(f"--spec k={k}: draft tokens per step must be a whole number >= 0")
    if not (alpha == alpha) or not 0.0 <= alpha < 1.0:
        raise BadInput(f"--spec alpha={alpha}: the per-token acceptance rate must lie in [0, 1)")


@dataclass(frozen=True)
class Speculation:
    """k draft tokens per verify step, each accepted with probability alpha (i.i.d.), drafted by
    ``drafter`` (DRAFTERS); ``draft_model``: the draft model's id for drafter "model"."""

    k: int
    alpha: float
    drafter: str = "mtp"
    draft_model: str = ""

    def __post_init__(self) -> None:
        check(self.k, self.alpha)
        if self.drafter not in DRAFTERS:
            raise BadInput(f"--spec draft={self.drafter!r} is not one of {', '.join(DRAFTERS)}")
        if (self.drafter == "model") != bool(self.draft_model):
            raise BadInput("--spec: draft=model needs model=ID (the draft model), and model= "
                           "goes with draft=model only")

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens(self.k, self.alpha)

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "alpha": self.alpha, "drafter": self.drafter,
                "draft_model": self.draft_model or None,
                "tokens_per_step": self.tokens_per_step}


def parse(text: str) -> Speculation:
    """``k=3,alpha=0.7[,draft=mtp|eagle|model][,model=ID]`` or ``k=3,al=2.6,...`` (a stated
    acceptance length in place of alpha); one line on anything else."""
    kv: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, eq, val = part.partition("=")
        if not eq or key.strip() not in ("k", "alpha", "al", "draft", "model"):
            raise BadInput(f"--spec: {part!r} is not k=N, alpha=A, al=L, draft=mtp|eagle|model "
                           "or model=ID")
        kv[key.strip()] = val.strip()
    if "k" not in kv or ("alpha" in kv) == ("al" in kv):
        raise BadInput("--spec needs k=N and one of alpha=A (per-token acceptance) or al=L "
                       "(acceptance length, tokens per step)")
    try:
        k = int(kv["k"])
    except ValueError:
        raise BadInput(f"--spec k={kv['k']!r}: draft tokens per step must be a whole number "
                       ">= 0") from None
    raw = kv.get("alpha", kv.get("al", ""))
    try:
        x = float(raw)
    except ValueError:
        raise BadInput(f"--spec: {raw!r} is not a number") from None
    a = x if "alpha" in kv else alpha_from_length(k, x)
    return Speculation(k, a, kv.get("draft", "mtp"), kv.get("model", ""))


def model_check(m: Any, spec: Speculation) -> None:
    """One line where the target model cannot take this drafter: MTP needs the config's
    multi-token-prediction modules (num_nextn_predict_layers > 0); a draft model must be one
    the specs know and share the target's vocabulary."""
    if spec.drafter == "mtp" and spec.k > 0 and not getattr(m, "mtp_layers", 0):
        raise BadInput(f"--spec draft=mtp: {m.id}'s config has no multi-token-prediction "
                       "module (num_nextn_predict_layers = 0); use draft=eagle or draft=model")
    if spec.drafter == "model" and spec.k > 0:
        # here, before the search: inside it a candidate's BadInput only drops that candidate,
        # and every candidate would go the same way ("no layout fits in memory")
        from ...specs import get_model

        try:
            d = get_model(spec.draft_model)
        except BadInput as e:
            raise BadInput(f"--spec model={spec.draft_model}: "
                           f"{str(e).removeprefix('--model: ')}") from None
        if d.vocab != m.vocab:
            raise BadInput(f"--spec model={d.id}: its vocabulary ({d.vocab:,}) is not {m.id}'s "
                           f"({m.vocab:,}); a draft model must share the target's tokenizer")


def engine_check(eng: Any, spec: Speculation) -> None:
    """One line where the engine profile does not run this drafter (frameworks.toml
    ``speculative``: the drafters the engine's source has)."""
    have = list((getattr(eng, "speculative", None) or {}).get("drafters", []))
    if spec.drafter not in have:
        raise BadInput(f"--spec draft={spec.drafter}: {eng.id} runs "
                       + (f"only {', '.join(have)}" if have else "no speculative decoding")
                       + " (frameworks.toml speculative)")
