"""Every option of every command, given malformed values: exit 0 or 2, never a traceback.

Commands that start processes, servers or compilers are left out (their inputs are covered by
their own tests). A bad value must give one line on stderr.
"""

import argparse
import contextlib
import io

import pytest

from scalemodel import cli

SKIP = {"serve", "site", "drill", "triage run", "comm bench", "gpu build", "gpu bench"}
VALUES = ["abc", "-1", "nan", "1e999"]


def _leaves(p, prefix):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _leaves(sp, [*prefix, name])
            return
    yield prefix, p


def _cases():
    out = []
    for path, p in _leaves(cli.build_parser(), []):
        if " ".join(path) in SKIP or path[0] in SKIP:
            continue
        for a in p._actions:
            if not a.option_strings or a.type is None or a.dest in ("help", "plot"):
                continue
            out.append((path, a.option_strings[-1]))
    return out


@pytest.mark.parametrize("path, flag", _cases(), ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_malformed_values_are_one_line(path, flag):
    for value in VALUES:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                rc = cli.main([*path, flag, value, "--json"])
            except SystemExit as e:
                rc = e.code
        assert rc in (0, 2), (path, flag, value, rc)
        if value in ("nan", "1e999"):  # never a meaningful number: refused at parse time
            assert rc == 2, (path, flag, value)
        if rc == 2:
            assert err.getvalue().strip().count("\n") == 0, err.getvalue()
