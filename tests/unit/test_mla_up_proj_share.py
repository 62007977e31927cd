"""The share of an MLA layer's input projections that Megatron-Core's ``mla_up_proj`` recompute
re-runs (source ``megatron-core-mla-up-proj-recompute``: the checkpointed
``qkv_up_proj_and_rope_apply`` holds ``linear_q_up_proj`` from the q latent, or ``linear_q_proj``
from the hidden state where the model has no q latent, and ``linear_kv_up_proj``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from scalemodel.analytic.step.layers import mla_up_share
from scalemodel.analytic.step.shapes import model_shapes
from scalemodel.specs.model import get_model

ROOT = Path(__file__).resolve().parents[2]


def _share(m):  # noqa: ANN001, ANN202
    return mla_up_share(SimpleNamespace(m=m, ms=model_shapes(m), h=m.hidden))


def test_no_q_latent_replays_the_whole_query_projection():
    # Moonlight-16B-A3B (validation/models/moonlight-16b-a3b.json): h 2048, 16 heads, no q
    # latent, kv latent 512, nope 128, rope 64, v 128. Input projections (parameters = FLOPs / 2
    # per token): q 2048 x 16 x 192 = 6,291,456; kv down 2048 x (512 + 64) = 1,179,648; kv up
    # 512 x 16 x (128 + 128) = 2,097,152. Re-run: q + kv up = 8,388,608 of 9,568,256.
    m = get_model(str(ROOT / "validation/models/moonlight-16b-a3b.json"))
    assert _share(m) == pytest.approx(8_388_608 / 9_568_256, rel=1e-9)


def test_q_latent_replays_only_the_up_projections():
    # DeepSeek-V3: h 7168, 128 heads, q latent 1536, kv latent 512, nope 128, rope 64, v 128.
    # q down 7168 x 1536 = 11,010,048; q up 1536 x 128 x 192 = 37,748,736; kv down
    # 7168 x 576 = 4,128,768; kv up 512 x 128 x 256 = 16,777,216. Re-run: q up + kv up.
    m = get_model("deepseek-v3")
    total = 11_010_048 + 37_748_736 + 4_128_768 + 16_777_216
    assert _share(m) == pytest.approx((37_748_736 + 16_777_216) / total, rel=1e-9)
