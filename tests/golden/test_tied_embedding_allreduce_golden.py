"""The tied word embedding's gradient all-reduce between the first and last pipeline stages.

Sources (the code each framework ran): Megatron-LM 6985e589 megatron/training.py train_step
('backward-embedding-all-reduce': torch.distributed.all_reduce of the word embedding's
main_grad over mpu.get_embedding_group(), the first and last stage, after the DP all-reduce);
DeepSpeed cd7967d6b (2021-10) deepspeed/runtime/pipe/engine.py _exec_reduce_tied_grads ->
pipe/module.py allreduce_tied_weight_gradients (dist.all_reduce(weight.grad) over the tied
group; schedule.py TrainSchedule issues ReduceTiedGrads right before ReduceGrads); Megatron-Core
core_r0.8.0 (baf94af3) finalize_model_grads.py _allreduce_word_embedding_grads. One blocking
all-reduce of V h / tp gradient elements over two ranks, nothing beside it.
"""

from pathlib import Path

import pytest

from scalemodel.analytic.planner import evaluate_one, search
from scalemodel.analytic.step import data_parallel
from scalemodel.analytic.validate import read_rows, row_problem

ROOT = Path(__file__).resolve().parents[2] / "validation"
MTNLG = {"tp": 8, "pp": 35, "dp": 8, "cp": 1, "ep": 1, "zero": 0, "vpp": 1,
         "micro_batch": 1, "recompute": "full"}


def _mtnlg():
    rows = {r["id"]: r for r in read_rows((ROOT / "published_runs_papers.csv").read_text())}
    p = row_problem(rows["mt-nlg-530b-2240"])  # profile megatron-deepspeed-2021, tied, hdr-200
    return p.job, p.cluster


def test_mtnlg_embedding_allreduce_by_hand(monkeypatch):
    # MT-NLG 530B (Smith et al. 2022): V 51,200, h 20,480, TP 8, fp16 .grad (the profile's
    # grad_reduce_bytes 2): 51200 x 20480 / 8 x 2 = 262,144,000 bytes per rank. The first and
    # last stage are 34 nodes apart, so the all-reduce of two ranks crosses one HDR port: a
    # ring of two sends (n - 1) / n x 2 x S = S bytes each way, at 25e9 B/s x 0.96 (links.toml
    # hdr-200, nccl#812) = 24e9 B/s: 10.9 ms, plus latency.
    job, cl = _mtnlg()
    wte = 51200 * 20480 / 8 * 2
    assert wte == 262_144_000
    with_term = evaluate_one(job, cl, MTNLG).values
    monkeypatch.setattr(data_parallel, "tied_embedding_sync",
                        lambda c, e: (0.0 * c.pp, 0.0 * c.pp))
    without = evaluate_one(job, cl, MTNLG).values
    extra = with_term.dp_s - without.dp_s
    assert extra == pytest.approx(wte / 24e9, rel=0.03)
    # exposed in full (nothing overlaps it) and counted in the step
    assert with_term.dp_raw_s - without.dp_raw_s == pytest.approx(extra, rel=1e-9)
    assert with_term.step_time_s - without.step_time_s == pytest.approx(extra, rel=1e-6)


def test_no_term_without_pipeline(monkeypatch):
    # one stage holds the input table and the output head: no second copy to sum
    rows = {r["id"]: r for r in read_rows((ROOT / "training_runs.csv").read_text())}
    p = row_problem(rows["megatron-1.7b"])  # SC21 Table 1: tied embeddings, TP1 PP1 DP32
    seen = []
    real = data_parallel.tied_embedding_sync

    def spy(c, e):
        t, b = real(c, e)
        seen.append((c.pp.copy(), t, b))
        return t, b

    monkeypatch.setattr(data_parallel, "tied_embedding_sync", spy)
    search(p.job, p.cluster, p.stated, top=0)
    pp, t, b = seen[0]
    assert (pp == 1).all() and float(abs(t).max()) == 0.0 and float(abs(b).max()) == 0.0
