"""Ring choice (mlroute/routing/ring_choice.py): the chosen host order against brute force over every order, the
issue's k=4 case in the flow model (rank order 2x ideal, chosen 1x), rank blocks kept, n = 2, determinism, and the
cases where no order helps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mlroute.routing import metric
from mlroute.routing.fabric import Fabric, FabricError
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.ring_choice import (
    choose_ring,
    choose_rings,
    crossings,
    grouped_order,
    rank_blocks,
    ring_flows,
)

#: 4 jobs x 4 hosts on a k=4 fat-tree, each job on two pods, ranks interleaved A, B, A, B (issue 37)
INTERLEAVED = {"j0": [0, 4, 1, 5], "j1": [2, 6, 3, 7], "j2": [8, 12, 9, 13], "j3": [10, 14, 11, 15]}


def fattree(*failed):
    fab = Fabric.fattree(4)
    for u, v in failed:
        fab.fail_link(u, v)
    return fab


def routed(fab, flows):
    """The default optimiser's routing of ``flows`` as the ring choice runs it, and its rates."""
    paths = optimise("mlroute", fab, flows, objective="job", time_limit=3600.0).paths
    return paths, metric.rates(fab, flows, paths)


def worst_relative(fab, orders, direction="previous"):
    """The worst job's all-reduce time / ideal with every job's ring in ``orders``, routed jointly."""
    flows = [f for name, order in orders.items() for f in ring_flows(order, job=name, direction=direction)]
    paths, rates = routed(fab, flows)
    rep = metric.report(fab, flows, paths, objective="job", rates=rates)
    return max(j["allreduce_relative"] for j in rep["jobs"].values())


def brute_force(fab, hosts, others, job="ring"):
    """The best rates over every permutation of ``hosts`` (no folding, no memo, no early stop)."""
    best = None
    labels = None
    for perm in itertools.permutations(hosts):
        flows = [*others, *ring_flows(perm, job=job)]
        _, rates = routed(fab, flows)
        labels = labels or metric.job_labels(flows)
        if best is None or metric.compare(rates, best, labels, "job") > 0:
            best = rates
    return best, labels


def test_the_issue_case_rank_order_is_2x_ideal_and_the_chosen_rings_1x():
    fab = fattree(("agg0_0", "core0"))
    assert worst_relative(fab, INTERLEAVED) == pytest.approx(2.0)
    chosen = choose_rings(fab, INTERLEAVED)
    assert chosen["j0"].helps and chosen["j0"].gain == pytest.approx(2.0)
    assert chosen["j0"].given_relative == pytest.approx(2.0) and chosen["j0"].chosen_relative == pytest.approx(1.0)
    assert chosen["j0"].crossings["pod"] == (4, 2, 2)
    assert worst_relative(fab, {n: c.order for n, c in chosen.items()}) == pytest.approx(1.0)


@pytest.mark.parametrize("failed, hosts, other, busy", [
    ((("agg0_0", "core0"),), [0, 4, 1, 5], [2, 6, 3, 7], False),
    ((("agg0_0", "core0"),), [0, 4, 1, 5], [2, 6, 3, 7], True),
    ((("agg0_0", "core0"), ("agg1_1", "core3")), [0, 8, 4, 1, 9], [2, 6, 10, 3, 7], True),
    ((("edge0_0", "agg0_1"),), [0, 2, 4, 1, 3], [6, 8, 7, 12], True),
    ((("agg2_0", "core1"), ("agg0_1", "core2")), [0, 1, 8, 12, 9, 4], [5, 13, 2, 10], False),
])
def test_the_choice_equals_brute_force_over_every_order(failed, hosts, other, busy):
    """``busy``: one more flow shares a NIC, so no order reaches every flow's NIC rate and the exact search runs
    to the end (no early stop)."""
    fab = fattree(*failed)
    others = ring_flows(other, job="other") + ([Flow(other[0], 14, job="busy")] if busy else [])
    choice = choose_ring(fab, hosts, others)
    best, labels = brute_force(fab, hosts, others)
    assert choice.method == "exact" and choice.complete and choice.helps
    assert metric.compare(choice.rates, best, labels, "job") == 0
    # the answer's own flows are the chosen order's ring, routed as reported
    assert sorted((f.src, f.dst) for f in choice.flows[len(others):]) == \
        sorted((f.src, f.dst) for f in ring_flows(choice.order))
    assert np.allclose(metric.rates(fab, choice.flows, choice.paths), choice.rates)


def test_each_hosts_ranks_stay_one_block_and_only_host_boundaries_use_the_network():
    order = choose_rings(fattree(("agg0_0", "core0")), INTERLEAVED)["j0"].order
    ranks = {0: 2, 4: 3, 1: 1, 5: 2}
    blocks = rank_blocks(order, ranks)
    owner = [h for h in order for _ in range(blocks[h][1])]  # rank -> host, blocks in node-rank order
    assert [blocks[h][0] for h in order] == [owner.index(h) for h in order] and len(owner) == 8
    n = len(owner)
    gloo = {(owner[r], owner[(r - 1) % n]) for r in range(n) if owner[r] != owner[(r - 1) % n]}  # r -> r-1
    assert gloo == {(f.src, f.dst) for f in ring_flows(order)}
    with pytest.raises(ValueError):
        rank_blocks(order, {0: 0})


def test_the_declared_ring_is_the_order_reversed_for_gloo_and_as_is_for_mlroute_rings():
    fab = fattree(("agg0_0", "core0"))
    gloo = choose_ring(fab, [0, 4, 1, 5])
    ring = gloo.ring
    assert ring[0] == gloo.order[0]
    assert {(ring[i], ring[(i + 1) % 4]) for i in range(4)} == {(f.src, f.dst) for f in ring_flows(gloo.order)}
    mine = choose_ring(fab, [0, 4, 1, 5], direction="next")
    assert mine.ring == mine.order
    with pytest.raises(ValueError):
        choose_ring(fab, [0, 4, 1], direction="up")


def test_two_hosts_have_one_ring_and_one_host_none():
    fab = fattree(("agg0_0", "core0"))
    two = choose_ring(fab, [0, 4], ring_flows([1, 5, 2, 6], job="o"))
    assert two.order == (0, 4) and not two.helps and two.method == "trivial" and two.candidates == 1
    assert sorted((f.src, f.dst) for f in ring_flows((0, 4))) == [(0, 4), (4, 0)]
    one = choose_ring(fab, [3])
    assert one.order == (3,) and not one.helps and one.flows == []


def test_the_choice_is_deterministic_and_independent_of_earlier_calls():
    fab = fattree(("agg0_0", "core0"), ("agg1_1", "core3"))
    others = ring_flows([2, 6, 10, 3, 7], job="o")
    first = choose_ring(fab, [0, 8, 4, 1, 9], others)
    for _ in range(2):
        again = choose_ring(fattree(("agg0_0", "core0"), ("agg1_1", "core3")), [0, 8, 4, 1, 9], others)
        assert (again.order, again.candidates, again.gain) == (first.order, first.candidates, first.gain)
        assert np.array_equal(again.rates, first.rates)


def test_one_host_per_pod_no_order_helps_and_the_given_order_is_kept():
    fab = fattree(("agg0_0", "core0"))
    per_pod = {f"j{i}": [i, 4 + i, 8 + i, 12 + i] for i in range(4)}
    assert worst_relative(fab, per_pod) > 1.0  # congested: yet every order crosses pods 4 times
    for name, c in choose_rings(fab, per_pod).items():
        assert not c.helps and c.order == tuple(per_pod[name]) and c.gain == 1.0
        assert c.crossings["pod"] == (4, 4, 4)


def test_an_uncongested_fabric_stops_at_the_given_order():
    c = choose_ring(fattree(), [0, 4, 1, 5])
    assert not c.helps and c.candidates == 1 and c.complete


def test_grouped_search_meets_the_crossing_bound_and_is_never_worse_than_given():
    fab = fattree(("agg0_0", "core0"), ("agg2_1", "core2"))
    hosts = [0, 8, 4, 1, 9, 5, 2, 10, 6]
    others = ring_flows([3, 7, 11], job="o")
    c = choose_ring(fab, hosts, others, exact_max_hosts=4)
    assert c.method == "grouped" and c.candidates <= 64
    labels = metric.job_labels(c.flows)
    given_flows = [*others, *ring_flows(hosts, job="ring")]
    _, given_rates = routed(fab, given_flows)
    assert metric.compare(c.rates, given_rates, labels, "job") >= 0
    if c.helps:
        assert c.crossings["pod"][1] == c.crossings["pod"][2] == 3
    capped = choose_ring(fab, hosts, others, exact_max_hosts=4, max_candidates=2)
    assert capped.candidates <= 2


def test_grouped_order_puts_each_pod_and_rack_in_one_run():
    rack = {h: h // 2 for h in range(16)}
    pod = {h: h // 4 for h in range(16)}
    order = grouped_order([0, 8, 4, 1, 9, 5, 2, 10, 6], rack, pod)
    assert order == (0, 1, 2, 8, 9, 10, 4, 5, 6)
    assert crossings(order, pod) == 3 and crossings(order, rack) == 6


def test_unknown_or_repeated_hosts_are_errors():
    fab = fattree()
    with pytest.raises(FabricError):
        choose_ring(fab, [0, 4, 0])
    with pytest.raises(FabricError):
        choose_ring(fab, [0, 4, 99])
