"""kv-cache: the KV-cache formula, Llama-70B worked through, and the mitigations from GQA to paging."""

from __future__ import annotations

from typing import Any

from ..analytic.kv import kv_bytes_per_token, kv_report, mitigation_table, model_kv_bytes_per_token
from ..derive import Headline, Report, Section, Table
from ..sim.paged_kv import compare, synthetic_workload
from ..specs import assumption, get_gpu, get_model
from ..units import fmt_bytes
from ..views.kv import engine_table, mitigations_table, paged_table
from .params import Param, gpu, model

PROMPT = (
    "How much memory does the KV cache of a 70B model take per token, per sequence and for a "
    "serving batch? How many concurrent sequences fit on a node once the weights are loaded, "
    "and what would you do to fit more?"
)

DEFAULTS = {"model": "llama-3-70b", "gpu": "h100-sxm", "tp": 8, "context": 8192, "batch": 32,
            "dtype": "bf16", "kv_dtype": "bf16", "requests": 4000}

PARAMS: tuple[Param, ...] = (
    model(DEFAULTS["model"]),
    gpu(DEFAULTS["gpu"]),
    Param("tp", "int", DEFAULTS["tp"], "tensor-parallel degree", "GPUs", lo=1, hi=1024),
    Param("context", "tokens", DEFAULTS["context"], "tokens per sequence (8192, 8k, 128k)", "tokens", lo=1, hi=2**21),
    Param("batch", "int", DEFAULTS["batch"], "sequences in the serving batch", "sequences", lo=1, hi=65536),
    Param("dtype", "str", DEFAULTS["dtype"], "weight / compute precision"),
    Param("kv_dtype", "str", DEFAULTS["kv_dtype"], "KV-cache element type (bf16, fp16, fp8, int8, int4)"),
    Param("requests", "int", DEFAULTS["requests"], "requests in the paged-allocation simulation", "requests", lo=1, hi=50000),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None}
    m = get_model(o["model"])
    gpu = get_gpu(o["gpu"])
    r = kv_report(m, gpu=gpu, context=o["context"], batch=o["batch"], tp=o["tp"],
                  kv_dtype=o["kv_dtype"], weight_dtype=o["dtype"])
    per_tok = r.kv_bytes_per_token
    e = r.engine

    s1 = Section(
        "1. Bytes per token",
        text=("Every layer caches one key and one value vector per K/V head for every token, "
              "so the cache grows linearly with layers, K/V heads, head dim, element size and "
              "tokens. Query heads do not appear: grouped-query attention shares each K/V head "
              f"among {m.n_heads // max(m.n_kv_heads, 1)} query heads."),
        headlines=(Headline(f"{m.id} KV per token ({r.kv_dtype})", per_tok, "B"),
                   Headline(f"per sequence of {o['context']:,} tokens", r.kv_bytes_per_sequence, "B"),
                   Headline(f"batch of {o['batch']} sequences", r.kv_bytes_total, "B"),
                   Headline(f"for comparison, the weights ({r.weight_dtype})", r.weights_bytes, "B")),
        derivation=r.derivation,
    )
    ratio = r.kv_bytes_total / r.weights_bytes
    s2 = Section(
        f"2. What fits on {o['tp']} x {gpu.id}",
        text=(f"At batch {o['batch']} and {o['context']:,} tokens the cache is {ratio:.2f}x the "
              f"weights. On {o['tp']} GPUs with TP{o['tp']} each GPU keeps "
              f"{fmt_bytes(r.weights_bytes_per_gpu)} of weights and "
              f"{fmt_bytes(r.kv_bytes_per_token_per_gpu)} of KV per token. {e.engine_name} "
              f"takes {e.util:g} of the {fmt_bytes(e.total_bytes)} it reads, less the weights, "
              f"the activation peak of its {e.profile_tokens:,}-token profiling pass "
              f"({fmt_bytes(e.profile_activation_bytes)}) and {fmt_bytes(e.non_torch_bytes)} "
              f"outside torch: {fmt_bytes(e.kv_budget_bytes)} per GPU hold {r.max_tokens:,} "
              f"tokens, i.e. {r.max_concurrent_sequences:,} sequences of {o['context']:,} "
              "tokens. Other engines take their fraction of other totals (table)."),
        headlines=(Headline("KV tokens that fit", r.max_tokens, "token"),
                   Headline("concurrent sequences", r.max_concurrent_sequences, "seq"),
                   Headline(f"batch {o['batch']} fits", r.fits_batch)),
        derivation=e.derivation,
        tables=(engine_table(m, gpu, tp=o["tp"], weight_dtype=o["dtype"],
                             kv_dtype=o["kv_dtype"], context=o["context"]),),
    )

    rows = list(mitigation_table(m, o["context"], o["batch"]))
    ds = get_model("deepseek-v3")
    rows.append((f"MLA as in deepseek-v3 ({ds.n_layers} layers, latent {ds.kv_lora_rank}+"
                 f"{ds.qk_rope_head_dim})", model_kv_bytes_per_token(ds, "bf16"),
                 model_kv_bytes_per_token(ds, "bf16") * o["context"] * o["batch"]))
    caps = []
    for kvd in ("bf16", "fp8", "int4"):
        rr = kv_report(m, gpu=gpu, context=o["context"], batch=o["batch"], tp=o["tp"],
                       kv_dtype=kvd, weight_dtype=o["dtype"])
        caps.append((kvd, rr.kv_bytes_per_token, rr.max_concurrent_sequences))
    s3 = Section(
        "3. Mitigations, each computed from its own formula",
        text=("Fewer K/V heads (GQA, MQA) or a compressed latent (MLA) cut bytes per token at "
              "training time; narrower cache types (fp8, int4) cut them at serving time at some "
              "accuracy risk; paging removes waste rather than bytes. Prefix caching shares the "
              "cache of common prompt prefixes across requests, and offloading moves cold blocks "
              "to host memory."),
        tables=(
            mitigations_table("bytes per token and per batch", rows, readable=True),
            Table(f"concurrency on {o['tp']} x {gpu.id} by cache type",
                  ("KV dtype", "bytes/token", f"sequences at {o['context']:,}"),
                  tuple((kd, fmt_bytes(bt), n) for kd, bt, n in caps)),
        ),
    )

    pool = max(int(r.max_tokens or 0), o["context"])
    p_mean = min(assumption("serving_prompt_mean_tokens").value, o["context"] / 4)
    o_mean = min(assumption("serving_output_mean_tokens").value, o["context"] / 8)
    blk = int(assumption("kv_block_tokens").value)
    w = synthetic_workload(int(o["requests"]), prompt_mean=p_mean, output_mean=o_mean,
                           max_len=o["context"], seed=0)
    cmp_ = compare(w, capacity_tokens=pool, max_len=o["context"], block_tokens=blk)
    s4 = Section(
        "4. Paged vs contiguous allocation (simulated)",
        text=(f"{w.n:,} requests with heavy-tailed prompt and output lengths are served from the "
              f"{pool:,}-token pool of part 2. Reserving the maximum length per request wastes "
              f"{cmp_.contiguous.waste_fraction:.0%} of the pool; {blk}-token blocks allocated on "
              f"demand waste {cmp_.paged.waste_fraction:.1%} and run "
              f"{cmp_.concurrency_gain:.1f}x as many requests at once. The vLLM paper measured "
              "60-80% waste in earlier systems and under 4% with PagedAttention."),
        tables=(paged_table(cmp_, short=True),),
    )

    tp16 = kv_bytes_per_token(m.n_layers, max(1, m.n_kv_heads // 16), m.head_dim, 2)
    followups = (
        ("Does TP 16 halve the per-GPU cache again?",
         f"No: {m.id} has {m.n_kv_heads} K/V heads, so beyond TP{m.n_kv_heads} heads are "
         f"replicated and each GPU still holds one: {fmt_bytes(tp16)} per token per GPU "
         f"at TP16, the same as at TP{m.n_kv_heads}. Pipeline stages or more replicas scale "
         "the cache instead."),
        ("Why is the MLA cache not split by tensor parallelism?",
         "The latent is shared by all heads; each TP rank needs the whole latent to "
         "up-project its own heads, so TP replicates it. DeepSeek serves with data-parallel "
         "attention for this reason."),
        ("What does an fp8 cache cost?",
         "Half the bytes of bf16 and twice the sequences (table above); the risk is accuracy on "
         "long contexts, usually handled with per-tensor or per-block scales."),
        ("Why does a longer max context hurt even with paging?",
         "Paging wastes under one block per sequence, but the engine must still be able to "
         "finish a sequence of the maximum length, and the activation reserve grows with the "
         "tokens per forward pass."),
        ("When is the KV cache bigger than the weights?",
         f"When batch x context x bytes/token exceeds the weights: for {m.id} that is "
         f"{r.weights_bytes / per_tok:,.0f} cached tokens in {r.kv_dtype}."),
    )
    assumptions = (
        f"{m.id} from its Hugging Face config; weights in {r.weight_dtype}, cache in {r.kv_dtype}.",
        f"{o['tp']} x {gpu.id} with tensor parallelism; the KV pool as {e.engine_name} "
        f"{e.engine_version} sizes it ({e.engine}: {e.util_flag} {e.util:g}, profile run "
        f"of {e.profile_tokens:,} tokens, max_num_seqs {e.max_num_seqs:,}).",
        f"Paged simulation: {w.n:,} requests, log-normal prompt and output lengths with means "
        f"{p_mean:,.0f} and {o_mean:,.0f} tokens (assumptions in numerics.toml).",
    )
    data = {"question": "kv-cache", "options": o, "kv": r.to_dict(),
            "mitigations": [{"layout": a, "kv_bytes_per_token": b, "kv_bytes_total": c}
                            for a, b, c in rows],
            "paged_simulation": cmp_.to_dict()}
    return Report(f"kv-cache: {m.id} on {o['tp']} x {gpu.id}", (s1, s2, s3, s4), data,
                  warnings=r.warnings, question=PROMPT, assumptions=assumptions,
                  followups=followups)
