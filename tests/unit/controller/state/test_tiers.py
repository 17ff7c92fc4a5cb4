from collections import Counter

import networkx as nx

from controller.state.tiers import FAT_TREE, LEAF_SPINE, UNKNOWN, from_levels, infer_tiers
from tests import topologies


def infer(topo, pinned=None):
    return infer_tiers(topo.graph(), topo.access_switches(), pinned)


def test_fat_tree_k4_tiers_from_graph_alone():
    result = infer(topologies.fat_tree(4))
    assert result.kind == FAT_TREE
    assert Counter(result.tiers.values()) == {"core": 4, "aggregation": 8, "edge": 8}
    assert result.tiers[3001] == "core" and result.tiers[2000] == "aggregation" and result.tiers[1000] == "edge"


def test_fat_tree_k6_and_before_hosts_are_known():
    # No host learned yet: the free (access) ports are enough to find the edge tier.
    result = infer(topologies.fat_tree(6, hosts=False))
    assert result.kind == FAT_TREE
    assert Counter(result.tiers.values()) == {"core": 9, "aggregation": 18, "edge": 18}


def test_leaf_spine_square_is_not_confused_by_symmetry():
    result = infer(topologies.leaf_spine(4, 4, 2))
    assert result.kind == LEAF_SPINE
    assert Counter(result.tiers.values()) == {"spine": 4, "leaf": 4}
    assert all(result.tiers[d] == "spine" for d in range(201, 205))


def test_fat_tree_with_a_failed_core_link_is_still_a_fat_tree():
    topo = topologies.fat_tree(4)
    link = next(lnk for lnk in topo.live_links() if lnk.src == 2000 and lnk.dst == 3001)
    topo.port_down(link.src, link.src_port)
    assert infer(topo).kind == FAT_TREE


def test_ring_is_not_a_clos_and_says_why():
    result = infer(topologies.ring(5))
    assert result.kind == UNKNOWN
    assert "not a Clos" in result.reason


def test_dpids_do_not_matter():
    topo = topologies.fat_tree(4)
    mapping = {d: 10_000 - d for d in topo.ports}  # reverse the order of every DPID
    graph = nx.relabel_nodes(topo.graph(), mapping)
    result = infer_tiers(graph, {mapping[d] for d in topo.access_switches()})
    assert Counter(result.tiers.values()) == {"core": 4, "aggregation": 8, "edge": 8}


def test_pinned_tiers_override_inference_and_are_checked():
    topo = topologies.leaf_spine(2, 3, 1)
    pins = {201: "spine", 202: "spine", 101: "leaf", 102: "leaf", 103: "leaf"}
    assert infer(topo, pins).kind == LEAF_SPINE
    bad = {**pins, 201: "leaf"}
    result = infer(topo, bad)
    assert result.kind == UNKNOWN and "pinned" in result.reason


# -- issue 10: no "not a Clos" flap while a switch reconnects or a link comes back ---------------------------

import pytest  # noqa: E402


def still(topo, previous, before):
    """Tiers of ``topo`` given the previous inference: the same fat-tree as ``before``."""
    result = infer_tiers(topo.graph(), topo.access_switches(), previous=previous)
    assert result.kind == FAT_TREE, result.reason
    assert result.tiers == before.tiers and result.levels == before.levels
    return result


@pytest.mark.parametrize("dpid", [2000, 3001, 1000])  # an aggregation, a core and an edge switch
def test_a_reconnecting_switch_keeps_its_tier_while_its_links_come_back(dpid):
    topo = topologies.fat_tree(4)
    before = infer(topo)
    links = [link for link in topo.links.values() if dpid in (link.src, link.dst)]
    ports = set(topo.ports[dpid])
    topo.remove_switch(dpid)
    topo.add_switch(dpid, ports)  # reconnected: every port live, no link known yet
    previous = still(topo, before, before)
    for link in links:  # LLDP rediscovers them one direction at a time, as Ryu reports them
        topo.add_link(link.src, link.src_port, link.dst, link.dst_port)
        previous = still(topo, previous, before)


def test_a_link_coming_back_before_lldp_sees_it_changes_no_tier():
    topo = topologies.fat_tree(4)
    before = infer(topo)
    link = next(lnk for lnk in topo.live_links() if lnk.src == 2000 and lnk.dst == 3001)
    ends = ((link.src, link.src_port), (link.dst, link.dst_port))
    for end in ends:
        topo.port_down(*end)
    previous = still(topo, before, before)
    for end in ends:
        topo.port_up(*end)  # both ends up, the link not rediscovered yet: 3001 has a port without a link
    previous = still(topo, previous, before)
    topo.add_link(link.src, link.src_port, link.dst, link.dst_port)
    previous = still(topo, previous, before)
    topo.add_link(link.dst, link.dst_port, link.src, link.src_port)
    still(topo, previous, before)


def test_every_core_away_is_still_a_fat_tree():
    topo = topologies.fat_tree(4)
    before = infer(topo)
    for core in range(3001, 3005):
        ports = set(topo.ports[core])
        topo.remove_switch(core)
        topo.add_switch(core, ports)
    still(topo, before, before)


def test_without_a_previous_clos_inference_is_from_the_graph_alone():
    ring = topologies.ring(5)
    assert infer_tiers(ring.graph(), ring.access_switches(), previous=infer(ring)).kind == UNKNOWN
    topo = topologies.fat_tree(4)
    for core in range(3001, 3005):
        ports = set(topo.ports[core])
        topo.remove_switch(core)
        topo.add_switch(core, ports)
    assert infer(topo).kind != FAT_TREE  # what memory of the previous inference saves


def test_another_controllers_levels_judge_a_half_known_graph_as_its_own_would():
    """A cluster's view carries the leader's levels; a new leader judges a graph without one restored cable (its
    ports up, its link not found yet) against them: a Clos with the same tiers, where the graph alone is not."""
    topo = topologies.fat_tree(4)
    before = infer(topo)
    link = next(lnk for lnk in topo.live_links() if lnk.src == 2000 and lnk.dst == 3001)
    topo.remove_link(link.src, link.src_port, link.dst, link.dst_port)
    topo.remove_link(link.dst, link.dst_port, link.src, link.src_port)
    assert infer(topo).kind == UNKNOWN  # alone, 2000 and 3001 look host-facing
    previous = from_levels(before.kind, before.levels)
    assert previous is not None and previous.tiers == before.tiers
    assert infer_tiers(topo.graph(), topo.access_switches(), previous=previous).tiers == before.tiers
    assert from_levels("mesh", before.levels) is None and from_levels(FAT_TREE, {}) is None
    assert from_levels(LEAF_SPINE, before.levels) is None  # a level leaf-spine does not have
