"""The forwarding baseline: which rules every switch holds so that any known host reaches any other.

Destination-based, over the shortest-path DAG toward each host's switch: a switch forwards to every neighbour
one hop closer (a SELECT group when there are several: ECMP up the Clos; a single output on the way down).
Distances strictly decrease along every path, so forwarding is loop-free on any graph, Clos or not, and it is
recomputed from live links after every failure. ARP goes to the controller (which answers for known hosts and
never floods on fabric links), IPv6 is dropped, and IPv4 toward an unknown host goes to the controller.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from functools import lru_cache

import networkx as nx

from controller.rules import (
    ETH_ARP,
    ETH_IPV4,
    ETH_IPV6,
    ETH_LLDP,
    LLDP_MAC_NEAREST_BRIDGE,
    NO_BUFFER,
    PRIO_ARP,
    PRIO_HOST,
    PRIO_IPV4_MISS,
    PRIO_IPV6_DROP,
    PRIO_LLDP,
    PRIO_TABLE_MISS,
    TABLE_CLASSIFY,
    TABLE_FORWARD,
    FlowRule,
    GroupRule,
    Match,
    SwitchRules,
    match,
)
from controller.topology import Topology

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


def base_rules(dpid: int) -> list[FlowRule]:
    """Rules independent of topology: ARP copied to the controller (learning, proxy answers, asking for unknown
    hosts) and on to forwarding (where ARP for a known host follows that host's rules), IPv6 dropped, the rest
    on to forwarding (where IPv4 toward an unknown host goes to the controller and anything else is dropped).
    LLDP goes to the controller by the very rule the topology app installs at connect (it replaces that one):
    as mlroute's own, it is read back, audited and repaired with the rest (a switch wiped while connected
    would otherwise lose its links to LLDP's timeout)."""
    to_controller = (("controller", PACKET_IN_BYTES),)
    return [
        FlowRule(dpid, PRIO_LLDP, match(eth_dst=LLDP_MAC_NEAREST_BRIDGE, eth_type=ETH_LLDP),
                 (("controller", NO_BUFFER),), table=TABLE_CLASSIFY),
        FlowRule(dpid, PRIO_ARP, match(eth_type=ETH_ARP), to_controller + (("goto", TABLE_FORWARD),),
                 table=TABLE_CLASSIFY),
        FlowRule(dpid, PRIO_IPV6_DROP, match(eth_type=ETH_IPV6), (), table=TABLE_CLASSIFY),
        FlowRule(dpid, PRIO_TABLE_MISS, match(), (("goto", TABLE_FORWARD),), table=TABLE_CLASSIFY),
        FlowRule(dpid, PRIO_IPV4_MISS, match(eth_type=ETH_IPV4), to_controller, table=TABLE_FORWARD),
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


def fabric_arp_rule(dpid: int, port: int) -> FlowRule:
    """ARP arriving over a fabric link goes on without another copy to the controller: it was copied where it
    entered the fabric, and one ARP must not cost a packet-in per hop."""
    return FlowRule(dpid, PRIO_ARP_FABRIC, match(in_port=port, eth_type=ETH_ARP), (("goto", TABLE_FORWARD),),
                    table=TABLE_CLASSIFY)


def host_matches(ip: str) -> tuple[Match, Match]:
    """The table-1 matches that forward toward host ``ip``: its IPv4 and ARP for it (ARP takes the same way as
    its IPv4, so ARP keeps working while the controller is away)."""
    return (match(eth_type=ETH_IPV4, ipv4_dst=ip), match(eth_type=ETH_ARP, arp_tpa=ip))


def plan(topology: Topology, levels: Mapping[int, int] | None = None, stagger: bool = True,
         graph: nx.Graph | None = None) -> dict[int, SwitchRules]:
    """Desired rules for every connected switch: dict dpid -> SwitchRules.

    ``levels`` (dpid -> tier level, 0 = host-facing) enables staggered ECMP buckets against hash polarisation;
    ``graph`` is ``topology.graph()`` when the caller already has it.
    """
    levels = levels or {}
    graph = graph if graph is not None else topology.graph()
    desired = {dpid: SwitchRules() for dpid in topology.ports}
    for dpid, rules in desired.items():
        for rule in base_rules(dpid):
            rules.add_flow(rule)
        if dpid in graph:
            for nbr in graph.adj[dpid]:
                rules.add_flow(fabric_arp_rule(dpid, graph.edges[dpid, nbr]["ports"][dpid]))
    hops_cache: dict[int, dict[int, tuple[int, ...]]] = {}
    # per switch: bucket list -> group id and group id -> bucket list, kept as groups are added (building
    # ``taken`` afresh for every (host, switch) pair made the plan quadratic in groups x hosts)
    gids: dict[int, dict[tuple[int, ...], int]] = {dpid: {} for dpid in desired}
    taken: dict[int, dict[int, tuple[int, ...]]] = {dpid: {} for dpid in desired}
    for host in topology.hosts.values():
        if host.dpid not in desired:
            continue
        matches = host_matches(host.ip)
        for m in matches:
            desired[host.dpid].add_flow(FlowRule(host.dpid, PRIO_HOST, m, (("output", host.port),)))
        if host.dpid not in hops_cache:
            hops_cache[host.dpid] = next_hop_ports(graph, host.dpid)
        for dpid, ports in hops_cache[host.dpid].items():
            if not ports:
                continue
            rules = desired[dpid]
            if len(ports) == 1:
                actions = (("output", ports[0]),)
            else:
                buckets = staggered_buckets(ports, levels.get(dpid, 0) if stagger else 0)
                gid = gids[dpid].get(buckets)
                if gid is None:  # a bucket list new on this switch; a known one keeps its id (same probe)
                    gid = group_id_for(buckets, taken[dpid])
                    gids[dpid][buckets] = gid
                    taken[dpid][gid] = buckets
                    rules.add_group(GroupRule(dpid, gid, buckets))
                actions = (("group", gid),)
            for m in matches:
                rules.add_flow(FlowRule(dpid, PRIO_HOST, m, actions))
    return desired
