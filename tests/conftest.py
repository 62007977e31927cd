"""Test setup: import the package from this checkout's src/ (worktrees included); and the
helpers test modules share (``from conftest import ...``): CLI runs (run_cli, cli_json,
one_line_refusal), user frameworks-TOML refusals, serving iteration models, validation CSV
readers and the validation regression guard. Put a helper here before writing it twice."""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    """Skip GPU tests where no CUDA device is visible, and live tests where torch is missing."""
    import importlib.util

    import pytest

    has_torch = importlib.util.find_spec("torch") is not None
    has_gpu = False
    if has_torch and any("gpu" in i.keywords for i in items):
        import torch

        has_gpu = torch.cuda.is_available()
    for item in items:
        if "live" in item.keywords and not has_torch:
            item.add_marker(pytest.mark.skip(reason="torch is not installed"))
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


def run_cli(capsys, *argv):  # noqa: ANN001, ANN002, ANN201
    """(exit code, stdout, stderr) of one ``scalemodel`` command run in-process; an argparse
    rejection (SystemExit) reads as its exit code. Test modules import it as ``run``."""
    from scalemodel.cli import main

    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _cli_fixture():  # noqa: ANN202
    import pytest

    @pytest.fixture
    def cli(capsys):  # noqa: ANN001, ANN202
        """``cli(*argv)`` -> (exit code, stdout, stderr) of one ``scalemodel`` command run
        in-process (:func:`run_cli` with this test's capsys)."""

        def run(*argv):  # noqa: ANN002, ANN202
            return run_cli(capsys, *argv)

        return run

    return cli


cli = _cli_fixture()


def cli_json(capsys, *argv):  # noqa: ANN001, ANN002, ANN201
    """The parsed ``--json`` output of one ``scalemodel`` command that must succeed (exit 0;
    stderr is the failure message otherwise)."""
    import json

    rc, out, err = run_cli(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def one_line_refusal(rc, out, err) -> bool:  # noqa: ANN001
    """Whether a command's result is the house refusal: exit 2, nothing on stdout, one
    ``error:`` line on stderr."""
    return rc == 2 and not out and err.count("\n") == 1 and "error:" in err


def frameworks_file_refusal(tmp_path, body: str) -> str:  # noqa: ANN001
    """The BadInput message of loading a user frameworks TOML holding ``body``
    (specs/frameworks.py ``load_frameworks_file``); asserted to be one line."""
    import pytest

    from scalemodel.errors import BadInput
    from scalemodel.specs.frameworks import load_frameworks_file

    f = tmp_path / "fw.toml"
    f.write_text(body)
    with pytest.raises(BadInput) as e:
        load_frameworks_file(str(f))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def user_profile_refusal(tmp_path, fields: str, *, kind: str = "serving",
                         source: str = "scalemodel-serving-assumption",
                         profile: str = "mine") -> str:  # noqa: ANN001
    """:func:`frameworks_file_refusal` of one profile ``[profiles.<profile>]`` (name "x",
    version "1", the given kind and source) holding ``fields`` (TOML lines)."""
    return frameworks_file_refusal(
        tmp_path, f'[profiles.{profile}]\nkind = "{kind}"\nname = "x"\nversion = "1"\n'
                  f'source = "{source}"\n{fields}')


def sourced_field(field: str, value: str, source: str = "scalemodel-serving-assumption") -> str:
    """TOML lines of one profile field and its ``<field>_source``."""
    return f'{field} = {value}\n{field}_source = "{source}"\n'


def serving_iteration(max_tokens: int = 4096):  # noqa: ANN201
    """A real serving iteration model (analytic/serving/iteration.py ``build``): Llama 3 8B on
    one H100 SXM at TP 1, fp8 weights and KV cache, FlashAttention 3, up to 512 sequences and
    ``max_tokens`` tokens an iteration, no host overhead."""
    from scalemodel.analytic.planner import make_cluster
    from scalemodel.analytic.serving.iteration import ServeLayout, build, precision
    from scalemodel.specs import get_gpu, get_model

    m, g = get_model("llama-3-8b"), get_gpu("h100-sxm")
    return build(m, g, ServeLayout(tp=1), precision("fp8"), "fp8", max_tokens=max_tokens,
                 max_seqs=512, attention_kind="flash3", overhead_s=0.0,
                 cluster=make_cluster(g, 1))


def zeroed_iteration(it, tables=None, **fields):  # noqa: ANN001, ANN003, ANN201
    """``it`` with every cost table zero but ``tables`` (table name -> array), no attention
    cost (dec_s_per_ctx_token and attn_flops_per_pair 0 unless ``fields`` say otherwise) and
    its other ``fields`` replaced."""
    import dataclasses

    import numpy as np

    tb = it.tables
    z = {f.name: np.zeros_like(getattr(tb, f.name)) for f in dataclasses.fields(tb)}
    z.update(tables or {})
    return dataclasses.replace(it, tables=type(tb)(**z),
                               **({"dec_s_per_ctx_token": 0.0, "attn_flops_per_pair": 0.0}
                                  | fields))


def gpu_bound_iteration(g_s: float):  # noqa: ANN201
    """:func:`serving_iteration` with every iteration costing exactly ``g_s`` on the GPU: all
    tables zero but the memory-bound kernels' (nongemm), ``g_s / n_layers`` per layer for any
    token count; no attention, no host time."""
    import numpy as np

    from scalemodel.specs import get_model

    it = serving_iteration()
    n_layers = get_model("llama-3-8b").n_layers
    return zeroed_iteration(it, {"nongemm": np.full_like(it.tables.nongemm, g_s / n_layers)})


def published_serving_rows(source: str | None = None) -> dict:
    """validation/serving_published.csv's rows by id (comment lines dropped), those of one
    ``source`` where one is named."""
    import csv
    import io

    path = Path(__file__).resolve().parents[1] / "validation" / "serving_published.csv"
    text = "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("#"))
    return {r["id"]: r for r in csv.DictReader(io.StringIO(text))
            if source is None or r["source"] == source}


def csv_text(rows: list, fieldnames: list | None = None, lineterminator: str = "\r\n") -> str:
    """CSV text of dict rows: a header (``fieldnames``, else the first row's keys), then the
    rows."""
    import csv
    import io

    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fieldnames or list(rows[0]), lineterminator=lineterminator)
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


def csv_subset(path: Path, keep) -> str:  # noqa: ANN001
    """The header and the rows of a validation CSV (comment lines dropped) for which
    ``keep(row)`` holds, as CSV text."""
    import csv
    import io

    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return csv_text([r for r in rows if keep(r)], fieldnames=list(rows[0]), lineterminator="\n")


def validation_guard(text: str, rows: int, mape: float, max_ape: float) -> list:
    """Price a validation file's text (analytic/validate.py ``validate``): no row skipped,
    ``rows`` rows priced, mean and largest absolute error under ``mape`` and ``max_ape``;
    returns the results for further checks."""
    from scalemodel.analytic.validate import summary, validate

    results, skipped = validate(text)
    assert not skipped
    assert len(results) == rows
    s = summary(results)
    assert s["mape"] < mape
    assert s["max_ape"] < max_ape
    return results


def validation_rows(name: str) -> list:
    """The rows of validation/<name> (a plain CSV file) as dicts."""
    import csv
    import io

    path = Path(__file__).resolve().parents[1] / "validation" / name
    return list(csv.DictReader(io.StringIO(path.read_text())))


def assert_published_rows_known(rows: list, others: tuple = ()) -> None:
    """Every row of a published-runs validation file names a known source and framework
    profile, its table and notes of more than 80 characters, with an id unique in the file and
    absent from the validation files ``others``."""
    from scalemodel.specs.frameworks import framework_ids
    from scalemodel.specs.sources import all_sources

    assert {r["source"] for r in rows} <= set(all_sources())
    assert {r["framework"] for r in rows} <= set(framework_ids())
    assert all(r["table"] and len(r["notes"]) > 80 for r in rows)
    ids = [r["id"] for r in rows]
    other = {r["id"] for n in others for r in validation_rows(n)}
    assert len(ids) == len(set(ids)) and not set(ids) & other


# Llama 2 7B at the NeMo 24.03 16K row's layout (TP2 PP1 DP8 CP1 on DGX-H100): parameters held by
# one GPU, by hand: 32 layers of 4 h^2 (q, k, v, o; 32 heads, no GQA) + 3 h f (gate, up, down)
# over TP 2, the untied input and output tables (V h each, vocab-parallel over TP 2) and the
# unsplit RMSNorm weights (2 h a layer, h final); h = 4096, f = 11008, V = 32000
_H, _F, _V, _L = 4096, 11008, 32000, 32
LLAMA2_7B_TP2_LOCAL_PARAMS = (_L * (4 * _H * _H + 3 * _H * _F) + 2 * _V * _H) / 2 + _L * 2 * _H + _H
LAYOUT_16K = {"tp": 2, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 1, "vpp": 1,
              "micro_batch": 1, "recompute": "none"}


def nemo_16k_row_problem():  # noqa: ANN201
    """The priced problem of validation row nemo-cp-llama2-7b-h100-16k (published_runs_2026.csv)."""
    from scalemodel.analytic.validate import read_rows, row_problem

    text = (Path(__file__).resolve().parents[1] / "validation" / "published_runs_2026.csv").read_text()
    return row_problem({r["id"]: r for r in read_rows(text)}["nemo-cp-llama2-7b-h100-16k"])
