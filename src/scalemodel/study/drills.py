"""Drills: a question's scenario with random but realistic parameters, graded by the engine.

A drill has a prompt, the parameters drawn, the expected answer in the unit the person types
(``unit``), a relative ``tolerance``, the engine's derivation of the answer, and the CLI command
that prints the full worked answer. Drills are deterministic in ``seed``.

Every question of the bank has a drill: kv-cache, training-memory, roofline and resume-walk
here, the others in ``drill_bank``. A question module can replace its drill by defining
``drill(rng: random.Random) -> Drill``; it is found automatically.

A drill also lists classic mistakes (:class:`Mistake`: a name and the number it produces, such as
K without V, or GiB for GB); generic ones follow from the unit (GiB for GB, bits for bytes, a
percentage typed as a fraction, a factor of two). A wrong answer within the tolerance of one of
them is graded wrong with that mistake named.
"""

from __future__ import annotations

import importlib
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..derive import Derivation
from ..errors import BadInput, close_matches


@dataclass(frozen=True)
class Mistake:
    """A classic wrong way to the answer and the number it gives."""

    name: str
    value: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value}


@dataclass(frozen=True)
class Drill:
    topic: str
    prompt: str
    parameters: dict[str, Any]
    answer: float
    unit: str
    tolerance: float  # relative: |typed - answer| <= tolerance * |answer|
    derivation: Derivation
    command: tuple[str, ...]  # argv of the CLI command with the full worked answer
    seed: int = 0
    mistakes: tuple[Mistake, ...] = ()  # drill-specific; generic ones come from the unit

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "seed": self.seed, "prompt": self.prompt,
                "parameters": self.parameters, "answer": self.answer, "unit": self.unit,
                "tolerance": self.tolerance, "tolerance_kind": "relative",
                "command": "scalemodel " + " ".join(self.command),
                "mistakes": [m.to_dict() for m in all_mistakes(self)],
                "derivation": self.derivation.to_dict()}


@dataclass(frozen=True)
class Grade:
    typed: float
    correct: bool
    relative_error: float
    diagnosis: str | None = None  # the classic mistake a wrong answer matches, if any

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


_BYTE_UNITS = {"GB": 2**30 / 1e9, "MB": 2**20 / 1e6, "KB": 2**10 / 1e3, "GB/s": 2**30 / 1e9}


def generic_mistakes(answer: float, unit: str) -> list[Mistake]:
    """Mistakes any drill in ``unit`` can show: binary for decimal units, bits for bytes, a
    percentage typed as a fraction, a factor of two."""
    out = []
    if unit in _BYTE_UNITS:
        binary = unit.replace("B", "iB", 1)
        out.append(Mistake(f"{binary} for {unit} (2^30 vs 1e9)", answer / _BYTE_UNITS[unit]))
        out.append(Mistake("bits for bytes", 8 * answer))
    if unit == "%":
        out.append(Mistake("a percentage given as a fraction", answer / 100))
    out.append(Mistake("off by a factor of 2 (too large)", 2 * answer))
    out.append(Mistake("off by a factor of 2 (too small)", answer / 2))
    return out


def _close(a: float, b: float, tol: float) -> bool:
    if tol == 0:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return abs(a - b) <= tol * abs(b) if b else abs(a) <= tol


def all_mistakes(d: Drill) -> list[Mistake]:
    """The drill's own mistakes, then the generic ones; none that equals the right answer."""
    return [m for m in (*d.mistakes, *generic_mistakes(d.answer, d.unit))
            if not _close(m.value, d.answer, d.tolerance)]


def diagnose(d: Drill, typed: float) -> str | None:
    """The first classic mistake whose number the typed answer matches (within tolerance)."""
    for m in all_mistakes(d):
        if _close(typed, m.value, max(d.tolerance, 0.01) if d.tolerance else 0.0):
            return m.name
    return None


_SCALED_UNITS = {"GB": 1e9, "MB": 1e6, "TB": 1e12, "GiB": 2**30}


def parse_typed(text: str, unit: str) -> float:
    """The number a person typed; a trailing unit equal to the drill's unit (or %) is allowed."""
    t = str(text).strip().replace(",", "").replace("_", "")
    if len(t) > 40:
        raise BadInput("answer: too long; type a number")
    m = re.fullmatch(r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z%/]*)", t)
    if not m:
        raise BadInput(f"answer: cannot read {text!r}; type a number in {unit}")
    v = float(m.group(1))
    suffix = m.group(2)
    if suffix and suffix.lower() != unit.lower():
        if suffix in _SCALED_UNITS and unit in _SCALED_UNITS:
            v = v * _SCALED_UNITS[suffix] / _SCALED_UNITS[unit]
        else:
            raise BadInput(f"answer: the drill asks for {unit}, got {suffix!r}")
    if not math.isfinite(v):
        raise BadInput("answer: must be a finite number")
    return v


def grade(d: Drill, text: str) -> Grade:
    v = parse_typed(text, d.unit)
    err = abs(v - d.answer) / abs(d.answer) if d.answer else abs(v)
    ok = _close(v, d.answer, d.tolerance)
    return Grade(v, ok, err, None if ok else diagnose(d, v))


# --- the built-in drills ------------------------------------------------------------------------


def _kv(rng: random.Random) -> Drill:
    from ..analytic.kv import kv_report
    from ..specs import get_model, model_ids

    mid = rng.choice(model_ids())
    m = get_model(mid)
    ctxs = [c for c in (2048, 4096, 8192, 16384, 32768, 131072) if c <= m.max_context] or [2048]
    ctx = rng.choice(ctxs)
    batch = rng.choice((1, 4, 8, 16, 32, 64))
    kvd = rng.choice(("bf16", "bf16", "fp8"))
    r = kv_report(m, context=ctx, batch=batch, kv_dtype=kvd)
    total = r.kv_bytes_total / 1e9
    e = 1 if kvd == "fp8" else 2
    if m.attention == "mla":
        shape = (f"{m.n_layers} layers, MLA: per layer and token one compressed latent of "
                 f"{m.kv_lora_rank} plus a decoupled RoPE key of {m.qk_rope_head_dim}, shared by "
                 f"all {m.n_heads} heads")
        per_head = 2 * m.n_layers * m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) * e
        mistakes = (Mistake("per-head K and V (MLA caches the latent, not the heads)",
                            per_head * ctx * batch / 1e9),
                    Mistake("the latent without the RoPE key",
                            total * m.kv_lora_rank / (m.kv_lora_rank + m.qk_rope_head_dim)))
    else:
        shape = f"{m.n_layers} layers, {m.n_kv_heads} K/V heads, head dim {m.head_dim}"
        mistakes = (Mistake("K without V", total / 2),
                    Mistake("all query heads (no GQA sharing)", total * m.n_heads / m.n_kv_heads),
                    Mistake("one sequence, not the batch", total / batch))
    prompt = (f"{mid}: {shape}. How many GB (1e9 bytes) does the KV cache of {batch} sequences "
              f"of {ctx:,} tokens take in {kvd}?")
    argv = ("kv", "--model", mid, "--context", str(ctx), "--batch", str(batch), "--kv-dtype", kvd)
    return Drill("kv-cache", prompt, {"model": mid, "context": ctx, "batch": batch, "kv_dtype": kvd},
                 total, "GB", 0.05, r.derivation, argv, mistakes=mistakes)


def _training_memory(rng: random.Random) -> Drill:
    from ..analytic.layout import TrainLayout
    from ..analytic.memory import memory_report
    from ..analytic.params import count_params
    from ..specs import get_model

    mid = rng.choice(("llama-2-7b", "llama-3-8b", "mistral-7b", "llama-2-13b", "llama-3-70b"))
    m = get_model(mid)
    dp = rng.choice((8, 16, 32, 64, 128))
    zero = rng.choice((0, 1, 2))
    opt = rng.choice(("adam", "adam", "adam-8bit"))
    r = memory_report(m, TrainLayout(dp=dp, zero=zero), optimizer_id=opt)
    states = r.breakdown["params"] + r.breakdown["grads"] + r.breakdown["optimizer"]
    p = count_params(m).total
    prompt = (f"{mid} ({p / 1e9:.2f}B parameters), bf16 weights and gradients, optimizer {opt}, "
              f"data parallel over {dp} GPUs with ZeRO-{zero}, no TP or PP. How many GB per GPU "
              "do weights, gradients and optimizer states take together (activations excluded)?")
    argv = ("memory", "--model", mid, "--dp", str(dp), "--zero", str(zero), "--optimizer", opt)
    flat = memory_report(m, TrainLayout(dp=1, zero=0), optimizer_id=opt).breakdown
    unsharded = flat["params"] + flat["grads"] + flat["optimizer"]
    return Drill("training-memory", prompt,
                 {"model": mid, "params": p, "dp": dp, "zero": zero, "optimizer": opt},
                 states / 1e9, "GB", 0.05, r.derivation, argv,
                 mistakes=(Mistake("ignored the ZeRO sharding", unsharded / 1e9),
                           Mistake("weights only (2 bytes per parameter)", 2 * p / 1e9),
                           Mistake("total over all GPUs, not per GPU", dp * states / 1e9)))


def _roofline(rng: random.Random) -> Drill:
    from ..analytic import roofline as rl
    from ..specs import get_gpu, gpu_ids

    gid = rng.choice(gpu_ids())
    gpu = get_gpu(gid)
    if rng.random() < 0.5:
        d = Derivation(f"Ridge point of {gid} (bf16)")
        d.given(f"{gpu.name} dense bf16 peak", "pi", gpu.peak_flop_per_s("bf16"), "FLOP/s",
                gpu.source_of("flop_per_s.bf16"))
        d.given(f"{gpu.name} HBM bandwidth", "beta", gpu.hbm_bytes_per_s, "B/s",
                gpu.source_of("hbm_bytes_per_s"))
        ridge = d.calc("ridge point", "I_r", "pi / beta", "FLOP/B")
        prompt = (f"{gpu.name}: dense bf16 peak {gpu.peak_flop_per_s('bf16') / 1e12:,.1f} TFLOP/s, "
                  f"HBM {gpu.hbm_bytes_per_s / 1e12:.2f} TB/s. Where is the ridge point, in FLOP "
                  "per byte?")
        return Drill("roofline", prompt, {"gpu": gid, "dtype": "bf16"}, ridge, "FLOP/B", 0.05, d,
                     ("roofline", "--gpu", gid),
                     mistakes=(Mistake("the sparse (2:4) peak, not the dense one", 2 * ridge),))
    M = rng.choice((1, 8, 64, 512, 4096))
    N = K = rng.choice((4096, 8192))
    pt = rl.gemm(gpu, M, N, K, "bf16")
    prompt = (f"A bf16 GEMM ({M} x {K}) @ ({K} x {N}), each operand read or written once. What is "
              "its arithmetic intensity, in FLOP per byte?")
    one_byte = pt.arithmetic_intensity * 2
    return Drill("roofline", prompt, {"M": M, "N": N, "K": K, "dtype": "bf16", "gpu": gid},
                 pt.arithmetic_intensity, "FLOP/B", 0.05, pt.derivation,
                 ("roofline", "--gpu", gid, "--gemm", f"{M},{N},{K}"),
                 mistakes=(Mistake("one byte per element where bf16 takes two", one_byte),
                           Mistake("M N K FLOPs: a multiply-add counted as one FLOP",
                                   pt.arithmetic_intensity / 2)))


def _claim(topic: str) -> Callable[[random.Random], Drill]:
    def make(rng: random.Random) -> Drill:
        from ..analytic.claims import Claim, check_claim
        from ..specs import get_gpu

        mid = rng.choice(("llama-3-8b", "llama-2-13b", "llama-3-70b", "qwen2.5-72b"))
        gid = rng.choice(("h100-sxm", "a100-sxm-80gb", "h200"))
        gpus = rng.choice((256, 512, 1024, 2048, 4096))
        tokens = rng.choice((0.3e12, 1e12, 2e12, 15e12))
        mfu = rng.uniform(0.2, 0.9)
        from ..analytic.params import count_params
        from ..specs import get_model

        n = count_params(get_model(mid)).total
        days = round(6 * n * tokens / (gpus * get_gpu(gid).peak_flop_per_s("bf16") * mfu) / 86400, 1)
        days = max(days, 0.5)
        r = check_claim(Claim(mid, gpus, gid, tokens, days))
        prompt = (f"A resume line: trained {mid} ({n / 1e9:.1f}B parameters) on {gpus:,} x {gid} "
                  f"for {tokens / 1e12:g}T tokens in {days:g} days. What MFU does that imply, in %? "
                  "(6ND FLOPs against the dense bf16 peak)")
        argv = ("claim", "--model", mid, "--gpus", str(gpus), "--gpu", gid, "--tokens",
                f"{tokens:g}", "--days", f"{days:g}")
        return Drill(topic, prompt, {"model": mid, "params": n, "gpu": gid, "gpus": gpus,
                                     "tokens": tokens, "days": days},
                     100 * r.implied_mfu, "%", 0.05, r.derivation, argv,
                     mistakes=(Mistake("2ND: forward FLOPs only", 100 * r.implied_mfu / 3),
                               Mistake("against the sparse (2:4) peak", 100 * r.implied_mfu / 2)))

    return make


BUILTIN: dict[str, Callable[[random.Random], Drill]] = {
    "kv-cache": _kv,
    "training-memory": _training_memory,
    "roofline": _roofline,
    "resume-walk": _claim("resume-walk"),
}


def _registry() -> dict[str, Callable[[random.Random], Drill]]:
    from .drill_bank import BANK

    return {**BANK, **BUILTIN}


def _module_drill(topic: str) -> Callable[[random.Random], Drill] | None:
    from ..questions import question

    q = question(topic)
    if q.status != "answered":
        return None
    fn = getattr(importlib.import_module(q.module), "drill", None)
    return fn if callable(fn) else None


def topics() -> list[str]:
    """Question ids that have a drill, in bank order."""
    from ..questions import BANK

    out = []
    for q in BANK:
        if q.id in _registry() or (q.status == "answered" and _module_drill(q.id)):
            out.append(q.id)
    return out


def make_drill(topic: str | None, seed: int) -> Drill:
    """A drill for ``topic`` (None: a topic drawn from ``seed``), deterministic in ``seed``."""
    if not 0 <= seed < 2**32:
        raise BadInput(f"--seed must be in [0, 2^32), got {seed}")
    rng = random.Random(seed)
    ts = topics()
    if topic is None:
        topic = rng.choice(ts)
    if topic not in ts:
        raise BadInput(f"--topic: no drill for {topic!r}; choose one of: "
                       f"{close_matches(topic, ts) or ', '.join(ts)}")
    fn = _module_drill(topic) or _registry()[topic]
    d = fn(rng)
    return Drill(**{**d.__dict__, "topic": topic, "seed": seed})
