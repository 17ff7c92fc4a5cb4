from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.topology import Topology
from tests import topologies


def test_hosts_are_never_learned_on_fabric_ports():
    topo = topologies.fat_tree(4, hosts=False)
    link = topo.live_links()[0]
    assert not topo.learn_host("10.0.0.99", "00:00:00:00:00:99", link.src, link.src_port)
    edge_access = sorted(topo.access_ports(1000))
    assert topo.learn_host("10.0.0.1", "00:00:00:00:00:01", 1000, edge_access[0])
    assert not topo.learn_host("10.0.0.1", "00:00:00:00:00:01", 1000, edge_access[0])  # nothing new


def test_a_host_learned_before_discovery_is_forgotten_when_its_port_turns_out_to_be_fabric():
    topo = topologies.fat_tree(4, hosts=False)
    topo.add_switch(9, [1])
    topo.add_switch(8, [1])
    topo.learn_host("10.0.0.50", "00:00:00:00:00:50", 9, 1)
    topo.add_link(9, 1, 8, 1)
    assert "10.0.0.50" not in topo.hosts


def test_live_links_need_both_directions_and_live_ports():
    topo = topologies.leaf_spine(2, 2, 1)
    assert len(topo.live_links()) == 8
    link = topo.live_links()[0]
    topo.remove_link(link.src, link.src_port, link.dst, link.dst_port)
    assert len(topo.live_links()) == 6  # the reverse direction alone is not usable
    topo2 = topologies.leaf_spine(2, 2, 1)
    topo2.port_down(101, 1)
    assert len(topo2.live_links()) == 6


def test_switch_leaving_takes_its_links_and_hosts():
    topo = topologies.leaf_spine(2, 2, 1)
    topo.remove_switch(101)
    assert all(101 not in (l.src, l.dst) for l in topo.links.values())
    assert all(h.dpid != 101 for h in topo.hosts.values())


def test_json_view_has_the_documented_shape():
    topo = topologies.leaf_spine(2, 2, 1)
    j = topo.to_json({201: "spine"})
    assert set(j) == {"switches", "links", "hosts"}
    assert {"dpid": 201, "tier": "spine"} in j["switches"]
    assert set(j["links"][0]) == {"src", "src_port", "dst", "dst_port"}
    assert set(j["hosts"][0]) == {"ip", "mac", "dpid", "port"}


_OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "port_down", "switch_down"]),
                          st.integers(1, 4), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3)), max_size=40)


@settings(max_examples=200)  # cheap: plain dict updates
@given(_OPS)
@example([("add", 1, 1, 2, 1), ("add", 1, 1, 3, 2)])  # a re-cabled port
def test_fabric_ports_always_match_the_links_after_any_sequence_of_events(ops):
    """The endpoint index behind is_fabric_port / fabric_ports never drifts from the links it summarises."""
    topo = Topology()
    for dpid in range(1, 5):
        topo.add_switch(dpid, [1, 2, 3])
    for op, a, ap, b, bp in ops:
        if op == "add":
            topo.add_link(a, ap, b, bp)
        elif op == "remove":
            topo.remove_link(a, ap, b, bp)
        elif op == "port_down":
            topo.port_down(a, ap)
        else:
            topo.remove_switch(a)
            topo.add_switch(a, [1, 2, 3])
        for dpid in range(1, 5):
            scanned = {l.src_port for l in topo.links.values() if l.src == dpid} | {
                l.dst_port for l in topo.links.values() if l.dst == dpid}
            assert topo.fabric_ports(dpid) == scanned
            assert all(topo.is_fabric_port(dpid, p) == (p in scanned) for p in (1, 2, 3))
