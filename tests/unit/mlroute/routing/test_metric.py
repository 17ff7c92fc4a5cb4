"""The metric: water-filling (vs an exact brute-force reference), leximin orders, Hedera's estimator, reports."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mlroute.routing.metric as metric
from mlroute.routing.demand import estimate_demands
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.metric import compare, job_leximin_compare, job_rates, leximin_compare, rates, report, water_fill


def reference_max_min(flow_links, caps, demands=None):
    """Exact max-min fair rates with Fractions: raise all unfrozen flows together, freeze at each bottleneck."""
    n = len(flow_links)
    caps = [Fraction(c) for c in caps]
    dem = [None if demands is None or demands[i] is None else Fraction(demands[i]) for i in range(n)]
    rate = [Fraction(0)] * n
    active = set(range(n))
    for i in list(active):
        if not len(flow_links[i]):
            active.discard(i)
            rate[i] = dem[i] if dem[i] is not None else None
    level = Fraction(0)
    while active:
        best = None
        for link, c in enumerate(caps):
            users = [i for i in range(n) for x in flow_links[i] if x == link]
            act = [i for i in users if i in active]
            if not act:
                continue
            frozen = sum((rate[i] for i in users if i not in active), Fraction(0))
            lvl = (c - frozen) / len(act)
            best = lvl if best is None else min(best, lvl)
        for i in active:
            if dem[i] is not None:
                best = dem[i] if best is None else min(best, dem[i])
        level = best
        newly = set()
        for link, c in enumerate(caps):
            users = [i for i in range(n) for x in flow_links[i] if x == link]
            act = [i for i in users if i in active]
            if act:
                frozen = sum((rate[i] for i in users if i not in active), Fraction(0))
                if (c - frozen) / len(act) == level:
                    newly.update(act)
        newly.update(i for i in active if dem[i] is not None and dem[i] == level)
        for i in newly:
            rate[i] = level
        active -= newly
    return rate


@st.composite
def tiny_network(draw):
    n_links = draw(st.integers(1, 5))
    caps = draw(st.lists(st.sampled_from([Fraction(1), Fraction(2), Fraction(1, 2), Fraction(3)]),
                         min_size=n_links, max_size=n_links))
    flows = draw(st.lists(st.lists(st.integers(0, n_links - 1), min_size=0, max_size=3), min_size=1, max_size=7))
    one = st.one_of(st.none(), st.sampled_from([Fraction(1, 4), Fraction(1, 3), Fraction(1)]))
    dem = draw(st.one_of(st.none(), st.lists(one, min_size=len(flows), max_size=len(flows))))
    return flows, caps, dem


@given(tiny_network())
def test_water_fill_matches_exact_reference(net):
    flows, caps, dem = net
    ref = reference_max_min(flows, caps, dem)
    d = None if dem is None else np.array([np.inf if x is None else float(x) for x in dem])
    got = water_fill([np.array(f, dtype=np.int64) for f in flows], np.array([float(c) for c in caps]), d)
    for g, r in zip(got, ref):
        if r is None:
            assert g == np.inf
        else:
            assert g == pytest.approx(float(r), rel=1e-12, abs=1e-12)


@given(tiny_network())
def test_water_fill_is_max_min_fair(net):
    """Feasible, and every flow below its demand has a saturated link where no flow is faster (bottleneck)."""
    flows, caps, dem = net
    d = None if dem is None else np.array([np.inf if x is None else float(x) for x in dem])
    r = water_fill([np.array(f, dtype=np.int64) for f in flows], np.array([float(c) for c in caps]), d)
    load = np.zeros(len(caps))
    for i, f in enumerate(flows):
        for link in f:
            load[link] += r[i] if np.isfinite(r[i]) else 0
    assert (load <= np.array([float(c) for c in caps]) + 1e-9).all()
    for i, f in enumerate(flows):
        if not f:
            continue
        if d is not None and r[i] >= d[i] - 1e-12:
            continue
        bottleneck = any(abs(load[link] - float(caps[link])) < 1e-9
                         and all(r[j] <= r[i] + 1e-12 for j, g in enumerate(flows) if link in g)
                         for link in f)
        assert bottleneck, (i, r)


def test_water_fill_ties_are_exact_and_edge_cases():
    # three flows share a link of capacity 1: exactly equal rates, bit for bit
    r = water_fill([np.array([0]), np.array([0, 1]), np.array([0])], np.array([1.0, 5.0]))
    assert r[0] == r[1] == r[2]
    assert water_fill([np.array([], dtype=np.int64)], np.array([1.0]))[0] == np.inf
    assert water_fill([np.array([], dtype=np.int64)], np.array([1.0]), np.array([0.3]))[0] == 0.3
    # padded 2-D form with an infinite-capacity sentinel
    m = np.array([[0, 2], [0, 1]])
    assert water_fill(m, np.array([1.0, 0.25, np.inf])).tolist() == [0.75, 0.25]
    with pytest.raises(ValueError):
        water_fill([np.array([3])], np.array([1.0]))


def test_event_driven_water_fill_agrees_on_many_levels(monkeypatch):
    rng = np.random.default_rng(7)
    links = [rng.integers(0, 900, size=3) for _ in range(9000)]
    caps = rng.choice([1.0, 2.0, 3.0, 5.0], size=900)
    monkeypatch.setattr(metric, "VECTOR_ROUNDS", 10**9)
    slow = water_fill(links, caps)
    monkeypatch.setattr(metric, "VECTOR_ROUNDS", 2)
    fast = water_fill(links, caps)
    assert np.allclose(slow, fast, rtol=1e-12)


def test_big_water_fills_are_memoised_by_content(monkeypatch):
    rng = np.random.default_rng(3)
    links = [rng.integers(0, 500, size=3) for _ in range(metric.MEMO_MIN_INCIDENCES // 3 + 1)]
    caps = rng.choice([1.0, 2.0], size=500)
    dem = rng.choice([0.1, 0.5, np.inf], size=len(links))
    fills = []
    real = metric._water_fill_csr
    monkeypatch.setattr(metric, "_water_fill_csr", lambda *a: fills.append(1) or real(*a))
    monkeypatch.setattr(metric, "_FILLS", metric.OrderedDict())
    first = water_fill(links, caps, dem)
    first_bits = first.copy()
    first[:] = -1.0  # a caller writing into its result does not reach the memo
    again = water_fill([x.copy() for x in links], caps.copy(), dem.copy())
    assert len(fills) == 1 and np.array_equal(again, first_bits)
    other = water_fill(links, 2 * caps, dem)  # any other input is filled anew
    assert len(fills) == 2 and not np.array_equal(other, first_bits)
    monkeypatch.setattr(metric, "VECTOR_ROUNDS", 1)  # so is the same input on the other code path
    assert np.array_equal(water_fill(links, caps, dem), first_bits) and len(fills) == 3
    small = [np.array([0]), np.array([0, 1])]
    water_fill(small, np.array([1.0, 1.0]))
    water_fill(small, np.array([1.0, 1.0]))
    assert len(fills) == 5  # below the threshold nothing is kept


def test_demand_estimate_reuses_only_an_equal_input():
    flows = [Flow("A", "X"), Flow("A", "Y"), Flow("B", "Y"), Flow("C", "Y")]
    d = estimate_demands(flows)
    d[:] = 0.0  # the caller's copy
    assert estimate_demands(list(flows)).tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert estimate_demands(flows[1:]).tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    assert estimate_demands([Flow("A", "X"), Flow("B", "Y")]).tolist() == [1.0, 1.0]


def test_hedera_worked_example():
    flows = [Flow("A", "X"), Flow("A", "Y"), Flow("B", "Y"), Flow("C", "Y")]
    d = estimate_demands(flows)
    assert d.tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert d.sum() == pytest.approx(5 / 3)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)).filter(lambda p: p[0] != p[1]), min_size=1,
                max_size=15))
def test_hedera_estimator_is_nic_limited_max_min(pairs):
    flows = [Flow(a, b) for a, b in pairs]
    links = [np.array([a, 6 + b]) for a, b in pairs]
    assert np.allclose(estimate_demands(flows), water_fill(links, np.ones(12)), atol=1e-9)


def test_leximin_orders():
    assert leximin_compare([0.5, 1.0], [1.0, 0.5]) == 0
    assert leximin_compare([0.5, 1.0, 1.0], [0.5, 0.5, 1.0]) == 1
    assert leximin_compare([0.2, 1.0], [0.25, 0.25]) == -1
    assert leximin_compare([1 / 3, 1 / 3], [1 - 2 / 3, 1 / 3]) == 0  # rounding is a tie
    # job-level: job a = flows 0,1, job b = flow 2
    jobs = ["a", "a", "b"]
    assert job_rates([0.5, 1.0, 0.7], jobs).tolist() == [0.5, 0.7]
    # A: jobs (0.5, 0.9) flows sorted (0.5, 0.9, 0.9); B: jobs (0.6, 0.6) flows (0.6, 0.6, 0.6)
    a, b = [0.5, 0.9, 0.9], [0.6, 0.6, 0.6]
    assert job_leximin_compare(b, a, ["a", "a", "b"]) == 1
    # ties at job level fall back to flows
    assert job_leximin_compare([0.5, 0.6, 1.0], [0.5, 0.5, 1.0], ["a", "a", "b"]) == 1
    assert compare(a, b, objective="flow") == -1
    with pytest.raises(ValueError):
        compare(a, b, objective="job")


def test_rates_and_report_on_a_clos():
    fab = Fabric.clos(2, 2, 2)
    flows = [Flow(0, 2, job="j"), Flow(1, 3, job="j"), Flow(0, 3)]
    shared = [("tor0", "spine0", "tor1")] * 3
    r = rates(fab, flows, shared)
    assert r.tolist() == pytest.approx([1 / 3] * 3)
    rep = report(fab, flows, shared, jobs={"j": {"ring": 2, "bytes": 8e9, "capacity_Bps": 1e9}})
    assert rep["max_link_load"] == 3 and rep["links_at_max"] == 2
    assert rep["flows_sharing"] == 3
    assert rep["max_nic_load"] == 2
    # ideal: host 0 sends two flows, host 3 receives two -> 1/2 each, flow 1->3 gets 1/2: sum 1.5
    assert rep["ideal_sum_rate"] == pytest.approx(1.5)
    assert rep["fraction_of_ideal"] == pytest.approx(1.0 / 1.5)
    job = rep["jobs"]["j"]
    assert job["min_rate"] == pytest.approx(1 / 3) and job["ideal_min_rate"] == pytest.approx(0.5)
    assert job["allreduce_relative"] == pytest.approx(1.5)
    # ring of 2: 2 steps of bytes/2 at 1/3 of 1 GB/s
    assert job["allreduce_time_s"] == pytest.approx(2 * 4e9 / (1e9 / 3))
    spread = [("tor0", "spine0", "tor1"), ("tor0", "spine1", "tor1"), ("tor0", "spine1", "tor1")]
    rep2 = report(fab, flows, spread)
    assert rep2["max_link_load"] == 2 and rep2["min_rate"] == pytest.approx(0.5)
    assert leximin_compare(rates(fab, flows, spread), r) == 1
    # an unroutable flow gets rate 0
    assert rates(fab, flows, [None] + spread[1:])[0] == 0.0


def test_assess_is_rates_and_report_of_one_routing():
    fab = Fabric.clos(3, 2, 2)
    flows = [Flow(0, 2, demand=0.5), Flow(1, 3, job="j"), Flow(0, 4, job="j"), Flow(5, 1)]
    paths = [("tor0", "spine0", "tor1"), ("tor0", "spine0", "tor1"), None, ("tor2", "spine1", "tor0")]
    r, rep = metric.assess(fab, flows, paths)
    assert r.tolist() == rates(fab, flows, paths).tolist()
    assert rep == report(fab, flows, paths)
    assert rep == report(fab, flows, paths, rates=r, ideal=estimate_demands(flows))
    assert rep["unroutable"] == 1 and r[2] == 0.0


def test_job_rates_are_each_jobs_slowest_flow_over_its_weight_in_order_of_first_appearance():
    rng = random.Random(3)
    labels = [None, "a", "b", metric.WeightedJob("w", 2.5), metric.WeightedJob("v", 0.5)]
    for _ in range(200):
        jobs = [rng.choice(labels) for _ in range(rng.randrange(0, 40))]
        r = [rng.choice([0.0, 0.5, float("inf"), rng.random()]) for _ in jobs]
        groups: dict = {}
        for i, j in enumerate(jobs):  # the definition: a job per label, a flow without one alone
            groups.setdefault(("flow", i) if j is None else j, []).append(r[i])
        expected = [min(v) / (k.weight if isinstance(k, metric.WeightedJob) else 1.0) for k, v in groups.items()]
        assert job_rates(r, jobs).tolist() == expected
        assert job_rates(r, metric.job_groups(jobs)).tolist() == expected  # grouped once, as a decision does
