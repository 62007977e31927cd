"""Host (CPU) work of one eager Megatron-Core MoE transformer layer: ops and seconds.

Run: /work/main/.venv/bin/python bench/bench_moe_host.py [--reps 7] [--hidden 32] [--json FILE]
     [--scopes]   (only the CPU seconds inside the CUDA-graph scopes and their shares of the
                   layer's, thread CPU time; see scope_split)

What it builds (Megatron-Core 0.16.1, torch CPU): a gloo process group of one rank,
``parallel_state.initialize_model_parallel`` with TP = PP = EP = 1, and one TransformerLayer
from ``get_gpt_layer_local_spec`` (the Megatron-Core-only spec, no Transformer Engine) with
Qwen3-30B-A3B's layer structure scaled down in width only: RMSNorm, GQA attention with
q/k RMSNorm (32 query heads in the real model, 4 KV groups: 8 / 1 here, ratio kept), SwiGLU
experts, ``num_moe_experts`` experts, top-8 softmax routing with the aux loss, the all-to-all
dispatcher, dropless, force-balanced routing (the NeMo perf tables' footnote), no shared expert.
``moe_grouped_gemm`` is False: the local spec's grouped path is the legacy GroupedMLP, which needs
the CUDA-only ``grouped_gemm`` package; on CPU the experts run as SequentialMLP (one
ColumnParallelLinear / activation / RowParallelLinear per local expert). The unfused router and
permutation run (``moe_router_fusion`` / ``moe_permute_fusion`` need TE). No rotary embedding
(the runs fuse it in TE). A dense layer (same attention, SwiGLU MLP 6144 wide scaled like the
experts) is measured for contrast.

CPU-only shims: ``torch.cuda.current_device`` returns the CPU device, and ``torch.cuda.Stream``
/ ``current_stream`` / ``stream`` are one no-op stream, and the CUDA RNG tracker's ``fork``
(dropout 0 here) is a no-op, so the dispatcher's device-to-host copy
and event synchronisation (``_maybe_dtoh_and_synchronize``) are no-ops here. On a GPU they add
host work; everything here is a lower bound for that reason too.

Tokens per micro-batch: 4096, as sequence 32 x batch 128, so every one of 128 experts receives
256 rows (force-balanced) as at sequence 4096 x MBS 1, while the attention's CPU arithmetic stays
small (its op count does not depend on the sequence); and 128 tokens (16 x 8; all 128 experts
still hit, 8 rows each), the same ops with little arithmetic: the host figure.

It reports, per layer and pass (forward; backward of the layer's output sum):

* aten ops called (every ``aten::`` event the profiler records), top-level aten ops (not inside
  another aten op), and would-be kernels: the aten ops that compute something (not a view /
  metadata / allocation op, the ``_NO_KERNEL`` list below) and call no other such op (so
  ``aten::linear`` -> ``aten::mm`` counts the mm once); on CUDA each launches at least one
  kernel (some, e.g. topk, sort, nonzero, launch several);
* host seconds: wall time of forward + backward with the profiler off, one intra-op thread,
  median of ``--reps`` after 2 warm-ups, at the tiny width (``--hidden``); the 128-token rows
  and the last row (twice the width) show how much of the time is the CPU's arithmetic.

This CPU is not the runs' DGX Xeon host, and no CUDA launch (driver call, stream ordering,
caching allocator) is included: the seconds are a lower bound on the eager host time of the
same Python and aten path on a GPU. The experts' path (SequentialMLP) is not TEGroupedMLP.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402

_NO_KERNEL = {
    # views and metadata: no kernel on CUDA
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::as_strided", "aten::t",
    "aten::transpose", "aten::permute", "aten::expand", "aten::unsqueeze", "aten::squeeze",
    "aten::slice", "aten::select", "aten::detach", "aten::alias", "aten::split",
    "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::narrow", "aten::view_as",
    "aten::expand_as", "aten::numpy_T", "aten::lift_fresh", "aten::_reshape_alias",
    "aten::unflatten", "aten::flatten", "aten::contiguous", "aten::result_type",
    "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense", "aten::size", "aten::stride",
    "aten::dim", "aten::set_", "aten::resolve_conj", "aten::resolve_neg", "aten::to",
    "aten::_to_copy", "aten::type_as", "aten::detach_", "aten::requires_grad_",
    # allocations: the caching allocator, no kernel
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resize_",
    "aten::new_empty", "aten::new_empty_strided", "aten::_has_compatible_shallow_copy_type",
}


_MASK: list = [None]  # the causal mask, [1, 1, s, s], True = masked


def _shim_cuda() -> None:
    """Let Megatron-Core's CUDA-stream calls run on a CPU-only torch (no-ops)."""

    class _Event:
        def synchronize(self) -> None:
            return None

        def wait(self, stream=None) -> None:
            return None

    class _Stream:
        def wait_stream(self, other) -> None:
            return None

        def record_event(self, event=None) -> _Event:
            return _Event()

        def synchronize(self) -> None:
            return None

    one = _Stream()
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.Stream = lambda *a, **k: one
    torch.cuda.current_stream = lambda *a, **k: one
    torch.cuda.stream = lambda s=None: contextlib.nullcontext()


def _init_parallel() -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=0,
                                world_size=1)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             pipeline_model_parallel_size=1,
                                             expert_model_parallel_size=1)
    # The CUDA RNG tracker's fork (dropout 0 here) saves and restores CUDA RNG states: a no-op.
    from megatron.core.tensor_parallel.random import get_cuda_rng_tracker

    get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    # Without TE, moe_utils never binds te_general_gemm (0.16.1 imports it under a try without an
    # except-branch default), and the router's gating linear reads it: bind the torch fallback.
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None


def build_layer(hidden: int, experts: int | None, top_k: int = 8):
    """One TransformerLayer, local spec, Qwen3-30B-A3B's structure at width ``hidden``."""
    import torch.nn.functional as F
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    # Qwen3-30B-A3B: hidden 2048, 32 heads x 128, 4 KV groups, expert FFN 768 (3/8 of hidden),
    # dense-equivalent FFN 6144 (3 x hidden) for the contrast layer.
    heads, groups = 8, 1
    kw = dict(
        num_layers=1, hidden_size=hidden, num_attention_heads=heads, num_query_groups=groups,
        kv_channels=hidden // heads, ffn_hidden_size=3 * hidden, normalization="RMSNorm",
        gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False,
        qk_layernorm=True, hidden_dropout=0.0, attention_dropout=0.0,
        use_cpu_initialization=True, params_dtype=torch.float32, bf16=False,
        gradient_accumulation_fusion=False, bias_activation_fusion=False,
        masked_softmax_fusion=False, persist_layer_norm=False, bias_dropout_fusion=False,
        apply_rope_fusion=False,
    )
    if experts:
        kw.update(
            num_moe_experts=experts, moe_router_topk=top_k,
            moe_ffn_hidden_size=max(8, (3 * hidden) // 8),
            moe_token_dispatcher_type="alltoall", moe_router_load_balancing_type="aux_loss",
            moe_aux_loss_coeff=1e-3, moe_router_force_load_balancing=True,
            moe_grouped_gemm=False, moe_permute_fusion=False,
        )
    cfg = TransformerConfig(**kw)
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                    qk_layernorm=True, normalization="RMSNorm")
    return build_module(spec, config=cfg, layer_number=1)


def _fwd_bwd(layer, x):
    out = layer(x, attention_mask=_MASK[0])
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    return out


def count_ops(layer, x) -> dict:
    """Aten ops in one forward and one backward (torch.profiler, CPU activities)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    res = {}
    for phase in ("forward", "backward"):
        x1 = x.detach().requires_grad_(True)
        if phase == "backward":
            out = layer(x1, attention_mask=_MASK[0])
            out = out[0] if isinstance(out, tuple) else out
            loss = out.sum()
            with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("phase"):
                loss.backward()
        else:
            with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("phase"):
                out = layer(x1, attention_mask=_MASK[0])
            out = out[0] if isinstance(out, tuple) else out
            out.sum().backward()
        ev = [e for e in prof.events() if e.name.startswith("aten::")]
        top = [e for e in ev if not (e.cpu_parent is not None
                                     and _aten_ancestor(e.cpu_parent))]
        kernels: list = []
        for e in top:
            _kernels_under(e, kernels)
        by_name: dict[str, int] = {}
        for e in kernels:
            by_name[e.name] = by_name.get(e.name, 0) + 1
        res[phase] = {"aten_ops": len(ev), "top_level_aten_ops": len(top),
                      "would_be_kernels": len(kernels),
                      "kernels_by_op": dict(sorted(by_name.items(), key=lambda kv: -kv[1]))}
    return res


def _kernels_under(e, out: list) -> bool:
    """Append to ``out`` the would-be kernels in ``e``'s subtree: the compute ops (not in
    ``_NO_KERNEL``) none of whose descendants is one; True when the subtree holds one."""
    below = False
    for c in e.cpu_children:
        below |= _kernels_under(c, out)
    if below:
        return True
    if e.name.startswith("aten::") and e.name not in _NO_KERNEL:
        out.append(e)
        return True
    return False


def _aten_ancestor(e) -> bool:
    while e is not None:
        if e.name.startswith("aten::"):
            return True
        e = e.cpu_parent
    return False


def _timed_passes(layer, x, reps: int, clock=time.perf_counter,
                  loss_in_forward: bool = False) -> tuple[list, list]:
    """Forward and backward seconds of ``reps`` passes on ``clock``, after two warm-up passes.

    The loss (one sum) counts in the forward when ``loss_in_forward``, else in the backward.
    """
    fw, bw = [], []
    for i in range(reps + 2):
        x1 = x.detach().requires_grad_(True)
        t0 = clock()
        out = layer(x1, attention_mask=_MASK[0])
        out = out[0] if isinstance(out, tuple) else out
        loss = out.sum() if loss_in_forward else out
        t1 = clock()
        (loss if loss_in_forward else loss.sum()).backward()
        t2 = clock()
        layer.zero_grad(set_to_none=True)
        if i >= 2:
            fw.append(t1 - t0)
            bw.append(t2 - t1)
    return fw, bw


def time_layer(layer, x, reps: int) -> dict:
    """Median wall seconds of forward, backward and both, profiler off."""
    fw, bw = _timed_passes(layer, x, reps)
    tot = [a + b for a, b in zip(fw, bw, strict=True)]
    return {"forward_s": statistics.median(fw), "backward_s": statistics.median(bw),
            "fwd_bwd_s": statistics.median(tot), "fwd_bwd_min_s": min(tot),
            "fwd_bwd_max_s": max(tot), "reps": reps}


def _expert_hits(layer, x) -> int:
    """Experts that receive at least one token in one forward (all, force-balanced)."""
    mlp = layer.mlp
    seen = {}

    def hook(_m, args, _out):
        seen["t"] = args[1] if len(args) > 1 else None

    h = mlp.experts.register_forward_hook(hook)
    layer(x.detach(), attention_mask=_MASK[0])
    h.remove()
    tpe = seen.get("t")
    return int((torch.as_tensor(tpe) > 0).sum()) if tpe is not None else -1


def _row(name: str, experts: int | None, hidden: int, seq: int, batch: int, reps: int,
         counts: bool) -> dict:
    _MASK[0] = torch.triu(torch.ones(seq, seq), diagonal=1).bool()[None, None]
    torch.manual_seed(0)
    layer = build_layer(hidden, experts)
    x = torch.randn(seq, batch, hidden)
    row = {"layer": name, "experts": experts, "hidden": hidden, "tokens": seq * batch,
           "seq": seq, "batch": batch}
    if experts:
        row["experts_hit"] = _expert_hits(layer, x)
    if counts:
        row.update(count_ops(layer, x))
    row.update(time_layer(layer, x, reps))
    line = f"{name:>8} h={hidden:<3} tokens={seq * batch:<5}"
    if counts:
        f, b = row["forward"], row["backward"]
        line += (f" fwd {f['aten_ops']:>5} aten / {f['would_be_kernels']:>5} kernels,"
                 f" bwd {b['aten_ops']:>5} aten / {b['would_be_kernels']:>5} kernels |")
    line += (f" host fwd {row['forward_s'] * 1e3:6.2f} ms bwd {row['backward_s'] * 1e3:6.2f} ms"
             f" fwd+bwd {row['fwd_bwd_s'] * 1e3:6.2f} ms (min {row['fwd_bwd_min_s'] * 1e3:.2f},"
             f" max {row['fwd_bwd_max_s'] * 1e3:.2f})")
    if experts:
        line += f" experts hit {row['experts_hit']}"
    print(line, flush=True)
    return row


# The parts of an MoE layer that Megatron-Core's TE-scoped CUDA graphs capture (cuda_graph_scope,
# Megatron-LM PR 1917; TransformerLayer at 0.16.1): ``attn`` the layer's _forward_attention (input
# norm, attention, residual), ``moe_router`` _forward_mlp up to MoELayer.router (the pre-MLP norm
# and MoELayer.route), ``moe_preprocess`` MoELayer.preprocess (the dispatcher's
# dispatch_preprocess). Each is wrapped on the built layer instance.
_SCOPES = (("_forward_attention", None, "attn"), ("_forward_pre_mlp_layernorm", None, "moe_router"),
           ("route", "mlp", "moe_router"), ("preprocess", "mlp", "moe_preprocess"))


def _nodes(roots) -> set:
    """Autograd nodes reachable from ``roots`` (tensors or nodes) along next_functions."""
    seen, todo = set(), [getattr(r, "grad_fn", r) for r in roots]
    while todo:
        n = todo.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        todo.extend(f for f, _ in n.next_functions)
    return seen


def _tensors(obj) -> list:
    if torch.is_tensor(obj):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def scope_split(layer, x, reps: int) -> dict:
    """CPU seconds of each capturable scope in one forward and one backward, and the layer's.

    Thread CPU time (``time.thread_time``), not wall time, so that other processes on a shared
    machine do not count. Forward: the CPU seconds inside each scope's methods. Backward: every
    autograd node of the pass gets a pre-hook and a hook that time its own run on the calling
    thread (the CPU backward runs there); a node belongs to the scope whose forward made it (the
    nodes reachable from the scope's outputs and not from its inputs); a scope's backward seconds
    are its nodes' share of all node time times the layer's backward CPU seconds; its forward
    share is its CPU seconds over the same pass's layer forward (less the wrappers' own
    bookkeeping). Medians of
    ``reps`` passes after 2 warm-ups; the layer's own forward and backward CPU seconds are timed
    in separate passes without the wrappers and hooks (which cost host time of their own)."""
    spent: dict[str, float] = {}
    made: dict[str, set] = {}
    originals = []
    for name, owner, scope in _SCOPES:
        obj = getattr(layer, owner) if owner else layer
        fn = getattr(obj, name)
        originals.append((obj, name, fn))

        def wrapped(*a, _fn=fn, _scope=scope, **k):
            t_in = time.thread_time()
            before = _nodes([t for t in _tensors((a, k)) if t.requires_grad])
            t0 = time.thread_time()
            out = _fn(*a, **k)
            t1 = time.thread_time()
            spent[_scope] = spent.get(_scope, 0.0) + t1 - t0
            after = _nodes([t for t in _tensors(out) if t.requires_grad])
            made.setdefault(_scope, set()).update(after - before)
            # the bookkeeping's own time, taken out of the instrumented layer forward
            spent["_bookkeeping"] = (spent.get("_bookkeeping", 0.0) + (t0 - t_in)
                                     + time.thread_time() - t1)
            return out

        setattr(obj, name, wrapped)
    fwd: dict[str, list] = {}
    share: dict[str, list] = {}
    fshare: dict[str, list] = {}
    try:
        for i in range(reps + 2):
            spent.clear()
            made.clear()
            x1 = x.detach().requires_grad_(True)
            t0 = time.thread_time()
            out = layer(x1, attention_mask=_MASK[0])
            out = out[0] if isinstance(out, tuple) else out
            loss = out.sum()
            layer_f = time.thread_time() - t0 - spent.get("_bookkeeping", 0.0)
            node_s: dict = {}
            started: dict = {}
            handles = []
            for n in _nodes([loss]):
                def pre(*_a, _n=n, _st=started):
                    _st[_n] = time.thread_time()

                def post(*_a, _n=n, _st=started, _ns=node_s):
                    _ns[_n] = _ns.get(_n, 0.0) + time.thread_time() - _st[_n]

                handles.append(n.register_prehook(pre))
                handles.append(n.register_hook(post))
            loss.backward()
            for h in handles:
                h.remove()
            layer.zero_grad(set_to_none=True)
            if i < 2:
                continue
            total = sum(node_s.values()) or 1.0
            for sc in {s for _, _, s in _SCOPES}:
                fwd.setdefault(sc, []).append(spent.get(sc, 0.0))
                fshare.setdefault(sc, []).append(spent.get(sc, 0.0) / layer_f)
                mine = made.get(sc, set())
                share.setdefault(sc, []).append(sum(v for k, v in node_s.items() if k in mine) / total)
    finally:
        for obj, name, fn in originals:
            setattr(obj, name, fn)
    # the layer itself, un-instrumented (no wrappers, no hooks), on the same clock
    whole_f, whole_b = _timed_passes(layer, x, reps, clock=time.thread_time,
                                     loss_in_forward=True)
    scopes = sorted({s for _, _, s in _SCOPES})
    back = statistics.median(whole_b)
    sh = {s: statistics.median(share[s]) for s in scopes}
    return {"layer_forward_s": statistics.median(whole_f), "layer_backward_s": back,
            "scope_forward_s": {s: statistics.median(fwd[s]) for s in scopes},
            "scope_forward_share": {s: statistics.median(fshare[s]) for s in scopes},
            "scope_backward_share": sh,
            "scope_backward_s": {s: sh[s] * back for s in scopes},
            "clock": "thread_time"}

def add1_s(n: int = 20000) -> float:
    """Seconds per ``x + 1`` on a 1-element CPU tensor (the add1 micro-benchmark behind planner.toml
    [host] op_launch_s): median of 5 loops of ``n``, to place this CPU against that source's."""
    x = torch.ones(1)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            x + 1
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--experts", default="128,16,8", help="comma list of expert counts")
    ap.add_argument("--json", default=None)
    ap.add_argument("--scopes", action="store_true",
                    help="only the CPU seconds of the CUDA-graph scopes (attn, moe_router, "
                         "moe_preprocess) per MoE layer at 128 tokens and their shares of the "
                         "layer's, for each --experts")
    a = ap.parse_args(argv)
    try:
        experts = [int(e) for e in a.experts.split(",")]
    except ValueError:
        experts = []
    if a.hidden < 16 or a.hidden % 8 or a.reps < 1 or not experts or min(experts) < 8:
        print("bench_moe_host: --hidden must be a multiple of 8 >= 16, --reps >= 1, --experts a "
              "comma list of integers >= 8 (top-8)", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    _shim_cuda()
    _init_parallel()
    from megatron.core import __version__ as mcore_version

    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "add1_s": add1_s(),
              "machine": f"{platform.processor() or platform.machine()}, "
                         f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
              "torch": torch.__version__, "megatron_core": mcore_version,
              "hidden": a.hidden, "reps": a.reps, "layers": []}
    if a.scopes:
        _MASK[0] = torch.triu(torch.ones(16, 16), diagonal=1).bool()[None, None]
        result["scopes"] = []
        for e in experts:
            torch.manual_seed(0)
            row = {"experts": e, "tokens": 128, "hidden": a.hidden,
                   **scope_split(build_layer(a.hidden, e), torch.randn(16, 8, a.hidden), a.reps)}
            result["scopes"].append(row)
            f, b, sh = row["scope_forward_s"], row["scope_backward_s"], row["scope_backward_share"]
            print(f"moe-{e:<4} layer fwd {row['layer_forward_s'] * 1e3:6.3f} ms bwd "
                  f"{row['layer_backward_s'] * 1e3:6.3f} ms | "
                  + " | ".join(f"{k} fwd {f[k] * 1e3:.3f} ms ({row['scope_forward_share'][k]:.1%}) "
                               f"bwd {b[k] * 1e3:.3f} ms ({sh[k]:.1%} of node time)"
                               for k in sorted(f)),
                  flush=True)
        print(f"{result['date']}; {result['machine']}; torch {result['torch']}, megatron-core "
              f"{result['megatron_core']}; median of {a.reps} after 2 warm-ups, one thread; "
              f"add1 {result['add1_s'] * 1e6:.2f} us")
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(result, fh, indent=1)
        return 0
    # 4096 tokens (sequence 32 x batch 128): op counts and host time with the CPU's arithmetic;
    # 128 tokens (16 x 8; force-balanced top-8 still hits all 128 experts, 8 rows each): the
    # same ops with little arithmetic, the host figure.
    cases = [("dense", None)] + [(f"moe-{e}", e) for e in experts]
    for name, e in cases:
        result["layers"].append(_row(name, e, a.hidden, 32, 128, a.reps, True))
    for name, e in cases:
        result["layers"].append(_row(name, e, a.hidden, 16, 8, a.reps, True))
    e0 = experts[0]
    result["layers"].append(_row(f"moe-{e0}", e0, 2 * a.hidden, 16, 8, a.reps, False))
    # Host seconds of an MoE layer as fixed + per local expert (least squares over the 128-token
    # MoE rows at --hidden): the fixed part is everything but the experts' module loop.
    small = [r for r in result["layers"] if r["experts"] and r["tokens"] == 128
             and r["hidden"] == a.hidden]
    if len(small) >= 2:
        fit = {}
        for key in ("forward_s", "backward_s"):
            n = [float(r["experts"]) for r in small]
            y = [r[key] for r in small]
            nm, ym = statistics.fmean(n), statistics.fmean(y)
            slope = sum((u - nm) * (v - ym) for u, v in zip(n, y, strict=True)) / sum((u - nm) ** 2 for u in n)
            fit[key] = {"fixed_s": ym - slope * nm, "per_expert_s": slope}
        for ph in ("forward", "backward"):
            n = [float(r["experts"]) for r in small]
            y = [float(r[ph]["would_be_kernels"]) for r in small]
            nm, ym = statistics.fmean(n), statistics.fmean(y)
            slope = sum((u - nm) * (v - ym) for u, v in zip(n, y, strict=True)) / sum((u - nm) ** 2 for u in n)
            fit[ph + "_kernels"] = {"fixed": ym - slope * nm, "per_expert": slope}
        result["fit"] = fit
        f, b = fit["forward_s"], fit["backward_s"]
        print(f"MoE layer host = fixed + per local expert: forward {f['fixed_s'] * 1e3:.3f} ms + "
              f"{f['per_expert_s'] * 1e6:.1f} us x n, backward {b['fixed_s'] * 1e3:.3f} ms + "
              f"{b['per_expert_s'] * 1e6:.1f} us x n; kernels forward "
              f"{fit['forward_kernels']['fixed']:.1f} + {fit['forward_kernels']['per_expert']:.2f}"
              f" x n, backward {fit['backward_kernels']['fixed']:.1f} + "
              f"{fit['backward_kernels']['per_expert']:.2f} x n")
    print(f"{result['date']}; {result['machine']}; torch {result['torch']}, megatron-core "
          f"{result['megatron_core']}; median of {a.reps} after 2 warm-ups, one thread; "
          f"add1 (x + 1, 1-element CPU tensor) {result['add1_s'] * 1e6:.2f} us")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
