"""OpenFlow rules as plain values, the desired state of each switch, and the ordered diff between two states.

Rules stay values until ``southbound/ofmsg.compile_change`` makes them OFPFlowMod / OFPGroupMod, so planning,
traffic engineering and failure handling are testable without Ryu or a switch. A match is a sorted tuple of (OXM
field name, value); actions are a tuple of ("output", port) / ("group", group_id) / ("controller", max_len) /
("goto", table) / ("resubmit", table) / ("learn_seen", ip_proto, hold_s, eth_type) (the last two Open vSwitch's); no
action means drop.

Table 0 classifies (ARP and IPv6 neighbour discovery, per-transport-flow accounting at the ingress switch, pinned
elephants), table 1 forwards toward hosts (the ECMP baseline), table 2 (Open vSwitch, ``te.flow_copy: learn``)
marks new transport flows as seen in the data plane so each reaches the controller once (``flowcopy.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

# the ethertypes and the canonical match are the flow vocabulary of the knowledge layer (flowkey.py); the rules
# name them too
from controller.state.flowkey import ETH_ARP as ETH_ARP
from controller.state.flowkey import ETH_IPV4 as ETH_IPV4
from controller.state.flowkey import ETH_IPV6 as ETH_IPV6
from controller.state.flowkey import ETH_LLDP as ETH_LLDP
from controller.state.flowkey import Match as Match
from controller.state.flowkey import match as match

# Cookies mark the rules mlroute owns, so a reconnecting switch is wiped of ours and nobody else's.
COOKIE_BASE = 0x6D6C0001  # "ml" + 1: forwarding baseline (ECMP, ARP/IPv6 handling)
COOKIE_ELEPHANT = 0x6D6C0002  # per-elephant pinned paths
COOKIE_FLOW = 0x6D6C0003  # per-transport-flow accounting at the ingress switch (polled for stats)
COOKIE_FLOW_MISS = 0x6D6C0004  # first packet of a new transport flow: copy to the controller
COOKIE_SEEN = 0x6D6C0005  # learned by the switch itself (table 2): a transport flow already copied up

TABLE_CLASSIFY = 0
TABLE_FORWARD = 1
TABLE_SEEN = 2

PRIO_TABLE_MISS = 0
PRIO_IPV4_MISS = 1  # IPv4 toward a host not known yet: to the controller (learning)
PRIO_SEEN_MISS = 1  # table 2: a 5-tuple not seen yet: learn it, copy to the controller
PRIO_SEEN_SYN = 2  # table 2: the same for TCP segments with SYN set (their own datapath flow: flowcopy.py)
PRIO_SEEN = 10  # table 2: a learned 5-tuple (no actions: its packets are not copied again)
PRIO_FLOW_MISS = 5  # table 0: new TCP/UDP flow from a host port -> controller copy + forwarding
PRIO_HOST = 10  # IPv4 toward a known host: output or ECMP group
PRIO_PAIR = 15  # table 0: a declared job's host pair at its ingress (copy to the controller, pinned first hop)
PRIO_PAIR_COUNT = 17  # table 0: a host pair counted whole at its ingress (a table too tight for its 5-tuples)
PRIO_FLOW = 20  # table 0: one transport flow at its ingress switch (counts; pins an elephant's first hop)
PRIO_PAIR_HOP = 25  # table 0: a declared host pair's upward hop beyond the ingress (a pinned 5-tuple wins)
PRIO_ELEPHANT = 30  # table 0: a pinned elephant's upward hop beyond the ingress switch
PRIO_ARP = 100
PRIO_LLDP = 0xFFFF  # table 0: LLDP to the controller (link discovery), as the topology app itself installs it
PRIO_ND = 100  # table 0: IPv6 neighbour solicitations and advertisements (ARP's twin): copy + forwarding
# (both above a compact plan's host-port default, 5: IPv6 never climbs by it, its hosts have exact entries)
PRIO_ND_MISS = 7  # table 1: ND toward no known host (a multicast solicitation, an unsolicited advertisement): drop
PRIO_IPV6_MISS = 6  # table 1: IPv6 toward a host not known yet: to the controller (learning, first packets)

PROTO_ICMPV6 = 58
ND_SOLICIT = 135  # ICMPv6 neighbour solicitation (RFC 4861): "who has target?"
ND_ADVERT = 136  # ICMPv6 neighbour advertisement: "target is at this MAC"

LLDP_MAC_NEAREST_BRIDGE = "01:80:c2:00:00:0e"
NO_BUFFER = 0xFFFF  # OFPCML_NO_BUFFER: the whole packet to the controller


Actions = tuple[tuple[Any, ...], ...]  # (("output", port), ("group", group_id), ...)
RuleKey = tuple[int, int, Match]  # FlowRule.key: (table, priority, match)


@dataclass(frozen=True)
class FlowRule:
    dpid: int
    priority: int
    match: Match
    actions: Actions = ()
    table: int = TABLE_FORWARD
    cookie: int = COOKIE_BASE
    idle_timeout: int = 0

    @property
    def key(self) -> RuleKey:
        return (self.table, self.priority, self.match)


@dataclass(frozen=True)
class GroupRule:
    """A SELECT group: one bucket per port, each watching its port so a dead port leaves the hash at once."""

    dpid: int
    group_id: int
    ports: tuple[int, ...]

    @property
    def key(self) -> int:
        return self.group_id


@dataclass
class SwitchRules:
    flows: dict[RuleKey, FlowRule] = field(default_factory=dict)  # FlowRule.key -> FlowRule
    groups: dict[int, GroupRule] = field(default_factory=dict)  # group_id -> GroupRule

    def add_flow(self, rule: FlowRule) -> None:
        self.flows[rule.key] = rule

    def add_group(self, rule: GroupRule) -> None:
        self.groups[rule.key] = rule


@dataclass(frozen=True)
class Change:
    op: str  # "add" | "modify" | "delete"
    rule: FlowRule | GroupRule


def diff_switch(installed: SwitchRules | None, desired: SwitchRules) -> list[Change]:
    """Ordered changes turning ``installed`` into ``desired`` (both SwitchRules) on one switch.

    Groups are created before the flows that point at them and deleted after the flows that used them, so no
    packet ever meets a missing group.
    """
    installed = installed or SwitchRules()
    return (_upserts(installed.groups, desired.groups)
            + _upserts(installed.flows, desired.flows, _flow_order)
            + _deletes(installed.flows, desired.flows, _flow_order)
            + _deletes(installed.groups, desired.groups))


def diff_keys(installed: SwitchRules | None, desired: SwitchRules, flow_keys: set[RuleKey],
              group_ids: set[int]) -> list[Change]:
    """``diff_switch`` restricted to some flow keys and group ids: the same changes, in the same order, when
    ``installed`` and ``desired`` agree everywhere else (what an incremental plan knows it changed)."""
    installed = installed or SwitchRules()
    have, want = _only(installed, flow_keys, group_ids), _only(desired, flow_keys, group_ids)
    return diff_switch(have, want)


def _only(rules: SwitchRules, flow_keys: set[RuleKey], group_ids: set[int]) -> SwitchRules:
    flows, groups = rules.flows, rules.groups
    return SwitchRules({k: flows[k] for k in flow_keys if k in flows}, {g: groups[g] for g in group_ids if g in groups})


def apply_change(rules: SwitchRules, change: Change) -> None:
    """Record a sent change in ``rules`` (a switch's installed state)."""
    rule = change.rule
    if isinstance(rule, GroupRule):
        if change.op == "delete":
            rules.groups.pop(rule.key, None)
        else:
            rules.groups[rule.key] = rule
    elif change.op == "delete":
        rules.flows.pop(rule.key, None)
    else:
        rules.flows[rule.key] = rule


def _upserts(installed: Mapping[Any, FlowRule | GroupRule], desired: Mapping[Any, FlowRule | GroupRule],
             order: Callable[[Any], Any] | None = None) -> list[Change]:
    """Adds and modifies turning one rule table (key -> rule) of ``installed`` into ``desired``, keys sorted by
    ``order`` (group ids: by value)."""
    # only the keys that change are sorted: a resync that changes a few rules of a large table stays cheap,
    # and unchanged rules are usually the very same objects (``is`` before the field-by-field ``!=``)
    get = installed.get
    changed = [key for key, rule in desired.items() if (old := get(key)) is not rule and old != rule]
    changes = []
    for key in sorted(changed, key=order):
        changes.append(Change("add" if get(key) is None else "modify", desired[key]))
    return changes


def _deletes(installed: Mapping[Any, FlowRule | GroupRule], desired: Mapping[Any, FlowRule | GroupRule],
             order: Callable[[Any], Any] | None = None) -> list[Change]:
    gone = [key for key in installed if key not in desired]
    return [Change("delete", installed[key]) for key in sorted(gone, key=order)]


def _flow_order(key: RuleKey) -> tuple[int, int, str]:
    table, priority, m = key
    return (-table, -priority, _match_text(m))


@lru_cache(maxsize=1 << 16)
def _match_text(m: Match) -> str:
    """repr of a match, memoised: a first install sorts every host's match once per switch."""
    return repr(m)
