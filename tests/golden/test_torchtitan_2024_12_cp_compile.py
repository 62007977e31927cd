"""torchtitan's Dec-2024 CP rows (Table 2 of benchmarks/llama3_h100_202412_torchtitan.md: FSDP +
CP + torch.compile + Float8, Llama 3.1 8B on 8 H100) ran torch.compile, and under it torch's ring
loop waits for each of its collectives where it is issued (issue 16):

* torchtitan 9dec370 parallelize_llama.py apply_compile: every TransformerBlock compiled with
  fullgraph=True, so the SDPA call that torch's context_parallel replaces with its ring loop is
  traced with the block (source `torchtitan-9dec370-compile`);
* torch/distributed/_functional_collectives.py: a traced collective gets wait_tensor() right
  after it, and Inductor moves no wait at its default config (reorder_for_compute_comm_overlap
  False; source `torch-functional-collectives-traced-wait`).

So the forward K/V all-gather, the backward one and every fp32 dK/dV transfer run with nothing
beside them. Expected values are derived here from the row's shape (262,144 tokens over CP8:
32,768 local tokens; 32 query heads of 128, K and V repeated to all 32 by repeat_kv) and the
collectives engine's times for those byte counts; none is copied from the step model's output.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from scalemodel.analytic.planner import make_cluster
from scalemodel.analytic.step.comm import _cp_terms, collective_time
from scalemodel.specs.frameworks import get_framework
from scalemodel.specs.sources import all_sources

S, CP = 262_144, 8
LOCAL = S // CP  # 32,768 tokens per rank
WIDTH = 32 * 128 + 32 * 128  # K and V after repeat_kv: all 32 query heads of 128


def _cand(kernels: str) -> SimpleNamespace:
    return SimpleNamespace(
        job=SimpleNamespace(framework_id="torchtitan-2024-12", kernels=kernels),
        m=SimpleNamespace(kv_lora_rank=0, n_kv_heads=8),
        ms=SimpleNamespace(kv_dim=2 * 8 * 128.0, qk_dim=4096.0, v_dim=4096.0),
        e_a=2.0, b=np.array([1.0]), S=np.array([float(S)]), tp=np.array([1.0]),
        cp=np.array([float(CP)]), T=np.array([float(LOCAL)]), dom=8,
        cl=make_cluster("h100-sxm-hbm2e-500w", 8, inter="ndr-400"))


# attention calls long enough (1 s) to hide any transfer that is allowed to run beside them
LONG = SimpleNamespace(blk_f=(np.array([1.0]), np.array([1.0])),
                       blk_b=(np.array([1.0]), np.array([1.0])))


def test_profile_field_and_sources():
    fw = get_framework("torchtitan-2024-12")
    assert fw.get("cp_compiled_overlap") is False
    assert fw.sources["cp_compiled_overlap"] == "torchtitan-9dec370-compile"
    assert {"torchtitan-9dec370-compile", "torch-functional-collectives-traced-wait"} <= set(
        all_sources())
    # the later torchtitan profile states nothing about it: the loop's own placement is kept
    assert get_framework("torchtitan").get("cp_compiled_overlap") is None


def test_compiled_ring_waits_at_issue():
    # one rank's K/V chunk: 2 B x 32,768 tokens x 8,192 = 512 MiB; gathered over 8 ranks in one
    # node; dK, dV sent on in fp32 after each of the 8 calls: 4 B x 32,768 x 8,192 = 1 GiB
    kv = 2 * LOCAL * WIDTH
    assert kv == 512 * 2**20
    grad = 4 * LOCAL * WIDTH
    ag = float(np.ravel(collective_time("all_gather", CP * kv, float(CP), float(CP),
                                        _cand("fused").cl))[0])
    t_g = float(np.ravel(collective_time("send_recv", grad, 2.0, 2.0, _cand("fused").cl))[0])
    assert ag > 0 and t_g > 0
    intra = np.array([True])

    # compiled: the whole forward gather, the whole backward gather and all 8 dK/dV transfers
    kv_b, f_raw, b_raw, f_exp, b_exp, _ = _cp_terms(_cand("fused"), LONG, intra)
    assert float(kv_b[0]) == kv
    assert float(f_exp[0]) == pytest.approx(ag)
    assert float(b_exp[0]) == pytest.approx(ag + CP * t_g)
    assert float(b_raw[0]) == pytest.approx(ag + CP * t_g)  # nothing hidden: exposed = raw

    # eager: the gathers beside the diagonal calls, each dK/dV beside the next call, the last
    # one exposed
    _, f_raw_e, _, f_exp_e, b_exp_e, _ = _cp_terms(_cand("eager"), LONG, intra)
    assert float(f_raw_e[0]) == pytest.approx(float(f_raw[0]))
    assert float(f_exp_e[0]) == 0.0
    assert float(b_exp_e[0]) == pytest.approx(t_g)



def test_compiled_merge_bytes_derived_from_the_traced_ops():
    from scalemodel.analytic.step.attention import cp_merge_time

    # forward, per output element of one extra step, the merge as one fused elementwise kernel:
    # read the fp32 running output (4) and the bf16 partial (2), write the fp32 output (4); the
    # K/V torch.cat for the next step is unread after step 0 under the all-gather rotater (dead)
    fwd_out, fwd_kv = 4 + 2 + 4, 0
    # backward: grad_query (fp32) += bf16 dq: 4 + 2 + 4 per q element; per dk/dv element the
    # received fp32 accumulator (4) plus the bf16 partial (2) written into the cat that is sent
    # (4); the K/V cat dead as in the forward
    bwd_q, bwd_kv = 4 + 2 + 4, 4 + 2 + 4
    mb = get_framework("torchtitan-2024-12").values["cp_merge_bytes_compiled"]
    assert mb == {"fwd_out": fwd_out, "fwd_kv": fwd_kv, "bwd_q": bwd_q, "bwd_kv": bwd_kv}

    def cand(kernels):
        return SimpleNamespace(
            job=SimpleNamespace(framework_id="torchtitan-2024-12", kernels=kernels),
            m=SimpleNamespace(kv_lora_rank=0),
            ms=SimpleNamespace(qk_dim=4096.0, v_dim=4096.0, kv_dim=2 * 1024.0),
            T=float(LOCAL), tp=1.0, hbm=1e12)

    # 32,768 local tokens at 1 TB/s: forward 32,768 x 10 x 4,096 B, backward
    # 32,768 x (10 x 4,096 + 10 x 8,192) B (K and V of all 32 heads, repeat_kv)
    m_f, m_b = cp_merge_time(cand("fused"))
    assert m_f == pytest.approx(LOCAL * 10 * 4096 / 1e12)
    assert m_b == pytest.approx(LOCAL * (10 * 4096 + 10 * WIDTH) / 1e12)
    # eager keeps the op-by-op bytes (38 + 4 forward, 10 + 25 backward)
    e_f, e_b = cp_merge_time(cand("eager"))
    assert e_f == pytest.approx(LOCAL * (38 * 4096 + 4 * WIDTH) / 1e12)
    assert e_b == pytest.approx(LOCAL * (10 * 4096 + 25 * WIDTH) / 1e12)
