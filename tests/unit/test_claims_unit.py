"""Claim checker: parsing, CLI contract, bad input, and invariants."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.analytic.claims import (
    Claim,
    check_claim,
    parse_count,
    parse_layout,
    parse_sentence,
)
from scalemodel.cli import main
from scalemodel.errors import BadInput


def test_json_keys_fixed_by_the_issue(capsys):
    rc = main(["claim", "--model", "llama-3-70b", "--gpus", "64", "--gpu", "h100-sxm",
               "--tokens", "1T", "--days", "7", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    d = json.loads(out)
    for k in ("implied_mfu", "tokens_per_s_per_gpu", "fits_in_memory", "expected_interruptions",
              "verdict", "reasons"):
        assert k in d
    assert isinstance(d["reasons"], list) and all(isinstance(r, str) for r in d["reasons"])
    assert d["verdict"] == "implausible"  # 1T tokens of a 70B model in 7 days on 64 GPUs


def test_sentence_grammar():
    f, un = parse_sentence("trained a 70B model on 512 H100s for 2T tokens in 10 days")
    assert f == {"model": "70B", "gpus": 512, "gpu": "h100-sxm", "tokens": 2e12, "days": 10.0}
    assert un == []
    f, un = parse_sentence("llama-3-8b on 4,096 x A100 GPUs, 300B tokens, 3 weeks at 45% MFU")
    assert f["model"] == "llama-3-8b" and f["gpus"] == 4096 and f["gpu"].startswith("a100")
    assert f["days"] == 21 and f["mfu"] == pytest.approx(0.45) and f["tokens"] == 3e11
    f, un = parse_sentence("a 7B-parameter model on 2k H100 in 36 hours with 17 reruns")
    assert f["gpus"] == 2000 and f["days"] == pytest.approx(1.5)
    assert "no tokens found" in un and any("17" in u for u in un)


def test_sentence_and_flags_on_the_cli(capsys):
    rc = main(["claim", "trained a 70B model on 512 H100s for 2T tokens in 10 days",
               "--days", "60", "--json"])
    d = json.loads(capsys.readouterr()[0])
    assert rc == 0 and d["claim"]["days"] == 60 and d["claim"]["gpus"] == 512


def test_parse_count_and_layout():
    assert parse_count("2T") == 2e12 and parse_count("300B") == 3e11
    assert parse_count("1.5e12") == 1.5e12
    lay = parse_layout("tp8 pp4 zero1 recompute=selective", 1024)
    assert (lay.tp, lay.pp, lay.dp, lay.zero, lay.recompute) == (8, 4, 32, 1, "selective")
    assert parse_layout("fsdp", 64).zero == 3
    with pytest.raises(BadInput, match="--layout"):
        parse_layout("tp8 dp3", 64)
    with pytest.raises(BadInput, match="--layout"):
        parse_layout("banana", 64)


@pytest.mark.parametrize("argv, field", [
    (["claim"], "--model"),
    (["claim", "--model", "llama-3-70b", "--gpus", "0", "--tokens", "1T", "--days", "7"], "--gpus"),
    (["claim", "--model", "llama-3-70b", "--gpus", "8", "--tokens", "lots", "--days", "7"], "--tokens"),
    (["claim", "--model", "llama-3-70b", "--gpus", "8", "--tokens", "1T", "--days", "-1"], "--days"),
    (["claim", "--model", "llama-3-70b", "--gpus", "8", "--tokens", "1T", "--days", "7",
      "--mfu", "140%"], "--mfu"),
    (["claim", "--model", "nope-70b", "--gpus", "8", "--tokens", "1T", "--days", "7"], "--model"),
    (["claim", "--model", "llama-3-70b", "--gpus", "8", "--tokens", "1T", "--days", "7",
      "--layout", "tp3"], "--layout"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, field):
    with pytest.raises(SystemExit) as e:
        rc = main(argv)
        raise SystemExit(rc)
    assert e.value.code == 2
    err = capsys.readouterr()[1]
    assert err.count("\n") == 1 and field in err


def test_layout_that_does_not_fit_is_implausible():
    c = check_claim(Claim("llama-3-70b", 8, "h100-sxm", 1e9, 1, layout="tp8"))
    assert not c.fits_in_memory and c.verdict == "implausible"


def test_claimed_mfu_that_disagrees():
    base = Claim("llama-3-8b", 1024, "h100-sxm", 1e12, 2)
    r = check_claim(base)
    agree = check_claim(Claim(**{**base.__dict__, "mfu": r.implied_mfu}))
    off = check_claim(Claim(**{**base.__dict__, "mfu": min(1.0, r.implied_mfu * 3)}))
    assert agree.verdict == r.verdict
    assert off.verdict == "implausible"


@settings(max_examples=25, deadline=None)
@given(days=st.floats(0.5, 200), k=st.floats(1.1, 5), tokens=st.floats(1e10, 2e13))
def test_mfu_scales_with_tokens_over_days(days, k, tokens):
    a = check_claim(Claim("llama-3-8b", 256, "h100-sxm", tokens, days))
    b = check_claim(Claim("llama-3-8b", 256, "h100-sxm", tokens, days * k))
    c = check_claim(Claim("llama-3-8b", 256, "h100-sxm", tokens * k, days))
    assert b.implied_mfu == pytest.approx(a.implied_mfu / k, rel=1e-9)
    assert c.implied_mfu == pytest.approx(a.implied_mfu * k, rel=1e-9)
    assert b.expected_interruptions == pytest.approx(a.expected_interruptions * k, rel=1e-9)
    order = {"plausible": 0, "stretched": 1, "implausible": 2}
    # more time for the same work never makes the claim look worse, unless the MFU turns low
    if b.implied_mfu >= 0.10:
        assert order[b.verdict] <= order[a.verdict]
