"""The serving planner's result as a worked answer (``plan serve``)."""

from __future__ import annotations

from typing import Any


def _ms(x: float) -> float:
    return 1e3 * x


def _row(r: Any) -> tuple[Any, ...]:
    lay = r.layout
    name = f"tp{lay.tp} pp{lay.pp} ep{lay.ep} dp{lay.dp}"
    if r.disaggregated:
        p, d = r.extra["prefill_pool"], r.extra["decode_pool"]
        name = (f"prefill tp{p['tp']} x{p['dp']} + decode tp{d['tp']} pp{d['pp']} "
                f"x{d['dp']}")
    return (name, r.gpus, r.precision, r.kv_dtype, r.max_batch, r.token_budget,
            round(r.output_tokens_per_s), round(r.output_tokens_per_s_per_gpu),
            _ms(r.ttft_p50_s), _ms(r.ttft_p99_s), _ms(r.tpot_p50_s), _ms(r.tpot_p99_s))


def serve_report(res: Any, m: Any, gpu: Any, eng: Any, stream: Any, args: Any) -> Any:
    from ..derive import Derivation, Headline, Report, Section, Table

    b = res.best
    data = b.to_dict()
    price = getattr(args, "gpu_hour_price", None)
    d = Derivation(f"serving figures of the best deployment ({b.gpus} x {gpu.id})")
    d.given("output tokens per second (simulated, whole deployment)", "X_out",
            b.output_tokens_per_s, "token/s")
    d.given("GPUs", "N", b.gpus, "1")
    d.calc("output tokens per second per GPU", "x_gpu", "X_out / N", "token/s")
    if price:
        d.given("price of one GPU-hour", "P", price, "$/h", "--gpu-hour-price")
        data["cost_per_million_output_tokens"] = float(d.calc(
            "cost per million output tokens", "C_out", "N * P / (3600 * X_out) * 1e6", "$"))
        d.given("total (input + output) tokens per second", "X_tot", b.total_tokens_per_s,
                "token/s")
        data["cost_per_million_total_tokens"] = float(d.calc(
            "cost per million tokens, input and output", "C_tot",
            "N * P / (3600 * X_tot) * 1e6", "$"))
    kv_note = (f"KV cache {b.kv_dtype}" + (" (--kv-dtype)" if args.kv_dtype else
               f" (what {eng.id} uses for a {b.precision} checkpoint)"))
    data.update({
        "model": m.id, "gpu": gpu.id, "engine": {"id": eng.id, "name": eng.name,
                                                 "version": eng.version,
                                                 "scheduler": eng.scheduler},
        "stream": {"kind": stream.kind, "requests": stream.requests,
                   "rate_per_s": stream.rate_per_s, "concurrency": stream.concurrency,
                   "length_dist": stream.dist, "isl": args.isl, "osl": args.osl},
        "kv_dtype_note": kv_note,
        "speculation": eng.speculation.to_dict() if eng.speculation is not None else None,
        "sla": {"ttft_p99_s": res.sla["ttft_s"] or None, "tpot_p99_s": res.sla["tpot_s"] or None,
                "met": res.meets_sla},
        "simulated": [r.to_dict() for r in res.simulated],
        "screened": len(res.screened),
        "pareto": [{"tokens_per_s_per_user": x, "output_tokens_per_s_per_gpu": y, "layout": lab}
                   for x, y, lab in res.pareto],
    })
    heads = (Headline("output tokens/s (deployment)", b.output_tokens_per_s, "token/s"),
             Headline("output tokens/s per GPU", b.output_tokens_per_s_per_gpu, "token/s"),
             Headline("requests/s", b.requests_per_s, "1/s"),
             Headline("TTFT p50 / p99 (ms)", f"{_ms(b.ttft_p50_s):.0f} / {_ms(b.ttft_p99_s):.0f}"),
             Headline("TPOT p50 / p99 (ms)", f"{_ms(b.tpot_p50_s):.1f} / {_ms(b.tpot_p99_s):.1f}"),
             Headline("KV capacity per attention-DP rank" if b.layout.attention_dp else
                      "KV capacity per replica", b.kv_capacity_tokens, "token"),
             Headline("memory per GPU", b.memory_per_gpu_bytes, "B"))
    lay = b.layout
    what = ("disaggregated: " + _row(b)[0]) if b.disaggregated else (
        f"TP{lay.tp} PP{lay.pp} EP{lay.ep}"
        + (f" with attention data parallelism (DEP{lay.tp})" if lay.attention_dp else "")
        + f" x {lay.dp} replicas")
    s1 = Section(
        f"Best: {what}, {b.precision}, max batch {b.max_batch}, token budget {b.token_budget} "
        f"({eng.id})",
        text=(f"{m.id} on {b.gpus} x {gpu.id}, {stream.label()}, ISL {args.isl} / OSL "
              f"{args.osl} ({stream.dist}). {kv_note}. "
              + (f"Speculative decoding: k={eng.speculation.k} drafts per step ("
                 f"{eng.speculation.drafter}), acceptance {eng.speculation.alpha:.3f} per token "
                 f"(i.i.d.), {eng.speculation.tokens_per_step:.2f} tokens per verify step. "
                 if eng.speculation is not None else "")
              + f"Bounds: prefill "
              f"{b.bounds['prefill']}, decode {b.bounds['decode']}. Every figure is from the "
              f"iteration-level simulation of {eng.name} {eng.version}'s scheduler "
              f"({eng.scheduler})."),
        headlines=heads, derivation=d)
    rows = tuple(_row(r) for r in res.simulated)
    s2 = Section(
        "Simulated candidates",
        text=(f"{len(res.screened)} configurations screened by their steady state; these were "
              "simulated with the whole stream."),
        tables=(Table("", ("layout", "GPUs", "precision", "KV", "max batch", "budget",
                           "out tok/s", "out tok/s/GPU", "TTFT p50 (ms)", "TTFT p99 (ms)",
                           "TPOT p50 (ms)", "TPOT p99 (ms)"), rows),))
    sections = [s1, s2]
    if not b.disaggregated:
        es_kv = _kv_section(b, res)
        if es_kv is not None:
            sections.append(es_kv)
    draw = None
    if getattr(args, "plot", None):
        from ..report import plot as _plot

        pts = list(res.screened)

        def draw(out: str) -> None:
            fx = [x for x, _, _ in res.pareto]
            fy = [y for _, y, _ in res.pareto]
            _plot.curves(
                out, title=f"{m.id} on {gpu.id}: throughput vs per-user speed ({eng.id})",
                xlabel="tokens/s per user (1 / TPOT)", ylabel="output tokens/s per GPU",
                lines=[("Pareto front", fx, fy)],
                points=[("screened layouts", [1 / c.est_tpot_s for c in pts
                                              if c.est_tpot_s not in (0.0, float("inf"))],
                         [c.est_out_per_s / c.layout.gpus for c in pts
                          if c.est_tpot_s not in (0.0, float("inf"))]),
                        ("simulated", [r.per_user_tokens_per_s for r in res.simulated],
                         [r.output_tokens_per_s_per_gpu for r in res.simulated])],
                logx=True)
    return Report(f"plan serve: {m.id} on {gpu.id}", tuple(sections), data, plot=draw)


def _kv_section(b: Any, res: Any) -> Any:
    from ..derive import Section

    for c in res.screened:
        if (c.layout == b.layout and c.prec.name == b.precision and c.kv_dtype == b.kv_dtype
                and c.max_batch == b.max_batch):
            return Section("KV pool of one replica, as the engine sizes it",
                           derivation=c.es.kv.derivation)
    return None



def _by_source(s: dict[str, Any]) -> Any:
    from ..derive import Table
    from .validate import _pct

    return Table("by source", ("source", "rows", "mean |error|", "max |error|", "lowest",
                               "highest"),
                 tuple((g["source"], g["rows"], _pct(g["mean_abs_error"], sign=False),
                        _pct(g["max_abs_error"], sign=False), _pct(g["min_error"]),
                        _pct(g["max_error"])) for g in s["by_source"]))


def _published_section(rows: Any, skipped: Any, s: dict[str, Any]) -> Any:
    """The out-of-sample rows (validation/serving_published.csv), every row shown."""
    from ..derive import Headline, Section, Table
    from .validate import _pct

    table = tuple((r.id, r.source, r.engine, r.model,
                   f"{r.dp} x {'DEP' if r.attention_dp else ''}{r.tp} x {r.gpu}",
                   r.precision, f"{r.isl}/{r.osl}", r.stream, r.max_batch, r.metric,
                   f"{r.measured:,.6g}", f"{r.predicted:,.6g}", _pct(r.error)) for r in rows)
    heads = ((Headline("mean absolute error", 100 * s["mape"], "%"),
              Headline("max absolute error", 100 * s["max_ape"], "%")) if rows else ())
    return Section(
        f"Other published serving measurements, out of sample ({len(rows)} priced, "
        f"{len(skipped)} skipped)",
        headlines=heads,
        tables=(_by_source(s),
                Table("rows", ("id", "source", "engine", "model", "replicas x TP x GPU",
                               "precision", "ISL/OSL", "stream", "max batch", "metric",
                               "measured", "predicted", "error"), table),
                Table("skipped", ("id", "why"), tuple((i, w) for i, w in skipped))),
        text="validation/serving_published.csv: MLPerf Inference submissions, TensorRT-LLM "
             "tables from 0.5.0 to 1.0 and later, and engine teams' benchmark posts, each with "
             "its source, settings and the engine profile it is priced with. No constant was "
             "set from these rows; their "
             "errors are as they fall. Rows whose lengths the source does not state are "
             "skipped, with why.")


def validation_report(rows: Any, skipped: Any, s: dict[str, Any],
                      kv: tuple[Any, dict[str, Any]] | None, *, plot: bool = False,
                      published: tuple[Any, Any, dict[str, Any]] | None = None) -> Any:
    """``validate --serving``: throughput rows (and the engines' logged KV rows, ``kv``; the
    out-of-sample published rows, ``published``)."""
    from ..derive import Headline, Report, Section, Table
    from .validate import _errors_plot, _pct

    table = tuple((r.id, r.model, f"{r.tp} x {r.gpu}", r.precision, f"{r.isl}/{r.osl}",
                   r.max_batch, round(r.measured), round(r.predicted), _pct(r.error))
                  for r in rows)
    sec = Section(
        f"Serving throughput, predicted vs measured ({len(rows)} rows)",
        headlines=(Headline("mean absolute error", 100 * s["mape"], "%"),
                   Headline("max absolute error", 100 * s["max_ape"], "%")),
        tables=(_by_source(s),
                Table("rows", ("id", "model", "GPUs", "precision", "ISL/OSL", "max batch",
                               "measured", "predicted", "error"), table)),
        text="Each row is simulated with its engine profile (trtllm-bench's batch tuning, the "
             "engine's KV pool, its scheduler), layout, precision, lengths and request count; "
             "output tokens per second of the whole run are compared. Nothing is fitted to "
             "the rows.")
    data: dict[str, Any] = {"rows": [r.to_dict() for r in rows],
                            "skipped": [{"id": i, "reason": w} for i, w in skipped], **s}
    sections = [sec]
    if published is not None:
        p_rows, p_skipped, p_s = published
        data["published"] = {"rows": [r.to_dict() for r in p_rows],
                             "skipped": [{"id": i, "reason": w} for i, w in p_skipped], **p_s}
        sections.append(_published_section(p_rows, p_skipped, p_s))
    if kv is not None:
        kv_rows, kv_s = kv
        data["kv"] = {"rows": [r.to_dict() for r in kv_rows], **kv_s}
        sections.append(Section(
            f"KV capacity the engine logged, predicted vs measured ({len(kv_rows)} rows)",
            headlines=(Headline("mean absolute error", 100 * kv_s["mape"], "%"),
                       Headline("rows within 3%", kv_s["within_3pct"]),
                       Headline("start / refuse right", f"{kv_s['start_matches']} of "
                                f"{kv_s['start_rows']}")),
            tables=(Table("rows", ("id", "engine", "model", "GPUs", "measured tokens",
                                   "predicted tokens", "error", "KV GiB logged / predicted",
                                   "started", "predicted"),
                          tuple((r.id, f"{r.engine} {r.engine_version}", r.model,
                                 f"{r.tp} x {r.gpu}", r.measured_tokens or "-",
                                 r.predicted_tokens,
                                 _pct(r.error) if r.error is not None else "-",
                                 (f"{r.measured_kv_gib:.2f} / " if r.measured_kv_gib is not None
                                  else "- / ") + f"{r.predicted_kv_gib:.2f}",
                                 "yes" if r.measured_started else "no",
                                 "yes" if r.predicted_started else "no")
                                for r in kv_rows)),)))
    warnings = tuple(f"row {i} skipped: {w}" for i, w in skipped)
    draw = _errors_plot(f"validate --serving: {len(rows)} rows", rows, s,
                        lambda r: f"{r.model} tp{r.tp}") if plot and rows else None
    return Report("scalemodel validate --serving: serving planner", tuple(sections), data,
                  warnings=warnings, plot=draw)
