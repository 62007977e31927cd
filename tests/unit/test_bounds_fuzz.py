"""Every command with deep, huge and hostile values (issue 19): no traceback, one line on
stderr, exit 2, no run past 30 s, no allocation past 2 GB.

The cases run in-process (``scalemodel.cli.main``), all in one child interpreter that holds the
resource limits: RLIMIT_AS at 2 GiB (an allocation past it fails, and so does the case) and a
30 s SIGALRM per case. One interpreter start for all of them keeps this test short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "src" / "scalemodel" / "specs" / "data" / "models"
DEPTH = 100_000


def _deep_pickle(n: int) -> bytes:
    """A pickle of {"entries": [[[...]]]} n lists deep, written opcode by opcode (pickle.dumps
    itself would recurse): PROTO 2, EMPTY_DICT, BINUNICODE key, n x EMPTY_LIST, n-1 x APPEND,
    SETITEM, STOP."""
    key = b"entries"
    return (b"\x80\x02}" + b"X" + len(key).to_bytes(4, "little") + key + b"]" * n
            + b"a" * (n - 1) + b"s.")


def _files(d: Path) -> dict[str, str]:
    deep = "[" * DEPTH + "]" * DEPTH
    f = {}

    def put(name: str, text: str | bytes) -> None:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
        f[name] = str(p)

    put("deep.json", '{"a": ' + deep + "}")
    put("deep.toml", "a = " + deep + "\n")
    put("deepfr/rank0.json", '{"entries": ' + deep + "}")
    put("deeppkl/rank0.pkl", _deep_pickle(200_000))
    put("deeptrace/rank0.trace.jsonl", '{"format": ' + deep + "}\n")
    cfg = json.loads((MODELS / "llama-3-8b.json").read_text())
    for name, key, value in [("hidden", "hidden_size", "1" + "0" * 400),
                             ("layers18", "num_hidden_layers", str(10**18)),
                             ("layers6", "num_hidden_layers", str(10**6)),
                             ("vocab", "vocab_size", str(10**30)),
                             ("nan", "rope_theta", "NaN"), ("inf", "rope_theta", "Infinity")]:
        text = json.dumps({**cfg, key: 0}).replace(f'"{key}": 0', f'"{key}": {value}')
        put(f"{name}.json", text)
    big = d / "big.json"
    with open(big, "wb") as fh:  # sparse: 100 MiB by its size, past parse.config_bytes
        fh.truncate(100 << 20)
    f["big.json"] = str(big)
    put("usage.csv", "id,account,sku,start,quantity\nr1,a,tokens-in,2026-11-02T00:00:00Z,"
        "1E+999999\n")
    put("usage.jsonl", '{"id": "r1", "a": ' + deep + "}\n")
    put("usage_bad.csv", "id,account,sku,start,quantity\n" + "r1,a,tokens-in,x," + "9" * 2_000_000
        + "\n")
    return f


def _cases(f: dict[str, str]) -> list[list[str]]:
    prices = str(ROOT / "examples" / "billing" / "prices.toml")
    usage = str(ROOT / "examples" / "billing" / "usage.csv")
    big = "1" + "0" * 30
    cases = []
    for cmd in (["kv"], ["memory"], ["plan", "train"], ["roofline"]):
        for m in ("deep.json", "hidden.json", "layers18.json", "layers6.json", "vocab.json",
                  "nan.json", "inf.json", "big.json"):
            cases.append([*cmd, "--model", f[m]])
    cases += [
        ["kv", "--gpu", f["deep.toml"]],
        ["kv", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--simulate", "--requests",
         str(10**12)],
        ["kv", "--model", f["layers18.json"], "--gpu", "h100-sxm", "--simulate"],
        ["memory", "--model", f["layers18.json"], "--fit"],
        ["memory", "--seq-len", big],
        ["plan", "train", "--gpus", big],
        ["roofline", "--batch", big],
        ["comm", "cost", "--profile", f["deep.json"]],
        ["comm", "cost", "--profile", f["big.json"]],
        ["comm", "cost", "--bytes", "1e400"],
        ["gpu", "access", "--n", str(10**12)],
        ["gpu", "occupancy", "--threads", big],
        ["moe", "route", "--tokens", str(10**12)],
        ["moe", "serve", "--draws", str(10**12)],
        ["answer", "kv-cache", "--context", big],
        ["claim", "--tokens", "1e400"],
        ["drill", "--count", str(10**9)],
        ["serve", "--port", str(10**9)],
        ["specs", "models", "x" * 100_000],
        ["reliability", "checkpoint", "--trials", str(10**12)],
        ["reliability", "blast-radius", "--gpus", big],
        ["triage", "hang", f["deepfr/rank0.json"].rsplit("/", 1)[0]],
        ["triage", "hang", f["deeppkl/rank0.pkl"].rsplit("/", 1)[0]],
        ["triage", "hang", f["deeptrace/rank0.trace.jsonl"].rsplit("/", 1)[0]],
        ["cluster", "simulate", "--jobs", str(10**8)],
        ["cluster", "compare", "--jobs", str(10**8)],
        ["bill", "--usage", usage, "--prices", f["deep.toml"]],
        ["bill", "--usage", f["usage.csv"], "--prices", prices, "--strict"],
        ["bill", "--usage", f["usage.jsonl"], "--prices", prices, "--strict"],
        ["bill", "--usage", f["usage_bad.csv"], "--prices", prices],
        ["bill", "--usage", usage, "--prices", prices, "--ledger-wait", "1e9"],
        ["validate", "--file", f["big.json"]],
    ]
    return cases


DRIVER = r"""
import contextlib, io, json, resource, signal, sys, time, traceback
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from scalemodel.cli import main

class Late(BaseException):
    pass

def late(*_):
    raise Late()

signal.signal(signal.SIGALRM, late)
for argv in json.loads(sys.stdin.read()):
    err, out = io.StringIO(), io.StringIO()
    t = time.perf_counter()
    signal.alarm(30)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(argv)
            except SystemExit as e:
                rc = e.code
    except Late:
        rc = "ran past 30 s"
    except BaseException:
        rc = "traceback: " + traceback.format_exc()[-600:]
    finally:
        signal.alarm(0)
    print(json.dumps({"argv": argv, "rc": rc, "stderr": err.getvalue(),
                      "s": round(time.perf_counter() - t, 2)}), flush=True)
"""


def test_every_command_refuses_hostile_input_in_one_line(tmp_path):
    cases = _cases(_files(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(cases), env=env,
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    results = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert len(results) == len(cases), r.stderr[-2000:]
    bad = []
    for res in results:
        lines = res["stderr"].strip().splitlines()
        ok = (res["rc"] == 2 and len(lines) == 1 and "Traceback" not in res["stderr"]
              and res["s"] < 30)
        if not ok:
            bad.append(res)
    assert not bad, json.dumps(bad, indent=1)[:4000]


@pytest.mark.parametrize("name", ["deep.json", "hidden.json", "layers18.json"])
def test_bound_is_named(tmp_path, capsys, name):
    from scalemodel.cli import main

    f = _files(tmp_path)
    assert main(["kv", "--model", f[name]]) == 2
    err = capsys.readouterr().err
    assert "bound" in err and ("parse.json_depth" in err or "config." in err)
