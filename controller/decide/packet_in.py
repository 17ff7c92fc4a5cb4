"""What to do with a packet the switches sent up: learn its sender, answer ARP, deliver IPv6 neighbour
discovery, never flood the fabric, and never let one host take over another's address.

Only ARP, IPv6 neighbour discovery, and IPv4 or IPv6 toward not-yet-known hosts reach the controller (see
forwarding.base_rules). ARP requests for known hosts are answered by the controller itself; requests for unknown
hosts go out on host-facing ports only, once per (sender, target) per ``flood_hold_s`` (so a copy that loops back
through a port LLDP has not classified yet is ignored instead of re-flooded). A neighbour solicitation is ARP's
request: one for a known address is delivered to its owner, who answers itself (the answer is unicast IPv6 the
fabric forwards); one for an unknown address goes out on host-facing ports as ARP does. Duplicate-address
detection (a solicitation from ``::``) is delivered to the owner too, and the owner's defence (an advertisement
to all nodes) to the prober alone; any other advertisement to all nodes goes nowhere (a forged one poisons no
cache). Router advertisements and DHCPv6 are ordinary IPv6 here: their sender is learned as any sender is, and
they move nobody. Link-local addresses (fe80::/10) are never learned nor asked for: their scope is one link,
a host talks across the fabric from its global addresses, and each would cost an entry on every switch. The
answer is plain data; the shell turns it into packet-outs.

No hijack (docs/architecture.md, "Threat model"): a packet whose sender contradicts a live binding (a gratuitous
ARP or a forged IPv4 source claiming a bound address) is neither learned, answered nor forwarded. The handler
sends an ARP probe to the old location and records a pending move; any packet from the old binding (its probe
answer) refuses the claim, and only when nothing came back within ``probe_timeout_s`` (checked by later calls
with the injected clock: ``handle`` or ``tick``) does the binding move.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from controller.desired.forwarding import solicited_node
from controller.desired.rules import ETH_ARP, ETH_IPV4, ETH_IPV6, ND_ADVERT, ND_SOLICIT, PROTO_ICMPV6
from controller.state.budget import TokenBucket
from controller.state.flowkey import is_ipv6, is_link_local
from controller.state.topology import CONFLICT, LEARNED, LIMITED, UNKNOWN_MAC, Host, Topology

ARP_REQUEST = 1
ARP_REPLY = 2
PROBE_MAC = "02:6d:6c:00:00:01"  # locally administered: the controller's probes (answers come back as packet-ins)
PROBE_TIMEOUT_S = 1.0
PROBE_RETRIES = 3  # probes per pending move, spread over the timeout (one lost probe must not move a host)
REFUSAL_HOLD_S = 10.0  # a refused claim is not probed (nor reported) again for this long
DAD_WAIT_S = 2.0  # a duplicate-address probe waits this long for the owner's defence (RFC 4862: 1 s, one probe)


@dataclass(frozen=True)
class PacketIn:
    dpid: int
    in_port: int
    eth_src: str
    eth_dst: str
    eth_type: int
    arp_op: int = 0
    src_ip: str = ""  # ARP sender protocol address, or IP source ("" for IPv6's unspecified ::)
    dst_ip: str = ""  # ARP target protocol address, or IP destination
    nd_type: int = 0  # an IPv6 neighbour solicitation or advertisement (rules.ND_SOLICIT / ND_ADVERT), else 0
    nd_target: str = ""  # its target address


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


@dataclass(frozen=True)
class _BindingProbe:
    """Send ``frame`` out of (dpid, port), to the binding of ``ip`` at ``mac`` there: is the host still there?"""

    dpid: int
    port: int
    ip: str
    mac: str


@dataclass(frozen=True)
class ArpProbe(_BindingProbe):
    """An ARP request for ``ip``, unicast to ``mac``, sender address 0.0.0.0 as in RFC 5227, so the asked host's
    ARP cache is not touched."""

    @property
    def frame(self) -> bytes:
        dst = _mac_bytes(self.mac) if self.mac != UNKNOWN_MAC else b"\xff" * 6  # recovered: MAC not known yet
        src = _mac_bytes(PROBE_MAC)
        arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_IPV4, 6, 4, ARP_REQUEST, src, bytes(4), bytes(6),
                          ipaddress.IPv4Address(self.ip).packed)
        return (dst + src + struct.pack("!H", ETH_ARP) + arp).ljust(60, b"\0")  # minimum Ethernet frame


@dataclass(frozen=True)
class NdProbe(_BindingProbe):
    """ARP's probe for an IPv6 binding: a duplicate-address solicitation for ``ip`` (source ``::``, RFC 4862, so
    no cache is touched), to the solicited-node group but unicast to ``mac``. The owner defends its address with
    an advertisement to all nodes, which comes back as a packet-in."""

    @property
    def frame(self) -> bytes:
        target = ipaddress.IPv6Address(self.ip).packed
        group = ipaddress.IPv6Address(solicited_node(self.ip)).packed
        dst = _mac_bytes(self.mac) if self.mac != UNKNOWN_MAC else b"\x33\x33" + group[12:]
        icmp = struct.pack("!BBHI16s", ND_SOLICIT, 0, 0, 0, target)
        unspecified = bytes(16)
        pseudo = unspecified + group + struct.pack("!I3xB", len(icmp), PROTO_ICMPV6)
        icmp = icmp[:2] + struct.pack("!H", _checksum(pseudo + icmp)) + icmp[4:]
        ip = struct.pack("!IHBB16s16s", 0x60000000, len(icmp), PROTO_ICMPV6, 255, unspecified, group)
        return dst + _mac_bytes(PROBE_MAC) + struct.pack("!H", ETH_IPV6) + ip + icmp


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071), as ICMPv6 computes it over its pseudo-header and message."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass(frozen=True)
class Refused:
    """A claim refused: ``claim`` contradicted ``holders``, which are still there (``reason`` says how we know)."""

    claim: Host
    holders: tuple[Host, ...]
    reason: str


@dataclass(frozen=True)
class Limited:
    """A new address refused by the learning limits: ``why`` is "port" or "total" (caps) or "rate" (new
    addresses per second at the port)."""

    claim: Host
    why: str


Probe = ArpProbe | NdProbe
Action = ArpReply | Forward | Probe  # what the handler asks the shell to send


def probe(host: Host) -> Probe:
    """Is the bound host still there? ARP's probe for an IPv4 binding, neighbour discovery's for an IPv6 one."""
    return (NdProbe if is_ipv6(host.ip) else ArpProbe)(host.dpid, host.port, host.ip, host.mac)


@dataclass
class Decision:
    learned: bool = False  # the packet's sender was learned or moved: the forwarding plan must be recomputed
    actions: list[Action] = field(default_factory=list)
    moved: list[Host] = field(default_factory=list)  # Hosts whose pending move was confirmed (probe unanswered)
    refused: list[Refused] = field(default_factory=list)  # Refused claims, reported once per REFUSAL_HOLD_S: log them
    limited: list[Limited] = field(default_factory=list)  # new addresses past the learning limits: count them
    forgotten: list[Host] = field(default_factory=list)  # Hosts aged out (silent, probes unanswered)

    @property
    def changed(self) -> bool:
        """Hosts changed: the forwarding plan must be recomputed."""
        return self.learned or bool(self.moved) or bool(self.forgotten)


@dataclass
class _Pending:
    claim: Host
    holders: tuple[Host, ...]
    since: float
    last_probe: float
    probes: int = 1


def _mac_bytes(mac: str) -> bytes:
    return bytes(int(part, 16) for part in mac.split(":"))


class PacketInHandler:
    def __init__(self, topology: Topology, clock: Callable[[], float], flood_hold_s: float = 1.0,
                 probe_timeout_s: float = PROBE_TIMEOUT_S, refusal_hold_s: float = REFUSAL_HOLD_S,
                 new_hosts_per_s: float = 5.0, new_hosts_burst: int = 64) -> None:
        self.topology = topology
        self.clock = clock
        self.new_hosts_per_s, self.new_hosts_burst = new_hosts_per_s, new_hosts_burst
        self._new_hosts: dict[tuple[int, int], TokenBucket] = {}  # (dpid, port) -> new addresses learned there
        self.flood_hold_s = flood_hold_s
        self.probe_timeout_s = probe_timeout_s
        self.refusal_hold_s = refusal_hold_s
        self._recent_floods: dict[tuple[str, str], float] = {}  # (src_ip, dst_ip) -> time
        self.pending: dict[str, _Pending] = {}  # claimed ip -> _Pending (one pending move per address at a time)
        self._refused: dict[tuple[str, str, int, int], float] = {}  # (ip, mac, dpid, port) of a refused claim -> time
        self._dad: dict[str, dict[tuple[int, int], float]] = {}  # probed address -> {prober's (dpid, port): time}

    def handle(self, pkt: PacketIn) -> Decision:
        decision = self.tick()
        topo = self.topology
        if topo.is_fabric_port(pkt.dpid, pkt.in_port):
            return decision  # never learn from or react to fabric copies
        if pkt.src_ip and pkt.src_ip != "0.0.0.0" and not is_link_local(pkt.src_ip):
            claim = Host(pkt.src_ip, pkt.eth_src, pkt.dpid, pkt.in_port)
            self._heard_from(claim, decision)
            if pkt.src_ip not in topo.hosts and not self._new_host_allowed(pkt.dpid, pkt.in_port):
                decision.limited.append(Limited(claim, "rate"))
                return decision  # like a claim we do not believe: not answered, flooded or forwarded
            verdict = topo.claim(*_fields(claim))
            if verdict.verdict == LIMITED:
                decision.limited.append(Limited(claim, topo.full_at(pkt.dpid, pkt.in_port) or "total"))
                return decision
            if verdict.verdict == CONFLICT:
                self._conflict(claim, verdict.holders, decision)
                return decision  # a claim we do not believe is not answered, flooded or forwarded
            decision.learned = verdict.verdict == LEARNED
        if pkt.eth_type == ETH_ARP:
            self._arp(pkt, decision)
        elif pkt.nd_type:
            self._nd(pkt, decision)
        elif pkt.eth_type in (ETH_IPV4, ETH_IPV6):
            target = topo.hosts.get(pkt.dst_ip)
            if target is not None and (target.dpid, target.port) != (pkt.dpid, pkt.in_port):
                decision.actions.append(Forward(target.dpid, target.port))  # first packet before rules land
        return decision

    def _new_host_allowed(self, dpid: int, port: int) -> bool:
        """A new address at an access port spends one of the port's tokens (``new_hosts_per_s``, a burst of
        ``new_hosts_burst``): a host cannot claim thousands of addresses a second."""
        if not self.topology.learnable(dpid, port):
            return True  # not learnable anyway (the topology ignores it): nothing to spend
        bucket = self._new_hosts.get((dpid, port))
        if bucket is None:
            bucket = self._new_hosts[(dpid, port)] = TokenBucket(self.new_hosts_per_s, self.new_hosts_burst,
                                                                 self.clock)
        return bucket.take()

    def tick(self) -> Decision:
        """Settle pending moves by the clock: confirmed when no answer came within the timeout (then the forwarding
        plan changes: ``Decision.moved``), probed again meanwhile. Call it periodically, too."""
        decision = Decision()
        now = self.clock()
        for ip, p in list(self.pending.items()):
            if now - p.since >= self.probe_timeout_s:
                del self.pending[ip]
                if all(self.topology.hosts.get(h.ip) in (h, None) for h in p.holders) \
                        and self.topology.move_host(p.claim, p.holders):
                    decision.moved.append(p.claim)
            elif p.probes < PROBE_RETRIES and now - p.last_probe >= self.probe_timeout_s / PROBE_RETRIES:
                p.probes += 1
                p.last_probe = now
                decision.actions.extend(self._probes(p.holders))
        return decision

    def _heard_from(self, sender: Host, decision: Decision) -> None:
        """A packet from a binding some pending claim contradicts: that binding is alive, the claim is refused."""
        for ip, p in list(self.pending.items()):
            if any(_answers_for(sender, h) for h in p.holders):
                del self.pending[ip]
                self._refuse(p.claim, p.holders, "the bound host answered from its port", decision)

    def _conflict(self, claim: Host, holders: tuple[Host, ...], decision: Decision) -> None:
        now = self.clock()
        self._refused = {k: t for k, t in self._refused.items() if now - t < self.refusal_hold_s}
        if _fields(claim) in self._refused:
            return  # refused a moment ago: no new probe, no new report
        pending = self.pending.get(claim.ip)
        if pending is not None:
            if pending.claim != claim:  # another claimant while one is being checked
                self._refuse(claim, holders, "another claim for this address is being checked", decision)
            return
        unreachable = [h for h in holders if h.dpid not in self.topology.ports]
        if unreachable:
            self._refuse(claim, holders, "the bound host's switch is disconnected: it cannot be probed", decision)
            return
        self.pending[claim.ip] = _Pending(claim, holders, now, now)
        decision.actions.extend(self._probes(holders))

    def _refuse(self, claim: Host, holders: tuple[Host, ...], reason: str, decision: Decision) -> None:
        self._refused[_fields(claim)] = self.clock()
        decision.refused.append(Refused(claim, holders, reason))

    @staticmethod
    def _probes(holders: Iterable[Host]) -> list[Probe]:
        return [probe(h) for h in holders]

    def _flood_to_hosts(self, pkt: PacketIn, target: str, decision: Decision) -> None:
        """Ask every host port but the asker's, once per (sender, target) per ``flood_hold_s``."""
        now = self.clock()
        key = (pkt.src_ip, target)
        if now - self._recent_floods.get(key, -1e18) < self.flood_hold_s:
            return
        self._recent_floods = {k: t for k, t in self._recent_floods.items() if now - t < self.flood_hold_s}
        self._recent_floods[key] = now
        topo = self.topology
        for dpid in sorted(topo.ports):
            for port in sorted(topo.access_ports(dpid)):
                if (dpid, port) != (pkt.dpid, pkt.in_port):
                    decision.actions.append(Forward(dpid, port))

    def _nd(self, pkt: PacketIn, decision: Decision) -> None:
        """IPv6 neighbour discovery (see the module docstring): ARP's cases, delivered instead of answered."""
        owner = self.topology.hosts.get(pkt.nd_target)
        here = (pkt.dpid, pkt.in_port)
        if pkt.nd_type == ND_SOLICIT:
            if owner is not None:
                if owner.location != here:
                    decision.actions.append(Forward(owner.dpid, owner.port))
                if not pkt.src_ip:  # duplicate-address detection: the prober waits for the owner's defence
                    now = self.clock()
                    waiting = self._dad.setdefault(owner.ip, {})
                    waiting[here] = now
                    self._dad = {ip: w for ip, w in self._dad.items()
                                 if any(now - t < DAD_WAIT_S for t in w.values())}
            elif pkt.src_ip and not is_link_local(pkt.nd_target):  # (a probe for a free address: nobody is
                self._flood_to_hosts(pkt, pkt.nd_target, decision)  # there to defend it; a link-local: no one's)
        elif pkt.nd_type == ND_ADVERT:
            if owner is None or owner.location != here or pkt.src_ip != owner.ip:
                return  # only an owner's advertisement of its own address goes anywhere
            asker = self.topology.hosts.get(pkt.dst_ip)
            if asker is not None:
                if asker.location != here:
                    decision.actions.append(Forward(asker.dpid, asker.port))
                return
            now = self.clock()
            for (dpid, port), t in sorted(self._dad.pop(owner.ip, {}).items()):  # a defence to all nodes
                if now - t < DAD_WAIT_S and (dpid, port) != here:
                    decision.actions.append(Forward(dpid, port))

    def _arp(self, pkt: PacketIn, decision: Decision) -> None:
        topo = self.topology
        target = topo.hosts.get(pkt.dst_ip)
        if pkt.arp_op == ARP_REQUEST:
            if pkt.src_ip == pkt.dst_ip:
                return  # gratuitous ARP: learning was all it was good for
            if target is not None and not target.mac:  # recovered after a restart: let the host answer itself
                decision.actions.append(Forward(target.dpid, target.port))
                return
            if target is not None:
                decision.actions.append(ArpReply(pkt.dpid, pkt.in_port, target.ip, target.mac, pkt.src_ip, pkt.eth_src))
                return
            self._flood_to_hosts(pkt, pkt.dst_ip, decision)
        elif pkt.arp_op == ARP_REPLY:
            if pkt.eth_dst == PROBE_MAC:
                return  # the answer to our probe: hearing it was all it was good for
            asker = topo.hosts.get(pkt.dst_ip) or topo.host_by_mac(pkt.eth_dst)
            if asker is not None and (asker.dpid, asker.port) != (pkt.dpid, pkt.in_port):
                decision.actions.append(Forward(asker.dpid, asker.port))


def _answers_for(sender: Host, holder: Host) -> bool:
    """``sender`` is the binding ``holder`` (a binding recovered after a restart has no MAC yet)."""
    return (sender.ip, sender.location) == (holder.ip, holder.location) and holder.mac in (sender.mac, UNKNOWN_MAC)


def _fields(host: Host) -> tuple[str, str, int, int]:
    return (host.ip, host.mac, host.dpid, host.port)
