"""The compiled kernels against their pure-Python references: the same results to the bit."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

from mlroute.routing import kernels, metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.optimisers.greedy import greedy_choice
from tests.unit.mlroute.routing.strategies import any_instance


@pytest.fixture
def reference(monkeypatch):
    """Run a block of code on the pure-Python references: ``with reference(): ...``."""
    from contextlib import contextmanager

    @contextmanager
    def use():
        with monkeypatch.context() as m:
            m.setattr(kernels, "_compiled", False)
            metric._FILLS.clear()  # a memoised filling would hide which version ran
            yield
        metric._FILLS.clear()

    return use


def test_the_kernels_are_in_use_here():
    assert kernels.enabled()  # numba is a dependency: without it these tests would compare the reference with itself
    assert kernels.warm()


def _random_fill(rng):
    n, n_links = int(rng.integers(1, 60)), int(rng.integers(1, 25))
    lens = rng.integers(0, 5, size=n)
    flat = rng.integers(0, n_links, size=int(lens.sum()))
    # few distinct capacities and demands: many ties, so links saturate together and batches form
    caps = rng.choice([0.5, 1.0, 1.0, 2.0, np.inf], size=n_links)
    dem = rng.choice([np.inf, np.inf, 0.0, 0.1, 0.25, 1 / 3], size=n)
    return flat, lens, caps, dem


def test_the_level_by_level_water_filling_is_the_same_to_the_bit(reference):
    rng = np.random.default_rng(2)
    for _ in range(400):
        flat, lens, caps, dem = _random_fill(rng)
        if rng.random() < 0.3:
            dem = None
        owner = np.repeat(np.arange(len(lens)), lens)
        got = metric.water_fill_csr(flat, owner, lens, caps, dem)
        with reference():
            want = metric.water_fill_csr(flat, owner, lens, caps, dem)
        assert np.array_equal(got, want)
    # past MEMO_MIN_INCIDENCES and with many levels: the rounds hand over to the event-driven version
    n, n_links = 9_000, 700
    lens = rng.integers(2, 5, size=n)
    flat = rng.integers(0, n_links, size=int(lens.sum()))
    caps = rng.uniform(0.5, 2.0, size=n_links)
    owner = np.repeat(np.arange(n), lens)
    got = metric.water_fill_csr(flat, owner, lens, caps)
    with reference():
        want = metric.water_fill_csr(flat, owner, lens, caps)
    assert len(flat) > 20_000 and np.array_equal(got, want)


def test_the_event_driven_water_filling_is_the_same_to_the_bit(reference):
    rng = np.random.default_rng(1)
    for _ in range(400):
        flat, lens, caps, dem = _random_fill(rng)
        owner = np.repeat(np.arange(len(lens)), lens)
        got = metric.water_fill_csr(flat, owner, lens, caps, dem, events=True)
        with reference():
            want = metric.water_fill_csr(flat, owner, lens, caps, dem, events=True)
        assert np.array_equal(got, want)


def test_a_big_water_filling_that_switches_to_events_is_the_same_to_the_bit(reference):
    rng = np.random.default_rng(2)
    n, w, n_links = 6000, 4, 300
    rows = rng.integers(0, n_links, size=(n, w))
    caps = rng.choice([1.0, 2.0, 3.0], size=n_links)
    dem = np.where(rng.random(n) < 0.3, rng.choice([0.01, 0.02, 0.05], size=n), np.inf)
    got = metric.water_fill(rows, caps, dem)  # numpy rounds, then the event-driven finish
    with reference():
        want = metric.water_fill(rows, caps, dem)
    assert np.array_equal(got, want)


@settings(max_examples=150, deadline=None)
@given(any_instance)
def test_the_greedy_places_every_flow_as_the_reference_does(instance):
    fabric, flows = instance
    got = greedy_choice(Problem(fabric, flows))
    kernels_were = kernels._compiled
    kernels._compiled = False
    try:
        want = greedy_choice(Problem(fabric, flows))
    finally:
        kernels._compiled = kernels_were
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def _non_graded_fabric():
    """A k=4 fat-tree with a shortcut from an edge switch to a core: not every link joins adjacent tiers."""
    fab = Fabric.fattree(4)
    g = nx.Graph(fab.graph)
    g.add_edge("edge0_0", "core3")
    hosts = {h: leaf for h, leaf in fab.hosts.items()}
    return Fabric.from_graph(g, hosts)


def _flows(fabric, n, seed):
    rng = np.random.default_rng(seed)
    hosts = sorted(fabric.hosts, key=str)
    out = []
    for _ in range(n):
        a, b = rng.choice(len(hosts), size=2, replace=False)
        out.append(Flow(hosts[a], hosts[b], demand=None if rng.random() < 0.7 else float(rng.choice([0.2, 0.5]))))
    return out


@pytest.mark.parametrize("fabric, n, mode", [
    (Fabric.clos(8, 4, 4), 120, kernels.DISJOINT),
    (Fabric.fattree(6), 300, kernels.POSITIONAL),
    (Fabric.fattree(8), 900, kernels.POSITIONAL),
    (_non_graded_fabric(), 60, kernels.GENERAL),
])
def test_mlroute_routes_every_flow_as_the_reference_does(reference, fabric, n, mode):
    """The load-vector search's compiled move evaluation (each of its three modes) makes the same moves."""
    assert fabric.is_graded() == (mode != kernels.GENERAL)
    for seed in range(3):
        flows = _flows(fabric, n, seed)
        assert (Problem(fabric, flows).K == 2) == (mode == kernels.DISJOINT)
        got = optimise("mlroute", fabric, flows, time_limit=60)
        with reference():
            want = optimise("mlroute", fabric, flows, time_limit=60)
        assert got.info["search_complete"] and want.info["search_complete"]
        assert np.array_equal(got.choice, want.choice)
        assert got.info["search_moves"] == want.info["search_moves"]


def test_the_leximin_comparison_of_sorted_vectors_is_the_same(reference):
    rng = np.random.default_rng(3)
    values = [0.0, 1e-13, 0.25, 0.25 + 1e-12, 0.25 + 1e-6, 1 / 3, 0.5, np.inf, -np.inf, np.nan]
    for _ in range(2000):
        n = int(rng.integers(0, 6))
        a = np.sort(rng.choice(values, size=n))
        b = a.copy() if rng.random() < 0.3 else np.sort(rng.choice(values, size=n))
        got = metric.cmp_presorted(a, b)
        with reference():
            assert metric.cmp_presorted(a, b) == got


def test_rank_within_is_the_reference():
    from mlroute.routing.optimisers.mlroute import _rank_within_reference

    rng = np.random.default_rng(3)
    for _ in range(200):
        keys = rng.integers(0, int(rng.integers(1, 40)), size=int(rng.integers(0, 300)))
        assert np.array_equal(kernels.rank_within(keys), _rank_within_reference(keys))


def test_bottleneck_screen_is_the_reference():
    from mlroute.routing.optimisers.mlroute import _bottleneck_screen

    rng = np.random.default_rng(4)
    for _ in range(300):
        leaves, spines = int(rng.integers(2, 9)), int(rng.integers(2, 6))
        up_i = np.arange(leaves * spines, dtype=np.int64).reshape(leaves, spines)
        dn_i = up_i + leaves * spines
        n = int(rng.integers(1, 60))
        u, v = rng.integers(0, leaves, size=n), rng.integers(0, leaves, size=n)
        c = rng.integers(0, spines, size=n)
        a, b = up_i[u, c], dn_i[v, c]
        nlinks = 2 * leaves * spines + 1
        got = kernels.bottleneck_screen(a, b, nlinks, up_i, dn_i, u, v, c)
        want = _bottleneck_screen(a, b, nlinks, up_i, dn_i, u, v, c)
        assert got[1] == want[1] and np.array_equal(got[0], want[0])
        assert np.array_equal(got[2], want[2]) and np.array_equal(got[3], want[3])


def test_the_edge_colouring_is_the_reference(reference):
    from mlroute.routing.optimisers.bipartite_colouring import edge_colouring, equitable_colouring

    rng = np.random.default_rng(5)
    for _ in range(300):
        n_left, n_right = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        n = int(rng.integers(0, 120))
        left, right = rng.integers(0, n_left, size=n), rng.integers(0, n_right, size=n)
        k = int(rng.integers(1, 6))
        got = equitable_colouring(left, right, k), edge_colouring(left, right)
        with reference():
            want = equitable_colouring(left, right, k), edge_colouring(left, right)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("fabric, n", [(Fabric.clos(8, 4, 4), 120), (Fabric.fattree(6), 300),
                                       (_non_graded_fabric(), 60)])
def test_the_move_evaluation_finds_the_moves_of_the_reference(reference, fabric, n):
    """Every flow's best move, and the screen, on random routings (the compiled one stops reading an option
    once it cannot improve: the same answers)."""
    from mlroute.routing.optimisers.mlroute.search import _first_improving, _kernel_mode

    rng = np.random.default_rng(6)
    for seed in range(4):
        prob = Problem(fabric, _flows(fabric, n, seed))
        choice = prob.initial_choice()
        choice[prob.inter] = rng.integers(0, prob.n_opts[prob.inter])
        mat, loads = prob.link_matrix(choice), prob.loads(choice)
        graded = fabric.is_graded()
        for i in prob.inter.tolist():
            block = np.array([i], dtype=np.int64)
            got = _first_improving(prob, block, mat, choice, loads, graded)
            with reference():
                assert _first_improving(prob, block, mat, choice, loads, graded) == got
        flows = prob.inter
        screened = kernels.improving(flows, mat, choice, loads, prob.set_id, prob.option_rows(), prob.dummy,
                                     _kernel_mode(prob))
        with reference():
            want = [_first_improving(prob, np.array([i]), mat, choice, loads, graded)[1] >= 0 for i in flows.tolist()]
        assert screened.tolist() == want and 0 < sum(want) < len(want)


def test_the_demand_estimate_is_the_reference(reference):
    from mlroute.routing.demand import _estimate

    rng = np.random.default_rng(7)
    for _ in range(300):
        hosts = int(rng.integers(2, 30))
        n = int(rng.integers(1, 150))
        pairs = [(f"h{a}", f"h{b}") for a, b in rng.integers(0, hosts, size=(n, 2))]
        rounds = int(rng.choice([1, 2, 10_000]))
        got = _estimate(pairs, rounds)
        with reference():
            want = _estimate(pairs, rounds)
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("fabric, n", [(Fabric.clos(8, 4, 4), 120), (Fabric.fattree(6), 300),
                                       (_non_graded_fabric(), 60)])
def test_the_link_matrix_is_the_reference(reference, fabric, n):
    rng = np.random.default_rng(8)
    for seed in range(4):
        flows = _flows(fabric, n, seed)
        choice = Problem(fabric, flows).initial_choice()
        inter = Problem(fabric, flows).inter
        choice[inter] = rng.integers(-1, Problem(fabric, flows).n_opts[inter])
        got = Problem(fabric, flows).link_matrix(choice)
        with reference():
            assert np.array_equal(Problem(fabric, flows).link_matrix(choice), got)
