"""Regenerate examples/moe/loads.csv: synthetic expert loads for `moe place --loads`.

16 MoE layers x 256 routed experts (DeepSeek-V3's count), Zipf popularity with s = 1.0, each
layer's hot experts scattered by a random permutation, counts sampled for 8192 tokens x top-8
routing decisions, seed 0 (scalemodel.analytic.moe_placement.zipf_loads, the recipe of the EPLB
comparison in docs/moe.md). Synthetic, not measured: it shows the file format and a skewed load.

    PYTHONPATH=src python examples/moe/make_loads.py
"""

from pathlib import Path

from scalemodel.analytic.moe_placement import zipf_loads

w = zipf_loads(16, 256, 1.0, tokens=8192, top_k=8, seed=0)
out = Path(__file__).with_name("loads.csv")
out.write_text("\n".join(",".join(str(int(x)) for x in row) for row in w) + "\n")
print(f"wrote {out} ({w.shape[0]} layers x {w.shape[1]} experts)")
