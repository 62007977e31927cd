"""The eager MoE layer's host floor (analytic/step/host.py eager_layer_floor).

Sources: the measurement is bench/bench_moe_host.py of 2026-12-02 (docs/benchmarks.md "Host
time of one eager Megatron-Core MoE layer", source scalemodel-bench-moe-host-2026-12-02): the
median host seconds of one Megatron-Core 0.16.1 layer at 128 tokens, forward / backward, at 8,
16 and 128 local experts. The experts' launches per local expert are counted from the runs'
code path: Megatron-Core 0.16.1 experts.py TEGroupedMLP.forward (fc1 and fc2, one GEMM per local
expert each, TE GroupedLinear; one weighted SwiGLU for all of them) and TE's GroupedLinear
backward (one grouped dgrad and one grouped wgrad call per linear, one GEMM per local expert
each: 4 per expert, and the SwiGLU's backward), at op_launch_s (4.5 us, source
pytorch-dev-discuss-fixed-overhead)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic import validate as V
from scalemodel.analytic.planner import make_cluster, make_job, search
from scalemodel.analytic.step.config import constants
from scalemodel.analytic.step.host import eager_layer_floor
from scalemodel.specs import get_model
from scalemodel.specs.evidence import evidence_of
from scalemodel.specs.frameworks import job_settings

# docs/benchmarks.md, the 128-token rows (medians of 15, ms): local experts -> (forward, backward)
_BENCH_MS = {8: (2.87, 2.04), 16: (3.71, 2.88), 128: (18.82, 14.09)}


def _least_squares(pts: dict[int, float]) -> tuple[float, float]:
    n = list(pts)
    y = [pts[k] for k in n]
    nm, ym = sum(n) / 3, sum(y) / 3
    slope = sum((a - nm) * (b - ym) for a, b in zip(n, y, strict=True)) / sum((a - nm) ** 2 for a in n)
    return ym - slope * nm, slope


def test_the_constants_are_the_benchmark_fit():
    # the fixed part is the intercept of host ms against local experts over the three rows:
    # forward: mean n = 152/3 = 50.67, mean y = 25.40/3 = 8.467 ms, slope = 0.1337 ms/expert,
    # intercept 8.467 - 0.1337 x 50.67 = 1.69 ms; backward the same way: 1.26 ms
    h = constants()["host"]
    fwd0, fwd_slope = _least_squares({k: v[0] for k, v in _BENCH_MS.items()})
    bwd0, bwd_slope = _least_squares({k: v[1] for k, v in _BENCH_MS.items()})
    assert h["layer_fwd_s"] == pytest.approx(fwd0 * 1e-3, rel=0.01)
    assert h["layer_bwd_s"] == pytest.approx(bwd0 * 1e-3, rel=0.01)
    assert fwd_slope == pytest.approx(0.1337, rel=0.01)  # SequentialMLP's per-expert Python
    assert bwd_slope == pytest.approx(0.1003, rel=0.01)
    assert evidence_of("scalemodel-bench-moe-host-2026-12-02") == "microbenchmark"


def _job(fid, gpu, model="qwen3-30b-a3b", prec="fp8"):
    m = get_model(model)
    _, s = job_settings(fid, gpu, model=m.id)
    return m, make_job(m, seq_len=4096, global_batch_seqs=512, precision=prec, **s)


def _floor(fid, gpu, gpus, model="qwen3-30b-a3b", **cand):
    """eager_layer_floor of a candidate at EP8 on ``gpus`` GPUs of ``gpu`` under ``fid``'s
    recipe (fp8 jobs; ``cand`` the candidate's other fields, e.g. fp8=True)."""
    m, job = _job(fid, gpu, model=model)
    return eager_layer_floor(SimpleNamespace(job=job, gpu=make_cluster(gpu, gpus).gpu, m=m,
                                             ep=np.float64(8.0), **cand))


def test_floor_from_the_bench_and_the_grouped_launches():
    # 26.02 H100 FP8 recipe (no CUDA graph at fp8), EP8: 16 local experts
    #   FP8-CS (per-tensor current scaling): TE quantises each expert's split apart, 4 kernels
    #   a split (zero amax, amax, scale, cast; source te-split-quantize-per-split), fc1 and fc2
    #   inputs forward, their output gradients backward: 2 x 4 x 16 = 128 launches each way
    #   forward  1.691 ms + (2 x 16 + 1 + 128) x 4.5 us = 1.691 + 0.7245 = 2.4155 ms
    #   backward 1.257 ms + (4 x 16 + 1 + 128) x 4.5 us = 1.257 + 0.8685 = 2.1255 ms
    f, b = _floor("nemo-26.02", "h100-sxm", 16, fp8=True)
    assert float(f) == pytest.approx(2.4155e-3, rel=1e-9)
    assert float(b) == pytest.approx(2.1255e-3, rel=1e-9)


def test_scope_constants_are_the_bench_shares():
    # bench/moe_host_scopes_2026-12-07.json (bench_moe_host.py --scopes, four runs; source
    # scalemodel-bench-moe-host-scopes-2026-12-07): each scope's share of the layer's CPU time
    # within a pass, median over the runs' medians, at 8 and 16 experts, times the 2026-12-02
    # layer figures at the same counts (_BENCH_MS), the mean of the two counts. E.g. attn forward:
    # 28.18% x 2.87 ms = 0.809 ms at 8, 23.57% x 3.71 ms = 0.875 ms at 16, mean 0.842 ms
    import json
    import statistics

    runs = json.loads((Path(__file__).resolve().parents[2] / "bench"
                       / "moe_host_scopes_2026-12-07.json").read_text())["runs"]
    h = constants()["host"]
    for key, col, const in (("scope_forward_share", 0, "scope_fwd_s"),
                            ("scope_backward_share", 1, "scope_bwd_s")):
        for scope in ("attn", "moe_router", "moe_preprocess"):
            per_n = [statistics.median(r[key][scope] for d in runs for r in d["scopes"]
                                       if r["experts"] == n) * _BENCH_MS[n][col] * 1e-3
                     for n in (8, 16)]
            assert h[const][scope] == pytest.approx(sum(per_n) / 2, rel=0.01), (const, scope)
    assert evidence_of("scalemodel-bench-moe-host-scopes-2026-12-07") == "microbenchmark"


def test_a_partly_graphed_layer_keeps_its_eager_part():
    # 25.11 B200 recipe captures moe_router + moe_preprocess at fp8 (MXFP8: 1 quantise launch a
    # split), EP8: 16 local experts. The eager part: the fixed part less the two scopes, plus
    # one graph launch a pass, plus the grouped launches:
    #   forward  (1.691 - 0.570 - 0.166) + 0.0045 + (2 x 16 + 1 + 2 x 16) x 0.0045 = 1.252 ms
    #   backward (1.257 - 0.250 - 0.085) + 0.0045 + (4 x 16 + 1 + 2 x 16) x 0.0045 = 1.363 ms
    f, b = _floor("nemo-25.11", "b200", 8, fp8=True)
    assert float(f) == pytest.approx(1.252e-3, rel=1e-9)
    assert float(b) == pytest.approx(1.363e-3, rel=1e-9)
    # the 26.04.01 B200 recipe adds attn: forward 1.691 - 0.842 - 0.570 - 0.166 = 0.113 ms left
    f, _ = _floor("nemo-26.04", "b200", 8, fp8=True)
    assert float(f) == pytest.approx((0.113 + 0.0045 + 65 * 0.0045) * 1e-3, rel=1e-9)


def test_no_floor_where_the_moe_mlp_replays_or_not_megatron_core():
    # 26.06 GB200 recipe at fp8 captures full_iteration (the whole step, the MoE MLP included):
    # no wait in the layer, no floor
    assert _floor("nemo-26.06", "gb200", 8, fp8=True) == (0.0, 0.0)
    # DeepSeek's HAI-LLM is not Megatron-Core
    assert _floor("deepseek-hai-llm", "h800", 8, model="deepseek-v3") == (0.0, 0.0)


def _skills_row(rid):
    text = Path("validation/published_runs_skills.csv").read_text()
    row = next(r for r in V.read_rows(text) if r["id"] == rid)
    p = V.row_problem(row)
    return p, search(p.job, p.cluster, p.stated, top=0).best.values


def test_the_floor_bounds_the_moonlight_step():
    # Moonlight-16B-A3B on 8 H100, BF16, TP2 EP8, MBS 1, GBS 4 -> DP4, one micro-batch per step;
    # nemo-26.06 has no Moonlight recipe: eager, all-to-all. 26 MoE layers (27, the first dense),
    # 64 / 8 = 8 local experts: floor per MoE layer 1.691 + 17 x 0.0045 = 1.7675 ms forward,
    # 1.257 + 33 x 0.0045 = 1.4055 ms backward; the step is at least 26 x 3.173 = 82.5 ms
    p, v = _skills_row("skills-moonlight-16b-h100-empty-control")
    assert float(v.host_s) > 0.0
    assert float(v.step_time_s) >= 26 * (1.7675e-3 + 1.4055e-3)


def test_gpu_bound_rows_keep_their_time():
    # the 26.02 H100 row (TP1 PP2 EP8, MBS 1): the planner's GPU time per MoE layer and
    # micro-batch (t_slow / 24 layers a stage, about 6.5 ms) exceeds the floor (4.54 ms); what
    # the row's host term holds is the flex dispatcher's launches after its wait (3 + 16 x 2 + 1
    # + 3 padding + 128 quantise = 167 at 4.5 us = 0.75 ms, less their GPU time), no floor
    text = Path("validation/published_runs_2026.csv").read_text()
    row = next(r for r in V.read_rows(text) if r["id"] == "nemo-qwen3-30b-a3b-h100-260201")
    p = V.row_problem(row)
    v = search(p.job, p.cluster, p.stated, top=0).best.values
    assert float(v.t_slow_s) / 24 > 2.4155e-3 + 2.1255e-3
    assert 0.0 < float(v.host_s) / (128 * 24) < 167 * 4.5e-6


def test_the_derivation_closes_with_the_floor():
    # the worked answer's checks (t_mb = t_c + t_tp + t_cp + t_ep + t_host, the step inside its
    # bounds, the nothing-overlapped bound now holding the host time) pass on a floored row
    from scalemodel.analytic.step.derivation import derive_row

    text = Path("validation/published_runs_skills.csv").read_text()
    row = next(r for r in V.read_rows(text) if r["id"] == "skills-moonlight-16b-h100-empty-control")
    p = V.row_problem(row)
    res = search(p.job, p.cluster, p.stated, top=1)
    d = derive_row(res, res.best)
    assert float(res.best.values.upper_s) >= float(res.best.values.step_time_s)
    assert d is not None
