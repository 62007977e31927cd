"""A planned training layout written out for real frameworks (``plan train --export``).

Four texts, each a complete file that the framework accepts as written:

- ``megatron``: a bash file defining ``MEGATRON_ARGS``, the Megatron-LM ``pretrain_gpt.py``
  arguments (model shape, parallel sizes, pipeline split, batch, precision, data placeholders);
- ``torchtitan``: a torchtitan TOML job config (``--job.config_file``), pipeline split as
  ``module_fqns_per_model_part``;
- ``deepspeed``: a DeepSpeed config JSON;
- ``slurm``: an sbatch script that launches ``pretrain_gpt.py`` with torchrun on every node.

What a framework cannot express is never silently lost: one ``dropped:`` line in the text says
what was left out (a comment in the bash and TOML files, the ``_scalemodel_dropped`` key in the
JSON). The versions each export was checked against are in docs/planner.md.

The planner's layout reaches these functions through :func:`plan_of`, the one adapter from the
planner's result (a layout dict today) to the plain values the writers use.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput

FORMATS = ("megatron", "torchtitan", "deepspeed", "slurm")

# placeholders every launch needs and no plan can know; each is checked where it is used
PLACEHOLDERS = {
    "DATA_PATH": "the prefix of your tokenized Megatron dataset (the .bin/.idx pair)",
    "TOKENIZER_MODEL": "the Hugging Face tokenizer directory or hub id of the model",
    "MEGATRON_LM": "your Megatron-LM checkout (the directory holding pretrain_gpt.py)",
}


@dataclass(frozen=True)
class ExportPlan:
    """Everything an export writes, in plain values."""

    model: Any  # specs.ModelSpec
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    etp: int
    zero: int
    vpp: int
    micro_batch: int
    recompute: str
    chunks: tuple[int, ...]  # layers per model chunk; chunk j runs on pipeline stage j mod pp
    seq_len: int
    global_batch_seqs: int
    microbatches: int  # micro-batches per step on each data-parallel rank
    gpus: int
    gpus_per_node: int
    precision: str
    schedule: str  # "1f1b" or "dualpipe"
    grad_accum_fusion: bool
    ep_overlap: bool
    title: str
    recompute_modules: tuple[str, ...] = ()  # selective: the modules (() = core_attn)
    recompute_layers: int = 0  # full: layers per model chunk recomputed (0 = all)
    fp8_recipe: str = ""  # the fp8 scaling recipe priced: delayed, current, blockwise, mxfp8

    @property
    def stage_layers(self) -> tuple[int, ...]:
        out = [0] * self.pp
        for j, c in enumerate(self.chunks):
            out[j % self.pp] += c
        return tuple(out)


def plan_of(res: Any) -> ExportPlan:
    """The adapter: the planner's result (best layout as a dict) -> :class:`ExportPlan`."""
    lay, job, cl = res.best.layout, res.job, res.cluster
    chunks = tuple(res.chunk_layers)
    if sum(chunks) != job.model.n_layers or len(chunks) != lay["pp"] * lay["vpp"]:
        raise BadInput("export: the plan carries no split per model chunk")
    return ExportPlan(
        model=job.model, tp=lay["tp"], pp=lay["pp"], dp=lay["dp"], cp=lay["cp"], ep=lay["ep"],
        etp=lay.get("etp", lay["tp"]), zero=lay["zero"], vpp=lay["vpp"],
        micro_batch=lay["micro_batch"], recompute=lay["recompute"], chunks=chunks,
        seq_len=job.seq_len, global_batch_seqs=job.global_batch_seqs,
        microbatches=int(res.best.values.microbatches), gpus=cl.n_gpus,
        gpus_per_node=cl.gpus_per_node, precision=job.precision, schedule=job.schedule,
        grad_accum_fusion=job.grad_accum_fusion, ep_overlap=job.ep_overlap,
        title=f"{job.model.id} on {cl.n_gpus} x {cl.gpu.id}, seq {job.seq_len}, "
              f"global batch {job.global_batch_seqs} sequences",
        recompute_modules=tuple(x for x in str(lay.get("recompute_modules") or "").split("+")
                                if x),
        recompute_layers=int(lay.get("recompute_layers") or 0),
        fp8_recipe=str(getattr(res, "fp8_scaling", "") or ""))


def _layout_line(p: ExportPlan) -> str:
    return (f"tp={p.tp} pp={p.pp} vpp={p.vpp} dp={p.dp} cp={p.cp} ep={p.ep} etp={p.etp} "
            f"zero={p.zero} micro_batch={p.micro_batch} recompute={p.recompute}"
            + (f" recompute_modules={'+'.join(p.recompute_modules)}" if p.recompute_modules
               else "")
            + (f" recompute_layers={p.recompute_layers}" if p.recompute_layers else ""))


def _runs(bits: list[int]) -> str:
    """[0, 0, 0, 1, 1] -> '([0]*3+[1]*2)', the list expression Megatron's --moe-layer-freq takes."""
    parts: list[str] = []
    i = 0
    while i < len(bits):
        j = i
        while j < len(bits) and bits[j] == bits[i]:
            j += 1
        parts.append(f"[{bits[i]}]*{j - i}")
        i = j
    return "(" + "+".join(parts) + ")"


# --- Megatron-LM ------------------------------------------------------------------------------


def megatron_args(p: ExportPlan) -> tuple[list[str], list[str]]:
    """(argument words, dropped notes) for Megatron-LM's pretrain_gpt.py.

    Words that read a placeholder are written as "${NAME:?...}" and expanded by bash.
    """
    m = p.model
    a: list[str] = []
    dropped: list[str] = []

    def flag(name: str, value: Any = None) -> None:
        a.append(f"--{name}")
        if value is not None:
            v = str(value)
            a.append(v if v.startswith('"${') else shlex.quote(v))  # placeholders stay live

    # parallel sizes
    flag("tensor-model-parallel-size", p.tp)
    flag("pipeline-model-parallel-size", p.pp)
    flag("context-parallel-size", p.cp)
    if p.tp > 1:
        flag("sequence-parallel")
    if p.ep > 1:
        flag("expert-model-parallel-size", p.ep)
        flag("expert-tensor-parallel-size", p.etp)
    _megatron_pipeline(p, flag, dropped)

    # model shape
    flag("num-layers", m.n_layers)
    flag("hidden-size", m.hidden)
    flag("ffn-hidden-size", m.ffn)
    flag("num-attention-heads", m.n_heads)
    if m.kv_lora_rank:
        flag("multi-latent-attention")
        if m.q_lora_rank:
            flag("q-lora-rank", m.q_lora_rank)
        flag("kv-lora-rank", m.kv_lora_rank)
        flag("qk-head-dim", m.qk_nope_head_dim)
        flag("qk-pos-emb-head-dim", m.qk_rope_head_dim)
        flag("v-head-dim", m.v_head_dim)
    else:
        if m.n_kv_heads != m.n_heads:
            flag("group-query-attention")
            flag("num-query-groups", m.n_kv_heads)
        if m.head_dim * m.n_heads != m.hidden:
            flag("kv-channels", m.head_dim)
    flag("seq-length", p.seq_len)
    flag("max-position-embeddings", max(p.seq_len, m.max_context))
    if m.rope:
        flag("position-embedding-type", "rope")
    flag("normalization", "RMSNorm" if m.norm == "rms" else "LayerNorm")
    if m.gated_mlp:
        flag("swiglu")
    if not m.tied_embeddings:
        flag("untie-embeddings-and-output-weights")
    if not m.linear_bias:
        flag("disable-bias-linear")
    if m.qkv_bias and not m.linear_bias:
        flag("add-qkv-bias")
    if m.qk_norm or getattr(m, "qk_norm_full", False):
        flag("qk-layernorm")
    if not m.dropout:
        flag("attention-dropout", 0.0)
        flag("hidden-dropout", 0.0)
    if m.is_moe:
        flag("num-experts", m.n_experts)
        flag("moe-router-topk", m.top_k)
        flag("moe-ffn-hidden-size", m.moe_ffn)
        shared = m.shared_ffn or m.n_shared_experts * m.moe_ffn
        if shared:
            flag("moe-shared-expert-intermediate-size", shared)
        bits = [1 if m.layer_is_moe(i) else 0 for i in range(m.n_layers)]
        if 0 in bits:
            flag("moe-layer-freq", _runs(bits))
        if m.expert_groups:
            flag("moe-router-num-groups", m.expert_groups)
            flag("moe-router-group-topk", m.groups_per_token)
        flag("moe-grouped-gemm")
        flag("moe-token-dispatcher-type", "alltoall")
    if getattr(m, "mtp_layers", 0):
        flag("mtp-num-layers", m.mtp_layers)
    if getattr(m, "sliding_window", 0) and getattr(m, "sliding_layers", ()):
        dropped.append(f"sliding-window attention on {len(m.sliding_layers)} layers (window "
                       f"{m.sliding_window}): pretrain_gpt.py's GPT model attends to every token")
    if getattr(m, "attn_softcap", 0) or getattr(m, "final_softcap", 0):
        dropped.append("logit soft-capping: pretrain_gpt.py's GPT model has no soft-capping")
    if m.rope:
        dropped.append("rope_theta: the model spec does not carry it; add --rotary-base N (and "
                       "any rope scaling) for your model")

    # batch and memory
    flag("micro-batch-size", p.micro_batch)
    flag("global-batch-size", p.global_batch_seqs)
    if p.zero in (1, 2):
        flag("use-distributed-optimizer")
        if p.zero == 2:
            dropped.append("zero=2 gradient sharding: Megatron's distributed optimizer shards "
                           "optimizer state and reduce-scatters gradients but keeps the whole "
                           "gradient buffer on each rank")
    elif p.zero == 3:
        if p.pp == 1 and p.ep == 1 and not m.tied_embeddings:
            # Torch FSDP2 is Megatron's ZeRO-3 path; it excludes the distributed optimizer and
            # gradient-accumulation fusion and needs a torch_dist checkpoint format
            flag("use-torch-fsdp2")
            flag("no-gradient-accumulation-fusion")
            flag("ckpt-format", "torch_dist")
        else:
            flag("use-distributed-optimizer")
            why = ("pp > 1" if p.pp > 1 else "ep > 1" if p.ep > 1 else "tied embeddings")
            dropped.append(f"zero=3 parameter sharding: Megatron's --use-torch-fsdp2 does not "
                           f"allow {why}; exported as the distributed optimizer (ZeRO-1)")
    if not p.grad_accum_fusion and "--no-gradient-accumulation-fusion" not in a:
        flag("no-gradient-accumulation-fusion")
    if p.recompute == "selective":
        flag("recompute-granularity", "selective")
        if p.recompute_modules:  # Megatron-Core's default is core_attn alone
            a.extend(["--recompute-modules", *p.recompute_modules])
    elif p.recompute == "op":
        flag("recompute-granularity", "selective")
        dropped.append("recompute=op (torchtitan's op-level policy): Megatron has no such "
                       "policy; exported as selective recompute")
    elif p.recompute == "full" and p.recompute_layers:
        flag("recompute-granularity", "full")  # the first N layers of each model chunk
        flag("recompute-method", "block")
        flag("recompute-num-layers", p.recompute_layers)
    elif p.recompute == "full":
        flag("recompute-granularity", "full")
        flag("recompute-method", "uniform")
        flag("recompute-num-layers", 1)
    flag("bf16")
    if p.precision == "fp8":
        flag("fp8-format", "hybrid")
        if p.fp8_recipe:  # TransformerConfig.fp8_recipe: tensorwise is current scaling
            flag("fp8-recipe", {"current": "tensorwise"}.get(p.fp8_recipe, p.fp8_recipe))
    flag("attention-backend", "flash")
    if p.dp * p.cp > 1 or p.zero:
        flag("overlap-grad-reduce")
        if p.zero in (1, 2) or (p.zero == 3 and "--use-distributed-optimizer" in a):
            flag("overlap-param-gather")
    if p.ep_overlap:
        dropped.append("--ep-overlap: Megatron's --overlap-moe-expert-parallel-comm has its own "
                       "requirements (a combined 1F1B schedule); add it yourself if they hold")

    # data and training length: placeholders
    flag("data-path", '"${DATA_PATH:?set DATA_PATH}"')
    flag("split", "99,1,0")
    flag("tokenizer-type", "HuggingFaceTokenizer")
    flag("tokenizer-model", '"${TOKENIZER_MODEL:?set TOKENIZER_MODEL}"')
    flag("train-iters", '"${TRAIN_ITERS:-1000}"')
    flag("lr", '"${LR:-3e-4}"')
    flag("min-lr", '"${MIN_LR:-3e-5}"')
    flag("lr-decay-style", "cosine")
    flag("lr-warmup-iters", '"${WARMUP_ITERS:-100}"')
    flag("weight-decay", 0.1)
    flag("clip-grad", 1.0)
    flag("log-interval", 1)
    flag("eval-iters", 0)
    return a, dropped


def _megatron_pipeline(p: ExportPlan, flag: Any, dropped: list[str]) -> None:
    """The pipeline split in the plainest Megatron-LM arguments that express it exactly."""
    if p.schedule == "dualpipe":
        dropped.append("DualPipe schedule: Megatron-LM has none; the pipeline runs its 1F1B "
                       "(interleaved when vpp > 1) schedule")
    if p.pp == 1:
        return
    chunks, stages = p.chunks, p.stage_layers
    even = len(set(chunks)) == 1
    mid = stages[1:-1]
    if even:
        if p.vpp > 1:
            flag("num-virtual-stages-per-pipeline-rank", p.vpp)
    elif p.vpp == 1 and len(set(mid)) <= 1:
        flag("decoder-first-pipeline-num-layers", stages[0])
        flag("decoder-last-pipeline-num-layers", stages[-1])
    else:
        # the planner's split per model chunk, exactly: E = embedding, t = a decoder layer,
        # m = a multi-token-prediction layer, L = the loss; '|' separates chunks (chunk j on
        # stage j mod pp, Megatron's order)
        mtp = "m" * getattr(p.model, "mtp_layers", 0)
        # (a last chunk may hold no decoder layer of its own beside its MTP layers: "mL")
        parts = [("E" if j == 0 else "") + (f"t*{c}" if c else "")
                 + (("," if c else "") + mtp + "L" if j == len(chunks) - 1 else "")
                 for j, c in enumerate(chunks)]
        flag("pipeline-model-parallel-layout", "|".join(parts))
    if p.vpp > 1 and p.microbatches % p.pp:
        # Megatron's interleaved schedule runs micro-batches in groups (pp by default) and
        # refuses a last group smaller than pp; one group of all micro-batches always works
        flag("microbatch-group-size-per-virtual-pipeline-stage", p.microbatches)


def _bash_array(name: str, words: list[str]) -> list[str]:
    out = [f"{name}=("]
    line = "  "
    for w in words:
        if w.startswith("--") and line.strip():
            out.append(line.rstrip())
            line = "  "
        line += w + " "
    if line.strip():
        out.append(line.rstrip())
    return out + [")"]


def _comments(p: ExportPlan, what: str, dropped: list[str], mark: str = "#") -> list[str]:
    lines = [f"{mark} scalemodel plan train export: {what}",
             f"{mark} plan: {p.title}",
             f"{mark} layout: {_layout_line(p)}; layers per stage {list(p.stage_layers)}"
             + (f", per model chunk {list(p.chunks)}" if p.vpp > 1 else "")]
    return lines + [f"{mark} dropped: {d}" for d in dropped]


def megatron(p: ExportPlan) -> str:
    words, dropped = megatron_args(p)
    head = _comments(p, "Megatron-LM pretrain_gpt.py arguments", dropped)
    head += ["# use: source this file, then",
             '#   torchrun ... "$MEGATRON_LM/pretrain_gpt.py" "${MEGATRON_ARGS[@]}"',
             "# placeholders (set them in the environment before sourcing):"]
    head += [f"#   {k}: {v}" for k, v in PLACEHOLDERS.items() if k != "MEGATRON_LM"]
    head += ["#   TRAIN_ITERS, LR, MIN_LR, WARMUP_ITERS: optional, defaults shown below"]
    return "\n".join(head + _bash_array("MEGATRON_ARGS", words)) + "\n"


# --- Slurm + torchrun -------------------------------------------------------------------------


def slurm(p: ExportPlan) -> str:
    per = p.gpus_per_node
    if p.gpus <= per:
        nodes, per = 1, p.gpus
    elif p.gpus % per:
        raise BadInput(f"--export slurm: {p.gpus} GPUs do not fill whole nodes of {per} GPUs; "
                       "torchrun starts the same number of processes on every node")
    else:
        nodes = p.gpus // per
    words, dropped = megatron_args(p)
    fsdp2 = "--use-torch-fsdp2" in words
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=scalemodel-{p.model.id}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={per}",
        "#SBATCH --exclusive",
        *_comments(p, "Slurm + torchrun launch of Megatron-LM pretrain_gpt.py", dropped),
        "# placeholders: export these before sbatch (the script stops and names a missing one)",
        *[f"#   {k}: {v}" for k, v in PLACEHOLDERS.items()],
        "set -euo pipefail",
        *[f': "${{{k}:?set {k}: {v}}}"' for k, v in PLACEHOLDERS.items()],
        # Megatron wants one hardware queue so TP/SP communication kernels run in issue order;
        # FSDP2 requires more than one
        "export CUDA_DEVICE_MAX_CONNECTIONS=" + ("8" if fsdp2 else "1"),
        # the first node of the allocation hosts the rendezvous (no pipe: under pipefail a
        # closed pipe would fail the script)
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'MASTER_ADDR="${NODES[0]}"',
        'MASTER_PORT="${MASTER_PORT:-29500}"',
        *_bash_array("MEGATRON_ARGS", words),
        "srun --kill-on-bad-exit=1 torchrun \\",
        f"  --nnodes={nodes} --nproc-per-node={per} \\",
        '  --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d \\',
        '  --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \\',
        '  "$MEGATRON_LM/pretrain_gpt.py" "${MEGATRON_ARGS[@]}"',
    ]
    return "\n".join(lines) + "\n"


# --- torchtitan -------------------------------------------------------------------------------

# torchtitan's model registry names for the families it ships (torchtitan/models/*)
_TITAN_MODELS = {"llama": "llama3", "qwen3": "qwen3", "qwen3_moe": "qwen3",
                 "deepseek_v3": "deepseek_v3"}


def _toml(v: Any) -> str:
    return json.dumps(v)  # ints, strings, bools, lists of strings: JSON and TOML agree


def _titan_parts(p: ExportPlan) -> tuple[str, list[list[str]]]:
    """(schedule, module names per model part) for torchtitan's pipeline."""
    n = p.model.n_layers
    if p.schedule == "dualpipe":
        # DualPipeV: two chunks per stage in a V (stage r holds parts r and 2pp-1-r)
        halves: list[int] = [0] * (2 * p.pp)
        for r, s in enumerate(p.stage_layers):
            halves[r] = (s + 1) // 2
            halves[2 * p.pp - 1 - r] = s // 2
        counts, sched = halves, "DualPipeV"
    else:
        counts = list(p.chunks)
        sched = "Interleaved1F1B" if p.vpp > 1 else "1F1B"
    parts, i = [], 0
    for j, c in enumerate(counts):
        names = (["tok_embeddings"] if j == 0 else []) + [f"layers.{k}" for k in range(i, i + c)]
        i += c
        if j == len(counts) - 1:
            names += ["norm", "output"]
        parts.append(names)
    assert i == n
    return sched, parts


def torchtitan(p: ExportPlan) -> str:
    dropped: list[str] = []
    fam = p.model.family
    name = _TITAN_MODELS.get(fam)
    if p.zero == 0:
        rep, shard, reshard = p.dp, 1, None
    else:
        rep, shard = 1, p.dp
        reshard = "always" if p.zero == 3 else "never"
        if p.zero == 1:
            dropped.append("zero=1: torchtitan shards with FSDP2 only; exported as FSDP that "
                           "keeps parameters gathered after forward (ZeRO-2-like)")
    dropped.extend(_partial_recompute_dropped(p, "torchtitan"))
    if p.precision == "fp8" and p.fp8_recipe not in ("", "current"):
        dropped.append(f"fp8 recipe {p.fp8_recipe}: torchtitan's float8 converter is exported "
                       "with torchao's tensorwise dynamic (current) scaling")
    ac = {"none": "none", "selective": "selective", "full": "full", "op": "selective"}
    # with a pipeline one step's micro-batches all feed it; without, the local batch is one
    # micro-batch and the rest is gradient accumulation (global / (local x dp ranks))
    local = p.micro_batch * p.microbatches if p.pp > 1 else p.micro_batch
    lines = _comments(p, "torchtitan job config (run with --job.config_file FILE)", dropped)
    lines += [
        "",
        "[model]",
        f"name = {_toml(name or 'SET_ME')}" + ("" if name else
                                            f"  # placeholder: torchtitan's model for {fam}"),
        'flavor = "SET_ME"  # placeholder: the torchtitan flavor of ' + p.model.id,
        'hf_assets_path = "SET_ME"  # placeholder: tokenizer directory',
    ]
    if p.precision == "fp8":
        lines.append('converters = ["quantize.linear.float8"]')
    lines += [
        "",
        "[training]",
        f"seq_len = {p.seq_len}",
        f"local_batch_size = {local}",
        f"global_batch_size = {p.global_batch_seqs}",
        'mixed_precision_param = "bfloat16"',
        "steps = 1000  # placeholder: training length",
        "",
        "[parallelism]",
        f"data_parallel_replicate_degree = {rep}",
        f"data_parallel_shard_degree = {shard}",
    ]
    if reshard:
        lines.append(f"fsdp_reshard_after_forward = {_toml(reshard)}")
    lines += [f"tensor_parallel_degree = {p.tp}",
              f"context_parallel_degree = {p.cp}",
              f"pipeline_parallel_degree = {p.pp}"]
    if p.pp > 1:
        sched, parts = _titan_parts(p)
        lines += [f"pipeline_parallel_microbatch_size = {p.micro_batch}",
                  f"pipeline_parallel_schedule = {_toml(sched)}",
                  "module_fqns_per_model_part = ["]
        lines += [f"  {_toml(x)}," for x in parts]
        lines.append("]")
    if p.ep > 1:
        lines += [f"expert_parallel_degree = {p.ep}",
                  f"expert_tensor_parallel_degree = {p.etp}"]
    lines += ["", "[activation_checkpoint]", f"mode = {_toml(ac[p.recompute])}"]
    if p.recompute == "op":
        lines.append('selective_ac_option = "op"')
    if p.precision == "fp8":
        lines += ["", "[quantize.linear.float8]",
                  f"enable_fsdp_float8_all_gather = {'true' if shard > 1 else 'false'}",
                  f"precompute_float8_dynamic_scale_for_fsdp = "
                  f"{'true' if shard > 1 else 'false'}"]
    return "\n".join(lines) + "\n"


# --- DeepSpeed --------------------------------------------------------------------------------


def _partial_recompute_dropped(p: ExportPlan, name: str) -> list[str]:
    """Notes for the partial recompute policies a non-Megatron config cannot state."""
    out = []
    if p.recompute_modules:
        out.append(f"recompute_modules={'+'.join(p.recompute_modules)}: {name} has no per-module "
                   "recompute list (Megatron-Core's --recompute-modules); exported as "
                   f"{p.recompute} recompute")
    if p.recompute_layers:
        out.append(f"recompute_layers={p.recompute_layers}: {name} recomputes every layer or "
                   "none here; exported as full recompute")
    return out


def deepspeed(p: ExportPlan) -> str:
    dropped: list[str] = []
    zero = p.zero
    if p.pp > 1 and zero >= 2:
        dropped.append(f"zero={zero}: DeepSpeed's pipeline engine allows ZeRO stage 0 or 1 only; "
                       "exported as stage 1")
        zero = 1
    if p.precision == "fp8":
        dropped.append("fp8: DeepSpeed's config has no fp8 training switch (use Transformer "
                       "Engine in the model code); exported as bf16")
    if p.recompute == "op":
        dropped.append("recompute=op: DeepSpeed checkpoints whole layers; exported as "
                       "activation checkpointing")
    dropped.extend(_partial_recompute_dropped(p, "DeepSpeed"))
    cfg: dict[str, Any] = {
        "train_batch_size": p.global_batch_seqs,
        "train_micro_batch_size_per_gpu": p.micro_batch,
        "gradient_accumulation_steps": p.microbatches,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": zero, "overlap_comm": True,
                              "contiguous_gradients": True},
        "gradient_clipping": 1.0,
        "activation_checkpointing": {"partition_activations": p.recompute != "none" and p.tp > 1,
                                     "contiguous_memory_optimization": False},
        "wall_clock_breakdown": False,
    }
    if p.cp > 1:
        cfg["sequence_parallel_size"] = p.cp
    cfg["_scalemodel_plan"] = f"{p.title}; {_layout_line(p)}"
    cfg["_scalemodel_layout_note"] = (
        "DeepSpeed takes tensor, pipeline and expert parallelism from the model code "
        f"(Megatron-DeepSpeed arguments), not from this file: tp={p.tp}, pp={p.pp}, ep={p.ep}, "
        f"etp={p.etp}; data-parallel size {p.dp}")
    if dropped:
        cfg["_scalemodel_dropped"] = dropped
    return json.dumps(cfg, indent=2) + "\n"


def export(fmt: str, res: Any) -> str:
    """The text of one export of the planner's best layout."""
    p = plan_of(res)
    return {"megatron": megatron, "torchtitan": torchtitan, "deepspeed": deepspeed,
            "slurm": slurm}[fmt](p)


def write_export(path: str, text: str, *, executable: bool = False) -> None:
    """Write an export to ``path`` exactly as generated (a launch script is made executable)."""
    import os

    try:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        if executable:
            os.chmod(path, 0o755)
    except OSError as e:
        raise BadInput(f"--export-out: cannot write {path}: {e.strerror}") from None
