"""mlroute on fabrics the controller learns (switch ids are DPIDs in any order)."""

import networkx as nx
import numpy as np

from mlroute.routing import metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.optimisers.mlroute import fattree_structure


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
