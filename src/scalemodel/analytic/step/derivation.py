"""The worked derivation of one shown layout, part by part, checked against the step terms."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...specs.sources import cite
from .attention import attention_efficiency, curve_for, part_ratio
from .comm import cp_p2p_net_sm_share
from .config import FUSED_ATTENTION, constants, moe_dispatcher, profile_value
from .gemm import gemm_ceiling, gemm_efficiency
from .shapes import model_flops_per_token, model_shapes

if TYPE_CHECKING:
    from ...derive import Derivation
    from ..planner import PlanResult, PlanRow


def _sustained(d: Derivation, gpu: Any) -> None:
    if gpu.sustained_basis == "gemm":
        d.given(f"{gpu.id}: sustained over short-burst throughput of large GEMMs (measured on "
                "this GPU's die)", "f_clk", gpu.sustained_fraction, "1",
                gpu.source_of("sustained_gemm_ratio"),
                note="measured with every GPU of the node busy; eta_0 comes from short runs, a "
                     "training step is one long power-saturated run")
    elif gpu.sustained_basis == "clock":
        d.given(f"{gpu.id}: clock sustained under dense math over the clock its peak is quoted "
                "at", "f_clk", gpu.sustained_fraction, "1", gpu.source_of("sustained_clock_hz"),
                note=f"{gpu.sustained_clock_hz / 1e9:.3f} / {gpu.peak_clock_hz / 1e9:.2f} GHz; "
                     "eta_0 comes from short runs at the quoted clock")
    else:
        d.given(f"{gpu.id}: sustained share of a burst GEMM rate", "f_clk", 1.0, "1",
                cite("scalemodel-assumption"),
                note="not measured for this GPU (no sustained_gemm_ratio or sustained clock in "
                     "its TOML): 1 assumed, so its GEMMs may be priced fast")


def fp8_recipe(job: Any, gpu: Any) -> tuple[str, float]:
    """(fp8 scaling recipe, its GEMM rate over the per-tensor kernel) of a job on a GPU; ("",
    1) in bf16."""
    if job.precision != "fp8":
        return "", 1.0
    from .config import fp8_scaling
    from .gemm import fp8_scaling_rate

    scaling = fp8_scaling(job, gpu.id)[0]
    return scaling, fp8_scaling_rate(gpu.arch, scaling)


_RECIPE_WORDS = {"delayed": "per-tensor delayed scaling (scale from the amax history)",
                 "current": "per-tensor current scaling (amax of the tensor itself)",
                 "blockwise": "block scaling (1x128 activation tiles, 128x128 weight blocks)",
                 "mxfp8": "MXFP8 (32-element blocks, E8M0 scales)"}


def _fp8_recipe_part(d: Derivation, job: Any, gpu: Any, scaling: str, rate: float) -> None:
    """The fp8 scaling recipe: where it comes from, its GEMM rate and its cast bytes."""
    from ...specs.kernels import kernels
    from .config import cast_bytes, fp8_scaling

    src = fp8_scaling(job, gpu.id)[1]
    said = ("--fp8-recipe" if src == "--fp8-recipe"
            else f"the {job.framework_id or 'default'} profile for {job.model.id} on {gpu.id}")
    d.note(f"fp8 recipe: {scaling}, {_RECIPE_WORDS[scaling]}, from {said}"
           + (f" (source {src}; scalemodel specs sources lists it)"
              if src and src != "--fp8-recipe" else "") + ".")
    b, b_src = cast_bytes(scaling)
    bw, bw_src = cast_bytes(scaling, weights=True)
    d.given(f"HBM bytes per element of one {scaling} fp8 cast and its transpose (activations, "
            "gradients)", "b_cast", b, "B", cite(b_src),
            note="read 2 + write 1 + 1; current scaling reads the input once more for its amax; "
                 "block scales add 4 B per 128 (blockwise) or 1 B per 32 (mxfp8) on each copy")
    d.given(f"HBM bytes per weight of the once-per-step {scaling} weight cast", "b_wcast", bw,
            "B", cite(bw_src))
    from .config import profile_value

    kern = profile_value(job, "fp8_block_gemm", "") if scaling == "blockwise" else ""
    if kern:
        from .gemm import block_gemm_rates

        e = kernels()["fp8_block_gemm"][kern][gpu.arch]
        ks, rs = block_gemm_rates(kern, gpu.arch)
        d.note(f"block GEMMs: the framework's own {kern} kernel, measured on "
               f"{e.get('measured_on', '?')} ({cite(e['source'])}): rate over the per-tensor fp8 "
               "GEMM by reduction length K, interpolated in log K: "
               + ", ".join(f"K {k:g} {r:.2f}" for k, r in zip(ks, rs, strict=True))
               + " (k_scale below is Transformer Engine's, not used for these GEMMs).")
    if rate != 1.0:
        e = kernels()["fp8_gemm"][gpu.arch]
        d.given(f"{scaling} fp8 GEMM rate over the per-tensor fp8 GEMM on {gpu.arch} "
                f"(measured on {e.get('measured_on', '?')})", "k_scale", rate, "1",
                cite(e["source"]), note=str(e.get("note", "")))


def gemm_part(d: Derivation, res: PlanResult, row: PlanRow) -> None:
    """The GEMM efficiency: ceiling, sustained share, fp8 ratio, the MLP GEMM's shape."""
    from ...specs.kernels import gemm_entry

    lay, job, gpu, m = row.layout, res.job, res.cluster.gpu, res.job.model
    g = constants()["gemm"]
    tile = gemm_entry(gpu.arch)
    T = lay["micro_batch"] * job.seq_len / lay["cp"]
    scaling, rate = fp8_recipe(job, gpu)
    e_mlp = float(gemm_efficiency(np.float64(T), np.float64(model_shapes(m).up_k * m.ffn
                                                            / lay["tp"]),
                                  np.float64(m.hidden), gpu, job.precision, rate))
    if gpu.gemm_burst_efficiency:
        d.given(f"{gpu.id}: GEMM ceiling (shape-free, burst)", "eta_0", gemm_ceiling(gpu), "1",
                gpu.source_of("gemm_burst_efficiency"),
                note="gpus.toml gemm_burst_efficiency: best bf16 matmul of a shape search (short "
                     "runs) over the dense bf16 peak")
    else:
        d.given("GEMM ceiling (shape-free, burst)", "eta_0", gemm_ceiling(gpu), "1",
                cite(g["anchor_source"]),
                note=f"{gpu.id} has no measured gemm_burst_efficiency: " + g["anchor_note"])
    _sustained(d, gpu)
    k8 = gpu.gemm_dtype_factor(job.precision)
    if k8 != 1.0:
        d.given(f"{gpu.id}: {job.precision} GEMM efficiency over bf16's (each against its own "
                "peak)", "k_fp8", k8, "1", gpu.source_of("fp8_gemm_ratio"),
                note="the output head, an MoE router and the attention matmuls stay bf16")
    if job.precision == "fp8":
        _fp8_recipe_part(d, job, gpu, scaling, rate)
    d.given(f"efficiency of the MLP up-projection GEMM ({T:.0f} x {m.hidden})", "eta_mlp",
            e_mlp, "1", cite(tile.data["source"]),
            note="eta_0 x f_clk" + (" x k_fp8" if k8 != 1.0 else "")
                 + (" x k_scale" if rate != 1.0 else "")
                 + f" x tile padding and wave quantization on {gpu.sm_count} SMs, or the HBM "
                 "roofline when thin")
    if tile.borrowed_from:
        d.note(f"Borrowed GEMM tile: {gpu.arch} uses {tile.borrowed_from}'s ({tile.borrow_note})")


def attention_part(d: Derivation, res: PlanResult, row: PlanRow) -> None:
    """The fused attention kernel's efficiencies at the lengths its calls see, from its curve
    (kernels.toml), naming a borrowed curve and a head dim the curve was not measured at."""
    job, gpu, m = res.job, res.cluster.gpu, res.job.model
    if job.attention not in FUSED_ATTENTION:
        return
    a = constants()["attention"]
    hd = model_shapes(m).qk_dim / m.n_heads
    c = curve_for(job.attention, gpu, hd)
    src = "; ".join(cite(k) for k in c.sources)
    S, cp = job.seq_len, row.layout["cp"]

    def eff(length: float, **kw: Any) -> float:
        return attention_efficiency(gpu, length, kind=job.attention, head_dim=hd, **kw)

    d.given(f"{c.label} forward efficiency on {gpu.arch}, causal call of {S // cp:,} tokens",
            "eta_af", eff(S / cp), "1", src, note=" ".join(n for n in c.notes if n))
    d.given("its backward efficiency, same call", "eta_ab", eff(S / cp, backward=True), "1", src)
    for line in c.borrowed:
        d.note(f"Borrowed curve: {line}.")
    if c.burst:
        d.note(f"The curve was timed at burst clocks (kernels.toml clocks = \"burst\"): both "
               f"efficiencies keep {gpu.sustained_fraction:.3f} of its rate, the GPU's sustained "
               f"share (gpus.toml sustained_gemm_ratio, measured on GEMMs; assumed for attention).")
    pr = part_ratio(c.family, gpu.id)
    if pr is not None:
        x = math.log2(max(S / cp, 1.0))
        rf = float(np.interp(x, pr["x"], pr["fwd_causal"]))
        rb = float(np.interp(x, pr["x"], pr["bwd_causal"]))
        d.note(f"{gpu.id} is timed against {pr['reference']} with one kernel build "
               f"(kernels.toml [attention_part.{c.family}.{gpu.id}], {cite(pr['source'])}): both "
               f"efficiencies include its measured speed-up at this length, {rf:.3f} forward and "
               f"{rb:.3f} backward (reference time over this part's).")
    if abs(math.log2(hd / c.head_dim)) > 1e-9:
        d.note(f"The curve was measured at head dim {c.head_dim:g}; {m.id} attends with head dim "
               f"{hd:g} (the nearest measured head dim is used).")
    if cp > 1 and not profile_value(job, "cp_load_balance", True):
        d.given(f"unmasked ring-attention calls ({S // cp:,} x {S // cp:,} tokens, contiguous "
                "chunks: the last rank runs cp - 1 of them), forward efficiency", "eta_ar",
                eff(S / cp, causal=False), "1", src,
                note="frameworks.toml cp_load_balance false: no head-tail split")
    elif cp > 1:
        d.given(f"unmasked ring-attention calls ({S / cp / math.sqrt(2):,.0f}-token "
                "geometric mean), forward efficiency", "eta_ar",
                eff(S / cp / math.sqrt(2), causal=False), "1", cite(a["cp_source"]),
                note=a["cp_note"])


def _dispatch_kernel_note(res: Any) -> str:
    """Where a per-destination dispatch's network stage is priced at its kernel's measured rate
    (step/comm.py network_stage_time; collectives.toml [ep_dispatch_kernel])."""
    from .config import ep_dispatch_kernel

    k = ep_dispatch_kernel(res.job, res.cluster.gpu.id)
    if k is None:
        return ""
    name = {"deepep": "DeepEP's normal kernels'", "hybridep": "Hybrid-EP's"}[k]
    return (f"; one copy per node reached across nodes and one per GPU reached over NVLink, "
            f"each stage at no more than {name} measured rate (bytes counted with the own "
            "node's / rank's copy, as its benchmarks count them; collectives.toml "
            f"[ep_dispatch_kernel.{k}], [ep_dispatch_nvlink.{k}])")


def _moe_memory_note(job: Any, gpu: Any) -> str:
    """What an MoE layer adds to the memory-bound kernels: the token permutation, under fp8
    Megatron's quantisation padding around the grouped GEMMs (layers.fp8_padding_bytes), and
    what TE's fused MXFP8 grouped MLP takes off (elementwise.fused_grouped_mlp_saving)."""
    from .config import ep_dispatch, fp8_scaling, moe_fused_grouped_mlp

    gpu_id = gpu.id
    pad = (job.precision == "fp8"
           and profile_value(job, "moe_fp8_padding", "none") == "grouped_mlp"
           and moe_dispatcher(job, gpu_id) != "flex-hybridep")
    perm = ("; the MoE token permutation (the received rows expanded to one per local expert and "
            "merged back)" if ep_dispatch(job, gpu_id) == "per_destination" else
            "; the MoE token permutation (permute, sort by expert, unpermute)")
    fused = (job.precision == "fp8"
             and moe_fused_grouped_mlp(job, gpu, fp8_scaling(job, gpu_id)[0]))
    perm += ("; less the routed experts' SwiGLU and the casts around it, fused into the grouped "
             "GEMMs (TE's CuTe DSL MXFP8 grouped MLP, frameworks.toml moe_recipes "
             "fused_grouped_mlp: 8 bytes per routed width element forward, 12 backward)"
             if fused else "")
    return (perm
            + (" and TEGroupedMLP's fp8 padding of the expert rows and unpadding of their output "
               "(frameworks.toml moe_fp8_padding)" if pad else ""))


def _profile_source(job: Any, key: str) -> str:
    """The source key the job's framework profile gives for one of its fields."""
    from ...specs.frameworks import get_framework

    return get_framework(getattr(job, "framework_id", None)).sources.get(key, "")


def compute_part(d: Derivation, res: PlanResult, row: PlanRow) -> None:
    """Compute per micro-batch on the slowest stage: attention and memory-bound kernels."""
    v, lay, job, gpu, m = row.values, row.layout, res.job, res.cluster.gpu, res.job.model
    mb = v.microbatches
    stage = ("first", "middle", "last")[int(v.slow_stage)] if lay["pp"] > 1 else "only"
    g, ng = constants()["gemm"], constants()["nongemm"]
    d.given(f"compute per micro-batch on the slowest ({stage}) stage", "t_c",
            v.compute_s / mb, "s",
            note="every GEMM forward + dgrad + wgrad at its shape's efficiency, attention, "
                 "memory-bound kernels, recompute")
    d.given("  of which attention kernels", "t_att", v.attention_s / mb, "s",
            note="causal half of the score FLOPs at the efficiencies above; backward "
                 f"{constants()['attention']['backward_flop_factor']:g}x"
            if job.attention in FUSED_ATTENTION
            else "unfused: batched GEMMs and score passes in HBM")
    d.given("  of which memory-bound kernels (roofline on HBM bytes)", "t_ng",
            v.nongemm_s / mb, "s", cite(ng["loss_source"]),
            note="norms" + (" (and QK-norm)" if m.qk_norm else "")
                 + ", residual adds, activation function, rotary, dropout masks, fp8 casts "
                 f"and the loss ({ng['loss_fwd_bytes_per_logit']} + "
                 f"{ng['loss_bwd_bytes_per_logit']} bytes per logit) at "
                 f"{g['hbm_efficiency']} of {gpu.hbm_bytes_per_s / 1e12:.2f} TB/s"
                 + ("; eager mode: RMSNorm, rotary, SwiGLU op by op, K/V copied per query head "
                    "(planner.toml [nongemm] eager_*)" if job.kernels == "eager" else "")
                 + ("; includes the gradient-accumulation pass t_acc" if not job.grad_accum_fusion
                    else "")
                 + (_moe_memory_note(job, gpu) if m.is_moe else ""))
    if float(np.max(v.fsdp_copy_s)) > 0:
        fc = profile_value(job, "fsdp_copy_bytes")
        d.given("  of which FSDP2's parameter copy-out and gradient copy-in on the compute "
                "stream", "t_fsdp", v.fsdp_copy_s / mb, "s",
                cite(_profile_source(job, "fsdp_copy_bytes")),
                note=f"{fc['gather_out']:g} bytes per unsharded local parameter after each "
                     f"all-gather, {fc['reduce_in']:g} before each reduce-scatter "
                     "(frameworks.toml fsdp_copy_bytes)")
    pass_bytes = profile_value(job, "unsharded_grad_pass_bytes", 0)
    if not job.grad_accum_fusion:
        d.given("  of which adding weight gradients into the fp32 main gradient (no "
                "accumulation fusion)", "t_acc", v.grad_acc_s / mb, "s",
                cite(ng["grad_accum_source"]),
                note=f"{ng['grad_accum_bytes']} bytes per local parameter per micro-batch"
                     + (f", plus the framework's {pass_bytes:g} (frameworks.toml "
                        "unsharded_grad_pass_bytes, "
                        f"{_profile_source(job, 'unsharded_grad_pass_bytes')})"
                        if pass_bytes else ""))
    if pass_bytes and job.grad_accum_fusion:
        d.given("  of which the framework's passes over the unsharded gradient", "t_acc",
                v.grad_acc_s / mb, "s",
                cite(_profile_source(job, "unsharded_grad_pass_bytes")),
                note=f"{pass_bytes:g} bytes per local parameter per micro-batch "
                     "(frameworks.toml unsharded_grad_pass_bytes)")


def _straggler_note(res: PlanResult, lay: dict) -> str:
    """The EP straggler of the run's routing (step/imbalance.py), as the note says it."""
    from .config import profile_value
    from .imbalance import rank_violation

    job, m = res.job, res.job.model
    if profile_value(job, "moe_routing", "learned") != "force_balanced":
        return "; no EP straggler priced (learned routing: no per-rank spread measured)"
    tokens = lay["ep"] * lay["etp"] * lay["micro_batch"] * job.seq_len / lay["cp"] / lay["tp"]
    v = rank_violation(m.n_experts, m.top_k, lay["ep"], tokens, m.expert_groups,
                       m.groups_per_token)
    return (f"; the slowest EP rank's copies at 1 + v = {1 + v:.4f} x the mean (force-balanced "
            "random routing, step/imbalance.py), its expert GEMMs too")


def layer_comm_part(d: Derivation, res: PlanResult, row: PlanRow) -> None:
    """Exposed TP, CP and EP collectives per micro-batch, and the micro-batch time."""
    v, lay, m = row.values, row.layout, res.job.model
    mb = v.microbatches
    d.given("exposed TP/SP collectives per micro-batch", "t_tp", v.tp_s / mb, "s",
            note="4 forward + 6 backward all-gather/reduce-scatter of s b h per layer, priced by "
                 "the collectives engine (NCCL-like choice)")
    cp_mode = profile_value(res.job, "cp_exchange", "ring")
    cp_hid = ("; the all-gather exposed in full, nothing beside it (cp_gather_overlap false)"
              if cp_mode == "all_gather"
              and not profile_value(res.job, "cp_gather_overlap", True) else "")
    if (cp_mode == "all_gather" and res.job.kernels == "fused"
            and not profile_value(res.job, "cp_compiled_overlap", True)):
        cp_hid = ("; under torch.compile every gather and dK/dV transfer is waited where it is "
                  "issued, nothing beside it (cp_compiled_overlap false)")
    d.given("exposed ring-attention (CP) traffic per micro-batch", "t_cp", v.cp_s / mb, "s",
            note=f"the profile's K/V exchange (frameworks.toml cp_exchange: {cp_mode}){cp_hid}")
    if m.is_moe:
        folded = lay["etp"] != lay["tp"]
        d.given("MoE all-to-all per micro-batch", "t_ep", v.ep_s / mb, "s",
                note=(f"experts whole on a rank (etp 1), EP{lay['ep']} drawn from the tp x dp x cp "
                      "ranks (MoE parallel folding): dispatch and combine only"
                      if folded else
                      f"experts split over the {lay['tp']} TP ranks (etp = tp): dispatch and "
                      "combine, then the tokens gathered over the TP group")
                + _straggler_note(res, lay) + _dispatch_kernel_note(res)
                if lay["ep"] > 1 else "")
    else:
        d.given("MoE all-to-all per micro-batch (dense model)", "t_ep", 0.0, "s")
    host = constants()["host"]
    d.given("host time exposed per micro-batch: launches after the MoE dispatcher's wait, and "
            "the eager MoE layer's host floor beyond its GPU time", "t_host", v.host_s / mb, "s",
            cite(host["op_launch_source"]),
            note=(f"per MoE layer max(0, launches after the wait x {host['op_launch_s'] * 1e6:g} us"
                  " - their GPU time), forward and recomputed forward; eager Megatron-Core layers "
                  f"without CUDA graphs: forward at least {host['layer_fwd_s'] * 1e3:g} ms + "
                  f"(2 n + 1) launches, backward {host['layer_bwd_s'] * 1e3:g} ms + (4 n + 1) "
                  f"launches, n local experts (measured, source {host['layer_source']}); under fp8 "
                  "+ 2 q n launches each way for TE's per-expert input quantisation, q per split "
                  f"(4 current scaling, 1 MXFP8 / blockwise, source "
                  f"{host['fp8_split_launches_source']}; step/host.py)")
            if m.is_moe else "no MoE layer")
    d.calc("one micro-batch through the slowest stage", "t_mb", "t_c + t_tp + t_cp + t_ep + t_host",
           "s", check=v.t_slow_s, rel_tol=1e-6)


def pipeline_part(d: Derivation, res: PlanResult, row: PlanRow) -> None:
    """The schedule's bubble and the send/recv between stages."""
    v, lay, job = row.values, row.layout, res.job
    d.given("micro-batches per step per pipeline", "m", v.microbatches, "1")
    d.given("pipeline stages", "p", lay["pp"], "1")
    d.given("interleaved chunks per stage", "v", lay["vpp"], "1")
    if job.schedule == "dualpipe" and lay["pp"] > 1:
        d.given("forward of one micro-batch on the slowest stage", "t_f", v.fwd_mb_s, "s")
        d.given("its weight-gradient GEMMs (the forward GEMMs' FLOPs)", "t_w", v.w_mb_s, "s")
        d.calc("DualPipe bubble, (p/2 - 1)(F&B + B - 3W) with F&B = F + B", "t_bub",
               "(p / 2 - 1) * max(0, t_f + 2 * (t_mb - t_f) - 3 * t_w)", "s",
               check=v.bubble_s, rel_tol=1e-6, source=cite("deepseek-2024-v3-dualpipe"),
               note="two parameter copies and p + 1 micro-batches of activations are held")
    else:
        d.calc("pipeline bubble", "t_bub", "(p - 1) / v * t_mb", "s", check=v.bubble_s,
               rel_tol=1e-6, source=cite("narayanan-2021-megatron"))
    d.given("exposed pipeline send/recv", "t_pp", v.pp_s, "s",
            note="of 2 (v m + p - 1) crossings on the critical path, those the framework's "
                 "P2P overlap leaves exposed (frameworks.toml pp_p2p_overlap: "
                 f"{profile_value(res.job, 'pp_p2p_overlap', 'none')})")


def _profile_source(job: Any, key: str) -> str:
    """The source key of a field of the job's framework profile ('' where none)."""
    from ...errors import BadInput
    from ...specs.frameworks import get_framework

    try:
        return str(get_framework(getattr(job, "framework_id", None)).sources.get(key, ""))
    except BadInput:
        return ""


def _expert_group_note(row: PlanRow, cl: Any, job: Any) -> str:
    """Where the expert gradients are reduced: the expert data-parallel group, its size and
    its members per NVLink domain (step/data_parallel.py expert_dp_ranks_per_node)."""
    from types import SimpleNamespace

    from .comm import expert_ranks
    from .data_parallel import expert_dp_ranks_per_node

    lay = row.layout
    tp, etp, ep = int(lay["tp"]), int(lay.get("etp", lay["tp"])), int(lay.get("ep", 1))
    if ep <= 1:
        return ""
    cp, dp = int(lay.get("cp", 1)), int(lay["dp"])
    egroup = tp * dp * cp // (etp * ep)
    if egroup <= 1:
        return ""
    c = SimpleNamespace(tp=np.array(tp), etp=np.array(etp), ep=np.array(ep), cp=np.array(cp),
                        job=job)
    r = int(expert_dp_ranks_per_node(c, np.array(egroup), cl.nvlink_domain))
    if expert_ranks(c) == "dp_split" and etp == tp and cp > 1:
        where = f"{cp} CP ranks {tp} apart, in blocks {tp * cp * ep} apart"
    else:
        where = f"{etp * ep} apart"
    return (f"; the expert gradients over their own group of {egroup} ranks, {where} "
            f"(Megatron-Core's expert data-parallel group, after EP in its rank order; "
            f"frameworks.toml expert_ranks {expert_ranks(c)}), {r} per NVLink domain")


def step_part(d: Derivation, res: PlanResult, row: PlanRow) -> None:
    """DP traffic, the optimizer, the overlap slowdown, the step, throughput and MFU."""
    v, job, cl = row.values, res.job, res.cluster
    root_note = ("; the FSDP root group (embedding, final norm, output head) in place of the "
                 "last bucket: gathered first in the forward and kept for the backward, "
                 "reduce-scattered after the backward (frameworks.toml fsdp_root_group)"
                 + (f", with {profile_value(job, 'fsdp_root_exposed_blocks', 0)} block(s) exposed "
                    "beside it (frameworks.toml fsdp_root_exposed_blocks)"
                    if profile_value(job, "fsdp_root_exposed_blocks", 0) else "")
                 if profile_value(job, "fsdp_root_group", False) and row.layout["pp"] == 1
                 and row.layout["zero"] >= 2 else "")
    d.given("exposed DP gradient / ZeRO traffic", "t_dp", v.dp_s, "s",
            note="overlapped with backward (gradients) and forward (parameters); "
                 "the last bucket and any excess stay exposed" + root_note
                 + _expert_group_note(row, cl, job))
    step_bytes = (profile_value(job, "optimizer_step_bytes", None) or {}).get(job.optimizer_id)
    extra = profile_value(job, "sharded_grad_pass_bytes", 0)
    full = profile_value(job, "unsharded_step_grad_bytes", 0)
    src = cite(_profile_source(job, "optimizer_step_bytes")) if step_bytes is not None else ""
    d.given("optimizer step", "t_opt", v.optimizer_s, "s", src,
            note=("states read and written once at HBM speed" if step_bytes is None else
                  f"{step_bytes:g} bytes per local parameter as the framework's optimizer runs "
                  "it (frameworks.toml optimizer_step_bytes)")
                 + (f"; plus {extra:g} bytes per sharded gradient element "
                    "(frameworks.toml sharded_grad_pass_bytes)" if extra else "")
                 + (f"; plus {full:g} bytes per local parameter over the whole gradient buffer "
                    "(frameworks.toml unsharded_step_grad_bytes, "
                    f"{_profile_source(job, 'unsharded_step_grad_bytes')})" if full else ""))
    ov = constants()["overlap"]
    d.given("compute slowdown beside a running collective", "sigma", ov["compute_slowdown"], "1",
            cite(ov["compute_slowdown_source"]), note=ov["compute_slowdown_note"])
    net = float(getattr(v, "cp_net_hidden_s", 0.0) or 0.0)
    s_net = cp_p2p_net_sm_share(cl.gpu)
    ep_net = float(getattr(v, "ep_net_hidden_s", 0.0) or 0.0)
    ep_slow = float(getattr(v, "ep_net_slow_s", 0.0) or 0.0)
    rest = v.overlap_s - s_net * net - ep_slow
    d.given("communication hidden behind compute per step", "t_hid",
            rest / ov["compute_slowdown"] if ov["compute_slowdown"] else 0.0, "s",
            note=("besides the transfers over the NICs below" if net > 0 or ep_net > 0 else ""))
    terms = ["sigma * t_hid"]
    if net > 0:
        d.given("ring-attention (p2p) transfers over the NICs hidden behind compute per step",
                "t_hid_cp", net, "s")
        d.given("SM share the NCCL send / receive kernels of one ring step hold", "s_cp", s_net,
                "1", cite(ov["cp_p2p_net_ctas_source"]),
                note=(f"{ov['cp_p2p_net_ctas']:g} blocks (2 channels per network peer, a send "
                      f"and a receive) of {cl.gpu.sm_count} SMs" if cl.gpu.sm_count else
                      "no SM count for this GPU: the collectives' sigma"))
        terms.append("s_cp * t_hid_cp")
    if ep_net > 0:
        d.given("all-to-all send / receive over the NICs hidden behind compute per step",
                "t_hid_ep", ep_net, "s",
                note="the all-to-all dispatcher's share of the hidden EP time; the expert-TP "
                     "gather and the metadata exchange stay with sigma")
        d.given("SM share the NCCL kernel of one all-to-all holds", "s_ep", ep_slow / ep_net,
                "1", cite(ov["ep_a2a_net_ctas_per_node_source"]),
                note=(f"{ov['ep_a2a_net_ctas_per_node']:g} blocks for each node the EP group "
                      f"spans, of {cl.gpu.sm_count} SMs" if cl.gpu.sm_count else
                      "no SM count for this GPU: the collectives' sigma"))
        terms.append("s_ep * t_hid_ep")
    d.calc("overlap slowdown", "t_ov", " + ".join(terms), "s", check=v.overlap_s,
           rel_tol=1e-6)
    d.calc("step time", "t_step", "m * t_mb + t_bub + t_pp + t_dp + t_opt + t_ov", "s",
           check=v.step_time_s, rel_tol=1e-6)
    d.given("tokens per step", "D", job.tokens_per_step, "token")
    d.calc("throughput", "X", "D / t_step", "token/s", check=v.tokens_per_s, rel_tol=1e-6)
    d.given("model FLOPs per token (6 N + attention, PaLM convention)", "F",
            model_flops_per_token(job.model, job.seq_len), "FLOP", cite("chowdhery-2022-palm"))
    d.given("GPUs", "N", cl.n_gpus, "1")
    d.given(f"{cl.gpu.id} dense {job.precision} peak", "R", cl.gpu.peak_flop_per_s(job.precision),
            "FLOP/s", cl.gpu.source_of(f"flop_per_s.{job.precision}"))
    d.calc("model FLOP/s per GPU", "Q", "F * D / t_step / N", "FLOP/s",
           check=v.tflops_per_gpu, rel_tol=1e-6)
    d.calc("MFU", "MFU", "Q / R", "1", check=v.mfu, rel_tol=1e-6)
    d.given("compute-only time per step (lower bound: all communication hidden)", "t_lo",
            v.lower_s, "s")
    d.given("time with nothing overlapped (upper bound)", "t_hi", v.upper_s, "s")
    d.calc("estimate within the bounds", "t_est", "min(max(t_step, t_lo), t_hi)", "s",
           check=v.step_time_s, rel_tol=1e-6)


PARTS = (gemm_part, attention_part, compute_part, layer_comm_part, pipeline_part, step_part)


def derive_row(res: PlanResult, row: PlanRow) -> Derivation:
    """The step time, throughput and MFU of one layout as a worked derivation (checked against
    the vectorised values)."""
    from ...derive import Derivation
    from ..planner import LAYOUT_KEYS

    lay, cl = row.layout, res.cluster
    d = Derivation(f"Step time of {res.job.model.id} on {cl.n_gpus:,} x {cl.gpu.id}: "
                   + ", ".join(f"{k}={lay[k]}" for k in LAYOUT_KEYS))
    for part in PARTS:
        part(d, res, row)
    return d
