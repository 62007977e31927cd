"""Data parallelism: the gradient reduction and ZeRO / FSDP parameter gathers of the slowest
stage's parameters, over the dense group (dp x cp) and the expert group, and how much of them
the backward and forward compute hide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .candidates import Candidates
from .comm import collective_time, expert_ranks, ranks_per_node
from .config import constants, fp8_weight_bytes, profile_value, recipe_overlap
from .memory_terms import E_W
from .pipeline import StageTerms


@dataclass(frozen=True)
class LocalParams:
    """Parameters one GPU of the slowest stage holds (unsharded count)."""

    dense: Any  # replicated over the dp x cp group (the final norm sits with the output head)
    expert: Any  # replicated over the expert group (tp x dp x cp / etp ep ranks)
    dense_linear: Any = 0.0  # of dense: the transformer layers' matmul weights

    @property
    def total(self) -> Any:
        return self.dense + self.expert


def local_params(c: Candidates, st: StageTerms) -> LocalParams:
    sm, tp, etp, ep = c.ms.sm, c.tp, c.etp, c.ep
    pc = sm.pc
    lay_d = sm.big_split / tp + sm.big_rep
    lay_e = sm.big_exp / (etp * ep)
    head_p = (pc.lm_head or pc.embedding) / tp
    dense = np.where(c.one, sm.sum_split / tp + sm.sum_rep + (pc.embedding + pc.lm_head) / tp
                     + pc.final_norm,
                     st.n_slow * lay_d + np.where(st.which == 0, pc.embedding / tp,
                                                  np.where(st.which == 2,
                                                           head_p + pc.final_norm, 0.0)))
    expert = np.where(c.one, sm.sum_exp / (etp * ep), st.n_slow * lay_e)
    linear = np.where(c.one, sm.sum_split / tp, st.n_slow * sm.big_split / tp)
    return LocalParams(dense, expert, linear)


@dataclass(frozen=True)
class DPTerms:
    """DP / ZeRO traffic per step on one GPU."""

    group: Any  # dense group: dp x cp ranks
    egroup: Any  # expert group: ranks holding the same expert shard
    grad_bytes: Any  # dense gradients reduced (grad_reduce_bytes per parameter)
    egrad_bytes: Any
    raw: Any  # seconds, nothing hidden
    exposed: Any  # seconds left after the backward / forward hide them
    bytes: Any  # bytes each GPU sends per step over both groups
    intra: Any  # the dense group shares one NVLink domain


def _sync_plan(c: Candidates, rs: Any, ag: Any, last_bucket: Any,
               st: StageTerms, root: Any = None, ends: Any = None) -> tuple[Any, Any]:
    """(raw, exposed) seconds. ZeRO 0: all-reduce in the last micro-batch's backward; 1-2:
    reduce-scatter there and the parameter all-gather in the first forward (ZeRO 2 shards the
    gradients, so it reduce-scatters in every micro-batch's backward); 3: gathers for forward
    and backward and a reduce-scatter every micro-batch. The last bucket and any excess over
    the compute stay exposed.

    ``root``: the share of the dense parameters in the FSDP root group where the profile says
    the root is its own group (frameworks.toml fsdp_root_group: FSDP2's root in torchtitan,
    FSDP1's root unit in llm-foundry; ZeRO-2 and -3 without PP, 0 elsewhere; None for other
    profiles): that group is gathered first in each forward and reduce-scattered after the
    backward, so its all-gather and its reduce-scatter are the exposed parts. Both FSDP
    versions keep the root gathered from forward to backward, so under ZeRO-3 the root is
    gathered once per micro-batch, not twice: the backward gathers the other (1 - root).

    ``ends``: the share exposed at the two ends of each micro-batch, the root's plus that of
    the blocks the profile counts beside it (frameworks.toml fsdp_root_exposed_blocks: FSDP1's
    block 0, gathered right after the root and reduce-scattered right before it); the root's
    share where None."""
    zero, mb, fwd, bwd = c.zero, c.mb, st.fwd_mb, st.bwd_mb
    # a framework that does not overlap them (frameworks.toml dp_overlap, param_gather_overlap:
    # the 2021 Megatron-LM all-reduces after the backward; or a recipe that turns the gather's
    # overlap off for one model on one GPU, model_recipes) hides nothing behind that pass
    if not profile_value(c.job, "dp_overlap", True):
        bwd = 0.0 * bwd
    gpu_id = getattr(getattr(c, "gpu", None), "id", None)
    if not recipe_overlap(c.job, gpu_id, "param_gather_overlap", True):
        fwd = 0.0 * fwd
    ar = 2 * rs  # a ring all-reduce is a reduce-scatter then an all-gather of the same size
    grad_sync = np.where(zero == 0, ar, rs)
    n_sync = np.where(zero == 2, mb, 1.0)
    # an optimizer that shards its states over DP by itself at ZeRO 0 (frameworks.toml
    # optimizer_shards_states: DeepSpeed's BF16_Optimizer) all-reduces the gradients and then
    # all-gathers the updated 16-bit weights after its step (all_gather_dp_groups)
    gathers = (zero >= 1) | ((zero == 0) & bool(profile_value(c.job, "optimizer_shards_states",
                                                               False)))
    raw01 = n_sync * grad_sync + np.where(gathers, ag, 0.0)
    exp01 = (n_sync * np.maximum(grad_sync * last_bucket, grad_sync - bwd)
             + np.where(gathers, np.maximum(ag * last_bucket, ag - fwd), 0.0))
    z3_raw = mb * (2 * ag + rs)
    z3_exp = mb * (np.maximum(ag * last_bucket, ag - fwd)
                   + np.maximum((ag + rs) * last_bucket, ag + rs - bwd))
    if root is not None:
        ends = root if ends is None else ends
        ag_b = (1.0 - root) * ag  # the backward's gather: every group but the kept root
        z3_raw = np.where(root > 0, mb * (ag + ag_b + rs), z3_raw)
        z3_exp = np.where(root > 0, mb * (np.maximum(ag * ends, ag - fwd)
                                          + np.maximum(rs * ends, ag_b + rs - bwd)), z3_exp)
        exp01 = np.where((root > 0) & (zero == 2),
                         n_sync * np.maximum(grad_sync * root, grad_sync - bwd)
                         + np.maximum(ag * root, ag - fwd), exp01)
    return np.where(zero >= 3, z3_raw, raw01), np.where(zero >= 3, z3_exp, exp01)


def _bytes_sent(c: Candidates, group: Any, w_loc: Any, gb: Any, root: Any = None) -> Any:
    """Bytes one GPU sends per step; ``w_loc`` the bytes of its gathered weights (one gather),
    ``root`` as in _sync_plan (the kept root group is gathered once per ZeRO-3 micro-batch)."""
    zero, mb = c.zero, c.mb
    gathers = 2.0 if root is None else 2.0 - root
    return np.where(group > 1, (group - 1) / group * np.where(
        zero >= 3, mb * (gathers * w_loc + gb),
        np.where(zero == 0, 2, np.where(zero == 2, mb, 1)) * gb
        + np.where(((zero >= 1) & (zero < 3)) | ((zero == 0) & bool(profile_value(
            c.job, "optimizer_shards_states", False))), w_loc, 0.0)), 0.0)


def expert_dp_ranks_per_node(c: Any, egroup: Any, dom: int) -> Any:
    """Members of the expert data-parallel group (``egroup`` ranks holding the same expert
    shard, over which the expert gradients are reduced and, under ZeRO, the expert weights
    gathered) that share one NVLink domain of ``dom`` GPUs, as Megatron-Core numbers the ranks (a rank's digits
    run in the order string's order, the first fastest; a group holds the ranks whose other
    digits agree):

    * "own_grid" (core_v0.16.0, 3bec9aa9, megatron/core/parallel_state.py lines 791-806): the
      expert grid RankGenerator(tp=etp, ep=ep, dp=tp cp dp / (etp ep), pp, cp=1, order
      tp-cp-ep-dp-pp); EXPERT_DATA_PARALLEL_GROUP is its 'dp' (line 1270): members etp x ep
      apart, CP folded into the group (ep 1: etp apart, the dense dp x cp group when etp = tp);
    * "dp_split" (core_r0.8.0, baf94af3, lines 256-268, 702-725): one grid of digits tp, cp,
      ep, dp / ep, pp; the expert buffers reduce over DATA_MODULO_EXPERT_PARALLEL_GROUP_WITH_CP
      (distributed_data_parallel.py line 170), get_ranks('dp-cp', independent_ep=True): the cp
      digit (cp members tp apart) times the dp / ep digit (tp x cp x ep apart). Folded experts
      (etp < tp) exist only on the own grid and are placed as there.

    Without EP at dp_split the product is the dense group (dp x cp, tp apart)."""
    tp, etp, ep, cp = c.tp, c.etp, c.ep, c.cp
    own = ranks_per_node(etp * ep, egroup, dom)
    if expert_ranks(c) == "own_grid":
        return own
    split = ranks_per_node(tp, cp, dom) * ranks_per_node(tp * cp * ep, egroup / cp, dom)
    return np.where(etp == tp, split, own)


def dp_terms(c: Candidates, st: StageTerms, loc: LocalParams) -> DPTerms:
    ov = constants()["overlap"]
    tp, etp, ep, dom, cl = c.tp, c.etp, c.ep, c.dom, c.cl
    group = c.dp * c.cp
    egroup = tp * group / (etp * ep)
    r_dp = ranks_per_node(tp, group, dom)
    r_edp = expert_dp_ranks_per_node(c, egroup, dom)
    # bytes per reduced gradient: the profile's (fp32 main grads in Megatron-Core with bf16;
    # the training dtype in DeepSpeed and in the 2021 fp16 Megatron-LM), else planner.toml's
    e_red = float(profile_value(c.job, "grad_reduce_bytes", ov["grad_reduce_bytes"]))
    g_bytes, ge_bytes = loc.dense * e_red, loc.expert * e_red
    rs = (collective_time("reduce_scatter", g_bytes, group, r_dp, cl)
          + collective_time("reduce_scatter", ge_bytes, egroup, r_edp, cl))
    # the gathered weights: 16-bit, except the layers' matmul weights where the framework keeps
    # fp8 primary weights (Megatron-Core --fp8-param-gather: their uint8 buffer, 1 B; MXFP8's
    # bf16 gather into the gradient buffer, 2 B; config.fp8_weight_bytes)
    e_ag = fp8_weight_bytes(c.job, getattr(c, "gpu", None), c.zero, E_W)[1]
    w_dense = (loc.dense - loc.dense_linear) * E_W + loc.dense_linear * e_ag
    w_exp = loc.expert * e_ag
    ag = (collective_time("all_gather", w_dense, group, r_dp, cl)
          + collective_time("all_gather", w_exp, egroup, r_edp, cl))
    # the last bucket: the bucket a DDP / ZeRO reducer fills last holds the word embedding, whose
    # gradient the backward produces last, and a bucket never splits a parameter (Megatron-Core
    # param_and_grad_buffer.py at core_r0.8.0 closes a bucket once it reaches bucket_size, going
    # over the parameters in reverse): on a stage with the embedding it is at least that table
    pc = c.ms.sm.pc
    emb = np.where(c.one | (st.which == 0), pc.embedding / tp, 0.0) * e_red
    last_bucket = np.minimum(1.0, np.maximum(float(ov["dp_bucket_bytes"]), emb)
                             / np.maximum(g_bytes + ge_bytes, 1.0))
    root = ends = None
    if profile_value(c.job, "fsdp_root_group", False):
        root_p = (pc.embedding + (pc.lm_head or 0.0)) / tp + pc.final_norm
        on = c.one & (c.zero >= 2)
        root = np.where(on, np.minimum(1.0, root_p / np.maximum(loc.dense, 1.0)), 0.0)
        # blocks whose gather and reduce-scatter sit beside the root's at the two ends
        k = float(profile_value(c.job, "fsdp_root_exposed_blocks", 0))
        block = c.ms.sm.big_split / tp + c.ms.sm.big_rep
        ends = np.where(on, np.minimum(1.0, (root_p + k * block) / np.maximum(loc.dense, 1.0)),
                        0.0)
    raw, exposed = _sync_plan(c, rs, ag, last_bucket, st, root, ends)
    # (folded experts can be replicated over TP ranks even where dp x cp = 1)
    synced = (group > 1) | (egroup > 1)
    sent = (_bytes_sent(c, group, w_dense, g_bytes, root)
            + _bytes_sent(c, egroup, w_exp, ge_bytes))
    raw, exposed = np.where(synced, raw, 0.0), np.where(synced, exposed, 0.0)
    t_emb, b_emb = tied_embedding_sync(c, e_red)
    raw, exposed, sent = raw + t_emb, exposed + t_emb, sent + b_emb
    return DPTerms(group, egroup, g_bytes, ge_bytes, raw, exposed, sent, tp * c.cp * c.dp <= dom)


def tied_embedding_sync(c: Candidates, e_red: float) -> tuple[Any, Any]:
    """(seconds, bytes sent per GPU) of the tied word embedding's gradient all-reduce.

    Under PP a tied embedding lives on the first stage (input) and on the last (output head);
    after the backward the two gradients are summed by one blocking all-reduce over those two
    ranks, before the optimizer step and after (Megatron) or before (DeepSpeed) the DP
    reduction: Megatron-LM 6985e589 megatron/training.py train_step ('backward-embedding-
    all-reduce', torch.distributed.all_reduce over mpu.get_embedding_group()); DeepSpeed
    cd7967d6b deepspeed/runtime/pipe/engine.py _exec_reduce_tied_grads ->
    PipelineModule.allreduce_tied_weight_gradients (dist.all_reduce(weight.grad) over the tied
    group), which TrainSchedule issues right before ReduceGrads; Megatron-Core core_r0.8.0
    (baf94af3) megatron/core/distributed/finalize_model_grads.py
    _allreduce_word_embedding_grads, over parallel_state.get_embedding_group(). V h / tp elements of the reduced
    gradient's dtype (the profile's grad_reduce_bytes: DeepSpeed's fp16 .grad, its BF16
    optimizer's fp32 copy, Megatron's main_grad); the two ranks are (pp - 1) tp dp cp ranks
    apart; nothing overlaps it. Zero without PP or with an untied head."""
    m, pc = c.job.model, c.ms.sm.pc
    if not m.tied_embeddings or pc.lm_head:
        return 0.0 * c.pp, 0.0 * c.pp
    wte = m.vocab * m.hidden / c.tp * e_red
    r = ranks_per_node(np.maximum(c.pp - 1, 1) * c.tp * c.dp * c.cp, 2, c.dom)
    t = np.where(c.pp > 1, collective_time("all_reduce", wte, 2, r, c.cl), 0.0)
    # a ring all-reduce of two ranks sends (n - 1) / n x 2 x S = S bytes per rank
    return t, np.where(c.pp > 1, wte, 0.0)
