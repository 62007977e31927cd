"""Per-request length tables (serving.toml [length_tables]; the ShareGPT first-round pairs of the
vLLM paper's artifact, specs/data/traces/sharegpt-vllm-sosp23/): the file as its README derives
it, the sampler drawing whole (input, output) pairs from it scaled to the stream's means, the
same draw for the same seed, and a bad table name as one line with exit code 2.

Expected values are recomputed here from the bundled CSV with the standard library (csv,
statistics), not taken from the sampler's output."""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from pathlib import Path

import pytest

from scalemodel.analytic.serving.streams import LENGTH_DISTS, TABLES, Stream, draw, length_table
from scalemodel.specs.sources import data_path, load_toml

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "validation" / "serving_published.csv"
TABLE = "traces/sharegpt-vllm-sosp23/sharegpt_first_round_lengths.csv"


def _file_pairs() -> list[tuple[int, int]]:
    with open(data_path(TABLE), newline="") as f:
        return [(int(r["input_tokens"]), int(r["output_tokens"])) for r in csv.DictReader(f)]


def _scaled(pairs: list[tuple[int, int]], isl: int, osl: int) -> list[tuple[int, int]]:
    """The scaling the table's docs state: each axis times (stream mean / table mean), rounded
    half to even (numpy's and Python's round), at least 1 token."""
    mi = statistics.fmean(p[0] for p in pairs)
    mo = statistics.fmean(p[1] for p in pairs)
    return [(max(1, round(a * isl / mi)), max(1, round(b * osl / mo))) for a, b in pairs]


def _pctl(xs: list[int], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), by hand."""
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def test_registry_and_names_in_step():
    tables = load_toml("serving.toml")["length_tables"]
    assert tuple(tables) == TABLES and set(TABLES) <= set(LENGTH_DISTS)
    assert tables["sharegpt"]["file"] == TABLE
    assert tables["sharegpt"]["source"] in load_toml("sources_serving.toml")
    from scalemodel.cli import build_parser

    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices["plan"]
               ._subparsers._group_actions[0].choices["serve"]._actions
               if "--length-dist" in a.option_strings)
    assert tuple(sub.choices) == LENGTH_DISTS


def test_file_as_its_readme_derives_it():
    pairs = _file_pairs()
    # README step 3: 10,000 pairs (serving.toml pairs = 10000)
    assert len(pairs) == 10_000 == load_toml("serving.toml")["length_tables"]["sharegpt"]["pairs"]
    # README step 2: every pair passes benchmark_serving.py's ShareGPT filter (prompt and output
    # at least 4 tokens, prompt at most 1024, prompt + output at most 2048)
    assert all(a >= 4 and b >= 4 and a <= 1024 and a + b <= 2048 for a, b in pairs)
    ins, outs = [p[0] for p in pairs], [p[1] for p in pairs]
    # the README's figures for the bundled file (means 116.03 / 345.73, medians 34 / 277,
    # p90 369 / 758, p99 911 / 1,322)
    assert statistics.fmean(ins) == pytest.approx(116.0319, abs=1e-4)
    assert statistics.fmean(outs) == pytest.approx(345.7341, abs=1e-4)
    assert (statistics.median(ins), statistics.median(outs)) == (34, 277)
    assert (_pctl(ins, 0.9), _pctl(outs, 0.9)) == (369, 758)
    assert (_pctl(ins, 0.99), _pctl(outs, 0.99)) == (pytest.approx(911.03), 1322)
    # long-tailed: the mean is well above the median on both axes
    assert statistics.fmean(ins) > 3 * statistics.median(ins)
    # the loader holds the same rows in the same order
    assert [tuple(map(int, r)) for r in length_table("sharegpt")] == pairs


def test_sampler_draws_every_pair_once_scaled_to_the_means():
    """n = the table's size without replacement: the draw is a permutation of the table's pairs,
    each scaled, so its means and quantiles are the table's times the scale."""
    pairs = _file_pairs()
    isl, osl = 202, 179
    _, i, o = draw(Stream("max-load", len(pairs), dist="sharegpt"), isl, osl, 8192)
    drawn = list(zip(i.tolist(), o.tolist(), strict=True))
    assert Counter(drawn) == Counter(_scaled(pairs, isl, osl))  # pairs kept together
    assert statistics.fmean(i.tolist()) == pytest.approx(isl, abs=0.5)  # rounding only
    assert statistics.fmean(o.tolist()) == pytest.approx(osl, abs=0.5)
    mi = statistics.fmean(p[0] for p in pairs)
    mo = statistics.fmean(p[1] for p in pairs)
    for q in (0.5, 0.9, 0.99):
        assert _pctl(i.tolist(), q) == pytest.approx(_pctl([p[0] for p in pairs], q) * isl / mi,
                                                     abs=1)
        assert _pctl(o.tolist(), q) == pytest.approx(_pctl([p[1] for p in pairs], q) * osl / mo,
                                                     abs=1)


def test_sampler_at_the_tables_own_means_keeps_its_lengths():
    """isl / osl at the table's (rounded) means: the scale is within 0.1% of 1, so lengths up to
    a few hundred tokens come back as in the file."""
    pairs = _file_pairs()
    _, i, o = draw(Stream("max-load", len(pairs), dist="sharegpt"), 116, 346, 8192)
    assert sorted(x for x in i.tolist() if x < 300) == sorted(p[0] for p in pairs if p[0] < 300)
    assert sorted(x for x in o.tolist() if x < 300) == sorted(p[1] for p in pairs if p[1] < 300)


def test_same_seed_same_draw_and_distinct_requests():
    s = Stream("max-load", 500, dist="sharegpt", seed=0)
    a1, i1, o1 = draw(s, 202, 179, 8192)
    a2, i2, o2 = draw(s, 202, 179, 8192)
    assert (i1 == i2).all() and (o1 == o2).all() and (a1 == a2).all()
    _, i3, o3 = draw(Stream("max-load", 500, dist="sharegpt", seed=1), 202, 179, 8192)
    assert not ((i1 == i3).all() and (o1 == o3).all())
    # 500 of 10,000 rows: drawn without replacement, as a benchmark samples distinct prompts
    # (distinct rows can share lengths, so compare against the table's multiplicities)
    room = Counter(_scaled(_file_pairs(), 202, 179))
    got = Counter(zip(i1.tolist(), o1.tolist(), strict=True))
    assert all(got[k] <= room[k] for k in got)
    # Poisson arrivals still come from the same seeded generator
    r1 = draw(Stream("rate", 500, rate_per_s=32, dist="sharegpt"), 202, 179, 8192)
    r2 = draw(Stream("rate", 500, rate_per_s=32, dist="sharegpt"), 202, 179, 8192)
    assert all((x == y).all() for x, y in zip(r1, r2, strict=True)) and r1[0][-1] > 0


def test_more_requests_than_pairs_and_the_context_bound():
    _, i, o = draw(Stream("max-load", 12_000, dist="sharegpt"), 202, 179, 8192)
    assert len(i) == 12_000
    # a short context clips inputs to context - 1 and outputs to what the context leaves
    _, i, o = draw(Stream("max-load", 10_000, dist="sharegpt"), 2000, 2000, 4096)
    assert i.max() == 4095 and (i + o <= 4096).all() and o.min() >= 0


def test_fixed_lengths_stay_the_default():
    assert Stream("max-load", 10).dist == "fixed"
    _, i, o = draw(Stream("max-load", 10), 202, 179, 8192)
    assert set(i.tolist()) == {202} and set(o.tolist()) == {179}


def test_published_rows_name_the_table_and_are_priced_from_it():
    from scalemodel.analytic.serving.validate import validate_published

    text = PUBLISHED.read_text()
    ids = {ln.split(",")[0] for ln in text.splitlines()
           if ln.startswith("vllm060-blog-") and "-sharegpt" in ln.split(",")[0]}
    assert len(ids) == 10  # 8 throughput rows (2 engines x 2 models x 2 GPUs) + 2 TPOT rows
    rows, skipped = validate_published(text, ROOT / "validation", ids)
    assert not skipped and {r.id for r in rows} == ids
    assert {r.length_dist for r in rows} == {"sharegpt"}


def _published_row(tmp_path: Path, basis: str) -> Path:
    import io

    body = [ln for ln in PUBLISHED.read_text().splitlines() if not ln.startswith("#")]
    head = body[0]
    row = next(r for r in body[1:] if r.startswith("vllm060-blog-vllm-llama3-8b-a100-tp1-sharegpt,"))
    vals = next(csv.reader(io.StringIO(row)))
    vals[head.split(",").index("length_basis")] = basis
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(vals)
    f = tmp_path / "validation" / "rows.csv"
    f.parent.mkdir(exist_ok=True)
    f.write_text(head + "\n" + out.getvalue() + "\n")
    return f


@pytest.mark.parametrize("basis", ["dist:sharegpt-v3 (no such table)", "dist:", "dist:normal"])
def test_unknown_table_in_a_row_one_line_exit_2(cli, tmp_path, basis):
    rc, out, err = cli("validate", "--serving", "--file", str(_published_row(tmp_path, basis)))
    assert rc == 2, (out, err)
    line = err.strip()
    name = basis[5:].split(" ")[0]
    assert "\n" not in line and "length_basis" in line and f"dist:{name!r}" in line, line
    assert "not one of dist:sharegpt" in line, line


def test_unknown_length_dist_on_the_command_line_exit_2(cli):
    rc, out, err = cli("plan", "serve", "--model", "llama-3-8b", "--length-dist", "sharegpt4")
    assert rc == 2, (out, err)
    assert "sharegpt4" in err and len(err.strip().splitlines()) <= 2, err
