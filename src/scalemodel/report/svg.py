"""A small SVG chart writer for the web app's inline figures (no matplotlib, no dependencies).

matplotlib needs about half a second to import and a few hundred milliseconds per figure; a
question page has 300 ms in all. The web app therefore draws its inline figures with this module:
``with inline(): report.plot("x.svg")`` makes the functions of ``report.plot`` and
``report.plot_gpu`` write their figure here instead (same data, same labels, a plainer look).
The CLI's ``--plot FILE`` keeps using matplotlib.

Drawing model: a ``Figure`` holds a grid of ``Axes``; an ``Axes`` collects lines, step lines,
points, horizontal and vertical rules, notes, stacked bars and horizontal boxes in data
coordinates, and maps them to pixels on a linear or logarithmic scale when rendered. Every
piece of text is XML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

_INLINE: ContextVar[bool] = ContextVar("scalemodel_inline_svg", default=False)

# matplotlib's default cycle ("tab10"), so C0..C9 keep their meaning
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
_NAMED = {"k": "#000000", "black": "#000000", "tab:red": PALETTE[3], "tab:blue": PALETTE[0]}


@contextmanager
def inline() -> Iterator[None]:
    """Within this block, ``report.plot`` functions asked for a .svg file draw it here."""
    tok = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(tok)


def inline_active() -> bool:
    return _INLINE.get()


def wanted(path: Path) -> bool:
    return _INLINE.get() and path.suffix.lower() == ".svg"


def color(c: str) -> str:
    if c.startswith("C") and c[1:].isdigit():
        return PALETTE[int(c[1:]) % len(PALETTE)]
    if c in _NAMED:
        return _NAMED[c]
    try:  # matplotlib's grey levels: "0.2"
        v = float(c)
    except ValueError:
        return c if c.startswith("#") and len(c) in (4, 7) and c[1:].isalnum() else "#000000"
    g = max(0, min(255, round(v * 255)))
    return f"#{g:02x}{g:02x}{g:02x}"


def _t(s: Any) -> str:
    return escape(str(s), {'"': "&quot;"})


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


class _Scale:
    def __init__(self, lo: float, hi: float, log: bool, base: float, pad: float = 0.04) -> None:
        self.log, self.base = log, base
        if log:
            lo, hi = math.log(lo, base), math.log(hi, base)
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        span = hi - lo
        self.lo, self.hi = lo - pad * span, hi + pad * span

    def f(self, v: float) -> float:
        """0..1 along the axis."""
        if self.log:
            v = math.log(v, self.base) if v > 0 else self.lo
        return (v - self.lo) / (self.hi - self.lo)

    def ticks(self) -> list[tuple[float, str]]:
        if self.log:
            k0, k1 = math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9)
            step = max(1, math.ceil((k1 - k0 + 1) / 9))
            out = []
            for k in range(k0, k1 + 1, step):
                v = self.base ** k
                lab = _fmt_tick(v) if 1e-3 <= v < 1e5 else (
                    f"2^{k}" if self.base == 2 else f"1e{k}")
                out.append((v, lab))
            return out
        span = self.hi - self.lo
        raw = span / 6
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        v = math.ceil(self.lo / step) * step
        out = []
        while v <= self.hi + 1e-9 * span:
            out.append((v, _fmt_tick(v if abs(v) > 1e-12 * span else 0.0)))
            v += step
        return out


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}"


class Axes:
    """One panel. Coordinates are data values; ``logx``/``logy`` pick the scales."""

    def __init__(self, *, title: str = "", xlabel: str = "", ylabel: str = "",
                 logx: bool = False, logy: bool = False, xbase: float = 10, ybase: float = 10,
                 xlim: tuple[float, float] | None = None, ylim: tuple[float, float] | None = None,
                 legend: str = "upper right") -> None:
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.logx, self.logy, self.xbase, self.ybase = logx, logy, xbase, ybase
        self.xlim, self.ylim, self.legend_at = xlim, ylim, legend
        self.items: list[tuple[str, dict[str, Any]]] = []
        self.legend: list[tuple[str, str, str]] = []  # (label, colour, kind)
        self.categories: list[str] = []  # x categories (bars)
        self.rows: list[str] = []  # y categories, top to bottom (boxes)

    def _label(self, label: str | None, col: str, kind: str) -> None:
        if label:
            self.legend.append((label, col, kind))

    def line(self, xs: Sequence[float], ys: Sequence[float], *, color: str = "C0",
             width: float = 2, label: str | None = None, dash: str = "", step: bool = False,
             markers: bool = False) -> None:
        c = _color(color)
        self.items.append(("line", {"xs": [float(x) for x in xs], "ys": [float(y) for y in ys],
                                    "c": c, "w": width, "dash": dash, "step": step,
                                    "markers": markers}))
        self._label(label, c, "line")

    def points(self, xs: Sequence[float], ys: Sequence[float], *, color: str = "C0",
               size: float = 3.5, label: str | None = None, star: bool = False) -> None:
        c = _color(color)
        self.items.append(("points", {"xs": [float(x) for x in xs], "ys": [float(y) for y in ys],
                                      "c": c, "r": size, "star": star}))
        self._label(label, c, "point")

    def hline(self, y: float, x0: float | None = None, x1: float | None = None, *,
              color: str = "C0", width: float = 1.5, dash: str = "",
              label: str | None = None) -> None:
        c = _color(color)
        self.items.append(("hline", {"y": float(y), "x0": x0, "x1": x1, "c": c, "w": width,
                                     "dash": dash}))
        self._label(label, c, "line")

    def vline(self, x: float, *, color: str = "0.3", width: float = 1, dash: str = "2,3") -> None:
        self.items.append(("vline", {"x": float(x), "c": _color(color), "w": width,
                                     "dash": dash}))

    def note(self, x: float, y: float, text: str, *, color: str = "k", dx: float = 4,
             dy: float = -4, size: float = 10, y_is_fraction: bool = False) -> None:
        self.items.append(("note", {"x": float(x), "y": float(y), "text": text,
                                    "c": _color(color), "dx": dx, "dy": dy, "size": size,
                                    "frac": y_is_fraction}))

    def bars(self, labels: Sequence[str], series: dict[str, Sequence[float]]) -> None:
        self.categories = [str(s) for s in labels]
        bottom = [0.0] * len(labels)
        for i, (name, vals) in enumerate(series.items()):
            c = PALETTE[i % len(PALETTE)]
            for j, v in enumerate(vals):
                self.items.append(("bar", {"i": j, "y0": bottom[j], "y1": bottom[j] + float(v),
                                           "c": c}))
            bottom = [b + float(v) for b, v in zip(bottom, vals, strict=True)]
            self._label(name, c, "box")

    def box(self, row: int, x0: float, x1: float, *, color: str, opacity: float = 1.0,
            text: str = "") -> None:
        self.items.append(("box", {"row": row, "x0": float(x0), "x1": float(x1),
                                   "c": _color(color), "o": opacity, "text": text}))

    # --- rendering ---------------------------------------------------------------------------

    def _ranges(self) -> tuple[_Scale, _Scale]:
        xs: list[float] = []
        ys: list[float] = []
        for kind, d in self.items:
            if kind in ("line", "points"):
                xs += d["xs"]
                ys += d["ys"]
            elif kind == "hline":
                ys.append(d["y"])
                xs += [v for v in (d["x0"], d["x1"]) if v is not None]
            elif kind == "vline":
                xs.append(d["x"])
            elif kind == "note":
                xs.append(d["x"])
                if not d["frac"]:
                    ys.append(d["y"])
            elif kind == "bar":
                ys += [d["y0"], d["y1"]]
            elif kind == "box":
                xs += [d["x0"], d["x1"]]

        def finite(vals: list[float], log: bool) -> list[float]:
            return [v for v in vals if math.isfinite(v) and (v > 0 or not log)]

        def scale(vals: list[float], log: bool, base: float, lim: Any, pad: float) -> _Scale:
            if lim is not None:
                return _Scale(lim[0], lim[1], log, base, pad=0.0)
            v = finite(vals, log) or ([1.0, 10.0] if log else [0.0, 1.0])
            return _Scale(min(v), max(v), log, base, pad)

        if self.categories:
            sx = _Scale(-0.6, len(self.categories) - 0.4, False, 10, pad=0.0)
            ys.append(0.0)
        else:
            sx = scale(xs, self.logx, self.xbase, self.xlim, 0.02)
        if self.rows:
            sy = _Scale(-0.6, len(self.rows) - 0.4, False, 10, pad=0.0)
        else:
            sy = scale(ys, self.logy, self.ybase, self.ylim, 0.05)
        return sx, sy

    def render(self, x: float, y: float, w: float, h: float) -> str:
        """SVG for this panel in the box (x, y, w, h) of the figure, axes labels included."""
        left = 64 + (60 if self.rows else 0) + (
            min(140.0, 4.5 * max(len(c) for c in self.categories)) if self.categories else 0)
        bottom = 46 + (26 if self.categories else 0)
        top = 24 if self.title else 8
        px, py, pw, ph = x + left, y + top, max(10.0, w - left - 14), max(10.0, h - top - bottom)
        sx, sy = self._ranges()

        def X(v: float) -> float:
            return px + sx.f(v) * pw

        def Y(v: float) -> float:
            return py + (sy.f(v) if self.rows else 1 - sy.f(v)) * ph

        out = [f'<g><rect x="{_num(px)}" y="{_num(py)}" width="{_num(pw)}" height="{_num(ph)}" '
               'fill="#ffffff" stroke="#444444" stroke-width="1"/>']
        # grid and ticks
        if not self.categories:
            for v, lab in sx.ticks():
                xx = X(v)
                out.append(f'<line x1="{_num(xx)}" y1="{_num(py)}" x2="{_num(xx)}" '
                           f'y2="{_num(py + ph)}" stroke="#dddddd" stroke-width="0.8"/>'
                           f'<text x="{_num(xx)}" y="{_num(py + ph + 14)}" font-size="10" '
                           f'text-anchor="middle">{_t(lab)}</text>')
        else:
            for i, lab in enumerate(self.categories):
                xx = X(i)
                out.append(f'<text x="{_num(xx)}" y="{_num(py + ph + 12)}" font-size="9" '
                           f'text-anchor="end" transform="rotate(-20 {_num(xx)} '
                           f'{_num(py + ph + 12)})">{_t(lab)}</text>')
        if self.rows:
            for i, lab in enumerate(self.rows):
                out.append(f'<text x="{_num(px - 6)}" y="{_num(Y(i) + 3)}" font-size="9" '
                           f'text-anchor="end">{_t(lab)}</text>')
        else:
            for v, lab in sy.ticks():
                yy = Y(v)
                out.append(f'<line x1="{_num(px)}" y1="{_num(yy)}" x2="{_num(px + pw)}" '
                           f'y2="{_num(yy)}" stroke="#dddddd" stroke-width="0.8"/>'
                           f'<text x="{_num(px - 5)}" y="{_num(yy + 3.5)}" font-size="10" '
                           f'text-anchor="end">{_t(lab)}</text>')
        out.append(f'<svg x="{_num(px)}" y="{_num(py)}" width="{_num(pw)}" height="{_num(ph)}" '
                   f'viewBox="{_num(px)} {_num(py)} {_num(pw)} {_num(ph)}" overflow="hidden">')
        notes = []
        for kind, d in self.items:
            out.append(self._item(kind, d, X, Y, sx, sy, px, pw, py, ph, notes))
        out.append("</svg>")
        out += notes
        if self.title:
            out.append(f'<text x="{_num(px + pw / 2)}" y="{_num(y + 16)}" font-size="12" '
                       f'text-anchor="middle">{_t(self.title)}</text>')
        if self.xlabel:
            out.append(f'<text x="{_num(px + pw / 2)}" y="{_num(y + h - 8)}" font-size="11" '
                       f'text-anchor="middle">{_t(self.xlabel)}</text>')
        if self.ylabel:
            cy = py + ph / 2
            out.append(f'<text x="{_num(x + 14)}" y="{_num(cy)}" font-size="11" '
                       f'text-anchor="middle" transform="rotate(-90 {_num(x + 14)} {_num(cy)})">'
                       f'{_t(self.ylabel)}</text>')
        out.append(self._legend(px, py, pw, ph))
        out.append("</g>")
        return "".join(out)

    def _item(self, kind: str, d: dict[str, Any], X: Any, Y: Any, sx: _Scale, sy: _Scale,
              px: float, pw: float, py: float, ph: float, notes: list[str]) -> str:
        dash = f' stroke-dasharray="{d["dash"]}"' if d.get("dash") else ""
        if kind == "line":
            pts = [(X(a), Y(b)) for a, b in zip(d["xs"], d["ys"], strict=False)
                   if _ok(a, self.logx) and _ok(b, self.logy)]
            if not pts:
                return ""
            if d["step"]:
                st = [pts[0]]
                for p in pts[1:]:
                    st += [(p[0], st[-1][1]), p]
                pts = st
            path = " ".join(f"{_num(a)},{_num(b)}" for a, b in pts)
            s = (f'<polyline points="{path}" fill="none" stroke="{d["c"]}" '
                 f'stroke-width="{d["w"]}"{dash} stroke-linejoin="round"/>')
            if d["markers"]:
                s += "".join(f'<circle cx="{_num(a)}" cy="{_num(b)}" r="2.2" fill="{d["c"]}"/>'
                             for a, b in pts)
            return s
        if kind == "points":
            out = []
            for a, b in zip(d["xs"], d["ys"], strict=False):
                if not (_ok(a, self.logx) and _ok(b, self.logy)):
                    continue
                cx, cy, r = X(a), Y(b), d["r"]
                if d["star"]:
                    out.append(f'<polygon points="{_star(cx, cy, 2.2 * r)}" fill="{d["c"]}"/>')
                else:
                    out.append(f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="{r}" '
                               f'fill="{d["c"]}"/>')
            return "".join(out)
        if kind == "hline":
            if not _ok(d["y"], self.logy):
                return ""
            x0 = X(d["x0"]) if d["x0"] is not None and _ok(d["x0"], self.logx) else px
            x1 = X(d["x1"]) if d["x1"] is not None and _ok(d["x1"], self.logx) else px + pw
            yy = Y(d["y"])
            return (f'<line x1="{_num(x0)}" y1="{_num(yy)}" x2="{_num(x1)}" y2="{_num(yy)}" '
                    f'stroke="{d["c"]}" stroke-width="{d["w"]}"{dash}/>')
        if kind == "vline":
            if not _ok(d["x"], self.logx):
                return ""
            xx = X(d["x"])
            return (f'<line x1="{_num(xx)}" y1="{_num(py)}" x2="{_num(xx)}" y2="{_num(py + ph)}" '
                    f'stroke="{d["c"]}" stroke-width="{d["w"]}"{dash}/>')
        if kind == "note":
            if not _ok(d["x"], self.logx) or (not d["frac"] and not _ok(d["y"], self.logy)):
                return ""
            yy = py + (1 - d["y"]) * ph if d["frac"] else Y(d["y"])
            notes.append(f'<text x="{_num(X(d["x"]) + d["dx"])}" y="{_num(yy + d["dy"])}" '
                         f'font-size="{d["size"]}" fill="{d["c"]}">{_t(d["text"])}</text>')
            return ""
        if kind == "bar":
            x0, x1 = X(d["i"] - 0.4), X(d["i"] + 0.4)
            y0, y1 = Y(d["y0"]), Y(d["y1"])
            return (f'<rect x="{_num(x0)}" y="{_num(min(y0, y1))}" width="{_num(x1 - x0)}" '
                    f'height="{_num(abs(y0 - y1))}" fill="{d["c"]}"/>')
        if kind == "box":
            x0, x1 = X(d["x0"]), X(d["x1"])
            y0, y1 = Y(d["row"] - 0.4), Y(d["row"] + 0.4)
            s = (f'<rect x="{_num(x0)}" y="{_num(y0)}" width="{_num(max(0.0, x1 - x0))}" '
                 f'height="{_num(y1 - y0)}" fill="{d["c"]}" fill-opacity="{d["o"]}" '
                 'stroke="#000000" stroke-width="0.4"/>')
            if d["text"] and x1 - x0 > 7 * len(d["text"]):
                s += (f'<text x="{_num((x0 + x1) / 2)}" y="{_num((y0 + y1) / 2 + 3)}" '
                      f'font-size="8" text-anchor="middle">{_t(d["text"])}</text>')
            return s
        return ""

    def _legend(self, px: float, py: float, pw: float, ph: float) -> str:
        if not self.legend:
            return ""
        lw = 30 + 6.2 * max(len(lab) for lab, _, _ in self.legend)
        lh = 8 + 15 * len(self.legend)
        x0 = px + pw - lw - 8
        y0 = py + ph - lh - 8 if self.legend_at == "lower right" else py + 8
        out = [f'<rect x="{_num(x0)}" y="{_num(y0)}" width="{_num(lw)}" height="{_num(lh)}" '
               'fill="#ffffff" fill-opacity="0.85" stroke="#bbbbbb"/>']
        for i, (lab, c, kind) in enumerate(self.legend):
            yy = y0 + 12 + 15 * i
            if kind == "line":
                out.append(f'<line x1="{_num(x0 + 6)}" y1="{_num(yy - 3)}" x2="{_num(x0 + 22)}" '
                           f'y2="{_num(yy - 3)}" stroke="{c}" stroke-width="2"/>')
            elif kind == "point":
                out.append(f'<circle cx="{_num(x0 + 14)}" cy="{_num(yy - 3)}" r="3.5" '
                           f'fill="{c}"/>')
            else:
                out.append(f'<rect x="{_num(x0 + 7)}" y="{_num(yy - 8)}" width="14" height="9" '
                           f'fill="{c}"/>')
            out.append(f'<text x="{_num(x0 + 27)}" y="{_num(yy)}" font-size="10">{_t(lab)}</text>')
        return "".join(out)


def _color(c: str) -> str:
    return color(c)


def _ok(v: float, log: bool) -> bool:
    return math.isfinite(v) and (v > 0 or not log)


def _star(cx: float, cy: float, r: float) -> str:
    pts = []
    for i in range(10):
        a = -math.pi / 2 + i * math.pi / 5
        rr = r if i % 2 == 0 else r * 0.45
        pts.append(f"{_num(cx + rr * math.cos(a))},{_num(cy + rr * math.sin(a))}")
    return " ".join(pts)


class Figure:
    """A grid of panels with an optional title over them, saved as one SVG file."""

    def __init__(self, width: float, height: float, *, rows: int = 1, cols: int = 1,
                 title: str = "") -> None:
        self.width, self.height, self.rows, self.cols, self.title = width, height, rows, cols, title
        self.axes: list[Axes] = []

    def add(self, ax: Axes) -> Axes:
        self.axes.append(ax)
        return ax

    def to_svg(self) -> str:
        top = 26 if self.title else 0
        cw = self.width / self.cols
        ch = (self.height - top) / self.rows
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(self.width)}" '
               f'height="{_num(self.height)}" viewBox="0 0 {_num(self.width)} '
               f'{_num(self.height)}" font-family="DejaVu Sans, Arial, sans-serif" '
               'role="img">']
        out.append(f'<rect width="{_num(self.width)}" height="{_num(self.height)}" '
                   'fill="#ffffff"/>')
        if self.title:
            out.append(f'<text x="{_num(self.width / 2)}" y="18" font-size="13" '
                       f'text-anchor="middle">{_t(self.title)}</text>')
        for i, ax in enumerate(self.axes):
            r, c = divmod(i, self.cols)
            out.append(ax.render(c * cw, top + r * ch, cw, ch))
        out.append("</svg>\n")
        return "".join(out)

    def save(self, path: Path) -> Path:
        path.write_text(self.to_svg(), encoding="utf-8")
        return path


def stack(path: Path, parts: Sequence[Path]) -> Path:
    """Write the SVG files ``parts`` one under the other into ``path`` (nested <svg>s)."""
    import re

    docs, w, h = [], 0.0, 0.0
    for p in parts:
        text = p.read_text(encoding="utf-8")
        m = re.search(r'<svg\b[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"', text)
        pw, ph = (float(m.group(1)), float(m.group(2))) if m else (800.0, 500.0)
        body = re.sub(r"^.*?<svg\b", "<svg", text, count=1, flags=re.S)
        body = body.replace("<svg", f'<svg x="0" y="{_num(h)}"', 1)
        docs.append(body)
        w, h = max(w, pw), h + ph
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(w)}" '
                    f'height="{_num(h)}" viewBox="0 0 {_num(w)} {_num(h)}">'
                    + "".join(docs) + "</svg>\n", encoding="utf-8")
    return path


# --- the figures of report.plot and report.plot_gpu, drawn here ------------------------------
# Each takes the same arguments as its matplotlib twin (after the path) and writes ``path``.


def roofline(path: Path, *, title: str, bandwidth: float, roofs: Sequence[tuple[str, float]],
             points: Sequence[tuple[str, float, float]] = (),
             curve: tuple[Sequence[float], Sequence[float], str] | None = None) -> Path:
    fig = Figure(800, 550)
    ax = fig.add(Axes(title=title, xlabel="arithmetic intensity (FLOP / byte of HBM traffic)",
                      ylabel="attainable TFLOP/s", logx=True, logy=True, xbase=2,
                      legend="lower right"))
    xs = [2.0**k for k in range(-4, 16)]
    top = max(pk for _, pk in roofs)
    ax.line(xs, [min(top, x * bandwidth) / 1e12 for x in xs], color="0.2",
            label=f"HBM {bandwidth / 1e12:.3g} TB/s")
    for i, (lab, pk) in enumerate(roofs):
        ridge = pk / bandwidth
        ax.hline(pk / 1e12, ridge, xs[-1], color=f"C{i}", label=f"{lab} peak")
        ax.vline(ridge, color=f"C{i}", dash="1,3")
        ax.note(ridge, pk / 1e12, f"ridge {ridge:.0f}", color=f"C{i}", dx=4, dy=12, size=9)
    if curve is not None:
        ax.line(curve[0], [y / 1e12 for y in curve[1]], color="C3", width=1.5, markers=True,
                label=curve[2])
    for lab, x, y in points:
        ax.points([x], [y / 1e12], color="k", size=4, star=True)
        ax.note(x, y / 1e12, lab, dx=7, dy=-5, size=9)
    return fig.save(path)


def bars(path: Path, *, title: str, labels: Sequence[str], series: dict[str, Sequence[float]],
         ylabel: str) -> Path:
    fig = Figure(max(600, 120 * len(labels) + 200), 500)
    ax = fig.add(Axes(title=title, ylabel=ylabel))
    ax.bars(labels, series)
    return fig.save(path)


def gantt(path: Path, *, title: str, ops: Sequence[tuple[int, int, str, float, float]],
          stages: int) -> Path:
    fig = Figure(1100, 45 * stages + 110)
    ax = fig.add(Axes(title=title, xlabel="seconds (F: forward, B: backward; white space is "
                      "the bubble)"))
    ax.rows = [f"stage {s}" for s in range(stages)]
    for s, i, kind, t0, t1 in ops:
        ax.box(s, t0, t1, color=f"C{i % 10}", opacity=1.0 if kind == "F" else 0.55,
               text=f"{kind}{i}")
    return fig.save(path)


def curves(path: Path, *, title: str, xlabel: str, ylabel: str,
           lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
           points: Sequence[tuple[str, Sequence[float], Sequence[float]]] = (),
           marks: Sequence[tuple[str, float]] = (), logx: bool = False,
           logy: bool = False) -> Path:
    fig = Figure(800, 500)
    ax = fig.add(Axes(title=title, xlabel=xlabel, ylabel=ylabel, logx=logx, logy=logy))
    for i, (lab, xs, ys) in enumerate(lines):
        ax.line(xs, ys, color=f"C{i}", label=lab)
    for i, (lab, xs, ys) in enumerate(points):
        ax.points(xs, ys, color=f"C{i + len(lines)}", label=lab)
    for i, (lab, x) in enumerate(marks):
        ax.vline(x, color="0.3", dash="2,3" if i else "6,4")
        ax.note(x, 0.04 + 0.06 * i, lab, dx=4, dy=0, size=9, y_is_fraction=True)
    return fig.save(path)


def occupancy_curves(path: Path, *, title: str, regs: tuple[Any, Any, int],
                     smem: tuple[Any, Any, int]) -> Path:
    fig = Figure(1100, 420, cols=2, title=title)
    for (x, y, mark), label, scale in ((regs, "registers per thread", 1),
                                       (smem, "shared memory per block (KiB)", 1024)):
        ax = fig.add(Axes(xlabel=label, ylabel="occupancy (resident warps / max warps)"
                          if scale == 1 else "", ylim=(0, 1.05)))
        ax.line([float(v) / scale for v in x], [float(v) for v in y], step=True, width=1.5)
        ax.vline(mark / scale, color="C3", dash="6,4")
    return fig.save(path)


def warp_banks(path: Path, *, title: str, panels: Sequence[tuple[str, Sequence[int]]]) -> Path:
    n = max(1, len(panels))
    fig = Figure(900, 260 * n + 30, rows=n, title=title)
    for label, banks in panels:
        lanes = [i for i, b in enumerate(banks) if b >= 0]
        hit = [b for b in banks if b >= 0]
        worst = max((hit.count(b) for b in set(hit)), default=0)
        ax = fig.add(Axes(title=f"{label}   (most lanes on one bank: {worst})", xlabel="lane",
                          ylabel="bank", xlim=(-1, 32), ylim=(-1, 32)))
        ax.points(lanes, hit, size=3.5)
    return fig.save(path)
