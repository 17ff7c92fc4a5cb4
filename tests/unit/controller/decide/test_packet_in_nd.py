"""IPv6 neighbour discovery at the packet-in handler: real frames (built with the framework's packet library,
decoded by ``ofmsg.decode_packet_in``) in, the handler's packet-outs and bindings out."""

import ipaddress
import struct

from controller.decide.packet_in import PROBE_MAC, Forward, NdProbe, PacketInHandler
from controller.desired.forwarding import solicited_node
from controller.desired.rules import ND_ADVERT, ND_SOLICIT
from controller.southbound import ofmsg
from controller.southbound.framework import ethernet, icmpv6, ipv6, packet
from tests import topologies
from tests.clock import FakeClock as Clock

ALL_NODES = "ff02::1"




def multicast_mac(ip):
    low = ipaddress.IPv6Address(ip).packed[12:]
    return "33:33:" + ":".join(f"{b:02x}" for b in low)


def nd_frame(kind, eth_src, src, dst, target, eth_dst=None):
    """A neighbour solicitation or advertisement as a host's kernel sends it (hop limit 255)."""
    msg = icmpv6.nd_neighbor(dst=target)
    body = icmpv6.icmpv6(type_=kind, data=msg)
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=eth_dst or multicast_mac(dst), src=eth_src, ethertype=0x86DD))
    pkt.add_protocol(ipv6.ipv6(src=src, dst=dst, nxt=58, hop_limit=255))
    pkt.add_protocol(body)
    pkt.serialize()
    return bytes(pkt.data)


def packet_in(host_like, frame):
    kind, pkt = ofmsg.decode_packet_in(host_like.dpid, host_like.port, frame)
    assert kind == "ipv6"
    return pkt


def solicit(asker, target, src=None):
    return packet_in(asker, nd_frame(ND_SOLICIT, asker.mac, src if src is not None else asker.ip,
                                     solicited_node(target), target))


def advertise(sender, target, dst, src=None):
    eth_dst = None if dst.startswith("ff") else "00:00:00:00:00:ff"
    return packet_in(sender, nd_frame(ND_ADVERT, sender.mac, src or sender.ip, dst, target, eth_dst))


def dual_stack():
    return topologies.dual_stack(topologies.fat_tree(4))


def v6host(topo, n):
    return topo.hosts[topologies.ipv6_of(f"10.0.0.{n}")]


def test_a_solicitation_is_decoded_with_its_type_and_target():
    topo = dual_stack()
    h1, h16 = v6host(topo, 1), v6host(topo, 16)
    pkt = solicit(h1, h16.ip)
    assert (pkt.src_ip, pkt.dst_ip, pkt.nd_type, pkt.nd_target) == (h1.ip, solicited_node(h16.ip), ND_SOLICIT,
                                                                     h16.ip)
    dad = solicit(h1, h16.ip, src="::")
    assert dad.src_ip == "" and dad.nd_target == h16.ip


def test_a_solicitation_for_a_known_address_is_delivered_to_its_owner_alone():
    topo = dual_stack()
    h1, h16 = v6host(topo, 1), v6host(topo, 16)
    topo.forget_host(h1.ip)
    d = PacketInHandler(topo, Clock()).handle(solicit(h1, h16.ip))
    assert d.learned and topo.hosts[h1.ip] == h1  # the asker, learned from its solicitation
    assert d.actions == [Forward(h16.dpid, h16.port)]


def test_a_solicitation_for_an_unknown_address_is_asked_on_host_ports_once_per_hold():
    topo = dual_stack()
    h1 = v6host(topo, 1)
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    d = handler.handle(solicit(h1, "fd00::77"))
    fabric = {(link.src, link.src_port) for link in topo.live_links()}
    outs = {(a.dpid, a.port) for a in d.actions}
    assert len(outs) == 15 and not outs & fabric and h1.location not in outs
    assert handler.handle(solicit(h1, "fd00::77")).actions == []
    clock.t = 5
    assert handler.handle(solicit(h1, "fd00::77")).actions


def test_the_owners_answer_goes_to_the_asker():
    topo = dual_stack()
    h1, h16 = v6host(topo, 1), v6host(topo, 16)
    d = PacketInHandler(topo, Clock()).handle(advertise(h16, h16.ip, h1.ip))
    assert d.actions == [Forward(h1.dpid, h1.port)] and not d.changed


def test_duplicate_address_detection_reaches_the_owner_and_its_defence_the_prober_alone():
    topo = dual_stack()
    h1, h16 = v6host(topo, 1), v6host(topo, 16)
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    d = handler.handle(solicit(h1, h16.ip, src="::"))  # h1 wants h16's address: is it taken?
    assert d.actions == [Forward(h16.dpid, h16.port)] and not d.changed
    clock.t = 0.2
    d = handler.handle(advertise(h16, h16.ip, ALL_NODES))  # h16 defends it, to all nodes
    assert d.actions == [Forward(h1.dpid, h1.port)]
    assert handler.handle(advertise(h16, h16.ip, ALL_NODES)).actions == []  # the prober was told once
    assert topo.hosts[h16.ip] == h16


def test_a_forged_advertisement_goes_nowhere_and_moves_nobody():
    topo = dual_stack()
    h1, h5, h16 = v6host(topo, 1), v6host(topo, 5), v6host(topo, 16)
    handler = PacketInHandler(topo, Clock())
    d = handler.handle(advertise(h1, h16.ip, ALL_NODES))  # "h16's address is at my MAC", from h1's own address
    assert d.actions == [] and not d.changed and topo.hosts[h16.ip] == h16
    d = handler.handle(advertise(h1, h16.ip, h5.ip))  # the same, unicast to h5
    assert d.actions == [] and topo.hosts[h16.ip] == h16


def test_a_claim_on_a_bound_ipv6_address_is_probed_and_refused_when_the_owner_defends_it():
    topo = dual_stack()
    h1, h16 = v6host(topo, 1), v6host(topo, 16)
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    d = handler.handle(advertise(h1, h16.ip, ALL_NODES, src=h16.ip))  # h1 says it is h16
    assert not d.learned and d.actions == [NdProbe(h16.dpid, h16.port, h16.ip, h16.mac)]
    clock.t = 0.01
    d = handler.handle(advertise(h16, h16.ip, ALL_NODES))  # the probe's answer: h16 defends its address
    assert [r.claim.location for r in d.refused] == [h1.location]
    clock.t = 5
    assert not handler.tick().changed and topo.hosts[h16.ip] == h16


def test_the_probe_is_a_valid_duplicate_address_solicitation():
    topo = dual_stack()
    h16 = v6host(topo, 16)
    frame = NdProbe(h16.dpid, h16.port, h16.ip, h16.mac).frame
    pkt = packet.Packet(frame)
    eth, ip, icmp = pkt.get_protocol(ethernet.ethernet), pkt.get_protocol(ipv6.ipv6), pkt.get_protocol(icmpv6.icmpv6)
    assert (eth.dst, eth.src) == (h16.mac, PROBE_MAC)
    assert (ip.src, ip.dst, ip.hop_limit, ip.payload_length) == ("::", solicited_node(h16.ip), 255, 24)
    assert icmp.type_ == ND_SOLICIT and icmp.data.dst == h16.ip
    message = frame[54:]
    pseudo = bytes(16) + ipaddress.IPv6Address(ip.dst).packed + struct.pack("!I3xB", len(message), 58)
    words = struct.unpack(f"!{(len(pseudo) + len(message)) // 2}H", pseudo + message)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    assert total == 0xFFFF  # the checksum holds: a kernel accepts it


def test_a_host_announcing_ten_thousand_addresses_learns_at_most_the_port_cap():
    """Like the ARP case: new addresses at a port are rate-limited and capped; the port's real bindings stay."""
    topo = dual_stack()
    h1 = v6host(topo, 1)
    clock = Clock()
    handler = PacketInHandler(topo, clock)
    learned = limited = 0
    for i in range(10_000):
        clock.t = i * 0.001
        claim = ipaddress.IPv6Address(int(ipaddress.IPv6Address("fd00::1:0")) + i).compressed
        d = handler.handle(advertise(h1, claim, ALL_NODES, src=claim))
        learned += d.learned
        limited += len(d.limited)
    at_port = topo.hosts_at(h1.dpid, h1.port)
    assert len(at_port) <= topo.max_hosts_per_port and learned <= topo.max_hosts_per_port
    assert learned + limited == 10_000 and topo.hosts[h1.ip] == h1


def test_link_local_addresses_are_never_learned_nor_asked_for_across_the_fabric():
    """A host's fe80:: address (its router solicitation, its multicast listener report, its solicitation for
    another link-local address) costs no binding and no entry, and is never asked on other host ports."""
    topo = dual_stack()
    h1 = v6host(topo, 1)
    link_local = "fe80::200:ff:fe00:1"
    handler = PacketInHandler(topo, Clock())
    d = handler.handle(solicit(h1, "fe80::200:ff:fe00:10", src=link_local))
    assert not d.learned and d.actions == [] and link_local not in topo.hosts
    assert handler.handle(solicit(h1, "fd00::77", src=link_local)).actions  # a global target is still asked
