"""``scalemodel memory --fit``: what the search keeps fixed and what it refuses (s19-review2).

find_min_gpus (analytic/memory.py) searches tp, pp, dp, zero and recompute none / selective /
full, holding cp, ep and the micro-batch where given. A key it cannot hold is refused in one
line (DESIGN.md rule 6: nothing silently dropped), never priced as a layout the user did not
ask for, and never a traceback."""

import pytest

from conftest import one_line_refusal
from conftest import run_cli as run


@pytest.mark.parametrize("argv", [
    ("--recompute", "op"),
    ("--layout", "recompute=op"),
])
def test_fit_refuses_op_recompute_in_one_line(capsys, argv):
    # before: ValueError from RECOMPUTE.index("op") (exit 1, a traceback)
    rc, out, err = run(capsys, "memory", "--model", "llama-3-8b", "--fit", *argv)
    assert one_line_refusal(rc, out, err), err
    assert "recompute" in err and "op" in err


@pytest.mark.parametrize("argv, key", [
    (("--layout", "vpp=2"), "vpp"),
    (("--vpp", "2"), "vpp"),
    (("--layout", "stages=20/12"), "stages"),
    (("--no-sp", "--layout", "tp=2"), "sp"),
])
def test_fit_refuses_keys_it_cannot_hold(capsys, argv, key):
    # before: find_min_gpus was handed tp, pp, dp, cp, zero, recompute and ep only, so these
    # keys were dropped and the report showed a layout with vpp 1, the balanced split or SP on
    rc, out, err = run(capsys, "memory", "--model", "llama-3-8b", "--fit", *argv)
    assert one_line_refusal(rc, out, err), err
    assert key in err


def test_fit_holds_the_micro_batch(capsys):
    from conftest import cli_json

    d = cli_json(capsys, "memory", "--model", "llama-3-8b", "--fit", "--layout",
                 "micro_batch=2,tp=2")
    assert d["min_layout"]["micro_batch"] == 2 and d["min_layout"]["tp"] == 2


@pytest.mark.parametrize("argv", [("--global-batch", "2"), ()])
def test_fit_reports_a_layout_that_holds_the_batch(capsys, argv):
    """The fitted layout is one plan train can run for the same batch: the layout rule "batch"
    (analytic/layout.py) needs dp x micro-batch to divide the global batch. llama-3-70b on
    h100-sxm fitted TP8 DP3 (24 GPUs) whatever the batch, and 3 divides neither 2 sequences
    nor the default 4M tokens / 8192 = 512."""
    from conftest import cli_json

    d = cli_json(capsys, "memory", "--model", "llama-3-70b", "--fit", *argv)
    lay = d["min_layout"]
    assert d["global_batch"] % (lay["dp"] * lay["micro_batch"]) == 0, lay


def test_fit_under_the_core_r080_grid_keeps_ep_within_dp(capsys):
    """Under megatron-core-0.8 (frameworks.toml expert_ranks = "dp_split") EP is cut out of the
    DP digit alone: initialize_model_parallel at core_r0.8.0 (baf94af3, parallel_state.py line
    442) raises unless data_parallel_size % expert_model_parallel_size == 0, and the layout rule
    "divisibility" (analytic/layout.py _ep_group) refuses such layouts in memory and plan train.
    The fit counted dp x cp instead: mixtral-8x7b with cp=2, ep=8 fitted TP2 DP4 CP2 (dp x cp =
    8, but 4 % 8 != 0), a layout the same command refuses without --fit."""
    from conftest import cli_json

    d = cli_json(capsys, "memory", "--model", "mixtral-8x7b", "--fit", "--framework",
                 "megatron-core-0.8", "--layout", "cp=2,ep=8", "--seq-len", "8192")
    lay = d["min_layout"]
    assert lay["dp"] % lay["ep"] == 0, lay
    # the fitted layout is one the command prices without --fit
    text = ",".join(f"{k}={lay[k]}" for k in ("tp", "pp", "dp", "cp", "ep", "zero",
                                               "micro_batch", "recompute"))
    rc, _, err = run(capsys, "memory", "--model", "mixtral-8x7b", "--framework",
                     "megatron-core-0.8", "--layout", text, "--seq-len", "8192")
    assert rc == 0, err


def test_validate_layout_counts_the_expert_group_as_the_layout_rule_does():
    """memory.validate_layout draws the expert group from the ranks layout._ep_group counts:
    dp alone under megatron-core-0.8 (core_r0.8.0 parallel_state.py line 442 raises unless
    data_parallel_size % expert_model_parallel_size == 0), dp x cp on the newer grid. Derivation:
    mixtral-8x7b (8 experts) at tp=2 dp=4 cp=2 ep=8, etp = tp: dp = 4 is not a multiple of 8,
    dp x cp = 8 is."""
    from scalemodel.analytic.layout import TrainLayout
    from scalemodel.analytic.memory import validate_layout
    from scalemodel.errors import BadInput
    from scalemodel.specs import get_model

    m = get_model("mixtral-8x7b")
    lay = TrainLayout(tp=2, pp=1, dp=4, cp=2, ep=8, zero=1, micro_batch=1)
    validate_layout(m, lay, 8192, framework="megatron-core")
    with pytest.raises(BadInput, match="ep must divide dp = 4"):
        validate_layout(m, lay, 8192, framework="megatron-core-0.8")
