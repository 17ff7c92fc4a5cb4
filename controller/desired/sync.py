"""Bringing switches to their desired rules: the desired state, and make-before-break ordering, as values.

``desired_state`` is what every switch should hold (the forwarding baseline plus the traffic-engineering layer).
``plan_sync`` turns (installed, desired) per switch into ordered steps across all switches:

1. groups (flows may point at them),
2. elephants' pinned upper hops, then a barrier on those switches,
3. every other add/modify (the ingress rule that moves an elephant onto its new hops comes only now), then a
   barrier, so nothing is deleted before its replacement is in place,
4. deletions,
5. groups nothing uses any more.

``ReadBack`` tracks switches whose installed state is being read back (flow stats filtered by mlroute's cookie,
group descriptions) after they (re)connect: such a switch is synchronised only once its real tables are known,
by the same diff as any change, so nothing that is still right is deleted or re-sent.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

import networkx as nx

from controller.desired import forwarding, te_rules
from controller.desired.flowcopy import CONTROLLER_COPY, NewFlowCopy
from controller.desired.rules import (
    COOKIE_ELEPHANT,
    COOKIE_FLOW,
    COOKIE_SEEN,
    TABLE_FORWARD,
    Change,
    FlowRule,
    GroupRule,
    SwitchRules,
    apply_change,
    diff_keys,
    diff_switch,
)
from controller.state.flowkey import FlowKey, five_tuple_match
from controller.state.tiers import TierInference
from controller.state.topology import Topology

Path = tuple[int, ...]


class Phase(IntEnum):
    GROUPS = 0
    PINNED_HOPS = 1
    OTHER = 2
    DELETES = 3
    UNUSED_GROUPS = 4

    @property
    def barrier_after(self) -> bool:
        """Switches must confirm this phase before the next one starts (make-before-break)."""
        return self in (Phase.PINNED_HOPS, Phase.OTHER)


def phase_of(change: Change) -> Phase:
    rule = change.rule
    if isinstance(rule, GroupRule):
        return Phase.UNUSED_GROUPS if change.op == "delete" else Phase.GROUPS
    if change.op == "delete":
        return Phase.DELETES
    return Phase.PINNED_HOPS if rule.cookie == COOKIE_ELEPHANT else Phase.OTHER


@dataclass
class Step:
    phase: Phase
    changes: list[tuple[int, Change]] = field(default_factory=list)  # (dpid, change), in sending order

    @property
    def barrier_dpids(self) -> set[int]:
        """Switches to fence with a barrier after this step (empty when the phase needs none)."""
        return {dpid for dpid, _ in self.changes} if self.phase.barrier_after else set()


def plan_sync(installed: Mapping[int, SwitchRules | None], desired: Mapping[int, SwitchRules],
              dpids: Iterable[int], pause: Callable[[], None] | None = None,
              only: Mapping[int, tuple[set, set]] | None = None) -> list[Step]:
    """Ordered, non-empty steps bringing each switch of ``dpids`` from ``installed`` to ``desired``
    (``pause`` is called after each switch: a first install diffs hundreds of thousands of rules).
    ``only`` (dpid -> (flow keys, group ids)) limits a switch's diff to what is known to have changed."""
    steps = {phase: Step(phase) for phase in Phase}
    only = only or {}
    for dpid in dpids:
        want = desired.get(dpid)
        if want is None:
            continue
        keys = only.get(dpid)
        diff = diff_switch(installed.get(dpid), want) if keys is None else \
            diff_keys(installed.get(dpid), want, *keys)
        for change in diff:
            steps[phase_of(change)].changes.append((dpid, change))
        if pause is not None:
            pause()
    return [step for step in steps.values() if step.changes]


def additions_only(steps: list[Step], installed: dict[int, SwitchRules], keep: Container[int] = (),
                   live_ports: Mapping[int, Container[int]] | None = None) -> list[Step]:
    """Only the steps' additions (nothing modified or deleted), recorded in ``installed`` as they go: what a
    controller that is still learning from the switches may safely send. A switch that disconnected while the
    steps were planned (the plan yields) is left out: its state is read back when it returns. The switches in
    ``keep`` (read back forwarding, while the links found so far make no Clos) keep their forwarding as it is,
    no table-1 entry or group added: the plan of a fabric LLDP has only begun to find is shortest-path
    forwarding over the links seen so far, and its per-host entries, above the compact plan's host-port
    defaults, moved live traffic onto it for the rest of the recovery (measured: 315 rule changes 0.6 s after a
    restart under 8 pinned elephants, 295 more when it ended, the aggregate at 0.7-0.8 of its rate for a 3-s
    window). With ``live_ports`` (dpid -> its live ports), a rule the switch holds that sends into a port that
    is down may also be modified or deleted: it carries nothing any more, and leaving it until recovery ends kept
    an elephant whose link failed meanwhile at 0 for the rest of the recovery (a takeover under a link cut)."""
    out = []
    for step in steps:
        sent = [(dpid, c) for dpid, c in step.changes if dpid in installed
                and (c.op == "add" or live_ports is not None
                     and _into_dead_port(installed[dpid], c, live_ports.get(dpid)))
                and not (dpid in keep and (isinstance(c.rule, GroupRule) or c.rule.table == TABLE_FORWARD))]
        for dpid, change in sent:
            apply_change(installed[dpid], change)
        if sent:
            out.append(Step(step.phase, sent))
    return out


def _into_dead_port(held: SwitchRules, change: Change, live: Container[int] | None) -> bool:
    """Whether ``change`` modifies or deletes a flow the switch holds whose outputs include a port not live."""
    if isinstance(change.rule, GroupRule):
        return False
    old = held.flows.get(change.rule.key)
    return old is not None and live is not None and any(
        kind == "output" and arg[0] not in live for kind, *arg in old.actions)


def desired_state(topology: Topology, tiers: TierInference | None, accounting: Mapping[FlowKey, tuple[int, int]],
                  pinned: Mapping[te_rules.RouteKey, Path], *, stagger: bool, idle_timeout: int,
                  graph: nx.Graph | None = None, copy: NewFlowCopy = CONTROLLER_COPY) -> dict[int, SwitchRules]:
    """Every switch's desired rules: the forwarding baseline plus the traffic-engineering layer."""
    graph = graph if graph is not None else topology.graph()
    levels = tiers.levels if tiers is not None else {}
    desired = forwarding.plan(topology, levels, stagger=stagger, graph=graph)
    for rule in te_rules.te_rules(topology, tiers, accounting, pinned, idle_timeout, graph=graph, copy=copy):
        if rule.dpid in desired:
            desired[rule.dpid].add_flow(rule)
    return desired


def pinned_paths_broken(pinned: Mapping[te_rules.RouteKey, Path], graph: nx.Graph) -> bool:
    """Does any pinned path cross a switch or link that is no longer live?"""
    return any(any(d not in graph for d in p) or not all(graph.has_edge(a, b) for a, b in zip(p, p[1:]))
               for p in pinned.values())


def forget_counting_rule(rules: SwitchRules | None, key: FlowKey, in_port: int | None) -> None:
    """The switch removed ``key``'s counting rule itself (idle timeout): it is no longer installed."""
    if rules is None:
        return
    gone = five_tuple_match(key, in_port)
    rules.flows = {k: r for k, r in rules.flows.items() if not (r.cookie == COOKIE_FLOW and r.match == gone)}


@dataclass
class _Pending:
    started: float | None  # when its tables were asked for (None: not yet, it waits its turn)
    flows: list[FlowRule] | None = None
    groups: list[GroupRule] | None = None


class ReadBack:
    """Switches whose installed rules are being read back after they (re)connected."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pending: dict[int, _Pending] = {}

    def start(self, dpid: int, now: float | None) -> None:
        """``dpid`` is to be read back; asked for at ``now`` (None: not yet, no time runs until it is)."""
        self._pending[dpid] = _Pending(now)

    def pending(self, dpid: int) -> bool:
        return dpid in self._pending

    def cancel(self, dpid: int) -> None:
        self._pending.pop(dpid, None)

    def flows_read(self, dpid: int, flows: list[FlowRule]) -> SwitchRules | None:
        """The switch's mlroute flow rules arrived; returns its installed state once groups are known too.
        Entries the switch learned itself (``COOKIE_SEEN``, flowcopy.py) are its own state, not ours to diff."""
        if dpid in self._pending:
            self._pending[dpid].flows = [f for f in flows if f.cookie != COOKIE_SEEN]
        return self._complete(dpid)

    def groups_read(self, dpid: int, groups: list[GroupRule]) -> SwitchRules | None:
        if dpid in self._pending:
            self._pending[dpid].groups = groups
        return self._complete(dpid)

    def overdue(self, now: float) -> list[int]:
        """Switches that did not answer in time: their state is unknown and must be rebuilt from scratch."""
        late = [d for d, p in self._pending.items() if p.started is not None and now - p.started > self.timeout_s]
        for dpid in late:
            del self._pending[dpid]
        return late

    def _complete(self, dpid: int) -> SwitchRules | None:
        p = self._pending.get(dpid)
        if p is None or p.flows is None or p.groups is None:
            return None
        del self._pending[dpid]
        rules = SwitchRules()
        for group in p.groups:
            rules.add_group(group)
        for flow in p.flows:
            rules.add_flow(flow)
        return rules
