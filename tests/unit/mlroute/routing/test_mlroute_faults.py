"""mlroute on a learned fat-tree that is no longer intact (issue 10: an aggregation switch with no core link)."""

import networkx as nx

from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.optimisers.mlroute import fattree_structure


def learned_fattree(k=4):
    """A k-ary fat-tree as the controller hands it over: DPID-like names, a ``tier`` attribute per switch."""
    half, g, hosts = k // 2, nx.Graph(), {}
    cores = [3001 + i for i in range(half * half)]
    g.add_nodes_from(cores, tier="core")
    for pod in range(k):
        aggs = [2000 + 100 * pod + i for i in range(half)]
        edges = [1000 + 100 * pod + i for i in range(half)]
        g.add_nodes_from(aggs, tier="aggregation")
        g.add_nodes_from(edges, tier="edge")
        for i, agg in enumerate(aggs):
            g.add_edges_from((agg, cores[i * half + j]) for j in range(half))
            g.add_edges_from((edge, agg) for edge in edges)
        for e, edge in enumerate(edges):
            for h in range(half):
                hosts[f"10.0.{pod}.{e * half + h + 1}"] = edge
    return g, hosts


def test_an_aggregation_switch_without_core_links_falls_back_to_the_general_search():
    g, hosts = learned_fattree(4)
    assert fattree_structure(Fabric.from_graph(g, hosts)) is not None
    g.remove_edges_from([(2000, 3001), (2000, 3002)])
    fab = Fabric.from_graph(g, hosts)
    assert fattree_structure(fab) is None  # was: ValueError: min() arg is an empty sequence
    ips = sorted(hosts)
    flows = [Flow(ips[i], ips[(i + 4) % 16]) for i in range(16)]
    routing = optimise("mlroute", fab, flows)
    assert all(p is not None and fab.is_valid_path(f, p) for f, p in zip(flows, routing.paths))
    assert not any({2000, 3001} <= set(p) and abs(p.index(2000) - p.index(3001)) == 1 for p in routing.paths)
