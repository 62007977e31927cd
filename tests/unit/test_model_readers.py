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


@pytest.mark.parametrize("cfg, needle", [
    ({"model_type": "gemma2", "hidden_size": 8}, "num_attention_heads"),  # a missing field
    # a rate given as text (was a traceback); _NEOX is defined below, read at call time
    (None, "attention_dropout"),
])
def test_bad_config_from_the_cli_exits_2(tmp_path, cfg, needle):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg if cfg is not None else {**_NEOX, "attention_dropout": "x"}))
    r = subprocess.run([sys.executable, "-m", "scalemodel", "kv", "--model", str(p)],
                       capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr


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


# --- MoE families read by their own readers (fixtures: tests/fixtures/hf_configs/SOURCES.md) -----

def _fix(name: str):
    return from_hf_config(json.loads((FIX / f"{name}.json").read_text()), name, "fixture")


def _active_without_input_embedding(m) -> float:
    pc = count_params(m)
    return pc.active - pc.embedding


@pytest.mark.parametrize("name, total, active, gib", [
    # gpt-oss model card (arXiv 2508.10925) Table 1: total and active parameters (the active
    # count leaves out the input embedding, which does no matrix multiply, and keeps the
    # unembedding) and the MXFP4 checkpoint size
    ("gpt-oss-120b", 116.83e9, 5.13e9, 60.8),
    ("gpt-oss-20b", 20.91e9, 3.61e9, 12.8),
])
def test_gpt_oss_against_its_model_card(name, total, active, gib):
    from scalemodel.analytic.weights import weight_bytes
    m = _fix(name)
    assert abs(count_params(m).total - total) < 0.01e9
    assert abs(_active_without_input_embedding(m) - active) < 0.01e9
    # experts in MXFP4 (4.25 bits a weight: e2m1 values plus one byte of scale per 32), the rest
    # (attention, router, embeddings, head, norms, biases) in bf16
    assert weight_bytes(m, 2.0).total / 2**30 == pytest.approx(gib, abs=0.05)
    assert m.quant.is_quantized("model.layers.3.mlp.experts.0.down_proj")
    assert not m.quant.is_quantized("model.layers.3.self_attn.q_proj")
    # alternating attention: the even layers slide over 128 tokens (GptOssConfig's layer_types)
    assert m.sliding_window == 128 and m.sliding_layers == tuple(range(0, m.n_layers, 2))


def test_mxfp4_ignore_list_matches_as_transformers_does():
    # transformers 5.24.0 quantizers_utils.should_convert_module: a regex from the start of the
    # name up to a module boundary, or a suffix; "layers.1" must not catch "layers.11"
    cfg = {**json.loads((FIX / "gpt-oss-20b.json").read_text())}
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.1.mlp.experts"]}
    q = from_hf_config(cfg, "g", "t").quant
    assert not q.is_quantized("model.layers.1.mlp.experts.0.gate_proj")
    assert q.is_quantized("model.layers.11.mlp.experts.0.gate_proj")
    bad = {**cfg, "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["("]}}
    with pytest.raises(BadInput, match="bad expression"):
        from_hf_config(bad, "g", "t")


def test_llama4_scout_and_maverick_against_metas_cards():
    # Meta's Llama 4 model card: Scout 17B active (16 experts), Maverick 17B active, 400B total
    # (128 experts, MoE on every other layer); Scout's 109B total includes the vision encoder,
    # which the reader does not count, so only its text decoder's share is checked: below 109B
    scout, mav = _fix("llama-4-scout"), _fix("llama-4-maverick")
    assert count_params(scout).active == pytest.approx(17e9, rel=0.015)
    assert count_params(mav).active == pytest.approx(17e9, rel=0.015)
    assert count_params(mav).total == pytest.approx(400e9, rel=0.005)
    assert 100e9 < count_params(scout).total < 109e9
    assert scout.n_moe_layers == 48 and mav.n_moe_layers == 24
    assert [mav.layer_is_moe(i) for i in range(4)] == [False, True, False, True]
    # dense layers use intermediate_size_mlp, experts and the shared expert intermediate_size
    assert (mav.ffn, mav.moe_ffn, mav.shared_ffn, mav.n_shared_experts) == (16384, 8192, 8192, 1)
    # chunked attention on the RoPE layers, every fourth layer NoPE and global
    assert scout.sliding_window == 8192
    assert scout.sliding_layers == tuple(i for i in range(48) if (i + 1) % 4)
    assert any("chunked local attention" in n for n in scout.notes)
    assert not any(n.startswith("sliding-window attention") for n in scout.notes)


@pytest.mark.parametrize("name, total, rel_total, active, rel_active", [
    # Kimi-K2-Instruct model card (Model Summary): 1T total, 32B activated (both rounded)
    ("kimi-k2", 1.0e12, 0.05, 32e9, 0.02),
    # GLM-4.5 report (arXiv 2508.06471) Table 1, GLM-4.5-Air: 106B total, 12B activated
    ("glm-4.5-air", 106e9, 0.01, 12e9, 0.07),
    # DeepSeek-V2 paper (arXiv 2405.04434) Appendix B, DeepSeek-V2-Lite: 15.7B total, 2.4B activated
    ("deepseek-v2-lite", 15.7e9, 0.005, 2.4e9, 0.03),
])
def test_deepseek_style_moe_families_against_their_papers(name, total, rel_total, active, rel_active):
    m = _fix(name)
    assert count_params(m).total == pytest.approx(total, rel=rel_total)
    assert _active_without_input_embedding(m) == pytest.approx(active, rel=rel_active)


def test_kimi_k2_reads_as_deepseek_v3_with_its_own_family():
    m = _fix("kimi-k2")
    assert m.family == "kimi_k2" and m.attention == "mla" and m.n_experts == 384
    assert any("DeepSeek-V3 reader" in n for n in m.notes)


@pytest.mark.parametrize("patch, msg", [
    ({"text_config": {"hidden_size": 5120}}, "num_attention_heads"),
    ({"text_config": {**json.loads((FIX / "llama-4-scout.json").read_text())["text_config"],
                      "interleave_moe_layer_step": 0}}, "interleave_moe_layer_step"),
    ({"text_config": {**json.loads((FIX / "llama-4-scout.json").read_text())["text_config"],
                      "no_rope_layers": [1, 0]}}, "no_rope_layers"),
    ({"text_config": {**json.loads((FIX / "llama-4-scout.json").read_text())["text_config"],
                      "moe_layers": [0, 5]}}, "moe_layers"),
])
def test_bad_llama4_configs_are_one_line(patch, msg):
    cfg = {**json.loads((FIX / "llama-4-scout.json").read_text()), **patch}
    with pytest.raises(BadInput, match=msg) as e:
        from_hf_config(cfg, "l4", "t")
    assert "\n" not in str(e.value)


_NEOX = {"model_type": "gpt_neox", "hidden_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 8, "intermediate_size": 2048, "vocab_size": 1000,
         "max_position_embeddings": 2048}
_OPT = {"model_type": "opt", "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "ffn_dim": 3072, "vocab_size": 50272,
        "max_position_embeddings": 2048, "word_embed_proj_dim": 768}


@pytest.mark.parametrize("cfg, msg", [
    # a rate or a count given as text, or a text length met by arithmetic: each was a traceback
    ({**_NEOX, "attention_dropout": "x"}, "attention_dropout must be a number, got 'x'"),
    ({**_OPT, "max_position_embeddings": "2048"}, "max_position_embeddings must be a positive"),
    ({**_OPT, "dropout": [0.1]}, "dropout must be a number"),
    ({**_llama(), "attention_dropout": "0.1"}, "attention_dropout must be a number"),
    ({**json.loads((FIX / "deepseek-v2-lite.json").read_text()), "n_group": 1.5},
     "n_group must be a whole number"),
    ({**json.loads((FIX / "deepseek-v2-lite.json").read_text()), "q_lora_rank": "big"},
     "q_lora_rank must be a whole number"),
])
def test_mistyped_optional_fields_are_one_line(cfg, msg):
    with pytest.raises(BadInput, match=msg) as e:
        from_hf_config(cfg, "m", "t")
    assert "\n" not in str(e.value)


def test_a_wrong_type_met_by_a_readers_arithmetic_is_one_line():
    # GPT-2's feed-forward default is 4 x n_embd; an object there reaches the reader's
    # arithmetic before any field check: the fallback names the family, not a traceback
    cfg = {"model_type": "gpt2", "n_embd": {"x": 1}, "n_layer": 2, "n_head": 2,
           "vocab_size": 100, "n_positions": 64}
    with pytest.raises(BadInput, match="model_type gpt2.*wrong type") as e:
        from_hf_config(cfg, "m", "t")
    assert "\n" not in str(e.value)
