import itertools

import pytest

from controller import forwarding
from controller.rules import ETH_ARP, ETH_IPV4, ETH_IPV6
from tests import topologies
from tests.oftable import lookup, trace


def ipv4(src, dst):
    return {"eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip}


def assert_all_pairs_delivered(topo):
    desired = forwarding.plan(topo)
    for src, dst in itertools.permutations(topo.hosts.values(), 2):
        t = trace(desired, topo, src.dpid, src.port, ipv4(src, dst))
        assert not t.looped, (src, dst)
        assert t.delivered == {(dst.dpid, dst.port)}, (src, dst, t)
        assert not t.to_controller and not t.dropped, (src, dst, t)
    return desired


@pytest.mark.parametrize("topo", [topologies.fat_tree(4), topologies.leaf_spine(4, 4, 2), topologies.ring(5)],
                         ids=["fattree4", "leafspine442", "ring5"])
def test_every_host_reaches_every_other_exactly_once_without_loops(topo):
    assert_all_pairs_delivered(topo)


def test_upward_traffic_is_ecmp_over_all_up_paths_and_downward_is_deterministic():
    topo = topologies.fat_tree(4)
    desired = forwarding.plan(topo)
    src = topo.hosts["10.0.0.1"]  # pod 0
    dst = topo.hosts["10.0.0.16"]  # pod 3
    t = trace(desired, topo, src.dpid, src.port, ipv4(src, dst))
    assert len(t.paths) == 4  # 2 aggregation x 2 core choices: every equal-cost path
    assert len({p[2] for p in t.paths}) == 4  # through all four cores
    edge_rule = forwarding.match(eth_type=ETH_IPV4, ipv4_dst=dst.ip)
    up = desired[src.dpid].flows[(1, 10, edge_rule)]
    assert up.actions[0][0] == "group" and len(desired[src.dpid].groups[up.actions[0][1]].ports) == 2
    core = desired[3001].flows[(1, 10, edge_rule)]
    assert core.actions[0][0] == "output"  # a core has exactly one way down


def test_a_failed_aggregation_core_link_is_routed_around():
    topo = topologies.fat_tree(4)
    link = next(lnk for lnk in topo.live_links() if lnk.src == 2300 and lnk.dst == 3001)  # pod 3's agg to a core
    topo.port_down(link.src, link.src_port)
    topo.port_down(link.dst, link.dst_port)
    desired = assert_all_pairs_delivered(topo)
    src, dst = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    t = trace(desired, topo, src.dpid, src.port, ipv4(src, dst))
    assert all(3001 not in p for p in t.paths)  # nobody climbs to the core that lost its way down


def test_a_failed_switch_is_routed_around():
    topo = topologies.fat_tree(4)
    topo.remove_switch(2000)
    assert_all_pairs_delivered(topo)


def test_arp_goes_to_controller_and_ipv6_is_dropped_on_every_switch():
    topo = topologies.fat_tree(4)
    desired = forwarding.plan(topo)
    h = topo.hosts["10.0.0.1"]
    t = trace(desired, topo, h.dpid, h.port, {"eth_type": ETH_ARP})
    assert t.to_controller == [h.dpid] and not t.delivered
    t = trace(desired, topo, h.dpid, h.port, {"eth_type": ETH_IPV6})
    assert t.dropped == [h.dpid] and not t.delivered and not t.to_controller


def test_unknown_destination_goes_to_controller_not_the_fabric():
    topo = topologies.fat_tree(4)
    desired = forwarding.plan(topo)
    h = topo.hosts["10.0.0.1"]
    t = trace(desired, topo, h.dpid, h.port, {"eth_type": ETH_IPV4, "ipv4_dst": "10.9.9.9"})
    assert t.to_controller == [h.dpid] and not t.delivered


def test_group_ids_are_stable_across_recomputation():
    a = forwarding.plan(topologies.fat_tree(4))
    b = forwarding.plan(topologies.fat_tree(4))
    assert {d: set(r.groups) for d, r in a.items()} == {d: set(r.groups) for d, r in b.items()}


def test_staggered_buckets_break_hash_polarisation():
    """Model a switch that picks bucket hash mod n_buckets with the same hash at every tier (OVS's default):
    with plain groups an aggregation switch sends everything it gets to one core; staggered, all four."""
    from controller.tiers import infer_tiers
    topo = topologies.fat_tree(4)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    links = {(link.src, link.src_port): link.dst for link in topo.live_links()}
    dst = topo.hosts["10.0.0.16"]
    rule_match = forwarding.match(eth_type=ETH_IPV4, ipv4_dst=dst.ip)

    src = topo.hosts["10.0.0.1"]
    by_link = {(link.src, link.src_port): link for link in topo.live_links()}

    def cores_reached(desired):
        reached = set()
        for h in range(64):  # one hash value per flow
            switch, in_port = src.dpid, src.port  # edge of pod 0
            for _ in range(2):  # edge -> aggregation -> core
                packet = {"eth_type": ETH_IPV4, "ipv4_dst": dst.ip, "in_port": in_port}
                action = lookup(desired[switch], 1, packet).actions[0]
                buckets = desired[switch].groups[action[1]].ports
                link = by_link[(switch, buckets[h % len(buckets)])]
                switch, in_port = link.dst, link.dst_port
            reached.add(switch)
        return reached

    assert links and rule_match
    for plan in (forwarding.plan, forwarding.per_host_plan):  # compact on a Clos, and per host
        assert len(cores_reached(plan(topo, tiers.levels, False, topo.graph()))) == 2
        assert cores_reached(plan(topo, tiers.levels, True, topo.graph())) == {3001, 3002, 3003, 3004}
    assert_all_pairs_delivered(topo)


def test_staggering_stays_within_the_bucket_budget():
    assert forwarding.staggered_buckets((1, 2), 1) == (1, 1, 2, 2)
    assert forwarding.staggered_buckets((1, 2, 3), 0) == (1, 2, 3)
    assert forwarding.staggered_buckets(tuple(range(24)), 1) == tuple(range(24))  # 576 > 64: plain
