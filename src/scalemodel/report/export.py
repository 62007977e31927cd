"""A planned training layout written out for real frameworks (``plan train --export``).

Pure text from plain values: Megatron-LM arguments, a torchtitan TOML fragment, a DeepSpeed
JSON and a torchrun / Slurm launch line. Flag names follow each project's documentation
(Megatron-LM arguments.py, torchtitan job config, DeepSpeed config-json); check them against the
version you run.
"""

from __future__ import annotations

import json
from typing import Any

FORMATS = ("megatron", "torchtitan", "deepspeed", "slurm")


def megatron(lay: dict[str, Any], job: dict[str, Any]) -> str:
    args = [
        f"--tensor-model-parallel-size {lay['tp']}",
        f"--pipeline-model-parallel-size {lay['pp']}",
        f"--context-parallel-size {lay['cp']}",
        f"--micro-batch-size {lay['micro_batch']}",
        f"--global-batch-size {job['global_batch_seqs']}",
        f"--seq-length {job['seq_len']}",
    ]
    if lay["tp"] > 1:
        args.append("--sequence-parallel")
    if lay["ep"] > 1:
        args.append(f"--expert-model-parallel-size {lay['ep']}")
        args.append(f"--expert-tensor-parallel-size {lay.get('etp', lay['tp'])}")
    if lay["vpp"] > 1:
        args.append(f"--num-layers-per-virtual-pipeline-stage "
                    f"{max(1, job['n_layers'] // (lay['pp'] * lay['vpp']))}")
    stages = job.get("stage_layers") or ()
    if lay["pp"] > 1 and len(set(stages)) > 1:
        args.append(f"--decoder-first-pipeline-num-layers {stages[0]}")
        args.append(f"--decoder-last-pipeline-num-layers {stages[-1]}")
    if lay["zero"] >= 1:
        args.append("--use-distributed-optimizer")
    if lay["zero"] >= 3:
        args.append("--use-torch-fsdp2  # ZeRO-3: Megatron-core's FSDP path")
    if lay["recompute"] == "selective":
        args.append("--recompute-activations")
    elif lay["recompute"] == "full":
        args += ["--recompute-granularity full", "--recompute-method uniform",
                 "--recompute-num-layers 1"]
    elif lay["recompute"] == "op":
        args.append("--recompute-activations  # torchtitan's op-level policy has no Megatron "
                    "flag: selective is the nearest")
    args.append("--bf16" if job["precision"] == "bf16" else "--bf16 --fp8-format hybrid")
    args += ["--use-flash-attn", "--overlap-grad-reduce", "--overlap-param-gather"]
    return " \\\n  ".join(args)


def torchtitan(lay: dict[str, Any], job: dict[str, Any]) -> str:
    ac = {"none": "none", "selective": "selective", "full": "full",
          "op": "selective"}[lay["recompute"]]
    shard = lay["dp"] if lay["zero"] >= 1 else 1
    rep = 1 if lay["zero"] >= 1 else lay["dp"]
    lines = [
        "[training]",
        f"seq_len = {job['seq_len']}",
        f"local_batch_size = {lay['micro_batch'] * job['microbatches']}",
        f"global_batch_size = {job['global_batch_seqs']}",
        "mixed_precision_param = \"bfloat16\"",
        "",
        "[parallelism]",
        f"data_parallel_replicate_degree = {rep}",
        f"data_parallel_shard_degree = {shard}",
        f"tensor_parallel_degree = {lay['tp']}",
        f"context_parallel_degree = {lay['cp']}",
        f"pipeline_parallel_degree = {lay['pp']}",
        f"pipeline_parallel_microbatch_size = {lay['micro_batch']}",
        "pipeline_parallel_schedule = \"" + ("Interleaved1F1B" if lay["vpp"] > 1 else "1F1B")
        + "\"",
    ]
    if lay["ep"] > 1:
        lines.append(f"expert_parallel_degree = {lay['ep']}")
        lines.append(f"expert_tensor_parallel_degree = {lay.get('etp', lay['tp'])}")
    lines += ["", "[activation_checkpoint]", f"mode = \"{ac}\""]
    if lay["recompute"] == "op":
        lines.append("selective_ac_option = \"op\"")
    if job["precision"] == "fp8":
        lines += ["", "[float8]", "enable_fsdp_float8_all_gather = true"]
    return "\n".join(lines)


def deepspeed(lay: dict[str, Any], job: dict[str, Any]) -> str:
    cfg = {
        "train_batch_size": job["global_batch_seqs"],
        "train_micro_batch_size_per_gpu": lay["micro_batch"],
        "gradient_accumulation_steps": job["microbatches"],
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": lay["zero"], "overlap_comm": True,
                              "contiguous_gradients": True},
        "activation_checkpointing": {"partition_activations": lay["recompute"] != "none",
                                     "contiguous_memory_optimization": False},
        "wall_clock_breakdown": False,
    }
    note = {"tensor_parallel": lay["tp"], "pipeline_parallel": lay["pp"],
            "sequence_parallel (Ulysses)": lay["cp"], "expert_parallel": lay["ep"],
            "expert_tensor_parallel": lay.get("etp", lay["tp"])}
    cfg["_scalemodel_layout_note"] = (
        "DeepSpeed takes TP/PP/SP/EP from the model code (Megatron-DeepSpeed arguments), "
        f"not from this file: {note}")
    return json.dumps(cfg, indent=2)


def slurm(lay: dict[str, Any], job: dict[str, Any]) -> str:
    n, per = job["gpus"], job["gpus_per_node"]
    nodes = -(-n // per)
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={per}",
        "#SBATCH --exclusive",
        "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
        f"srun torchrun --nnodes={nodes} --nproc-per-node={per} \\",
        "  --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500 \\",
        "  pretrain_gpt.py " + megatron(lay, job).replace(" \\\n  ", " "),
    ])


def export(fmt: str, lay: dict[str, Any], job: dict[str, Any]) -> str:
    return {"megatron": megatron, "torchtitan": torchtitan, "deepspeed": deepspeed,
            "slurm": slurm}[fmt](lay, job)
