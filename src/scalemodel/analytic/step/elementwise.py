"""Memory-bound kernels of a layer, priced as HBM traffic: norms, residual adds, the activation
function, rotary, dropout masks, fp8 casts, and what PyTorch eager mode adds over fused kernels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .candidates import Candidates
from .config import cast_bytes, constants, moe_fused_grouped_mlp, sp_split


@dataclass(frozen=True)
class ElementwiseBytes:
    """HBM bytes per layer and micro-batch on one rank."""

    fused_f: Any  # norms, residuals, activation, rotary, QK-norm (fused kernels), forward
    mask: Any  # dropout masks (written forward, read backward)
    cast_f: Any  # fp8 casts of the GEMM inputs
    cast_b: Any  # fp8 casts of the output gradients
    eager_f: Any  # eager mode over the fused accounting, forward
    eager_b: Any

    @property
    def forward(self) -> Any:
        return self.fused_f + self.mask + self.cast_f + self.eager_f

    @property
    def backward(self) -> Any:
        """The activation function and rotary backward move twice the forward's bytes."""
        return 2 * self.fused_f + self.mask + self.cast_b + self.eager_b


def _fused_bytes(c: Candidates, width: float) -> Any:
    m, ms, tp, h = c.m, c.ms, c.tp, c.h
    qkn_w = float(ms.qk_dim + m.kv_dim) if m.qk_norm else 0.0  # QK-norm (Qwen3)
    return c.e_a * c.T * ((2 * 2 * h + 2 * 3 * h) / sp_split(c)
                          + (3 if ms.up_k == 2 else 2) * width / tp
                          + 2 * (ms.qk_dim + ms.v_dim) / tp
                          + 2 * qkn_w / tp)


def _cast_bytes(c: Candidates, width: float, copies: float) -> tuple[Any, Any]:
    """fp8 cast + transpose of every GEMM input (forward) and output gradient (backward):
    QKV and up/gate read the gathered h, the output projection v/tp, the down projection
    width/tp; ``copies`` = token copies entering the MLP (top_k for routed experts)."""
    if not c.fp8:
        return 0.0, 0.0
    ms, tp, h = c.ms, c.tp, c.h
    cb = cast_bytes(c.fp8_scaling[0])[0]
    fin = c.T * (h + ms.v_dim / tp + copies * h + width / tp)
    bout = c.T * (ms.attn_in_n / tp + h + ms.up_k * width / tp + copies * h)
    return cb * fin, cb * bout


def _eager_widths(c: Candidates) -> tuple[float, float, float]:
    """(RMSNorms per layer, rotary width, repeated K/V width) that eager mode runs op by op."""
    m, ms = c.m, c.ms
    rms_n = 2.0 if m.norm == "rms" else 0.0  # two RMSNorms per layer
    if m.kv_lora_rank:  # MLA: rotary only on the decoupled rope slices of Q and K
        rope_w = float(m.n_heads * m.qk_rope_head_dim + m.qk_rope_head_dim)
    else:
        rope_w = float(ms.qk_dim + m.kv_dim)
    rope_w = rope_w if m.rope else 0.0
    n_rep = m.n_heads / max(m.n_kv_heads, 1)
    rep_w = float(m.kv_dim + ms.qk_dim) if (not m.kv_lora_rank and n_rep > 1) else 0.0
    return rms_n, rope_w, rep_w


def _eager_bytes(c: Candidates, width: float) -> tuple[Any, Any]:
    """Extra HBM bytes per layer of PyTorch eager mode over the fused accounting (forward,
    backward): RMSNorm, rotary and SwiGLU run op by op, grouped-query K/V are materialised per
    query head, the attention output is copied contiguous."""
    if c.job.kernels != "eager":
        return 0.0, 0.0
    ng, ms, tp, h = constants()["nongemm"], c.ms, c.tp, c.h
    rms_n, rope_w, rep_w = _eager_widths(c)
    f = (rms_n * (ng["eager_rmsnorm_fwd"] - ng["fused_norm_fwd"]) * h / sp_split(c)
         + rope_w * (ng["eager_rope_fwd"] - ng["fused_rope_fwd"]) / tp
         + (ng["eager_swiglu_fwd"] - ng["fused_swiglu_fwd"]) * width / tp * (ms.up_k == 2)
         + ng["eager_repeat_kv"] * rep_w / tp
         + ng["eager_attn_out_copy"] * ms.v_dim / tp)
    b_ = (rms_n * (ng["eager_rmsnorm_bwd"] - 2 * ng["fused_norm_fwd"]) * h / sp_split(c)
          + rope_w * (ng["eager_rope_bwd"] - 2 * ng["fused_rope_fwd"]) / tp
          + (ng["eager_swiglu_bwd"] - 2 * ng["fused_swiglu_fwd"]) * width / tp * (ms.up_k == 2)
          + ng["eager_repeat_kv"] * rep_w / tp
          + ng["eager_attn_out_copy"] * ms.v_dim / tp)
    return c.T * f, c.T * b_


def elementwise_bytes(c: Candidates, width: float, copies: float = 1.0) -> ElementwiseBytes:
    """The memory-bound traffic of a layer whose MLP is ``width`` wide (all experts a token
    visits), ``copies`` token copies entering it."""
    ng = constants()["nongemm"]
    mask = float(ng["dropout_mask_bytes"]) * 2 * c.T * c.h / sp_split(c) if c.m.dropout else 0.0
    cf, cb = _cast_bytes(c, width, copies)
    xf, xb = _eager_bytes(c, width)
    return ElementwiseBytes(_fused_bytes(c, width), mask, cf, cb, xf, xb)


def nongemm_time(c: Candidates, width: float, copies: float = 1.0) -> tuple[Any, Any]:
    """Seconds of memory-bound kernels per layer (forward, backward)."""
    e = elementwise_bytes(c, width, copies)
    return e.forward / c.hbm, e.backward / c.hbm


def fused_grouped_mlp_saving(c: Candidates, routed_width: float) -> tuple[Any, Any]:
    """HBM bytes per layer and micro-batch (forward, backward) that Transformer Engine's fused
    MXFP8 grouped MLP (config.moe_fused_grouped_mlp) takes off :func:`elementwise_bytes` for
    the routed experts, ``routed_width`` = top_k x the expert width (per token, before tp).

    Read in TE 4220403e (the commit Megatron-Bridge v0.5.0 pins), ops/fused/forward_grouped_mlp.py
    and backward_grouped_mlp.py: forward, the fc1 kernel (cudnn grouped_gemm_glu) returns the
    GLU input it saves (c_tensor, the GEMM's own output) and the SwiGLU output already MXFP8
    row- and column-wise (d_tensor, d_col_tensor): the SwiGLU pass (read 2 x width, write
    width, 3 e_a per width element) and the cast's read of its input (e_a) are gone, the
    cast's writes stay (in the epilogue); 4 e_a per width element saved. Backward, the fc2
    dgrad kernel (grouped_gemm_dglu) reads the saved c_tensor and writes the fc1 output
    gradient MXFP8 row- and column-wise (d_row_tensor, d_col_tensor): the dSwiGLU pass (2 x the
    forward's 3 e_a) and the cast's read of the 2 x width gradient (2 e_a) are gone, its read of
    c (2 e_a) stays in the epilogue; 6 e_a per width element saved. 0 where the recipe does not
    run it."""
    if not c.fp8 or not moe_fused_grouped_mlp(c.job, c.gpu, c.fp8_scaling[0]):
        return 0.0, 0.0
    if c.ms.up_k != 2:  # the fused op is a GLU MLP (SwiGLU / GeGLU)
        return 0.0, 0.0
    per = c.e_a * c.T * routed_width / c.tp
    return 4.0 * per, 6.0 * per
