"""Printed tables in people's units (GB, ms, %), base units only under --json (issue 20):
`moe serve` printed memory in raw bytes and labelled a sum over the MoE layers "per layer";
`validate` printed errors as fractions."""

import json
import re

from scalemodel.cli import main


def _run(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr()[0]


def _table_rows(text, title):
    """{first cell: last cell} of the table printed under ``title``."""
    block = text.split(title, 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in block.splitlines()[3:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 2 and not line.strip().startswith("note:"):
            rows[cells[0]] = cells[-1]
    return rows


def test_moe_serve_tables_in_gb_and_ms(capsys):
    argv = ("moe", "serve", "--model", "deepseek-v3", "--gpu", "h800", "--draws", "32")
    d = json.loads(_run(capsys, *argv, "--json"))
    text = _run(capsys, *argv)
    decode = d["decode"]
    part = text.split("decode:", 1)[1]
    mem = _table_rows(part, "memory per GPU")
    for k, v in decode["memory_bytes_per_gpu"].items():  # GB = bytes / 1e9, 4 digits printed
        assert abs(float(mem[k]) - v / 1e9) <= 5e-4 * v / 1e9 + 1e-3, (k, mem[k], v)
    layer = _table_rows(part, "one MoE layer on the busiest GPU")
    assert "alltoall_per_token_p99" not in layer  # a sum over layers is not one layer's time
    assert abs(float(layer["attention"]) - 1e3 * decode["breakdown_s"]["attention"]) \
        <= 5e-4 * 1e3 * decode["breakdown_s"]["attention"]
    # DeepSeek-V3's config.json: 61 layers, the first 3 dense (first_k_dense_replace), so 58 MoE
    assert "summed over a token's 58 MoE layers" in part
    assert "bytes" not in re.findall(r"memory per GPU\n\s+part\s+(\S+)", part)[0]


def test_validate_prints_percentages_and_json_keeps_fractions(capsys):
    d = json.loads(_run(capsys, "validate", "--json"))
    text = _run(capsys, "validate")
    m = re.search(r"mean absolute error\s+([0-9.]+) %", text)
    assert m and abs(float(m.group(1)) - 100 * d["mape"]) < 0.01  # 3 significant digits
    assert 0 < d["mape"] < 1  # --json: a fraction
    row = d["rows"][0]
    line = next(x for x in text.splitlines() if x.strip().startswith(row["id"] + " "))
    assert line.rstrip().endswith(f"{100 * row['error']:+.1f}%")
    by = _table_rows(text, "by source")
    assert all(v.endswith("%") for v in by.values())
