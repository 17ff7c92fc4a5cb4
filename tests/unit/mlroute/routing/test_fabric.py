"""Fabric model: generators, naming, link indexing, failures and candidate paths (vs brute force)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given

from mlroute.routing.fabric import Fabric, FabricError
from mlroute.routing.flow import Flow

from .strategies import clos_instance, fattree_instance


def brute_force_paths(fab: Fabric, src_leaf, dst_leaf) -> set:
    """All shortest valley-free simple paths through live elements, by enumeration with networkx."""
    if src_leaf == dst_leaf:
        return {(src_leaf,)} if fab.is_live(src_leaf) else set()
    g = nx.Graph()
    for u, v in fab.graph.edges:
        if fab.is_live_link(u, v):
            g.add_edge(u, v)
    if src_leaf not in g or dst_leaf not in g:
        return set()
    found = []
    for p in nx.all_simple_paths(g, src_leaf, dst_leaf, cutoff=6):
        ranks = [fab.rank[n] for n in p]
        k = int(np.argmax(ranks))
        up = all(ranks[i] < ranks[i + 1] for i in range(k))
        down = all(ranks[i] > ranks[i + 1] for i in range(k, len(ranks) - 1))
        if up and down:
            found.append(tuple(p))
    if not found:
        return set()
    shortest = min(len(p) for p in found)
    return {p for p in found if len(p) == shortest}


def test_clos_naming_links_and_nics():
    fab = Fabric.clos(3, 2, 4)
    assert fab.leaves == ["tor0", "tor1", "tor2"]
    assert fab.tops == ["spine0", "spine1"]
    assert fab.n_switch_links == 3 * 2 * 2
    assert fab.links[0] == ("tor0", "spine0") and fab.links[1] == ("spine0", "tor0")
    # host h: up link at n_switch_links + 2h, down link right after
    assert len(fab.capacities) == fab.n_switch_links + 2 * 12
    assert fab.links[fab.n_switch_links + 2 * 5] == (("host", 5), "tor1")
    assert fab.links[fab.n_switch_links + 2 * 5 + 1] == ("tor1", ("host", 5))
    f = Flow(5, 9)
    path = ("tor1", "spine1", "tor2")
    links = fab.flow_links(f, path)
    assert [fab.links[i] for i in links] == [(("host", 5), "tor1"), ("tor1", "spine1"), ("spine1", "tor2"),
                                             ("tor2", ("host", 9))]
    assert fab.tor_of(5) == "tor1" and fab.tor_of(f) == ("tor1", "tor2")


def test_fattree_structure_and_paths(fattree4):
    fab = fattree4
    assert len(fab.tops) == 4 and len(fab.leaves) == 8 and fab.n_hosts == 16
    assert fab.tor_of(0) == "edge0_0" and fab.tor_of(3) == "edge0_1" and fab.tor_of(15) == "edge3_1"
    inter = fab.candidate_paths(Flow(0, 15))
    assert len(inter) == 4
    assert inter[0] == ("edge0_0", "agg0_0", "core0", "agg3_0", "edge3_1")
    assert {p[2] for p in inter} == {"core0", "core1", "core2", "core3"}
    intra_pod = fab.candidate_paths(Flow(0, 2))
    assert intra_pod == [("edge0_0", "agg0_0", "edge0_1"), ("edge0_0", "agg0_1", "edge0_1")]
    assert fab.candidate_paths(Flow(0, 1)) == [("edge0_0",)]
    fab.fail_switch("agg0_0")
    assert [p[2] for p in fab.candidate_paths(Flow(0, 15))] == ["core2", "core3"]
    assert fab.candidate_paths(Flow(0, 2)) == [("edge0_0", "agg0_1", "edge0_1")]
    fab.restore_switch("agg0_0")
    assert len(fab.candidate_paths(Flow(0, 15))) == 4


def test_failures_and_restores_clos():
    fab = Fabric.clos(2, 3, 1, failed_spines=[1])
    assert fab.live_spines() == ["spine0", "spine2"]
    assert [p[1] for p in fab.candidate_paths(Flow(0, 1))] == ["spine0", "spine2"]
    fab.fail_link("spine2", "tor1")  # either orientation, both directions
    assert not fab.is_live_link("tor1", "spine2") and not fab.is_live_link("spine2", "tor1")
    assert fab.candidate_paths(Flow(0, 1)) == [("tor0", "spine0", "tor1")]
    assert not fab.is_uniform_two_tier()
    fab.restore_link("tor1", "spine2")
    assert fab.is_uniform_two_tier()
    fab.fail_switch("tor1")
    assert fab.candidate_paths(Flow(0, 1)) == []
    with pytest.raises(FabricError):
        fab.fail_link("tor0", "tor1")
    with pytest.raises(FabricError):
        fab.fail_switch("spine9")


def test_host_errors_and_tor_overrides():
    fab = Fabric.clos(2, 2, 2)
    with pytest.raises(FabricError, match="unknown host 4"):
        fab.tor_of(4)
    with pytest.raises(FabricError, match="ToR 5"):
        fab.tor_of(Flow(0, 1, dst_tor=5))
    # authors' style: node ids that the fabric does not know, placed by ToR index -> NIC links on demand
    f = Flow(96, 130, src_tor=0, dst_tor=1)
    assert fab.tor_of(f) == ("tor0", "tor1")
    n = len(fab.capacities)
    links = fab.flow_links(f, ("tor0", "spine0", "tor1"))
    assert len(fab.capacities) == n + 4
    assert fab.links[links[0]] == (("host", 96), "tor0") and fab.links[links[-1]] == ("tor1", ("host", 130))
    # the leaf name works as a ToR too
    assert fab.tor_of(Flow("a", "b", src_tor="tor1", dst_tor="tor0")) == ("tor1", "tor0")


def test_from_graph_capacities_and_validation():
    g = nx.Graph()
    g.add_node("L1", tier="leaf")
    g.add_node("L2", tier="leaf")
    g.add_node("S1", tier="spine")
    g.add_node("S2", tier="spine")
    g.add_edge("L1", "S1", capacity=10.0)
    g.add_edge("L1", "S2", capacity=10.0)
    g.add_edge("L2", "S1", capacity=10.0)
    g.add_edge("L2", "S2", capacity=40.0)
    fab = Fabric.from_graph(g, {"h1": "L1", "h2": "L2"}, capacity=10.0)
    assert fab.candidate_paths(Flow("h1", "h2")) == [("L1", "S1", "L2"), ("L1", "S2", "L2")]
    assert fab.capacities[fab.link_index[("S2", "L2")]] == 40.0
    assert not fab.is_uniform_two_tier()
    bad = nx.Graph()
    bad.add_node("x", tier="router")
    with pytest.raises(FabricError, match="tier"):
        Fabric.from_graph(bad, {})
    with pytest.raises(FabricError, match="not a leaf"):
        Fabric.from_graph(g, {"h": "S1"})


@given(clos_instance(failed_links=True))
def test_clos_candidate_paths_match_brute_force(inst):
    fab, flows = inst
    for f in flows[:6]:
        s, d = fab.tor_of(f)
        assert set(fab.candidate_paths(f)) == brute_force_paths(fab, s, d)


@given(fattree_instance())
def test_fattree_candidate_paths_match_brute_force(inst):
    fab, flows = inst
    for f in flows[:6]:
        s, d = fab.tor_of(f)
        paths = fab.candidate_paths(f)
        assert len(paths) == len(set(paths))
        assert set(paths) == brute_force_paths(fab, s, d)
        for p in paths:
            assert all(fab.is_live_link(p[i], p[i + 1]) for i in range(len(p) - 1))
            assert fab.is_valid_path(f, p)


def test_the_identity_survives_pickling_and_changes_with_a_failure(fattree4):
    import pickle

    fab = fattree4
    copy = pickle.loads(pickle.dumps(fab))
    assert copy.identity == fab.identity != Fabric.fattree(4).identity
    fab.fail_link("edge0_0", "agg0_0")
    assert fab.identity != copy.identity


def test_each_option_is_its_up_half_then_its_down_half_by_name():
    """PathSet.path (read from the up-sets' name tables) walks the option's nodes: up from the source leaf to
    the turning switch over the up links, then down to the destination leaf over the down links."""
    import itertools

    fab = Fabric.fattree(6)
    fab.fail_link("agg0_0", "core0")
    fab.fail_switch("core4")
    for s, d in itertools.permutations(fab.leaves, 2):
        ps = fab.pathset(s, d)
        for i in range(len(ps)):
            path = ps.path(i)
            assert path[0] == s and path[-1] == d and len(path) == 2 * ps.hops + 1
            assert fab.path_links(path).tolist() == ps.links()[i].tolist()


def test_a_fabric_with_links_down_paths_as_one_built_without_them_and_leaves_its_own_alone(fattree4):
    """``with_failed_links`` (a controller's link failure, derived instead of built again): the candidate paths
    of a fabric built from the graph without those links, the original untouched (its paths, its NIC links);
    the same ``uid`` names the same fabric, as the optimiser's worker derives it."""
    fab = fattree4
    flows = [Flow(0, 15), Flow(1, 6), Flow(4, 5)]
    before = [fab.candidate_paths(f) for f in flows]
    down = fab.with_failed_links([("agg0_0", "core0"), ("edge1_1", "agg1_1")], uid="u")
    rebuilt_graph = fab.graph.copy()
    rebuilt_graph.remove_edges_from([("agg0_0", "core0"), ("edge1_1", "agg1_1")])
    rebuilt = Fabric(rebuilt_graph, dict(fab.hosts))
    for f in flows:
        paths = set(down.candidate_paths(f))
        assert paths == set(rebuilt.candidate_paths(f)) == brute_force_paths(down, *down.tor_of(f))
    assert [fab.candidate_paths(f) for f in flows] == before and not fab.failed_links
    assert down.identity == fab.with_failed_links([("core0", "agg0_0"), ("agg1_1", "edge1_1")], uid="u").identity
    assert down.identity != fab.identity and down.derived_from == fab.identity
    assert fab.with_failed_links([]).candidate_paths(flows[0]) == before[0]
    with pytest.raises(FabricError):
        fab.with_failed_links([("edge0_0", "core0")])


@pytest.mark.parametrize("k, down", [
    (4, [("agg0_0", "core0")]),
    (4, [("edge1_1", "agg1_1"), ("agg2_1", "core3")]),
    (6, [("agg0_0", "core0"), ("agg0_0", "core1"), ("edge3_2", "agg3_0")]),
])
def test_a_fabric_with_links_down_keeps_the_caches_the_failure_leaves_valid_and_both_stay_right(k, down):
    """The derived fabric starts from the path caches of the one it comes from where the failure leaves them
    valid; afterwards each fabric, asked for pairs the other cached meanwhile, still gives the paths a fabric
    built from scratch gives (the turn keys they share name one turn array in both). The derived fabric numbers
    links as the one it comes from (the failed link keeps its number)."""
    fab = Fabric.fattree(k)
    leaves = list(fab.leaves)
    pairs = [(a, b) for a in leaves for b in leaves]
    for a in leaves[: len(leaves) // 2]:  # the base's caches warm for half the leaves
        for b in leaves[: len(leaves) // 2]:
            fab.pathset(a, b)
    derived = fab.with_failed_links(down)
    assert derived._pathsets and len(derived._pathsets) < len(fab._pathsets)  # some carried over, not all
    graph = fab.graph.copy()
    graph.remove_edges_from(down)
    fresh_down, fresh = Fabric(graph, dict(fab.hosts)), Fabric.fattree(k)
    for a, b in reversed(pairs):  # the derived one fills the rest first, then the base does
        assert derived.pathset(a, b).paths == fresh_down.pathset(a, b).paths
    for a, b in pairs:
        assert fab.pathset(a, b).paths == fresh.pathset(a, b).paths
        assert derived.pathset(a, b).paths == fresh_down.pathset(a, b).paths
        named = [[f.links[i] for i in row] for f in (derived, fresh_down) for row in f.pathset(a, b).links().tolist()]
        assert named[: len(named) // 2] == named[len(named) // 2:]  # the same links (numbered as each fabric's)
