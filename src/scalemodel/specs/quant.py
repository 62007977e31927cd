"""Weight quantization read from a Hugging Face ``quantization_config``.

One record, :class:`WeightQuant`, says how many bits a quantized linear weight keeps, how its
scales (and zero points) are laid out, and which modules the checkpoint leaves unquantized.
:meth:`WeightQuant.linear_bytes` prices one linear module from its shape; the analytic layer
(``analytic/weights.py``) walks a model's modules with it. Configs are data: nothing they carry
is executed, a ``re:`` pattern is compiled as a regular expression and only matched.

Formats read (their on-disk layouts, as each tool writes them):

* ``fp8`` (transformers FineGrainedFP8 / vLLM fp8): one byte per weight; ``weight_block_size``
  [n, k] gives one fp32 scale per n x k block, otherwise one fp32 scale per tensor. ``lm_head``
  stays unquantized; ``modules_to_not_convert`` entries match as substrings of a module name.
* ``compressed-tensors`` (llm-compressor, e.g. w8a8 int8 / fp8): the first ``config_groups``
  entry's ``weights`` (``num_bits``, ``strategy`` tensor / channel / group / block,
  ``group_size``, ``symmetric``); scales in the checkpoint's dtype; targets ``Linear`` includes
  ``lm_head`` unless ``ignore`` lists it; ``ignore`` entries are names or ``re:`` expressions.
* ``awq`` (AutoAWQ GEMM/GEMV): ``bits`` per weight, per group of ``group_size`` inputs one fp16
  scale and (``zero_point``) one packed zero; ``modules_to_not_convert`` as substrings.
* ``gptq`` (AutoGPTQ / GPTQModel): ``bits`` per weight, per group one fp16 scale and one packed
  zero (kept even when symmetric), plus ``g_idx``, one int32 per input channel; ``group_size``
  -1 means one group per output row; ``lm_head`` quantized only when the config says so.
* ``mxfp4`` (transformers Mxfp4Config, gpt-oss): the OCP microscaling layout, 4-bit e2m1
  values packed two a byte and one e8m0 (one-byte exponent) scale per 32 values
  (transformers 5.24.0 integrations/mxfp4.py: ``*_blocks`` uint8 [..., G, 16] with ``*_scales``
  uint8 [..., G]); only the MoE experts are converted (``replace_with_mxfp4_linear`` swaps
  ``GptOssMLP``'s experts and nothing else), unless ``modules_to_not_convert`` keeps them too;
  its entries match as transformers' ``should_convert_module`` does: a regular expression from
  the start of the name up to a module boundary, or a suffix.

Embeddings, norms, biases and MoE routers stay in the unquantized dtype in every format here.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput

METHODS = ("fp8", "compressed-tensors", "awq", "gptq", "mxfp4")


@dataclass(frozen=True)
class WeightQuant:
    method: str
    weight_bits: float
    strategy: str  # "tensor", "channel", "group" or "block": one scale per ...
    group_size: int = 0  # inputs per scale for strategy "group"
    block: tuple[int, int] = (0, 0)  # (rows, cols) per scale for strategy "block"
    scale_bytes: float = 2.0  # bytes per scale; 0 = the unquantized dtype's size
    zero_bits: float = 0.0  # bits per zero point (0 = symmetric, none stored)
    g_idx: bool = False  # GPTQ's int32 group index per input channel
    quantize_head: bool = False
    ignore: tuple[str, ...] = ()
    ignore_rule: str = "substring"  # "substring" (awq, fp8), "name" (compressed-tensors),
    # "hf" (transformers' should_convert_module: a regex from the start to a boundary, or a suffix)
    # or "glob" (ModelOpt's exclude_modules: fnmatch against the whole name, as TensorRT-LLM's
    # QuantConfig.is_module_excluded_from_quantization matches them)
    experts_only: bool = False  # mxfp4: only MoE expert weights are stored quantized
    label: str = ""

    def is_quantized(self, name: str) -> bool:
        """Whether the linear module ``name`` (Llama-style dotted name) is stored quantized."""
        if name == "lm_head" and not self.quantize_head:
            return False
        if self.experts_only and ".experts." not in name:
            return False
        for pat in self.ignore:
            if self.ignore_rule == "glob":
                if fnmatch.fnmatchcase(name, pat):
                    return False
            elif self.ignore_rule == "hf":
                if re.match(rf"(?:{pat})(?:(?<=\.)|(?=\.|$))", name) or name.endswith(pat):
                    return False
            elif pat.startswith("re:"):
                if re.match(pat[3:], name):
                    return False
            elif self.ignore_rule == "substring":
                if pat in name:
                    return False
            elif name == pat or name.endswith("." + pat):
                return False
        return True

    def linear_bytes(self, name: str, n_in: int, n_out: int, unquantized_bytes: float) -> float:
        """Bytes of one linear weight of shape (n_out, n_in), scales and zero points included."""
        n = n_in * n_out
        if not self.is_quantized(name):
            return n * unquantized_bytes
        s_b = self.scale_bytes or unquantized_bytes
        if self.strategy == "tensor":
            n_scales = 1
        elif self.strategy == "channel":
            n_scales = n_out
        elif self.strategy == "group":
            g = self.group_size if self.group_size > 0 else n_in
            n_scales = n_out * math.ceil(n_in / g)
        else:  # block
            r, c = self.block
            n_scales = math.ceil(n_out / r) * math.ceil(n_in / c)
        extra = n_scales * (s_b + self.zero_bits / 8) + (4 * n_in if self.g_idx else 0)
        return n * self.weight_bits / 8 + extra


def _num(v: Any, field: str, where: str, lo: float = 0) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= lo:
        raise BadInput(f"{where}: quantization_config.{field} must be a number above {lo:g}, got {v!r}")
    return v


def _names(v: Any, field: str, where: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BadInput(f"{where}: quantization_config.{field} must be a list of module names")
    for x in v:
        if x.startswith("re:"):
            try:
                re.compile(x[3:])
            except re.error as e:
                raise BadInput(f"{where}: quantization_config.{field} has a bad expression "
                               f"{x!r} ({e})") from None
    return tuple(v)


def _read_compressed(q: Mapping[str, Any], where: str) -> WeightQuant:
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise BadInput(f"{where}: compressed-tensors quantization_config needs config_groups")
    if len(groups) > 1:
        raise BadInput(f"{where}: compressed-tensors with {len(groups)} config_groups is not "
                       "supported yet (one scheme for all targeted modules)")
    grp = next(iter(groups.values()))
    w = grp.get("weights") if isinstance(grp, Mapping) else None
    if not isinstance(w, Mapping):
        raise BadInput(f"{where}: compressed-tensors config group has no weights scheme")
    targets = grp.get("targets", ["Linear"])
    if targets != ["Linear"]:
        raise BadInput(f"{where}: compressed-tensors targets {targets!r} are not supported "
                       "(only ['Linear'])")
    bits = _num(w.get("num_bits"), "weights.num_bits", where)
    strategy = w.get("strategy", "tensor")
    if strategy not in ("tensor", "channel", "group", "block"):
        raise BadInput(f"{where}: compressed-tensors weight strategy {strategy!r} is not one of "
                       "tensor, channel, group, block")
    gs = w.get("group_size") or 0
    block = tuple(w.get("block_structure") or (0, 0))
    if strategy == "group":
        gs = _num(gs, "weights.group_size", where)
    if strategy == "block" and (len(block) != 2 or not all(isinstance(b, int) and b > 0 for b in block)):
        raise BadInput(f"{where}: compressed-tensors block strategy needs block_structure [rows, cols]")
    sym = w.get("symmetric", True)
    kind = w.get("type", "int")
    ignore = _names(q.get("ignore"), "ignore", where)
    act = grp.get("input_activations")
    a_bits = act.get("num_bits") if isinstance(act, Mapping) else None
    label = f"compressed-tensors w{bits:g}" + (f"a{a_bits:g}" if a_bits else "") + f" {kind}, {strategy}"
    return WeightQuant("compressed-tensors", float(bits), strategy, int(gs), block,  # type: ignore[arg-type]
                       scale_bytes=0.0, zero_bits=0.0 if sym else float(bits),
                       quantize_head=True, ignore=ignore, ignore_rule="name", label=label)


def read_quantization(cfg: Mapping[str, Any], where: str) -> tuple[WeightQuant | None, tuple[str, ...]]:
    """The config's quantization_config as a WeightQuant (None when absent), with reader notes."""
    q = cfg.get("quantization_config")
    if q is None:
        return None, ()
    if not isinstance(q, Mapping):
        raise BadInput(f"{where}: quantization_config must be a JSON object")
    method = q.get("quant_method")
    if method not in METHODS:
        raise BadInput(f"{where}: quantization_config.quant_method {method!r} is not supported; "
                       f"supported: {', '.join(METHODS)}")
    if method == "fp8":
        blk = q.get("weight_block_size")
        if blk is not None and (not isinstance(blk, list) or len(blk) != 2
                                or not all(isinstance(b, int) and b > 0 for b in blk)):
            raise BadInput(f"{where}: quantization_config.weight_block_size must be [rows, cols]")
        wq = WeightQuant("fp8", 8.0, "block" if blk else "tensor", 0, tuple(blk or (0, 0)),  # type: ignore[arg-type]
                         scale_bytes=4.0, ignore=_names(q.get("modules_to_not_convert"),
                                                        "modules_to_not_convert", where),
                         label="fp8" + (f", {blk[0]}x{blk[1]} block scales" if blk else ", per-tensor scale"))
    elif method == "compressed-tensors":
        wq = _read_compressed(q, where)
    elif method == "mxfp4":
        ignore = _names(q.get("modules_to_not_convert"), "modules_to_not_convert", where)
        for x in ignore:
            try:
                re.compile(x)
            except re.error as e:
                raise BadInput(f"{where}: quantization_config.modules_to_not_convert has a bad "
                               f"expression {x!r} ({e})") from None
        wq = WeightQuant("mxfp4", 4.0, "group", 32, scale_bytes=1.0, ignore=ignore,
                         ignore_rule="hf", experts_only=True,
                         label="MXFP4 experts (e2m1, one e8m0 scale per 32 values)")
    elif method == "awq":
        bits = _num(q.get("bits", q.get("w_bit")), "bits", where)
        gs = _num(q.get("group_size", q.get("q_group_size")), "group_size", where)
        zp = bool(q.get("zero_point", True))
        wq = WeightQuant("awq", float(bits), "group", int(gs), scale_bytes=2.0,
                         zero_bits=float(bits) if zp else 0.0,
                         ignore=_names(q.get("modules_to_not_convert"), "modules_to_not_convert", where),
                         label=f"AWQ int{bits:g}, group {gs}")
    else:  # gptq
        bits = _num(q.get("bits"), "bits", where)
        gs = q.get("group_size", 128)
        if isinstance(gs, bool) or not isinstance(gs, int) or (gs <= 0 and gs != -1):
            raise BadInput(f"{where}: quantization_config.group_size must be a positive whole "
                           f"number or -1, got {gs!r}")
        wq = WeightQuant("gptq", float(bits), "group", gs if gs > 0 else 0, scale_bytes=2.0,
                         zero_bits=float(bits), g_idx=True, quantize_head=bool(q.get("lm_head", False)),
                         ignore=_names(q.get("modules_to_not_convert"), "modules_to_not_convert", where),
                         label=f"GPTQ int{bits:g}, group {gs}")
    left = ", ".join(wq.ignore) if wq.ignore else "none"
    notes = (f"quantization_config: {wq.label}; linear weights priced per module with their scales; "
             f"left unquantized: embeddings, norms, biases, routers"
             f"{'' if wq.quantize_head else ', lm_head'}; ignore list: {left}",)
    return wq, notes
