"""memory follows the kernels (issue 15 item 3) and leaves the framework's reserve free
(issue 16): the same --attention / --kernels / --framework give memory and plan train the same
bytes, the kernels move the activations the way their saved tensors say, bad input is one line."""

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import run_cli as run
from scalemodel.analytic.layout import Context, TrainLayout, check
from scalemodel.errors import BadInput
from scalemodel.specs import get_model


def keys(lay: TrainLayout) -> str:
    return ",".join(f"{k}={v}" for k, v in lay.as_dict().items() if k != "stages")


@st.composite
def jobs(draw):
    mid = draw(st.sampled_from(("llama-3-8b", "mixtral-8x7b", "qwen3-30b-a3b")))
    m = get_model(mid)
    lay = TrainLayout(
        tp=draw(st.sampled_from((1, 2, 4))), pp=draw(st.sampled_from((1, 2))),
        dp=draw(st.sampled_from((2, 4))), ep=draw(st.sampled_from((1, 2))) if m.is_moe else 1,
        zero=draw(st.integers(0, 3)), micro_batch=draw(st.sampled_from((1, 2))),
        recompute=draw(st.sampled_from(("none", "selective", "full"))))
    flags = ("--attention", draw(st.sampled_from(("flash", "flash3", "unfused"))),
             "--kernels", draw(st.sampled_from(("fused", "eager"))),
             "--framework", draw(st.sampled_from(("megatron-core", "torchtitan", "deepspeed"))),
             "--precision", draw(st.sampled_from(("bf16", "fp8"))))
    return mid, lay, flags


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs())
def test_memory_equals_plan_train_under_kernels_and_frameworks(capsys, case):
    mid, lay, flags = case
    try:
        check(lay, Context(get_model(mid), lay.gpus, 64, 2048))
    except BadInput:
        assume(False)
    common = ("--model", mid, "--seq-len", "2048", "--global-batch", "64", *flags)
    rc, out, err = run(capsys, "memory", *common, "--layout", keys(lay), "--json")
    if rc == 2:
        # a layout the profile does not offer (frameworks.toml parallelisms, recompute_options,
        # pipeline_zero_max: torchtitan of 2025-06 has no ZeRO-1 and no EP, DeepSpeed no
        # selective recompute and ZeRO-1 at most under PP): both commands refuse it with the
        # same line
        rc2, _, err2 = run(capsys, "plan", "train", *common, "--gpus", str(lay.gpus),
                           "--layout", keys(lay), "--json")
        assert rc2 == 2 and err2.split(": ", 2)[-1] == err.split(": ", 2)[-1]
        return
    assert rc == 0, err
    mem = json.loads(out)
    rc, out, err = run(capsys, "plan", "train", *common, "--gpus", str(lay.gpus), "--layout",
                       keys(lay), "--json")
    if rc == 2:
        assert "does not fit" in err and mem["fits"] is False
        return
    plan = json.loads(out)
    assert mem["per_gpu_bytes"] == plan["memory_per_gpu_bytes"]
    assert mem["framework"] == plan["framework"] == flags[5]
    assert (mem["attention"], mem["kernels"]) == (flags[1], flags[3])


def _acts(capsys, *flags, layout="tp=1,pp=1,dp=8,recompute=none"):
    rc, out, err = run(capsys, "memory", "--model", "llama-3-8b", "--seq-len", "4096",
                       "--layout", layout, *flags, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_kernels_move_the_activations_as_their_saved_tensors_say(capsys):
    """Llama 3 8B (h 4096, ffn 14336, 32 heads, 8 KV heads of 128), one layer, per token, TP 1:
    eager kernels add 2 x 4h for the RMSNorms' fp32 copies and normalised outputs, 2 ffn for
    the unfused SwiGLU, and the K and V repeated to the 32 query heads, 2 x 2 x (4096 - 1024)
    (specs/data/saved_tensors.toml): 32,768 + 28,672 + 12,288 = 73,728 B per token per layer."""
    fused = _acts(capsys, "--kernels", "fused", "--attention", "flash")
    eager = _acts(capsys, "--kernels", "eager", "--attention", "flash")
    per_token = 32 * 4096  # layers x tokens of one micro-batch
    gap = eager["breakdown"]["activations"] - fused["breakdown"]["activations"]
    assert gap == pytest.approx(73_728 * per_token, rel=1e-12)
    # unfused attention keeps the scores: 2 B softmax (fused kernels), a s^2 per layer, and
    # drops the fp32 log-sum-exp (4 B x 32 heads per token)
    unfused = _acts(capsys, "--kernels", "fused", "--attention", "unfused")
    gap = unfused["breakdown"]["activations"] - fused["breakdown"]["activations"]
    assert gap == pytest.approx(32 * (2 * 32 * 4096**2 - 4 * 32 * 4096), rel=1e-12)


def test_full_recompute_adds_one_layer_working_set(capsys):
    """Full recompute keeps 2 s h per layer and adds, once, the re-run layer's no-recompute set
    less its input: fused kernels, flash, Llama 3 8B per token: 2 norms (2h + 4 B rstd), the
    attention and MLP inputs 4h, Q and output 2 (4096 + 4096), K and V 2 (1024 + 1024), SwiGLU
    6 x 14336, log-sum-exp 4 x 32, less the input 2h -> 16,392 + 16,384 + 16,384 + 4,096 +
    86,016 + 128 - 8,192 = 131,208 B."""
    full = _acts(capsys, "--kernels", "fused", "--attention", "flash",
                 layout="tp=1,pp=1,dp=8,recompute=full")
    stored = 32 * 2 * 4096 * 4096
    out = 4 * 4096 * 4096 + 4 * 4096 * 128256  # output layer: norm / head input + fp32 logits
    assert full["breakdown"]["activations"] == pytest.approx(
        stored + out + 131_208 * 4096, rel=1e-12)


def test_usable_memory_leaves_the_framework_reserve(capsys):
    """A100 80GB (85,899,345,920 B): TP 2 x DP 4 uses 2 communicators. megatron-core: minus
    the CUDA context 758,120,448 and 2 x 805,306,368 of NCCL buffers, over 1.05 allocator slack;
    torchtitan (expandable segments): no slack. ZeRO-3: torchtitan runs its DP ranks beside TP
    under FSDP only (frameworks.toml replicate_1d_only); the stage does not change the reserve."""
    lay = "tp=2,pp=1,dp=4,zero=3,recompute=full"
    hbm = 85_899_345_920
    base = hbm - 758_120_448 - 2 * 805_306_368
    for fw, slack in (("megatron-core", 0.05), ("torchtitan", 0.0)):
        got = _acts(capsys, "--gpu", "a100-sxm-80gb", "--framework", fw, layout=lay)
        assert got["capacity_bytes"] == pytest.approx(base / (1 + slack), rel=1e-12)
    frac = _acts(capsys, "--gpu", "a100-sxm-80gb", "--mem-fraction", "0.8", layout=lay)
    assert frac["capacity_bytes"] == pytest.approx(0.8 * hbm, rel=1e-12)


@pytest.mark.parametrize("argv, needle", [
    (("--kernels", "turbo"), "--kernels"),
    (("--attention", "sparse"), "--attention"),
    (("--framework", "nope"), "unknown framework"),
])
def test_bad_kernel_flags_are_one_line(capsys, argv, needle):
    rc, out, err = run(capsys, "memory", "--model", "llama-3-8b", *argv)
    assert rc == 2 and not out and err.count("\n") == 1 and needle in err, err
