"""mlroute on fabrics the controller learns (switch ids are DPIDs in any order)."""

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mlroute.routing import metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.optimisers.mlroute import fattree_structure
from mlroute.tolerances import ABS_TOL, REL_TOL

from .strategies import clos_instance, fattree_instance


def learned_fattree(k=4, seed=7):
    gen = Fabric.fattree(k)
    ids = np.random.default_rng(seed).permutation(1000)[: gen.graph.number_of_nodes()]
    mapping = {n: int(i) for n, i in zip(gen.graph.nodes, ids)}
    hosts = {f"h{h}": mapping[leaf] for h, leaf in gen.hosts.items()}
    return Fabric.from_graph(nx.relabel_nodes(gen.graph, mapping), hosts), gen.n_hosts


def test_learned_fattree_is_recognised_and_permutations_reach_load_1():
    learned, n = learned_fattree()
    assert fattree_structure(learned) is not None
    for seed in range(20):
        perm = np.random.default_rng(seed).permutation(n)
        flows = [Flow(f"h{perm[i]}", f"h{perm[(i + 1) % n]}") for i in range(n)]
        paths = optimise("mlroute", learned, flows).paths
        assert metric.report(learned, flows, paths)["max_link_load"] == 1


def test_a_learned_fabric_with_a_failure_or_not_a_fattree_is_not_coloured_but_routed():
    learned, n = learned_fattree()
    learned.fail_link(*next(iter(learned.graph.edges)))
    flows = [Flow(f"h{i}", f"h{(i + 4) % n}") for i in range(n)]
    assert all(p is not None for p in optimise("mlroute", learned, flows).paths)
    clos = Fabric.clos(4, 2, 2)
    assert fattree_structure(Fabric.from_graph(clos.graph, {})) is None


def test_the_routing_says_whether_its_search_ran_to_the_end():
    fab = Fabric.clos(8, 4, 4)
    rng = np.random.default_rng(3)
    flows = [Flow(int(a), int(b)) for a, b in zip(rng.integers(0, 32, 200), rng.integers(0, 32, 200)) if a != b]
    assert optimise("mlroute", fab, flows, time_limit=60).info["search_complete"] is True
    assert optimise("mlroute", fab, flows, time_limit=0.0).info["search_complete"] is False


@settings(max_examples=60, deadline=None)
@given(st.one_of(clos_instance(failed_links=True, demands=True, jobs=True), fattree_instance(demands=True),
                 fattree_instance(jobs=True)), st.sampled_from(["flow", "job"]), st.booleans())
def test_the_rates_the_routing_carries_are_its_max_min_fair_rates(instance, objective, with_previous):
    fab, flows = instance
    if objective == "job" and not any(f.job for f in flows):
        objective = "flow"
    previous = optimise("ecmp", fab, flows).paths if with_previous else None
    routing = optimise("mlroute", fab, flows, objective=objective, previous=previous, time_limit=60)
    if routing.rates is None:  # only when nothing compared rates: the greedy's routing, untouched
        assert routing.choice is not None
        return
    exact = metric.rates(fab, flows, routing.paths)
    assert np.allclose(routing.rates, exact, rtol=REL_TOL, atol=ABS_TOL)


def test_the_rates_on_a_large_instance_match_a_full_water_filling():
    """10k-flow-class instance where the polishing's incremental re-fills produce the rates (k=8, 2,000 flows)."""
    fab = Fabric.fattree(8)
    rng = np.random.default_rng(5)
    hosts = sorted(fab.hosts)
    flows = [Flow(hosts[a], hosts[b]) for a, b in zip(rng.integers(0, len(hosts), 2000),
                                                        rng.integers(0, len(hosts), 2000)) if a != b]
    routing = optimise("mlroute", fab, flows, time_limit=60)
    assert routing.info.get("polish_moves", 0) > 0 and routing.rates is not None
    assert np.allclose(routing.rates, metric.rates(fab, flows, routing.paths), rtol=REL_TOL, atol=ABS_TOL)


@settings(max_examples=150, deadline=None)
@given(st.one_of(clos_instance(failed_links=True, demands=True), clos_instance(max_tors=8, max_spines=4,
                                                                               max_hosts=4, max_size=40),
                 fattree_instance(demands=True), fattree_instance(jobs=True)),
       st.sampled_from(["flow", "job"]), st.sampled_from(["none", "ecmp", "some"]))
def test_a_routing_said_to_be_a_fixpoint_is_returned_again_from_itself(instance, objective, previous):
    fab, flows = instance
    if objective == "job" and not any(f.job for f in flows):
        objective = "flow"
    ecmp = optimise("ecmp", fab, flows).paths
    prev = {"none": None, "ecmp": ecmp, "some": [p if i % 2 else None for i, p in enumerate(ecmp)]}[previous]
    first = optimise("mlroute", fab, flows, objective=objective, previous=prev, time_limit=60)
    assert first.info["search_complete"] or not first.info["fixpoint"]
    if first.info["fixpoint"]:
        again = optimise("mlroute", fab, flows, objective=objective, previous=first.paths, time_limit=60)
        assert again.paths == first.paths


def test_fixpoints_are_common_and_a_search_cut_short_is_none():
    """The claim is made where it is cheap to make (most complete runs); a run cut short never makes it."""
    said = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        fab = Fabric.clos(8, 4, 4) if seed % 2 else Fabric.fattree(4)
        hosts = sorted(fab.hosts)
        flows = [Flow(hosts[a], hosts[b]) for a, b in zip(rng.integers(0, len(hosts), 60),
                                                            rng.integers(0, len(hosts), 60)) if a != b]
        said += optimise("mlroute", fab, flows, time_limit=60).info["fixpoint"]
        assert not optimise("mlroute", fab, flows, time_limit=0.0).info["fixpoint"]
    assert said >= 15


def test_the_learned_colouring_finds_each_option_by_its_turning_switch():
    from mlroute.routing.optimisers.base import Problem
    from mlroute.routing.optimisers.mlroute.construct import _learned_fattree_colouring, _structure_tables

    learned, n = learned_fattree(k=6)
    rng = np.random.default_rng(2)
    flows = [Flow(f"h{a}", f"h{b}") for a, b in rng.integers(0, n, size=(300, 2)) if a != b]
    prob = Problem(learned, flows)
    choice = _learned_fattree_colouring(prob)
    pod, agg_at, core_at, _ = _structure_tables(learned)
    pos = learned.node_pos
    for i in prob.inter.tolist():  # the option found is the one that turns at its own turning switch
        ps = prob.sets[i]
        assert ps.turning_at(pos[ps.path(int(choice[i]))[len(ps.path(0)) // 2]]) == choice[i]
    turn = np.full(len(prob.inter), agg_at[0, 0])  # a switch above few of the pairs: no option turns there
    from mlroute.routing.optimisers.mlroute.construct import _turning_options

    assert _turning_options(prob, prob.inter, turn) is None
