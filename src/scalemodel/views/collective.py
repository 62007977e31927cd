"""Views of one collective: ``comm cost`` (modelled on a fabric, or from a measured profile) and
``comm bench`` (timed on real torch.distributed ranks). The traffic of a whole layout is
views/comm.py."""

from __future__ import annotations

from typing import Any


def cost_report(r: Any, grp: Any, fab: Any, el: int, *, plot: bool = False) -> Any:
    """``comm cost``: one collective priced with its algorithm and protocol, every alternative
    with the reason it lost, and the automatic choice across sizes (``el``: element bytes)."""
    from ..analytic.collectives import ALGORITHMS, price_best
    from ..derive import Headline, Report, Section, Table
    from ..units import fmt_bytes, fmt_rate

    heads = (
        Headline("time", r.time_s, "s"),
        Headline("bytes sent per rank", r.bytes_sent_per_rank, "B"),
        Headline("lower bound on bytes per rank", r.lower_bound_bytes_per_rank, "B"),
        Headline("algbw", r.algbw_bytes_per_s, "B/s"),
        Headline("busbw", r.busbw_bytes_per_s, "B/s"),
        Headline("algorithm / protocol", f"{r.algorithm} / {r.protocol} ({r.chosen_by})"),
    )
    alt = Table("Every algorithm and protocol for this query",
                ("algorithm", "protocol", "in NCCL", "NCCL model time (s)", "time (s)",
                 "busbw (B/s)", "why not"),
                tuple((a["algorithm"], a["protocol"], "yes" if a["in_nccl"] else "no",
                       a["nccl_model_time_s"] if a.get("nccl_model_time_s") is not None else "-",
                       a["time_s"] if a["time_s"] is not None else "-",
                       a.get("busbw_bytes_per_s", "-"), a["why_not"]) for a in r.alternatives))
    sizes = [2.0**k for k in range(10, 35, 2)]
    sizes = [s - s % (grp.ranks * el) if s >= grp.ranks * el else grp.ranks * el for s in sizes]
    best = price_best(r.collective, sizes, grp.ranks, grp.ranks_per_node, fabric=fab)
    sweep = Table("The automatic choice across sizes (same group and fabric)",
                  ("size", "algorithm", "protocol", "time (s)", "busbw (B/s)"),
                  tuple((fmt_bytes(s), a, p, t, b) for s, a, p, t, b in zip(
                      sizes, best.algorithm, best.protocol, best.time_s, best.busbw_bytes_per_s,
                      strict=True)))
    text = (f"{r.collective} of {fmt_bytes(r.nbytes)} over {r.ranks} ranks ({r.ranks_per_node} "
            f"per node, {r.nodes} node{'s' if r.nodes > 1 else ''}) on {fab.describe()}. "
            f"Efficiencies assumed: {r.efficiency_intra:g} of the NVLink/PCIe line rate"
            + (f", {r.efficiency_inter:g} of the NIC line rate" if fab.inter else "")
            + f". The bandwidth lower bound alone takes {r.lower_bound_time_s:.4g} s at line rate; "
            f"this algorithm reaches busbw {fmt_rate(r.busbw_bytes_per_s)}.")
    sections = [Section(f"{r.collective}: {r.algorithm} / {r.protocol}", text=text,
                        headlines=heads),
                Section("Why this algorithm", text="\n".join(f"- {x}" for x in
                                                            (*r.reasons, *r.notes))),
                Section("", derivation=r.derivation),
                Section("", tables=(alt, sweep))]
    report = Report(f"scalemodel comm cost: {r.collective}", tuple(sections), r.to_dict(),
                    warnings=tuple(r.notes))
    if plot:
        from ..report import plot as _plot  # noqa: F401 - only to check matplotlib lazily

        def draw(path: str) -> None:
            _plot_busbw(path, r.collective, grp, fab, ALGORITHMS[r.collective])

        report = Report(report.title, report.sections, report.data, report.warnings, plot=draw)
    return report


def _plot_busbw(path: str, collective: str, grp: Any, fab: Any, algs: tuple[str, ...]) -> None:
    import numpy as np

    from ..analytic.collectives import price_best
    from ..report.plot import _check_path, _pyplot

    p = _check_path(path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    sizes = np.logspace(10, 34, 97, base=2.0)
    for alg in algs:
        c = price_best(collective, sizes, grp.ranks, grp.ranks_per_node, fabric=fab,
                       algorithms=(alg,))
        ok = np.isfinite(c.time_s)
        if ok.any():
            ax.plot(sizes[ok], c.busbw_bytes_per_s[ok] / 1e9, label=alg)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{collective}, {grp.ranks} ranks, {fab.describe()}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)


def profile_cost_report(collective: str, prof: dict[str, Any], pc: Any, data: dict[str, Any]
                        ) -> Any:
    """``comm cost --profile``: the collective priced from a measured alpha-beta profile."""
    from ..derive import Headline, Report, Section

    sec = Section(f"{collective} from the measured profile ({prof['backend']})", text=pc.how,
                  headlines=(Headline("time", pc.time_s, "s"),
                             Headline("algbw", pc.algbw_bytes_per_s, "B/s"),
                             Headline("busbw", pc.busbw_bytes_per_s, "B/s")))
    return Report(f"scalemodel comm cost: {collective} (profile)", (sec,), data)


def bench_report(backend: str, world: int, rows: list[dict[str, Any]],
                 ring_check: dict[str, Any], profile: dict[str, Any]) -> Any:
    """``comm bench``: measured times per collective and size, the alpha-beta fit of each, and
    the ring all-reduce built from send/recv checked against its byte count."""
    from ..derive import Headline, Report, Section, Table

    K = ring_check["bytes"]
    tab = Table(f"{backend}, {world} ranks (time = slowest rank, mean per call)",
                ("collective", "bytes", "time (s)", "algbw (B/s)", "busbw (B/s)"),
                tuple((r["collective"], r["bytes"], r["time_s"], r["algbw_bytes_per_s"],
                       r["busbw_bytes_per_s"]) for r in rows))
    fits = Table("alpha-beta fit per collective: t = alpha + beta x S",
                 ("collective", "alpha (s)", "beta (s/B)", "1/beta (B/s)", "max rel. error",
                  "assumed algorithm"),
                 tuple((k, v["alpha_s"], v["beta_s_per_byte"],
                        1 / v["beta_s_per_byte"] if v["beta_s_per_byte"] else float("inf"),
                        v["max_rel_err"], " ".join(v["assumed_algorithm"]))
                       for k, v in profile["collectives"].items()))
    ok = ring_check["bytes_sent_per_rank"] == ring_check["expected_bytes_per_rank"]
    ring_sec = Section(
        "Ring all-reduce from send/recv",
        text=(f"{K:,} bytes per rank on {world} ranks: each rank sent "
              f"{ring_check['bytes_sent_per_rank']:,} bytes; 2(N-1)K/N = "
              f"{ring_check['expected_bytes_per_rank']:,.0f} "
              f"({'equal' if ok else 'NOT equal'}); result "
              f"{'identical to' if ring_check['equal_to_all_reduce'] else 'DIFFERENT from'} "
              "dist.all_reduce."),
        headlines=(Headline("bytes sent per rank", ring_check["bytes_sent_per_rank"], "B"),
                   Headline("expected 2(N-1)K/N", ring_check["expected_bytes_per_rank"], "B")))
    note = ("gloo on CPU measures loopback TCP, memory copies and process scheduling, not a GPU "
            "fabric: use it to check algorithm logic and to calibrate this machine, not H100s.")
    data = {"backend": backend, "ranks": world, "rows": rows, "ring_check": ring_check,
            "profile": profile}
    return Report(f"scalemodel comm bench: {backend} x {world}",
                  (Section("Measured", text=note, tables=(tab, fits)), ring_sec), data)


def validate_report(res: Any) -> Any:
    """``comm validate``: every published nccl-tests row against the collective model."""
    from ..derive import Headline, Report, Section, Table

    fit = [r for r in res if r.status == "fit"]
    within = sum(r.within for r in res)
    mean_fit = sum(abs(r.error) for r in fit) / max(len(fit), 1)
    heads = (Headline("rows", len(res)), Headline("within tolerance", within),
             Headline("mean |error| of the rows that fit", mean_fit, "1"))
    unit = {"busbw_GBps": "busbw GB/s", "latency_us": "time us"}
    table = Table("Published nccl-tests rows",
                  ("row", "hardware", "collective", "asked", "runs", "metric", "measured",
                   "predicted", "error (%)", "tolerance (%)", "status", "source"),
                  tuple((r.id, r.hardware, r.collective, r.asked, f"{r.algorithm}/{r.protocol}",
                         unit.get(r.metric, r.metric), r.measured, round(r.predicted, 2),
                         round(100 * r.error, 1), round(100 * r.tolerance), r.status,
                         r.source_url) for r in res))
    misses = [f"- {r.id}: {r.note}" for r in res if r.status == "miss"]
    text = ("NCCL 2.21.5's tuning model picks the algorithm and protocol (or the one the row "
            "forced, 'asked'); the physical model prices it. Rows marked miss do not fit and "
            "are reported:\n" + "\n".join(misses))
    data = {"rows": [r.to_dict() for r in res], "row_count": len(res),
            "within_tolerance": within, "mean_abs_error_fit": mean_fit}
    return Report("scalemodel comm validate: nccl-tests rows",
                  (Section("", text=text, headlines=heads), Section("", tables=(table,))), data)
