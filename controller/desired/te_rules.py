"""The traffic-engineering layer's rules: what the switches hold for the TE decision's pins and the flows it
counts. Plain functions of the knowledge (hosts, tiers, the accounting table) and the pins in force; the
decision itself is ``controller.decide.te``.

Three parts, each its own function, so the incremental planner (plan_state.py) builds exactly the part one
host, flow or pin contributes and the from-scratch reference (``sync.desired_state`` via :func:`te_rules`)
builds all of them:

* :func:`host_miss_rules`: per host port, the anti-spoofing guard and the copies of TCP and UDP misses to the
  controller (once per new 5-tuple: ``copy``, see flowcopy.py), forwarded on;
* :func:`counting_rule`: per known transport flow, an exact rule at its ingress switch counts it (the idle
  timeout bounds the table) and, for a pinned elephant (or a flow of a pinned host pair), sends it to the
  pinned first hop instead of the ECMP table;
* :func:`pin_rules`: per pinned elephant, exact rules on its upward hops above the ingress; per pinned host pair
  (a declared job's send, before its flows are known) also, at the ingress, TCP and UDP from the host to the peer
  copied to the controller (cookie of the flow-miss copy, so the new flow gets its counting rule) and sent to the
  pinned first hop.

An elephant's route is fixed by exact rules on its upward hops only: the ingress rule's action picks the first
hop, one more rule per upper tier below the top; the top switch (spine / core) has one way down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, cast

import networkx as nx

from controller.desired.flowcopy import CONTROLLER_COPY, NewFlowCopy
from controller.desired.host_guard import admitted_source, host_rules
from controller.desired.rules import (
    COOKIE_ELEPHANT,
    COOKIE_FLOW,
    COOKIE_FLOW_MISS,
    ETH_IPV4,
    ETH_IPV6,
    PRIO_ELEPHANT,
    PRIO_FLOW,
    PRIO_FLOW_MISS,
    PRIO_PAIR,
    PRIO_PAIR_COUNT,
    PRIO_PAIR_HOP,
    TABLE_CLASSIFY,
    TABLE_FORWARD,
    FlowRule,
    Match,
    RuleKey,
    match,
)
from controller.state.flowkey import PROTO_TCP, PROTO_UDP, FlowKey, five_tuple_match, ip_fields, is_ipv6
from controller.state.jobs import HostPair
from controller.state.tiers import TierInference
from controller.state.topology import Host, Topology, port_toward
from mlroute.routing.tiers import TIER_RANK

RouteKey = FlowKey | HostPair  # what the traffic engineer routes: a transport flow or a declared host pair
Path = tuple[int, ...]  # dpids, ingress switch first


class HostTable(Protocol):
    """The part of a Topology that :func:`te_rules` reads when it is given the graph: its hosts."""

    @property
    def hosts(self) -> Mapping[str, Host]: ...


def host_miss_rules(host: Host, copy: NewFlowCopy = CONTROLLER_COPY) -> list[FlowRule]:
    """One host's own TE rules: the anti-spoofing guard at its port (host_guard.py) and, under ``copy``, the
    copies of its new TCP and UDP flows (over its address's family) to the controller (with sFlow detection
    there: no copies)."""
    rules = list(host_rules(host))
    eth_type = ETH_IPV6 if is_ipv6(host.ip) else ETH_IPV4
    for proto in (PROTO_TCP, PROTO_UDP) if copy.copies(host.dpid) else ():
        # only the bound host's own source is copied: host_guard drops the rest of the port's IPv4 / IPv6
        rules.append(FlowRule(host.dpid, PRIO_FLOW_MISS, match(in_port=host.port, eth_type=eth_type, ip_proto=proto,
                                                               **admitted_source(host)),
                              (copy.action(host.dpid), ("goto", TABLE_FORWARD)),
                              table=TABLE_CLASSIFY, cookie=COOKIE_FLOW_MISS))
    rules.extend(copy.seen_rules(host.dpid, eth_type))
    return rules


def counting_rule(graph: nx.Graph, key: FlowKey, dpid: int, in_port: int, pinned: Mapping[RouteKey, Sequence[int]],
                  idle_timeout: int) -> FlowRule:
    """One transport flow's exact counting rule at its ingress switch (a pair key's: below the 5-tuples' of the
    pair): on to the ECMP table, or to the pinned first hop when the flow (or its host pair) is pinned."""
    actions = (("goto", TABLE_FORWARD),)
    path = pinned.get(key) or pinned.get(HostPair(key.src_ip, key.dst_ip))
    if path and path[0] == dpid and len(path) > 1:
        port = port_toward(graph, path[0], path[1])
        if port is not None:
            actions = (("output", port),)
    table, priority, match = counting_rule_key(key, in_port)
    return FlowRule(dpid, priority, match, actions, table=table, cookie=COOKIE_FLOW, idle_timeout=idle_timeout)


def counting_rule_key(key: FlowKey, in_port: int | None) -> RuleKey:
    """Where a flow's counting rule sits (FlowRule.key): found in a belief without scanning it."""
    return TABLE_CLASSIFY, PRIO_PAIR_COUNT if key.is_pair else PRIO_FLOW, five_tuple_match(key, in_port)


def pin_rules(hosts: Mapping[str, Host], graph: nx.Graph, tiers: TierInference | None, key: RouteKey,
              path: Sequence[int], copy: NewFlowCopy = CONTROLLER_COPY) -> list[FlowRule]:
    """One pin's rules: a host pair's ingress rules (at its source host, from ``hosts``) and the exact rules on
    the path's upward hops above the ingress."""
    rules: list[FlowRule] = []
    if isinstance(key, HostPair):
        rules += _pair_ingress(hosts, graph, key, path, copy)
    tier_of = tiers.tiers if tiers is not None else {}
    ranks = [TIER_RANK.get(tier_of.get(d, ""), 0) for d in path]  # ("" is no tier)
    top = ranks.index(max(ranks))
    for i in range(1, top):
        port = port_toward(graph, path[i], path[i + 1])
        if port is None:
            continue
        if isinstance(key, HostPair) or key.is_pair:  # a whole pair: below any of its pinned 5-tuples
            rules.append(FlowRule(path[i], PRIO_PAIR_HOP, pair_match(HostPair(key.src_ip, key.dst_ip)),
                                  (("output", port),), table=TABLE_CLASSIFY, cookie=COOKIE_ELEPHANT))
        else:
            rules.append(FlowRule(path[i], PRIO_ELEPHANT, five_tuple_match(key), (("output", port),),
                                  table=TABLE_CLASSIFY, cookie=COOKIE_ELEPHANT))
    return rules


def te_rules(topology: HostTable, tiers: TierInference | None, accounting: Mapping[FlowKey, tuple[int, int]],
             pinned: Mapping[RouteKey, Sequence[int]], idle_timeout: int,
             graph: nx.Graph | None = None, copy: NewFlowCopy = CONTROLLER_COPY) -> list[FlowRule]:
    """Rules of the traffic-engineering layer for all switches (a flat list of FlowRule): every host's
    :func:`host_miss_rules`, every accounted flow's :func:`counting_rule`, every pin's :func:`pin_rules`."""
    graph = graph if graph is not None else cast(Topology, topology).graph()  # only a Topology comes without one
    rules: list[FlowRule] = []
    for h in topology.hosts.values():
        rules.extend(host_miss_rules(h, copy))
    for flow_key, (dpid, in_port) in accounting.items():
        rules.append(counting_rule(graph, flow_key, dpid, in_port, pinned, idle_timeout))
    for key, path in pinned.items():
        rules.extend(pin_rules(topology.hosts, graph, tiers, key, path, copy))
    return rules


def pair_match(pair: HostPair, in_port: int | None = None, proto: int | None = None) -> Match:
    """IPv4 or IPv6 traffic of a host pair (of one transport protocol and from one port, for the ingress
    rule)."""
    fields = ip_fields(pair.src_ip, pair.dst_ip)
    if proto is not None:
        fields["ip_proto"] = proto
    if in_port is not None:
        fields["in_port"] = in_port
    return match(**fields)


def _pair_ingress(hosts: Mapping[str, Host], graph: nx.Graph, pair: HostPair, path: Sequence[int],
                  copy: NewFlowCopy) -> list[FlowRule]:
    host = hosts.get(pair.src_ip)
    if host is None or host.dpid != path[0] or len(path) < 2:
        return []
    port = port_toward(graph, path[0], path[1])
    if port is None:
        return []
    actions = ((copy.action(host.dpid),) if copy.copies(host.dpid) else ()) + (("output", port),)
    return [FlowRule(host.dpid, PRIO_PAIR, pair_match(pair, host.port, proto), actions, table=TABLE_CLASSIFY,
                     cookie=COOKIE_FLOW_MISS) for proto in (PROTO_TCP, PROTO_UDP)]
