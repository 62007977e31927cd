"""The bounds table (specs/data/bounds.toml): one source for the CLI, the web app and the docs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scalemodel.errors import BadInput
from scalemodel.specs import bounds

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


def test_docs_render_the_table_from_the_data():
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- bounds:begin -->\n") + len("<!-- bounds:begin -->\n")
    end = text.index("<!-- bounds:end -->")
    assert text[start:end] == bounds.markdown_table()


def test_every_bound_says_why_and_has_a_source():
    t = bounds.table()
    assert t["source"] == "scalemodel-bounds"
    for section in ("parse", "config", "billing", "arg"):
        for name, e in t[section].items():
            assert e["max"] > 0 and len(e["why"]) >= 5, (section, name)


def test_web_limits_come_from_the_same_table():
    from scalemodel.web.limits import COSTS, GENERIC_INT, LIMITS

    t = bounds.table()
    for dest, e in t["arg"].items():
        if dest not in ("int", "float"):
            assert LIMITS[dest][1] == e["web_max"] <= e["max"]
    assert t["arg"]["int"]["web_max"] == GENERIC_INT
    assert COSTS["cluster/simulate"]["jobs"] == tuple(t["web_cost"]["cluster/simulate"]["jobs"])


def test_check_args_refuses_past_the_bound_and_names_it():
    ok = argparse.Namespace(requests=200_000, seed=3, frac=0.5, dims=(32, 4), name="x")
    bounds.check_args(ok)
    with pytest.raises(BadInput, match=r"--requests: .* past the bound arg\.requests"):
        bounds.check_args(argparse.Namespace(requests=200_001))
    with pytest.raises(BadInput, match=r"arg\.int"):
        bounds.check_args(argparse.Namespace(seed=2**64))
    with pytest.raises(BadInput, match="finite"):
        bounds.check_args(argparse.Namespace(frac=float("inf")))


def test_depth_is_measured_without_recursion():
    deep: list = []
    cur = deep
    for _ in range(200_000):
        cur.append([])
        cur = cur[0]
    assert bounds.depth_of(deep, 64) == 65  # stops once past the limit
    assert bounds.depth_of({"a": [1, {"b": 2}]}, 64) == 3


def test_model_config_numbers_by_field_name_anywhere():
    bounds.check_model_config({"text_config": {"num_hidden_layers": 10_000}}, "m")
    with pytest.raises(BadInput, match="config.num_hidden_layers"):
        bounds.check_model_config({"text_config": {"num_hidden_layers": 10_001}}, "m")
    with pytest.raises(BadInput, match="config.number"):
        bounds.check_model_config({"rope_scaling": {"factor": 1e300}}, "m")


def test_the_server_thread_bound_does_not_bound_a_kernel_block(capsys):
    """serve --threads (waitress workers, bound 256) and gpu occupancy --threads (threads per
    block, up to 1024 on every CUDA GPU: CUDA Programming Guide, Compute Capabilities table)
    are different quantities: a 1024-thread block is priced, 300 server threads are refused
    under the flag the user typed."""
    from scalemodel.cli import main

    assert main(["gpu", "occupancy", "--gpu", "h100-sxm", "--threads", "1024", "--regs", "32",
                 "--smem", "0", "--json"]) == 0
    capsys.readouterr()
    assert main(["serve", "--threads", "300"]) == 2
    err = capsys.readouterr().err
    assert "--threads: 300" in err and err.count("\n") == 1
