"""kv --framework: the engine's max_tokens in --json, the engine named; bad input in one line."""

from __future__ import annotations

import json

import pytest

from scalemodel.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_kv_framework_json_is_the_engines_pool(capsys):
    from scalemodel.analytic.serving_memory import engine_kv_budget
    from scalemodel.specs import get_gpu, get_model

    d = _json(capsys, ["kv", "--model", "llama-3-8b", "--framework", "vllm-v0", "--util", "0.85",
                       "--context", "8k", "--json"])
    e = engine_kv_budget(get_model("llama-3-8b"), get_gpu("h100-sxm"), engine_id="vllm-v0",
                         util=0.85, max_model_len=8192)
    assert d["framework"] == "vllm-v0" and d["engine"]["engine"] == "vllm-v0"
    assert d["max_tokens"] == e.max_tokens == d["engine"]["max_tokens"]
    assert d["engine"]["block_size"] == 16 and d["engine"]["fits"] is True
    # another engine, another pool: SGLang takes its fraction before the weights
    s = _json(capsys, ["kv", "--model", "llama-3-8b", "--framework", "sglang", "--util", "0.85",
                       "--context", "8k", "--json"])
    assert s["max_tokens"] != d["max_tokens"] and s["engine"]["block_size"] == 1


def test_kv_framework_v071_uses_the_engine_accounting(capsys):
    """kv --framework vllm-v1-0.7.1 gives the pool engine_kv_budget computes for that profile:
    the token budget picked by the H100's name (8192), the logits of every profiled token."""
    from scalemodel.analytic.serving_memory import engine_kv_budget
    from scalemodel.specs import get_gpu, get_model

    d = _json(capsys, ["kv", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--framework",
                       "vllm-v1-0.7.1", "--util", "0.98", "--context", "2k", "--json"])
    e = engine_kv_budget(get_model("llama-3-8b"), get_gpu("h100-sxm"),
                         engine_id="vllm-v1-0.7.1", util=0.98, max_model_len=2048)
    assert d["engine"]["engine"] == "vllm-v1-0.7.1"
    assert d["max_tokens"] == e.max_tokens == d["engine"]["max_tokens"]
    assert d["engine"]["max_num_batched_tokens"] == 8192


@pytest.mark.parametrize("argv, start", [
    (["kv", "--framework", "vllm-v9"], "scalemodel kv: error: --framework: unknown serving engine"),
    (["kv", "--framework", "megatron-core"], "scalemodel kv: error: --framework: 'megatron-core'"),
    (["kv", "--model", "llama-3-70b", "--framework", "vllm-v1", "--context", "8k"],
     "scalemodel kv: error: kv --framework vllm-v1: llama-3-70b does not start"),
    (["kv", "--model", "llama-3-8b", "--framework", "vllm-v1", "--context", "128k",
      "--util", "0.3"], "scalemodel kv: error: kv --framework vllm-v1: llama-3-8b does not start"),
    (["kv", "--framework", "vllm-v1", "--reserve", "1GiB"], "scalemodel kv: error: --reserve"),
])
def test_kv_framework_bad_input_one_line_exit_2(capsys, argv, start):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(start), err
    if "does not start" in start:
        assert "GiB" in err  # says what it lacks
