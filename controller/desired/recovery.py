"""What a restarted controller learns back from the switches' own tables, so it re-learns in one poll.

Every mlroute rule says what it is by its cookie and match: a counting rule (cookie ``COOKIE_FLOW``) names a
transport flow and its ingress port, and its output action (if any) an elephant's pinned first hop; a pinned hop
(``COOKIE_ELEPHANT``) names the next hop above; a host rule in the forwarding table with a single output says where
packets for that IP leave the switch (an exact IPv4 destination only: compact forwarding's prefixes and host-port
defaults name no host; a switch keeps exact entries for its own hosts). Hosts are only known for sure once links
are: the host's own switch is the one whose output port carries no fabric link, so host candidates are resolved
against the topology as LLDP fills it in. LLDP lags behind the read-back (a neighbour not reconnected yet leaves a
fabric port looking like a host port), so the tables' own word on which ports face switches counts too: a fabric
port's ARP rule, a SELECT group's buckets, a pinned hop. A host is never bound at a port that is, or may be, a
fabric port, and one known only from a forwarding rule waits until its switch has been up long enough for LLDP to
have classified its ports. While a restarted controller is still recovering, ``sync`` only adds rules (see
``controller.core``), so nothing the switches hold is deleted before the controller knows as much as they do,
and none to the forwarding of a switch that was read back forwarding (``forwarding``): a plan made on the links
found so far is not the fabric's.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

import networkx as nx

from controller.desired.forwarding import PRIO_ARP_FABRIC, PRIO_EXACT, PRIO_EXACT_V6, fabric_arp_rule
from controller.desired.rules import (
    COOKIE_BASE,
    COOKIE_ELEPHANT,
    COOKIE_FLOW,
    PRIO_HOST,
    PRIO_IPV4_MISS,
    TABLE_FORWARD,
    FlowRule,
    GroupRule,
)
from controller.state.flowkey import FlowKey, key_from_fields, pair_key
from controller.state.topology import UNKNOWN_MAC, Topology

Path = tuple[int, ...]


@dataclass
class Recovered:
    """State read back from switches, accumulated over every switch that reported."""

    counting: dict[FlowKey, tuple[int, int]] = field(default_factory=dict)  # key -> (ingress dpid, in_port)
    hops: dict[FlowKey, dict[int, int]] = field(default_factory=dict)  # key -> {dpid: pinned output port}
    host_routes: dict[str, dict[int, int]] = field(default_factory=dict)  # ip -> {dpid: single output port}
    bound: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # ip -> (mac, dpid, port): host guards
    fabric: dict[int, set[int]] = field(default_factory=dict)  # dpid -> ports its rules use toward switches
    forwarding: set[int] = field(default_factory=set)  # switches read back forwarding toward hosts (table 1)

    def read(self, dpid: int, flows: Iterable[FlowRule]) -> dict[FlowKey, int]:
        """Fold in one switch's read-back rules; returns the counting rules found there (key -> in_port)."""
        counting: dict[FlowKey, int] = {}
        fabric = self.fabric.setdefault(dpid, set())
        for rule in flows:
            if rule.table == TABLE_FORWARD and rule.priority > PRIO_IPV4_MISS:  # more than its misses
                self.forwarding.add(dpid)
            fields = dict(rule.match)
            outputs = [a[1] for a in rule.actions if a[0] == "output"]
            if rule.cookie in (COOKIE_FLOW, COOKIE_ELEPHANT):
                self._read_te_rule(dpid, rule, fields, outputs, fabric, counting)
            else:
                self._read_base_rule(dpid, rule, fields, outputs, fabric)
        return counting

    def _read_te_rule(self, dpid: int, rule: FlowRule, fields: dict, outputs: list, fabric: set[int],
                      counting: dict[FlowKey, int]) -> None:
        """A counting rule (a flow's ingress: its key, port, and pinned first hop if any) or a pinned hop."""
        counted = rule.cookie == COOKIE_FLOW
        if counted and "in_port" not in fields or not counted and not outputs:
            return
        key = _key(fields)
        if key is None:
            return
        if counted:
            self.counting[key] = (dpid, fields["in_port"])
            counting[key] = fields["in_port"]
        if outputs:
            self.hops.setdefault(key, {})[dpid] = outputs[0]
            fabric.add(outputs[0])  # an elephant's pinned hop goes up a fabric link

    def _read_base_rule(self, dpid: int, rule: FlowRule, fields: dict, outputs: list, fabric: set[int]) -> None:
        """A forwarding-layer rule: a fabric port's ARP, a host guard (a bound host), an exact host route."""
        if (rule.priority == PRIO_ARP_FABRIC and "in_port" in fields
                and rule == fabric_arp_rule(dpid, fields["in_port"])):  # (host_guard's ARP hold: same priority)
            fabric.add(fields["in_port"])  # ARP that crossed a fabric link: the port faces a switch
        elif rule.cookie == COOKIE_BASE and {"in_port", "eth_src"} <= set(fields) and _source(fields):
            self.bound[_source(fields)] = (fields["eth_src"], dpid, fields["in_port"])  # a host guard
        elif (rule.cookie == COOKIE_BASE and rule.table == TABLE_FORWARD
              and rule.priority in (PRIO_HOST, PRIO_EXACT, PRIO_EXACT_V6)
              and len(rule.actions) == 1 and outputs and _destination(fields)):
            # an exact host rule only: a compact plan's prefix (address, mask) names no host
            self.host_routes.setdefault(_destination(fields), {})[dpid] = outputs[0]

    def read_groups(self, dpid: int, groups: Iterable[GroupRule]) -> None:
        """Fold in one switch's read-back groups: their buckets are ECMP ports toward other switches."""
        fabric = self.fabric.setdefault(dpid, set())
        for group in groups:
            fabric.update(group.ports)

    def may_face_switches(self, topology: Topology, dpid: int, port: int) -> bool:
        """Whether a port is, or may be, a fabric port: LLDP found a link (or half a link) there, or the
        switch's own rules used it toward other switches."""
        return not topology.is_access_port(dpid, port) or port in self.fabric.get(dpid, ())

    def resolve_hosts(self, topology: Topology, settled: Container[int] = ()) -> list[tuple[str, str, int, int]]:
        """(ip, mac, dpid, port) of hosts now certain: bound by a host-guard rule (MAC known), or else the one
        switch among ``settled`` ones (up long enough for LLDP to have classified their ports) that sends that IP
        out of a live port carrying no fabric link (MAC ``UNKNOWN_MAC`` until the host speaks); never at a port
        that may face switches. Resolved hosts leave the candidate sets."""
        found = [(ip, mac, dpid, port) for ip, (mac, dpid, port) in self.bound.items()
                 if ip not in topology.hosts and not self.may_face_switches(topology, dpid, port)]
        for ip, *_ in found:
            self.host_routes.pop(ip, None)
        self.bound.clear()
        for ip, routes in list(self.host_routes.items()):
            if ip in topology.hosts:
                del self.host_routes[ip]
                continue
            access = [(d, p) for d, p in routes.items()
                      if not self.may_face_switches(topology, d, p)]
            if len(access) == 1 and access[0][0] in settled and len(topology.fabric_ports(access[0][0])) > 0:
                found.append((ip, UNKNOWN_MAC, *access[0]))
                del self.host_routes[ip]
        return found

    def pinned_path(self, key: FlowKey, topology: Topology, graph: nx.Graph, dst_switch: int) -> Path | None:
        """The path an elephant's recovered rules pin: its pinned upward hops link by link from the ingress,
        then the single way down from the top switch; None if the rules do not make a live path."""
        return self.read_pin(key, topology, graph, dst_switch)[0]

    def read_pin(self, key: FlowKey, topology: Topology, graph: nx.Graph, dst_switch: int
                 ) -> tuple[Path | None, bool]:
        """(:meth:`pinned_path`, whether a pin that does not read as a path yet may once LLDP found more links:
        a hop leaves by a live port whose link is not known yet, or the way down is not in the graph yet). A hop
        out of a port that is down (a cable cut while the controller was away) never will: its pin is broken."""
        hops = self.hops.get(key)
        ingress = self.counting.get(key, (None,))[0]
        if not hops or ingress not in hops:
            return None, False
        # above the ingress a 5-tuple not yet pinned on its own rides its declared host pair's hop rules (the
        # counting rule sends it to the pair's first hop): read on along those, not down from wherever the
        # 5-tuple's own rules end (live: the shortest way down from an aggregation switch, via whichever core
        # came first, put 3 pins of 8 on shared links and the first decision moved 5)
        pair = {} if key.is_pair else self.hops.get(pair_key(key), {})
        hops = {**pair, **hops}
        path, here = [ingress], ingress
        while here in hops and len(path) <= len(graph):
            link = topology.links.get((here, hops[here]))
            if link is None or not graph.has_edge(here, link.dst):
                return None, link is None and hops[here] in topology.ports.get(here, ())
            here = link.dst
            path.append(here)
        if dst_switch not in graph or here not in graph:
            return None, True
        try:
            down = nx.shortest_path(graph, here, dst_switch)
        except nx.NetworkXNoPath:
            return None, True
        return tuple(path + down[1:]), False

    def forget(self, key: FlowKey) -> None:
        self.hops.pop(key, None)
        self.counting.pop(key, None)


def _key(fields) -> FlowKey | None:
    try:
        return key_from_fields(fields)
    except (KeyError, TypeError, ValueError):
        return None


def _source(fields: dict) -> str:
    """The IPv4 or IPv6 source a host guard names ("" if none)."""
    value = fields.get("ipv4_src", fields.get("ipv6_src"))
    return value if isinstance(value, str) else ""


def _destination(fields: dict) -> str:
    """The exact IPv4 or IPv6 destination a forwarding rule names ("" for none or a prefix)."""
    value = fields.get("ipv4_dst", fields.get("ipv6_dst"))
    return value if isinstance(value, str) else ""
