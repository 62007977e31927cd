"""Printed tables in people's units (GB, ms, %), base units only under --json (issue 20):
`moe serve` printed memory in raw bytes and labelled a sum over the MoE layers "per layer";
`validate` printed errors as fractions."""

import json
import re

import pytest

from conftest import run_cli


def _run(capsys, *argv):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 0, err
    return out


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


# --- printed answer tables: no raw base units where a person reads GB, ms or % ----------------

_BARE = re.compile(r"^[+-]?[0-9][0-9,]*(\.[0-9]+)?(e[+-]?[0-9]+)?$")


def _cut(line, starts):
    """A line split at the column starts of the dash rule (cells are padded to the rule)."""
    ends = starts[1:] + [len(line)]
    return [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]


def _text_tables(text):
    """Every printed table as (columns, rows of cells), cut at the dash rule under its header."""
    lines = text.splitlines()
    out = []
    for i, rule in enumerate(lines):
        if i == 0 or not re.fullmatch(r"\s*-+(\s{2}-+)+\s*", rule):
            continue
        starts = [m.start() for m in re.finditer(r"-+", rule)]
        rows = []
        for line in lines[i + 1:]:
            if not line.strip() or line.strip().startswith("note:"):
                break
            rows.append(_cut(line, starts))
        out.append((_cut(lines[i - 1], starts), rows))
    return out


def _raw_base_units(text):
    """Cells that are bare numbers in base units: >= 1e6 under a bytes header, or under a
    seconds header below 0.01 s (a person reads ms there), or a fraction in a '%' column."""
    bad = []
    for cols, rows in _text_tables(text):
        for j, c in enumerate(cols):
            low = c.lower()
            is_bytes = "bytes" in low or "(b)" in low
            is_s = low.endswith("(s)") or low.endswith(" s") or low == "s" or "(s/" in low
            for r in rows:
                v = r[j] if j < len(r) else ""
                if not _BARE.match(v):
                    continue
                x = float(v.replace(",", ""))
                if (is_bytes and abs(x) >= 1e6) or (is_s and 0 < abs(x) < 1e-2) \
                        or ("%" in c and 0 < abs(x) < 1 and "." in v and v.startswith("0.0")):
                    bad.append((c, v))
    return bad


def test_scanner_flags_raw_base_units():
    text = ("  t\n    part  bytes/step (B)  fetch (s)\n    ----  --------------  ---------\n"
            "    a      1,073,741,824   0.00042\n")
    assert _raw_base_units(text) == [("bytes/step (B)", "1,073,741,824"), ("fetch (s)", "0.00042")]


def test_answer_tables_print_people_units_and_json_keeps_base_units(capsys):
    fab = json.loads(_run(capsys, "answer", "fabric-map", "--json"))
    text = _run(capsys, "answer", "fabric-map")
    assert _raw_base_units(text) == []
    (cols, rows), = [t for t in _text_tables(text) if "on the NIC (ms/step)" in t[0]]
    net = {s["name"]: s["time_per_step_network_s"] for s in fab["tiers"]}
    for r in rows:  # ms printed to 4 significant digits = seconds in --json x 1e3
        ms = float(r[cols.index("on the NIC (ms/step)")].replace(",", ""))
        assert abs(ms - 1e3 * net[r[0]]) <= 5e-4 * 1e3 * net[r[0]], r
    by_name = {s["name"]: s for s in fab["traffic"]["strategies"]}
    for r in rows:  # bytes shown scaled, e.g. '4.542 GB (4.23 GiB)'
        m = re.match(r"([0-9.,]+) (kB|MB|GB|TB) ", r[cols.index("bytes/step")])
        scale = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[m.group(2)]
        b = by_name[r[0]]["bytes_per_step"]
        assert abs(float(m.group(1).replace(",", "")) * scale - b) <= 5e-4 * b, r

    g = json.loads(_run(capsys, "answer", "moe-global-serving", "--json"))
    text = _run(capsys, "answer", "moe-global-serving")
    assert _raw_base_units(text) == []
    (cols, rows), = [t for t in _text_tables(text) if "hottest expert share (%)" in t[0]]
    for r, p in zip(rows, g["placement_by_region"], strict=True):
        assert abs(float(r[-1]) - 100 * p["hottest_expert_share"]) \
            <= 5e-4 * 100 * p["hottest_expert_share"]

    mo = json.loads(_run(capsys, "answer", "moe-latency-layout", "--json"))
    text = _run(capsys, "answer", "moe-latency-layout")
    assert _raw_base_units(text) == []
    part = text.split("decode:", 1)[1]
    (cols, rows), = [t for t in _text_tables(part) if t[0] == ["part", "time (ms)"]][:1]
    brk = mo["decode"]["breakdown_s"]
    for k, v in rows:
        assert abs(float(v.replace(",", "")) - 1e3 * brk[k]) <= 5e-4 * 1e3 * brk[k] + 1e-9, k


@pytest.mark.parametrize("qid", ["kv-cache", "training-memory", "parallelism-traffic",
                                 "nccl-topology", "roce-vs-ib"])
def test_more_answer_tables_have_no_raw_base_units(capsys, qid):
    text = _run(capsys, "answer", qid)
    assert _text_tables(text)  # the scan saw tables
    assert _raw_base_units(text) == []
