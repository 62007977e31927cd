"""scalemodel specs frameworks: serving engine profiles get their own columns (what the KV
fraction is taken of, the token budget, the batch limit, the scheduler), training profiles
keep theirs, and the --json items are unchanged."""

from __future__ import annotations

import json

from scalemodel.cli import main
from scalemodel.specs.frameworks import framework_ids, get_framework
from scalemodel.views.specs import specs_report


def _tables(one=None):
    rep = specs_report("frameworks", one)
    return {t.title: t for t in rep.sections[0].tables}


def test_engine_rows_carry_engine_columns():
    t = _tables()
    eng = t["serving engines (plan serve, kv --framework)"]
    assert {"KV pool", "fraction", "token budget", "max batch", "scheduler"} <= set(eng.columns)
    rows = {r[0]: dict(zip(eng.columns, r, strict=True)) for r in eng.rows}
    serving = [f for f in framework_ids() if get_framework(f).kind == "serving"]
    assert sorted(rows) == sorted(serving)
    v0 = get_framework("vllm-v0")
    assert rows["vllm-v0"]["max batch"] == f"{v0.get('max_num_seqs_default'):,}"
    assert rows["vllm-v0"]["block"] == v0.get("block_size")
    assert "0.95" in rows["trtllm-0.17"]["fraction"]  # the published runs' fraction
    assert "no-evict" in rows["trtllm-0.17"]["scheduler"]
    assert all("n/a" not in str(x) for r in eng.rows for x in r)
    train = t["training"]
    assert not any(r[1] == "serving" for r in train.rows)


def test_one_engine_shows_only_the_engine_table():
    t = _tables("sglang")
    assert list(t) == ["serving engines (plan serve, kv --framework)"]


def test_json_items_keep_their_keys(capsys):
    rc = main(["specs", "frameworks", "--json"])
    out = capsys.readouterr().out
    assert rc in (0, None)
    d = json.loads(out)
    assert d["kind"] == "frameworks" and len(d["items"]) == len(framework_ids())
    for it in d["items"]:
        assert {"id", "kind", "name", "version", "source", "fields", "sources", "notes",
                "default"} <= set(it)
    vllm = next(it for it in d["items"] if it["id"] == "vllm-v1")
    assert vllm["fields"]["reserve"] == "on_demand"  # the scheduling facts live in the profile
