"""coalescing-transpose: sectors per request and bank conflicts across the four transposes."""

from __future__ import annotations

from typing import Any

from ..derive import Headline, Report, Section, Table
from ..sim import simt
from ..specs import get_gpu
from .params import Param, gpu

PROMPT = ("Why is a naive matrix transpose slow? Count what each warp's loads and stores cost in "
          "global memory and in shared memory, and show how a shared tile, padding and swizzling "
          "fix it.")

DEFAULTS = {"gpu": "h100-sxm", "dtype": "float32", "tile": 32, "n": 1024}

PARAMS: tuple[Param, ...] = (
    gpu(DEFAULTS["gpu"]),
    Param("dtype", "str", DEFAULTS["dtype"], "element type of the matrix", choices=("float32", "float16", "float64", "int8")),
    Param("tile", "int", DEFAULTS["tile"], "transpose tile edge", "elements", lo=1, hi=64),
    Param("n", "int", DEFAULTS["n"], "matrix size N (N x N)", "elements", lo=1, hi=8192),
)
_BYTES = {"float32": 4, "fp32": 4, "float64": 8, "fp64": 8, "float16": 2, "bf16": 2, "fp16": 2,
          "bfloat16": 2}


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    from ..errors import BadInput

    size = _BYTES.get(str(o["dtype"]))
    if size is None:
        raise BadInput(f"--dtype: choose one of {', '.join(_BYTES)}")
    g = get_gpu(o["gpu"])
    params = {"T": int(o["tile"]), "N": int(o["n"])}
    copy = simt.analyze(simt.get_kernel("copy"), size, params)
    per_clk = g.hbm_bytes_per_s / g.sm_count / g.boost_clock_hz
    rows, detail, data = [], [], {}
    for name in ("copy", "transpose-naive", "transpose-tiled", "transpose-padded",
                 "transpose-swizzled"):
        res = simt.analyze(simt.get_kernel(name), size, params)
        pred = simt.predicted_fraction_of_copy(res, copy, per_clk)
        glob = [i for i in res.instructions if i.space == "global"]
        sh = [i for i in res.instructions if i.space == "shared"]
        rows.append((name, max(i.sectors_per_request for i in glob),
                     glob[0].ideal_sectors_per_request,
                     max((i.wavefronts_per_request for i in sh), default=0),
                     max((i.conflict_degree for i in sh), default=0),
                     pred["fraction_of_copy"], pred["bound"]))
        for i in res.instructions:
            detail.append((name, i.space, i.op, f"{i.array}[{i.index}]",
                           i.sectors_per_request if i.space == "global" else "",
                           i.wavefronts_per_request if i.space == "shared" else ""))
        data[name] = res.to_dict() | {"prediction": pred}
    naive = data["transpose-naive"]["instructions"][1]
    s1 = Section(
        "1. Global memory: sectors per request",
        text=(f"A warp's access is served in 32-byte sectors. Reading a row, 32 lanes x {size} B "
              f"touch {naive and rows[0][1]:g} sectors, the minimum. The naive transpose writes a "
              f"column: each lane lands {o['n']} x {size} B from its neighbour, in its own sector, "
              f"so the store costs {naive['sectors_per_request']:g} sectors for "
              f"{naive['ideal_sectors_per_request']:g} sectors' worth of data."),
        headlines=(Headline("naive store sectors per request", naive["sectors_per_request"]),
                   Headline("ideal", naive["ideal_sectors_per_request"])))
    tiled = data["transpose-tiled"]["instructions"][2]
    s2 = Section(
        "2. Shared memory: wavefronts per request",
        text=(f"Staging a {o['tile']}x{o['tile']} tile in shared memory makes both global "
              f"accesses row-wise, but reading the tile by column puts every lane in the same "
              f"bank ({o['tile']} words apart): {tiled['wavefronts_per_request']:g} wavefronts "
              "per request instead of 1. One column of padding (row pitch T+1) shifts each row "
              "by one bank; an XOR swizzle (column c of row r stored at c ^ r) does the same "
              "without wasting memory."))
    s3 = Section(
        f"3. All five kernels ({size}-byte elements) and the predicted bandwidth on {g.id}",
        text=("Prediction: per SM, DRAM time = sectors x 32 B / HBM bytes per clock per SM; "
              "shared time = one clock per wavefront; the slower one sets the time (perfect "
              "overlap), relative to copy. Harris (2013) measured on a K20c: naive 0.41, tiled "
              "0.72, padded 1.06 of copy."),
        tables=(Table("", ("kernel", "max sectors/req", "ideal sectors/req",
                           "max wavefronts/req", "conflict degree", "predicted of copy",
                           "bound"), tuple(rows)),
                Table("per instruction", ("kernel", "space", "op", "access", "sectors/req",
                                          "wavefronts/req"), tuple(detail))))
    followups = (
        ("Why not transpose with the reads strided and the writes coalesced?",
         "Same problem moved: strided loads waste the same sectors; L1 may catch some reuse, but "
         "each request still touches 32 sectors."),
        ("Does padding work for float64?",
         "Yes: 8-byte accesses are served in half-warp phases of 16 lanes, and a pitch of T+1 "
         "doubles spreads each column over all banks (try --dtype float64)."),
        ("Why 32x8 threads for a 32x32 tile?",
         "Each thread moves 4 elements, amortising index math and giving the load pipeline "
         "independent work (Harris 2013)."),
        ("What does Nsight Compute show for this?",
         "l1tex__t_sectors_pipe_lsu_mem_global_op_st per request = 32 for the naive store; "
         "shared wavefronts per request = 32 for the tiled load."),
        ("What does the swizzle cost?",
         "One XOR per address; no extra shared memory, which matters for large tiles and for "
         "TMA/ldmatrix layouts that cannot pad."),
    )
    return Report(f"coalescing-transpose: {o['n']}x{o['n']} {o['dtype']}", (s1, s2, s3),
                  {"question": "coalescing-transpose", "options": o, "kernels": data},
                  question=PROMPT,
                  assumptions=(f"{o['n']}x{o['n']} row-major matrix, {o['tile']}x{o['tile']} "
                               "tiles, blocks of 32x8 threads (Harris 2013).",
                               "Sectors and wavefronts counted per warp request by the analyzer; "
                               "no cache reuse across requests."),
                  followups=followups, plot=_plot(size, params))


def _plot(size: int, params: dict[str, int]) -> Any:
    def draw(path: str) -> None:
        from ..report import plot_gpu

        panels = []
        for name in ("transpose-tiled", "transpose-padded"):
            spec = simt.get_kernel(name)
            panels.append((f"{name}: load tile (column read)",
                           simt.warp_banks(spec, 2, size, params).tolist()))
        plot_gpu.warp_banks(path, title="Banks hit by warp 0 before and after padding",
                            panels=panels)

    return draw
