"""View of the KV-cache model: bytes per token, sequence and batch, the pool a serving engine
sizes on a GPU, the other attention layouts and cache types, and the paged-allocation
simulation; shared by ``scalemodel kv`` and the kv-cache answer."""

from __future__ import annotations

from typing import Any


def mitigations_table(title: str, rows: Any, *, readable: bool = False) -> Any:
    """Bytes per token and for the batch under each attention layout and cache type
    (analytic.kv.mitigation_table rows); ``readable`` prints them as sizes."""
    from ..derive import Table
    from ..units import fmt_bytes

    body = (tuple((r[0], *(fmt_bytes(x) for x in r[1:])) for r in rows) if readable
            else tuple((lab, per, tot) for lab, per, tot in rows))
    return Table(title, ("layout", "bytes/token", "bytes for the batch"), body)


def paged_table(c: Any, *, short: bool = False) -> Any:
    """Contiguous vs paged allocation (sim.paged_kv.compare), one row per allocator; ``short``
    keeps waste, mean running and preemptions."""
    from ..derive import Table

    pols = (c.contiguous, c.paged)
    if short:
        return Table("", ("allocator", "KV wasted %", "mean running", "preemptions"),
                     tuple((s.policy, 100 * s.waste_fraction, s.mean_running, s.preemptions)
                           for s in pols))
    return Table("", ("allocator", "KV wasted %", "mean running", "peak running", "tokens/step",
                      "preemptions", "steps"),
                 tuple((s.policy, s.waste_fraction * 100, s.mean_running, s.peak_running,
                        s.tokens_per_step, s.preemptions, s.steps) for s in pols))


def engine_table(m: Any, gpu: Any, *, tp: int, weight_dtype: str, kv_dtype: str,
                 context: int) -> Any:
    """The same layout as each bundled serving engine sizes its pool (one accounting)."""
    from ..analytic.serving_memory import engine_kv_budget
    from ..derive import Table
    from ..specs.frameworks import engine_ids
    from ..units import fmt_bytes

    rows = []
    for eid in engine_ids():
        x = engine_kv_budget(m, gpu, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                             engine_id=eid, max_model_len=context)
        rows.append((f"{x.engine} ({x.engine_version})", f"{x.util_flag} {x.util:g}",
                     fmt_bytes(max(x.kv_budget_bytes, 0)), x.max_tokens,
                     x.max_tokens // context if x.fits else "does not start"))
    return Table(f"the same {tp} x {gpu.id} as each engine sizes its pool",
                 ("engine", "fraction", "KV budget / GPU", "KV tokens",
                  f"sequences at {context:,}"), tuple(rows))


def simulation_section(c: Any, *, requests: int, prompt_mean: float, output_mean: float,
                       context: int, pool: int, pool_from: str) -> Any:
    """``kv --simulate``: the simulated request stream and what paging gains on it."""
    from ..derive import Headline, Section

    return Section(
        "Paged vs contiguous KV allocation (simulated)",
        text=(f"{requests:,} requests, log-normal prompt (mean {prompt_mean:g}) and "
              f"output (mean {output_mean:g}) lengths capped at {context:,} tokens, "
              f"a pool of {pool:,} KV token slots ({pool_from}), {c.block_tokens}-token blocks. "
              "Contiguous "
              "reserves the maximum length per request; paged allocates blocks on demand and "
              "preempts the newest request when the pool runs dry. The vLLM paper reports "
              "60-80% waste before paging and under 4% with it (Kwon et al. 2023)."),
        headlines=(Headline("concurrency gain from paging", f"{c.concurrency_gain:.2f}x"),),
        tables=(paged_table(c),),
    )


def _headlines(r: Any, *, context: int, batch: int, tp: int, pp: int,
               has_gpu: bool) -> list[Any]:
    from ..derive import Headline

    heads = [
        Headline("KV bytes per token", r.kv_bytes_per_token, "B"),
        Headline(f"KV bytes per sequence ({context:,} tokens)", r.kv_bytes_per_sequence, "B"),
        Headline(f"KV bytes for batch {batch}", r.kv_bytes_total, "B"),
        Headline(f"weights ({r.weight_dtype})", r.weights_bytes, "B"),
    ]
    e = r.engine
    if e is not None:
        heads += [
            Headline("engine", f"{e.engine_name} {e.engine_version} ({e.engine})"),
            Headline("device memory the engine reads", e.total_bytes, "B"),
            Headline(f"{e.util_flag}", f"{e.util:g}"),
            Headline(f"weights per GPU (TP{tp} PP{pp})", e.weights_bytes, "B"),
            Headline(f"profile-run activation peak ({e.profile_tokens:,} tokens)"
                     if e.profile_tokens else "profile run (none: activations use the 1 - f "
                     "reserve)", e.profile_activation_bytes, "B"),
            Headline("memory outside torch per GPU", e.non_torch_bytes, "B"),
            Headline("KV budget per GPU", e.kv_budget_bytes, "B"),
            Headline(f"KV blocks of {e.block_size} tokens", e.blocks),
            Headline("KV tokens the engine holds (max_tokens)", e.max_tokens, "token"),
            Headline(f"maximum concurrency at {context:,} tokens",
                     f"{e.max_concurrency:.2f}x"),
        ]
    elif has_gpu:
        heads += [
            Headline(f"weights per GPU (TP{tp} PP{pp})", r.weights_bytes_per_gpu, "B"),
            Headline("KV budget per GPU", r.kv_budget_bytes_per_gpu, "B"),
            Headline("KV tokens that fit", r.max_tokens, "token"),
            Headline(f"concurrent sequences at {context:,} tokens",
                     r.max_concurrent_sequences, "seq"),
        ]
    return heads


def report(m: Any, r: Any, mitigations: Any, *, context: int, batch: int, tp: int, pp: int,
           has_gpu: bool, simulation: tuple[Any, dict[str, Any]] | None = None) -> Any:
    """``scalemodel kv``: the cache of ``r`` (analytic.kv.kv_report), the engine's pool when one
    sized it, the mitigation rows, and the --simulate section with its data when given."""
    from ..derive import Report, Section

    e = r.engine
    heads = _headlines(r, context=context, batch=batch, tp=tp, pp=pp, has_gpu=has_gpu)
    sections = [
        Section(f"KV cache of {m.id} ({m.attention.upper()}, {r.kv_dtype})", headlines=tuple(heads)),
        Section("", derivation=r.derivation),
        *((Section(f"KV pool as {e.engine_name} {e.engine_version} sizes it",
                   derivation=e.derivation),) if e is not None else ()),
        Section("", tables=(mitigations_table(
            f"Same model, other attention layouts and cache types (context {context:,}, "
            f"batch {batch})", mitigations),)),
    ]
    data = r.to_dict()
    if simulation is not None:
        sec, sim = simulation
        sections.append(sec)
        data["paged_simulation"] = sim
    return Report(f"scalemodel kv: {m.id}", tuple(sections), data, warnings=r.warnings)
