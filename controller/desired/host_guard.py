"""Anti-spoofing at host ports: once a port has a bound host, it only accepts IPv4 from that host's (IP, MAC),
and once it has a bound IPv6 host, IPv6 likewise.

Values, emitted per host with the traffic-engineering layer's host-port rules (te_rules.host_miss_rules), so the full
rebuild and the incremental plan hold them alike. Table 0 of a host's switch holds, per bound host,
``in_port + eth_src + ipv4_src -> goto forwarding`` and, per bound port, ``in_port + IPv4 -> drop`` one
priority below. OpenFlow has no negative match, so every other table-0 rule that
matches a bound host port must name the bound source too (``admitted_source``: te's new-flow copies do), or a
forged source would take that rule instead. ARP from a bound port is forwarded in the data plane only with the
bound sender; any other ARP from it reaches the controller alone, which refuses a contradicting claim. IPv6
neighbour discovery is ARP's twin: solicitations and advertisements from a port with a bound IPv6 host take the
data plane only from a bound (IPv6, MAC) source; any other (a duplicate-address probe from ``::``, a forged
advertisement) reaches the controller alone.
"""

from __future__ import annotations

from controller.desired.forwarding import PACKET_IN_BYTES, nd_match
from controller.desired.rules import (
    COOKIE_BASE,
    ETH_ARP,
    ETH_IPV4,
    ETH_IPV6,
    ND_ADVERT,
    ND_SOLICIT,
    PRIO_ARP,
    PRIO_ND,
    TABLE_CLASSIFY,
    TABLE_FORWARD,
    FlowRule,
    match,
)
from controller.state.flowkey import is_ipv6
from controller.state.topology import UNKNOWN_MAC, Host

PRIO_GUARD_DROP = 2  # above table-miss (0), below te's new-flow copies (5) which carry the bound source
PRIO_GUARD_ALLOW = 3
PRIO_ARP_HOLD = PRIO_ARP + 1  # other ARP from a bound port: to the controller only (it judges the claim)
PRIO_ARP_ALLOW = PRIO_ARP + 2  # the bound host's own ARP: as the base ARP rule (copy + forwarding)
PRIO_ND_HOLD = PRIO_ND + 2  # other ND from a port with a bound IPv6 host: to the controller only (above the
PRIO_ND_ALLOW = PRIO_ND + 3  # fabric ports' IPv6 rule, which never shares a port with a host); its own: as base


def admitted_source(host: Host) -> dict[str, str]:
    """Match fields every table-0 rule on ``host``'s port adds, so only the bound host's packets match it."""
    field = "ipv6_src" if is_ipv6(host.ip) else "ipv4_src"
    if not host.mac:  # recovered from switch rules after a restart (topology.UNKNOWN_MAC): IP only for now
        return {field: host.ip}
    return {"eth_src": host.mac, field: host.ip}


def arp_sender(host: Host) -> dict[str, str]:
    """ARP match fields naming ``host`` as the sender (frame source, sender hardware and protocol address)."""
    if host.mac == UNKNOWN_MAC:
        return {"arp_spa": host.ip}
    return {"eth_src": host.mac, "arp_sha": host.mac, "arp_spa": host.ip}


def host_rules(host: Host) -> list[FlowRule]:
    """``host``'s allow rules and its port's drop / hold rules (the same values for every host on that port).

    ARP for a known host is forwarded in the data plane (forwarding.py), so a forged sender would reach the
    target and poison its cache: only the bound sender's ARP takes that way, any other goes to the controller
    alone, which refuses a contradicting claim (packet_in.py)."""
    to_controller = ("controller", PACKET_IN_BYTES)
    if is_ipv6(host.ip):
        return _ipv6_rules(host)
    return [
        FlowRule(host.dpid, PRIO_GUARD_ALLOW, match(in_port=host.port, eth_type=ETH_IPV4, **admitted_source(host)),
                 (("goto", TABLE_FORWARD),), table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
        FlowRule(host.dpid, PRIO_GUARD_DROP, match(in_port=host.port, eth_type=ETH_IPV4), (),
                 table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
        FlowRule(host.dpid, PRIO_ARP_ALLOW, match(in_port=host.port, eth_type=ETH_ARP, **arp_sender(host)),
                 (to_controller, ("goto", TABLE_FORWARD)), table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
        FlowRule(host.dpid, PRIO_ARP_HOLD, match(in_port=host.port, eth_type=ETH_ARP), (to_controller,),
                 table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
    ]


def _ipv6_rules(host: Host) -> list[FlowRule]:
    """An IPv6 host's allow rules and its port's drop / hold rules: ``host_rules``' IPv4 and ARP, for IPv6 and
    neighbour discovery."""
    to_controller = ("controller", PACKET_IN_BYTES)
    source, port = admitted_source(host), host.port
    rules = [
        FlowRule(host.dpid, PRIO_GUARD_ALLOW, match(in_port=port, eth_type=ETH_IPV6, **source),
                 (("goto", TABLE_FORWARD),), table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
        FlowRule(host.dpid, PRIO_GUARD_DROP, match(in_port=port, eth_type=ETH_IPV6), (),
                 table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
    ]
    for nd in (ND_SOLICIT, ND_ADVERT):
        rules.append(FlowRule(host.dpid, PRIO_ND_ALLOW, nd_match(nd, in_port=port, **source),
                              (to_controller, ("goto", TABLE_FORWARD)), table=TABLE_CLASSIFY, cookie=COOKIE_BASE))
        rules.append(FlowRule(host.dpid, PRIO_ND_HOLD, nd_match(nd, in_port=port), (to_controller,),
                              table=TABLE_CLASSIFY, cookie=COOKIE_BASE))
    return rules
