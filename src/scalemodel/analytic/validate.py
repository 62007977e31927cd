"""Predict published training runs with their published layout fixed, in each source's FLOP terms.

A row gives a model (a bundled id, or its shape: layers, hidden, heads, ...), a cluster, a batch,
the layout keys the source states (blank keys are searched like any unstated choice), the
framework profile of the source's software and date (``framework``; explicit attention, kernels,
grad_accum_fusion, schedule and ep_overlap columns override it; ``fp8_recipe`` names the fp8 scaling recipe
where the source labels it per row; ``nvlink_domain`` the GPUs per NVLink domain where it differs from the
GPU's default) and one measured figure. The planner predicts the step time; the figure is recomputed from it with the
source's own FLOP convention, so like is compared with like:

* ``megatron_eq3``: Narayanan et al. 2021, eq. 3, 96 B s l h^2 (1 + s / 6h + V / 16 l h) FLOPs
  per step; it counts the recompute forward, so it is a hardware-FLOP figure;
* ``mosaic_mfu``: llm-foundry, (6 N + 12 l h s) per token over the peak of the run's precision,
  N the published parameter count;
* ``torchtitan_mfu``: torchtitan (docs/performance.md of 2024), (6 N + 12 l H Q s) per token
  over the bf16 peak, N every parameter including the token embedding (the published WPS and MFU
  of all seven rows agree with this count to 0.05 points, not with N less the embedding);
* ``nemo_full_attn``: NeMo's Llama formula (nemo/utils/flops_formulas.py before commit 6251117f
  of 2025-08-09, which halved the attention term for the causal mask), per token
  l h^2 (12 + 12 g / a + 18 f / h + 12 s / h + 6 V / l h), g the KV heads, a the heads, f the MLP
  width; the TFLOP/s of NeMo's long-sequence tables (2024-10 and 2025-05) were computed with it;
* ``megatron_core``: Megatron-LM's own count (megatron/training/training.py
  num_floating_point_operations at tag core_r0.8.0), per token
  12 l h^2 ((1 + g / a + s / h) q / h + f / h x (3/2 if gated) + V / 2 l h), g the KV heads, a the
  heads, q the query width (a x head_dim), f the MLP width; dense models only (its MoE term is
  not written here); the TFLOP/s of the Megatron-LM README's H100 model table (core_r0.8.0) were
  computed with it;
* ``palm``: our model FLOPs (PaLM Appendix B), used where a paper does not state its convention;
* ``tokens``: tokens per second per GPU, no FLOP convention needed.

Rows are parsed as data (csv); a row that cannot be used is reported with its reason.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..specs import ModelSpec, get_model
from .params import count_params
from .planner import LAYOUT_KEYS, make_cluster, make_job, model_flops_per_token, search

CONVENTIONS = ("megatron_eq3", "mosaic_mfu", "torchtitan_mfu", "nemo_full_attn", "megatron_core",
               "palm", "tokens")


@dataclass(frozen=True)
class RowResult:
    id: str
    source: str
    metric: str
    convention: str
    measured: float
    predicted: float
    layout: dict[str, Any]
    gpus: int
    gpu: str
    model: str
    step_time_s: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "model": self.model, "gpu": self.gpu,
                "gpus": self.gpus, "metric": self.metric, "convention": self.convention,
                "measured": self.measured, "predicted": self.predicted, "error": self.error,
                "layout": self.layout, "step_time_s": self.step_time_s}


def _int(row: dict[str, str], key: str) -> int | None:
    v = (row.get(key) or "").strip()
    if not v:
        return None
    try:
        return int(float(v))
    except ValueError:
        raise BadInput(f"column {key!r} must be a number, got {v!r}") from None


def row_model(row: dict[str, str]) -> ModelSpec:
    if (row.get("model") or "").strip():
        return get_model(row["model"].strip())
    need = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")
    vals = {k: _int(row, k) for k in need}
    missing = [k for k, v in vals.items() if not v]
    if missing:
        raise BadInput(f"no model id and missing {', '.join(missing)}")
    below = [k for k, v in vals.items() if v is not None and v < 1]
    if below:
        raise BadInput(f"column(s) {', '.join(below)} must be at least 1")
    h, a = vals["hidden"], vals["heads"]
    return ModelSpec(
        id=row["id"], family="validation", n_layers=vals["layers"], hidden=h, n_heads=a,
        n_kv_heads=vals["kv_heads"], head_dim=h // a, ffn=vals["ffn"], vocab=vals["vocab"],
        max_context=1 << 20, gated_mlp=bool(_int(row, "gated")),
        tied_embeddings=bool(_int(row, "tied")), dropout=bool(_int(row, "dropout")),
        norm=_norm(row), learned_positions=_positions(row), source=row.get("source", ""),
        origin="validation row",
    )


def _norm(row: dict[str, str]) -> str:
    """The ``norm`` column (layer or rms); blank: layer norm for models trained with dropout
    (GPT-style), RMSNorm otherwise."""
    v = (row.get("norm") or "").strip()
    if not v:
        return "layer" if bool(_int(row, "dropout")) else "rms"
    if v not in ("layer", "rms"):
        raise BadInput(f"column 'norm' must be layer or rms, got {v!r}")
    return v


def _positions(row: dict[str, str]) -> int:
    """Rows of a learned position table: the ``positions`` column is ``learned`` (a table of
    seq_len rows, no rotary) or ``rope`` / blank (rotary, no table)."""
    v = (row.get("positions") or "").strip()
    if v in ("", "rope"):
        return 0
    if v != "learned":
        raise BadInput(f"column 'positions' must be learned or rope, got {v!r}")
    return _int(row, "seq_len") or 0


def convention_flops_per_token(conv: str, m: ModelSpec, seq_len: int, params_b: float | None
                               ) -> float:
    """FLOPs per token under a source's convention (see the module docstring)."""
    L, h, s, V = m.n_layers, m.hidden, seq_len, m.vocab
    if conv == "megatron_eq3":  # per step 96 B s l h^2 (...), i.e. per token 96 l h^2 (...)
        return 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    if conv == "mosaic_mfu":
        n = params_b * 1e9 if params_b else count_params(m).total
        return 6 * n + 12 * L * h * s
    if conv == "torchtitan_mfu":
        return 6 * count_params(m).total + 12 * L * m.n_heads * m.head_dim * s
    if conv == "nemo_full_attn":
        return L * h * h * (12 + 12 * m.n_kv_heads / m.n_heads + 18 * m.ffn / h + 12 * s / h
                            + 6 * V / (L * h))
    if conv == "megatron_core":
        if m.n_experts:
            raise BadInput("convention megatron_core is written for dense models only")
        q = m.n_heads * m.head_dim / h
        mlp = m.ffn / h * (1.5 if m.gated_mlp else 1.0)
        return 12 * L * h * h * ((1 + m.n_kv_heads / m.n_heads + s / h) * q + mlp
                                 + V / (2 * L * h))
    if conv == "palm":
        return model_flops_per_token(m, seq_len)
    raise BadInput(f"convention must be one of {', '.join(CONVENTIONS)}, got {conv!r}")


def row_settings(row: dict[str, str]) -> dict[str, Any]:
    """The kernels and schedule of a row: its ``framework`` profile (specs/data/frameworks.toml;
    blank: the default, Megatron-Core), each overridden by the row's own non-blank column
    (attention, kernels, grad_accum_fusion, schedule, ep_overlap)."""
    from ..specs.frameworks import job_settings

    def text(k: str) -> str | None:
        return (row.get(k) or "").strip() or None

    def flag(k: str) -> bool | None:
        return None if text(k) is None else bool(_int(row, k))

    return job_settings(text("framework"), row["gpu"].strip(), attention=text("attention"),
                        kernels=text("kernels"), grad_accum_fusion=flag("grad_accum_fusion"),
                        schedule=text("schedule"), ep_overlap=flag("ep_overlap"),
                        model=text("model"))[1]


@dataclass(frozen=True)
class RowProblem:
    """What a row asks: the job and cluster of the question, and the layout keys its source
    states (the rest are searched)."""

    model: ModelSpec
    job: Any  # analytic/planner.py Job
    cluster: Any  # analytic/planner.py Cluster
    stated: dict[str, Any]


def row_problem(row: dict[str, str]) -> RowProblem:
    """The job, cluster and stated layout keys of one validation row."""
    m = row_model(row)
    gpus = _int(row, "gpus")
    seq = _int(row, "seq_len")
    batch = _int(row, "global_batch_seqs")
    if not gpus or not seq or not batch:
        raise BadInput("gpus, seq_len and global_batch_seqs are required")
    prec = (row.get("precision") or "bf16").strip()
    # the run's fp8 recipe where its table labels it per row (FP8-CS / MXFP8 beside each other
    # for one model and GPU); blank: the profile's (fp8_scaling_recipes, else fp8_scaling)
    recipe = (row.get("fp8_recipe") or "").strip() or None
    job = make_job(m, seq_len=seq, global_batch_seqs=batch, precision=prec,
                   fp8_scaling=recipe, **row_settings(row))
    m = job.model  # as the profile's recipe builds it (model_recipes mtp_layers)
    cl = make_cluster(row["gpu"].strip(), gpus, gpus_per_node=_int(row, "gpus_per_node"),
                      nvlink_domain=_int(row, "nvlink_domain"),
                      inter=(row.get("inter") or "").strip() or None)
    fixed: dict[str, Any] = {}
    for k in LAYOUT_KEYS:
        v = (row.get(k) or "").strip()
        if v:
            if k == "recompute":  # a mode, or selective:MODULES / full:N (layout.recompute_spec)
                from .layout import recompute_spec

                fixed.update(recompute_spec(v))
            else:
                # the range the CLI's --layout takes (layout.KEYS), one reason naming the column
                from .layout import KEYS

                key = next(x for x in KEYS if x.name == k)
                try:
                    fixed[k] = key.parse(k, str(_int(row, k)))
                except BadInput as e:
                    raise BadInput(f"column {k!r}: {e}") from None
    return RowProblem(m, job, cl, fixed)


def row_metric(row: dict[str, str]) -> tuple[str, str]:
    """(convention, metric) of a row, the metric one its convention gives: ``tokens`` gives
    tokens/s per GPU (metric tokens_per_s_per_gpu or blank), a FLOP convention TFLOP/s per GPU
    or MFU (tflops_per_gpu, mfu); anything else is one line of bad input."""
    conv = row["convention"].strip()
    metric = (row.get("metric") or "").strip()
    if conv not in CONVENTIONS:
        raise BadInput(f"convention must be one of {', '.join(CONVENTIONS)}, got {conv!r}")
    if conv == "tokens":
        if metric not in ("", "tokens_per_s_per_gpu"):
            raise BadInput(f"metric {metric!r} with convention tokens: that convention gives "
                           "tokens_per_s_per_gpu (or a blank metric)")
    elif metric not in ("tflops_per_gpu", "mfu"):
        raise BadInput(f"metric must be tflops_per_gpu or mfu with convention {conv}, got "
                       f"{metric!r} (tokens_per_s_per_gpu goes with convention tokens)")
    return conv, metric


def predicted_metric(row: dict[str, str], p: RowProblem, step_time_s: float) -> float:
    """The row's published figure as the planner predicts it from a step time."""
    m, job, cl = p.model, p.job, p.cluster
    gpus, seq = cl.n_gpus, job.seq_len
    conv, metric = row_metric(row)
    tokens = job.tokens_per_step
    if conv == "tokens":
        return tokens / step_time_s / gpus
    params_b = float(row["params_b"]) if (row.get("params_b") or "").strip() else None
    flops = convention_flops_per_token(conv, m, seq, params_b) * tokens / step_time_s / gpus
    if metric == "tflops_per_gpu":
        return flops / 1e12
    if metric == "mfu":
        return 100 * flops / cl.gpu.peak_flop_per_s(job.precision)
    raise BadInput(f"metric must be tflops_per_gpu, mfu or tokens_per_s_per_gpu, got {metric!r}")


def predict_row(row: dict[str, str]) -> RowResult:
    row_metric(row)  # a metric its convention cannot give: refused before the search
    p = row_problem(row)
    best = search(p.job, p.cluster, p.stated, top=0).best
    step = best.values.step_time_s
    pred = predicted_metric(row, p, step)
    return RowResult(row["id"], row.get("source", ""), row["metric"].strip(),
                     row["convention"].strip(), measured_of(row), pred,
                     best.layout.as_dict(), p.cluster.n_gpus, p.cluster.gpu.id, p.model.id, step)


def measured_of(row: dict[str, str]) -> float:
    """The row's published figure: a positive number, else one line of bad input."""
    raw = (row.get("measured") or "").strip()
    try:
        v = float(raw)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise BadInput(f"validation row {row.get('id', '?')!r}: column 'measured' must be a "
                       f"positive number, got {raw!r}")
    return v


def read_rows(text: str) -> list[dict[str, str]]:
    """The rows of a validation CSV; lines starting with ``#`` (a file's comment block: what it
    holds, the rows left out and why) are not rows."""
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    rows = list(csv.DictReader(io.StringIO(body)))
    if not rows:
        raise BadInput("the validation file holds no rows")
    need = {"id", "gpu", "gpus", "seq_len", "global_batch_seqs", "metric", "measured",
            "convention"}
    missing = need - set(rows[0])
    if missing:
        raise BadInput(f"the validation file lacks columns: {', '.join(sorted(missing))}")
    return rows


def validate(text: str) -> tuple[list[RowResult], list[tuple[str, str]]]:
    """(results, skipped rows with their reason) for the CSV text of a validation file."""
    results, skipped = [], []
    for row in read_rows(text):
        try:
            results.append(predict_row(row))
        except BadInput as e:
            skipped.append((row.get("id", "?"), str(e)))
    return results, skipped


def summary(results: list[RowResult]) -> dict[str, float]:
    errs = [abs(r.error) for r in results]
    if not errs:
        return {"row_count": 0, "mape": float("nan"), "max_ape": float("nan")}
    return {"row_count": len(errs), "mape": sum(errs) / len(errs), "max_ape": max(errs)}


@dataclass(frozen=True)
class CrossValidation:
    """Leave-one-source-out: each source's error when every constant derived from end-to-end
    runs is re-derived without that source's rows."""

    by_source: list[dict[str, Any]]
    end_to_end_constants: list[str]
    statement: str


def cross_validate(results: list[RowResult]) -> CrossValidation:
    """Per source, the in-sample error and the error with the end-to-end constants re-derived
    without its rows. The constants and their kind of evidence are specs/evidence.py's; where
    none rests on end-to-end runs, leaving a source out changes no constant, and the
    out-of-sample error is the in-sample one (said so in ``statement``). Each source also lists
    the constants that cite it (for what its software did, never its throughput)."""
    from ..specs.evidence import end_to_end_constants, planner_constants

    e2e = end_to_end_constants()
    citing: dict[str, list[str]] = {}
    for c in planner_constants():
        citing.setdefault(c.source, []).append(c.name)
    groups: dict[str, list[float]] = {}
    for r in results:
        groups.setdefault(r.source or "(no source)", []).append(r.error)
    rows = []
    for k, errs in groups.items():
        mae = sum(map(abs, errs)) / len(errs)
        rows.append({"source": k, "rows": len(errs), "mean_abs_error": mae,
                     "cv_mean_abs_error": None if e2e else mae,
                     "constants_citing_source": citing.get(k, [])})
    n = len(planner_constants())
    if e2e:
        statement = (f"{len(e2e)} of {n} planner constants rest on end-to-end runs "
                     f"({', '.join(c.name for c in e2e)}) and have no re-derivation recipe: "
                     "their out-of-sample error is not computed")
    else:
        statement = (f"No constant is derived from end-to-end runs: all {n} planner constants "
                     "rest on datasheets, microbenchmarks, framework source or stated "
                     "assumptions (specs/data/evidence.toml), so re-deriving them without a "
                     "source's rows changes nothing and each source's out-of-sample error is its "
                     "in-sample error")
    return CrossValidation(rows, [c.name for c in e2e], statement)
