"""View of the spec data: the bundled GPUs, links, models, optimizers, frameworks and sources,
one table each, with the source of each figure."""

from __future__ import annotations

from typing import Any


def specs_report(k: str, one: str | None = None) -> Any:
    """``scalemodel specs KIND [ID]``: the rows as printed, the items in full under --json."""
    from .. import specs
    from ..analytic.params import count_params
    from ..derive import Report, Section, Table
    from ..errors import BadInput

    if k == "gpus":
        items = [specs.get_gpu(i) for i in ([one] if one else specs.gpu_ids())]
        rows = tuple((g.id, g.name, g.hbm_bytes / 2**30, g.hbm_bytes_per_s / 1e12,
                      g.flop_per_s.get("bf16", 0) / 1e12, g.flop_per_s.get("fp8", 0) / 1e12,
                      g.scale_up_bytes_per_s / 1e9, g.source_of("hbm_bytes")) for g in items)
        cols = ("id", "name", "HBM GiB", "HBM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s",
                "scale-up GB/s/dir", "source")
        data = [{"id": g.id, "name": g.name, "hbm_bytes": g.hbm_bytes,
                 "hbm_bytes_per_s": g.hbm_bytes_per_s, "flop_per_s": dict(g.flop_per_s),
                 "sm_count": g.sm_count, "boost_clock_hz": g.boost_clock_hz,
                 "peak_clock_hz": g.peak_clock_hz, "sustained_clock_hz": g.sustained_clock_hz,
                 "sustained_gemm_ratio": g.sustained_gemm_ratio,
                 "gemm_burst_efficiency": g.gemm_burst_efficiency,
                 "sustained_fraction": g.sustained_fraction,
                 "sustained_basis": g.sustained_basis, "fp8_gemm_ratio": g.fp8_gemm_ratio,
                 "sm": dict(g.sm), "interconnect": dict(g.interconnect),
                 "source": g.source_of(""),
                 "sources": {k: g.source_of(k) for k in g.field_sources},
                 "notes": g.notes} for g in items]
    elif k == "links":
        items = [specs.get_link(i) for i in ([one] if one else specs.link_ids())]
        rows = tuple((li.id, li.name, li.kind, li.bytes_per_s_per_direction / 1e9,
                      li.latency_s * 1e6, li.source_of("bytes_per_s_per_direction")) for li in items)
        cols = ("id", "name", "kind", "GB/s per direction", "latency us", "source")
        data = [{"id": li.id, "name": li.name, "kind": li.kind,
                 "bytes_per_s_per_direction": li.bytes_per_s_per_direction,
                 "latency_s": li.latency_s, "notes": li.notes} for li in items]
    elif k == "models":
        items = [specs.get_model(i) for i in ([one] if one else specs.model_ids())]
        rows = []
        data = []
        for m in items:
            pc = count_params(m)
            rows.append((m.id, m.family, m.attention, m.n_layers, m.hidden, m.n_heads,
                         m.n_kv_heads, pc.total / 1e9, pc.active / 1e9, m.source))
            data.append({"id": m.id, "family": m.family, "attention": m.attention,
                         "params": pc.total, "active_params": pc.active,
                         **{f: getattr(m, f) for f in ("n_layers", "hidden", "n_heads",
                                                       "n_kv_heads", "head_dim", "ffn", "vocab",
                                                       "max_context", "sliding_window",
                                                       "attn_softcap", "final_softcap")},
                         "sliding_layers": list(m.sliding_layers),
                         "quantization": m.quant.__dict__ if m.quant else None,
                         "notes": list(m.notes),
                         "source": m.source})
        rows = tuple(rows)
        cols = ("id", "family", "attn", "L", "h", "heads", "kv heads", "params B", "active B",
                "source")
    elif k == "optimizers":
        items = [specs.optimizer(i) for i in ([one] if one else specs.optimizer_ids())]
        rows = tuple((o.id, o.label, o.master_bytes, o.state_bytes, o.source) for o in items)
        cols = ("id", "what", "master B/param", "state B/param", "source")
        data = [o.__dict__ for o in items]
    elif k == "frameworks":
        from ..specs.frameworks import default_framework_id, framework_ids, get_framework

        items = [get_framework(i) for i in ([one] if one else framework_ids())]
        default = default_framework_id()
        train = [f for f in items if f.kind != "serving"]
        rows = tuple((f.id + (" (default)" if f.id == default else ""), f.kind, f.name,
                      f.version, ", ".join(f"{a}={v}" for a, v in
                                           (f.get("attention") or {}).items()),
                      f.get("kernels"), f.get("schedule"), _fp8_scaling(f), f.cudnn_version,
                      f.source)
                     for f in train)
        cols = ("id", "kind", "framework", "version", "attention", "kernels", "schedule",
                "fp8 scaling", "cuDNN", "source")
        data = [f.to_dict() | {"default": f.id == default} for f in items]
        tables = ((Table("training", cols, rows),) if train else ()) + tuple(
            _engine_table([f for f in items if f.kind == "serving"]))
        return Report(f"scalemodel specs {k}", (Section("", tables=tables),),
                      {"kind": k, "items": data})
    else:
        allsrc = specs.all_sources()
        if one and one not in allsrc:
            raise BadInput(f"unknown source key {one!r}")
        items = [allsrc[one]] if one else list(allsrc.values())
        rows = tuple((s.key, s.kind, s.date, s.title, s.url) for s in items)
        cols = ("key", "kind", "date", "title", "url")
        data = [s.__dict__ for s in items]
    return Report(f"scalemodel specs {k}", (Section("", tables=(Table("", cols, rows),)),),
                  {"kind": k, "items": data})


def _fp8_scaling(f: Any) -> str:
    """A training profile's fp8 scaling recipe and its per model / GPU entries, in one cell."""
    from ..specs.frameworks import fp8_scaling_of

    base = fp8_scaling_of(f, None, None)[0]
    if f.get("fp8_recipe") == "none":  # the framework trains no fp8
        return "none"
    groups: dict[tuple[str, str], list[str]] = {}
    for r in f.get("fp8_scaling_recipes") or ():
        if r["scaling"] != base:
            groups.setdefault((r["scaling"], r["gpu"]), []).append(r["model"])
    extra = [f"{k}: {', '.join(ms)} on {g}" for (k, g), ms in groups.items()]
    return base + (f" ({'; '.join(extra)})" if extra else "")


# how each engine sizes its KV pool, in words (frameworks.toml kv_pool)
_KV_POOL = {
    "util_of_total": "u x total - weights - profile peak - non-torch",
    "fraction_of_free_after_profile": "f x (total - profile peak - non-torch)",
    "fraction_of_free_after_load": "f x free once the engine is loaded",
    "static_fraction": "f x free at start - weights",
}


def _engine_table(engines: list[Any]) -> Any:
    """Serving engine profiles with their own columns: what the KV fraction is taken of, the
    token budget, the batch limit and the scheduler."""
    from ..derive import Table

    if not engines:
        return ()

    def frac(f: Any) -> str:
        by = f.get("util_by_tp")
        u = f"{f.get('util_default'):g}"
        if by:
            u += " (by TP: " + ", ".join(f"{t}:{v:g}" for t, v in by.items()) + ")"
        if f.get("kv_fraction"):
            u += f"; published runs {f.get('kv_fraction'):g}"
        return u

    def _named(f: Any) -> str:
        names = f.get("small_gpu_device_names") or []
        return "".join(f" or named *{n}*" for n in names)

    def budget(f: Any) -> str:
        if f.get("batch_rule") == "trtllm-bench":
            return "trtllm-bench tuning from the dataset's lengths"
        b = f"{f.get('token_budget_default'):,}"
        if f.get("token_budget_rule") == "max_model_len_unless_chunked":
            b = f"max(max_model_len, {f.get('token_budget_default'):,}) unchunked"
        if f.get("small_gpu_bytes"):
            b += (f"; {f.get('small_gpu_token_budget'):,} under "
                  f"{f.get('small_gpu_bytes') / 2**30:.0f} GiB{_named(f)}")
        by_name = f.get("token_budget_by_device_name") or {}
        if by_name:
            named = "; ".join(f"{t:,} on {k.upper()}" for k, t in by_name.items())
            b = f"{named}; {b} on other GPUs"
        return b

    def batch(f: Any) -> str:
        if f.get("batch_rule") == "trtllm-bench":
            return "trtllm-bench tuning"
        b = f"{f.get('max_num_seqs_default'):,}"
        if f.get("small_gpu_bytes") and f.get("small_gpu_max_num_seqs"):
            b += (f"; {f.get('small_gpu_max_num_seqs'):,} under "
                  f"{f.get('small_gpu_bytes') / 2**30:.0f} GiB{_named(f)}")
        return b

    def sched(f: Any) -> str:
        res = {"full": "no-evict (whole sequence reserved)",
               "on_demand": "blocks on demand, preemption"}.get(f.get("reserve"), "-")
        above = f.get("chunked_prefill_above_len") or 0
        chunk = ("chunked prefill" if f.get("chunked_prefill") else
                 f"chunked prefill above {above:,} tokens" if above else "no chunked prefill")
        return f"{res}; {chunk}"

    rows = tuple((f.id, f.name, f.version, _KV_POOL.get(f.get("kv_pool"), f.get("kv_pool")),
                  frac(f), budget(f), batch(f),
                  f.get("block_size"), sched(f), f.source) for f in engines)
    return (Table("serving engines (plan serve, kv --framework)",
                  ("id", "engine", "version", "KV pool", "fraction", "token budget",
                   "max batch", "block", "scheduler", "source"), rows),)
