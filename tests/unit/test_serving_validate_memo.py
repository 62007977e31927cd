"""The serving validation remembers what it priced: the same CSV text, base, rows and model files
give the same rows without re-pricing; an edited model file is priced afresh."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from scalemodel.analytic.serving import validate as v

ROOT = Path(__file__).resolve().parents[2]
ROW = "trtllm017-l31-8b-h200-tp1-128-128"


def _setup(tmp_path: Path) -> str:
    text = (ROOT / "validation" / "serving_runs.csv").read_text()
    (tmp_path / "validation" / "models").mkdir(parents=True)
    shutil.copy(ROOT / "validation" / "models" / "llama-3.1-8b.json",
                tmp_path / "validation" / "models" / "llama-3.1-8b.json")
    return text


def test_second_call_reads_the_remembered_rows_and_an_edited_model_reprices(tmp_path,
                                                                             monkeypatch):
    text = _setup(tmp_path)
    calls = []
    real = v._price_serving

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(v, "_price_serving", counting)
    monkeypatch.setattr(v, "_RESULTS", {})
    first, skipped = v.validate_serving(text, tmp_path, {ROW})
    assert [r.id for r in first] == [ROW] and not skipped
    again, _ = v.validate_serving(text, tmp_path, {ROW})
    assert again == first and len(calls) == 1
    # the caller's list is its own: changing it does not change what the next call reads
    again.clear()
    assert v.validate_serving(text, tmp_path, {ROW})[0] == first and len(calls) == 1
    # the model file changes (a newer mtime): priced again, same figures for the same content
    f = tmp_path / "validation" / "models" / "llama-3.1-8b.json"
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert v.validate_serving(text, tmp_path, {ROW})[0] == first and len(calls) == 2
