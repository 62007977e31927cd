"""The serving planner against published serving measurements (validation/serving_runs.csv, and
the out-of-sample rows of validation/serving_published.csv): every row is simulated with its
engine profile, layout, precision, lengths and stream, and the predicted figure compared with the
measured one. Nothing is fitted to the rows."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...errors import BadInput

REQUIRED = ("id", "source", "engine", "model", "gpu", "tp", "pp", "precision", "isl", "osl",
            "requests", "stream", "metric", "measured")
METRICS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s",
           "output_tokens_per_s_per_gpu", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
           "ttft_mean_s", "tpot_mean_s", "slo_requests_per_s")
# slo_requests_per_s (MLPerf Server's result): the completed requests/s of the highest Poisson rate
# whose run keeps p99 TTFT within the row's slo_ttft_p99_s and p99 TPOT within its slo_tpot_p99_s
SLO_METRICS = ("slo_requests_per_s",)
# the published-measurement file (serving_published.csv) also names where each figure was read
PUBLISHED_REQUIRED = REQUIRED + ("url", "date", "engine_version", "length_basis", "location")
STREAMS = ("max-load", "rate", "concurrency")


@dataclass(frozen=True)
class ServingRow:
    id: str
    source: str
    engine: str
    model: str
    gpu: str
    tp: int
    pp: int
    precision: str
    isl: int
    osl: int
    metric: str
    measured: float
    predicted: float
    error: float  # predicted / measured - 1
    max_batch: int
    token_budget: int
    kv_capacity_tokens: int
    dp: int = 1
    stream: str = "max-load"
    engine_version: str = ""
    url: str = ""
    length_dist: str = "fixed"  # or the bundled table the lengths were drawn from
    attention_dp: bool = False  # the run's layout was attention data parallel (DEPtp)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _model(ref: str, base: Path) -> Any:
    from ...specs import get_model

    if ref.endswith(".json") and not Path(ref).is_absolute():
        return get_model(str(base / ref))
    return get_model(ref)


def _number(row: dict[str, str], key: str, kind: type = float, *, default: Any = None) -> Any:
    """A numeric field; empty gives ``default``; anything else unreadable is bad input."""
    raw = (row.get(key) or "").strip()
    if not raw:
        if default is None:
            raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: column {key!r} "
                           "is empty")
        return default
    try:
        v = kind(raw)
    except ValueError:
        raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: column {key!r} is "
                       f"not a{'n integer' if kind is int else ' number'} ({raw!r})") from None
    if not v == v or v < 0:  # NaN or negative
        raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: column {key!r} must "
                       f"be a non-negative number, got {raw!r}")
    return v


def _at_least_one(row: dict[str, str], **values: int) -> None:
    """Counts a run cannot have fewer than one of (GPUs of a split, tokens of a request,
    requests of a stream), as the CLI's flags refuse them: a 0 is bad input, not a row priced."""
    for key, v in values.items():
        if v < 1:
            raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: column {key!r} "
                           f"must be at least 1, got {row.get(key)!r}")


def length_dist(row: dict[str, str]) -> str:
    """The length distribution a row's ``length_basis`` names: ``dist:NAME`` at its start (NAME a
    bundled per-request table, e.g. ``dist:sharegpt``) draws each request's (input, output)
    lengths from that table scaled to the row's isl / osl means; anything else is fixed lengths.
    An unknown NAME is bad input."""
    from .streams import TABLES

    basis = (row.get("length_basis") or "").strip()
    if not basis.startswith("dist:"):
        return "fixed"
    name = basis[5:].split(None, 1)[0].rstrip(";,.:") if basis[5:].strip() else ""
    if name not in TABLES:
        raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: length_basis names "
                       f"dist:{name!r}, not one of {', '.join('dist:' + t for t in TABLES)}")
    return name


def row_speculation(row: dict[str, str]) -> Any:
    """The speculative decoding a row's ``length_basis`` states: a token ``spec:k=N/al=L`` (or
    ``/alpha=A``, ``/draft=mtp|eagle|model``, the fields of plan serve --spec joined by "/"),
    the source's draft count and its measured acceptance length taken as the input (never
    fitted); None where the row names none. A malformed token is bad input."""
    import re

    from .speculative import parse

    basis = row.get("length_basis") or ""
    hit = re.search(r"(?:^|[\s;(])spec:(\S+)", basis)
    if not hit:
        return None
    try:
        return parse(hit.group(1).rstrip(";,.)").replace("/", ","))
    except BadInput as e:
        raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: length_basis "
                       f"{hit.group(0).strip()!r}: {e}") from None


def row_prefix(row: dict[str, str]) -> tuple[int, float]:
    """The shared prompt prefix a row's ``length_basis`` states: a word ``prefix:P/F`` (P
    tokens shared by a fraction F of the requests, as ``plan serve --prefix-tokens P
    --prefix-share F``); (0, 1.0) where none is named. A malformed one is bad input."""
    basis = (row.get("length_basis") or "").strip()
    words = [w.rstrip(";,.") for w in basis.split() if w.startswith("prefix:")]
    if not words:
        return 0, 1.0
    try:
        p, f = words[0][7:].split("/")
        return int(p), float(f)
    except ValueError:
        raise BadInput(f"serving validation CSV row {row.get('id', '?')!r}: length_basis names "
                       f"{words[0]!r}, not prefix:TOKENS/SHARE") from None


# (CSV text, base, rows asked for, required columns, the model files' stat) -> the priced rows.
# The pricing is a pure function of these (the bundled specs do not change inside a process), so a
# second call (the web app's `validate --serving` after a test or an earlier request priced the
# same file) reads the result instead of re-running some 750 seeded simulations.
_RESULTS: dict[tuple[Any, ...], tuple[tuple[ServingRow, ...], tuple[tuple[str, str], ...]]] = {}
_RESULTS_MAX = 8


def _model_files(text: str, base: Path) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime_ns, size) of every existing file the CSV's model column names, so an edited
    model file is priced afresh."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    seen: set[str] = set()
    out = []
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        name = (row.get("model") or "").strip()
        if not name or name in seen:
            continue
        seen.add(name)
        f = base / name
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((str(f), st.st_mtime_ns, st.st_size))
    return tuple(out)


def validate_serving(text: str, base: Path, only: set[str] | None = None, *,
                     required: tuple[str, ...] = REQUIRED
                     ) -> tuple[list[ServingRow], list[tuple[str, str]]]:
    """(results, skipped rows with the reason) of a serving validation CSV, remembered per input
    (see ``_RESULTS``); ``_price_serving`` does the work."""
    key = (text, str(Path(base).resolve()), frozenset(only) if only else None, required,
           _model_files(text, Path(base)))
    hit = _RESULTS.get(key)
    if hit is None:
        rows, skipped = _price_serving(text, base, only, required=required)
        hit = (tuple(rows), tuple(skipped))
        if len(_RESULTS) >= _RESULTS_MAX:
            _RESULTS.pop(next(iter(_RESULTS)))
        _RESULTS[key] = hit
    return list(hit[0]), list(hit[1])


def _price_serving(text: str, base: Path, only: set[str] | None = None, *,
                   required: tuple[str, ...] = REQUIRED
                   ) -> tuple[list[ServingRow], list[tuple[str, str]]]:
    """(results, skipped rows with the reason) of a serving validation CSV; ``base`` is the
    folder model paths are relative to. Optional columns: ep (experts over that many of the TP
    ranks), dp (replicas the figure covers),
    max_batch, kv_fraction and max_num_tokens (what the run set: batch limit, KV-pool fraction,
    tokens per iteration), rate and concurrency (the stream's); a length_basis starting
    ``dist:NAME`` draws the lengths from a bundled table (``length_dist``). A row
    whose isl or osl is empty (the source does not state it) is skipped with its
    length_basis; a malformed number is bad input."""
    from dataclasses import replace

    from ...specs import get_gpu
    from .engine import get_serving_engine
    from .iteration import ServeLayout, precision
    from .service import evaluate, slo_rate
    from .streams import Stream

    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    rd = csv.DictReader(io.StringIO("\n".join(lines)))
    missing = [k for k in required if k not in (rd.fieldnames or [])]
    if missing:
        raise BadInput(f"serving validation CSV: missing column(s) {', '.join(missing)}")
    out: list[ServingRow] = []
    skipped: list[tuple[str, str]] = []
    # rows of one run (its TTFT, TPOT and throughput figures) price the same seeded simulation:
    # run it once per configuration
    memo: dict[tuple[Any, ...], Any] = {}
    for row in rd:
        rid = row["id"]
        if only and rid not in only:
            continue
        meas = _number(row, "measured")
        if not meas > 0:
            raise BadInput(f"serving validation CSV row {rid!r}: column 'measured' must be a "
                           f"positive number, got {row.get('measured')!r}")
        tp, pp = _number(row, "tp", int), _number(row, "pp", int)
        dp = _number(row, "dp", int, default=1)
        ep = _number(row, "ep", int, default=1)
        requests = _number(row, "requests", int)
        _at_least_one(row, tp=tp, pp=pp, dp=dp, ep=ep, requests=requests)
        max_batch = _number(row, "max_batch", int, default=0) or None
        max_tokens = _number(row, "max_num_tokens", int, default=0) or None
        kv_frac = _number(row, "kv_fraction", default=0.0) or None
        if kv_frac is not None and not 0 < kv_frac <= 1:
            raise BadInput(f"serving validation CSV row {rid!r}: column 'kv_fraction' must be "
                           f"in (0, 1], got {row.get('kv_fraction')!r}")
        rate = _number(row, "rate", default=0.0)
        conc = _number(row, "concurrency", int, default=0)
        dist = length_dist(row)
        pfx_tokens, pfx_share = row_prefix(row)
        if not (row.get("isl") or "").strip() or not (row.get("osl") or "").strip():
            skipped.append((rid, "input or output length not stated by the source: "
                                 + (row.get("length_basis") or "no length_basis given")))
            continue
        isl, osl = _number(row, "isl", int), _number(row, "osl", int)
        _at_least_one(row, isl=isl, osl=osl)
        try:
            if row["metric"] not in METRICS:
                raise BadInput(f"metric {row['metric']!r} is not one of {', '.join(METRICS)}")
            if row["stream"] not in STREAMS:
                raise BadInput(f"stream {row['stream']!r} is not one of {', '.join(STREAMS)}")
            gpu = get_gpu(row["gpu"])
            m = _model(row["model"], base)
            eng = get_serving_engine(row["engine"])
            sp = row_speculation(row)
            if sp is not None:  # the run's speculative decoding (its stated acceptance)
                from .speculative import engine_check, model_check

                engine_check(eng, sp)
                model_check(m, sp)
                eng = replace(eng, speculation=sp)
            if kv_frac is not None:  # the fraction the published run set (a flag of that run)
                eng = replace(eng, kv_fraction=kv_frac)
            prec = precision(row["precision"])
            lay = ServeLayout(tp, pp, ep=ep, dp=dp,
                              attention_dp=str(row.get("attention_dp") or "").lower()
                              in ("1", "true"))
            stream = Stream(row["stream"], requests, rate_per_s=rate, concurrency=conc,
                            dist=dist, prefix_tokens=pfx_tokens, prefix_share=pfx_share)
            slo = None
            if row["metric"] in SLO_METRICS:
                if row["stream"] != "rate":
                    raise BadInput(f"metric {row['metric']} needs stream rate (the first guess)")
                slo = (_number(row, "slo_ttft_p99_s"), _number(row, "slo_tpot_p99_s"))
            key = (row["model"], gpu.id, eng.id, kv_frac, prec.name, lay, stream, isl, osl,
                   max_batch, max_tokens, slo, sp)
            if key not in memo:
                if slo is None:
                    memo[key] = evaluate(m, gpu, lay, prec, eng.default_kv_dtype(prec), eng,
                                         stream, isl, osl, max_batch=max_batch,
                                         token_budget=max_tokens)
                else:
                    memo[key] = slo_rate(m, gpu, lay, prec, eng.default_kv_dtype(prec), eng,
                                         stream, isl, osl, ttft_p99_s=slo[0],
                                         tpot_p99_s=slo[1], max_batch=max_batch,
                                         token_budget=max_tokens).result
            r = memo[key]
        except BadInput as e:
            skipped.append((rid, str(e)))
            continue
        except ValueError as e:
            skipped.append((rid, f"unreadable field ({e})"))
            continue
        metric = "requests_per_s" if row["metric"] in SLO_METRICS else row["metric"]
        pred = float(getattr(r, metric))
        out.append(ServingRow(rid, row["source"], eng.id, m.id, gpu.id, lay.tp, lay.pp,
                              prec.name, isl, osl, row["metric"], meas, pred,
                              pred / meas - 1 if meas else float("inf"), r.max_batch,
                              r.token_budget, r.kv_capacity_tokens, dp=lay.dp,
                              stream=row["stream"], engine_version=row.get("engine_version", ""),
                              url=row.get("url", ""), length_dist=dist,
                              attention_dp=lay.attention_dp))
    return out, skipped


def validate_published(text: str, base: Path, only: set[str] | None = None
                       ) -> tuple[list[ServingRow], list[tuple[str, str]]]:
    """validation/serving_published.csv: the same pricing, with each row's provenance columns
    required."""
    return validate_serving(text, base, only, required=PUBLISHED_REQUIRED)


def summary(rows: list[ServingRow]) -> dict[str, Any]:
    errs = [abs(r.error) for r in rows]
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r.source, []).append(r.error)
    return {"row_count": len(rows), "mape": sum(errs) / len(errs) if errs else float("nan"),
            "max_ape": max(errs) if errs else float("nan"),
            "by_source": [{"source": k, "rows": len(v), "mean_abs_error":
                           sum(map(abs, v)) / len(v), "max_abs_error": max(map(abs, v)),
                           "min_error": min(v), "max_error": max(v)}
                          for k, v in by.items()]}
