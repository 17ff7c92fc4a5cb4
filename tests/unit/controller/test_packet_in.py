from controller.packet_in import ARP_REPLY, ARP_REQUEST, ArpReply, Forward, PacketIn, PacketInHandler
from controller.rules import ETH_ARP, ETH_IPV4
from tests import topologies


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


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
    fabric = {(l.src, l.src_port) for l in topo.live_links()}
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
