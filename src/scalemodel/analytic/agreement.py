"""Layout agreement: does the free search pick the layout an expert team ran?

For every validation row whose source states its layout (at least TP and PP), the planner is
asked the team's question with only what the team could not choose fixed: model, GPU count and
type, global batch, sequence length, precision and framework profile. Every layout key (TP, PP,
DP, CP, EP, expert TP, ZeRO, virtual stages, micro-batch, recompute) is free within what the
framework profile offered (its ``recompute_options`` and ``parallelisms``). The answer is
compared with the team's layout priced by the same step model (its unstated keys searched, as
``scalemodel validate`` does):

* ``rank_of_published``: 1 + the number of fitting layouts of the free search predicted faster
  than the team's layout (1: the search agrees), counted over the rows the search picks its best
  from: the grid and its second phase (block recompute of the fewest layers, the recompute
  module sets), priced as ``plan train`` prices them (:func:`ranked_against`);
* ``speedup_predicted``: the search's best over the team's layout, in tokens per second, less 1;
* the term that makes the difference: the term of the step breakdown (compute, exposed TP, CP,
  EP, PP or DP communication, bubble, optimizer, overlap slowdown) whose time the pick saves
  most against the team's layout;
* ``keys_differ`` and ``layout_class``: the layout keys the pick changes and the class of the
  disagreement, the first of :data:`CLASS_ORDER` whose keys are among them (recompute before
  EP before TP / CP before PP before micro-batch before ZeRO before DP: the keys that change
  what the step computes come before those that change only where it runs). The top level's
  ``by_class`` counts the rows above 10% by class and by term;
* ``speedup_recompute_held``: the same comparison with the recompute the source states held in
  the free search too (None where the source states none). A diagnostic beside the share, not
  in it: where a source runs recompute as its study's variable or its default, this says
  whether the other keys agree. Top level: ``share_within_10pct_recompute_held`` over the rows
  that state a recompute.

A search that beats a layout the best teams run by a wide margin is evidence of a mispriced term,
not of a better layout; the row names the term to look at.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput
from .planner import (
    RECOMPUTE_KEYS,
    Cluster,
    Job,
    PlanResult,
    _evaluate_two_phase,
    breakdown,
    layout_grid,
    search,
)
from .validate import read_rows, row_problem

# the keys a source must state for its row to count as "states its layout"
STATED_KEYS = ("tp", "pp")
WITHIN = 0.10  # the agreement threshold: the team's layout within 10% of the best
# the layout keys compared, and the classes of a disagreement in the order they are assigned
COMPARED_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "vpp", "micro_batch", "recompute",
                 "recompute_modules", "recompute_layers")
CLASS_ORDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("recompute", ("recompute", "recompute_modules", "recompute_layers")),
    ("ep", ("ep", "etp")),
    ("tp_cp", ("tp", "cp")),
    ("pp", ("pp", "vpp")),
    ("micro_batch", ("micro_batch",)),
    ("zero", ("zero",)),
    ("dp", ("dp",)),
)


def keys_differ(published: dict[str, Any], pick: dict[str, Any]) -> tuple[str, ...]:
    """The layout keys whose value the pick changes (a key absent on one side counts as its
    default: 1, or none for the recompute keys; expert TP only where either side has experts
    split, ep > 1: without EP it is the TP degree again)."""
    def val(d: dict[str, Any], k: str) -> Any:
        v = d.get(k)
        if k.startswith("recompute"):
            return v or ("none" if k == "recompute" else None)
        return 1 if v is None else v
    moe = val(published, "ep") > 1 or val(pick, "ep") > 1
    return tuple(k for k in COMPARED_KEYS
                 if (moe or k != "etp") and val(published, k) != val(pick, k))


def layout_class(keys: tuple[str, ...]) -> str:
    """The class of a disagreement: the first class of CLASS_ORDER among the changed keys."""
    for name, ks in CLASS_ORDER:
        if any(k in keys for k in ks):
            return name
    return "none"


@dataclass(frozen=True)
class AgreementRow:
    id: str
    source: str
    model: str
    gpus: int
    gpu: str
    stated: dict[str, Any]  # the keys the source states
    published_layout: dict[str, Any]  # those keys with the unstated ones searched
    search_best: dict[str, Any]
    published_tokens_per_s: float
    best_tokens_per_s: float
    rank_of_published: int
    fitting_layouts: int
    term: str  # the breakdown term the pick saves most
    term_saving_s: float
    published_breakdown_s: dict[str, float]
    best_breakdown_s: dict[str, float]
    published_step_time_s: float
    best_step_time_s: float
    # the free search's best with the stated recompute held, tokens/s (None: none stated)
    held_tokens_per_s: float | None = None

    @property
    def speedup_recompute_held(self) -> float | None:
        if self.held_tokens_per_s is None:
            return None
        return self.held_tokens_per_s / self.published_tokens_per_s - 1

    @property
    def keys_differ(self) -> tuple[str, ...]:
        return keys_differ(self.published_layout, self.search_best)

    @property
    def layout_class(self) -> str:
        return layout_class(self.keys_differ)

    @property
    def speedup_predicted(self) -> float:
        return self.best_tokens_per_s / self.published_tokens_per_s - 1

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "model": self.model, "gpus": self.gpus,
                "gpu": self.gpu, "stated": self.stated,
                "published_layout": self.published_layout, "search_best": self.search_best,
                "speedup_predicted": self.speedup_predicted,
                "rank_of_published": self.rank_of_published,
                "fitting_layouts": self.fitting_layouts,
                "published_tokens_per_s": self.published_tokens_per_s,
                "best_tokens_per_s": self.best_tokens_per_s,
                "published_step_time_s": self.published_step_time_s,
                "best_step_time_s": self.best_step_time_s,
                "term": self.term, "term_saving_s": self.term_saving_s,
                "keys_differ": list(self.keys_differ), "layout_class": self.layout_class,
                "speedup_recompute_held": self.speedup_recompute_held,
                "published_breakdown_s": self.published_breakdown_s,
                "best_breakdown_s": self.best_breakdown_s}


def states_layout(row: dict[str, str]) -> bool:
    return all((row.get(k) or "").strip() for k in STATED_KEYS)


def ranked_against(job: Job, cl: Cluster, tokens_per_s: float,
                   free: PlanResult | None = None) -> tuple[int, int]:
    """(the fitting layouts of the free search predicted faster than ``tokens_per_s``, the
    fitting layouts): counted over the rows ``search(job, cl, {})`` picks its best from, both of
    its phases, priced as it prices them. ``free``: that search's result, when the caller has
    it (its ``fitting_tokens_per_s``), so the grid is not priced twice."""
    if free is None or free.fitting_tokens_per_s is None:
        _, res, _ = _evaluate_two_phase(job, cl, layout_grid(job, cl, {}), 0)
        thr = np.asarray(res.tokens_per_s)[np.asarray(res.fits, dtype=bool)]
    else:
        thr = free.fitting_tokens_per_s
    return int(np.count_nonzero(thr > tokens_per_s * (1 + 1e-9))), int(thr.size)


def agree_row(row: dict[str, str]) -> AgreementRow:
    """The free search against the team's layout for one validation row."""
    p = row_problem(row)
    pub = search(p.job, p.cluster, p.stated, top=0).best
    pub_tps = float(pub.values.tokens_per_s)
    # the free grid holds only what the row's framework profile offered (its parallelisms and
    # recompute_options, read by planner.layout_grid): the same search plan train runs
    try:
        free = search(p.job, p.cluster, {}, top=0)
    except BadInput:
        raise BadInput("the free search finds no layout that fits") from None
    best = free.best
    # rank: every fitting layout the free search priced, predicted faster than the team's. The
    # rows are those search() ranks its pick among: the grid and its second phase (the partial
    # recompute policies, block recompute of the fewest layers and the module sets, of the
    # layouts that do not fit without recompute), merged by planner._evaluate_two_phase
    faster, fitting = ranked_against(p.job, p.cluster, pub_tps, free)
    # the diagnostic: the same free search with the source's recompute held
    held_keys = {k: v for k, v in p.stated.items() if k in ("recompute", *RECOMPUTE_KEYS)}
    held = None
    if "recompute" in held_keys:
        try:
            held = float(search(p.job, p.cluster, held_keys, top=0).best.values.tokens_per_s)
        except BadInput:  # cannot happen where the team's layout fits; kept as "none stated"
            held = None
    bp, bb = breakdown(pub.values), breakdown(best.values)
    saving = {k: bp[k] - bb[k] for k in bp}
    term = max(saving, key=lambda k: saving[k])
    if saving[term] <= 0:  # the pick is the team's layout, or saves on no term
        term = "none"
    return AgreementRow(
        row["id"], row.get("source", ""), p.model.id, p.cluster.n_gpus, p.cluster.gpu.id,
        dict(p.stated), pub.layout.as_dict(), best.layout.as_dict(), pub_tps,
        float(best.values.tokens_per_s), faster + 1, fitting, term,
        float(saving.get(term, 0.0)),
        bp, bb, float(pub.values.step_time_s), float(best.values.step_time_s), held)


@dataclass(frozen=True)
class Agreement:
    rows: list[AgreementRow]
    skipped: list[tuple[str, str]]  # (row id, why)

    @property
    def share_within_10pct(self) -> float:
        if not self.rows:
            return float("nan")
        return sum(r.speedup_predicted <= WITHIN for r in self.rows) / len(self.rows)

    @property
    def median_speedup(self) -> float:
        return (statistics.median(r.speedup_predicted for r in self.rows) if self.rows
                else float("nan"))

    @property
    def picks_published(self) -> int:
        return sum(r.rank_of_published == 1 for r in self.rows)

    @property
    def share_within_10pct_recompute_held(self) -> float:
        held = [r.speedup_recompute_held for r in self.rows if r.speedup_recompute_held is not None]
        return sum(x <= WITHIN for x in held) / len(held) if held else float("nan")

    @property
    def by_class(self) -> dict[str, dict[str, int]]:
        """The rows whose pick is predicted more than 10% faster, counted by class and term."""
        out: dict[str, dict[str, int]] = {}
        for r in self.rows:
            if r.speedup_predicted > WITHIN:
                terms = out.setdefault(r.layout_class, {})
                terms[r.term] = terms.get(r.term, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -sum(kv[1].values())))

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "by_class": self.by_class,
                "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
                "share_within_10pct": self.share_within_10pct,
                "median_speedup_predicted": self.median_speedup,
                "rows_ranked_first": self.picks_published, "row_count": len(self.rows),
                "share_within_10pct_recompute_held": self.share_within_10pct_recompute_held,
                "rows_stating_recompute": sum(r.speedup_recompute_held is not None
                                              for r in self.rows)}


def agreement(text: str, ids: list[str] | None = None) -> Agreement:
    """Layout agreement over the rows of a validation CSV that state their layout (``ids``: only
    those rows); a row the planner cannot price is skipped with its reason."""
    rows, skipped = [], []
    all_rows = read_rows(text)
    if ids:
        unknown = set(ids) - {r.get("id", "") for r in all_rows}
        if unknown:
            raise BadInput(f"--rows: no row with id {sorted(unknown)[0]!r} in the file")
    for row in all_rows:
        rid = row.get("id", "?")
        if ids and rid not in ids:
            continue
        if not states_layout(row):
            skipped.append((rid, "the source does not state TP and PP"))
            continue
        try:
            rows.append(agree_row(row))
        except BadInput as e:
            skipped.append((rid, str(e)))
    return Agreement(rows, skipped)
