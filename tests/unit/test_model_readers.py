"""Model-config readers: the generic reader's notes, sliding windows, quantization_config and
the one-line errors for bad configs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalemodel.analytic.params import count_params
from scalemodel.errors import BadInput
from scalemodel.specs import from_hf_config, get_model
from scalemodel.specs.sources import data_path

FIX = Path(__file__).parent.parent / "fixtures" / "hf_configs"
ROOT = Path(__file__).resolve().parents[2]


def _llama() -> dict:
    return json.loads(data_path("models/llama-3-8b.json").read_text())


def test_generic_reader_counts_like_llama_and_says_what_it_assumed():
    cfg = {**_llama(), "model_type": "my_new_decoder", "architectures": ["MyNewForCausalLM"]}
    g = from_hf_config(cfg, "new", "test")
    assert count_params(g).total == count_params(get_model("llama-3-8b")).total
    text = " ".join(g.notes)
    assert "generic reader" in text and "hidden_size" in text and "num_key_value_heads" in text
    assert "assumed" in text and "gated" in text
    # keys the reader never looked at are not claimed as read
    assert "rope_theta" not in g.notes[0]


def test_generic_reader_notes_reach_the_kv_json():
    cfg = {**_llama(), "model_type": "my_new_decoder"}
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.json"
        p.write_text(json.dumps(cfg))
        r = subprocess.run([sys.executable, "-m", "scalemodel", "kv", "--model", str(p), "--json"],
                           capture_output=True, text=True, cwd=ROOT,
                           env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    steps = json.loads(r.stdout)["derivation"]["steps"]
    assert any("generic reader" in s["name"] for s in steps)


def test_layer_types_override_the_family_pattern():
    cfg = json.loads((FIX / "gemma-2-9b.json").read_text())
    cfg["layer_types"] = ["full_attention"] * 40 + ["sliding_attention"] * 2
    m = from_hf_config(cfg, "g", "t")
    assert m.sliding_layers == (40, 41)


def test_qwen2_use_sliding_window_false_means_no_window():
    m = get_model("qwen2.5-72b")
    assert m.n_sliding_layers == 0


@pytest.mark.parametrize("patch, msg", [
    ({"sliding_window": -1}, "sliding_window"),
    ({"layer_types": ["local"] * 42}, "layer_types has 'local'"),
    ({"layer_types": ["full_attention"]}, "one entry per layer"),
    ({"attn_logit_softcapping": "big"}, "attn_logit_softcapping"),
    ({"quantization_config": {"quant_method": "bitsandbytes"}}, "quant_method 'bitsandbytes'"),
    ({"quantization_config": {"quant_method": "awq", "bits": 0, "group_size": 128}}, "bits"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}}, "group_size"),
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128]}}, "weight_block_size"),
    ({"quantization_config": {"quant_method": "compressed-tensors"}}, "config_groups"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "ignore": ["re:("],
                              "config_groups": {"g": {"targets": ["Linear"],
                                                      "weights": {"num_bits": 8}}}}},
     "bad expression"),
    ({"quantization_config": [1]}, "JSON object"),
])
def test_bad_configs_are_one_line(patch, msg):
    cfg = {**json.loads((FIX / "gemma-2-9b.json").read_text()), **patch}
    with pytest.raises(BadInput, match=msg) as e:
        from_hf_config(cfg, "g", "t")
    assert "\n" not in str(e.value)


def test_bad_config_from_the_cli_exits_2(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "gemma2", "hidden_size": 8}))
    r = subprocess.run([sys.executable, "-m", "scalemodel", "kv", "--model", str(p)],
                       capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "num_attention_heads" in r.stderr


def test_compressed_tensors_regex_ignore():
    cfg = {**_llama(), "quantization_config": {
        "quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*layers\\.0\\..*"],
        "config_groups": {"g": {"targets": ["Linear"],
                                "weights": {"num_bits": 8, "strategy": "channel"}}}}}
    m = from_hf_config(cfg, "q", "t")
    assert not m.quant.is_quantized("model.layers.0.self_attn.q_proj")
    assert m.quant.is_quantized("model.layers.1.self_attn.q_proj")
    assert not m.quant.is_quantized("lm_head")
    assert any("compressed-tensors w8" in n for n in m.notes)
