"""A small simulated OpenFlow pipeline over planned rules (in the spirit of Faucet's fakeoftable).

``trace`` injects a packet at a port and follows matching rules (exact and masked matches: ``(address, mask)``
on ipv4_dst / arp_tpa), groups (every bucket) and links, and reports where copies were delivered, whether any
copy looped (entered a switch at a port it had entered before), and whether any went to the controller.
"""

import functools
import ipaddress
from dataclasses import dataclass, field

from controller.desired.flowcopy import learned_fields
from controller.desired.rules import COOKIE_SEEN, PRIO_SEEN, TABLE_SEEN, FlowRule, match


@dataclass
class Trace:
    delivered: set = field(default_factory=set)  # (dpid, port) host-facing outputs
    to_controller: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    looped: bool = False
    paths: list = field(default_factory=list)  # switch sequences, one per delivered copy


def _number(value):
    """An address as an integer (masked matches on ipv4_dst / arp_tpa / ipv4_src / ipv6_src are (address, mask)
    strings)."""
    return _address(value) if isinstance(value, str) else value


@functools.lru_cache(maxsize=1 << 16)
def _address(text):
    """(the same few hundred addresses and masks are compared millions of times in a k=8 trace)"""
    return int(ipaddress.ip_address(text))


def _matches(have, want):
    if isinstance(want, tuple):  # (value, mask)
        return have is not None and _number(have) & _number(want[1]) == _number(want[0])
    return have == want


def lookup(rules, table, packet):
    best = None
    for rule in rules.flows.values():
        if rule.table != table:
            continue
        if all(_matches(packet.get(k), v) for k, v in rule.match):
            if best is None or rule.priority > best.priority:
                best = rule
    return best


def seen_entry(dpid, pkt, proto, hold_s, eth_type):
    """The entry a ``learn_seen`` action learns from ``pkt`` (ofmsg.learn_seen's specs)."""
    fields = {name: pkt[name] for name, _bits in learned_fields(proto, eth_type)}
    return FlowRule(dpid, PRIO_SEEN, match(eth_type=eth_type, ip_proto=proto, **fields), (), table=TABLE_SEEN,
                    cookie=COOKIE_SEEN)


def _apply(desired, result, rule, dpid, pkt, outputs):
    """Run one rule's actions on ``pkt`` at ``dpid``: its outputs into ``outputs``; returns its goto table."""
    goto = None
    for kind, *arg in rule.actions:
        if kind == "output":
            outputs.append(arg[0])
        elif kind == "group":
            outputs.extend(dict.fromkeys(desired[dpid].groups[arg[0]].ports))  # staggered: each port once
        elif kind == "controller":
            result.to_controller.append(dpid)
        elif kind == "goto":
            goto = arg[0]
        elif kind == "resubmit":
            hit = lookup(desired[dpid], arg[0], pkt)
            if hit is not None:
                _apply(desired, result, hit, dpid, pkt, outputs)
        elif kind == "learn_seen":
            desired[dpid].add_flow(seen_entry(dpid, pkt, *arg))
    return goto


def trace(desired, topology, dpid, in_port, packet, max_hops=16):
    """Follow ``packet`` from a host port. Open vSwitch's ``resubmit`` runs the target table's actions in
    place, and ``learn_seen`` adds its exact entry to ``desired`` (as the switch would: a second trace of the
    same 5-tuple meets it)."""
    result = Trace()
    links = {(link.src, link.src_port): link for link in topology.live_links()}

    def visit(dpid, in_port, path, seen=frozenset()):
        # a copy that enters a switch at a port it entered before meets the same rules again: a loop (a packet
        # may pass a switch twice at different ports: an unknown address sent up by a host port's default and
        # back down by a prefix ends in the table miss there)
        if len(path) > max_hops or (dpid, in_port) in seen:
            result.looped = True
            return
        seen = seen | {(dpid, in_port)}
        path = path + [dpid]
        pkt = dict(packet, in_port=in_port)
        table, outputs = 0, []
        while True:
            rule = lookup(desired[dpid], table, pkt)
            if rule is None:
                result.dropped.append(dpid)
                return
            goto = _apply(desired, result, rule, dpid, pkt, outputs)
            if goto is None:
                break
            table = goto
        if not outputs and not rule.actions:
            result.dropped.append(dpid)
        for port in outputs:
            link = links.get((dpid, port))
            if link is None:
                result.delivered.add((dpid, port))
                result.paths.append(path)
            else:
                visit(link.dst, link.dst_port, path, seen)

    visit(dpid, in_port, [])
    return result


def _compatible(a, b):
    """Whether one packet can match both values of a field (exact or (value, mask) addresses)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        exact = (1 << 128) - 1  # (an exact IPv4 or IPv6 value: every bit it has)
        va, ma = (_number(a[0]), _number(a[1])) if isinstance(a, tuple) else (_number(a), exact)
        vb, mb = (_number(b[0]), _number(b[1])) if isinstance(b, tuple) else (_number(b), exact)
        return (va ^ vb) & ma & mb == 0
    return a == b


def ambiguous(rules):
    """Pairs of a switch's entries in one table at one priority that one packet can match with different
    actions: OpenFlow leaves which one applies undefined (a switch may pick either)."""
    by_slot = {}
    for rule in rules.flows.values():
        by_slot.setdefault((rule.table, rule.priority), []).append(rule)
    out = []
    for same in by_slot.values():
        for i, a in enumerate(same):
            fa = dict(a.match)
            for b in same[i + 1:]:
                if a.actions != b.actions and all(_compatible(fa[k], v) for k, v in b.match if k in fa):
                    out.append((a, b))
    return out
