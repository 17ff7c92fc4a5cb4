"""ECMP without SELECT groups: what a switch's SELECT group spreads, as plain OpenFlow 1.3 entries.

Many lab switches have no SELECT groups, or run them in software (../shared/HARDWARE.md: several 2014-15
families passed 0 of 15 group tests; Aruba hashes SELECT buckets in its CPU path). For such a switch (its group
features, or its profile's ``groups: none``) every entry whose action is a SELECT group becomes 2^b entries,
each adding a masked match on b bits of the IPv4 source address and sending to one of the group's ports; the
b bits are read at ``level x b`` (0 = host-facing tier), a different slice per tier: the traffic an upper switch
receives on one port was already split on the lower slices (every packet there agrees on them), so reading
them again would send it all one way (hash polarisation, as the staggered buckets avoid for groups). With
sequential or per-rack addresses, an edge's hosts differ in the lowest bits, so they spread over its uplinks
host by host, and each aggregation switch spreads the pods' hosts over the cores.

IPv6 toward a host spreads the same way on the same bits of its IPv6 source (masked ``ipv6_src``: the
addresses' low bits). ARP and neighbour solicitations toward a spread destination take the first next hop (one
entry: they are a trickle). An entry that matched
no ethertype (a host port's upward default) gets its IPv4 spread at its own priority and one entry one priority
below for the rest (ARP), so no two entries of a priority overlap.

There is no ``watch_port``: when a port or link fails, the plan is recomputed from live links (the dead next hop
leaves every entry, as it leaves a group's buckets) and the changed entries are sent; the failover time is the
controller's reaction, not the switch's (benchmarks/bench_failover_groups.py measures both).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from functools import lru_cache

from controller.desired.rules import ETH_IPV4, ETH_IPV6, FlowRule, GroupRule, SwitchRules

MAX_BITS = 6  # at most 64 entries per spread entry (a 64-port spine fabric); wider groups reuse the bits


def spread_bits(n_ports: int) -> int:
    """Source bits that spread over ``n_ports`` next hops: the power of two at or above it, and one more bit
    when it is not a power of two (3 ports over 8 entries: 3/3/2, not 2/1/1 over 4)."""
    if n_ports <= 1:
        return 0
    bits = (n_ports - 1).bit_length()
    if 1 << bits != n_ports:
        bits += 1
    return min(bits, MAX_BITS)


@lru_cache(maxsize=4096)
def source_slices(bits: int, offset: int, version: int = 4) -> tuple[tuple[str, str], ...]:
    """The 2^bits masked ``ipv4_src`` (``version`` 6: ``ipv6_src``) values reading bits [offset, offset + bits),
    as (address, mask) in the form a switch reads them back; the slice wraps below bit 32 for deep tiers (the
    same bits for IPv6: its hosts' low 32 bits vary as IPv4's do)."""
    address = ipaddress.IPv6Address if version == 6 else ipaddress.IPv4Address
    offset = offset % max(1, 32 - bits + 1)
    mask = address(((1 << bits) - 1) << offset).compressed
    return tuple((address(j << offset).compressed, mask) for j in range(1 << bits))


def spread(rule: FlowRule, ports: tuple[int, ...], level: int) -> list[FlowRule]:
    """The plain entries that replace ``rule`` (whose group action sends to ``ports``) at tier ``level``."""
    ports = tuple(dict.fromkeys(ports))  # a staggered bucket list names each port several times
    fields = dict(rule.match)
    eth_type = fields.get("eth_type")

    def to(port: int) -> tuple:
        return tuple(("output", port) if kind == "group" else (kind, *arg) for kind, *arg in rule.actions)

    first = FlowRule(rule.dpid, rule.priority, rule.match, to(ports[0]), rule.table, rule.cookie, rule.idle_timeout)
    bits = spread_bits(len(ports))
    v6 = eth_type == ETH_IPV6 and "ipv6_nd_target" not in fields
    if not (eth_type in (None, ETH_IPV4) or v6) or bits == 0:
        return [first]  # ARP, neighbour solicitations (anything but IPv4 or IPv6 traffic): the first next hop
    out = []
    version, source = (6, "ipv6_src") if v6 else (4, "ipv4_src")
    for j, value in enumerate(source_slices(bits, level * bits, version)):
        m = tuple(sorted({**fields, "eth_type": eth_type or ETH_IPV4, source: value}.items()))
        out.append(FlowRule(rule.dpid, rule.priority, m, to(ports[j % len(ports)]), rule.table, rule.cookie,
                            rule.idle_timeout))
    if eth_type is None:  # the rest (ARP, ...) of what the entry matched, one priority below its IPv4
        out.append(FlowRule(rule.dpid, rule.priority - 1, rule.match, first.actions, rule.table, rule.cookie,
                            rule.idle_timeout))
    return out


def without_groups(rules: SwitchRules, level: int) -> SwitchRules:
    """``rules`` of one switch with every SELECT group replaced by spread entries, and no group left."""
    if not rules.groups:
        return rules
    out = SwitchRules()
    for rule in rules.flows.values():
        gid = _group_of(rule)
        group: GroupRule | None = rules.groups.get(gid) if gid is not None else None
        for plain in spread(rule, group.ports, level) if group is not None else (rule,):
            out.add_flow(plain)
    return out


def _group_of(rule: FlowRule) -> int | None:
    for kind, *arg in rule.actions:
        if kind == "group":
            return arg[0]
    return None


def plain_view(desired: Mapping[int, SwitchRules], group_free: Mapping[int, int]) -> dict[int, SwitchRules]:
    """``desired`` with the switches in ``group_free`` (dpid -> tier level) spread without groups."""
    return {dpid: without_groups(rules, group_free[dpid]) if dpid in group_free else rules
            for dpid, rules in desired.items()}

