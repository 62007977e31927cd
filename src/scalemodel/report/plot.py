"""Figures for ``--plot FILE`` (PNG or SVG). matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BadInput
from . import svg


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        if svg.inline_active():  # the web app: text stays text (escaped), stable ids
            matplotlib.rcParams["svg.hashsalt"] = "scalemodel"
            matplotlib.rcParams["svg.fonttype"] = "none"
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise BadInput("--plot needs matplotlib: pip install 'scalemodel[plot]'") from None
    return plt


def _check_path(path: str) -> Path:
    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise BadInput(f"--plot: {path!r} must end in .png, .svg or .pdf")
    if not p.parent.exists():
        raise BadInput(f"--plot: folder {str(p.parent)!r} does not exist")
    return p


def roofline(
    path: str,
    *,
    title: str,
    bandwidth: float,
    roofs: Sequence[tuple[str, float]],
    points: Sequence[tuple[str, float, float]] = (),
    curve: tuple[Sequence[float], Sequence[float], str] | None = None,
) -> Path:
    """Log-log roofline: one flat roof per precision, the bandwidth slope, labelled points.

    ``roofs``: (label, peak FLOP/s); ``points``: (label, intensity FLOP/B, attainable FLOP/s);
    ``curve``: intensities and attainable rates along a sweep (e.g. decode batch sizes).
    """
    p = _check_path(path)
    if svg.wanted(p):  # the web app's inline figure, without matplotlib
        return svg.roofline(p, title=title, bandwidth=bandwidth, roofs=roofs, points=points,
                            curve=curve)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [2.0**k for k in range(-4, 16)]
    top = max(pk for _, pk in roofs)
    ax.plot(xs, [min(top, x * bandwidth) / 1e12 for x in xs], color="0.2", lw=2,
            label=f"HBM {bandwidth / 1e12:.3g} TB/s")
    for i, (lab, pk) in enumerate(roofs):
        ridge = pk / bandwidth
        ax.hlines(pk / 1e12, ridge, xs[-1], colors=f"C{i}", lw=1.5, label=f"{lab} peak")
        ax.axvline(ridge, color=f"C{i}", ls=":", lw=1)
        ax.annotate(f"ridge {ridge:.0f}", (ridge, pk / 1e12), textcoords="offset points",
                    xytext=(4, -12), fontsize=8, color=f"C{i}")
    if curve is not None:
        ax.plot(curve[0], [y / 1e12 for y in curve[1]], "o-", ms=3, color="C3", label=curve[2])
    for lab, x, y in points:
        ax.plot([x], [y / 1e12], "k*", ms=10)
        ax.annotate(lab, (x, y / 1e12), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of HBM traffic)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def bars(path: str, *, title: str, labels: Sequence[str], series: dict[str, Sequence[float]],
         ylabel: str) -> Path:
    """Stacked bars (e.g. memory per GPU by component for several layouts)."""
    p = _check_path(path)
    if svg.wanted(p):  # the web app's inline figure, without matplotlib
        return svg.bars(p, title=title, labels=labels, series=series, ylabel=ylabel)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels) + 2), 5))
    bottom = [0.0] * len(labels)
    for i, (name, vals) in enumerate(series.items()):
        ax.bar(labels, vals, bottom=bottom, label=name, color=f"C{i}")
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def gantt(path: str, *, title: str, ops: Sequence[tuple[int, int, str, float, float]],
          stages: int) -> Path:
    """A pipeline schedule: one row per stage, one box per (micro-batch, forward/backward)."""
    p = _check_path(path)
    if svg.wanted(p):  # the web app's inline figure, without matplotlib
        return svg.gantt(p, title=title, ops=ops, stages=stages)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 0.45 * stages + 1.8))
    for s, i, kind, t0, t1 in ops:
        ax.barh(s, t1 - t0, left=t0, color=f"C{i % 10}", alpha=1.0 if kind == "F" else 0.55,
                edgecolor="black", linewidth=0.4)
        if t1 - t0 > 0:
            ax.text((t0 + t1) / 2, s, f"{kind}{i}", ha="center", va="center", fontsize=6)
    ax.set_yticks(range(stages))
    ax.set_yticklabels([f"stage {s}" for s in range(stages)], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (F: forward, B: backward; white space is the bubble)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def curves(path: str, *, title: str, xlabel: str, ylabel: str,
           lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
           points: Sequence[tuple[str, Sequence[float], Sequence[float]]] = (),
           marks: Sequence[tuple[str, float]] = (), logx: bool = False,
           logy: bool = False) -> Path:
    """Lines (label, xs, ys), scatter points (label, xs, ys) and labelled vertical marks."""
    p = _check_path(path)
    if svg.wanted(p):  # the web app's inline figure, without matplotlib
        return svg.curves(p, title=title, xlabel=xlabel, ylabel=ylabel, lines=lines,
                          points=points, marks=marks, logx=logx, logy=logy)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (lab, xs, ys) in enumerate(lines):
        ax.plot(xs, ys, color=f"C{i}", lw=2, label=lab)
    for i, (lab, xs, ys) in enumerate(points):
        ax.plot(xs, ys, "o", ms=5, color=f"C{i + len(lines)}", label=lab)
    for i, (lab, x) in enumerate(marks):
        ax.axvline(x, color="0.3", ls=":" if i else "--", lw=1)
        ax.annotate(lab, (x, 0.02 + 0.06 * i), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", fontsize=8)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def two_panels(path: str, draw_a: Any, draw_b: Any) -> Path:
    """Save two figures side by side as one file: ``draw_a(path)`` and ``draw_b(path)`` each
    write a file; the second gets a ``-gantt`` suffix next to the first."""
    p = _check_path(path)
    second = p.with_name(p.stem + "-gantt" + p.suffix)
    draw_a(str(p))
    draw_b(str(second))
    if svg.wanted(p):  # inline: one picture, the second panel under the first
        svg.stack(p, [p, second])
        second.unlink()
    return p


def shared_x_curves(path: str, *, title: str, x: Sequence[float],
                    series: Sequence[tuple[str, Sequence[float]]], xlabel: str,
                    ylabel: str = "") -> Path:
    """Line curves over one shared x axis (e.g. router load metrics over training steps)."""
    return curves(path, title=title, xlabel=xlabel, ylabel=ylabel,
                  lines=[(name, list(x), list(ys)) for name, ys in series])


def cluster_timeline(path: str, *, title: str, hours: Sequence[float],
                     allocated: Sequence[float], unusable: Sequence[float]) -> Path:
    """A scheduler replay over time: allocated share of capacity, and the share that is free but
    unusable by the job at the head of the queue (fragmentation)."""
    p = _check_path(path)
    plt = _pyplot()
    fig, ax = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    ax[0].step(hours, allocated, where="post", lw=0.8)
    ax[0].set_ylabel("allocated / capacity")
    ax[0].set_ylim(0, 1.02)
    ax[1].step(hours, unusable, where="post", lw=0.8, color="tab:red")
    ax[1].set_ylabel("free but unusable\nby the head / capacity")
    ax[1].set_xlabel("hours since the first submission")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(p, dpi=130)
    plt.close(fig)
    return p


def errors_by_row(path: str, *, title: str, labels: Sequence[str], errors: Sequence[float],
                  groups: Sequence[str], bands: Sequence[float] = (0.10, 0.25)) -> Path:
    """Signed relative error per row as horizontal bars, one colour per group, with the
    +-bands drawn as guides (validation: predicted / measured - 1 per published run)."""
    p = _check_path(path)
    plt = _pyplot()
    order = list(dict.fromkeys(groups))
    fig, ax = plt.subplots(figsize=(8, max(4.0, 0.22 * len(labels) + 1.5)))
    ys = list(range(len(labels)))[::-1]
    for i, g in enumerate(order):
        idx = [k for k, gg in enumerate(groups) if gg == g]
        ax.barh([ys[k] for k in idx], [100 * errors[k] for k in idx], color=f"C{i % 10}",
                label=g)
    for j, b in enumerate(bands):
        for sign in (-1, 1):
            ax.axvline(100 * sign * b, color="0.4", ls="--" if j else ":", lw=0.8)
    ax.axvline(0, color="0.2", lw=0.8)
    ax.set_yticks(ys, labels, fontsize=7)
    ax.set_xlabel("predicted / measured - 1 (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(p, dpi=130)
    plt.close(fig)
    return p
