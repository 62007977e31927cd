"""Property tests: scheduler invariants and billing reconciliation on random inputs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.billing.catalog import parse_catalog
from scalemodel.billing.engine import bill
from scalemodel.sim.cluster.policies import NAMES
from scalemodel.sim.cluster.run import ClusterConfig, run_policy
from scalemodel.traces.jobs import JobSpec, Workload

job = st.builds(
    lambda sub, g, d, p, team, iv, grace: (sub, g, d, p, team, iv, grace),
    st.integers(0, 500), st.sampled_from([1, 2, 3, 4, 8, 12, 16, 24, 32]),
    st.integers(1, 400), st.integers(0, 2), st.sampled_from(["a", "b", "c"]),
    st.sampled_from([0, 50, 100]), st.sampled_from([0, 0, 30]))


@settings(max_examples=25, deadline=None)
@given(st.lists(job, min_size=1, max_size=40), st.sampled_from(NAMES))
def test_scheduler_invariants(jobs, policy):
    specs = tuple(JobSpec(f"j{i}", s, g, float(d), p, t, iv, 10.0, 5.0, float(gr))
                  for i, (s, g, d, p, t, iv, gr) in enumerate(jobs))
    cfg = ClusterConfig(nodes=4, gpus_per_node=8, nodes_per_rack=2)
    # check=True asserts after every instant: no over-allocation, whole gangs, quotas
    r = run_policy(Workload("h", specs), policy, cfg, check=True)
    assert r.jobs_completed == len(specs)
    assert abs(r.allocated_gpu_s - (r.useful_gpu_s + r.lost_gpu_s
                                    + r.spread_overhead_gpu_s)) < 1e-6 * max(1, r.allocated_gpu_s)
    assert r.idle_gpu_s >= -1e-6 * max(1, r.capacity_gpu_s)
    assert abs(r.useful_gpu_s - sum(s.gpus * s.duration_s for s in specs)) < 1e-6 * r.useful_gpu_s


CAT = parse_catalog({"currency": "USD", "sku": {
    "sec": {"price_per": "3600", "increment": "60", "minimum": "60",
            "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "2.49"},
                       {"from": "2026-11-15T00:00:00Z", "unit_price": "1.99"}]},
    "tok": {"price_per": "1000", "increment": "1000", "increment_scope": "period", "free": "500",
            "prices": [{"from": "2026-01-01T00:00:00Z", "unit_price": "0.0015"}]}}})

rec = st.tuples(st.integers(0, 30), st.sampled_from(["x", "y"]),
                st.sampled_from(["sec", "tok", "nope"]), st.integers(0, 60 * 86400),
                st.integers(-5, 9000))


def _raws(recs):
    out = []
    for n, (i, acct, sku, t, q) in enumerate(recs, start=2):
        d = {"id": f"r{i}", "account": acct, "sku": sku,
             "start": f"2026-10-{1 + t // 86400 % 28:02d}T{t % 86400 // 3600:02d}:00:00Z"
             if t < 28 * 86400 else f"2026-11-{1 + t // 86400 % 28:02d}T00:00:00Z",
             "quantity": str(q)}
        out.append((n, d, "", "\x1f".join(str(v) for k, v in d.items() if k != "id")))
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(rec, max_size=40))
def test_billing_reconciles(recs):
    inv = bill(_raws(recs), CAT)
    c = inv.counts
    assert c["read"] == len(recs) == c["billed"] + c["duplicates"] + c["unbilled"]
    assert sum(ln.amount_minor for ln in inv.lines) == inv.total_minor
    assert inv.to_dict()["total_minor_units"] == inv.total_minor


@settings(max_examples=15, deadline=None)
@given(st.lists(rec, max_size=25))
def test_billing_twice_with_ledger_bills_nothing_new(tmp_path_factory, recs):
    from scalemodel.billing.ledger import Ledger

    led = Ledger(tmp_path_factory.mktemp("l") / "l.sqlite")
    bill(_raws(recs), CAT, ledger=led)
    again = bill(_raws(recs), CAT, ledger=led)
    led.close()
    assert again.lines == () and again.total_minor == 0
    assert again.counts["billed"] == 0
