"""A serving engine as the planner runs it: its profile (frameworks.toml, kind = "serving"), the
one home of every engine fact: KV pool sizing, token budget, batch size, block size, and how it
schedules (KV reservation, how the batch limits are chosen, chunking, the KV dtype of FP8
checkpoints, attention kernels, per-iteration host cost). The KV pool itself is
analytic/serving_memory.py's ``engine_kv_budget``, the same accounting ``kv --framework``
prints."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import BadInput
from ...specs import GPUSpec, ModelSpec
from .iteration import Precision, ServeLayout, checkpoint_quant

DEFAULT_ENGINE = "vllm-v1"


@dataclass(frozen=True)
class Engine:
    id: str
    name: str
    version: str
    reserve: str  # "full" or "on_demand"
    batch_rule: str  # "profile" or "trtllm-bench"
    chunked_prefill: bool
    kv_fraction: float | None  # the fraction a published run used, where it differs from default
    overhead_s: float
    block_size: int
    max_num_seqs: int
    fp8_checkpoint_kv: str  # the KV dtype the engine gives an FP8 checkpoint by default
    scheduler: str
    sources: dict[str, str]
    profile: Any  # specs.frameworks.Framework
    attention: dict[str, str] = field(default_factory=dict)  # GPU architecture -> kernel family
    decode_kv_reads: str = "kv_head"  # the decode kernel reads each KV head once or per query head
    logits_gather: str = "none"  # "all_gather": every TP rank gathers and samples the full logits
    moe_gemm: dict[str, str] = field(default_factory=dict)  # GPU architecture -> grouped GEMM kernel
    # how an unchunked engine's token budget is raised to fit a whole prompt: "none" or
    # "max_isl_plus_batch" (trtllm-bench's PyTorch path)
    unchunked_budget_floor: str = "none"
    # the host loop per iteration (iteration.py IterationModel.with_host): seconds per iteration
    # and per sequence that emits a token, overlapped with the GPU's work (max) or not (sum)
    host_s_per_iter: float = 0.0
    host_s_per_seq: float = 0.0
    host_overlap: bool = False
    # iterations per scheduler call (vLLM multi-step scheduling): the host seconds are one call's
    host_iters_per_schedule: int = 1
    # a step that runs prefills runs no decodes (vLLM V0's default scheduler); with
    # host_iters_per_schedule n > 1 a decode batch is held n steps (scheduler.py)
    prefill_alone: bool = False
    # attention data parallelism (frameworks.toml attention_dp): whether the engine has it and
    # how each MoE layer exchanges the ranks' tokens; empty: not recorded (no attention DP)
    attention_dp: dict[str, Any] = field(default_factory=dict)
    # how its attention-DP ranks share requests and meet at each MoE layer (frameworks.toml
    # attention_dp_schedule); empty: not read
    attention_dp_schedule: dict[str, Any] = field(default_factory=dict)
    # two-batch overlap of an attention-DP DeepEP engine (frameworks.toml two_batch_overlap):
    # prefill "sglang_prefill" or "off", comm_sms; empty: none
    two_batch_overlap: dict[str, Any] = field(default_factory=dict)
    # speculative decoding (frameworks.toml speculative): the drafters the engine runs; and the
    # speculation a run asks for (speculative.Speculation, plan serve --spec), None: none
    speculative: dict[str, Any] = field(default_factory=dict)
    speculation: Any = None
    # the automatic prefix cache by default (frameworks.toml prefix_cache): "off", "scheduled",
    # "prefilled" or "unread" (scheduler.py prices the first two)
    prefix_cache: str = "off"
    # how a harness in front of dp replicas hands each arriving request to one (frameworks.toml
    # dispatch): "random" (each replica a Poisson 1/dp share) or "least_busy" (the replica with
    # the fewest requests in flight; service.py simulates it as every dp-th arrival)
    dispatch: str = "random"
    # CUDA-graph batch-size buckets (frameworks.toml cuda_graph_*; :func:`capture_sizes`): the
    # profile's raw fields, empty where the profile records none (no padding priced)
    cuda_graph: dict[str, Any] = field(default_factory=dict)
    # kernels per decoder layer on the critical path, counted for one modeling file
    # (frameworks.toml layer_kernels; iteration.py layer_launch_s); empty: none counted
    layer_kernels: dict[str, Any] = field(default_factory=dict)
    # attention projections every TP rank holds and runs whole (frameworks.toml
    # replicated_modules: TensorRT-LLM's MLA fused_a); read by the iteration's GEMMs and by the
    # KV budget's weight bytes
    replicated_modules: tuple[str, ...] = ()
    # HBM bytes per element of the quantize before each FP8 GEMM (frameworks.toml
    # fp8_input_cast_bytes); None: the step model's training-recipe cast
    fp8_input_cast_bytes: float | None = None

    def adp_exchange(self) -> dict[str, Any]:
        """The attention-DP exchange this engine runs, or one line where it has none or its
        exchange was not read."""
        a = self.attention_dp
        if not a.get("supported"):
            raise BadInput(f"--layout adp=1: {self.id} has no attention data parallelism "
                           "(frameworks.toml attention_dp)")
        if a.get("exchange") == "unread":
            raise BadInput(f"--layout adp=1: {self.id}'s attention-DP exchange was not read "
                           "(frameworks.toml attention_dp exchange = unread); it is not priced")
        return a

    def adp_schedule(self) -> dict[str, Any]:
        """How this engine's attention-DP ranks take requests and meet at each MoE layer, or one
        line where that was not read."""
        a = self.attention_dp_schedule
        if a.get("assign") not in ("prompt_tokens_under_count", "round_robin"):
            raise BadInput(f"--layout adp=1: {self.id}'s attention-DP request assignment was not "
                           "read (frameworks.toml attention_dp_schedule); it is not priced")
        return a

    def default_kv_dtype(self, prec: Precision) -> str:
        """The KV dtype this engine uses for a checkpoint of this precision: an FP8 or NVFP4
        (fp4) checkpoint gets the engine's quantized-checkpoint KV (``fp8_checkpoint_kv``:
        FP8 in TensorRT-LLM, the model's 16-bit dtype under vLLM's and SGLang's 'auto')."""
        return self.fp8_checkpoint_kv if prec.name in ("fp8", "fp4") else prec.kv_dtype

    def attention_kind(self, gpu: GPUSpec) -> str:
        """The fused attention family (kernels.toml) the engine runs on this GPU: its profile's
        ``attention`` table by architecture, flash where the table names none."""
        return self.attention.get(gpu.arch or "", "flash")

    def moe_gemm_kernel(self, gpu: GPUSpec) -> str | None:
        """The grouped expert-GEMM kernel (a kernels.toml [grouped_gemm] kernel) the engine runs
        on this GPU: its profile's ``moe_gemm`` table by architecture; None where the table names
        none (no per-expert launch cost is charged)."""
        return self.moe_gemm.get(gpu.arch or "")


CUDA_GRAPH_FIELDS = ("cuda_graphs", "cuda_graph_sizes", "cuda_graph_sizes_large_gpu",
                     "cuda_graph_batch", "cuda_graph_limit", "cuda_graph_over_limit",
                     "cuda_graph_padding", "cuda_graph_max_seq_len", "cuda_graph_eager_launch")


def _size_list(spec: Any, where: str) -> list[int]:
    """A capture-size list as the profile writes it: a list, or {small, step, start, stop}
    for ``small + range(start (default step), stop + 1, step)``."""
    if isinstance(spec, dict):
        step = int(spec.get("step", 0))
        if step <= 0:
            raise BadInput(f"{where}: step must be a whole number >= 1, got {spec.get('step')!r}")
        sizes = [*map(int, spec.get("small", [])),
                 *range(int(spec.get("start", step)), int(spec["stop"]) + 1, step)]
    elif isinstance(spec, list):
        sizes = [int(x) for x in spec]
    else:
        raise BadInput(f"{where}: must be a list of batch sizes or {{small, step, stop}}")
    if not sizes or any(x < 1 for x in sizes):
        raise BadInput(f"{where}: capture sizes must be whole numbers >= 1, got {sizes}")
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise BadInput(f"{where}: capture sizes must be strictly increasing, got {sizes}")
    return sizes


def capture_sizes(eng: Engine, max_batch: int, token_budget: int, gpu_bytes: float
                  ) -> tuple[int, ...]:
    """The decode batch sizes the engine captures CUDA graphs for at these limits, ascending;
    () where it captures none (``cuda_graphs`` false) or its profile records no sizes.

    ``cuda_graph_sizes`` is the engine's default list; ``cuda_graph_sizes_large_gpu``
    ({above_mib, sizes}) adds sizes on GPUs with more memory than that (SGLang); the list is
    then cut at ``cuda_graph_limit`` (the token budget, the batch limit, or the smaller of the
    two) as ``cuda_graph_over_limit`` says: ``drop`` the sizes above it, ``first_at_or_above``
    keep up to the first size at or above it (vLLM V0), ``append`` drop them and add the limit
    itself where some size lay above it (TensorRT-LLM's padding filter; SGLang's pool-size
    rule, which adds limit - 1 and limit)."""
    g = eng.cuda_graph
    where = f"{eng.id} cuda_graph_sizes"
    if not g.get("cuda_graphs", False) or "cuda_graph_sizes" not in g:
        return ()
    sizes = _size_list(g["cuda_graph_sizes"], where)
    big = g.get("cuda_graph_sizes_large_gpu")
    if big and gpu_bytes > float(big["above_mib"]) * 2**20:
        sizes = sorted(set(sizes) | set(_size_list(big["sizes"], where + "_large_gpu")))
    limit_kind = str(g.get("cuda_graph_limit", "none"))
    limits = {"none": None, "token_budget": token_budget, "max_batch": max_batch,
              "max_batch_and_token_budget": min(max_batch, token_budget)}
    if limit_kind not in limits:
        raise BadInput(f"{eng.id} cuda_graph_limit: {limit_kind!r} is not one of "
                       f"{', '.join(limits)}")
    lim = limits[limit_kind]
    if lim is None:
        return tuple(sizes)
    rule = str(g.get("cuda_graph_over_limit", "drop"))
    kept = [x for x in sizes if x <= lim]
    if rule == "first_at_or_above":
        kept += [x for x in sizes if x > lim][:1] if lim not in kept else []
    elif rule in ("append", "append_pool"):
        if sizes[-1] > lim and (not kept or kept[-1] != lim):
            extra = [lim - 1, lim] if rule == "append_pool" else [lim]
            kept = sorted(set(kept) | {x for x in extra if x >= 1})
    elif rule != "drop":
        raise BadInput(f"{eng.id} cuda_graph_over_limit: {rule!r} is not drop, "
                       "first_at_or_above, append or append_pool")
    return tuple(kept)


def serving_engine_ids() -> list[str]:
    """The bundled profiles plan serve can run (kind = "serving" with the scheduling fields)."""
    from ...specs.frameworks import (
        SERVING_ENGINE_REQUIRED,
        SERVING_HOST_FIELDS,
        engine_ids,
        get_engine,
    )

    def runnable(v: dict[str, Any]) -> bool:
        # the scheduling fields, and the host loop either as its fields or as overhead_s alone
        return (all(k in v for k in SERVING_ENGINE_REQUIRED)
                and any(k in v for k in (*SERVING_HOST_FIELDS, "overhead_s")))

    return [fid for fid in engine_ids() if runnable(get_engine(fid).values)]


def get_serving_engine(fid: str | None) -> Engine:
    from ...specs.frameworks import SERVING_ENGINE_REQUIRED, SERVING_HOST_FIELDS, get_framework

    fid = fid or DEFAULT_ENGINE
    ids = serving_engine_ids()
    if fid not in ids:
        raise BadInput(f"--framework: {fid!r} is not a serving engine; choose one of "
                       f"{', '.join(ids)}")
    fw = get_framework(fid)
    v = fw.values
    keys = (*SERVING_ENGINE_REQUIRED, "attention", "kv_fraction", "decode_kv_reads", "moe_gemm",
            "unchunked_budget_floor", "logits_gather", "attention_dp", "attention_dp_schedule",
            "two_batch_overlap", *SERVING_HOST_FIELDS, "host_iters_per_schedule",
            "prefill_alone", "speculative", "prefix_cache", "layer_kernels", "dispatch",
            "replicated_modules", "fp8_input_cast_bytes", *CUDA_GRAPH_FIELDS)
    eng = Engine(
        id=fid, name=fw.name, version=fw.version, reserve=str(v["reserve"]),
        batch_rule=str(v["batch_rule"]), chunked_prefill=bool(v["chunked_prefill"]),
        kv_fraction=float(v["kv_fraction"]) if "kv_fraction" in v else None,
        overhead_s=float(v.get("overhead_s") or 0.0), block_size=int(v["block_size"]),
        max_num_seqs=int(v["max_num_seqs_default"]),
        fp8_checkpoint_kv=str(v["fp8_checkpoint_kv"]), scheduler=str(v.get("scheduler", "")),
        sources={k: fw.sources[k] for k in keys if k in fw.sources},
        profile=fw, attention=dict(v.get("attention") or {}),
        decode_kv_reads=str(v.get("decode_kv_reads") or "kv_head"),
        logits_gather=str(v.get("logits_gather") or "none"),
        moe_gemm=dict(v.get("moe_gemm") or {}),
        unchunked_budget_floor=str(v.get("unchunked_budget_floor") or "none"),
        host_s_per_iter=float(v.get("host_s_per_iter") or 0.0),
        host_s_per_seq=float(v.get("host_s_per_seq") or 0.0),
        host_overlap=bool(v.get("host_overlap", False)),
        host_iters_per_schedule=int(v.get("host_iters_per_schedule") or 1),
        prefill_alone=bool(v.get("prefill_alone", False)),
        attention_dp=dict(v.get("attention_dp") or {}),
        attention_dp_schedule=dict(v.get("attention_dp_schedule") or {}),
        two_batch_overlap=dict(v.get("two_batch_overlap") or {}),
        speculative=dict(v.get("speculative") or {}),
        prefix_cache=str(v.get("prefix_cache") or "off"),
        dispatch=str(v.get("dispatch") or "random"),
        cuda_graph={k: v[k] for k in CUDA_GRAPH_FIELDS if k in v},
        layer_kernels=dict(v.get("layer_kernels") or {}),
        replicated_modules=tuple(v.get("replicated_modules") or ()),
        fp8_input_cast_bytes=(float(v["fp8_input_cast_bytes"])
                              if "fp8_input_cast_bytes" in v else None))
    # the capture lists are checked when the profile is loaded (one line, exit 2), not only
    # where a layout prices them
    capture_sizes(eng, 1, 1, 0.0)
    if "cuda_graph_sizes_large_gpu" in eng.cuda_graph:
        capture_sizes(eng, 1, 1, float("inf"))
    return eng


def trtllm_bench_limits(m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision,
                        kv_bytes_per_elem: float, isl: int, osl: int) -> tuple[int, int]:
    """(max batch size, max num tokens) trtllm-bench build picks for a dataset (tuning.py's
    calc_engine_setting and finetune_setting, restated)."""
    from ..params import count_params

    per_tok = 2 * m.n_layers * max(lay.tp, m.n_kv_heads) * m.head_dim * kv_bytes_per_elem
    engine = count_params(m).total * (prec.bench_weight_bytes or prec.weight_bytes)
    avail = gpu.hbm_bytes * lay.replica_gpus - engine
    reqs = avail * 0.95 / (per_tok * (isl + osl))
    if reqs < 1:
        raise BadInput(f"--layout: {lay.replica_gpus} x {gpu.id} cannot hold {m.id}'s weights "
                       "and one request's KV (trtllm-bench's estimate)")
    raw_bs = min(reqs, 4096) / lay.pp
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tok < 4096:
        tok = max(2048, 256 * math.ceil(raw_tok / 256))
    elif raw_tok < 8192:
        tok = 512 * math.ceil(raw_tok / 512)
    else:
        tok = 1024 * math.ceil(raw_tok / 1024)
    return int(bs), int(tok)


@dataclass(frozen=True)
class EngineSetup:
    """What the engine starts with on one replica."""

    max_batch: int
    token_budget: int
    chunked_prefill: bool
    max_model_len: int
    kv: Any  # serving_memory.EngineKV
    why_batch: str


def setup(eng: Engine, m: ModelSpec, gpu: GPUSpec, lay: ServeLayout, prec: Precision,
          kv_dtype: str, isl: int, osl: int, *, max_batch: int | None = None,
          token_budget: int | None = None) -> EngineSetup:
    """The engine's batch limits and KV pool for this layout and workload."""
    from ...specs import dtype
    from ..serving_memory import (
        engine_kv_budget,
        engine_max_num_seqs,
        engine_token_budget,
        engine_visible_bytes,
    )

    if lay.attention_dp:
        eng.adp_exchange()
    if prec.gemm_dtype not in gpu.flop_per_s:
        raise BadInput(f"--precision {prec.name}: {gpu.id} has no {prec.gemm_dtype} tensor-core "
                       f"path (its spec lists {', '.join(gpu.flop_per_s)})")
    mml = isl + osl if eng.batch_rule == "trtllm-bench" else m.max_context
    mml = max(mml, isl + osl)
    if eng.batch_rule == "trtllm-bench":
        bs, tok = trtllm_bench_limits(m, gpu, lay, prec, dtype(kv_dtype).bytes, isl, osl)
        why = "trtllm-bench build's tuning from the dataset's lengths"
    else:
        # the device total as the engine reads it, the one the KV pool below is sized from
        total = engine_visible_bytes(gpu)[0]
        tok, why_t = engine_token_budget(eng.profile, total, mml, gpu.name)
        bs, why_b = engine_max_num_seqs(eng.profile, total, gpu.name)
        why = f"the engine's defaults ({why_t}; {why_b})"
    defaults = eng.batch_rule != "trtllm-bench" and not max_batch  # the KV derivation names them
    chunked = eng.chunked_prefill or (
        int(eng.profile.get("chunked_prefill_above_len") or 0) and
        mml > int(eng.profile.get("chunked_prefill_above_len") or 0))
    bs = int(max_batch or bs)
    tok = int(token_budget or tok)
    default_tok = eng.batch_rule != "trtllm-bench" and not token_budget
    if max_batch or token_budget:
        why = "given"
    if (not chunked and not token_budget
            and eng.unchunked_budget_floor == "max_isl_plus_batch" and tok < isl + bs):
        # without chunking a prompt must fit one iteration: trtllm-bench's PyTorch path sets
        # max_num_tokens = max(tuned, the dataset's longest prompt + max batch size)
        tok = isl + bs
        default_tok = False
        why += f"; token budget raised to ISL + max batch = {tok:,} (no chunked prefill)"
    wdt = {"int4": "int4", "fp8": "fp8"}.get(prec.name, "bf16")
    q = checkpoint_quant(m, prec)
    if q is not m.quant:
        # stored otherwise than the model's own config says: a published release of it at this
        # precision (serving.toml [checkpoints]: its excluded modules 16-bit), or a 16-bit
        # checkpoint the engine quantizes (linears at the precision, the output head,
        # embeddings, norms and routers 16-bit: serving.toml precisions.*.checkpoint), the
        # record the iteration's GEMMs read too
        from dataclasses import replace

        m, wdt = replace(m, quant=q), "bf16"
    kv = engine_kv_budget(m, gpu, tp=lay.tp, pp=lay.pp, weight_dtype=wdt, kv_dtype=kv_dtype,
                          engine_id=eng.profile, util=eng.kv_fraction, max_model_len=mml,
                          max_num_seqs=None if defaults else bs,
                          max_num_batched_tokens=None if default_tok else tok,
                          attention_dp=lay.attention_dp)
    assert (kv.max_num_seqs, kv.max_num_batched_tokens) == (bs, tok), "one rule, one total"
    return EngineSetup(bs, tok, bool(chunked), mml, kv, why)
