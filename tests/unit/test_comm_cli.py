"""scalemodel comm: JSON keys fixed by the issue, and one-line errors with exit code 2."""

import json

import pytest

from conftest import run_cli as run


def test_cost_json_keys(capsys):
    rc, out, _ = run(capsys, "comm", "cost", "--collective", "all-reduce", "--algorithm", "ring",
                     "--ranks", "8", "--bytes", "1GiB", "--link", "nvlink4", "--json")
    d = json.loads(out)
    assert rc == 0
    for k in ("time_s", "bytes_sent_per_rank", "algbw_bytes_per_s", "busbw_bytes_per_s",
              "lower_bound_bytes_per_rank"):
        assert isinstance(d[k], float)
    assert d["bytes_sent_per_rank"] == 2 * 7 / 8 * 2**30


def test_cost_multi_tier_and_auto_reasons(capsys):
    rc, out, _ = run(capsys, "comm", "cost", "--nodes", "4", "--gpus-per-node", "8", "--intra",
                     "nvlink4", "--inter", "ndr-400", "--algorithm", "auto", "--json")
    d = json.loads(out)
    assert rc == 0 and d["ranks"] == 32 and d["nodes"] == 4 and d["reasons"]


def test_traffic_json_keys(capsys):
    rc, out, _ = run(capsys, "comm", "traffic", "--model", "llama-3-70b", "--tp", "8", "--pp", "4",
                     "--dp", "16", "--json")
    d = json.loads(out)
    assert rc == 0
    for s in d["strategies"]:
        for k in ("name", "collective", "bytes_per_call", "calls_per_step", "bytes_per_step",
                  "overlappable", "tier"):
            assert k in s


@pytest.mark.parametrize("argv, word", [
    (["comm", "cost", "--ranks", "0"], "--ranks"),
    (["comm", "cost", "--collective", "reduce-scatter", "--ranks", "3", "--bytes", "1000"], "pad"),
    (["comm", "cost", "--link", "nvlink9"], "unknown link"),
    (["comm", "cost", "--inter", "ib-9000", "--nodes", "2"], "--inter"),
    (["comm", "cost", "--algorithm", "tree", "--ranks", "1"], "at least 2 ranks"),
    (["comm", "cost", "--algorithm", "pairwise"], "does not apply"),
    (["comm", "cost", "--protocol", "fast"], "protocol"),
    (["comm", "cost", "--ranks", "12"], "evenly"),
    (["comm", "cost", "--profile", "/nonexistent.json"], "no such file"),
    (["comm", "traffic", "--dp", "3"], "global-batch"),
    (["comm", "bench", "--ranks", "0"], "--ranks"),
    (["comm", "bench", "--collectives", "all-reduce,gossip"], "gossip"),
    (["answer", "roce-vs-ib", "--vendor", "acme"], "--vendor"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, word):
    rc, _, err = run(capsys, *argv)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and word in err


def test_profile_that_is_not_a_profile(capsys, tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"kind": "something else"}')
    rc, _, err = run(capsys, "comm", "cost", "--profile", str(p))
    assert rc == 2 and "not a scalemodel comm profile" in err


@pytest.mark.parametrize("qid", ["ring-allreduce", "parallelism-traffic", "fabric-map",
                                 "nccl-topology", "roce-vs-ib"])
def test_answers_run(capsys, qid):
    rc, out, _ = run(capsys, "answer", qid, "--json")
    assert rc == 0 and json.loads(out)["question"] == qid
