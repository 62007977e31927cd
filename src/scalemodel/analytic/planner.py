"""The training planner: every parallel layout of a training step, its step time, MFU and memory.

For one model, cluster and global batch, :func:`search` builds the grid of layouts (TP with
sequence parallelism, PP with interleaved stages and uneven stage splits, DP with ZeRO 0-3, CP,
EP with experts split over TP or folded, recompute, micro-batch), drops the invalid ones rule by
rule, and prices every remaining layout at once with numpy. Memory comes from
:func:`scalemodel.analytic.memory.training_bytes` (the same model that ``scalemodel memory``
shows; that command keeps the experts split over TP, etp = tp); time is the sum of

* compute: every GEMM of a layer (forward, the two backward GEMMs, recompute) at an efficiency
  that depends on its shape (tile and wave quantization on the SMs, the HBM roofline for thin
  GEMMs) below a ceiling measured on one large GEMM; attention at the FlashAttention efficiency
  of the length each call sees (smaller under context parallelism); norms, residuals,
  activations, rotary, dropout masks, fp8 casts and the fp32 loss as HBM traffic;
* TP/SP, CP and EP collectives per layer, the pipeline bubble (p - 1) / v and send/recv, the
  DP gradient reduction and ZeRO gathers overlapped with compute where the framework does so;
* the optimizer step as HBM traffic.

Collectives are priced by the collectives engine (analytic/collectives.py, NCCL-like choice of
algorithm and protocol per query) through one adapter, :func:`collective_time`. Compute that runs
beside a hidden collective pays a measured slowdown (planner.toml, overlap.compute_slowdown).

Symbols follow docs/planner.md. Times are seconds per step unless named otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import BadInput
from ..specs import GPUSpec, LinkSpec, ModelSpec, assumption, get_gpu, get_link, optimizer
from ..specs.frameworks import PARALLELISM_OF
from ..specs.sources import cite
from .memory import (
    PLAN_RECOMPUTE,
    chunk_partition,
    stage_partition,
    stage_shape,
    tp_options,
)
from .step import StepTerms, evaluate
from .step.attention import attention_core_time, attention_curve, attention_efficiency
from .step.comm import collective_time, dispatch_copies, ranks_per_node
from .step.config import (
    ATTENTION_KINDS,
    FUSED_ATTENTION,
    KERNEL_MODES,
    SCHEDULES,
    STAGE_COLS,
    TP_BWD_COLLECTIVES,
    TP_FWD_COLLECTIVES,
    constants,
)
from .step.derivation import derive_row
from .step.gemm import gemm_ceiling, gemm_efficiency, gemm_time
from .step.pipeline import schedule_1f1b
from .step.shapes import ModelShapes, model_flops_per_token, model_shapes, split_extras

# the step model's parts, read from here by the commands, the questions and the tests
__all__ = ["ATTENTION_KINDS", "FUSED_ATTENTION", "KERNEL_MODES", "SCHEDULES", "STAGE_COLS",
           "TP_BWD_COLLECTIVES", "TP_FWD_COLLECTIVES", "ModelShapes", "StepTerms",
           "attention_core_time", "attention_curve", "attention_efficiency", "collective_time",
           "constants", "derive_row", "dispatch_copies", "evaluate", "gemm_ceiling",
           "gemm_efficiency", "gemm_time", "model_flops_per_token", "model_shapes", "split_extras",
           "ranks_per_node", "schedule_1f1b"]

LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch", "recompute")
RECOMPUTE_KEYS = ("recompute_modules", "recompute_layers")  # pinned with recompute
STRATEGIES = ("tp", "cp", "ep", "pp", "dp")


# --- the cluster and the job ---------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    """GPUs, their NVLink domain and the scale-out fabric (per-GPU, one-way bandwidths)."""

    gpu: GPUSpec
    n_gpus: int
    gpus_per_node: int
    nvlink_domain: int
    intra: LinkSpec | None
    inter: LinkSpec
    nics_per_gpu: int

    @cached_property
    def fabric(self) -> Any:
        """The collectives engine's view of this cluster: one tier per NVLink domain (the
        "node" of analytic/collectives.py), the scale-out NICs of each GPU beyond it. A GPU
        without a scale-up link (L40S) reaches its node's GPUs over its own PCIe link
        (gpus.toml interconnect.pcie_link; PCIe 5.0 where none is given), in the PCIe host layout
        its spec names (interconnect.pcie_host: collectives.toml [pcie_hosts])."""
        from .collectives import make_fabric

        intra = self.intra.id if self.intra else self.gpu.interconnect.get("pcie_link", "pcie5")
        host = None if self.intra else self.gpu.interconnect.get("pcie_host")
        return make_fabric(intra, self.inter.id, gpus_per_node=self.nvlink_domain,
                           nics_per_gpu=self.nics_per_gpu,
                           intra_bytes_per_s=self.gpu.scale_up_bytes_per_s or None,
                           pcie_host=host)

    @cached_property
    def collective_seconds(self) -> dict[tuple[str, float, float, float], float]:
        """Seconds of each collective query priced on this cluster so far, by (kind, bytes,
        ranks, ranks per node): step/comm.py collective_time prices a query once."""
        return {}


def make_cluster(gpu: str | GPUSpec, n_gpus: int, *, gpus_per_node: int | None = None,
                 nvlink_domain: int | None = None, inter: str | None = None,
                 nics_per_gpu: int | None = None) -> Cluster:
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    ic = g.interconnect
    node = gpus_per_node or int(assumption("gpus_per_node").value)
    # the NVLink domain: as asked, else the GPU's own (gpus.toml interconnect.nvlink_domain: 72
    # for the NVL72 racks' GB200 / GB300), else one node
    dom = nvlink_domain or int(ic.get("nvlink_domain", 0)) or node
    if n_gpus < 1:
        raise BadInput(f"--gpus must be at least 1, got {n_gpus}")
    if dom < 1 or node < 1:
        raise BadInput("--gpus-per-node and --nvlink-domain must be at least 1")
    intra = get_link(ic["scale_up_link"]) if ic.get("scale_up_link") else None
    inter_id = inter or ic.get("scale_out_link") or "ndr-400"
    try:
        inter_link = get_link(inter_id)
    except BadInput:
        from ..specs import link_ids

        raise BadInput(f"--inter: unknown link {inter_id!r}; choose one of "
                       f"{', '.join(link_ids())}") from None
    nics = nics_per_gpu or int(ic.get("nics_per_gpu", 1))
    return Cluster(g, int(n_gpus), int(node), int(dom), intra, inter_link, int(nics))


@dataclass(frozen=True)
class Job:
    """What is trained: model, sequence length, global batch, precision and optimizer."""

    model: ModelSpec
    seq_len: int
    global_batch_seqs: int
    precision: str = "bf16"
    optimizer_id: str = "adam"
    memory_fraction: float | None = None
    # "flash" (FlashAttention-2-class fused kernel), "flash3" (FlashAttention-3 / cuDNN, Hopper),
    # "triton" (the older Triton FlashAttention kernel) - planner.toml [attention] - or
    # "unfused" (scores in HBM)
    attention: str = "flash"
    # MoE all-to-alls overlapped with another micro-batch's compute (DualPipe, Megatron's EP
    # overlap)
    ep_overlap: bool = False
    # "fused": every elementwise step of a norm, rotary or gated activation is one kernel
    # (Megatron/Transformer Engine, torch.compile); "eager": PyTorch eager mode runs the
    # reference code op by op (planner.toml [nongemm] eager_*)
    kernels: str = "fused"
    # Megatron's gradient-accumulation fusion (the wgrad GEMM adds into the fp32 main gradient);
    # False = a separate add pass per micro-batch (Megatron before 2022, or
    # --no-gradient-accumulation-fusion)
    grad_accum_fusion: bool = True
    # pipeline schedule: "1f1b" (Megatron's, interleaved when vpp > 1) or "dualpipe" (DeepSeek-V3:
    # bidirectional, a forward and a backward chunk overlapped; bubble (p/2 - 1)(F&B + B - 3W),
    # two copies of the parameters, p + 1 micro-batches of activations)
    schedule: str = "1f1b"
    # the framework profile (specs/data/frameworks.toml id; None: the default profile) whose
    # overlap and dispatcher fields the step model reads (analytic/step/config.profile_value)
    framework_id: str | None = None
    # the fp8 scaling recipe (delayed, current, blockwise, mxfp8; specs/frameworks.FP8_SCALINGS)
    # where --fp8-recipe names one; None: the profile's for the model on the GPU
    # (frameworks.toml fp8_scaling_recipes, else fp8_scaling)
    fp8_scaling: str | None = None

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.global_batch_seqs


def make_job(model: ModelSpec, *, seq_len: int, global_batch_tokens: int | None = None,
             global_batch_seqs: int | None = None, precision: str = "bf16",
             optimizer_id: str | None = None, memory_fraction: float | None = None,
             attention: str = "flash", ep_overlap: bool = False,
             kernels: str = "fused", grad_accum_fusion: bool = True,
             schedule: str = "1f1b", framework_id: str | None = None,
             fp8_scaling: str | None = None, mtp_layers: int | None = None) -> Job:
    """The Job; ``mtp_layers`` (the profile's model_recipes for the model on the GPU,
    specs/frameworks.job_settings) replaces the model config's multi-token-prediction modules
    with the count the framework's recipe builds: the one place a recipe switches MTP off, so
    the step model, memory and the stage split all read it from ``job.model``."""
    if mtp_layers is not None and int(mtp_layers) != int(model.mtp_layers or 0):
        from dataclasses import replace as _replace

        model = _replace(model, mtp_layers=int(mtp_layers))
    if precision not in ("bf16", "fp8"):
        raise BadInput(f"--precision must be bf16 or fp8, got {precision!r}")
    if fp8_scaling is not None:
        from ..specs.frameworks import FP8_SCALINGS

        if fp8_scaling not in FP8_SCALINGS:
            raise BadInput(f"--fp8-recipe must be one of {', '.join(FP8_SCALINGS)}, "
                           f"got {fp8_scaling!r}")
        if precision != "fp8":
            raise BadInput(f"--fp8-recipe {fp8_scaling} needs --precision fp8")
    if attention not in ATTENTION_KINDS:
        raise BadInput(f"--attention must be one of {', '.join(ATTENTION_KINDS)}, "
                       f"got {attention!r}")
    if schedule not in SCHEDULES:
        raise BadInput(f"--schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if kernels not in KERNEL_MODES:
        raise BadInput(f"--kernels must be one of {', '.join(KERNEL_MODES)}, got {kernels!r}")
    if seq_len < 1:
        raise BadInput(f"--seq-len must be at least 1, got {seq_len}")
    if (global_batch_tokens is None) == (global_batch_seqs is None):
        raise BadInput("give exactly one of --global-batch-tokens or --global-batch (sequences)")
    if global_batch_tokens is not None:
        if global_batch_tokens % seq_len:
            raise BadInput(f"--global-batch-tokens {global_batch_tokens:,} is not a multiple of "
                           f"--seq-len {seq_len:,}; nearest: "
                           f"{max(1, round(global_batch_tokens / seq_len)) * seq_len:,}")
        global_batch_seqs = global_batch_tokens // seq_len
    from .memory import framework_optimizer

    optimizer_id = framework_optimizer(framework_id, optimizer_id)
    optimizer(optimizer_id)  # validates the id
    if global_batch_seqs < 1:
        raise BadInput("the global batch must hold at least one sequence")
    return Job(model, int(seq_len), int(global_batch_seqs), precision, optimizer_id,
               memory_fraction, attention, bool(ep_overlap), kernels, bool(grad_accum_fusion),
               schedule, framework_id, fp8_scaling)


# --- the grid of layouts -------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@dataclass
class Grid:
    cols: dict[str, np.ndarray]
    rejected: dict[str, int]  # rule -> rows it removed (in the order the rules apply)
    total: int
    partial: tuple[int, ...] = ()  # partial recompute codes the search adds in its 2nd phase


PARALLELISM_NAMES = {"tp": "tensor parallelism", "sp": "sequence parallelism",
                     "pp": "pipeline parallelism", "vpp": "interleaved (virtual) pipeline stages",
                     "cp": "context parallelism", "ep": "expert parallelism",
                     "zero1": "ZeRO-1 (sharded optimizer state)",
                     "zero2": "ZeRO-2 (sharded gradients)", "zero3": "ZeRO-3 (sharded parameters)"}


def offered_parallelisms(job: Job) -> frozenset[str] | None:
    """The parallelisms the job's framework profile offers (None: every layout)."""
    from ..specs.frameworks import offered_parallelisms as offered

    return offered(job.framework_id)


def check_offered(job: Job, key: str, value: int, where: str = "--layout") -> None:
    """BadInput (one line) where an explicit layout value needs a parallelism that the job's
    framework profile does not offer."""
    from ..specs.frameworks import needed_parallelism

    par = offered_parallelisms(job)
    need = needed_parallelism(key, value)
    if par is None or need is None or need in par:
        return
    from ..specs.frameworks import get_framework

    fw = get_framework(job.framework_id)
    has = ", ".join([*(x for x in PARALLELISM_NAMES if x in par), "plain data parallelism"])
    raise BadInput(f"{where} {key}={value}: {fw.id} ({fw.version}) offers no "
                   f"{PARALLELISM_NAMES[need]}; it offers {has}")


def check_recompute_offered(job: Job, mode: str, where: str = "--layout") -> None:
    """BadInput (one line) where an explicit recompute mode is not one the job's framework
    profile offers (its ``recompute_options``; a profile that lists none offers every mode)."""
    from ..specs.frameworks import get_framework, recompute_modes

    modes = recompute_modes(job.framework_id)
    if modes and mode not in modes:
        fw = get_framework(job.framework_id)
        raise BadInput(f"{where} recompute={mode}: {fw.id} ({fw.version}) offers recompute "
                       f"{', '.join(modes)} only")


def check_recompute_layers(job: Job, fixed: dict[str, Any], where: str = "--layout") -> None:
    """BadInput (one line) where a given recompute_layers N (full recompute of N layers per
    model chunk, Megatron-Core's block method) exceeds the layers of the largest chunk of the
    split the given keys build (step/shapes.largest_chunk_layers: the given ``stages``, else
    the planner's split at the pp and vpp given, pp 1 and vpp 1 where not given). The layout
    rule "recompute layers" refuses the same rows one by one."""
    from .step.shapes import largest_chunk_layers

    n = int(fixed["recompute_layers"])
    pp, vpp = int(fixed.get("pp", 1)), int(fixed.get("vpp", 1))
    stages = tuple(fixed["stages"]) if "stages" in fixed else None
    top = int(largest_chunk_layers(job.model, job.framework_id, pp, vpp, stages)[0])
    if n > top:
        at = (f"with stages={'/'.join(str(x) for x in stages)}" if stages is not None else
              f"at pp={pp}, vpp={vpp}" if "pp" in fixed or "vpp" in fixed
              else "in the largest chunk (pp=1)")
        raise BadInput(f"{where} recompute=full:{n}: {job.model.id} has at most {top} layers "
                       f"per model chunk {at}; N must be 1 to {top} (Megatron-Core "
                       f"--recompute-num-layers, block method)")


def check_pipeline_zero(job: Job, pp: int, zero: int, where: str = "--layout") -> None:
    """BadInput (one line) where pipeline stages meet a ZeRO stage the framework does not run
    beside them (frameworks.toml pipeline_zero_max)."""
    from ..specs.frameworks import get_framework, pipeline_zero_max

    zmax = pipeline_zero_max(job.framework_id)
    if zmax is not None and pp > 1 and zero > zmax:
        fw = get_framework(job.framework_id)
        raise BadInput(f"{where} pp={pp} with zero={zero}: {fw.id} ({fw.version}) runs pipeline "
                       f"stages with ZeRO-{zmax} at most")


def check_replicate_1d(job: Job, fixed: dict[str, Any], where: str = "--layout") -> None:
    """BadInput (one line) where the given keys alone already ask a profile that replicates on
    a one-dimensional mesh only (frameworks.toml replicate_1d_only: torchtitan) for ZeRO 0
    across data-parallel or CP ranks beside TP, PP or CP."""
    from ..specs.frameworks import get_framework, replicate_1d_only

    if fixed.get("zero") != 0 or not replicate_1d_only(job.framework_id):
        return
    dp, cp = fixed.get("dp"), int(fixed.get("cp", 1))
    ranks = cp if dp is None else int(dp) * cp
    beside = [k for k in ("tp", "pp", "cp") if int(fixed.get(k, 1)) > 1]
    if ranks > 1 and beside:
        fw = get_framework(job.framework_id)
        raise BadInput(f"{where} zero=0 with {', '.join(f'{k}={fixed[k]}' for k in beside)}: "
                       f"{fw.id} ({fw.version}) runs ZeRO 0 (replication) only with data "
                       f"parallelism alone (no TP, PP or CP); FSDP (zero=3) otherwise")


def check_pipeline_split(job: Job, pp: int, vpp: int, stages: tuple[int, ...] | None = None,
                         where: str = "--layout") -> None:
    """BadInput (one line) where a pipeline needs a split the framework cannot build: a profile
    that splits evenly only (frameworks.toml pipeline_split) needs the layers divisible by
    pp x vpp and no per-stage counts other than L / pp; where only the model's recipe splits
    evenly (model_recipes), per-stage counts given in ``stages`` are the run's own and stand."""
    from ..specs.frameworks import (
        even_edge_split,
        even_pipeline_split,
        get_framework,
        recipe_pipeline_split,
    )

    L = job.model.n_layers
    if pp > 1 and even_edge_split(job.framework_id, job.model.id) and (L + 2) % (pp * vpp):
        fw = get_framework(job.framework_id)
        raise BadInput(f"{where} pp={pp} vpp={vpp}: {fw.id} ({fw.version}) counts the "
                       f"embedding and the loss as a layer each and splits evenly only; the "
                       f"{L} + 2 layers of {job.model.id} do not divide into {pp * vpp} equal "
                       f"chunks")
    if pp <= 1 or not even_pipeline_split(job.framework_id, job.model.id):
        return
    if stages is not None and recipe_pipeline_split(job.framework_id, job.model.id):
        return  # the run sets its own per-stage counts (Megatron-Core builds them)
    uneven = L % (pp * vpp) != 0 or (stages is not None and len(set(stages)) > 1)
    if uneven:
        fw = get_framework(job.framework_id)
        who = (f"{fw.id} ({fw.version}) builds its {job.model.id} recipe's even split (no "
               f"per-stage counts; give --layout stages for the run's own)"
               if recipe_pipeline_split(job.framework_id, job.model.id) else
               f"{fw.id} ({fw.version}) splits the layers evenly only")
        raise BadInput(f"{where} pp={pp} vpp={vpp}: {who}; the {L} layers of {job.model.id} "
                       f"do not divide into {pp * vpp} equal chunks")


def _offered_values(job: Job, key: str, values: list[int]) -> list[int]:
    """The searched values of one key that the framework profile offers."""
    from ..specs.frameworks import offered_values

    return offered_values(job.framework_id, key, values)


def check_precision(job: Job, cl: Cluster) -> None:
    """BadInput (one line, naming --precision) where the GPU's spec has no peak for the job's
    training precision (fp8 on an A100): the step model's GEMM ceilings start from it."""
    rates = cl.gpu.flop_per_s
    if job.precision not in rates:
        raise BadInput(f"--precision {job.precision}: {cl.gpu.id} has no {job.precision} peak "
                       f"in its spec; it lists {', '.join(rates)}")


def _check_fixed(job: Job, fixed: dict[str, Any]) -> None:
    """BadInput (one line) for a pinned key plan train cannot use or the framework does not
    offer, before any grid is built."""
    unknown = set(fixed) - set(LAYOUT_KEYS) - set(RECOMPUTE_KEYS) - {"stages"}
    if unknown:
        raise BadInput(f"--layout {sorted(unknown)[0]}: plan train cannot use this key; keys: "
                       f"{', '.join(LAYOUT_KEYS)}, stages")
    if "recompute" in fixed and fixed["recompute"] not in PLAN_RECOMPUTE:
        raise BadInput(f"--layout recompute must be one of {', '.join(PLAN_RECOMPUTE)}")
    for k in PARALLELISM_OF:  # an explicit value the framework does not offer: refused
        if k in fixed:
            check_offered(job, k, fixed[k])
    if "recompute" in fixed:
        check_recompute_offered(job, fixed["recompute"])
    if fixed.get("recompute_layers"):
        check_recompute_layers(job, fixed)
    if "pp" in fixed and "zero" in fixed:
        check_pipeline_zero(job, int(fixed["pp"]), int(fixed["zero"]))
    check_replicate_1d(job, fixed)
    if "pp" in fixed and ("vpp" in fixed or "stages" in fixed):
        check_pipeline_split(job, int(fixed["pp"]), int(fixed.get("vpp", 1)),
                             tuple(fixed["stages"]) if "stages" in fixed else None)


def layout_grid(job: Job, cl: Cluster, fixed: dict[str, Any] | None = None) -> Grid:
    """All layouts of ``cl.n_gpus`` GPUs for ``job``; ``fixed`` pins any of the searched layout
    keys. The rules are analytic/layout.py RULES, applied in order; ``rejected`` counts the rows
    each removed."""
    from .layout import RULES, Context, derived

    fixed = dict(fixed or {})
    m, N = job.model, cl.n_gpus
    check_precision(job, cl)
    if "stages" in fixed:
        from .layout import check_stages

        st = tuple(fixed["stages"])
        fixed.setdefault("pp", len(st))
        fixed.setdefault("vpp", 1)  # a split given per stage is one of a plain pipeline
        check_stages(st, fixed["pp"], m)
    _check_fixed(job, fixed)
    tps = [fixed["tp"]] if "tp" in fixed else [t for t in tp_options(m, cl.nvlink_domain)
                                                if N % t == 0]
    cps = [fixed["cp"]] if "cp" in fixed else [c for c in (1, 2, 4, 8, 16, 32)
                                                if job.seq_len % c == 0 and N % c == 0]
    pps = [fixed["pp"]] if "pp" in fixed else [p for p in _divisors(N) if p <= m.n_layers]
    eps = ([fixed["ep"]] if "ep" in fixed else
           ([e for e in _divisors(m.n_experts) if e <= N] if m.is_moe else [1]))
    # expert tensor parallelism: 0 stands for "as the attention's tp" (Megatron's default); a
    # folded layout (MoE parallel folding) runs the experts unsplit (etp 1) with EP drawn from
    # the tp x dp x cp ranks
    etps = ([fixed["etp"]] if "etp" in fixed else ([0, 1] if m.is_moe else [0]))
    zeros = [fixed["zero"]] if "zero" in fixed else [0, 1, 2, 3]
    vpps = [fixed["vpp"]] if "vpp" in fixed else [1, 2, 3, 4, 6, 8]
    from ..specs.frameworks import even_pipeline_split

    if "vpp" not in fixed and even_pipeline_split(job.framework_id, m.id):
        # an even-split framework interleaves with any count of layers per virtual stage that
        # divides a stage's L / pp (Megatron's --num-layers-per-virtual-pipeline-stage): 23
        # layers a stage (92 on PP4) interleave only as 23 chunks of one layer
        vpps = sorted(set(vpps) | {d for p in pps if p > 1 and m.n_layers % p == 0
                                   for d in _divisors(m.n_layers // p)})
    rcs = _recompute_codes(job, fixed)
    # partial policies (codes >= 4) enter in the search's second phase (_evaluate_two_phase)
    partial = tuple(x for x in rcs if x >= 4) if "recompute" not in fixed else ()
    rcs = [x for x in rcs if x < 4] if partial else rcs
    mbs = [fixed["micro_batch"]] if "micro_batch" in fixed else [1, 2, 4, 8, 16, 32]
    # only the parallelisms the framework profile offers (frameworks.toml parallelisms)
    tps, pps, cps, eps, zeros, vpps = (_offered_values(job, k, v) for k, v in (
        ("tp", tps), ("pp", pps), ("cp", cps), ("ep", eps), ("zero", zeros), ("vpp", vpps)))
    keys = dict(tp=tps, pp=pps, cp=cps, ep=eps, etp=etps, zero=zeros, vpp=vpps, rc=rcs,
                micro_batch=mbs)
    dt = _grid_dtype(keys, fixed.get("dp", N), job)
    c = _grid_columns(keys, dt)
    total = int(c["tp"].size)
    rejected: dict[str, int] = {}
    ctx = Context(m, N, job.global_batch_seqs, job.seq_len, job.schedule,
                  edge_slots=_edge_slots(job), framework_id=job.framework_id,
                  stages=tuple(fixed["stages"]) if "stages" in fixed else None)
    pinned_dp = np.full(total, fixed["dp"], dtype=dt) if "dp" in fixed else None
    if pinned_dp is not None:
        c["dp"] = pinned_dp
    # dp and the micro-batches follow from the other keys once; the first rule (the GPU count)
    # removes the rows whose division is not exact, the others filter them with the rest
    c = derived(c, ctx)
    # every rule sees every row and a row counts against the first rule it breaks; the rows
    # are dropped once at the end (rows an earlier rule removed may divide by a zero dp)
    alive = np.ones(total, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for r in RULES:
            if not r.applies(ctx) or (r.derived_key is not None and r.derived_key not in fixed):
                continue
            broken = alive & ~np.asarray(r.ok(c, ctx), dtype=bool)
            bad = int(np.count_nonzero(broken))
            if bad:
                key = r.message(ctx)
                rejected[key] = rejected.get(key, 0) + bad
                alive &= ~broken
    alive = _framework_split_rules(job, c, alive, rejected, stages_given="stages" in fixed)
    if not alive.all():
        c = {k: a[alive] for k, a in c.items()}
    cols = {k: np.asarray(c[k], dtype=np.int64) for k in ("tp", "pp", "dp", "cp", "ep", "etp",
                                                          "zero", "vpp", "rc", "micro_batch",
                                                          "microbatches")}
    if "stages" in fixed:  # one split for every row (pp is pinned to its length)
        for k, v in zip(STAGE_COLS, stage_shape(tuple(fixed["stages"])), strict=True):
            cols[k] = np.full(cols["tp"].shape, v, dtype=np.int64)
    return Grid(cols, rejected, total, partial)


def _edge_slots(job: Job) -> int:
    """Model chunks that may hold no decoder layer under the job's framework: 2 with the
    edge-chunk split (frameworks.toml pipeline_split = "edge_chunks"), else 0."""
    from ..specs.frameworks import edge_chunk_split

    return 2 if edge_chunk_split(job.framework_id, job.model.id) else 0


def _framework_split_rules(job: Job, c: dict[str, Any], alive: np.ndarray,
                           rejected: dict[str, int], stages_given: bool = False) -> np.ndarray:
    """The rows a framework version cannot build, beside the general layout RULES: splits that
    are not even where it splits evenly only (unless ``stages_given`` where only the model's
    recipe splits evenly: the run's own per-stage counts), and pipeline stages beside a ZeRO
    stage it does not pair them with; each removal counted in ``rejected`` under its reason."""
    from ..specs.frameworks import (
        even_edge_split,
        even_pipeline_split,
        pipeline_zero_max,
        recipe_pipeline_split,
        replicate_1d_only,
    )

    n_layers = job.model.n_layers
    pp_c = np.asarray(c["pp"])

    def drop(broken: np.ndarray, key: str) -> np.ndarray:
        bad = int(np.count_nonzero(broken))
        if bad:
            rejected[key] = rejected.get(key, 0) + bad
            return alive & ~broken
        return alive

    if even_edge_split(job.framework_id, job.model.id):  # Megatron-Core's account_for_* flags
        vpp_c = np.asarray(c["vpp"])
        alive = drop(alive & (pp_c > 1) & ((n_layers + 2) % np.maximum(pp_c * vpp_c, 1) != 0),
                     f"{job.framework_id}: the embedding and the loss count as a layer each and "
                     f"the split is even (pp x vpp must divide the {n_layers} + 2 layers)")
    own_stages = stages_given and recipe_pipeline_split(job.framework_id, job.model.id)
    if even_pipeline_split(job.framework_id, job.model.id) and not own_stages:
        # only splits the framework (or the model's recipe) builds
        vpp_c = np.asarray(c["vpp"])
        whose = (f"its {job.model.id} recipe's layers split evenly"
                 if recipe_pipeline_split(job.framework_id, job.model.id)
                 else "the layers split evenly only")
        alive = drop(alive & (pp_c > 1) & (n_layers % np.maximum(pp_c * vpp_c, 1) != 0),
                     f"{job.framework_id}: {whose} (pp x vpp must divide "
                     f"the {n_layers} layers)")
    zmax = pipeline_zero_max(job.framework_id)
    if zmax is not None:  # pipeline stages only beside the ZeRO stages the framework pairs them with
        alive = drop(alive & (pp_c > 1) & (np.asarray(c["zero"]) > zmax),
                     f"{job.framework_id}: pipeline stages with ZeRO-{zmax} at most")
    if replicate_1d_only(job.framework_id):  # DDP on a 1-D mesh only; CP always under FSDP
        z0 = np.asarray(c["zero"]) == 0
        dp_c, cp_c, tp_c = (np.asarray(c[k]) for k in ("dp", "cp", "tp"))
        other = (tp_c > 1) | (pp_c > 1) | (cp_c > 1)
        alive = drop(alive & z0 & (dp_c * cp_c > 1) & other,
                     f"{job.framework_id}: ZeRO 0 (replication) only with data parallelism "
                     f"alone (no TP, PP or CP)")
    return alive


def _recompute_codes(job: Job, fixed: dict[str, Any]) -> list[int]:
    """The recompute codes searched (layout.recompute_code): the pinned policy, or none,
    selective, full and the partial policies the framework profile lists in its
    ``recompute_options`` ("selective:mla_up_proj+mlp", "full:2": N layers per chunk)."""
    from ..specs.frameworks import get_framework
    from .layout import RULES, Context, recompute_code, recompute_spec

    if "recompute" in fixed:
        return [recompute_code(fixed["recompute"], tuple(fixed.get("recompute_modules", ())),
                               int(fixed.get("recompute_layers", 0)))]
    if "recompute_modules" in fixed or "recompute_layers" in fixed:
        raise BadInput("--layout recompute_modules / recompute_layers need recompute=selective "
                       "/ recompute=full")
    # the policies the framework offers (frameworks.toml recompute_options: Megatron-LM of
    # 2021 and llm-foundry none or full, torchtitan also its op-level policy); a profile that
    # lists none is searched over none, selective and full
    options = get_framework(job.framework_id).values.get("recompute_options", ())
    codes = [] if options else [0, 1, 2]
    for opt in options:
        spec = recompute_spec(str(opt), search=True)  # full:min: layout.BLOCK_MIN_LAYERS
        codes.append(recompute_code(spec["recompute"], spec.get("recompute_modules", ()),
                                    spec.get("recompute_layers", 0)))
    # module sets the model has nothing for (mla_up_proj without MLA, moe_act on a dense
    # model) would only be rejected row by row: leave them out of the grid
    ctx = Context(job.model, 1, 1, job.seq_len, job.schedule)
    arr = {"rc": np.asarray(codes, dtype=np.int64)}
    keep = np.ones(len(codes), dtype=bool)
    for r in RULES:
        if r.name == "recompute modules" and r.applies(ctx):
            keep &= np.asarray(r.ok(arr, ctx), dtype=bool)
    codes = [int(x) for x, k in zip(codes, keep, strict=True) if k]
    return codes


def _grid_dtype(keys: dict[str, list[int]], dp_max: int, job: Job) -> type:
    """int32 where every product the layout rules form (at most tp pp dp cp, dp micro-batch,
    pp vpp) and every scalar they compare with fit in it: half the grid's memory; else int64."""
    top = {k: max(abs(int(x)) for x in v) for k, v in keys.items()}
    dp_max = abs(int(dp_max))
    need = max(top["tp"] * top["pp"] * top["cp"] * max(dp_max, 1), dp_max * top["micro_batch"],
               top["pp"] * top["vpp"], top["tp"] * top["cp"] * max(dp_max, 1) * top["ep"],
               job.global_batch_seqs, job.seq_len, job.model.n_layers, job.model.n_experts or 1)
    return np.int32 if need < 2**31 - 1 else np.int64


def _grid_columns(keys: dict[str, list[int]], dt: type) -> dict[str, np.ndarray]:
    """The product of the key choices as flat columns, tp slowest (meshgrid "ij" order), less
    the duplicates: etp 0 stands for the attention's tp, so where tp is 1 the two etp choices
    are one layout. Columns are drawn from broadcast views, never the full grid per key."""
    axes = np.meshgrid(*(np.asarray(v, dtype=dt) for v in keys.values()), indexing="ij",
                       sparse=True)
    grid = dict(zip(keys, axes, strict=True))
    shape = np.broadcast_shapes(*(a.shape for a in axes))
    once = np.broadcast_to(~((grid["etp"] == 1) & (grid["tp"] == 1) & (len(keys["etp"]) > 1)),
                           shape)
    c = {k: np.broadcast_to(a, shape)[once] for k, a in grid.items()}
    c["etp"] = np.where(c["etp"] == 0, c["tp"], c["etp"])
    return c


# --- the search -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    """One evaluated layout (scalars), in the issue's JSON keys."""

    layout: Any  # analytic/layout.py TrainLayout (reads as a dict of its keys)
    values: StepTerms  # the step model's terms of this layout (plain numbers)

    def to_dict(self) -> dict[str, Any]:
        v = self.values
        return {
            "layout": self.layout.as_dict(),
            "step_time_s": v.step_time_s,
            "tokens_per_s": v.tokens_per_s,
            "tokens_per_s_per_gpu": v.tokens_per_s_per_gpu,
            "tflops_per_gpu": v.tflops_per_gpu,
            "mfu": v.mfu,
            "hfu": v.hfu,
            "memory_per_gpu_bytes": v.memory_per_gpu_bytes,
            "breakdown_s": breakdown(v),
            "lower_bound_s": v.lower_s,
            "upper_bound_s": v.upper_s,
        }


def breakdown(v: StepTerms) -> dict[str, float]:
    return {"compute": v.compute_s, "tp_exposed": v.tp_s, "cp_exposed": v.cp_s,
            "ep_exposed": v.ep_s, "host_exposed": v.host_s, "pp_exposed": v.pp_s, "dp_exposed": v.dp_s,
            "bubble": v.bubble_s, "optimizer": v.optimizer_s,
            "overlap_slowdown": v.overlap_s}


@dataclass(frozen=True)
class PlanResult:
    job: Job
    cluster: Cluster
    rows: list[PlanRow]  # best first (fitting layouts by throughput)
    pareto: list[PlanRow]
    candidates_evaluated: int
    valid: int
    fitting: int
    rejected: dict[str, int]
    grid_total: int
    stage_layers: tuple[int, ...] = field(default=())
    # the best layout's layers per model chunk (pp x vpp; chunk j on stage j mod pp)
    chunk_layers: tuple[int, ...] = field(default=())
    # the fp8 scaling recipe the plan was priced with ("" in bf16; step/config.fp8_scaling)
    fp8_scaling: str = ""
    # tokens/s of every fitting layout the search priced (both phases): what a published
    # layout is ranked against (agreement.agree_row), so no caller prices the grid again
    fitting_tokens_per_s: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def best(self) -> PlanRow:
        return self.rows[0]


def row_at(cols: dict[str, np.ndarray], res: StepTerms, i: int,
           stages: tuple[int, ...] | None = None) -> PlanRow:
    from .layout import TrainLayout, decode_recompute, modules_of

    mode, bits, n_rc = decode_recompute(int(cols["rc"][i]))
    lay = TrainLayout(**{k: int(cols[k][i]) for k in ("tp", "pp", "dp", "cp", "ep", "etp",
                                                      "zero", "vpp", "micro_batch")},
                      recompute=PLAN_RECOMPUTE[mode], recompute_modules=modules_of(bits),
                      recompute_layers=int(n_rc), stages=stages)
    return PlanRow(lay, _values_at(cols, res, i))


def _values_at(cols: dict[str, np.ndarray], res: StepTerms, i: int) -> StepTerms:
    vals = res.at(i)
    return vals


SEARCH_CHUNK = 1 << 16  # rows the search prices at once (about 1 kB of terms per row alive)


@dataclass(frozen=True)
class _Ranked:
    """A priced grid as the search reads it: the columns it ranks by, for every row, and the
    whole terms of the rows it may report (:meth:`at`)."""

    fits: np.ndarray
    tokens_per_s: np.ndarray
    memory_per_gpu_bytes: np.ndarray
    capacity_bytes: np.ndarray
    kept: dict[int, StepTerms]

    def at(self, i: int) -> StepTerms:
        return self.kept[i]


def _ranking(fits: np.ndarray, thr: np.ndarray, mem: np.ndarray, cap: np.ndarray,
             top: int) -> tuple[np.ndarray, np.ndarray]:
    """(the ``top`` + 1 best fitting rows: throughput first, then the smaller memory; the
    Pareto front of throughput against memory headroom, best throughput first)."""
    idx = np.flatnonzero(fits)
    order = idx[np.lexsort((mem[idx], -thr[idx]))][: top + 1]
    head = cap[idx] - mem[idx]
    o = np.lexsort((-head, -thr[idx]))
    h = head[o]
    # a row is on the front when its headroom beats every row of higher throughput
    before = np.concatenate(([-np.inf], np.maximum.accumulate(h)[:-1])) if h.size else h
    return order, idx[o[h > before]]


def _reportable(fits: np.ndarray, thr: np.ndarray, mem: np.ndarray, cap: np.ndarray,
                top: int) -> np.ndarray:
    """A superset of the rows :func:`_ranking` can return, without its two-key sorts: every
    fitting row whose throughput reaches the ``top`` + 1 best (ties kept), and every fitting row
    whose headroom is at least that of each row of strictly higher throughput."""
    idx = np.flatnonzero(fits)
    if not idx.size:
        return idx
    t, h = thr[idx], cap[idx] - mem[idx]
    k = min(top + 1, idx.size)
    best = t >= np.partition(t, idx.size - k)[idx.size - k]
    o = np.argsort(-t)
    ts, hs = -t[o], h[o]  # ts ascending
    start = np.searchsorted(ts, ts, side="left")  # where each row's equal-throughput run begins
    higher = np.where(start > 0, np.maximum.accumulate(hs)[np.maximum(start - 1, 0)], -np.inf)
    front = np.zeros(idx.size, dtype=bool)
    front[o] = hs >= higher
    return idx[best | front]


def _evaluate_ranked(job: Job, cl: Cluster, cols: dict[str, np.ndarray], top: int) -> _Ranked:
    """Price the grid in chunks of SEARCH_CHUNK rows (the step model is elementwise, so a chunk's
    numbers are the whole grid's) and keep the whole terms only of the rows that can be
    reported: a row in the best ``top`` + 1 or on the Pareto front of the grid is so among the
    rows its chunk keeps (:func:`_reportable`), and the smallest memory of the grid is the
    smallest of its chunk."""
    n = int(cols["tp"].size)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in _Ranked.__dataclass_fields__
                                          if k != "kept"}
    kept: dict[int, StepTerms] = {}
    for a in range(0, n, SEARCH_CHUNK):
        res = evaluate(job, cl, {k: v[a:a + SEARCH_CHUNK] for k, v in cols.items()})
        for k, lst in parts.items():
            lst.append(np.asarray(getattr(res, k)))
        rows = _reportable(res.fits, res.tokens_per_s, res.memory_per_gpu_bytes,
                           res.capacity_bytes, top)
        for i in {*rows.tolist(), int(np.argmin(res.memory_per_gpu_bytes))}:
            kept[a + i] = res.at(i)
    return _Ranked(**{k: np.concatenate(v) for k, v in parts.items()}, kept=kept)




def _evaluate_two_phase(job: Job, cl: Cluster, grid: Grid, top: int
                        ) -> tuple[dict[str, np.ndarray], _Ranked, int]:
    """Price the grid (plain recompute modes), then the partial policies ``grid.partial`` of the
    layouts that do not fit without recompute: where a layout fits with none, each partial
    policy of it holds no more memory and is slower (it adds recompute), so it can be neither
    the best row nor better than the none row, and is left out. Returns the rows priced, their
    terms and the partial rows added (counted with the grid's candidates)."""
    from .layout import RULES, Context

    cols = grid.cols
    r0 = _evaluate_ranked(job, cl, cols, top)
    if not grid.partial:
        return cols, r0, 0
    sel = np.flatnonzero((cols["rc"] == 0) & ~r0.fits)
    if not sel.size:
        return cols, r0, 0
    from .layout import BLOCK_MIN_LAYERS, recompute_code

    block_min = recompute_code("full", layers=BLOCK_MIN_LAYERS)
    codes = np.asarray([x for x in grid.partial if x != block_min], dtype=cols["rc"].dtype)
    extra = {k: np.repeat(v[sel], codes.size) for k, v in cols.items()}
    extra["rc"] = np.tile(codes, sel.size)
    if block_min in grid.partial:
        # full:min: each such layout once more with block recompute of the fewest layers per
        # chunk that make it fit (the memory model's, step/memory_terms.fewest_block_layers);
        # more layers would only add recompute, fewer do not fit
        from .step.memory_terms import fewest_block_layers

        # (under MTP one N per stage split the step model may take: both are priced where
        # they differ, and the step model's own fit keeps the one that holds)
        seen = np.zeros(sel.size, dtype=np.int64)
        for n_min in fewest_block_layers(job, cl, {k: v[sel] for k, v in cols.items()}):
            on = (n_min > 0) & (n_min != seen)
            seen = np.where(seen > 0, seen, n_min)
            blk = {k: v[sel][on] for k, v in cols.items()}
            blk["rc"] = recompute_code("full", layers=n_min[on]).astype(cols["rc"].dtype)
            extra = {k: np.concatenate([extra[k], blk[k]]) for k in cols}
    n_extra = int(extra["rc"].size)
    ctx = Context(job.model, cl.n_gpus, job.global_batch_seqs, job.seq_len, job.schedule,
                  edge_slots=_edge_slots(job), framework_id=job.framework_id)
    ok = np.ones(n_extra, dtype=bool)
    for r in RULES:  # the recompute rules (the others hold: the rows passed them with none)
        if r.name.startswith("recompute") and r.applies(ctx):
            broken = ok & ~np.asarray(r.ok(extra, ctx), dtype=bool)
            bad = int(np.count_nonzero(broken))
            if bad:
                grid.rejected[r.message(ctx)] = grid.rejected.get(r.message(ctx), 0) + bad
                ok &= ~broken
    extra = {k: v[ok] for k, v in extra.items()}
    if not extra["rc"].size:
        return cols, r0, n_extra
    r1 = _evaluate_ranked(job, cl, extra, top)
    n_b = int(cols["rc"].size)
    merged = {k: np.concatenate([cols[k], extra[k]]) for k in cols}
    kept = dict(r0.kept) | {n_b + i: t for i, t in r1.kept.items()}
    res = _Ranked(**{k: np.concatenate([getattr(r0, k), getattr(r1, k)])
                     for k in ("fits", "tokens_per_s", "memory_per_gpu_bytes", "capacity_bytes")},
                  kept=kept)
    return merged, res, n_extra


def search(job: Job, cl: Cluster, fixed: dict[str, Any] | None = None, top: int = 5) -> PlanResult:
    """Enumerate, price and rank every valid layout; BadInput when none is valid or fits."""
    fixed = dict(fixed or {})
    grid = layout_grid(job, cl, fixed)
    cols = grid.cols
    n_valid = int(cols["tp"].size)
    if n_valid == 0:
        raise BadInput(_nothing_valid(job, cl, fixed, grid))
    cols, res, added = _evaluate_two_phase(job, cl, grid, top)
    fits = res.fits
    if not fits.any():
        raise BadInput(_nothing_fits(job, cl, fixed, cols, res))
    # the ranking of the rows kept is the grid's: they hold its best rows and its Pareto front
    kept = np.array(sorted(res.kept), dtype=np.int64)
    order, front = _ranking(res.fits[kept], res.tokens_per_s[kept],
                            res.memory_per_gpu_bytes[kept], res.capacity_bytes[kept], top)
    order, front = kept[order], kept[front]
    st = fixed.get("stages")
    rows = [row_at(cols, res, int(i), st) for i in order]
    pareto = [row_at(cols, res, int(i), st) for i in front[:8]]
    b = rows[0].layout
    extra = split_extras(job.model, job.framework_id)
    if extra["last_min"] == 0 and not st:  # the split the step model took for this layout
        zero = stage_partition(job.model.n_layers, b["pp"], vpp=b["vpp"], **extra)
        mtp = model_shapes(job.model).mtp
        if b["pp"] == 1 or int(rows[0].values.n_last) != zero[-1] + mtp:
            extra = {**extra, "last_min": 1}
    sl = st or stage_partition(job.model.n_layers, b["pp"], vpp=b["vpp"], **extra)
    chunks = (_chunks_of_stages(tuple(st), b["vpp"]) if st else
              chunk_partition(job.model.n_layers, b["pp"], vpp=b["vpp"], **extra))
    n_valid = int(cols["tp"].size)
    fp8 = ""
    if job.precision == "fp8":
        from .step.config import fp8_scaling

        fp8 = fp8_scaling(job, cl.gpu.id)[0]
    return PlanResult(job, cl, rows, pareto, grid.total + added, n_valid, int(fits.sum()),
                      grid.rejected, grid.total + added, sl, chunks, fp8,
                      np.asarray(res.tokens_per_s)[np.asarray(fits, dtype=bool)])


def _chunks_of_stages(stages: tuple[int, ...], vpp: int) -> tuple[int, ...]:
    """Layers per model chunk for a split given per stage: each stage's layers in vpp near-equal
    chunks, chunk v * pp + s on stage s (the order chunk_partition uses)."""
    pp = len(stages)
    out = [0] * (pp * vpp)
    for s_i, n in enumerate(stages):
        for v in range(vpp):
            out[v * pp + s_i] = n // vpp + (1 if v < n % vpp else 0)
    return tuple(out)


def _nothing_valid(job: Job, cl: Cluster, fixed: dict[str, Any], grid: Grid) -> str:
    # the rule that removed the last candidates is the one to name
    first = list(grid.rejected)[-1] if grid.rejected else "no layout"
    hint = ""
    if fixed:
        free = {k: v for k, v in fixed.items() if k != "recompute"}
        try:
            near = layout_grid(job, cl, {k: v for k, v in fixed.items()
                                         if k in ("recompute", "zero")})
            if near.cols["tp"].size:
                res = evaluate(job, cl, near.cols)
                score = sum(np.abs(np.log2(near.cols[k] / v)) for k, v in free.items()
                            if k in near.cols and isinstance(v, int) and v > 0)
                score = score + np.where(res.fits, 0, 100)
                i = int(np.argmin(score))
                r = row_at(near.cols, res, i).layout
                hint = "; nearest valid layout: " + ",".join(f"{k}={r[k]}" for k in _shown(r))
        except BadInput:
            pass
    return f"no valid layout: {first}{hint}"


def _shown(lay: Any) -> tuple[str, ...]:
    """LAYOUT_KEYS and the recompute keys the layout sets."""
    return LAYOUT_KEYS + tuple(k for k in RECOMPUTE_KEYS if k in lay.as_dict())


def _nothing_fits(job: Job, cl: Cluster, fixed: dict[str, Any], cols: dict[str, np.ndarray],
                  res: StepTerms) -> str:
    i = int(np.argmin(res.memory_per_gpu_bytes))
    need = res.memory_per_gpu_bytes[i]
    cap = res.capacity_bytes[i]
    lay = row_at(cols, res, i).layout
    more = math.ceil(cl.n_gpus * need / cap / cl.gpus_per_node) * cl.gpus_per_node
    tips = [f"about {more:,} GPUs"]
    if "recompute" in fixed and fixed["recompute"] != "full":
        tips.append("recompute=full")
    if "zero" in fixed and fixed["zero"] < 3:
        tips.append("a higher ZeRO stage")
    # dp follows from the others and etp is optional, so nine keys (eight without dp) pin a layout
    given = len(set(fixed) - {"etp", "dp"} - set(RECOMPUTE_KEYS))
    what = "the given layout" if given >= len(LAYOUT_KEYS) - 2 else "the smallest layout"
    return (f"does not fit in memory: {what} "
            f"({','.join(f'{k}={lay[k]}' for k in _shown(lay))}) needs {need / 1e9:.1f} GB per "
            f"GPU, usable {cap / 1e9:.1f} GB; try {' or '.join(tips)}")


def evaluate_one(job: Job, cl: Cluster, layout: dict[str, Any]) -> PlanRow:
    """Price one complete layout (the keys of LAYOUT_KEYS; an MoE model's etp, when not given,
    is searched); BadInput if invalid."""
    res = search(job, cl, layout, top=0)
    return res.best


def layout_columns(job: Job, cl: Cluster, lays: Any) -> dict[str, np.ndarray]:
    """The planner's columns for complete layouts (analytic/layout.py TrainLayout), each checked
    by the layout rules; BadInput names the first layout and rule broken."""
    from .layout import RULES, Context, check_stages, derived

    lays = list(lays)
    if not lays:
        raise BadInput("no layouts to evaluate")
    check_precision(job, cl)
    ctx = Context(job.model, cl.n_gpus, job.global_batch_seqs, job.seq_len, job.schedule,
                  edge_slots=_edge_slots(job), framework_id=job.framework_id)
    keys = ("tp", "pp", "dp", "cp", "ep", "zero", "vpp", "micro_batch")
    c: dict[str, np.ndarray] = {k: np.array([getattr(x, k) for x in lays], dtype=np.int64)
                                for k in keys}
    c["etp"] = np.array([x.expert_tp for x in lays], dtype=np.int64)
    c["rc"] = np.array([x.rc_code for x in lays], dtype=np.int64)
    # a split given per layout bounds its recompute_layers (the "recompute layers" rule)
    c["stages_top"] = np.array([max(x.stages) if x.stages else 0 for x in lays], dtype=np.int64)
    for k in PARALLELISM_OF:  # a value the framework profile does not offer: refused
        for v in sorted(set(c[k].tolist())):  # (np.unique would import numpy.ma)
            i = int(np.flatnonzero(c[k] == v)[0])
            check_offered(job, k, int(v), f"layout {i + 1}:" if len(lays) > 1 else "--layout")
    for i, lay in enumerate(lays):  # so is a recompute mode it does not offer, or a pairing
        where = f"layout {i + 1}:" if len(lays) > 1 else "--layout"
        check_recompute_offered(job, lay.recompute, where)
        check_pipeline_zero(job, lay.pp, lay.zero, where)
        check_replicate_1d(job, {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp,
                                 "zero": lay.zero}, where)
        check_pipeline_split(job, lay.pp, lay.vpp, lay.stages, where)
    c = derived(c, ctx)
    for r in RULES:
        if not r.applies(ctx):
            continue
        bad = np.flatnonzero(~np.asarray(r.ok(c, ctx), dtype=bool))
        if bad.size:
            i = int(bad[0])
            where = f"layout {i + 1} ({lays[i].as_text()})" if len(lays) > 1 else \
                f"--layout {lays[i].as_text()}"
            raise BadInput(f"{where}: rule {r.message(ctx)}")
    for i, x in enumerate(lays):
        if not x.sp and x.tp > 1:
            raise BadInput(f"layout {i + 1}: sp=0: the step model prices sequence parallelism on "
                           "with TP (Megatron-Core's default); 'scalemodel memory' takes sp=0")
        if x.stages is not None:
            check_stages(x.stages, x.pp, job.model)
    if any(x.stages is not None for x in lays):
        last = split_extras(job.model, job.framework_id)
        shapes = np.array([stage_shape(x.stages or stage_partition(
            job.model.n_layers, x.pp, vpp=x.vpp, **last)) for x in lays], dtype=np.int64)
        for j, k in enumerate(STAGE_COLS):
            c[k] = shapes[:, j]
    c.pop("stages_top")
    return {k: np.asarray(v, dtype=np.int64) for k, v in c.items()}


def evaluate_layouts(job: Job, cl: Cluster, lays: Any) -> list[PlanRow]:
    """Price complete layouts in one vectorised pass (``plan train --layouts FILE``, ``memory``,
    ``comm traffic``): one PlanRow per layout, in order, fitting or not."""
    lays = list(lays)
    cols = layout_columns(job, cl, lays)
    res = evaluate(job, cl, cols)
    return [PlanRow(lay, _values_at(cols, res, i)) for i, lay in enumerate(lays)]


def evaluate_layout(job: Job, cl: Cluster, lay: Any) -> PlanRow:
    """One complete layout (a TrainLayout), priced whether or not it fits."""
    return evaluate_layouts(job, cl, [lay])[0]


def cite_key(key: str) -> str:
    return cite(key)
