"""moe serve refuses a decode context or a prompt longer than the model's context window, one
line and exit 2, as plan serve does (issue 17, Bad input: "lengths beyond the model's context");
before s19-review it priced a 10M-token KV for DeepSeek-V3, whose config.json states
max_position_embeddings = 163,840."""

from __future__ import annotations

import pytest

from conftest import run_cli
from scalemodel.specs import get_model


@pytest.mark.parametrize("flag", ["--context", "--prompt"])
def test_length_beyond_the_model_context_is_one_line_exit_2(capsys, flag):
    m = get_model("deepseek-v3")
    assert m.max_context == 163_840
    rc, out, err = run_cli(capsys, "moe", "serve", flag, str(m.max_context + 1), "--json")
    assert rc == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "163,840" in lines[0]
