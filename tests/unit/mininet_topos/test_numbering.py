"""DPIDs and host addresses of the Mininet topology files and the unit-test fixtures: distinct at every size."""

import pytest

from mininet_topos import common
from mininet_topos.common import TopologySizeError, fat_tree_dpids, leaf_spine_dpids
from mininet_topos.fattree import FatTreeTopo
from mininet_topos.leafspine import LeafSpineTopo
from mlroute.experiment import runner
from tests import topologies


def _topo_dpids(topo):
    return [int(topo.nodeInfo(s)["dpid"], 16) for s in topo.switches()]


@pytest.mark.parametrize("k", [2, 4, 6, 8, 10, 12, 16, 20, 24, 48, 100, 200])
def test_fat_tree_dpids_are_distinct_and_counted(k):
    cores, aggs, edges = fat_tree_dpids(k)
    every = cores + [d for pod in aggs for d in pod] + [d for pod in edges for d in pod]
    assert len(every) == 5 * k * k // 4
    assert len(set(every)) == len(every)
    assert max(every) <= common.MAX_DPID and min(every) > 0


def test_small_fat_trees_keep_the_historic_numbering():
    cores, aggs, edges = fat_tree_dpids(4)
    assert cores == [3001, 3002, 3003, 3004]
    assert aggs[3] == [2300, 2301] and edges[0] == [1000, 1001]
    assert fat_tree_dpids(10)[1][9] == [2900 + i for i in range(5)]


def test_fat_tree_topo_12_has_one_dpid_per_switch():  # the historic scheme gave 180 switches 163 DPIDs
    topo = FatTreeTopo(12)
    dpids = _topo_dpids(topo)
    assert len(dpids) == 180 == len(set(dpids))


@pytest.mark.parametrize("spines,leaves", [(4, 4), (32, 64), (4, 120), (120, 4), (99, 99), (100, 1), (8, 1000)])
def test_leaf_spine_dpids_are_distinct(spines, leaves):
    spine_ids, leaf_ids = leaf_spine_dpids(spines, leaves)
    assert len(set(spine_ids + leaf_ids)) == spines + leaves


def test_leaf_spine_topo_4_120_1_has_one_dpid_per_switch():  # the historic scheme gave 124 switches 120 DPIDs
    dpids = _topo_dpids(LeafSpineTopo(4, 120, 1))
    assert len(dpids) == 124 == len(set(dpids))
    assert leaf_spine_dpids(4, 4) == ([201, 202, 203, 204], [101, 102, 103, 104])


def test_fixtures_number_switches_and_hosts_like_the_topology_files():
    for fixture, topo in ((topologies.fat_tree(12), FatTreeTopo(12)),
                          (topologies.leaf_spine(4, 120, 1), LeafSpineTopo(4, 120, 1))):
        assert set(fixture.ports) == set(_topo_dpids(topo))
        ips = {topo.nodeInfo(h)["ip"].split("/")[0] for h in topo.hosts()}
        assert set(fixture.hosts) == ips and len(ips) == len(topo.hosts())


def test_sizes_that_cannot_be_numbered_are_refused_clearly():
    with pytest.raises(TopologySizeError, match="even"):
        fat_tree_dpids(7)
    with pytest.raises(TopologySizeError, match="hosts"):
        fat_tree_dpids(408)  # 16,979,328 hosts: more than 10.a.b.c can address
    with pytest.raises(TopologySizeError):
        leaf_spine_dpids(0, 4)
    with pytest.raises(TopologySizeError, match="hosts"):
        LeafSpineTopo(2, 2, 1 << 23)
    assert common.host_ip(256) == "10.0.1.0" and common.host_ip(common.MAX_HOSTS) == "10.255.255.254"


def test_experiment_refuses_sizes_the_topology_files_cannot_number():
    with pytest.raises(runner.ExperimentError, match="hosts"):
        runner.validate(runner.ExperimentSpec("fattree", k=408))
    with pytest.raises(runner.ExperimentError, match="hosts"):
        runner.validate(runner.ExperimentSpec("leafspine", spines=2, leaves=2, hosts_per_leaf=1 << 23))
    runner.validate(runner.ExperimentSpec("fattree", k=12))


def test_a_shuffled_fat_tree_is_the_same_fabric_under_names_that_say_nothing():
    tiers, shuffled = FatTreeTopo(6), FatTreeTopo(6, names="shuffled", seed=7)
    names = shuffled.switches(sort=False)  # in the order they were added
    assert sorted(names) == sorted(f"s{n}" for n in range(1, 46)) and names != sorted(names, key=lambda s: int(s[1:]))
    assert all(int(shuffled.nodeInfo(s)["dpid"], 16) == int(s[1:]) for s in names)
    rename = dict(zip(tiers.switches(sort=False), names))  # both add switches in the same order: core, then pod by pod
    edges = {frozenset(rename.get(n, n) for n in link) for link in tiers.links()}
    assert edges == {frozenset(link) for link in shuffled.links()}
    assert FatTreeTopo(6, names="shuffled", seed=7).switches(sort=False) == names  # seeded
    with pytest.raises(ValueError, match="tiers or shuffled"):
        FatTreeTopo(4, names="random")
