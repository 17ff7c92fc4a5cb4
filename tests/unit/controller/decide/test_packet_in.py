from controller.decide.packet_in import ARP_REPLY, ARP_REQUEST, ArpReply, Forward, PacketIn, PacketInHandler
from controller.desired.rules import ETH_ARP, ETH_IPV4
from tests import topologies
from tests.clock import FakeClock as Clock


def arp_request(dpid, port, src_n, dst_ip):
    return PacketIn(dpid, port, f"00:00:00:00:00:{src_n:02x}", "ff:ff:ff:ff:ff:ff", ETH_ARP, ARP_REQUEST,
                    f"10.0.0.{src_n}", dst_ip)


def test_known_target_is_answered_by_the_controller():
    topo = topologies.fat_tree(4)
    h1, h16 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    d = PacketInHandler(topo, Clock()).handle(arp_request(h1.dpid, h1.port, 1, h16.ip))
    assert d.actions == [ArpReply(h1.dpid, h1.port, h16.ip, h16.mac, h1.ip, h1.mac)]


def test_unknown_target_is_asked_on_host_ports_only_once():
    topo = topologies.fat_tree(4, hosts=False)
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    edge_port = min(topo.access_ports(1000))
    d = handler.handle(arp_request(1000, edge_port, 1, "10.0.0.2"))
    assert d.learned
    fabric = {(link.src, link.src_port) for link in topo.live_links()}
    outs = {(a.dpid, a.port) for a in d.actions}
    assert outs and not outs & fabric and (1000, edge_port) not in outs
    assert len(outs) == 15  # every other host port of the k=4 fat-tree
    assert handler.handle(arp_request(1000, edge_port, 1, "10.0.0.2")).actions == []  # copy within hold time
    clock.t = 5
    assert handler.handle(arp_request(1000, edge_port, 1, "10.0.0.2")).actions  # a retry later is sent


def test_packets_arriving_on_fabric_ports_are_ignored():
    topo = topologies.fat_tree(4, hosts=False)
    link = topo.live_links()[0]
    d = PacketInHandler(topo, Clock()).handle(arp_request(link.dst, link.dst_port, 1, "10.0.0.2"))
    assert not d.learned and d.actions == []


def test_arp_reply_is_delivered_to_the_asker():
    topo = topologies.fat_tree(4)
    h1, h16 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    reply = PacketIn(h16.dpid, h16.port, h16.mac, h1.mac, ETH_ARP, ARP_REPLY, h16.ip, h1.ip)
    assert PacketInHandler(topo, Clock()).handle(reply).actions == [Forward(h1.dpid, h1.port)]


def test_first_ipv4_packet_to_a_known_host_is_delivered_directly():
    topo = topologies.fat_tree(4)
    h1, h16 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    pkt = PacketIn(h1.dpid, h1.port, h1.mac, h16.mac, ETH_IPV4, 0, h1.ip, h16.ip)
    assert PacketInHandler(topo, Clock()).handle(pkt).actions == [Forward(h16.dpid, h16.port)]


# -- issue 10: no hijack --------------------------------------------------------------------------------------

import pytest  # noqa: E402

from controller.decide.packet_in import PROBE_MAC, PROBE_RETRIES, ArpProbe  # noqa: E402
from controller.desired import forwarding  # noqa: E402
from tests.oftable import trace  # noqa: E402


def gratuitous(host_like, ip):
    return PacketIn(host_like.dpid, host_like.port, host_like.mac, "ff:ff:ff:ff:ff:ff", ETH_ARP, ARP_REQUEST, ip, ip)


def forged_ipv4(host_like, ip, dst_ip):
    return PacketIn(host_like.dpid, host_like.port, host_like.mac, "00:00:00:00:00:05", ETH_IPV4, 0, ip, dst_ip)


def probe_answer(victim):
    return PacketIn(victim.dpid, victim.port, victim.mac, PROBE_MAC, ETH_ARP, ARP_REPLY, victim.ip, "0.0.0.0")


def victim_keeps_its_traffic(topo, victim, sender):
    rules = forwarding.plan(topo)
    packet = dict(eth_type=ETH_IPV4, eth_src=sender.mac, ipv4_src=sender.ip, ipv4_dst=victim.ip)
    return trace(rules, topo, sender.dpid, sender.port, packet).delivered == {(victim.dpid, victim.port)}


@pytest.mark.parametrize("forge", [lambda a, v: gratuitous(a, v.ip), lambda a, v: forged_ipv4(a, v.ip, "10.0.0.5")])
def test_a_claim_on_a_bound_address_is_probed_and_refused_when_the_owner_answers(forge):
    topo = topologies.fat_tree(4)
    h1, h5, h9 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.5"], topo.hosts["10.0.0.9"]
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    d = handler.handle(forge(h1, h9))
    assert not d.learned and d.actions == [ArpProbe(h9.dpid, h9.port, h9.ip, h9.mac)]  # nothing else sent
    assert topo.hosts[h9.ip] == h9
    clock.t = 0.01
    d = handler.handle(probe_answer(h9))
    assert [r.claim.location for r in d.refused] == [h1.location] and d.actions == []
    clock.t = 5  # long past the timeout: nothing moves
    assert not handler.tick().changed and topo.hosts[h9.ip] == h9
    assert victim_keeps_its_traffic(topo, h9, h5)
    # the same claim again within the hold: refused silently, no probe storm
    d = handler.handle(forge(h1, h9))
    assert d.actions == [] and d.refused == [] and topo.hosts[h9.ip] == h9


def test_a_host_that_really_moved_is_moved_after_the_probe_times_out():
    topo = topologies.fat_tree(4)
    h9 = topo.hosts["10.0.0.9"]
    topo.port_up(1000, 99)
    clock = Clock()
    handler = PacketInHandler(topo, clock, probe_timeout_s=1.0)
    moved = PacketIn(1000, 99, h9.mac, "ff:ff:ff:ff:ff:ff", ETH_ARP, ARP_REQUEST, h9.ip, h9.ip)
    assert handler.handle(moved).actions == [ArpProbe(h9.dpid, h9.port, h9.ip, h9.mac)]
    probes = 1
    for t in (0.34, 0.5, 0.67, 0.9):  # retries spread over the timeout, at most PROBE_RETRIES in all
        clock.t = t
        probes += len(handler.tick().actions)
    assert probes == PROBE_RETRIES and topo.hosts[h9.ip] == h9
    clock.t = 1.0
    d = handler.tick()
    assert d.changed and [h.location for h in d.moved] == [(1000, 99)] and topo.hosts[h9.ip].location == (1000, 99)


def test_the_move_is_confirmed_by_any_later_packet_in():
    topo = topologies.fat_tree(4)
    h1, h9 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.9"]
    topo.port_up(1000, 99)
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    handler.handle(PacketIn(1000, 99, h9.mac, "ff:ff:ff:ff:ff:ff", ETH_ARP, ARP_REQUEST, h9.ip, h9.ip))
    clock.t = 2
    d = handler.handle(arp_request(h1.dpid, h1.port, 1, "10.0.0.16"))
    assert d.changed and topo.hosts[h9.ip].location == (1000, 99)


def test_a_second_claimant_while_one_is_checked_is_refused():
    topo = topologies.fat_tree(4)
    h1, h2, h9 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.2"], topo.hosts["10.0.0.9"]
    handler = PacketInHandler(topo, Clock())
    handler.handle(gratuitous(h1, h9.ip))
    d = handler.handle(gratuitous(h2, h9.ip))
    assert d.actions == [] and [r.claim.location for r in d.refused] == [h2.location]


def test_a_binding_on_a_disconnected_switch_is_not_taken_over():
    topo = topologies.fat_tree(4)
    h1, h9 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.9"]
    del topo.ports[h9.dpid]  # disconnected, hosts kept (it may still forward)
    d = PacketInHandler(topo, Clock()).handle(gratuitous(h1, h9.ip))
    assert d.actions == [] and d.refused and topo.hosts[h9.ip] == h9


def test_a_forged_arp_reply_is_not_delivered():
    topo = topologies.fat_tree(4)
    h1, h5, h9 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.5"], topo.hosts["10.0.0.9"]
    forged = PacketIn(h1.dpid, h1.port, h1.mac, h5.mac, ETH_ARP, ARP_REPLY, h9.ip, h5.ip)  # "10.0.0.9 is at h1"
    d = PacketInHandler(topo, Clock()).handle(forged)
    assert Forward(h5.dpid, h5.port) not in d.actions


def test_the_probe_is_a_well_formed_arp_request_from_0_0_0_0():
    from controller.southbound.framework import arp, ethernet, packet
    frame = ArpProbe(1, 2, "10.0.0.9", "00:00:00:00:00:09").frame
    pkt = packet.Packet(frame)
    eth, a = pkt.get_protocol(ethernet.ethernet), pkt.get_protocol(arp.arp)
    assert len(frame) == 60 and eth.dst == "00:00:00:00:00:09" and eth.src == PROBE_MAC
    assert (a.opcode, a.src_ip, a.dst_ip, a.src_mac) == (arp.ARP_REQUEST, "0.0.0.0", "10.0.0.9", PROBE_MAC)


def test_a_binding_recovered_without_its_mac_is_probed_by_broadcast_and_defended_by_its_answer():
    from controller.state.topology import UNKNOWN_MAC
    topo = topologies.fat_tree(4)
    h1, h9 = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.9"]
    topo.forget_host(h9.ip)
    topo.learn_host(h9.ip, UNKNOWN_MAC, h9.dpid, h9.port)  # as a restarted controller recovers it
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    (probe,) = handler.handle(gratuitous(h1, h9.ip)).actions
    assert probe.frame[:6] == b"\xff" * 6
    d = handler.handle(probe_answer(h9))  # the real host answers with its MAC
    assert [r.claim.location for r in d.refused] == [h1.location]
    clock.t = 5
    handler.tick()
    assert topo.hosts[h9.ip] == h9  # its MAC filled in, never moved


# -- bounded host learning (issue 25 item 2) ----------------------------------------------------------------------

def _claims(host_like, first, count):
    """ARP announcements from one port claiming ``count`` addresses 10.1.x.y, each with its own MAC."""
    for n in range(first, first + count):
        ip, mac = f"10.1.{n // 256}.{n % 256}", f"02:00:00:00:{n // 256:02x}:{n % 256:02x}"
        yield PacketIn(host_like.dpid, host_like.port, mac, "ff:ff:ff:ff:ff:ff", ETH_ARP, ARP_REQUEST, ip, ip)


def test_one_port_claiming_thousands_of_addresses_learns_only_its_burst_then_its_rate():
    """The measured attack: h1 announcing 10,000 addresses learned 4,105 hosts. Now: the burst, then the rate."""
    from controller.state.topology import Topology

    topo = topologies.fat_tree(4)
    h1 = topo.hosts["10.0.0.1"]
    clock = Clock()
    handler = PacketInHandler(topo, clock, new_hosts_per_s=5.0, new_hosts_burst=20)
    before = len(topo.hosts)
    decisions = [handler.handle(pkt) for pkt in _claims(h1, 0, 10_000)]
    assert len(topo.hosts) - before == 20
    limited = [x for d in decisions for x in d.limited]
    assert len(limited) == 10_000 - 20 and {x.why for x in limited} == {"rate"}
    assert all(not d.actions for d in decisions[20:])  # a refused claim is neither answered nor flooded
    clock.t += 2.0  # 10 more tokens
    for pkt in _claims(h1, 20_000, 15):
        handler.handle(pkt)
    assert len(topo.hosts) - before == 30
    assert isinstance(topo, Topology) and topo.hosts["10.0.0.2"].ip == "10.0.0.2"  # other hosts untouched
    other = topo.hosts["10.0.0.16"]  # another port has its own budget
    assert not handler.handle(next(_claims(other, 30_000, 1))).limited


def test_the_caps_bound_hosts_per_port_and_in_all_but_never_a_move():
    from controller.state.topology import LIMITED

    topo = topologies.fat_tree(4)
    topo.max_hosts_per_port = 3
    h1 = topo.hosts["10.0.0.1"]
    handler = PacketInHandler(topo, Clock(), new_hosts_burst=1000)
    decisions = [handler.handle(pkt) for pkt in _claims(h1, 0, 5)]
    assert len(topo.hosts_at(h1.dpid, h1.port)) == 3  # h1 and two more
    assert [x.why for d in decisions for x in d.limited] == ["port", "port", "port"]
    topo.max_hosts_per_port, topo.max_hosts = 64, len(topo.hosts)
    assert topo.claim("10.9.9.9", "02:00:00:09:09:09", h1.dpid, h1.port).verdict == LIMITED
    assert topo.full_at(h1.dpid, h1.port) == "total"
    # a host that moves (its old port went down) is never counted as new
    h2 = topo.hosts["10.0.0.2"]
    topo.port_down(h2.dpid, h2.port)
    h16 = topo.hosts["10.0.0.16"]
    assert topo.learn_host(h2.ip, h2.mac, h16.dpid, h16.port)


def test_the_core_counts_refused_addresses_and_logs_a_port_once_per_period(caplog):
    import logging

    from controller import config
    from controller.core import ControllerCore
    from controller.southbound.log_throttle import LOG_PERIOD_S

    clock = Clock()
    core = ControllerCore(config.parse("hosts:\n  new_per_port_burst: 5\n  new_per_port_per_s: 1\n"), clock)
    core.topology = core.packet_in.topology = topologies.fat_tree(4)
    h1 = core.topology.hosts["10.0.0.1"]
    with caplog.at_level(logging.WARNING, logger="mlroute"):
        for pkt in _claims(h1, 0, 200):
            core.packet(pkt)
        clock.t += LOG_PERIOD_S  # the bucket refills to its burst: 5 more learned, the rest refused, logged again
        for pkt in _claims(h1, 1000, 100):
            core.packet(pkt)
    assert sum("host limit (rate)" in r.message for r in caplog.records) == 2
    refused = core.metrics.hosts_refused.labels("rate")._value.get()
    assert refused == 195 + 95 and len(core.topology.hosts) == 16 + 5 + 5
