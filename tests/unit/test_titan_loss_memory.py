"""torchtitan 9dec370's loss buffers (train.py loss_fn, lines 131-134; del pred, line 306)."""

from scalemodel.analytic.layout import TrainLayout
from scalemodel.analytic.memory import loss_logit_bytes, memory_report
from scalemodel.specs import get_model


def test_profile_reads_twelve_bytes_per_logit():
    # derivation: the loss backward holds log_softmax's saved fp32 output (4), nll_loss's fp32
    # gradient (4) and log_softmax's fp32 input gradient (4) per logit element
    b, src, _ = loss_logit_bytes("torchtitan-2024-12")
    assert b == 4 + 4 + 4 and src == "torchtitan-9dec370-train"


def test_loss_adds_eight_bytes_per_logit_over_one_fp32_copy():
    # Llama 3 8B, 32768 tokens on one rank, no TP: 8 extra bytes x 32768 x 128256 logits
    m = get_model("llama-3-8b")
    lay = TrainLayout(dp=8, zero=3, recompute="full")
    base = memory_report(m, lay, seq_len=32768, attention="flash", kernels="fused")
    titan = memory_report(m, lay, seq_len=32768, attention="flash", kernels="fused",
                          framework="torchtitan-2024-12")
    extra = titan.breakdown["activations"] - base.breakdown["activations"]
    assert abs(extra - 8 * 32768 * 128256) < 1.0


def test_vocab_parallel_loss_under_tp():
    # derivation (torch loss.py under loss_parallel(), as torchtitan 9dec370 runs it with TP):
    # the backward's (zeros_like(x) + exp(x)) * grad_output beside the saved log_softmax
    # output keeps 4 fp32 buffers per element of the rank's vocabulary shard
    from scalemodel.analytic.memory import loss_logit_bytes
    assert loss_logit_bytes("torchtitan-2024-12", 8)[:2] == (4 * 4, "torch-loss-parallel")
    # a profile that does not give the vocab-parallel loss counts one fp32 copy
    assert loss_logit_bytes("megatron-core", 8)[0] == 4.0
