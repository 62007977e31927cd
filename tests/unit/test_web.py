"""The study web app through Flask's test client: pages, API = CLI --json, errors, security."""

import json
import re

import pytest

pytest.importorskip("flask")

from conftest import cli_json  # noqa: E402
from scalemodel.cli import main  # noqa: E402
from scalemodel.web import create_app  # noqa: E402


@pytest.fixture(scope="module")
def client():
    return create_app(timeout_s=20).test_client()


def test_index_lists_all_questions_with_status(client):
    r = client.get("/")
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    from scalemodel.questions import BANK

    for q in BANK:
        assert f"/questions/{q.id}" in html
    assert "DeepSeek" in html and "xAI" in html
    for status in {q.status for q in BANK}:  # whatever the statuses are today, each is shown
        assert status in html


def test_question_page_recomputes_with_the_form(client, capsys):
    r = client.get("/questions/kv-cache?context=4096&batch=8")
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    d = cli_json(capsys, "answer", "kv-cache", "--context", "4096", "--batch", "8")
    m = re.search(r'<data value="([^"]+)" data-label="per sequence of 4,096 tokens">', html)
    assert m and float(m.group(1)) == d["kv"]["kv_bytes_per_sequence"]
    assert "Follow-ups" in html and 'name="context"' in html and 'value="4096"' in html


def test_plot_is_inline_svg(client):
    html = client.get("/questions/roofline").get_data(as_text=True)
    assert "<svg" in html and "<script" not in html


def test_unknown_question_is_404(client):
    assert client.get("/questions/no-such-question").status_code == 404
    assert client.get("/tools/no-such-tool").status_code == 404


def test_bad_field_shows_one_line_next_to_it(client):
    r = client.get("/questions/kv-cache?context=abc")
    assert r.status_code == 400
    html = r.get_data(as_text=True)
    m = re.search(r'id="err-context">([^<]+)<', html)
    assert m and "\n" not in m.group(1) and "Traceback" not in html


def test_model_name_with_html_renders_as_text(client):
    r = client.get("/questions/kv-cache", query_string={"model": "<img src=x onerror=alert(1)>"})
    html = r.get_data(as_text=True)
    assert r.status_code == 400
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_api_mirrors_cli_json(client, capsys):
    r = client.get("/api/kv?model=llama-3-70b&gpu=h100-sxm&tp=8&context=8192")
    assert r.status_code == 200
    assert r.get_json() == cli_json(capsys, "kv", "--model", "llama-3-70b", "--gpu", "h100-sxm",
                                    "--tp", "8", "--context", "8192")
    r = client.get("/api/claim?model=llama-3-70b&gpus=64&gpu=h100-sxm&tokens=1T&days=7")
    assert r.get_json()["verdict"] == "implausible"
    r = client.get("/api/answer?id=roofline")
    assert r.status_code == 200 and r.get_json()["question"] == "roofline"


def test_api_bad_input_is_400_with_the_same_message(client, capsys):
    r = client.get("/api/kv?model=nope")
    assert r.status_code == 400
    main(["kv", "--model", "nope"])
    assert r.get_json()["error"] in capsys.readouterr()[1]
    assert client.get("/api/kv?bogus=1").status_code == 400
    assert client.get("/api/nope").status_code == 404


def test_bounds_and_paths(client, tmp_path):
    r = client.get("/api/kv?simulate=1&requests=10000000")
    assert r.status_code == 400 and "requests" in r.get_json()["error"]
    for bad in ("/etc/passwd", "../x.json", "config.json"):
        r = client.get("/api/kv", query_string={"model": bad})
        assert r.status_code == 400 and "path" in r.get_json()["error"]
    # with an allowed directory, files inside it are read and files outside are refused
    cfg = tmp_path / "m" / "config.json"
    cfg.parent.mkdir()
    from scalemodel.specs.sources import data_path

    cfg.write_text(data_path("models/llama-3-8b.json").read_text())
    c2 = create_app(data_dir=tmp_path).test_client()
    assert c2.get("/api/kv", query_string={"model": str(cfg)}).status_code == 200
    assert c2.get("/api/kv", query_string={"model": "m/config.json"}).status_code == 200
    assert c2.get("/api/kv", query_string={"model": "../../etc/passwd"}).status_code == 400


def test_openapi_lists_every_command(client):
    doc = client.get("/openapi.json").get_json()
    assert doc["openapi"].startswith("3.")
    for p in ("/api/kv", "/api/memory", "/api/roofline", "/api/claim", "/api/drill", "/api/answer"):
        assert p in doc["paths"]
    assert "/api/serve" not in doc["paths"]
    names = {p["name"] for p in doc["paths"]["/api/kv"]["get"]["parameters"]}
    assert {"model", "gpu", "context", "kv_dtype", "simulate"} <= names


def test_tool_page_and_drill_page(client, capsys):
    r = client.get("/tools/roofline?run=1&gpu=h100-sxm&gemm=4096,4096,4096")
    assert r.status_code == 200 and "compute" in r.get_data(as_text=True)
    d = cli_json(capsys, "drill", "--topic", "kv-cache", "--seed", "3")
    r = client.get(f"/drill?topic=kv-cache&seed=3&rounds=1&answer={d['answer']}")
    html = r.get_data(as_text=True)
    assert 'id="verdict" class="correct"' in html and 'id="summary"' in html
    assert client.get("/drill?topic=kv-cache&seed=3&answer=zzz").status_code == 400


def test_security_headers_and_no_post(client):
    r = client.get("/")
    assert "script-src" not in r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in r.headers["Content-Security-Policy"]
    assert client.post("/api/kv").status_code == 405


def test_static_export(tmp_path, capsys):
    assert main(["site", "--out", str(tmp_path / "site"), "--json"]) == 0
    out = json.loads(capsys.readouterr()[0])
    assert any(p["path"] == "questions/kv-cache.html" for p in out["pages"])
    html = (tmp_path / "site" / "questions" / "roofline.html").read_text()
    assert 'href="../static/style.css"' in html and "<svg" in html and "<form" not in html
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="questions/kv-cache.html"' in index


def test_serve_binds_to_localhost_by_default():
    from scalemodel.cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1" and args.port == 8000


@pytest.mark.parametrize("path", ["triage/run", "comm/bench", "gpu/build", "gpu/bench",
                                  "serve", "site"])
def test_commands_that_start_processes_or_write_files_are_not_served(client, path):
    # a web request must not launch ranks, compile code or write into the server's folders
    assert client.get(f"/api/{path}").status_code == 404
    assert client.get(f"/tools/{path}").status_code == 404


def test_file_writing_options_are_not_offered(client):
    html = client.get("/tools/cluster/simulate").get_data(as_text=True)
    assert 'name="chrome_trace"' not in html and 'name="usage_out"' not in html
    assert 'name="sku"' in html  # the other fields of the same command are still offered


# --- forms from the declarations (issue 20) ---------------------------------------------------


def test_question_form_has_exactly_the_declared_parameters(client):
    from scalemodel.questions import BANK, params_of

    for q in BANK:
        html = client.get(f"/questions/{q.id}").get_data(as_text=True)
        names = set(re.findall(r'<(?:input|select) [^>]*name="([a-z_0-9]+)"', html))
        assert names == {p.name for p in params_of(q.id) if p.name != "live"}, q.id


def test_question_page_refuses_what_the_question_does_not_take(client):
    r = client.get("/api/answer?id=kv-cache&regs=64")
    assert r.status_code == 400 and "regs" in r.get_json()["error"]
    r = client.get("/api/answer/blast-radius?layout=tp%3D8%2Cpp%3D4%2Cdp%3D512")
    assert r.status_code == 200 and r.get_json()["layout"] == "tp=8,pp=4,dp=512"
    assert client.get("/api/answer?id=kv-cach").status_code == 400


def test_store_false_flag_is_a_checkbox_that_works(client, capsys):
    html = client.get("/tools/plan/train").get_data(as_text=True)
    assert re.search(r'<input type="checkbox" id="f-no_grad_accum_fusion" '
                     r'name="no_grad_accum_fusion"', html)
    base = "/api/plan/train?model=llama-3-8b&gpus=8"
    on, off = client.get(base), client.get(base + "&no_grad_accum_fusion=1")
    assert on.status_code == 200 and off.status_code == 200, off.get_data(as_text=True)
    assert off.get_json() == cli_json(capsys, "plan", "train", "--model", "llama-3-8b",
                                      "--gpus", "8", "--no-grad-accum-fusion")
    assert off.get_json() != on.get_json()


def test_no_help_text_shows_a_none_default(client):
    st = client.application.extensions["scalemodel"]
    for path, fields in st.fields.items():
        for f in fields:
            assert "None" not in f.help, (path, f.dest, f.help)


def test_most_question_pages_have_a_figure(client):
    from scalemodel.questions import BANK

    with_svg = []
    for q in BANK:
        html = client.get(f"/questions/{q.id}").get_data(as_text=True)
        if '<figure class="plot"><svg' in html:
            with_svg.append(q.id)
            assert "<script" not in html
    assert len(with_svg) >= 15, with_svg  # issue 20: a picture where it helps, 15 of 24 at least


def test_figures_draw_the_answers_own_numbers(monkeypatch, tmp_path):
    from scalemodel.questions import build_answer
    from scalemodel.report import plot

    seen = {}
    monkeypatch.setattr(plot, "bars", lambda path, **kw: seen.update(kw))
    rep = build_answer("kv-cache", {"context": 4096})
    rep.plot(str(tmp_path / "k.svg"))
    # bars in KB (1e3 B) per token: llama-3-70b as configured is 80 layers x 8 K/V heads x 128 x
    # 2 (K and V) x 2 bytes = 327,680 B = 327.68 KB
    assert seen["series"]["KB per token"][0] == pytest.approx(327.68)
    rep = build_answer("blast-radius", {"layout": "tp=8,pp=4,dp=512"})
    rep.plot(str(tmp_path / "b.svg"))
    by = {f["component"]: f["gpu_hours_per_month"] for f in rep.data["faults"]}
    assert seen["series"]["thousand GPU-hours"][seen["labels"].index("gpu")] == \
        pytest.approx(by["gpu"] / 1e3)


def test_repeatable_flag_takes_several_values(client, capsys):
    # `--predicate` is action="append": the form's text area takes one value per line or per ';'
    html = client.get("/tools/gpu/divergence").get_data(as_text=True)
    assert '<textarea id="f-predicate" name="predicate"' in html
    r = client.get("/api/gpu/divergence", query_string={
        "predicate": "threadIdx.x < 16; threadIdx.x % 2 == 0"})
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.get_json() == cli_json(capsys, "gpu", "divergence", "--predicate", "threadIdx.x < 16",
                                    "--predicate", "threadIdx.x % 2 == 0")
