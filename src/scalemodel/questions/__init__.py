"""The question bank: the 24 interview questions, each answered by one module of this package.

A question module is named after its id (``kv-cache`` -> ``kv_cache.py``) and provides
``PARAMS`` (the parameters it takes, see :mod:`.params`) and ``build(opts: dict) -> Report``: it
sets up the classic scenario of the question, lets ``opts`` (every declared parameter, given or
default) override it, calls the engines and returns a worked answer with its follow-ups.
:func:`build_answer` refuses a parameter the question does not declare. A question whose module
does not exist yet is listed as "planned".
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput, close_matches


@dataclass(frozen=True)
class QuestionInfo:
    id: str
    loops: tuple[str, ...]
    title: str
    capability: str  # the work tool that answers it

    @property
    def module(self) -> str:
        return f"scalemodel.questions.{self.id.replace('-', '_')}"

    @property
    def status(self) -> str:
        return "answered" if importlib.util.find_spec(self.module) is not None else "planned"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "loops": list(self.loops), "title": self.title,
                "capability": self.capability, "status": self.status}


_D, _X = "DeepSeek", "xAI"

BANK: tuple[QuestionInfo, ...] = (
    QuestionInfo("kv-cache", (_D,), "How big is the KV cache of a 70B model, and how do you shrink it?", "kv"),
    QuestionInfo("training-memory", (_D,), "What does training a 70B model cost in bytes per GPU, and which layout does that force?", "memory"),
    QuestionInfo("roofline", (_D, _X), "Where is the ridge point of an H100, and why is batch-1 decode memory-bound?", "roofline"),
    QuestionInfo("parallelism-traffic", (_D, _X), "What does each parallelism strategy send over the wire, and how often?", "comm"),
    QuestionInfo("ring-allreduce", (_D, _X), "Derive the ring all-reduce cost; why is it near optimal and when does a tree win?", "comm"),
    QuestionInfo("fabric-map", (_D, _X), "Which parallelism goes on NVLink and which on the scale-out network, and why?", "comm"),
    QuestionInfo("nccl-topology", (_D, _X), "How does NCCL use the topology (rings, trees, GPUDirect, rails), and why does nvidia-smi mislead?", "comm"),
    QuestionInfo("roce-vs-ib", (_X,), "RoCE or InfiniBand at 400 Gb/s: which would you build, and what would change your mind?", "comm"),
    QuestionInfo("moe-latency-layout", (_D,), "Serving a sparse model under a tight latency SLA: EP or TP, and what drives the tail?", "moe"),
    QuestionInfo("moe-global-serving", (_D,), "Hundreds of experts, users on every continent: where do experts and KV caches live?", "moe"),
    QuestionInfo("moe-routing", (_X,), "Why do MoE routers collapse, and what do auxiliary losses, capacity factors and bias balancing do?", "moe"),
    QuestionInfo("gpu-hierarchy", (_D, _X), "Map threads, warps, blocks and grids onto SMs for a concrete launch.", "gpu"),
    QuestionInfo("memory-hierarchy", (_D, _X), "Latency and bandwidth from registers to the network: the numbers and how to measure them.", "gpu"),
    QuestionInfo("occupancy", (_D, _X), "When does 25% occupancy beat 75%, and what limits occupancy?", "gpu"),
    QuestionInfo("coalescing-transpose", (_D, _X), "Uncoalesced access and bank conflicts in a matrix transpose, and the fixes.", "gpu"),
    QuestionInfo("warp-divergence", (_D, _X), "Which branches diverge, what does divergence cost, and how do you avoid it?", "gpu"),
    QuestionInfo("billing", (_D,), "Build a usage bill: exact money, billing increments, unknown SKUs, duplicate events.", "bill"),
    QuestionInfo("blast-radius", (_D, _X), "One synchronous job on 16k GPUs: what does each failure domain take down?", "reliability"),
    QuestionInfo("checkpoint-failures", (_X,), "Something fails every few hours at 16k GPUs: how often do you checkpoint, and what else?", "reliability"),
    QuestionInfo("hang-triage", (_X,), "The job hangs with every GPU at 100% and no error: find the rank and the collective.", "triage"),
    QuestionInfo("slowdown-triage", (_X,), "The run is suddenly half as fast: straggler, fabric, or lost overlap?", "triage"),
    QuestionInfo("cluster-scheduler", (_X,), "Design a GPU cluster scheduler: gangs, topology, preemption, quotas, fragmentation.", "cluster"),
    QuestionInfo("scale-scoping", (_D,), "Tell me about the scale you ran: an answer that holds up at 4 or 4,000 GPUs.", "claims"),
    QuestionInfo("resume-walk", (_X,), "Walk through your resume for an infra role: what makes the numbers credible?", "claims"),
)


def question(qid: str) -> QuestionInfo:
    for q in BANK:
        if q.id == qid:
            return q
    ids = [q.id for q in BANK]
    raise BadInput(f"unknown question {qid!r}; did you mean: {close_matches(qid, ids) or ', '.join(ids)}?")


def params_of(qid: str) -> tuple[Any, ...]:
    """The declared parameters (``Param``) of an answered question (imports its module)."""
    q = question(qid)
    if q.status != "answered":
        raise BadInput(f"question {qid!r} is planned but not answered yet (see scalemodel questions)")
    return tuple(getattr(importlib.import_module(q.module), "PARAMS", ()))


def build_answer(qid: str, opts: dict[str, Any]) -> Any:
    """The worked answer of one question (a Report) from its declared parameters by name (a
    missing or None value takes the default); BadInput for a parameter it does not declare or
    a question that is not answered yet. The answer's data gains ``parameters`` (the values
    used, as given: in the unit each flag names) and, where the question draws none itself,
    its figure from :mod:`.figures`."""
    from .figures import attach
    from .params import resolve

    params = params_of(qid)
    given = {k: v for k, v in opts.items() if v is not None}
    rep = importlib.import_module(question(qid).module).build(resolve(qid, params, given))
    if isinstance(rep.data, dict):
        rep.data.setdefault("parameters", {p.name: given.get(p.name, p.default) for p in params})
    return attach(qid, rep)
