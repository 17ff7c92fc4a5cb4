"""Anti-spoofing at host ports: once a port has a bound host, it only accepts IPv4 from that host's (IP, MAC).

Values, emitted per host with the traffic-engineering layer's host-port rules (te.te_rules), so the full
rebuild and the incremental plan hold them alike. Table 0 of a host's switch holds, per bound host, ``in_port + eth_src + ipv4_src -> goto forwarding`` and, per bound port,
``in_port + IPv4 -> drop`` one priority below. OpenFlow has no negative match, so every other table-0 rule that
matches a bound host port must name the bound source too (``admitted_source``: te's new-flow copies do), or a
forged source would take that rule instead. ARP is not dropped here: it always reaches the controller, which
refuses a contradicting claim (packet_in.py).
"""

from __future__ import annotations

from controller.rules import COOKIE_BASE, ETH_IPV4, TABLE_CLASSIFY, TABLE_FORWARD, FlowRule, match
from controller.topology import UNKNOWN_MAC, Host, Topology

PRIO_GUARD_DROP = 2  # above table-miss (0), below te's new-flow copies (5) which carry the bound source
PRIO_GUARD_ALLOW = 3


def admitted_source(host: Host) -> dict[str, str]:
    """Match fields every table-0 rule on ``host``'s port adds, so only the bound host's packets match it."""
    if not host.mac:  # recovered from switch rules after a restart (topology.UNKNOWN_MAC): IP only for now
        return {"ipv4_src": host.ip}
    return {"eth_src": host.mac, "ipv4_src": host.ip}


def host_rules(host: Host) -> list[FlowRule]:
    """``host``'s allow rule and its port's drop rule (the same value for every host bound to that port)."""
    return [
        FlowRule(host.dpid, PRIO_GUARD_ALLOW, match(in_port=host.port, eth_type=ETH_IPV4, **admitted_source(host)),
                 (("goto", TABLE_FORWARD),), table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
        FlowRule(host.dpid, PRIO_GUARD_DROP, match(in_port=host.port, eth_type=ETH_IPV4), (),
                 table=TABLE_CLASSIFY, cookie=COOKIE_BASE),
    ]


def guard_rules(topology: Topology) -> list[FlowRule]:
    """Allow rules for every bound (IP, MAC, port), one drop rule for the rest of each bound port's IPv4."""
    rules: dict[tuple, FlowRule] = {}
    for host in sorted(topology.hosts.values(), key=lambda h: (h.dpid, h.port, h.ip)):
        for rule in host_rules(host):
            rules[(rule.dpid, rule.key)] = rule
    return list(rules.values())
