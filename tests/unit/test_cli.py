"""The CLI contract: JSON keys fixed by the issue, one-line errors with exit code 2."""


import pytest

from conftest import cli_json as run_json
from conftest import run_cli as run
from scalemodel.cli import main


def test_kv_json_keys(capsys):
    d = run_json(capsys, "kv", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8",
                 "--context", "8192")
    for k in ("kv_bytes_per_token", "kv_bytes_total", "weights_bytes", "max_concurrent_sequences",
              "max_tokens"):
        assert k in d
    assert d["kv_bytes_per_token"] == 327_680
    assert d["derivation"]["steps"]


def test_memory_json_keys(capsys):
    d = run_json(capsys, "memory", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8",
                 "--zero", "3")
    assert set(d["breakdown"]) >= {"params", "grads", "optimizer", "activations"}
    assert d["per_gpu_bytes"] == pytest.approx(sum(d["breakdown"].values()))
    assert d["layout"]["dp"] == 8  # derived from --gpus


def test_memory_fit_gives_min_gpus(capsys):
    d = run_json(capsys, "memory", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--fit")
    assert isinstance(d["min_gpus"], int) and d["min_gpus"] >= 1
    assert d["per_gpu_bytes"] <= d["capacity_bytes"]


def test_roofline_json_keys(capsys):
    d = run_json(capsys, "roofline", "--gpu", "h100-sxm", "--model", "llama-3-70b", "--decode",
                 "--batch", "1", "--context", "1")
    for k in ("ridge_flop_per_byte", "arithmetic_intensity", "bound", "attainable_flop_per_s",
              "time_s", "crossover_batch"):
        assert k in d
    assert d["bound"] == "memory"
    d = run_json(capsys, "roofline", "--gpu", "h100-sxm", "--gemm", "8192,8192,8192")
    assert d["bound"] == "compute"
    d = run_json(capsys, "roofline", "--gpu", "h100-sxm")
    assert d["dtype"] == "bf16" and round(d["ridge_flop_per_byte"]) == 295


def test_questions_json(capsys):
    d = run_json(capsys, "questions")
    assert len(d) == 24
    assert {"id", "loops", "title", "status"} <= set(d[0])
    answered = {q["id"] for q in d if q["status"] == "answered"}
    assert {"kv-cache", "training-memory", "roofline"} <= answered


@pytest.mark.parametrize("qid", ["kv-cache", "training-memory", "roofline"])
def test_answers_render(capsys, qid):
    rc, out, err = run(capsys, "answer", qid)
    assert rc == 0, err
    assert "Follow-ups" in out and "Sources:" in out


def test_answer_overrides(capsys):
    d = run_json(capsys, "answer", "kv-cache", "--model", "llama-2-7b", "--tp", "1")
    assert d["kv"]["kv_bytes_per_token"] == 524_288


@pytest.mark.parametrize("argv, needle", [
    (["kv", "--model", "llama-3-71b"], "llama-3-70b"),
    (["kv", "--gpu", "h100"], "h100"),
    (["kv", "--tp", "3"], "does not divide"),
    (["kv", "--batch", "0"], "at least 1"),
    (["kv", "--kv-dtype", "fp7"], "unknown dtype"),
    (["memory", "--gpus", "12", "--tp", "8"], "not a multiple"),
    (["memory", "--optimizer", "adamw2"], "optimizer"),
    (["memory", "--recompute", "some"], "invalid choice"),
    (["roofline", "--gemm", "1,2"], "M,N,K"),
    (["roofline", "--decode"], "need --model"),
    (["answer", "kv-cach"], "kv-cache"),
    (["kv", "--model", "/no/such/config.json"], "no such file"),
    (["memory", "--ep", "2"], "no experts"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:  # argparse errors exit directly
        rc = main(argv)
        raise SystemExit(rc)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert needle in err


def test_context_beyond_model_warns_but_answers(capsys):
    rc, out, err = run(capsys, "kv", "--model", "llama-2-7b", "--context", "32k")
    assert rc == 0
    assert "exceeds" in out


def test_plot_roofline(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    p = tmp_path / "roofline.png"
    rc, out, err = run(capsys, "roofline", "--gpu", "h100-sxm", "--model", "llama-3-70b",
                       "--decode", "--plot", str(p))
    assert rc == 0, err
    assert p.stat().st_size > 10_000


def test_specs_lists(capsys):
    d = run_json(capsys, "specs", "gpus")
    assert any(g["id"] == "h100-sxm" for g in d["items"])
    by = {g["id"]: g for g in d["items"]}
    # the share of a burst GEMM rate a long run keeps (gpus.toml; docs/planner.md "Sustained rate")
    assert by["h100-sxm"]["sustained_fraction"] == by["h100-sxm"]["sustained_gemm_ratio"] == 0.848
    assert by["a100-sxm-80gb"]["sustained_fraction"] == pytest.approx(1.305 / 1.41)
    assert by["h100-sxm"]["sustained_basis"] == "gemm" and by["h100-sxm"]["fp8_gemm_ratio"] == 0.882
    assert "mamf" in by["h100-sxm"]["sources"]["sustained_gemm_ratio"]
    d = run_json(capsys, "specs", "models", "deepseek-v3")
    assert d["items"][0]["attention"] == "mla"


def _answered_ids():
    from scalemodel.questions import BANK

    return [q.id for q in BANK if q.status == "answered"]


@pytest.mark.parametrize("qid", _answered_ids())
def test_every_answer_renders_as_json(capsys, qid):
    # moe-routing trains routers: a smaller token count keeps the test quick, same code path
    extra = ["--tokens", "256"] if qid == "moe-routing" else []
    d = run_json(capsys, "answer", qid, *extra)
    assert isinstance(d, dict) and d
