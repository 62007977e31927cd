"""What kind of evidence every constant of the training planner rests on.

The constants are read where they live (planner.toml, kernels.toml, collectives.toml, the
planner's fields of gpus.toml and links.toml, the frameworks' fields the step model reads, the
planner's assumptions in numerics.toml); each is traced to its source key by the file's own
convention, and the source to one kind of evidence:

* ``datasheet``: a vendor's published specification;
* ``microbenchmark``: a measurement of the part itself (one GEMM, one attention kernel, one
  collective, a kernel's slowdown beside a collective), by us or in a paper;
* ``framework source``: what a framework's code, configuration or documentation does, at a
  version (byte counts read off the code, defaults, recipes);
* ``end-to-end run``: a constant set from whole training runs' throughput;
* ``assumption``: a planning choice or a borrowed curve, said so in its note.

The kind of each source is data (evidence.toml ``[kinds]``); a source it does not list takes
the kind its registry entry implies where that is unambiguous (datasheet, assumption, code,
config, vendor-doc, documentation). A constant whose source is neither is ``unclassified``, which
the tests refuse. ``end_to_end_constants()`` is what ``scalemodel validate --cv`` re-derives.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from .sources import all_sources, load_toml

EVIDENCE_KINDS = ("datasheet", "microbenchmark", "framework source", "end-to-end run",
                  "assumption")
# registry kinds whose evidence is unambiguous; papers and measurements are listed one by one
_BY_REGISTRY_KIND = {"datasheet": "datasheet", "assumption": "assumption",
                     "code": "framework source", "config": "framework source",
                     "vendor-doc": "framework source", "documentation": "framework source"}
# the gpus.toml and links.toml fields the step model reads
GPU_FIELDS = ("flop_per_s.bf16", "flop_per_s.fp8", "hbm_bytes", "hbm_bytes_per_s", "sm_count",
              "peak_clock_hz", "sustained_clock_hz", "sustained_gemm_ratio", "gemm_burst_efficiency",
              "fp8_gemm_ratio",
              "fp4_gemm_ratio", "interconnect.scale_up_bytes_per_s_per_direction",
              "interconnect.host_bytes_per_s_per_direction")
LINK_FIELDS = ("bytes_per_s_per_direction", "latency_s")
# the framework profile fields the step model reads (frameworks.toml header)
FRAMEWORK_FIELDS = ("attention", "kernels", "grad_accum_fusion", "schedule", "ep_overlap",
                    "grad_reduce_bytes", "dp_bucket_params", "optimizer_step_bytes",
                    "unsharded_grad_pass_bytes", "sharded_grad_pass_bytes",
                    "unsharded_step_grad_bytes", "grad_buffer_bytes", "ep_dispatch",
                    "ep_dispatch_kernel", "ep_comm_sms",
                    "moe_recipes", "tp_overlap", "tp_overlap_kind", "dp_overlap", "param_gather_overlap",
                    "sequence_parallel",
                    "parallelisms", "pp_p2p_overlap", "recompute_options", "cp_exchange",
                    "cp_merge_bytes", "cp_merge_bytes_compiled", "cp_grad_bytes", "cp_kv_heads",
                    "cp_gather_overlap", "cp_compiled_overlap", "cp_load_balance",
                    "fp8_saved_input", "fp8_attn_out_saved", "fp8_moe_act_input_saved",
                    "optimizer",
                    "ep_overlap_full_recompute", "moe_routing", "expert_ranks", "moe_fp8_padding", "reserved_bytes",
                    "nccl_comm_bytes", "allocator_slack", "pipeline_zero_max", "replicate_1d_only",
                    "pipeline_split",
                    "fp8_scaling",
                    "fp8_scaling_recipes", "model_recipes", "pp_ep_overlap_warmup", "pp_reshard_after_forward",
                    "pp_grad_accum_bytes", "ddp_bucket_bytes", "loss_logit_bytes", "loss_logit_bytes_tp",
                    "moe_probs_in_expert_act", "fsdp_copy_bytes", "fsdp_root_group",
                    "fsdp_root_exposed_blocks",
                    "mtp_embedding_copy", "fp8_block_gemm", "pp_recv_gather", "pp_p2p_calls",
                    "moe_layer_host", "activation_offload_recipes", "fp8_param_gather",
                    "fp8_param_gather_fsdp")
PLANNER_ASSUMPTIONS = ("gpus_per_node",)


@dataclass(frozen=True)
class Constant:
    name: str  # where it lives: "planner.toml [gemm] anchor_efficiency"
    value: str
    source: str  # a source registry key ("" when none is recorded)
    evidence: str  # one of EVIDENCE_KINDS, "unclassified" or "no source recorded"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source,
                "evidence": self.evidence}


@cache
def _source_kinds() -> dict[str, str]:
    return dict(load_toml("evidence.toml").get("kinds", {}))


def evidence_of(key: str) -> str:
    """The kind of evidence of one source key."""
    if not key:
        return "no source recorded"
    listed = _source_kinds().get(key)
    if listed:
        return listed
    src = all_sources().get(key)
    return _BY_REGISTRY_KIND.get(src.kind if src else "", "unclassified")


def _text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    return str(v)


def _meta(k: str) -> bool:
    return k in ("source", "note", "notes") or k.endswith(("_source", "_note"))


def _own_source(k: str, table: dict[str, Any]) -> str:
    """planner.toml's convention: ``K_source``, else the longest ``P_source`` whose P is a
    leading part of K (``anchor_source`` for ``anchor_efficiency``), else the section's
    ``source``."""
    parts = k.split("_")
    for n in range(len(parts), 0, -1):
        s = table.get("_".join(parts[:n]) + "_source")
        if isinstance(s, str):
            return s
    s = table.get("source")
    return s if isinstance(s, str) else ""


def _planner_toml() -> list[tuple[str, str, str]]:
    out = []
    for sec, table in load_toml("planner.toml").items():
        for k, v in table.items():
            if not _meta(k):
                out.append((f"planner.toml [{sec}] {k}", _text(v), _own_source(k, table)))
    return out


def _kernel_value(e: dict[str, Any]) -> str:
    if "curves" in e:
        return "; ".join(f"head dim {c['head_dim']}: {c['lengths'][0]}-{c['lengths'][-1]} "
                         "tokens" for c in e["curves"]) + f" (at {e.get('peak_tflops')} TF peak)"
    keys = [k for k in e if k not in ("measured_on", "source", "note", "borrows", "curves")
            and not k.startswith("clocks")]
    return ", ".join(f"{k}={_text(e[k])}" for k in keys)


def _kernels_toml() -> list[tuple[str, str, str]]:
    out = []
    data = load_toml("kernels.toml")
    for arch, e in data.get("gemm", {}).items():
        name = f"kernels.toml [gemm.{arch}]"
        if "borrows" in e:
            out.append((name, f"borrows {e['borrows']}", "scalemodel-assumption"))
        else:
            out.append((name, f"tile {e['tile_m']}x{e['tile_n']}x{e['tile_k']}", e.get("source", "")))
        if "k_overhead" in e:
            out.append((f"{name} k_overhead", _text(e["k_overhead"]), e.get("k_overhead_source", "")))
    for arch, e in data.get("fp8_gemm", {}).items():
        out.append((f"kernels.toml [fp8_gemm.{arch}]", _kernel_value(e), e.get("source", "")))
    # the rates by K are derived from these measured shapes in analytic/step/gemm.py
    # (block_gemm_rates); specs sits below analytic, so the table lists the measurements
    for kern, t in data.get("fp8_block_gemm", {}).items():
        for arch, e in t.items():
            n = len(e.get("dense", ())) + len(e.get("grouped_contiguous", ()))
            out.append((f"kernels.toml [fp8_block_gemm.{kern}.{arch}]",
                        f"measured on {e.get('measured_on')}: {n} shapes (TFLOP/s by M, N, K)",
                        e.get("source", "")))
    for fam, t in data.get("attention", {}).items():
        for arch, e in t.items():
            if not isinstance(e, dict):
                continue
            name = f"kernels.toml [attention.{fam}.{arch}]"
            if "borrows" in e:
                out.append((name, f"borrows {e['borrows']}", "scalemodel-assumption"))
            elif "source" in e:
                out.append((name, _kernel_value(e), e["source"]))
            if "clocks" in e:  # how the source timed it (burst: the step keeps the sustained share)
                out.append((f"{name} clocks", f"{e['clocks']} (x the GPU's sustained share)",
                            e.get("clocks_source", "")))
    # one part timed against another of its architecture (step/attention.py part_ratio)
    for fam, t in data.get("attention_part", {}).items():
        for gpu, e in t.items():
            lens = e.get("lengths", ())
            out.append((f"kernels.toml [attention_part.{fam}.{gpu}]",
                        f"time ratio over {e.get('reference')}: {len(lens)} lengths "
                        f"{min(lens)}-{max(lens)}, fwd / bwd, causal / full", e.get("source", "")))
    return out


def _sectioned(name: str) -> list[tuple[str, str, str]]:
    """collectives.toml: every section (two levels) with its own ``source``."""
    out = []

    def walk(prefix: str, t: dict[str, Any]) -> None:
        if "source" in t:
            vals = {k: v for k, v in t.items() if not _meta(k) and k != "mechanism"}
            out.append((f"{name} [{prefix}]", _text(vals), t["source"]))
            return
        for k, v in t.items():
            if isinstance(v, dict):
                walk(f"{prefix}.{k}" if prefix else k, v)

    walk("", load_toml(name))
    return out


def _get(t: dict[str, Any], path: str) -> Any:
    for p in path.split("."):
        if not isinstance(t, dict) or p not in t:
            return None
        t = t[p]
    return t


def _grouped(name: str, items: dict[str, Any], fields: tuple[str, ...]
             ) -> list[tuple[str, str, str]]:
    """gpus.toml / links.toml: one row per field and source key, listing each entry's value."""
    out = []
    for f in fields:
        groups: dict[str, list[str]] = {}
        for eid, t in items.items():
            v = _get(t, f)
            if v is None:
                continue
            srcs = t.get("sources", {})
            parts = f.split(".")
            key = next((srcs[".".join(parts[:n])] for n in range(len(parts), 0, -1)
                        if ".".join(parts[:n]) in srcs), t.get("source", ""))
            groups.setdefault(key, []).append(f"{eid} {_text(v)}")
        for key, vals in groups.items():
            out.append((f"{name} {f}", "; ".join(vals), key))
    return out


def _frameworks() -> list[tuple[str, str, str]]:
    # training profiles only: the serving engines' fields (their attention family too) are read
    # by plan serve, not by the training planner this table covers
    profiles = {k: t for k, t in load_toml("frameworks.toml").get("profiles", {}).items()
                if t.get("kind") != "serving"}
    out = []
    for f in FRAMEWORK_FIELDS:
        groups: dict[str, list[str]] = {}
        for pid, t in profiles.items():
            if f in t:  # a profile that extends another and does not set f inherits its row
                groups.setdefault(t.get(f"{f}_source", ""), []).append(f"{pid} {_text(t[f])}")
        for key, vals in groups.items():
            out.append((f"frameworks.toml {f}", "; ".join(vals), key))
    return out


def _assumptions() -> list[tuple[str, str, str]]:
    a = load_toml("numerics.toml").get("assumptions", {})
    return [(f"numerics.toml [assumptions.{k}]", _text(a[k]["value"]), a[k].get("source", ""))
            for k in PLANNER_ASSUMPTIONS if k in a]


def planner_constants() -> list[Constant]:
    """Every constant the training planner reads, with its source and kind of evidence."""
    rows = (_planner_toml() + _kernels_toml() + _sectioned("collectives.toml")
            + _grouped("gpus.toml", {k: v for k, v in load_toml("gpus.toml").items()
                                     if isinstance(v, dict)}, GPU_FIELDS)
            + _grouped("links.toml", {k: v for k, v in load_toml("links.toml").items()
                                      if isinstance(v, dict)}, LINK_FIELDS)
            + _frameworks() + _assumptions())
    return [Constant(n, v, s, evidence_of(s)) for n, v, s in rows]


def end_to_end_constants() -> list[Constant]:
    """The constants set from end-to-end training runs (what cross-validation re-derives)."""
    return [c for c in planner_constants() if c.evidence == "end-to-end run"]


def _cell(s: str, width: int = 160) -> str:
    s = s.replace("|", "/").replace("\n", " ")
    return s if len(s) <= width else s[: width - 3] + "..."


def constants_table_markdown() -> str:
    """The Markdown table of docs/planner.md "Evidence behind every constant" (generated)."""
    cs = planner_constants()
    counts = {k: sum(c.evidence == k for c in cs) for k in
              (*EVIDENCE_KINDS, "no source recorded", "unclassified")}
    lines = ["| constant | value | evidence | source |", "|---|---|---|---|"]
    lines += [f"| {_cell(c.name)} | {_cell(c.value)} | {c.evidence} | {c.source or '-'} |"
              for c in cs]
    summary = ", ".join(f"{k} {n}" for k, n in counts.items() if n)
    return f"{len(cs)} constants: {summary}.\n\n" + "\n".join(lines) + "\n"


TABLE_START = "<!-- constants-table: generated by `python -m scalemodel.specs.evidence --write docs/planner.md`; do not edit by hand -->"
TABLE_END = "<!-- constants-table end -->"


def with_table(doc: str) -> str:
    """``doc`` (docs/planner.md's text) with the generated table between its two markers."""
    i, j = doc.find(TABLE_START), doc.find(TABLE_END)
    if i < 0 or j < i:
        raise ValueError("docs/planner.md lacks the constants-table markers")
    return doc[: i + len(TABLE_START)] + "\n\n" + constants_table_markdown() + "\n" + doc[j:]


if __name__ == "__main__":  # regenerate the table in place: --write docs/planner.md
    import sys
    from pathlib import Path

    if len(sys.argv) != 3 or sys.argv[1] != "--write":
        raise SystemExit("usage: python -m scalemodel.specs.evidence --write docs/planner.md")
    path = Path(sys.argv[2])
    path.write_text(with_table(path.read_text()))
