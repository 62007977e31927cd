"""bench/bench_moe_host.py --scopes: the host seconds inside the CUDA-graph scopes of one eager
Megatron-Core MoE layer (docs/benchmarks.md "The same layer split by CUDA-graph scope").

What must hold whatever the machine's speed, by construction of the split: each scope's forward
seconds are wall time inside methods that the layer's forward calls, so they are part of the
layer's forward; the backward shares are fractions of one set of autograd-node times, so they
are in [0, 1] and sum to at most 1; each of the three scopes makes autograd nodes (attention's
projections, the router's gating linear and softmax, the preprocess's reshape of the probabilities
are differentiable), so none of their shares is 0. Run in a subprocess: the bench shims
torch.cuda for a CPU-only torch."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_scope_split_is_a_part_of_the_layer(tmp_path):
    out = tmp_path / "scopes.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "bench_moe_host.py"), "--scopes",
                    "--experts", "8", "--reps", "3", "--hidden", "16", "--json", str(out)],
                   check=True, capture_output=True, cwd=ROOT, timeout=300)
    row = json.loads(out.read_text())["scopes"][0]
    assert row["experts"] == 8 and row["tokens"] == 128
    fwd, share = row["scope_forward_s"], row["scope_backward_share"]
    assert set(fwd) == set(share) == {"attn", "moe_router", "moe_preprocess"}
    # medians of different passes: compare with the layer's median loosely (2x)
    assert sum(fwd.values()) < 2 * row["layer_forward_s"]
    assert all(v > 0 for v in fwd.values())
    assert all(0 < v < 1 for v in share.values()) and sum(share.values()) <= 1 + 1e-9
    # the forward shares are the same pass's ratios, each in (0, 1), together under 1
    fsh = row["scope_forward_share"]
    assert all(0 < v < 1 for v in fsh.values()) and sum(fsh.values()) < 1
    assert row["clock"] == "thread_time"
