"""What to do with a packet the switches sent up: learn its sender, answer ARP, never flood the fabric.

Only ARP and IPv4 toward not-yet-known hosts reach the controller (see forwarding.base_rules). ARP requests for
known hosts are answered by the controller itself; requests for unknown hosts go out on host-facing ports only,
once per (sender, target) per ``flood_hold_s`` (so a copy that loops back through a port LLDP has not classified
yet is ignored instead of re-flooded). The answer is plain data; app.py turns it into packet-outs.
"""

from dataclasses import dataclass, field

from controller.rules import ETH_ARP, ETH_IPV4

ARP_REQUEST = 1
ARP_REPLY = 2


@dataclass(frozen=True)
class PacketIn:
    dpid: int
    in_port: int
    eth_src: str
    eth_dst: str
    eth_type: int
    arp_op: int = 0
    src_ip: str = ""  # ARP sender protocol address, or IPv4 source
    dst_ip: str = ""  # ARP target protocol address, or IPv4 destination


@dataclass(frozen=True)
class ArpReply:
    """Send an ARP reply saying ``ip`` is at ``mac`` to the asker."""

    dpid: int
    port: int
    ip: str
    mac: str
    to_ip: str
    to_mac: str


@dataclass(frozen=True)
class Forward:
    """Send the original packet out of (dpid, port)."""

    dpid: int
    port: int


@dataclass
class Decision:
    learned: bool = False  # a host was learned or moved: the forwarding plan must be recomputed
    actions: list = field(default_factory=list)


class PacketInHandler:
    def __init__(self, topology, clock, flood_hold_s=1.0):
        self.topology = topology
        self.clock = clock
        self.flood_hold_s = flood_hold_s
        self._recent_floods = {}  # (src_ip, dst_ip) -> time

    def handle(self, pkt):
        decision = Decision()
        topo = self.topology
        if topo.is_fabric_port(pkt.dpid, pkt.in_port):
            return decision  # never learn from or react to fabric copies
        if pkt.src_ip and pkt.src_ip != "0.0.0.0":
            decision.learned = topo.learn_host(pkt.src_ip, pkt.eth_src, pkt.dpid, pkt.in_port)
        if pkt.eth_type == ETH_ARP:
            self._arp(pkt, decision)
        elif pkt.eth_type == ETH_IPV4:
            target = topo.hosts.get(pkt.dst_ip)
            if target is not None and (target.dpid, target.port) != (pkt.dpid, pkt.in_port):
                decision.actions.append(Forward(target.dpid, target.port))  # first packet before rules land
        return decision

    def _arp(self, pkt, decision):
        topo = self.topology
        target = topo.hosts.get(pkt.dst_ip)
        if pkt.arp_op == ARP_REQUEST:
            if pkt.src_ip == pkt.dst_ip:
                return  # gratuitous ARP: learning was all it was good for
            if target is not None:
                decision.actions.append(ArpReply(pkt.dpid, pkt.in_port, target.ip, target.mac, pkt.src_ip, pkt.eth_src))
                return
            now = self.clock()
            key = (pkt.src_ip, pkt.dst_ip)
            if now - self._recent_floods.get(key, -1e18) < self.flood_hold_s:
                return
            self._recent_floods = {k: t for k, t in self._recent_floods.items() if now - t < self.flood_hold_s}
            self._recent_floods[key] = now
            for dpid in sorted(topo.ports):
                for port in sorted(topo.access_ports(dpid)):
                    if (dpid, port) != (pkt.dpid, pkt.in_port):
                        decision.actions.append(Forward(dpid, port))
        elif pkt.arp_op == ARP_REPLY:
            asker = topo.hosts.get(pkt.dst_ip) or topo.host_by_mac(pkt.eth_dst)
            if asker is not None and (asker.dpid, asker.port) != (pkt.dpid, pkt.in_port):
                decision.actions.append(Forward(asker.dpid, asker.port))
