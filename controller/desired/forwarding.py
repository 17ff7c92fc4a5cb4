"""The forwarding baseline: which rules every switch holds so that any known host reaches any other.

Destination-based, over the shortest-path DAG toward each host's switch: a switch forwards to every neighbour
one hop closer (a SELECT group when there are several: ECMP up the Clos; a single output on the way down).
Distances strictly decrease along every path, so forwarding is loop-free on any graph, Clos or not, and it is
recomputed from live links after every failure. ARP and IPv6 neighbour discovery go to the controller (which
answers or delivers for known hosts and never floods on fabric links), and IPv4 or IPv6 toward an unknown host
goes to the controller.

On a recognised Clos (every switch has a tier level) the table is *compact* (Al-Fares et al., SIGCOMM'08:
prefixes down, a default up), with the very same next hops per (switch, known host):

* a host-facing switch holds an exact entry per own host, and per port with a bound host one default (in_port
  only, below the host entries) toward its most common next hops (the upward SELECT group, staggered as ever);
* every other known host whose next hops differ from that default (a failure), or that can reach the switch
  from a fabric port (the switch is transit for it), and every known host on the other switches, is covered by
  the *maximal uniform prefixes*: IPv4 prefixes (and the same ``arp_tpa`` masks) holding known hosts of one set
  of next hops only, longest prefix first by priority; unknown addresses are don't-cares. No other switch has a
  default.

Unknown addresses cannot loop: a default matches only packets from a host port (the first hop), and every
other entry is a prefix holding a known host whose next hops it uses. Prefixes holding one address are nested,
so along any cycle the smallest prefix used holds a host h inside every other one used, and each hop of the
cycle gets one hop closer to h's switch: impossible. An unknown address ends in the IPv4 miss (a packet-in the
controller ignores when it comes from a fabric port) or is dropped. Off a Clos, per-host entries as before.

IPv6 is compacted the same way in its own table (the same walk over 128-bit addresses: masked ``ipv6_dst``
prefixes at 100 + length, a switch's own hosts exact at 228), with no default (the IPv6 miss at priority 6 sits
above the host-port default): every known IPv6 host is covered at every switch that reaches it, and an unknown
IPv6 address either meets no entry (the IPv6 miss) or a prefix holding a known host, where the argument above
holds. No prefix reaches into ff00::/8 (such a range is split further), so multicast, solicitations included,
never follows one. A solicitation keeps an exact entry per IPv6 host (its solicited-node group and target, at
priority 10): ``ipv6_nd_target`` cannot be masked in OpenFlow 1.3, and a masked solicited-node group names only
the target's low 24 bits, which hosts behind different prefixes may share. IPv4 and IPv6 entries never overlap
(their ``eth_type`` differs).
"""

from __future__ import annotations

import ipaddress
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import networkx as nx

from controller.desired.rules import (
    ETH_ARP,
    ETH_IPV4,
    ETH_IPV6,
    ETH_LLDP,
    LLDP_MAC_NEAREST_BRIDGE,
    ND_ADVERT,
    ND_SOLICIT,
    NO_BUFFER,
    PRIO_ARP,
    PRIO_HOST,
    PRIO_IPV4_MISS,
    PRIO_IPV6_MISS,
    PRIO_LLDP,
    PRIO_ND,
    PRIO_ND_MISS,
    PRIO_TABLE_MISS,
    PROTO_ICMPV6,
    TABLE_CLASSIFY,
    TABLE_FORWARD,
    FlowRule,
    GroupRule,
    Match,
    SwitchRules,
    match,
)
from controller.state.flowkey import is_ipv6
from controller.state.topology import Host, Topology

PACKET_IN_BYTES = 128  # enough for Ethernet + ARP/IPv4 headers; the controller never needs payloads
MAX_STAGGERED_BUCKETS = 64  # OVS maps select groups of up to 64 buckets through its dp_hash table


def staggered_buckets(ports: Iterable[int], level: int) -> tuple[int, ...]:
    """Bucket list for a SELECT group at tier ``level`` (0 = host-facing), de-correlated from the tiers below.

    Switches that hash the same header fields the same way pick bucket ``hash mod n_buckets``; with plain
    groups, the edge and the aggregation switch then use the same hash digits and every flow an aggregation
    switch receives goes to the same core (hash polarisation). Listing each port n^level times in blocks makes
    tier ``level`` read the next base-n digit of the hash instead. Used when the bucket count stays small.
    """
    return _staggered(tuple(ports), level)


@lru_cache(maxsize=65536)  # a plan asks for the same few bucket lists once per (host, switch) pair
def _staggered(ports: tuple[int, ...], level: int) -> tuple[int, ...]:
    n = len(ports)
    reps = n ** level
    if level <= 0 or n * reps > MAX_STAGGERED_BUCKETS:
        return tuple(ports)
    return tuple(p for p in ports for _ in range(reps))


@lru_cache(maxsize=65536)
def _base_group_id(ports: tuple[int, ...]) -> int:
    return zlib.crc32(",".join(map(str, ports)).encode()) % 0x7FFF0000 + 1


def group_id_for(ports: Iterable[int], taken: Mapping[int, tuple[int, ...]]) -> int:
    """A stable group id for a bucket list (same list, same id across recomputations and restarts)."""
    ports = tuple(ports)
    gid = _base_group_id(ports)
    while gid in taken and taken[gid] != ports:
        gid = gid % 0x7FFF0000 + 1
    return gid


def nd_match(nd_type: int, **fields: Any) -> Match:
    """A match on one kind of IPv6 neighbour-discovery message (solicitation or advertisement)."""
    return match(eth_type=ETH_IPV6, ip_proto=PROTO_ICMPV6, icmpv6_type=nd_type, **fields)


def base_rules(dpid: int) -> list[FlowRule]:
    """Rules independent of topology: ARP and IPv6 neighbour discovery (its ARP: solicitations and
    advertisements) copied to the controller (learning, answers, asking for unknown hosts) and on to forwarding
    (where ARP or a solicitation for a known host follows that host's rules, and ND for no known host is
    dropped), the rest on to forwarding (where IPv4 or IPv6 toward an unknown host goes to the controller and
    anything else is dropped). LLDP goes to the controller by the very rule the topology app installs at
    connect (it replaces that one): as mlroute's own, it is read back, audited and repaired with the rest (a
    switch wiped while connected would otherwise lose its links to LLDP's timeout)."""
    to_controller = (("controller", PACKET_IN_BYTES),)
    copy = to_controller + (("goto", TABLE_FORWARD),)
    return [
        FlowRule(dpid, PRIO_LLDP, match(eth_dst=LLDP_MAC_NEAREST_BRIDGE, eth_type=ETH_LLDP),
                 (("controller", NO_BUFFER),), table=TABLE_CLASSIFY),
        FlowRule(dpid, PRIO_ARP, match(eth_type=ETH_ARP), copy, table=TABLE_CLASSIFY),
        *(FlowRule(dpid, PRIO_ND, nd_match(t), copy, table=TABLE_CLASSIFY) for t in (ND_SOLICIT, ND_ADVERT)),
        FlowRule(dpid, PRIO_TABLE_MISS, match(), (("goto", TABLE_FORWARD),), table=TABLE_CLASSIFY),
        FlowRule(dpid, PRIO_IPV4_MISS, match(eth_type=ETH_IPV4), to_controller, table=TABLE_FORWARD),
        *(FlowRule(dpid, PRIO_ND_MISS, nd_match(t), (), table=TABLE_FORWARD) for t in (ND_SOLICIT, ND_ADVERT)),
        FlowRule(dpid, PRIO_IPV6_MISS, match(eth_type=ETH_IPV6), to_controller, table=TABLE_FORWARD),
    ]


def next_hop_ports(graph: nx.Graph, dst_switch: int) -> dict[int, tuple[int, ...]]:
    """For every switch, the ports toward neighbours one hop closer to ``dst_switch`` (shortest-path DAG)."""
    if dst_switch not in graph:
        return {}
    dist = nx.single_source_shortest_path_length(graph, dst_switch)
    adj = graph.adj
    hops: dict[int, tuple[int, ...]] = {}
    for s, d in dist.items():
        if s == dst_switch:
            continue
        hops[s] = tuple(sorted(attrs["ports"][s] for n, attrs in adj[s].items() if dist.get(n) == d - 1))
    return hops


PRIO_ARP_FABRIC = PRIO_ARP + 1  # above the ARP copy: ARP that crossed a fabric link was copied at its ingress
PRIO_IPV6_FABRIC = PRIO_ND + 1  # above the ND copies: the same for IPv6 neighbour discovery


def fabric_arp_rule(dpid: int, port: int) -> FlowRule:
    """ARP arriving over a fabric link goes on without another copy to the controller: it was copied where it
    entered the fabric, and one ARP must not cost a packet-in per hop."""
    return FlowRule(dpid, PRIO_ARP_FABRIC, match(in_port=port, eth_type=ETH_ARP), (("goto", TABLE_FORWARD),),
                    table=TABLE_CLASSIFY)


def fabric_port_rules(dpid: int, port: int) -> tuple[FlowRule, FlowRule]:
    """A fabric port's rules: its ARP (``fabric_arp_rule``) and its ICMPv6, neighbour discovery included, on to
    forwarding without another copy (one rule for all of ICMPv6; IPv6 TCP and UDP must still meet the pinned
    elephants' entries of table 0 below it)."""
    return (fabric_arp_rule(dpid, port),
            FlowRule(dpid, PRIO_IPV6_FABRIC, match(in_port=port, eth_type=ETH_IPV6, ip_proto=PROTO_ICMPV6),
                     (("goto", TABLE_FORWARD),), table=TABLE_CLASSIFY))


@lru_cache(maxsize=1 << 16)
def solicited_node(ip: str) -> str:
    """The multicast group a solicitation for ``ip`` is sent to (RFC 4291 2.7.1: ff02::1:ff + its low 24 bits).
    A host's solicitation entry names it, so it never overlaps another host's IPv6 entry (a unicast
    solicitation, to its target itself, takes the target's IPv6 entry: the same way)."""
    low = int(ipaddress.IPv6Address(ip)) & 0xFFFFFF
    return ipaddress.IPv6Address(int(ipaddress.IPv6Address("ff02::1:ff00:0")) | low).compressed


def host_matches(ip: str) -> tuple[Match, Match]:
    """The table-1 matches that forward toward host ``ip``: its IPv4 and ARP for it (ARP takes the same way as
    its IPv4, so ARP keeps working while the controller is away); for an IPv6 host, its IPv6 and neighbour
    solicitations for it, likewise."""
    if is_ipv6(ip):
        return (match(eth_type=ETH_IPV6, ipv6_dst=ip),
                nd_match(ND_SOLICIT, ipv6_dst=solicited_node(ip), ipv6_nd_target=ip))
    return (match(eth_type=ETH_IPV4, ipv4_dst=ip), match(eth_type=ETH_ARP, arp_tpa=ip))


def plan(topology: Topology, levels: Mapping[int, int] | None = None, stagger: bool = True,
         graph: nx.Graph | None = None) -> dict[int, SwitchRules]:
    """Desired rules for every connected switch: dict dpid -> SwitchRules.

    ``levels`` (dpid -> tier level, 0 = host-facing) enables staggered ECMP buckets against hash polarisation;
    given for every switch of the graph (a recognised Clos), the table is compact (``compact_plan``), else
    per host (``per_host_plan``). ``graph`` is ``topology.graph()`` when the caller already has it.
    """
    levels = levels or {}
    graph = graph if graph is not None else topology.graph()
    if is_clos_levels(levels, graph.nodes):
        return compact_plan(topology, levels, stagger, graph)
    return per_host_plan(topology, levels, stagger, graph)


def is_clos_levels(levels: Mapping[int, int], switches: Iterable[int]) -> bool:
    """Tier levels known for every switch: only then is forwarding compacted (tiers.py names a Clos)."""
    return bool(levels) and all(s in levels for s in switches)


def _base_tables(topology: Topology, graph: nx.Graph) -> dict[int, SwitchRules]:
    desired = {dpid: SwitchRules() for dpid in topology.ports}
    for dpid, rules in desired.items():
        for rule in base_rules(dpid):
            rules.add_flow(rule)
        if dpid in graph:
            for nbr in graph.adj[dpid]:
                for rule in fabric_port_rules(dpid, graph.edges[dpid, nbr]["ports"][dpid]):
                    rules.add_flow(rule)
    return desired


def per_host_plan(topology: Topology, levels: Mapping[int, int], stagger: bool,
                  graph: nx.Graph) -> dict[int, SwitchRules]:
    """Two entries (IPv4 and ARP, or IPv6 and ND) per known host on every switch that reaches it: the plan off
    a Clos (and the reference the benchmark compares the compact one with)."""
    desired = _base_tables(topology, graph)
    groups = _Groups(desired, levels, stagger)
    add_host_entries(desired, topology.hosts.values(), graph, groups)
    return desired


class _Groups:
    """Each switch's SELECT groups as a plan adds them: bucket list -> group id and back, kept as groups are
    added (building ``taken`` afresh for every (host, switch) pair made the plan quadratic in groups x hosts)."""

    def __init__(self, desired: Mapping[int, SwitchRules], levels: Mapping[int, int], stagger: bool) -> None:
        self.desired, self.levels, self.stagger = desired, levels, stagger
        self.gids: dict[int, dict[tuple[int, ...], int]] = {dpid: {} for dpid in desired}
        self.taken: dict[int, dict[int, tuple[int, ...]]] = {dpid: {} for dpid in desired}

    def actions(self, dpid: int, ports: tuple[int, ...]) -> tuple:
        """Output to the one port, or to the (staggered) group over several."""
        if len(ports) == 1:
            return (("output", ports[0]),)
        buckets = staggered_buckets(ports, self.levels.get(dpid, 0) if self.stagger else 0)
        gid = self.gids[dpid].get(buckets)
        if gid is None:  # a bucket list new on this switch; a known one keeps its id (same probe)
            gid = self.gids[dpid][buckets] = group_id_for(buckets, self.taken[dpid])
            self.taken[dpid][gid] = buckets
            self.desired[dpid].add_group(GroupRule(dpid, gid, buckets))
        return (("group", gid),)


def exact_matches(ip: str, compact: bool) -> tuple[Match, ...]:
    """The per-host entries host ``ip`` keeps: all its ``host_matches`` off a Clos; on a Clos (where prefixes
    cover the rest) only an IPv6 host's solicitation entry, since ``ipv6_nd_target`` cannot be masked."""
    if not compact:
        return host_matches(ip)
    return host_matches(ip)[1:] if is_ipv6(ip) else ()


def add_host_entries(desired: Mapping[int, SwitchRules], hosts: Iterable[Host], graph: nx.Graph,
                     groups: _Groups, compact: bool = False) -> None:
    """Each host's exact entries (``exact_matches``) on its own switch and on every switch that reaches it."""
    hops_cache: dict[int, dict[int, tuple[int, ...]]] = {}
    for host in hosts:
        if host.dpid not in desired:
            continue
        matches = exact_matches(host.ip, compact)
        for m in matches:
            desired[host.dpid].add_flow(FlowRule(host.dpid, PRIO_HOST, m, (("output", host.port),)))
        if host.dpid not in hops_cache:
            hops_cache[host.dpid] = next_hop_ports(graph, host.dpid)
        for dpid, ports in hops_cache[host.dpid].items():
            if ports:
                actions = groups.actions(dpid, ports)
                for m in matches:
                    desired[dpid].add_flow(FlowRule(dpid, PRIO_HOST, m, actions))


# -- compact forwarding (a recognised Clos) ------------------------------------------------------------------
PRIO_UP_DEFAULT = 5  # table 1: from a host port, toward the switch's most common next hops (below host entries)
PRIO_PREFIX = 100  # table 1: a compact prefix /n at PRIO_PREFIX + n: longest prefix first, as a router
PRIO_EXACT = PRIO_PREFIX + 32  # an exact (/32) compact entry, a switch's own host included
PRIO_EXACT_V6 = PRIO_PREFIX + 128  # the same for IPv6 (/128)


def prefix_priority(plen: int) -> int:
    """Longer prefixes above shorter ones: entries of one plan are disjoint, but while one plan replaces another
    (make-before-break, additions only during recovery) old and new entries overlap, and the more specific
    one, planned with more hosts in view or agreeing with the newer plan on its hosts, must win."""
    return PRIO_PREFIX + plen
LOCAL = "local"  # label of a switch's own hosts' runs: always exact entries (recovery binds hosts by them)


@dataclass(frozen=True)
class Own:
    """An exact entry's label: one of the switch's own hosts, at this port."""

    port: int
MISS = "miss"  # a known host a host-facing switch cannot reach: what the IPv4 miss does, above the default
Label = tuple[int, ...] | None  # a switch's next-hop ports toward a host (None: no way there)


@lru_cache(maxsize=1 << 17)
def ip_int(ip: str) -> int:
    """An IPv4 or IPv6 address as an integer (each family is compacted in its own table)."""
    return int(ipaddress.ip_address(ip))


@lru_cache(maxsize=1 << 16)
def prefix_value(value: int, plen: int, width: int = 32) -> str | tuple[str, str]:
    """A prefix (``width`` 32: IPv4, 128: IPv6) as a match value: the address alone at full length, else
    (address, mask), both in the compressed form Ryu reads them back in."""
    address = ipaddress.IPv6Address if width == 128 else ipaddress.IPv4Address
    if plen == width:
        return address(value).compressed
    full = (1 << width) - 1
    return address(value).compressed, address((full << (width - plen)) & full).compressed


def prefix_matches(value: int, plen: int, width: int = 32) -> tuple[Match, ...]:
    """The table-1 matches of one prefix: IPv4 destination and ARP target, or (``width`` 128) the IPv6
    destination alone (solicitations keep exact entries: ``exact_matches``); /32 is ``host_matches``."""
    v = prefix_value(value, plen, width)
    if width == 128:
        return (match(eth_type=ETH_IPV6, ipv6_dst=v),)
    return (match(eth_type=ETH_IPV4, ipv4_dst=v), match(eth_type=ETH_ARP, arp_tpa=v))


def _holds_multicast(value: int, plen: int, width: int) -> bool:
    """Whether an IPv6 prefix reaches into ff00::/8 (multicast, solicitations included): never emitted, or a
    solicitation would follow a prefix above its target's exact entry."""
    return width == 128 and plen <= 8 and value >> (128 - plen) == 0xFF >> (8 - plen)


@dataclass(frozen=True)
class Addresses:
    """The known hosts in address order, cut into runs of consecutive addresses behind one switch (a compact
    table is computed per run, not per host: a fat-tree's runs are its edges)."""

    ips: tuple[int, ...]
    hosts: tuple[Host, ...]
    run_of: tuple[int, ...]  # host index -> run index
    run_start: tuple[int, ...]  # run index -> first host index (and len(hosts) at the end)
    run_dpid: tuple[int, ...]  # run index -> the switch its hosts are on
    width: int = 32  # address bits: 32 (IPv4) or 128 (IPv6)

    @classmethod
    def of(cls, hosts: Iterable[Host], width: int = 32) -> Addresses:
        ordered = sorted(((ip_int(h.ip), h) for h in hosts), key=lambda x: x[0])
        run_of: list[int] = []
        run_start: list[int] = []
        run_dpid: list[int] = []
        for i, (_, h) in enumerate(ordered):
            if not run_dpid or run_dpid[-1] != h.dpid:
                run_start.append(i)
                run_dpid.append(h.dpid)
            run_of.append(len(run_dpid) - 1)
        run_start.append(len(ordered))
        return cls(tuple(x[0] for x in ordered), tuple(x[1] for x in ordered), tuple(run_of), tuple(run_start),
                   tuple(run_dpid), width)


@dataclass(frozen=True)
class CompactTable:
    """One switch's compact forwarding: (prefix value, prefix length, label) per entry in address order, the
    default's label (host-facing switches) and the host ports it is installed for."""

    entries: tuple[tuple[int, int, Any], ...]
    default: Label
    default_ports: tuple[int, ...]
    width: int = 32

    def covering(self, ip: int) -> tuple[int, int, Any] | None:
        """The entry whose prefix holds ``ip``, if any (entries are disjoint)."""
        i = bisect_right(self.entries, (ip, self.width + 1)) - 1
        if i >= 0:
            value, plen, label = self.entries[i]
            if ip >> (self.width - plen) == value >> (self.width - plen):
                return self.entries[i]
        return None


def _common_default(addresses: Addresses, labels: Sequence[Any]) -> Label:
    """The label of most of the hosts that are not the switch's own (ties: the largest label)."""
    count: dict[Label, int] = {}
    for r, label in enumerate(labels):
        if label is not LOCAL:
            count[label] = count.get(label, 0) + addresses.run_start[r + 1] - addresses.run_start[r]
    if not count:
        return None
    return max(count, key=lambda lab: (count[lab], lab is not None, lab or ()))


def compact_table(addresses: Addresses, dpid: int, hops_toward: Callable[[int], Label], bottom: bool,
                  transit: Callable[[int], bool], fabric_ports: Iterable[int] = ()) -> CompactTable:
    """Switch ``dpid``'s compact table. ``hops_toward(d)``: its next-hop ports toward switch ``d``'s hosts
    (None: no way); ``bottom``: a host-facing switch (it gets the host-port default); ``transit(d)``: whether
    traffic toward ``d`` can reach it over a fabric link (a neighbour one hop farther from ``d``): such hosts
    need entries even where the default would do, since the default serves host ports only. The addresses'
    width (IPv4 or IPv6) is the table's."""
    ips, run_of, run_dpid, width = addresses.ips, addresses.run_of, addresses.run_dpid, addresses.width
    labels = [LOCAL if d == dpid else hops_toward(d) for d in run_dpid]
    default = _common_default(addresses, labels) if bottom else None
    bounds = [r for r in range(1, len(labels)) if labels[r] != labels[r - 1]]
    entries: list[tuple[int, int, Any]] = []

    def emit(value: int, plen: int, lo: int, hi: int) -> None:
        label = labels[run_of[lo]]
        if label is None:
            if default is not None:
                entries.append((value, plen, MISS))
        elif label == default:  # the default serves its hosts from host ports; transit needs an entry
            if any(transit(run_dpid[r]) for r in range(run_of[lo], run_of[hi - 1] + 1)):
                entries.append((value, plen, label))
        else:
            entries.append((value, plen, label))

    def walk(lo: int, hi: int, value: int, plen: int) -> None:
        # ips[lo:hi] are the known hosts inside prefix value/plen
        r0, r1 = run_of[lo], run_of[hi - 1]
        i = bisect_right(bounds, r0)
        if (i == len(bounds) or bounds[i] > r1) and labels[r0] is not LOCAL:
            if plen == 0:  # never a /0 (a switch may read a zero mask back as no match field): the hosts' prefix
                plen = width - (ips[lo] ^ ips[hi - 1]).bit_length()
                value = ips[lo] >> (width - plen) << (width - plen) if plen < width else ips[lo]
            if hi - lo == 1 and _holds_multicast(value, plen, width):
                value, plen = ips[lo], width
            if not _holds_multicast(value, plen, width):  # (else split further, as a mixed prefix)
                emit(value, plen, lo, hi)
                return
        elif hi - lo == 1:  # one of the switch's own hosts
            entries.append((ips[lo], width, Own(addresses.hosts[lo].port)))
            return
        bit = (ips[lo] ^ ips[hi - 1]).bit_length() - 1  # the highest bit the hosts here differ in
        left = ips[lo] >> (bit + 1) << (bit + 1)
        mid = bisect_left(ips, left | (1 << bit), lo, hi)
        walk(lo, mid, left, width - bit)
        walk(mid, hi, left | (1 << bit), width - bit)

    if ips:
        walk(0, len(ips), 0, 0)
    ports: tuple[int, ...] = ()
    if default is not None:
        fabric = set(fabric_ports)
        ports = tuple(sorted({addresses.hosts[i].port for r, d in enumerate(run_dpid) if d == dpid
                              for i in range(addresses.run_start[r], addresses.run_start[r + 1])} - fabric))
    return CompactTable(tuple(entries), default, ports, width)


def compact_rules(table: CompactTable) -> list[tuple[int, Match, Any]]:
    """(priority, match, what) of a compact table: ``what`` is a label (next-hop ports: output or group) or
    raw actions (a switch's own host: output to its port; MISS: the IPv4 miss's controller copy, ARP dropped)."""
    out: list[tuple[int, Match, Any]] = []
    width = table.width
    for value, plen, label in table.entries:
        priority = prefix_priority(plen)
        if isinstance(label, Own):
            for m in prefix_matches(value, width, width):
                out.append((priority, m, (("output", label.port),)))
        elif label is MISS:  # (IPv4 only: an IPv6 table has no default)
            ipv4, arp = prefix_matches(value, plen, width)
            out.append((priority, ipv4, (("controller", PACKET_IN_BYTES),)))
            out.append((priority, arp, ()))
        else:
            for m in prefix_matches(value, plen, width):
                out.append((priority, m, label))
    if table.default is not None:
        for port in table.default_ports:
            out.append((PRIO_UP_DEFAULT, match(in_port=port), table.default))
    return out


def hop_distances(graph: nx.Graph, dst_switch: int) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
    """BFS distances toward ``dst_switch`` and each switch's next-hop ports (``next_hop_ports``)."""
    if dst_switch not in graph:
        return {}, {}
    dist = nx.single_source_shortest_path_length(graph, dst_switch)
    adj = graph.adj
    hops = {s: tuple(sorted(attrs["ports"][s] for n, attrs in adj[s].items() if dist.get(n) == d - 1))
            for s, d in dist.items() if s != dst_switch}
    return dist, hops


def is_transit(adj: Mapping[int, Iterable[int]], dist: Mapping[int, int], s: int) -> bool:
    """Some neighbour of ``s`` is one hop farther from the destination: it forwards to ``s``."""
    d = dist.get(s)
    return d is not None and any(dist.get(n) == d + 1 for n in adj[s])


def compact_plan(topology: Topology, levels: Mapping[int, int], stagger: bool,
                 graph: nx.Graph) -> dict[int, SwitchRules]:
    """The compact plan of a recognised Clos (see the module docstring), from scratch: the reference
    ``plan_state.PlanState`` equals."""
    desired = _base_tables(topology, graph)
    hosts = [h for h in topology.hosts.values() if h.dpid in desired]
    families = (Addresses.of(h for h in hosts if not is_ipv6(h.ip)),
                Addresses.of((h for h in hosts if is_ipv6(h.ip)), 128))
    toward = {d: hop_distances(graph, d) for addresses in families for d in addresses.run_dpid}
    groups = _Groups(desired, levels, stagger)
    for dpid, rules in desired.items():
        adj = graph.adj[dpid] if dpid in graph else {}
        fabric = [attrs["ports"][dpid] for attrs in adj.values()]
        for addresses in families:  # IPv6 never has the host-port default: the IPv6 miss sits above it
            table = compact_table(addresses, dpid, lambda d: toward[d][1].get(dpid) or None,  # noqa: B023
                                  levels.get(dpid, 0) == 0 and addresses.width == 32,
                                  lambda d: is_transit(graph.adj, toward[d][0], dpid), fabric)  # noqa: B023
            for priority, m, what in compact_rules(table):
                actions = groups.actions(dpid, what) if what and isinstance(what[0], int) else what
                rules.add_flow(FlowRule(dpid, priority, m, actions))
    add_host_entries(desired, (h for h in hosts if is_ipv6(h.ip)), graph, groups, compact=True)  # solicitations
    return desired
