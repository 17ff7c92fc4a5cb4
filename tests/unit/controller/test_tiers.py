from collections import Counter

import networkx as nx

from controller.tiers import FAT_TREE, LEAF_SPINE, UNKNOWN, infer_tiers
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
    link = next(l for l in topo.live_links() if l.src == 2000 and l.dst == 3001)
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
