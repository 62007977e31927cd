"""The web app's fast paths: inline SVG without matplotlib, the result cache, cost bounds, BLAS
threads. Behaviour only (no timings: bench/bench_web.py measures)."""

import math
import re
import xml.etree.ElementTree as ET

import pytest

from scalemodel.report import plot, plot_gpu, svg

pytest.importorskip("flask")

from scalemodel.web import create_app  # noqa: E402
from scalemodel.web.cache import Cache, key_of  # noqa: E402


@pytest.fixture(scope="module")
def client():
    return create_app(timeout_s=20).test_client()


@pytest.fixture
def no_matplotlib(monkeypatch):
    def refuse():
        raise AssertionError("matplotlib was used for an inline figure")

    monkeypatch.setattr(plot, "_pyplot", refuse)
    monkeypatch.setattr(plot_gpu, "_pyplot", refuse)


def parse(path):
    root = ET.fromstring(path.read_text())
    assert root.tag.endswith("svg")
    return root


def texts(root):
    return [t.text for t in root.iter() if t.tag.endswith("text") and t.text]


def test_every_report_figure_has_an_inline_svg_twin(tmp_path, no_matplotlib):
    with svg.inline():
        parse(plot.roofline(str(tmp_path / "r.svg"), title="Roofline: H100", bandwidth=3.35e12,
                            roofs=[("bf16", 989e12), ("fp8", 1979e12)],
                            points=[("decode b=1", 1.0, 3.35e12)],
                            curve=([1, 2, 4], [3.35e12, 6.7e12, 13.4e12], "decode")))
        parse(plot.bars(str(tmp_path / "b.svg"), title="memory", labels=["a", "b"],
                        series={"weights": [1, 2], "kv": [3, 4]}, ylabel="GB"))
        parse(plot.gantt(str(tmp_path / "g.svg"), title="1F1B", stages=2,
                         ops=[(0, 0, "F", 0, 1), (1, 0, "F", 1, 2), (1, 0, "B", 2, 4)]))
        parse(plot.curves(str(tmp_path / "c.svg"), title="goodput", xlabel="tau", ylabel="g",
                          lines=[("model", [10, 100, 1000], [0.5, 0.9, 0.7])],
                          points=[("sim", [10, 100], [0.52, 0.88])], marks=[("opt", 120)],
                          logx=True))
        parse(plot_gpu.occupancy_curves(str(tmp_path / "o.svg"), title="occ",
                                        regs=([0, 32, 64], [1, 1, 0.5], 32),
                                        smem=([0, 1024], [1, 0.5], 0)))
        parse(plot_gpu.warp_banks(str(tmp_path / "w.svg"), title="banks",
                                  panels=[("tiled", [0] * 32), ("padded", list(range(32)))]))


def test_roofline_labels_survive(tmp_path, no_matplotlib):
    with svg.inline():
        p = plot.roofline(str(tmp_path / "r.svg"), title="Roofline: X", bandwidth=2e12,
                          roofs=[("bf16", 1e15)], points=[("GEMM 4096^3", 1365.0, 1e15)])
    words = " ".join(texts(parse(p)))
    assert "Roofline: X" in words and "GEMM 4096^3" in words and "ridge 500" in words


def test_text_is_escaped(tmp_path, no_matplotlib):
    evil = '<script>alert(1)</script> & "q"'
    with svg.inline():
        p = plot.curves(str(tmp_path / "e.svg"), title=evil, xlabel=evil, ylabel="y",
                        lines=[(evil, [1, 2], [3, 4])])
    raw = p.read_text()
    assert "<script" not in raw and "&lt;script&gt;" in raw
    assert evil in texts(parse(p))


def test_log_axes_skip_values_they_cannot_show(tmp_path, no_matplotlib):
    with svg.inline():
        p = plot.curves(str(tmp_path / "z.svg"), title="t", xlabel="x", ylabel="y", logx=True,
                        lines=[("l", [0, -1, 1, 10, math.inf], [1, 2, 3, math.nan, 5])])
    raw = p.read_text()
    assert "nan" not in raw and "inf" not in raw
    parse(p)


def test_two_panels_inline_is_one_file(tmp_path, no_matplotlib):
    out = tmp_path / "plan.svg"
    with svg.inline():
        plot.two_panels(str(out),
                        lambda p: plot.bars(p, title="a", labels=["x"], series={"s": [1]},
                                            ylabel="s"),
                        lambda p: plot.gantt(p, title="b", ops=[(0, 0, "F", 0, 1)], stages=1))
    assert [f.name for f in tmp_path.iterdir()] == ["plan.svg"]
    assert {"a", "b"} <= set(texts(parse(out)))


def test_cli_plots_still_use_matplotlib(tmp_path, monkeypatch):
    used = []

    def fake():
        used.append(1)
        raise RuntimeError("stop here")

    monkeypatch.setattr(plot, "_pyplot", fake)
    with pytest.raises(RuntimeError):
        plot.curves(str(tmp_path / "c.svg"), title="t", xlabel="x", ylabel="y",
                    lines=[("l", [1], [1])])
    assert used


def test_colours():
    assert svg.color("C0") == "#1f77b4" and svg.color("C13") == svg.color("C3")
    assert svg.color("0.2") == "#333333" and svg.color("k") == "#000000"
    assert svg.color('"><script>') == "#000000"


# --- the result cache ---------------------------------------------------------------------------


def test_same_inputs_are_computed_once(client):
    st = client.application.extensions["scalemodel"]
    client.get("/questions/kv-cache?batch=9")
    hits = st.results.hits
    r1 = client.get("/questions/kv-cache?batch=09")  # the same validated input
    r2 = client.get("/api/answer?id=kv-cache&batch=9")  # the API shares the entry
    assert r1.status_code == 200 and r2.status_code == 200
    assert st.results.hits == hits + 2


def test_figures_are_cached_with_their_result(client):
    st = client.application.extensions["scalemodel"]
    a = client.get("/questions/roofline?batch=3").get_data(as_text=True)
    n = len(st.figures)
    b = client.get("/questions/roofline?batch=03").get_data(as_text=True)
    fig_a, fig_b = (re.search(r"<svg.*</svg>", x, re.S).group(0) for x in (a, b))
    assert fig_a == fig_b and len(st.figures) == n


def test_what_is_never_cached():
    import argparse

    ns = argparse.Namespace(id="hang-triage", live=True, json=True)
    assert key_of("answer", ns, named_file=False) is None
    assert key_of("answer", argparse.Namespace(id="kv-cache"), named_file=True) is None
    assert key_of("gpu/bench", argparse.Namespace(n=8), named_file=False) is None
    k1 = key_of("kv", argparse.Namespace(tp=8, json=True, plot=None), named_file=False)
    k2 = key_of("kv", argparse.Namespace(tp=8, json=False, plot="x.svg"), named_file=False)
    assert k1 == k2 is not None


def test_cache_is_bounded():
    c = Cache(size=3)
    for i in range(5):
        c.put(i, str(i))
    assert len(c) == 3 and c.get(0) is None and c.get(4) == "4"


# --- bounds on memory-hungry arguments --------------------------------------------------------


def test_costly_arguments_are_bounded(client):
    r = client.get("/api/moe/route?tokens=100000000")
    assert r.status_code == 400 and "tokens" in r.get_json()["error"]
    r = client.get("/questions/moe-routing?tokens=10000000")
    assert r.status_code == 400
    assert client.get("/questions/coalescing-transpose?n=100000").status_code == 400


def test_moe_routing_takes_a_token_count_from_the_form():
    from scalemodel.errors import BadInput
    from scalemodel.questions import moe_routing

    rep = moe_routing.build({"tokens": 256.0, "steps": 3})
    assert rep.data["options"]["tokens"] == 256
    with pytest.raises(BadInput):
        moe_routing.build({"tokens": 25.5, "steps": 3})


def test_blas_threads_left_alone_when_the_user_set_them(monkeypatch):
    from scalemodel.web.threads import one_blas_thread

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert one_blas_thread() == "left as set by the environment"


def test_classic_answer_is_pinned_and_shared_with_a_default_form(client):
    st = client.application.extensions["scalemodel"]
    client.get("/questions/memory-hierarchy")
    key = st.classic_key("memory-hierarchy")
    assert key in st.results._pinned
    hits = st.results.hits
    assert client.get("/questions/memory-hierarchy?gpu=h100-sxm").status_code == 200
    assert st.results.hits == hits + 1
    assert st.classic_key("no-such-question") is None
