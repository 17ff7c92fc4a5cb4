"""Faults the traffic-engineering loop must ride through (issue 10): an aggregation switch with no core link,
a link coming back, a switch reconnecting."""

from controller import te
from controller.flowkey import FlowKey
from controller.monitor import PROTO_TCP
from controller.tiers import FAT_TREE, infer_tiers
from tests import topologies


def stride(topo, n=16, s=4):
    return [(FlowKey(f"10.0.0.{i + 1}", f"10.0.0.{(i + s) % n + 1}", PROTO_TCP, 40000 + i, 5201), 1.0)
            for i in range(n)]


def core_links_of(topo, agg):
    return [link for link in topo.live_links() if link.src == agg and link.dst >= 3000]


def tiers_of(topo, previous=None):
    return infer_tiers(topo.graph(), topo.access_switches())


def test_an_aggregation_switch_without_core_links_still_gets_routed_and_valid_pins_stay():
    topo = topologies.fat_tree(4)
    engineer = te.TrafficEngineer("mlroute")
    tiers = tiers_of(topo)
    flows = stride(topo)
    first = engineer.step(te.fabric_from_topology(topo, tiers, 10e6, 10e6), flows)
    assert first.applied and len(engineer.pinned) == 16
    before = dict(engineer.pinned)
    agg = 2000  # pod 0's first aggregation switch: both its core uplinks go down
    for link in core_links_of(topo, agg):  # a cable pulled: both ends go down
        topo.port_down(link.src, link.src_port)
        topo.port_down(link.dst, link.dst_port)
    tiers = tiers_of(topo)
    assert tiers.kind == FAT_TREE
    fabric = te.fabric_from_topology(topo, tiers, 10e6, 10e6)
    result = engineer.step(fabric, flows)  # raised ValueError: min() arg is an empty sequence
    assert result.applied and result.reason == "new or broken paths"
    flow_of = {f.key: f for f in as_flows(flows)}
    assert len(engineer.pinned) == 16 and all(fabric.is_valid_path(flow_of[k], p) for k, p in engineer.pinned.items())
    still_valid = [k for k, p in before.items() if fabric.is_valid_path(flow_of[k], p)]
    assert 0 < len(still_valid) < 16
    assert all(engineer.pinned[k] == before[k] for k in still_valid)  # only the broken ones moved
    assert sorted(result.moved) == sorted(k for k in before if k not in still_valid)


def as_flows(flows):
    from mlroute.routing.flow import Flow
    return [Flow(k.src_ip, k.dst_ip, demand=d, key=k) for k, d in flows]
