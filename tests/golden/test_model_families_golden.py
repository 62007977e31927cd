"""Parameter counts of the added model families against their published figures.

Configs are the published config.json files under tests/fixtures/hf_configs (sources in
SOURCES.md there); each expected figure below names where it was published.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.analytic.params import count_params
from scalemodel.specs import from_hf_config, get_model

FIX = Path(__file__).parent.parent / "fixtures" / "hf_configs"


def _model(name: str):
    return get_model(str(FIX / name))


def test_gemma2_9b_matches_the_report_table():
    # Gemma 2 report (Gemma Team, arXiv 2408.00118), Table 1: 9B has 917,504,000 embedding and
    # 8,324,201,984 non-embedding parameters (embedding tied to the output head)
    pc = count_params(_model("gemma-2-9b.json"))
    assert pc.embedding == 917_504_000
    assert pc.non_embedding == 8_324_201_984
    assert pc.lm_head == 0


@pytest.mark.parametrize("cfg, non_embedding", [
    # same table: 2B 2,024,517,888 and 27B 26,047,480,320 non-embedding parameters; shapes as
    # MaxText's hf_model_configs.py gives them (2B: head_dim 256 default; 27B: head_dim 128)
    (dict(num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4, hidden_size=2304,
          intermediate_size=9216, head_dim=256), 2_024_517_888),
    (dict(num_hidden_layers=46, num_attention_heads=32, num_key_value_heads=16, hidden_size=4608,
          intermediate_size=36864, head_dim=128), 26_047_480_320),
])
def test_gemma2_other_sizes(cfg, non_embedding):
    full = dict(model_type="gemma2", vocab_size=256000, max_position_embeddings=8192,
                sliding_window=4096, **cfg)
    assert count_params(from_hf_config(full, "g2", "test")).non_embedding == non_embedding


def test_gemma3_1b_matches_keras_hub():
    # keras-hub gemma3_presets.py, gemma3_instruct_1b: "params": 999885952
    assert count_params(_model("gemma-3-1b-it.json")).total == 999_885_952


def test_gemma3_4b_text_matches_keras_hub_up_to_the_image_rows():
    # keras-hub gemma3_instruct_4b_text: 3,880,099,328 with a 262,144-row vocabulary; the HF
    # text config's vocabulary has 262,208 rows (64 more), tied, of hidden 2560
    m = _model("gemma-3-4b-it.json")
    assert m.vocab == 262_208 and m.hidden == 2560
    assert count_params(m).total == 3_880_099_328 + 64 * 2560
    assert any("vision tower" in n for n in m.notes)


def test_gemma3_layer_pattern_and_qk_norm():
    m = _model("gemma-3-1b-it.json")
    # every 6th layer global (sliding_window_pattern 6): layers 5, 11, 17, 23 of 26
    assert [i for i in range(26) if i not in m.sliding_layers] == [5, 11, 17, 23]
    assert m.qk_norm and m.norms_per_layer == 4


def test_gemma2_softcaps_and_alternation():
    m = _model("gemma-2-9b.json")
    assert (m.attn_softcap, m.final_softcap) == (50.0, 30.0)
    assert m.sliding_layers == tuple(range(0, 42, 2))


def test_phi3_mini_is_3_8b():
    # Phi-3 report (arXiv 2404.14219) and model card: "3.8 billion parameters"
    pc = count_params(_model("phi-3-mini-4k-instruct.json"))
    assert round(pc.total / 1e8) == 38
    # untied head: embedding and head are both 32064 x 3072
    assert pc.embedding == pc.lm_head == 32064 * 3072


def test_falcon_7b_shapes_and_count():
    m = _model("falcon-7b.json")
    # transformers prints query_key_value as 4544 -> 4672 = (71 + 2) x 64 (multi-query), the
    # MLP as 4544 -> 18176, one LayerNorm per layer (parallel attention), tied head
    assert m.q_dim + 2 * m.kv_dim == 4672 and m.ffn == 18176
    pc = count_params(m)
    layer = 4544 * 4672 + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    assert pc.layers[0].total == layer
    assert pc.total == 65024 * 4544 + 32 * layer + 2 * 4544
    assert round(pc.total / 1e9) == 7  # model card: 7B


def test_olmo2_7b_counts_whole_projection_qk_norms():
    m = _model("olmo-2-1124-7b.json")
    pc = count_params(m)
    h, f = 4096, 11008
    # q_norm over 4096, k_norm over 4096, post-attention and post-feed-forward norms
    layer = 4 * h * h + 3 * h * f + 2 * h + 2 * h
    assert pc.layers[0].total == layer
    assert pc.total == 2 * 100352 * h + 32 * layer + h
    assert abs(pc.total / 7e9 - 1) < 0.05  # model card: 7B


def test_granite_3_8b_is_8_1b():
    pc = count_params(_model("granite-3.0-8b-base.json"))
    # Granite 3.0 card: 8.1B; exact count 8,170,848,256 (tied embeddings)
    assert abs(pc.total / 8.1e9 - 1) < 0.01
    assert pc.lm_head == 0
