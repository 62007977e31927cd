"""Bad input is reported on one line (the brief: one clear line, exit code 2), even when the
message quotes a value that carries a newline or another control character."""

from __future__ import annotations

import pytest

from scalemodel.cli import main
from scalemodel.errors import BadInput


def test_bad_input_message_is_one_line():
    e = BadInput("--measured: cannot read latencies from '0\n' (FileNotFoundError)\r\t")
    text = str(e)
    assert "\n" not in text and "\r" not in text and "\t" not in text
    assert "\\n" in text  # shown escaped, not dropped
    assert str(BadInput("plain message, é ok")) == "plain message, é ok"


@pytest.mark.parametrize("value", ["0\n", "a\nb.json", "x\r\ny"])
def test_cli_path_with_a_newline_is_one_line_exit_2(capsys, value):
    rc = main(["gpu", "hierarchy", "--gpu", "h100-sxm", "--measured", value])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("scalemodel gpu: error: --measured")


def test_web_error_for_a_newline_value_is_one_line():
    pytest.importorskip("flask")
    from scalemodel.web.app import create_app

    client = create_app().test_client()
    r = client.get("/api/gpu/hierarchy", query_string={"gpu": "h100-sxm", "measured": "0\n"})
    assert r.status_code == 400
    assert "\n" not in r.get_json()["error"]
