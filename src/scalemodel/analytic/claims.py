"""Checking a claimed training run: what a (model, GPUs, tokens, days) story implies.

A claim names a model, a GPU count and type, a token budget and a wall-clock time. From those
alone follow (Kaplan et al. 2020, C = 6 N D; PaLM's MFU definition, Chowdhery et al. 2022):

- the training FLOPs ``C = 6 N D`` (N = parameters a token uses: active parameters for MoE);
- the throughput ``D / T`` and per GPU ``D / (T n)``;
- the implied model FLOPs utilisation ``MFU = C / (n pi T)`` with ``pi`` the dense peak;
- whether the model's training state fits on ``n`` GPUs (a given layout, or the smallest layout
  the memory engine can find);
- the interruptions to expect over ``n T`` GPU-days at a published failure rate (Llama 3), the
  checkpoint interval that minimises lost work (Young 1974, ``tau = sqrt(2 delta M)``) and the
  checkpoints over the run.

The verdict compares the implied MFU with published large runs (38-55 %) using thresholds kept
in ``specs/data/claims.toml``; a layout that does not fit, or a claimed MFU that disagrees with the
other numbers, also counts against the claim.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..derive import Derivation, Table
from ..errors import BadInput
from ..specs import GPUSpec, ModelSpec, get_gpu, get_model
from ..specs.model import model_ids
from ..specs.sources import cite, load_toml
from .layout import TrainLayout
from .memory import find_min_gpus, memory_report, usable_memory
from .params import count_params

VERDICTS = ("plausible", "stretched", "implausible")
DAY_S = 86400.0


@cache
def constants() -> dict[str, Any]:
    """The checker's constants (claims.toml), each figure with its source key."""
    return load_toml("claims.toml")


# --- inputs ----------------------------------------------------------------------------------------

_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kKmMbBgGtT]?)\s*$")
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_count(text: str, field_name: str = "--tokens") -> float:
    """A decimal count: '2T' -> 2e12, '300B' -> 3e11, '1.5e12' -> 1.5e12 (K, M, B/G, T)."""
    m = _COUNT.match(str(text))
    if not m:
        raise BadInput(f"{field_name}: cannot read {text!r}; use a number with an optional "
                       "K, M, B or T suffix, e.g. 2T")
    v = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if not math.isfinite(v) or v <= 0:
        raise BadInput(f"{field_name}: must be a positive number, got {text!r}")
    return v


def parse_layout(text: str, gpus: int) -> TrainLayout:
    """'tp8 pp4 dp16 zero1 recompute=selective' (any order, '=' optional; 'fsdp' = zero 3).

    dp defaults to gpus / (tp x pp x cp) and must agree with it when given.
    """
    vals: dict[str, Any] = {}
    rest = text.lower().replace(",", " ").replace(";", " ")
    for tok in rest.split():
        m = re.fullmatch(r"(tp|pp|dp|cp|ep|zero|vpp)[=:-]?(\d+)", tok)
        if m:
            vals[m.group(1)] = int(m.group(2))
        elif tok == "fsdp":
            vals["zero"] = 3
        elif (m := re.fullmatch(r"(?:recompute[=:])?(none|selective|full)", tok)):
            vals["recompute"] = m.group(1)
        else:
            raise BadInput(f"--layout: cannot read {tok!r}; use e.g. 'tp8 pp4 dp16 zero1 "
                           "recompute=selective'")
    tp, pp, cp = vals.get("tp", 1), vals.get("pp", 1), vals.get("cp", 1)
    if min(tp, pp, cp) < 1 or gpus % (tp * pp * cp):
        raise BadInput(f"--layout: tp x pp x cp = {tp * pp * cp} does not divide --gpus {gpus}")
    dp = gpus // (tp * pp * cp)
    if "dp" in vals and vals["dp"] != dp:
        raise BadInput(f"--layout: dp{vals['dp']} disagrees with --gpus {gpus} / (tp x pp x cp) = {dp}")
    if vals.get("zero", 0) not in (0, 1, 2, 3):
        raise BadInput(f"--layout: zero must be 0, 1, 2 or 3, got {vals['zero']}")
    return TrainLayout(tp=tp, pp=pp, dp=dp, cp=cp, ep=vals.get("ep", 1), zero=vals.get("zero", 0),
                       recompute=vals.get("recompute", "none"), vpp=vals.get("vpp", 1))


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([mMbBtT])\s*$")
# an MoE shorthand "E x S": E experts, each the MLP of a dense model of S parameters ("8x7B")
_MOE = re.compile(r"^\s*(\d+)\s*[xX×]\s*([0-9]*\.?[0-9]+)\s*([mMbBtT])\s*$")
_MULT = {"m": 1e6, "b": 1e9, "t": 1e12}


@dataclass(frozen=True)
class ResolvedModel:
    """The architecture a claim is judged on, and the parameter counts its FLOPs use.

    ``params`` / ``active`` are None when the counts are the spec's own (a bundled model or a
    config); a size ('70B') or an MoE shorthand not bundled ('8x22B') carries its estimate here.
    """

    spec: ModelSpec
    params: float | None
    active: float | None
    note: str


def _nearest_dense(n: float) -> tuple[ModelSpec, float]:
    best, best_d = None, math.inf
    for mid in model_ids():
        spec = get_model(mid)
        if spec.is_moe:
            continue
        d = abs(math.log(count_params(spec).total / n))
        if d < best_d:
            best, best_d = spec, d
    assert best is not None
    return best, best_d


def _bundled_moe(experts: int, size_text: str) -> ModelSpec | None:
    """A bundled model whose id carries the shorthand ('8x7B' -> mixtral-8x7b)."""
    key = f"{experts}x{size_text.lower()}"
    for mid in model_ids():
        if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", mid.lower()):
            return get_model(mid)
    return None


def resolve(text: str) -> ResolvedModel:
    """A bundled id / config.json, a size such as '70B', or an MoE shorthand such as '8x7B'.

    A size is judged for memory on the bundled dense model nearest in parameter count; its FLOPs
    use the claimed size. An MoE shorthand 'E x S' names a bundled model when one carries it in
    its id (8x7B -> mixtral-8x7b); otherwise the nearest dense model of size S gets E experts of
    its own MLP, top-k of them per token (claims.toml [moe_shorthand]), and the counts are scaled
    by S over that model's size: active = shared + k x MLP, total = shared + E x MLP.
    """
    mm = _MOE.match(str(text))
    if mm:
        experts, size_text = int(mm.group(1)), f"{mm.group(2)}{mm.group(3).upper()}"
        if experts < 1:
            raise BadInput(f"--model: an MoE needs at least one expert, got {text!r}")
        bundled = _bundled_moe(experts, size_text)
        if bundled is not None:
            return ResolvedModel(bundled, None, None,
                                 f"{text.strip()} read as the bundled {bundled.id}")
        s = float(mm.group(2)) * _MULT[mm.group(3).lower()]
        if s <= 0:
            raise BadInput(f"--model: size must be positive, got {text!r}")
        ms = constants()["moe_shorthand"]
        k = min(int(ms["top_k"]), experts)
        base, dist = _nearest_dense(s)
        spec = base.with_overrides(id=f"{experts}x{size_text} MoE (estimate on {base.id})",
                                   n_experts=experts, top_k=k, moe_ffn=base.ffn,
                                   origin="estimate")
        pc, pb = count_params(spec), count_params(base).total
        scale = s / pb
        total, active = pc.total * scale, pc.active * scale
        note = (f"a {text.strip()} MoE: {experts} experts of the MLP of {base.id} ({pb / 1e9:.1f}B "
                f"dense), top-{k} per token ({cite(ms['source'])}), counts scaled to {size_text}: "
                f"{total / 1e9:.0f}B total, {active / 1e9:.1f}B active")
        if dist > math.log(1.5):
            note += "; no bundled dense model is within 1.5x of that size, so the memory check is rough"
        return ResolvedModel(spec, total, active, note)
    m = _SIZE.match(str(text))
    if not m:
        return ResolvedModel(get_model(text), None, None, "")
    n = float(m.group(1)) * _MULT[m.group(2).lower()]
    if n <= 0:
        raise BadInput(f"--model: size must be positive, got {text!r}")
    best, best_d = _nearest_dense(n)
    p = count_params(best).total
    note = (f"a {text.strip()} model: memory is judged on the architecture of {best.id} "
            f"({p / 1e9:.1f}B parameters, the bundled dense model nearest in size)")
    if best_d > math.log(1.5):
        note += "; no bundled model is within 1.5x of that size, so the memory check is rough"
    return ResolvedModel(best, n, n, note)


def resolve_model(text: str) -> tuple[ModelSpec, float | None, str]:
    """(spec, claimed parameter count or None, note): the older form of :func:`resolve`."""
    r = resolve(text)
    return r.spec, r.active, r.note


def _counts(r: ResolvedModel) -> tuple[float, float]:
    """(total, active) parameters: the estimate where there is one, else the spec's own."""
    pc = count_params(r.spec)
    if r.params is not None and r.active is not None:
        return r.params, r.active
    return float(pc.total), float(pc.active if r.spec.is_moe else pc.total)


@dataclass(frozen=True)
class Claim:
    """What someone says they ran. ``model`` is an id, a config.json path or a size ('70B')."""

    model: str
    gpus: int
    gpu: str
    tokens: float
    days: float
    mfu: float | None = None
    layout: str | None = None
    seq_len: int = 4096
    dtype: str = "bf16"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --- the check ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimCheck:
    claim: Claim
    model: str
    gpu: str
    params: float
    active_params: float
    total_flops: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    flop_per_s_per_gpu: float
    peak_flop_per_s: float
    implied_mfu: float
    fits_in_memory: bool
    layout: str
    per_gpu_bytes: float | None
    capacity_bytes: float
    min_gpus: int | None
    expected_interruptions: float
    mean_time_between_interruptions_s: float
    checkpoint_interval_s: float
    checkpoints: int
    lost_fraction: float
    days_at_typical_mfu: float
    verdict: str
    reasons: tuple[str, ...]
    story: tuple[str, ...]
    derivation: Derivation
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim.to_dict(),
            "model": self.model,
            "gpu": self.gpu,
            "params": self.params,
            "active_params": self.active_params,
            "total_flops": self.total_flops,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "flop_per_s_per_gpu": self.flop_per_s_per_gpu,
            "peak_flop_per_s": self.peak_flop_per_s,
            "implied_mfu": self.implied_mfu,
            "fits_in_memory": self.fits_in_memory,
            "layout": self.layout,
            "per_gpu_bytes": self.per_gpu_bytes,
            "capacity_bytes": self.capacity_bytes,
            "min_gpus": self.min_gpus,
            "expected_interruptions": self.expected_interruptions,
            "mean_time_between_interruptions_s": self.mean_time_between_interruptions_s,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "checkpoints": self.checkpoints,
            "lost_fraction": self.lost_fraction,
            "days_at_typical_mfu": self.days_at_typical_mfu,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "story": list(self.story),
            "notes": list(self.notes),
            **self.extra,
            "derivation": self.derivation.to_dict(),
        }


def _validate(c: Claim) -> None:
    if not isinstance(c.gpus, int) or c.gpus < 1:
        raise BadInput(f"--gpus must be a whole number >= 1, got {c.gpus}")
    if not (c.tokens > 0 and math.isfinite(c.tokens)):
        raise BadInput(f"--tokens must be positive, got {c.tokens}")
    if not (c.days > 0 and math.isfinite(c.days)):
        raise BadInput(f"--days must be positive, got {c.days}")
    if c.mfu is not None and not 0 < c.mfu <= 1:
        raise BadInput(f"--mfu must be a fraction in (0, 1], got {c.mfu}")


def failure_rate_per_gpu_day() -> tuple[float, str]:
    f = constants()["failures"]
    return f["unexpected_interruptions"] / (f["window_gpus"] * f["window_days"]), cite(f["source"])


def publish_band(mfu: float) -> str:
    """'below', 'within' or 'above' the band large runs publish (typical to best MFU)."""
    mk = constants()["mfu"]
    if mfu < mk["typical_published"]:
        return "below"
    return "within" if mfu <= mk["best_published"] else "above"


def check_claim(c: Claim) -> ClaimCheck:
    """Everything that follows from a claim, with its derivation and a verdict."""
    _validate(c)
    k = constants()
    rm = resolve(c.model)
    m, model_note = rm.spec, rm.note
    gpu: GPUSpec = get_gpu(c.gpu)
    total_n, active_n = _counts(rm)
    notes = [model_note] if model_note else []
    d = Derivation(f"Claim: {c.model} on {c.gpus:,} x {gpu.id}, {c.tokens:.3g} tokens, {c.days:g} days")

    # 1. work and throughput
    if rm.active is not None and m.is_moe:
        d.given("active parameters per token (MoE estimate, top-k experts)", "N", active_n, "1",
                note=model_note)
    elif rm.active is not None:
        d.given("parameters per token (claimed size)", "N", active_n, "1", note=model_note)
    elif m.is_moe:
        d.given("active parameters per token (top-k experts)", "N", active_n, "1", m.source,
                note=f"{total_n / 1e9:.1f}B in all")
    else:
        d.given("parameters (exact count from the config)", "N", total_n, "1", m.source)
    d.given("training tokens", "D", c.tokens, "token")
    d.given("GPUs", "n", c.gpus, "GPU")
    d.given("wall-clock days", "T_d", c.days, "day")
    d.given("training FLOPs per parameter per token (forward 2, backward 4)", "k_f",
            k["flops"]["per_param_per_token"], "FLOP", cite(k["flops"]["source"]))
    flops = d.calc("training compute", "C", "k_f * N * D", "FLOP",
                   note="attention-score FLOPs are left out, so this slightly understates the work")
    d.calc("wall-clock time", "T", f"T_d * {DAY_S:g}", "s")
    tps = d.calc("throughput", "R", "D / T", "token/s")
    tps_gpu = d.calc("throughput per GPU", "R_1", "R / n", "token/s")
    achieved = d.calc("model FLOP/s per GPU", "F_1", "C / (T * n)", "FLOP/s")
    peak = d.given(f"{gpu.name} dense {c.dtype} peak", "pi", gpu.peak_flop_per_s(c.dtype), "FLOP/s",
                   gpu.source_of(f"flop_per_s.{c.dtype}"))
    mfu = d.calc("implied model FLOPs utilisation", "MFU", "F_1 / pi", "1",
                 source=cite("chowdhery-2022-palm"))
    typ = d.given("typical MFU of published large runs", "MFU_typ", k["mfu"]["typical_published"],
                  "1", cite(k["mfu"]["typical_published_source"]))
    days_typ = d.calc("days the same work takes at the typical MFU", "T_typ",
                      f"C / (n * pi * MFU_typ) / {DAY_S:g}", "day")

    # 2. memory
    cap = gpu.hbm_bytes
    min_gpus: int | None = None
    per_gpu: float | None = None
    if c.layout:
        lay = parse_layout(c.layout, c.gpus)
        mr = memory_report(m, lay, seq_len=c.seq_len, gpu=gpu, weight_dtype=c.dtype)
        per_gpu, cap = mr.per_gpu_bytes, float(mr.capacity_bytes or cap)
        fits = bool(mr.fits)
        layout_text = lay.describe()
        d.given(f"training memory per GPU under {layout_text}", "M_gpu", per_gpu, "B",
                note="from the memory engine (scalemodel memory)")
        d.given("usable memory per GPU", "M_cap", cap, "B", gpu.source_of("hbm_bytes"))
    else:
        fit = find_min_gpus(m, gpu, seq_len=c.seq_len, weight_dtype=c.dtype, max_gpus=c.gpus,
                            whole_nodes=False)
        # usable memory as the memory engine prices it: that of the layout the search found,
        # else before any communicator (a layout's NCCL buffers only lower it)
        cap = float(usable_memory(gpu.hbm_bytes, 0))
        if fit.layout is not None:
            cap = float(memory_report(m, fit.layout, seq_len=c.seq_len, gpu=gpu,
                                      weight_dtype=c.dtype).capacity_bytes or cap)
        min_gpus = fit.min_gpus
        fits = min_gpus is not None and min_gpus <= c.gpus
        if fit.layout is not None:
            layout_text = f"smallest that fits {fit.layout.describe()} on {min_gpus:,} GPUs"
            per_gpu = fit.per_gpu_bytes
            d.given("smallest GPU count on which the model trains (memory engine search)",
                    "n_min", min_gpus, "GPU", note=f"layout {layout_text}, sequence {c.seq_len:,}")
        else:
            layout_text = "none fits"
            d.note(f"No layout of {m.id} fits on {c.gpus:,} x {gpu.id} (searched TP, PP, DP, ZeRO, "
                   "recompute).")

    # 3. interruptions and checkpoints
    f = k["failures"]
    ck = k["checkpoint"]
    d.given("unexpected interruptions in the reference window", "I_ref", f["unexpected_interruptions"],
            "1", cite(f["source"]))
    d.given("GPUs x days of the reference window", "G_ref", f["window_gpus"] * f["window_days"],
            "GPU-day", cite(f["source"]),
            note=f"{f['window_gpus']:,} GPUs x {f['window_days']} days")
    d.calc("interruption rate per GPU-day", "lam", "I_ref / G_ref", "1/GPU-day")
    expected = d.calc("expected interruptions over the run", "I", "lam * n * T_d", "1",
                      note="failures scale with GPU-days; planned maintenance comes on top")
    mtbi = d.calc("mean time between interruptions of the job", "M", "T / max(I, 1e-9)", "s")
    d.given("stall to write one checkpoint", "delta", ck["write_s"], "s",
            cite(ck["write_s_source"]), note=ck["write_s_note"])
    d.given("time to restart after an interruption", "R_s", ck["restart_s"], "s",
            cite(ck["restart_s_source"]), note=ck["restart_s_note"])
    tau = d.calc("checkpoint interval (Young)", "tau", "min(sqrt(2 * delta * M), T)", "s",
                 source=cite(ck["interval_source"]))
    n_ck = d.calc("checkpoints over the run", "N_ck", "ceil(T / tau)", "1")
    lost = d.calc("fraction of the run lost to checkpoints, rework and restarts", "W",
                  "delta / tau + (tau / 2 + R_s) / M", "1", bound="lower",
                  note="first-order model; exponential failures")

    # 4. verdict
    mk = k["mfu"]
    reasons: list[str] = []
    level = 0
    pct = f"{mfu:.0%}"
    if mfu > 1:
        level = 2
        reasons.append(f"implied MFU {pct}: more FLOPs per second than the GPUs' dense {c.dtype} "
                       f"peak; the run needs {days_typ:.1f} days at a typical {typ:.0%} MFU")
    elif mfu > mk["implausible"]:
        level = 2
        reasons.append(f"implied MFU {pct} is far above the best published large runs "
                       f"({mk['best_published']:.1%}, MegaScale); {days_typ:.1f} days at {typ:.0%}")
    elif mfu > mk["stretched"]:
        level = 1
        reasons.append(f"implied MFU {pct} is above the best published large runs "
                       f"({mk['best_published']:.1%}); possible only with an exceptional stack")
    elif mfu < mk["low"]:
        level = max(level, 1)
        reasons.append(f"implied MFU {pct} is very low: most of the GPU time went unused "
                       f"(the work needs {days_typ:.2g} days at {typ:.0%})")
    else:
        reasons.append(f"implied MFU {pct} is {publish_band(mfu)} what large runs publish "
                       f"({mk['typical_published']:.0%}-{mk['best_published']:.0%})")
    if c.mfu is not None:
        ratio = mfu / c.mfu
        if not mk["claimed_agree_low"] <= ratio <= mk["claimed_agree_high"]:
            lvl = 2 if not mk["claimed_far_low"] <= ratio <= mk["claimed_far_high"] else 1
            level = max(level, lvl)
            reasons.append(f"the claimed MFU {c.mfu:.0%} disagrees with the {pct} that the tokens, "
                           f"GPUs and days imply ({ratio:.2f}x)")
        else:
            reasons.append(f"the claimed MFU {c.mfu:.0%} agrees with the implied {pct}")
    if not fits:
        level = 2
        if c.layout:
            reasons.append(f"{layout_text} needs {per_gpu / 1e9:.0f} GB per GPU; {gpu.id} offers "
                           f"{cap / 1e9:.0f} GB usable")
        else:
            reasons.append(f"{m.id} does not fit in the memory of {c.gpus:,} x {gpu.id} under any "
                           "layout the memory engine tries")
    else:
        reasons.append(f"memory fits: {layout_text}, {per_gpu / 1e9:.0f} GB per GPU of "
                       f"{cap / 1e9:.0f} GB" if per_gpu is not None else "memory fits")
    if expected >= 1:
        reasons.append(f"about {expected:.0f} interruptions to expect over {c.days:g} days on "
                       f"{c.gpus:,} GPUs: a credible story mentions restarts and checkpoints")
    verdict = VERDICTS[level]

    story = (
        f"throughput: {tps_gpu:,.0f} tokens/s per GPU ({tps:,.0f} tokens/s in all)",
        f"utilisation: {mfu:.0%} MFU against the {c.dtype} dense peak ({achieved / 1e12:,.0f} of "
        f"{peak / 1e12:,.0f} TFLOP/s per GPU)",
        f"layout: {layout_text}" + (f", {per_gpu / 1e9:.0f} GB per GPU" if per_gpu else ""),
        f"failures: ~{expected:.1f} interruptions (one every {mtbi / 3600:,.1f} h), checkpoint every "
        f"{tau / 60:,.0f} min, {n_ck:,.0f} checkpoints, ~{lost:.1%} of the run lost",
        f"time: {c.days:g} days claimed; {days_typ:.1f} days at a typical {typ:.0%} MFU",
    )
    return ClaimCheck(
        claim=c, model=m.id, gpu=gpu.id, params=total_n,
        active_params=active_n, total_flops=flops, tokens_per_s=tps,
        tokens_per_s_per_gpu=tps_gpu, flop_per_s_per_gpu=achieved, peak_flop_per_s=peak,
        implied_mfu=mfu, fits_in_memory=bool(fits), layout=layout_text, per_gpu_bytes=per_gpu,
        capacity_bytes=cap, min_gpus=min_gpus, expected_interruptions=expected,
        mean_time_between_interruptions_s=mtbi, checkpoint_interval_s=tau, checkpoints=int(n_ck),
        lost_fraction=lost, days_at_typical_mfu=days_typ, verdict=verdict,
        reasons=tuple(reasons), story=story, derivation=d, notes=tuple(notes),
    )


def scale_table(base: Claim, gpu_counts: list[int], mfu: float | None = None) -> Table:
    """The same model and tokens at other GPU counts: days at the typical MFU, whether it fits
    and the layout the memory engine picks at exactly that count, interruptions and checkpoint
    interval (what a scoping answer says at 4 or 4,000 GPUs)."""
    k = constants()
    typ = mfu or k["mfu"]["typical_published"]
    rm = resolve(base.model)
    gpu = get_gpu(base.gpu)
    N = _counts(rm)[1]
    rows = []
    for n in gpu_counts:
        flops = k["flops"]["per_param_per_token"] * N * base.tokens
        days = flops / (n * gpu.peak_flop_per_s(base.dtype) * typ) / DAY_S
        c = check_claim(Claim(base.model, n, base.gpu, base.tokens, days, seq_len=base.seq_len,
                              dtype=base.dtype))
        # the layout at exactly n GPUs (least recompute, lowest ZeRO, fewest stages, least TP)
        at_n = find_min_gpus(rm.spec, gpu, seq_len=base.seq_len, weight_dtype=base.dtype,
                             max_gpus=n, whole_nodes=False, exact=True)
        lay = at_n.layout.describe() if at_n.layout is not None else "none fits"
        rows.append((n, days, "yes" if at_n.layout is not None else "no", lay,
                     c.expected_interruptions, c.checkpoint_interval_s / 60))
    return Table(f"{base.model}, {base.tokens:.3g} tokens on {base.gpu} at {typ:.0%} MFU",
                 ("GPUs", "days", "fits", "smallest layout", "interruptions", "checkpoint every min"),
                 tuple(rows))


# --- one sentence ---------------------------------------------------------------------------------

# The grammar, in words (docs/claims.md has it with examples):
#   model   a bundled model id ("llama-3-70b"), an MoE shorthand "<experts>x<size>" ("8x7B",
#           "8x22B"), or a size "<number><M|B|T>" followed by
#           "model"/"parameters"/"params"/"dense"/"llm" (e.g. "70B model", "7B-parameter")
#   gpus    "<count> <gpu>" where count is 512, 4,096, 2k and gpu names a bundled GPU
#           ("H100", "H100s", "A100 GPUs", "h100-sxm", "MI300X"); "x" between is allowed
#   tokens  "<number><K|M|B|T> tokens"
#   days    "<number> days|weeks|months|hours" (a month is 30 days)
#   mfu     "<number>% MFU" or "MFU of <number>%"
# Everything else is ignored; numbers that no rule used are reported as not understood.

_GPU_ALIASES = {"h100": "h100-sxm", "a100": "a100-sxm-80gb", "h100-pcie": "h100-pcie"}


def _gpu_pattern() -> tuple[re.Pattern[str], dict[str, str]]:
    from ..specs import gpu_ids

    names: dict[str, str] = {}
    for gid in gpu_ids():
        names[gid] = gid
        names[gid.split("-")[0]] = names.get(gid.split("-")[0], gid)  # first bundled wins
    names.update({k: v for k, v in _GPU_ALIASES.items() if v in gpu_ids()})
    alt = "|".join(sorted((re.escape(n) for n in names), key=len, reverse=True))
    pat = re.compile(
        rf"(?<![\w.])(\d[\d,]*(?:\.\d+)?\s*[kK]?)\s*(?:x\s*)?(?:nvidia\s+|amd\s+)?({alt})"
        rf"(?:s\b|\b)(?:\s*gpus?\b)?", re.IGNORECASE)
    return pat, names


def _num(text: str) -> float:
    t = text.replace(",", "").strip()
    mult = 1e3 if t[-1:] in "kK" else 1.0
    return float(t.rstrip("kK").strip()) * mult


def parse_sentence(text: str) -> tuple[dict[str, Any], list[str]]:
    """Fields found in a claim sentence, and what could not be used (missing fields, stray
    numbers). Raises nothing: the caller decides what is required."""
    if len(text) > 500:
        raise BadInput("claim: the sentence is longer than 500 characters")
    found: dict[str, Any] = {}
    used: list[tuple[int, int]] = []
    s = text

    def take(m: re.Match[str]) -> None:
        used.append(m.span())

    ids = sorted(model_ids(), key=len, reverse=True)
    for mid in ids:
        m = re.search(rf"(?<![\w-]){re.escape(mid)}(?![\w-])", s, re.IGNORECASE)
        if m:
            found["model"] = mid
            take(m)
            break
    if "model" not in found:
        m = re.search(r"(?<![\w.])(\d+)\s*[x×]\s*(\d+(?:\.\d+)?)\s*([MBT])(?![\w.])", s,
                      re.IGNORECASE)
        if m:
            found["model"] = f"{m.group(1)}x{m.group(2)}{m.group(3).upper()}"
            take(m)
    if "model" not in found:
        m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([MBT])(?:[\s-]*(?:parameters?|params?|"
                      r"models?|dense|llm|transformer))", s, re.IGNORECASE)
        if m:
            found["model"] = f"{m.group(1)}{m.group(2).upper()}"
            take(m)
    pat, names = _gpu_pattern()
    m = pat.search(s)
    if m:
        n = _num(m.group(1))
        if n.is_integer() and n >= 1:
            found["gpus"] = int(n)
            found["gpu"] = names[m.group(2).lower()]
            take(m)
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([KMBT])\s*tokens\b", s, re.IGNORECASE)
    if m:
        found["tokens"] = float(m.group(1)) * _SCALE[m.group(2).lower()]
        take(m)
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(hours?|days?|weeks?|months?)\b", s, re.IGNORECASE)
    if m:
        unit = m.group(2).lower().rstrip("s")
        found["days"] = float(m.group(1)) * {"hour": 1 / 24, "day": 1, "week": 7, "month": 30}[unit]
        take(m)
    m = (re.search(r"(\d+(?:\.\d+)?)\s*%\s*MFU", s, re.IGNORECASE)
         or re.search(r"MFU\s*(?:of|=|:|at)?\s*(\d+(?:\.\d+)?)\s*%", s, re.IGNORECASE))
    if m:
        found["mfu"] = float(m.group(1)) / 100
        take(m)
    unparsed = [f"no {f} found" for f in ("model", "gpus", "tokens", "days") if f not in found]
    for n in re.finditer(r"\d[\d,.]*\s*[A-Za-z%]*", s):
        if not any(a <= n.start() < b for a, b in used):
            unparsed.append(f"did not understand {n.group(0).strip()!r}")
    return found, unparsed
