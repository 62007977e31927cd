"""The step model: what one training step of one parallel layout costs, in typed terms.

Each part prices one kind of work for every candidate layout at once (numpy arrays, one entry per
layout; a single layout is an array of one):

* :mod:`.gemm` - GEMM time by shape (tiles in waves over the SMs, the HBM roofline);
* :mod:`.attention` - the attention projections and core (fused kernels by call length, or the
  unfused score matrix in HBM);
* :mod:`.elementwise` - norms, residuals, activation functions, rotary, dropout masks, fp8 casts;
* :mod:`.layers` - a dense and an MoE layer's compute, forward, backward and recompute;
* :mod:`.comm` - the collectives inside a layer (TP/SP, CP, EP) with their fabric tier and
  overlap;
* :mod:`.pipeline` - stages, the slowest stage, the schedule's bubble (1F1B, interleaved,
  DualPipe) and the send/recv between stages;
* :mod:`.data_parallel` - DP gradient reduction and ZeRO / FSDP gathers, and how much of them
  compute hides;
* :mod:`.optimizer` - the optimizer step and weight-gradient accumulation;
* :mod:`.memory_terms` - bytes per GPU (analytic/memory.py, the model ``scalemodel memory``
  shows);
* :mod:`.model` - :func:`evaluate`, which composes the parts into :class:`StepTerms`;
* :mod:`.derivation` - the worked derivation of one layout, part by part.
"""

from .model import evaluate
from .result import StepTerms

__all__ = ["StepTerms", "evaluate"]
