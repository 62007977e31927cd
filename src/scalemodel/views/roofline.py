"""View of the roofline engine: a GPU's ridge points, and where one kernel lands on them."""

from __future__ import annotations

from typing import Any


def ridge_table(gpu: Any, ridges: Any) -> Any:
    from ..derive import Table

    return Table(
        f"{gpu.name}: ridge points (dense peak / HBM {gpu.hbm_bytes_per_s / 1e12:.3g} TB/s)",
        ("precision", "peak TFLOP/s", "ridge FLOP/byte"),
        tuple((k, pk / 1e12, r) for k, pk, r in ridges),
    )


def ridges_report(gpu: Any, ridges: Any, prec: str) -> Any:
    """``roofline --gpu`` alone: the ridge point of each precision."""
    from ..derive import Report, Section

    bf = ridges[0]
    data = {"gpu": gpu.id, "dtype": bf[0], "ridge_flop_per_byte": bf[2],
            "peak_flop_per_s": bf[1], "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
            "ridge_points": [{"dtype": k, "peak_flop_per_s": pk, "ridge_flop_per_byte": r}
                             for k, pk, r in ridges]}
    text = ("A kernel whose FLOPs per byte of HBM traffic fall below the ridge point is "
            "memory-bound: it cannot use the peak, whatever its code does.")
    return Report(f"scalemodel roofline: {gpu.id}", (Section("", text=text,
                  tables=(ridge_table(gpu, ridges),)),), data,
                  plot=plotter(gpu, prec, [], None))


def point_report(gpu: Any, ridges: Any, pt: Any, title: str, *, kind: str, batch: int,
                 context: int, gemm: tuple[int, int, int] | None, curve: Any) -> Any:
    """One kernel on the roofline (``kind``: decode, gemm or other), with its derivation."""
    from ..derive import Headline, Report, Section

    heads = [
        Headline("FLOPs", pt.flops, "FLOP"),
        Headline("bytes moved", pt.bytes, "B"),
        Headline("arithmetic intensity", pt.arithmetic_intensity, "FLOP/B"),
        Headline(f"ridge point ({pt.dtype})", pt.ridge_flop_per_byte, "FLOP/B"),
        Headline("bound", pt.bound),
        Headline("attainable", pt.attainable_flop_per_s, "FLOP/s"),
        Headline("time (lower bound)", pt.time_s, "s"),
    ]
    if kind == "decode":
        lim = pt.extra["intensity_limit_large_batch"]
        if pt.crossover_batch is None:
            heads.append(Headline("compute-bound from batch", "never at this context"))
            note = (f"As the batch grows the KV-cache reads grow with it, so intensity tends to "
                    f"{lim:.0f} FLOP/B, below the ridge: decode at context {context:,} stays "
                    "memory-bound at any batch.")
        else:
            heads.append(Headline("compute-bound from batch", pt.crossover_batch, "seq"))
            note = (f"Intensity rises with the batch because weights are read once per step; the "
                    f"KV reads that grow with it cap intensity at {lim:.0f} FLOP/B.")
        heads.append(Headline("tokens/s at this batch (upper bound)", batch / pt.time_s,
                              "token/s"))
    elif kind == "gemm" and gemm:
        note = (f"With N = {gemm[1]} and K = {gemm[2]} fixed, the GEMM reaches the ridge "
                f"from M = {pt.crossover_batch} rows (tokens)." if pt.crossover_batch else "")
    else:
        note = ""
    sections = (Section(title, text=note, headlines=tuple(heads)),
                Section("", derivation=pt.derivation),
                Section("", tables=(ridge_table(gpu, ridges),)))
    point = (title.split(",")[0], pt.arithmetic_intensity, pt.attainable_flop_per_s)
    return Report(f"scalemodel roofline: {gpu.id}", sections, pt.to_dict(),
                  plot=plotter(gpu, pt.dtype, [point], curve))


def plotter(gpu: Any, prec: str, points: list[tuple[str, float, float]], curve: Any) -> Any:
    def draw(path: str) -> None:
        from ..report import plot

        roofs = [(prec, gpu.peak_flop_per_s(prec))]
        for extra in ("fp8", "tf32", "fp32"):
            if extra in gpu.flop_per_s and extra != prec:
                roofs.append((extra, gpu.flop_per_s[extra]))
        plot.roofline(path, title=f"Roofline: {gpu.name}", bandwidth=gpu.hbm_bytes_per_s,
                      roofs=roofs, points=points, curve=curve)

    return draw
