"""Flight Recorder triage at scale: the column-wise loader and analyser (traces/fr.py,
traces/hang.py) against the plain record-by-record rules, on generated dumps (hypothesis),
hostile entries and a few thousand synthetic ranks."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalemodel.errors import BadInput
from scalemodel.traces.fr import DumpColumns, _group_key, _tup
from scalemodel.traces.hang import _first_event, _Index, analyse_hang
from scalemodel.traces.load import load_dir
from scalemodel.traces.model import CollRecord, RankView, TraceSet
from scalemodel.traces.slow import analyse_slow

# --- the rules, one record at a time (what the column code must reproduce) ----------------------


def ref_records(d):
    """A dump's collectives as records, the unusable entries counted (bad, p2p)."""
    out, bad, p2p = [], 0, 0
    for e in d["entries"]:
        if not isinstance(e, dict):
            bad += 1
            continue
        try:
            if e.get("is_p2p"):
                p2p += 1
                continue
            prof = str(e.get("profiling_name", ""))
            key, _ = _group_key(e)
            done = e.get("time_discovered_completed_ns") or None
            rec = CollRecord(key, int(e["collective_seq_id"]),
                             prof.split(":", 1)[1] if ":" in prof else prof,
                             _tup(e.get("input_sizes", ())), _tup(e.get("input_dtypes", ())),
                             float(e.get("time_created_ns", 0)) / 1e9,
                             float(done) / 1e9 if done else None,
                             (e.get("state") == "completed") if d.get("comm_lib_version")
                             else None)
            hash(rec.fingerprint())  # sizes holding a dict cannot be compared: unusable
            if not -(2**63) <= rec.seq < 2**63:
                raise OverflowError
        except (KeyError, TypeError, ValueError, OverflowError):
            bad += 1
            continue
        out.append(rec)
    return out, bad, p2p


def ref_first_event(members, recs, ranks):
    """The divergence rule of traces/hang.py written over dicts of records."""
    have = [r for r in members if r in ranks]
    if not have:
        return None
    front = {r: max(recs.get(r, {}), default=0) for r in have}
    low = {r: min(recs.get(r, {}), default=0) for r in have}
    start = max([low[r] for r in have if recs.get(r)] or [1])
    for s in range(start, max(front.values()) + 1):
        present = {r: recs[r][s] for r in have if s in recs.get(r, {})}
        if not present:
            continue
        absent = [r for r in have if front[r] < s]
        t = min(x.t_enter for x in present.values())
        if len({x.fingerprint() for x in present.values()}) > 1:
            return ("mismatch", s, t, present, absent)
        if absent:
            return ("missing", s, t, present, sorted(absent))
    return None


# --- generated entries, hostile ones included --------------------------------------------------

_GOOD = st.fixed_dictionaries({
    "process_group": st.sampled_from([["0", "default_pg"], ["1", "tp"], ("0", "default_pg")]),
    "pg_id": st.sampled_from([0, 1]),
    "collective_seq_id": st.integers(1, 6),
    "profiling_name": st.sampled_from(["gloo:all_reduce", "nccl:all_gather", "broadcast"]),
    "time_created_ns": st.integers(10**18, 10**18 + 10**9),
    "input_sizes": st.sampled_from([[[4]], [[8]], [[4], [4]], [], [[2, 3]]]),
    "input_dtypes": st.sampled_from([["Float"], ["BFloat16"], []]),
    "state": st.sampled_from(["scheduled", "completed", "started"]),
    "time_discovered_completed_ns": st.sampled_from([None, 0, 10**18 + 5]),
    "is_p2p": st.just(False)})

_ODD = st.fixed_dictionaries({}, optional={
    "process_group": st.sampled_from([None, [], ["0"], [0, "x"], "ab", 5, ["", ""], [1.0, "x"],
                                      ["0", "default_pg", "x"], [["a"], "b"]]),
    "pg_id": st.sampled_from([0, "0", True, 1.0, None, 7]),
    "collective_seq_id": st.sampled_from([1, 2, "3", 2**70, None, 1.5, -1, 0, True]),
    "profiling_name": st.sampled_from(["gloo:all_reduce", 3, None, "a:b:c", ""]),
    "time_created_ns": st.sampled_from([10**18, "12", None, 1.5e18, 0]),
    "input_sizes": st.sampled_from([[[4]], [4], "ab", [["a", "b"]], ["ab"], [[{"a": 1}]],
                                    ((4,),), [[True]], [[4.0]], [[[4]]], {"a": 1}, 7]),
    "input_dtypes": st.sampled_from([["Float"], "Float", [1], [["x"]], ("Float",), None]),
    "state": st.sampled_from(["completed", None, 3]),
    "time_discovered_completed_ns": st.sampled_from([None, 5, "x", 0]),
    "is_p2p": st.sampled_from([False, True, 0, None])})

_ENTRY = st.one_of(_GOOD, _GOOD, _ODD, st.sampled_from([[1, 2], "x", 3, None]))


@given(entries=st.lists(_ENTRY, max_size=12), lib=st.sampled_from(["", "2.21.5"]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_columns_hold_exactly_the_usable_records(entries, lib):
    d = {"version": "2.10", "comm_lib_version": lib, "entries": entries}
    acc = DumpColumns()
    acc.add({"version": "2.10", "entries": entries[::-1]}, 1, "warm-up", "json")  # fill caches
    info = acc.add(d, 0, "x", "json")
    got = acc.columns([info]).records(0, info.hi - info.lo)
    want, bad, p2p = ref_records(d)
    assert got == want
    text = " ".join(info.problems)
    assert (f"{bad} entries" in text) == bool(bad) and (f"{p2p} point-to-point" in text) == \
        bool(p2p)


def _view_set(dumps):
    acc = DumpColumns()
    infos = [acc.add(d, r, f"rank_{r}.json", "json") for r, d in dumps.items()]
    cols = acc.columns(infos)
    ranks = {}
    for i, r in enumerate(dumps):
        ranks[r] = RankView(rank=r, path=f"rank_{r}.json", fmt="fr-json")
        ranks[r].bind_rows(cols, int(cols.starts[i]), int(cols.starts[i + 1]))
    return TraceSet("flight-recorder", ranks, None, {}, {}, [], [], [], cols)


@st.composite
def _runs(draw):
    """Per-rank dumps of one or two groups with truncation, mismatches, duplicates, gaps."""
    world = draw(st.integers(2, 7))
    dumps = {}
    for r in range(world):
        if draw(st.integers(0, 9)) == 0:
            continue  # no file
        ents = []
        for g in ("0", "1"):
            top = draw(st.integers(0, 6))
            low = draw(st.integers(1, 3))
            for s in range(low, top + 1):
                if draw(st.integers(0, 11)) == 0:
                    continue  # a hole
                for _ in range(draw(st.sampled_from([1, 1, 1, 2]))):  # duplicates, last wins
                    ents.append({"process_group": [g, "default_pg" if g == "0" else "tp"],
                                 "pg_id": int(g), "collective_seq_id": s,
                                 "profiling_name": "gloo:" + draw(st.sampled_from(
                                     ["all_reduce", "all_reduce", "all_reduce", "broadcast"])),
                                 "time_created_ns": 10**18 + s * 10**7 + draw(
                                     st.integers(0, 10**6)),
                                 "input_sizes": [[draw(st.sampled_from([4, 4, 4, 8]))]],
                                 "input_dtypes": ["Float"], "state": "scheduled",
                                 "is_p2p": False})
        dumps[r] = {"version": "2.10", "comm_lib_version": "", "entries": ents}
    members = {"0": tuple(range(world)),
               "1": tuple(draw(st.lists(st.integers(0, world - 1), min_size=1, max_size=world)))}
    return dumps, members


@given(run=_runs())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_divergence_matches_the_record_by_record_rule(run):
    dumps, members = run
    if not dumps:
        return
    ts = _view_set(dumps)
    ix = _Index(ts)
    for g, mem in members.items():
        recs = {}
        for r, d in dumps.items():
            for x in ref_records(d)[0]:
                if x.group == g:
                    recs.setdefault(r, {})[x.seq] = x
        want = ref_first_event(mem, recs, ts.ranks)
        got = _first_event(g, mem, ix, ts.ranks)
        if want is None:
            assert got is None
        else:
            assert (got.kind, got.seq, got.t, got.present, got.absent) == want
            assert list(got.present) == list(want[3])  # member order: it breaks vote ties
        for r in ts.ranks:
            assert ix.front(g, r) == max(recs.get(r, {}), default=0)


def _bench_like(tmp_path, ranks, culprit, seqs=6):
    base = 1_800_000_000_000_000_000
    for r in range(ranks):
        n = seqs - 1 if r == culprit else seqs
        ents = [{"pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": i + 1,
                 "profiling_name": "gloo:all_reduce", "time_created_ns": base + i * 10**7 + r,
                 "input_sizes": [[1 << 20]], "input_dtypes": ["BFloat16"],
                 "state": "scheduled", "time_discovered_completed_ns": None, "is_p2p": False}
                for i in range(n)]
        (tmp_path / f"rank_{r}.json").write_text(json.dumps(
            {"version": "2.10", "comm_lib_version": "", "entries": ents,
             "pg_config": {"": {"name": "", "desc": "", "ranks": "[]"}}}))


def test_thousands_of_ranks_one_stuck(tmp_path):
    _bench_like(tmp_path, 3000, 1234)
    ts = load_dir(tmp_path)
    assert len(ts.ranks) == 3000 and not ts.skipped
    r = analyse_hang(ts, 3000)
    assert (r.verdict, r.ranks, r.seq, r.op) == ("stuck-outside-collective", (1234,), 6,
                                                  "all_reduce")
    assert len(r.per_rank) == 3000 and r.per_rank[1234]["frontier"] == {"0": 5}
    assert ts.ranks[7].records[0].sizes == ((1 << 20,),)  # built on demand from the columns
    s = analyse_slow(ts)
    assert len(s.per_rank) == 3000


def test_unusable_numbers_are_reported_not_fatal(tmp_path):
    _bench_like(tmp_path, 3, None)
    d = json.loads((tmp_path / "rank_0.json").read_text())
    d["entries"][0]["collective_seq_id"] = 2**70  # beyond 64 bits
    (tmp_path / "rank_0.json").write_text(json.dumps(d))
    (tmp_path / "rank_123456789012.json").write_text((tmp_path / "rank_1.json").read_text())
    ts = load_dir(tmp_path)
    assert any("1 entries without a usable" in n for n in ts.notes)
    assert any("too large for a rank" in why for _, why in ts.skipped)
    assert analyse_hang(ts, 3).verdict == "healthy"


def test_two_dumps_hours_apart_is_bad_input(tmp_path):
    _bench_like(tmp_path, 2, None)
    d = json.loads((tmp_path / "rank_1.json").read_text())
    for e in d["entries"]:
        e["time_created_ns"] += 3 * 3600 * 10**9
    (tmp_path / "rank_1.json").write_text(json.dumps(d))
    with pytest.raises(BadInput, match="hours apart"):
        load_dir(tmp_path)
