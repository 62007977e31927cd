"""plan train --export, validated by each framework's own checks (issue 18, item 1).

- Megatron-LM: megatron-core from PyPI builds its TransformerConfig (and ModelParallelConfig)
  from the exported arguments, mapped the way Megatron-LM's
  megatron/training/argument_utils.py ``core_transformer_config_from_args`` maps them; the
  argument rules of megatron/training/arguments.py ``validate_args`` that megatron-core does
  not hold are restated below with their source lines (Megatron-LM commit d98e8a6, read with
  the fetch tool; the rules are restated, not copied).
- torchtitan: its ConfigManager parses the exported TOML into JobConfig, ParallelDims checks
  the degrees, and the pipeline rules of torchtitan/distributed/pipeline_parallel.py are
  restated (torchtitan 0.2.2 from PyPI, installed with --no-deps; only torchtitan.config and
  torchtitan.distributed.parallel_dims are imported, without the package __init__ that pulls
  tokenizers and datasets).
- DeepSpeed: deepspeed.runtime.config.DeepSpeedConfig parses the JSON and checks the batch
  arithmetic against the data-parallel size.
- Slurm: ``bash -n``, then the script runs as written with stand-ins for srun, scontrol and
  torchrun; the arguments torchrun receives pass the Megatron checks above.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from scalemodel.cli import main

MEGATRON_LM = "Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553"
PLACEHOLDER_ENV = {"DATA_PATH": "/data/corpus_text_document", "TOKENIZER_MODEL": "/tok",
                   "MEGATRON_LM": "/opt/Megatron-LM"}

# plans that cover the export paths: an uneven split with virtual stages (the README example),
# an uneven split without, ZeRO 0 and 3, full/op recompute, MoE with expert TP folding, MLA
# with dense first layers and MTP, fp8
CASES = {
    "readme-70b": ["--model", "llama-3-70b", "--gpus", "64", "--layout", "tp=8,pp=2"],
    # interleaving pinned: the search's own pick for tp=8,pp=2 moves with pricing
    "70b-vpp2": ["--model", "llama-3-70b", "--gpus", "64", "--layout", "tp=8,pp=2,vpp=2"],
    "70b-uneven-novpp": ["--model", "llama-3-70b", "--gpus", "64", "--layout",
                         "tp=8,pp=4,vpp=1"],
    # pp=4: at pp=2 the default profile's fp32 main gradients (18 B per parameter unsharded)
    # no longer fit a stage of 70B / 16 parameters in 80 GB
    "70b-zero0": ["--model", "llama-3-70b", "--gpus", "64", "--layout", "tp=8,pp=4,zero=0"],
    "8b-zero3": ["--model", "llama-3-8b", "--gpus", "8", "--seq-len", "4096", "--layout",
                 "tp=1,pp=1,dp=8,zero=3,recompute=full"],
    "8b-zero3-pp": ["--model", "llama-3-8b", "--gpus", "16", "--seq-len", "4096", "--layout",
                    "tp=2,pp=2,zero=3,recompute=op", "--kernels", "eager",
                    "--framework", "torchtitan"],
    "qwen3-235b-folded": ["--model", "qwen3-235b-a22b", "--gpus", "256", "--seq-len", "4096",
                          "--global-batch", "8192", "--precision", "fp8", "--layout",
                          "tp=2,pp=8,vpp=4,ep=32,micro_batch=1,zero=1,recompute=none"],
    "deepseek-v3": ["--model", "deepseek-v3", "--gpus", "256", "--seq-len", "4096",
                    "--global-batch", "1024", "--layout", "tp=2,pp=8,ep=16,recompute=selective"],
    "70b-dualpipe": ["--model", "llama-3-70b", "--gpus", "64", "--schedule", "dualpipe",
                     "--layout", "tp=8,pp=4"],
    "gpt3-175b": ["--model", "gpt3-175b", "--gpus", "512", "--seq-len", "2048", "--global-batch",
                  "1536", "--layout", "tp=8,pp=8,vpp=1"],
    "qwen2.5-72b": ["--model", "qwen2.5-72b", "--gpus", "64", "--seq-len", "4096",
                    "--global-batch", "256", "--layout", "tp=8,pp=2,vpp=4"],
    "mixtral-cp": ["--model", "mixtral-8x7b", "--gpus", "32", "--seq-len", "32768",
                   "--global-batch", "64", "--layout", "tp=4,cp=2,ep=4,pp=1"],
}


def plan(capsys, name: str, fmt: str) -> dict:
    assert main(["plan", "train", *CASES[name], "--export", fmt, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- Megatron-LM -------------------------------------------------------------------------------

# where each exported flag is defined in Megatron-LM (file:line at the commit above); flags
# generated from a config dataclass by ArgumentGroupFactory (megatron/training/argument_utils.py:
# field name with dashes, '--no-' for a True default, or the field's argparse_meta arg_names)
# name the field's line
MEGATRON_FLAGS = {
    "--attention-backend": "megatron/core/transformer/transformer_config.py:151",
    "--attention-dropout": "megatron/core/transformer/transformer_config.py:191",
    "--bf16": "megatron/core/model_parallel_config.py:180",
    "--ckpt-format": "megatron/training/config/training_config.py:486",
    "--clip-grad": "megatron/training/arguments.py:2615",
    "--context-parallel-size": "megatron/core/model_parallel_config.py:100",
    "--data-path": "megatron/training/arguments.py:3255",
    "--decoder-first-pipeline-num-layers": "megatron/training/arguments.py:3095",
    "--decoder-last-pipeline-num-layers": "megatron/training/arguments.py:3099",
    "--disable-bias-linear": "megatron/core/transformer/transformer_config.py:213",
    "--add-qkv-bias": "megatron/core/transformer/transformer_config.py:218",
    "--eval-iters": "megatron/training/config/training_config.py:115",
    "--expert-model-parallel-size": "megatron/core/model_parallel_config.py:127",
    "--expert-tensor-parallel-size": "megatron/core/model_parallel_config.py:130",
    "--ffn-hidden-size": "megatron/core/transformer/transformer_config.py:180",
    "--fp8-format": "megatron/core/transformer/transformer_config.py:588",
    "--fp8-recipe": "megatron/core/transformer/transformer_config.py:594",
    "--global-batch-size": "megatron/training/config/training_config.py:15",
    "--group-query-attention": "megatron/training/arguments.py:2382",
    "--hidden-dropout": "megatron/core/transformer/transformer_config.py:188",
    "--hidden-size": "megatron/core/transformer/transformer_config.py:145",
    "--kv-channels": "megatron/core/transformer/transformer_config.py:184",
    "--kv-lora-rank": "megatron/training/arguments.py:3550",
    "--log-interval": "megatron/training/config/training_config.py:247",
    "--lr": "megatron/training/arguments.py:2984",
    "--lr-decay-style": "megatron/training/config/training_config.py:169",
    "--lr-warmup-iters": "megatron/training/config/training_config.py:190",
    "--max-position-embeddings": "megatron/training/arguments.py:2394",
    "--micro-batch-size": "megatron/training/config/training_config.py:11",
    "--microbatch-group-size-per-virtual-pipeline-stage":
        "megatron/core/model_parallel_config.py:434",
    "--min-lr": "megatron/training/arguments.py:2991",
    "--moe-ffn-hidden-size": "megatron/core/transformer/transformer_config.py:740",
    "--moe-grouped-gemm": "megatron/core/transformer/transformer_config.py:850",
    "--moe-layer-freq": "megatron/training/arguments.py:3520",
    "--moe-router-group-topk": "megatron/core/transformer/transformer_config.py:796",
    "--moe-router-num-groups": "megatron/core/transformer/transformer_config.py:780",
    "--moe-router-topk": "megatron/core/transformer/transformer_config.py:760",
    "--moe-shared-expert-intermediate-size": "megatron/core/transformer/transformer_config.py:701",
    "--moe-token-dispatcher-type": "megatron/core/transformer/transformer_config.py:891",
    "--mtp-num-layers": "megatron/core/transformer/transformer_config.py:68",
    "--multi-latent-attention": "megatron/core/transformer/transformer_config.py:288",
    "--no-gradient-accumulation-fusion": "megatron/training/arguments.py:2944",
    "--normalization": "megatron/core/transformer/transformer_config.py:256",
    "--num-attention-heads": "megatron/core/transformer/transformer_config.py:148",
    "--num-experts": "megatron/training/arguments.py:3518",
    "--num-layers": "megatron/core/transformer/transformer_config.py:65",
    "--num-query-groups": "megatron/core/transformer/transformer_config.py:175",
    "--num-virtual-stages-per-pipeline-rank": "megatron/training/arguments.py:3116",
    "--overlap-grad-reduce": "megatron/training/arguments.py:3121",
    "--overlap-param-gather": "megatron/training/arguments.py:3148",
    "--pipeline-model-parallel-layout": "megatron/training/arguments.py:3103",
    "--pipeline-model-parallel-size": "megatron/core/model_parallel_config.py:83",
    "--position-embedding-type": "megatron/training/arguments.py:2397",
    "--q-lora-rank": "megatron/training/arguments.py:3548",
    "--qk-head-dim": "megatron/training/arguments.py:3552",
    "--qk-layernorm": "megatron/core/transformer/transformer_config.py:259",
    "--qk-pos-emb-head-dim": "megatron/training/arguments.py:3554",
    "--recompute-granularity": "megatron/core/transformer/transformer_config.py:532",
    "--recompute-method": "megatron/core/transformer/transformer_config.py:543",
    "--recompute-num-layers": "megatron/core/transformer/transformer_config.py:551",
    "--recompute-modules": "megatron/core/transformer/transformer_config.py:560",
    "--seq-length": "megatron/training/arguments.py:3305",
    "--sequence-parallel": "megatron/core/model_parallel_config.py:94",
    "--split": "megatron/training/arguments.py:3266",
    "--swiglu": "megatron/training/arguments.py:2450",
    "--tensor-model-parallel-size": "megatron/core/model_parallel_config.py:11",
    "--tokenizer-model": "megatron/training/config/training_config.py:714",
    "--tokenizer-type": "megatron/training/config/training_config.py:698",
    "--train-iters": "megatron/training/config/training_config.py:64",
    "--untie-embeddings-and-output-weights": "megatron/training/arguments.py:2460",
    "--use-distributed-optimizer": "megatron/training/arguments.py:3156",
    "--use-torch-fsdp2": "megatron/training/config/common_config.py:95",
    "--v-head-dim": "megatron/training/arguments.py:3556",
    "--weight-decay": "megatron/training/arguments.py:2611",
}


def bash_array(text: str, name: str = "MEGATRON_ARGS") -> list[str]:
    """The words bash itself puts in the array after sourcing the export."""
    r = subprocess.run(["bash", "-c", f'source /dev/stdin; printf "%s\\0" "${{{name}[@]}}"'],
                       input=text, capture_output=True, text=True, check=True,
                       env={**os.environ, **PLACEHOLDER_ENV})
    return r.stdout.split("\0")[:-1]


def parse_flags(argv: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    key = None
    for w in argv:
        if w.startswith("--"):
            assert w not in out, f"{w} given twice"
            key = w
            out[key] = []
        else:
            assert key is not None, f"value {w!r} before any flag"
            out[key].append(w)
    return out


def _layer_freq(expr: str) -> list[int]:
    """'([0]*3+[1]*58)' -> the list (Megatron evaluates the expression; this reads that form)."""
    assert re.fullmatch(r"\((\[[01]\]\*\d+\+?)+\)", expr), expr
    return [int(b) for b, n in re.findall(r"\[([01])\]\*(\d+)", expr) for _ in range(int(n))]


def megatron_rules(f: dict[str, list[str]], env: dict[str, str] | None = None) -> int | None:
    """Megatron-LM's validate_args rules (megatron/training/arguments.py) that megatron-core's
    configs do not hold; returns the virtual-pipeline size validate_args derives."""
    def one(k: str) -> int:
        return int(f[k][0])

    for k in f:
        assert k in MEGATRON_FLAGS, f"{k} is not a Megatron-LM argument at {MEGATRON_LM}"
    pp = one("--pipeline-model-parallel-size")
    n_layers = one("--num-layers")
    first_last = "--decoder-first-pipeline-num-layers" in f or \
        "--decoder-last-pipeline-num-layers" in f
    vpp_ways = [k for k in ("--num-layers-per-virtual-pipeline-stage",
                            "--num-virtual-stages-per-pipeline-rank",
                            "--pipeline-model-parallel-layout") if k in f]
    # arguments.py:928-939: at most one way to ask for virtual stages
    assert len(vpp_ways) <= 1, vpp_ways
    vpp = None
    if "--pipeline-model-parallel-layout" in f:
        # arguments.py:941-952: the layout's stage count divides by pp; vpp = stages / pp
        n = len(f["--pipeline-model-parallel-layout"][0].replace(",", "").split("|"))
        assert n % pp == 0
        vpp = n // pp if n // pp > 1 else None
    elif "--num-layers-per-virtual-pipeline-stage" in f:
        # arguments.py:954-956: uneven pipelines must use --num-virtual-stages-per-pipeline-rank
        assert not first_last, "uneven pipeline with --num-layers-per-virtual-pipeline-stage"
    elif "--num-virtual-stages-per-pipeline-rank" in f:
        vpp = one("--num-virtual-stages-per-pipeline-rank")
        vpp = vpp if vpp > 1 else None
    elif not first_last:
        # arguments.py:985-1000: an even split needs the layers to divide by pp
        assert n_layers % pp == 0, (n_layers, pp)
    # arguments.py:1003-1012: the interleaved schedule needs pp > 2 unless p2p overlap is on;
    # it is on by default (arguments.py:3118, --no-overlap-p2p-communication turns it off)
    if vpp is not None and "--no-overlap-p2p-communication" in f:
        assert pp > 2
    # arguments.py:1024-1029: param-gather overlap needs the distributed optimizer and
    # grad-reduce overlap
    if "--overlap-param-gather" in f:
        assert "--use-distributed-optimizer" in f
        assert "--overlap-grad-reduce" in f
    # arguments.py:1031-1051: Torch FSDP2 excludes pipeline and expert parallelism, the
    # distributed optimizer and gradient-accumulation fusion; it needs a torch_dist/dcp
    # checkpoint format, untied embeddings and CUDA_DEVICE_MAX_CONNECTIONS other than 1
    if "--use-torch-fsdp2" in f:
        assert pp == 1
        assert int(f.get("--expert-model-parallel-size", ["1"])[0]) == 1
        assert "--use-distributed-optimizer" not in f
        assert "--no-gradient-accumulation-fusion" in f
        assert f.get("--ckpt-format", [""])[0] in ("torch_dist", "torch_dcp")
        assert "--untie-embeddings-and-output-weights" in f
        if env is not None:
            assert env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1"
    # every flag that takes a value has exactly one; switches have none; list arguments
    # (TransformerConfig fields typed List[str], e.g. recompute_modules) take their words
    for k, v in f.items():
        assert len(v) <= 1 or k in ("--recompute-modules",), (k, v)
    return vpp


def megatron_config(f: dict[str, list[str]], vpp: int | None):
    """megatron-core's TransformerConfig from the arguments, mapped as Megatron-LM's
    core_transformer_config_from_args (megatron/training/argument_utils.py:277-381) does."""
    import torch
    import torch.nn.functional as F
    tc = pytest.importorskip("megatron.core.transformer.transformer_config")

    def get(k, cast=int, default=None):
        return cast(f[k][0]) if k in f else default

    kw = dict(
        num_layers=get("--num-layers"), hidden_size=get("--hidden-size"),
        ffn_hidden_size=get("--ffn-hidden-size"),
        num_attention_heads=get("--num-attention-heads"),
        num_query_groups=get("--num-query-groups") if "--group-query-attention" in f else None,
        kv_channels=get("--kv-channels"),
        tensor_model_parallel_size=get("--tensor-model-parallel-size"),
        pipeline_model_parallel_size=get("--pipeline-model-parallel-size"),
        virtual_pipeline_model_parallel_size=vpp,
        context_parallel_size=get("--context-parallel-size"),
        sequence_parallel="--sequence-parallel" in f,
        expert_model_parallel_size=get("--expert-model-parallel-size", default=1),
        expert_tensor_parallel_size=get("--expert-tensor-parallel-size"),
        num_layers_in_first_pipeline_stage=get("--decoder-first-pipeline-num-layers"),
        num_layers_in_last_pipeline_stage=get("--decoder-last-pipeline-num-layers"),
        pipeline_model_parallel_layout=get("--pipeline-model-parallel-layout", str),
        normalization=get("--normalization", str, "LayerNorm"),
        add_bias_linear="--disable-bias-linear" not in f,
        add_qkv_bias="--add-qkv-bias" in f,
        qk_layernorm="--qk-layernorm" in f,
        attention_dropout=get("--attention-dropout", float, 0.1),
        hidden_dropout=get("--hidden-dropout", float, 0.1),
        recompute_granularity=get("--recompute-granularity", str),
        recompute_method=get("--recompute-method", str),
        recompute_num_layers=get("--recompute-num-layers"),
        bf16="--bf16" in f, params_dtype=torch.bfloat16 if "--bf16" in f else torch.float32,
        pipeline_dtype=torch.bfloat16 if "--bf16" in f else torch.float32,
        fp8=get("--fp8-format", str), fp8_recipe=get("--fp8-recipe", str, "delayed"),
        gradient_accumulation_fusion="--no-gradient-accumulation-fusion" not in f,
        num_moe_experts=get("--num-experts"),
        moe_router_topk=get("--moe-router-topk", default=2),
        moe_ffn_hidden_size=get("--moe-ffn-hidden-size"),
        moe_shared_expert_intermediate_size=get("--moe-shared-expert-intermediate-size"),
        moe_grouped_gemm="--moe-grouped-gemm" in f,
        moe_token_dispatcher_type=get("--moe-token-dispatcher-type", str, "allgather"),
        moe_router_num_groups=get("--moe-router-num-groups"),
        moe_router_group_topk=get("--moe-router-group-topk"),
        mtp_num_layers=get("--mtp-num-layers"),
        deallocate_pipeline_outputs=True,
    )
    if "--microbatch-group-size-per-virtual-pipeline-stage" in f:
        kw["microbatch_group_size_per_vp_stage"] = get(
            "--microbatch-group-size-per-virtual-pipeline-stage")
    if "--recompute-modules" in f:  # a list argument (nargs="*")
        kw["recompute_modules"] = list(f["--recompute-modules"])
    if "--moe-layer-freq" in f:
        kw["moe_layer_freq"] = _layer_freq(f["--moe-layer-freq"][0])
    if "--swiglu" in f:
        kw.update(activation_func=F.silu, gated_linear_unit=True)
    cls = tc.TransformerConfig
    if "--multi-latent-attention" in f:
        cls = tc.MLATransformerConfig
        kw.update(multi_latent_attention=True, q_lora_rank=get("--q-lora-rank"),
                  kv_lora_rank=get("--kv-lora-rank"), qk_head_dim=get("--qk-head-dim"),
                  qk_pos_emb_head_dim=get("--qk-pos-emb-head-dim"),
                  v_head_dim=get("--v-head-dim"))
    return cls(**{k: v for k, v in kw.items() if v is not None})


def interleaved_schedule_rule(cfg, microbatches: int) -> None:
    """megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_
    interleaving: micro-batches run in groups of microbatch_group_size_per_vp_stage (pp by
    default), within [pp, M], and a last partial group smaller than pp is refused."""
    if not cfg.virtual_pipeline_model_parallel_size:
        return
    pp = cfg.pipeline_model_parallel_size
    n = cfg.microbatch_group_size_per_vp_stage or pp
    assert pp <= n <= microbatches
    assert not 0 < microbatches % n < pp


def check_megatron(argv: list[str], d: dict, env: dict[str, str] | None = None) -> None:
    tc = pytest.importorskip("megatron.core.transformer.transformer_config")
    # megatron-core asks Transformer Engine's version for MoE + fp8 (a GPU runtime question,
    # not an argument one); without TE installed it compares None, so the version is granted
    f = parse_flags(argv)
    vpp = megatron_rules(f, env)
    real, tc.is_te_min_version = tc.is_te_min_version, lambda *a, **k: True
    try:
        cfg = megatron_config(f, vpp)
    finally:
        tc.is_te_min_version = real
    best = d["best"]
    assert cfg.tensor_model_parallel_size == best["tp"]
    assert cfg.pipeline_model_parallel_size == best["pp"]
    assert (cfg.virtual_pipeline_model_parallel_size or 1) == best["vpp"]
    assert cfg.context_parallel_size == best["cp"]
    assert cfg.expert_model_parallel_size == best["ep"]
    assert int(f["--micro-batch-size"][0]) == best["micro_batch"]
    assert int(f["--global-batch-size"][0]) == d["global_batch_seqs"]
    # the split megatron-core builds is the planner's, stage by stage
    if best["pp"] > 1 and cfg.pipeline_model_parallel_layout is not None:
        from megatron.core.transformer.enums import LayerType

        grid = cfg.pipeline_model_parallel_layout.layout  # [pp rank][virtual stage] -> layers
        per_stage = [sum(chunk.count(LayerType.decoder) for chunk in grid[r])
                     for r in range(best["pp"])]
        assert per_stage == d["stage_layers"]
    elif cfg.num_layers_in_first_pipeline_stage is not None:
        assert cfg.num_layers_in_first_pipeline_stage == d["stage_layers"][0]
        assert cfg.num_layers_in_last_pipeline_stage == d["stage_layers"][-1]
    dp = best["dp"]
    interleaved_schedule_rule(cfg, d["global_batch_seqs"] // (dp * best["micro_batch"]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_megatron_export_passes_megatron_checks(capsys, case):
    pytest.importorskip("megatron.core", reason="megatron-core not installed (pip install "
                        "-e '.[export-check]')")
    d = plan(capsys, case, "megatron")
    text = d["export"]["text"]
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    check_megatron(bash_array(text), d)
    for line in text.splitlines():  # no comment can end a continued command
        assert not (line.rstrip().endswith("\\") and "#" in line), line


def test_megatron_uneven_and_zero_rules(capsys):
    """The issue's four failures of the README example, each checked on its own."""
    d = plan(capsys, "70b-vpp2", "megatron")
    f = parse_flags(bash_array(d["export"]["text"]))
    assert d["best"]["vpp"] > 1 and len(set(d["stage_layers"])) > 1
    assert "--num-layers-per-virtual-pipeline-stage" not in f
    assert "--pipeline-model-parallel-layout" in f  # 41 layers do not divide by 2 chunks
    d = plan(capsys, "70b-zero0", "megatron")
    f = parse_flags(bash_array(d["export"]["text"]))
    assert "--overlap-param-gather" not in f and "--use-distributed-optimizer" not in f
    d = plan(capsys, "8b-zero3", "megatron")
    f = parse_flags(bash_array(d["export"]["text"]))
    assert "--use-torch-fsdp2" in f and "--use-distributed-optimizer" not in f
    d = plan(capsys, "8b-zero3-pp", "megatron")
    text = d["export"]["text"]
    assert "--use-torch-fsdp2" not in parse_flags(bash_array(text))
    assert "# dropped: zero=3 parameter sharding" in text
    assert "# dropped: recompute=op" in text
    d = plan(capsys, "70b-uneven-novpp", "megatron")
    f = parse_flags(bash_array(d["export"]["text"]))
    assert [int(f["--decoder-first-pipeline-num-layers"][0]),
            int(f["--decoder-last-pipeline-num-layers"][0])] == \
        [d["stage_layers"][0], d["stage_layers"][-1]]


def test_megatron_core_refuses_what_the_issue_found():
    """The checks bite: the old export's uneven split with 2 virtual stages is refused."""
    import torch

    tc = pytest.importorskip("megatron.core.transformer.transformer_config")
    with pytest.raises(ValueError, match="divisible"):
        tc.TransformerConfig(num_layers=80, hidden_size=8192, num_attention_heads=64,
                             pipeline_model_parallel_size=2, pipeline_dtype=torch.bfloat16,
                             virtual_pipeline_model_parallel_size=2,
                             num_layers_in_first_pipeline_stage=41,
                             num_layers_in_last_pipeline_stage=39)
    with pytest.raises(AssertionError):
        megatron_rules(parse_flags(["--num-layers", "80", "--pipeline-model-parallel-size",
                                    "2", "--overlap-param-gather", "--overlap-grad-reduce"]))


# --- Slurm + torchrun --------------------------------------------------------------------------

STUBS = {
    "srun": '#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n',
    "scontrol": '#!/bin/bash\necho node-a\necho node-b\n',
    "torchrun": f'#!{sys.executable}\nimport json, os, sys\n'
                'json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, '
                'open(os.environ["TORCHRUN_LOG"], "w"))\n',
}


def run_slurm(tmp_path: Path, text: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    bind = tmp_path / "bin"
    bind.mkdir(exist_ok=True)
    for name, body in STUBS.items():
        (bind / name).write_text(body)
        (bind / name).chmod(0o755)
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    base = {"PATH": f"{bind}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NODELIST": "node-[a-b]", "TORCHRUN_LOG": str(tmp_path / "torchrun.json")}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env={**base, **env})


@pytest.mark.parametrize("case", ["readme-70b", "8b-zero3", "qwen3-235b-folded"])
def test_slurm_script_runs_as_written(capsys, tmp_path, case):
    d = plan(capsys, case, "slurm")
    text = d["export"]["text"]
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    r = run_slurm(tmp_path, text, PLACEHOLDER_ENV)
    assert r.returncode == 0, r.stderr
    got = json.loads((tmp_path / "torchrun.json").read_text())
    argv, env = got["argv"], got["env"]
    per = min(d["gpus"], 8)
    nodes = d["gpus"] // per
    assert f"--nnodes={nodes}" in argv and f"--nproc-per-node={per}" in argv
    assert "--rdzv-backend=c10d" in argv and "--rdzv-endpoint=node-a:29500" in argv
    assert "--rdzv-id=4242" in argv
    i = argv.index("/opt/Megatron-LM/pretrain_gpt.py")
    assert f"#SBATCH --nodes={nodes}" in text and f"#SBATCH --gpus-per-node={per}" in text
    meg = argv[i + 1:]
    assert meg[meg.index("--data-path") + 1] == PLACEHOLDER_ENV["DATA_PATH"]
    assert meg[meg.index("--tokenizer-model") + 1] == PLACEHOLDER_ENV["TOKENIZER_MODEL"]
    pytest.importorskip("megatron.core", reason="megatron-core not installed (pip install "
                        "-e '.[export-check]')")
    check_megatron(meg, d, env)


def test_slurm_script_names_a_missing_placeholder(capsys, tmp_path):
    d = plan(capsys, "readme-70b", "slurm")
    env = dict(PLACEHOLDER_ENV)
    del env["DATA_PATH"]
    r = run_slurm(tmp_path, d["export"]["text"], env)
    assert r.returncode != 0 and "DATA_PATH" in r.stderr
    assert not (tmp_path / "torchrun.json").exists()


def test_slurm_partial_nodes_is_one_line_error(capsys):
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "12", "--global-batch",
               "48", "--layout", "tp=4,pp=1", "--export", "slurm"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "whole nodes" in err


# --- torchtitan --------------------------------------------------------------------------------


@pytest.fixture()
def titan():
    """torchtitan's config and ParallelDims modules, imported without the package __init__."""
    import importlib.util

    spec = importlib.util.find_spec("torchtitan")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchtitan not installed (pip install --no-deps torchtitan==0.2.2)")
    pytest.importorskip("tyro", reason="tyro (torchtitan's config parser) not installed")
    saved = {k: v for k, v in sys.modules.items() if k == "torchtitan" or
             k.startswith("torchtitan.")}
    for k in saved:
        del sys.modules[k]
    pkg = types.ModuleType("torchtitan")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["torchtitan"] = pkg
    try:
        import importlib

        config = importlib.import_module("torchtitan.config")
        if not hasattr(config, "JobConfig"):
            pytest.skip("this torchtitan has no TOML JobConfig (0.3 replaced it); the export "
                        "targets 0.2.2")
        dims = importlib.import_module("torchtitan.distributed.parallel_dims")
        yield config, dims
    finally:
        for k in [k for k in sys.modules if k == "torchtitan" or k.startswith("torchtitan.")]:
            del sys.modules[k]
        sys.modules.update(saved)


@pytest.mark.parametrize("case", sorted(CASES))
def test_torchtitan_export_parses_into_jobconfig(capsys, tmp_path, titan, case):
    config, dims = titan
    d = plan(capsys, case, "torchtitan")
    path = tmp_path / "job.toml"
    path.write_text(d["export"]["text"])
    jc = config.ConfigManager().parse_args(["--job.config_file", str(path)])
    par, tr = jc.parallelism, jc.training
    best = d["best"]
    pd = dims.ParallelDims(dp_replicate=par.data_parallel_replicate_degree,
                           dp_shard=par.data_parallel_shard_degree,
                           cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
                           pp=par.pipeline_parallel_degree, ep=par.expert_parallel_degree,
                           etp=par.expert_tensor_parallel_degree, world_size=d["gpus"])
    assert (pd.tp, pd.pp, pd.cp, pd.ep) == (best["tp"], best["pp"], best["cp"], best["ep"])
    assert pd.dp_replicate * pd.dp_shard == best["dp"]
    # torchtitan/train.py (Trainer.__init__): the global batch divides by local x dp ranks
    assert tr.global_batch_size % (tr.local_batch_size * best["dp"]) == 0
    assert tr.global_batch_size == d["global_batch_seqs"]
    assert tr.seq_len == d["seq_len"]
    if best["pp"] > 1:
        from torch.distributed.pipelining.schedules import (
            PipelineScheduleMulti,
            get_schedule_class,
        )

        parts = par.module_fqns_per_model_part
        sched = get_schedule_class(par.pipeline_parallel_schedule)
        # pipeline_parallel.py, pipeline_module_split: parts divide by pp, chunk j on rank
        # j mod pp ('loop' style); a looped schedule holds >= 2 per rank, a single one 1
        assert len(parts) % best["pp"] == 0
        per_rank = len(parts) // best["pp"]
        assert (per_rank >= 2) == issubclass(sched, PipelineScheduleMulti)
        # build_pipeline_schedule: local batch divides by the pipeline micro-batch
        assert tr.local_batch_size % par.pipeline_parallel_microbatch_size == 0
        layers = [n for p in parts for n in p if n.startswith("layers.")]
        n_layers = sum(d["stage_layers"])
        assert layers == [f"layers.{i}" for i in range(n_layers)]
        assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]
        pp = best["pp"]
        v_style = par.pipeline_parallel_schedule == "DualPipeV"
        # loop style: part j on rank j mod pp; V style (DualPipeV): parts r and 2pp-1-r on r
        rank_of = [(j if j < pp else 2 * pp - 1 - j) if v_style else j % pp
                   for j in range(len(parts))]
        per_stage = [0] * pp
        for j, p in enumerate(parts):
            per_stage[rank_of[j]] += sum(n.startswith("layers.") for n in p)
        assert per_stage == d["stage_layers"]  # the uneven split is kept
        # and so are the virtual stages (DualPipe: two chunks per rank by construction)
        assert per_rank == (2 if v_style else best["vpp"])


# --- DeepSpeed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["readme-70b", "8b-zero3", "8b-zero3-pp", "mixtral-cp"])
def test_deepspeed_export_passes_deepspeed_config(capsys, monkeypatch, case):
    ds_cfg = pytest.importorskip("deepspeed.runtime.config",
                                 reason="deepspeed not installed (pip install -e "
                                 "'.[export-check]')")
    capsys.readouterr()  # DeepSpeed logs its accelerator choice on stdout at import
    d = plan(capsys, case, "deepspeed")
    cfg = json.loads(d["export"]["text"])
    best = d["best"]

    class Mpu:  # what Megatron-DeepSpeed hands DeepSpeed: the data-parallel group size
        def get_data_parallel_world_size(self):
            return best["dp"]

    monkeypatch.setattr(ds_cfg.dist, "get_rank", lambda *a, **k: 0)
    c = ds_cfg.DeepSpeedConfig(cfg, mpu=Mpu())
    assert c.world_size == best["dp"]
    assert c.train_batch_size == d["global_batch_seqs"]
    assert c.train_micro_batch_size_per_gpu == best["micro_batch"]
    assert c.gradient_accumulation_steps * best["micro_batch"] * best["dp"] == \
        d["global_batch_seqs"]
    # deepspeed/runtime/pipe/engine.py (PipelineEngine.__init__): ZeRO-2/3 and pipelines
    # do not mix
    if best["pp"] > 1:
        assert c.zero_optimization_stage < 2
    if c.zero_optimization_stage != best["zero"]:
        assert any(f"zero={best['zero']}" in x for x in cfg["_scalemodel_dropped"])


# --- all formats --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["megatron", "torchtitan", "deepspeed", "slurm"])
def test_printed_and_written_exports_are_the_same_unwrapped_file(capsys, tmp_path, fmt):
    d = plan(capsys, "readme-70b", fmt)
    text = d["export"]["text"]
    out = tmp_path / f"export.{fmt}"
    argv = ["plan", "train", *CASES["readme-70b"], "--export", fmt]
    assert main(argv + ["--export-out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.read_text() == text and str(out) in printed
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert text.rstrip("\n") in printed  # verbatim: every line as in the file
    if fmt == "deepspeed":
        start = printed.index("{")
        assert json.loads(printed[start:start + len(text)]) == json.loads(text)
    if fmt == "slurm":
        assert os.access(out, os.X_OK)
    assert main(argv + ["--markdown"]) == 0
    assert text.rstrip("\n") in capsys.readouterr().out


def test_export_out_bad_input(capsys, tmp_path):
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "8", "--export-out",
               str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "--export" in err and len(err.strip().splitlines()) == 1
    rc = main(["plan", "train", "--model", "llama-3-8b", "--gpus", "8", "--export", "megatron",
               "--export-out", str(tmp_path / "no" / "such" / "dir" / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1


def test_bash_is_available():
    assert shutil.which("bash"), "the export tests run bash"
