"""Megatron-Core r0.8.0's interleaved schedule: which pipeline send/recv stay on the critical path,
derived by hand from the source the README's H100 model table ran (NVIDIA/Megatron-LM tag
core_r0.8.0 = baf94af3, the weak-scaling figure's label; validation/published_runs_papers.csv
mcore-r080-gpt-*-h100).

megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving:

* lines 613-617: the number of micro-batches m must be a multiple of p, else RuntimeError;
* lines 646-652: with m == p every chunk forward is a warm-up one (all_warmup_microbatches: all
  forwards, then all backwards); otherwise rank i runs 2 (p - i - 1) + (v - 1) p warm-up chunk
  forwards, at most m v;
* the warm-up loop (from line 817): after each chunk forward the send/recv is posted with
  overlap_p2p_comm=True and its handles are waited at the top of the next iteration, before the
  next forward: no compute runs beside it, so it is exposed; the cool-down loop (from line 1095)
  the same for the backwards;
* the steady-state loop (from line 916): the forward's send/recv is waited only after the
  backward that follows it, and the backward's after the next forward: hidden.

megatron/training/arguments.py lines 271-277: without a virtual pipeline overlap_p2p_comm is set
False (batch_p2p_comm = not overlap_p2p_comm, line 621): every transfer is waited on.

So on the first rank (the longest critical path) the crossings per direction left exposed are the
warm-up ones plus the p - 1 of the fill, of the v m + p - 1 a step has:
  m == p, p = 4, v = 23 (the 119B row's layout validate picks): all 23 * 4 + 3 = 95;
  m = 12, p = 6, v = 16 (177B): warm-up 2 * 5 + 15 * 6 = 100 of 192, exposed 100 + 5 = 105 of 197;
  v = 1, m = 16, p = 4: all 16 + 3 = 19.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from scalemodel.analytic.step.pipeline import exposed_crossings


def _c(pp: int, vpp: int, mb: int) -> SimpleNamespace:
    job = SimpleNamespace(framework_id="megatron-core-0.8")
    return SimpleNamespace(pp=np.array([pp]), vpp=np.array([vpp]), mb=np.array([mb]), job=job)


def test_all_warmup_when_microbatches_equal_stages() -> None:
    # schedules.py lines 646-648: m == p, nothing runs in a steady state
    assert float(exposed_crossings(_c(4, 23, 4))[0]) == 23 * 4 + 4 - 1


def test_warmup_and_fill_exposed_steady_state_hidden() -> None:
    warm = 2 * (6 - 0 - 1) + (16 - 1) * 6  # lines 650-652, rank 0
    assert warm == 100
    assert float(exposed_crossings(_c(6, 16, 12))[0]) == warm + 6 - 1


def test_no_virtual_pipeline_waits_on_every_transfer() -> None:
    # arguments.py lines 271-277: overlap_p2p_comm off without interleaving
    assert float(exposed_crossings(_c(4, 1, 16))[0]) == 16 + 4 - 1
