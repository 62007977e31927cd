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
        rows = tuple((f.id + (" (default)" if f.id == default else ""), f.kind, f.name,
                      f.version, ", ".join(f"{a}={v}" for a, v in
                                           (f.get("attention") or {}).items()),
                      f.get("kernels"), f.get("schedule"), f.source) for f in items)
        cols = ("id", "kind", "framework", "version", "attention", "kernels", "schedule",
                "source")
        data = [f.to_dict() | {"default": f.id == default} for f in items]
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
