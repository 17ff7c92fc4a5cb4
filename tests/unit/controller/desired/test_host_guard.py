"""Forged sources at a host port: the fake pipeline (tests/oftable.py) over the full desired state."""

from controller.desired import host_guard, sync
from controller.desired.rules import ETH_IPV4
from controller.state.flowkey import FlowKey
from controller.state.monitor import PROTO_TCP
from tests import topologies
from tests.oftable import trace


def desired(topo, accounting=None):
    return sync.desired_state(topo, None, accounting or {}, {}, stagger=True, idle_timeout=10)


def ipv4(src_ip, src_mac, dst_ip, **extra):
    return dict(eth_type=ETH_IPV4, eth_src=src_mac, ipv4_src=src_ip, ipv4_dst=dst_ip, **extra)


def tcp(src_ip, src_mac, dst_ip):
    return ipv4(src_ip, src_mac, dst_ip, ip_proto=PROTO_TCP, tcp_src=40000, tcp_dst=5201)


def test_a_bound_port_only_forwards_its_own_source():
    topo = topologies.fat_tree(4)
    h1, h5, h9 = (topo.hosts[f"10.0.0.{n}"] for n in (1, 5, 9))
    rules = desired(topo)
    good = trace(rules, topo, h1.dpid, h1.port, ipv4(h1.ip, h1.mac, h5.ip))
    assert good.delivered == {h5.location}
    for forged in (ipv4(h9.ip, h1.mac, h5.ip), ipv4(h1.ip, h9.mac, h5.ip), tcp(h9.ip, h1.mac, h5.ip),
                   tcp(h9.ip, h9.mac, h5.ip)):
        result = trace(rules, topo, h1.dpid, h1.port, forged)
        assert result.delivered == set() and result.to_controller == [], forged
    # the victim's own traffic is untouched, new TCP flows still get their one copy to the controller
    victim = trace(rules, topo, h9.dpid, h9.port, tcp(h9.ip, h9.mac, h5.ip))
    assert victim.delivered == {h5.location} and victim.to_controller == [h9.dpid]


def test_counting_rules_do_not_open_a_hole():
    topo = topologies.fat_tree(4)
    h1, h5, h9 = (topo.hosts[f"10.0.0.{n}"] for n in (1, 5, 9))
    key = FlowKey(h1.ip, h5.ip, PROTO_TCP, 40000, 5201)
    rules = desired(topo, {key: h1.location})
    assert trace(rules, topo, h1.dpid, h1.port, tcp(h1.ip, h1.mac, h5.ip)).delivered == {h5.location}
    assert trace(rules, topo, h1.dpid, h1.port, tcp(h9.ip, h1.mac, h5.ip)).delivered == set()


def test_unbound_ports_are_not_guarded_and_one_drop_rule_per_port():
    topo = topologies.fat_tree(4, hosts=False)
    assert guard_rules(topo) == []
    topo = topologies.fat_tree(4)
    h1 = topo.hosts["10.0.0.1"]
    topo.learn_host("10.0.1.1", h1.mac, h1.dpid, h1.port)  # a second address on the same port
    rules = [r for r in guard_rules(topo) if (r.dpid, dict(r.match)["in_port"]) == h1.location]
    g = host_guard
    assert sorted(r.priority for r in rules) == sorted([g.PRIO_GUARD_DROP, g.PRIO_ARP_HOLD]
                                                   + [g.PRIO_GUARD_ALLOW, g.PRIO_ARP_ALLOW] * 2)


def arp(sender_ip, sender_mac, target_ip, op=1):
    return dict(eth_type=0x0806, eth_src=sender_mac, arp_op=op, arp_spa=sender_ip, arp_sha=sender_mac,
                arp_tpa=target_ip)


def test_forged_arp_is_not_forwarded_in_the_data_plane():
    """ARP for a known host follows its forwarding rules (so it works while the controller is away): a forged
    sender would poison the target's cache (h5 would send h9's traffic to h1's MAC, which h9 drops)."""
    topo = topologies.fat_tree(4)
    h1, h5, h9 = (topo.hosts[f"10.0.0.{n}"] for n in (1, 5, 9))
    rules = desired(topo)
    good = trace(rules, topo, h1.dpid, h1.port, arp(h1.ip, h1.mac, h5.ip))
    assert good.delivered == {h5.location} and good.to_controller[0] == h1.dpid
    for forged in (arp(h9.ip, h1.mac, h5.ip), arp(h9.ip, h1.mac, h5.ip, op=2), arp(h1.ip, h9.mac, h5.ip)):
        result = trace(rules, topo, h1.dpid, h1.port, forged)
        assert result.delivered == set() and result.to_controller == [h1.dpid], forged  # the controller judges


def guard_rules(topo):
    """Every bound host's guard rules (``host_guard.host_rules``), one per switch and match."""
    rules = {}
    for host in sorted(topo.hosts.values(), key=lambda h: (h.dpid, h.port, h.ip)):
        for rule in host_guard.host_rules(host):
            rules[(rule.dpid, rule.key)] = rule
    return list(rules.values())
