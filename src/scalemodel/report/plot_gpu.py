"""Figures of the GPU lab: occupancy curves and the shared-memory banks a warp hits."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import svg
from .plot import _check_path, _pyplot


def occupancy_curves(path: str, *, title: str, regs: tuple[Any, Any, int],
                     smem: tuple[Any, Any, int]) -> Path:
    """Occupancy vs registers per thread and vs shared memory per block, the chosen point marked."""
    p = _check_path(path)
    if svg.wanted(p):  # the web app's inline figure, without matplotlib
        return svg.occupancy_curves(p, title=title, regs=regs, smem=smem)
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (x, y, mark), label, scale in ((a1, regs, "registers per thread", 1),
                                           (a2, smem, "shared memory per block (KiB)", 1024)):
        ax.step([v / scale for v in x], y, where="post", color="C0")
        ax.axvline(mark / scale, color="C3", ls="--", lw=1)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    a1.set_ylabel("occupancy (resident warps / max warps)")
    a1.set_ylim(0, 1.05)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def warp_banks(path: str, *, title: str, panels: Sequence[tuple[str, Sequence[int]]]) -> Path:
    """One row per instruction: lane (x) -> bank (y); stacked marks show a conflict."""
    p = _check_path(path)
    if svg.wanted(p):  # the web app's inline figure, without matplotlib
        return svg.warp_banks(p, title=title, panels=panels)
    plt = _pyplot()
    n = max(1, len(panels))
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.6 * n), squeeze=False)
    for ax, (label, banks) in zip(axes[:, 0], panels, strict=False):
        lanes = [i for i, b in enumerate(banks) if b >= 0]
        hit = [b for b in banks if b >= 0]
        ax.scatter(lanes, hit, s=18, color="C0")
        worst = max((hit.count(b) for b in set(hit)), default=0)
        ax.set_title(f"{label}   (most lanes on one bank: {worst})", fontsize=9)
        ax.set_xlim(-1, 32)
        ax.set_ylim(-1, 32)
        ax.set_xlabel("lane")
        ax.set_ylabel("bank")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p
