"""Desired state and make-before-break ordering as values."""

import networkx as nx

from controller.desired import sync
from controller.desired.rules import (
    COOKIE_BASE,
    COOKIE_ELEPHANT,
    COOKIE_FLOW,
    COOKIE_SEEN,
    PRIO_SEEN,
    TABLE_SEEN,
    Change,
    FlowRule,
    GroupRule,
    SwitchRules,
    match,
)
from controller.state.flowkey import FlowKey, five_tuple_match


def rules(*items):
    out = SwitchRules()
    for item in items:
        (out.add_group if isinstance(item, GroupRule) else out.add_flow)(item)
    return out


def test_steps_run_groups_then_pinned_hops_then_the_rest_then_deletions_with_barriers_between():
    old_host = FlowRule(1, 10, match(ipv4_dst="10.0.0.9"), (("output", 1),))
    old_group = GroupRule(1, 5, (1, 2))
    installed = {1: rules(old_host, old_group), 2: rules()}
    hop = FlowRule(2, 30, match(ipv4_dst="10.0.0.3"), (("output", 4),), table=0, cookie=COOKIE_ELEPHANT)
    ingress = FlowRule(1, 20, match(ipv4_dst="10.0.0.3"), (("output", 3),), table=0, cookie=COOKIE_FLOW)
    group = GroupRule(1, 6, (3, 4))
    desired = {1: rules(ingress, group), 2: rules(hop)}
    steps = sync.plan_sync(installed, desired, [1, 2])
    assert [s.phase for s in steps] == [sync.Phase.GROUPS, sync.Phase.PINNED_HOPS, sync.Phase.OTHER,
                                        sync.Phase.DELETES, sync.Phase.UNUSED_GROUPS]
    assert [s.changes for s in steps] == [[(1, Change("add", group))], [(2, Change("add", hop))],
                                          [(1, Change("add", ingress))], [(1, Change("delete", old_host))],
                                          [(1, Change("delete", old_group))]]
    assert [s.barrier_dpids for s in steps] == [set(), {2}, {1}, set(), set()]


def test_only_the_named_switches_are_synchronised():
    desired = {1: rules(FlowRule(1, 0, match())), 2: rules(FlowRule(2, 0, match()))}
    steps = sync.plan_sync({}, desired, [2])
    assert [dpid for s in steps for dpid, _ in s.changes] == [2]
    assert sync.plan_sync({1: desired[1]}, desired, [1]) == []


def test_read_back_completes_with_flows_and_groups_and_late_switches_are_reported():
    rb = sync.ReadBack(timeout_s=5)
    rb.start(1, now=0)
    rb.start(2, now=0)
    flow, group = FlowRule(1, 0, match(), cookie=COOKIE_BASE), GroupRule(1, 3, (1, 2))
    assert rb.flows_read(1, [flow]) is None and rb.pending(1)
    state = rb.groups_read(1, [group])
    assert state.flows == {flow.key: flow} and state.groups == {3: group} and not rb.pending(1)
    assert rb.overdue(now=4) == [] and rb.overdue(now=6) == [2] and not rb.pending(2)
    assert rb.groups_read(9, []) is None  # a reply nobody asked for


def test_read_back_leaves_out_what_the_switch_learned_itself():
    rb = sync.ReadBack(timeout_s=5)
    rb.start(1, now=0)
    ours = FlowRule(1, 0, match(), cookie=COOKIE_BASE)
    learned = FlowRule(1, PRIO_SEEN, match(eth_type=0x0800, ip_proto=6, tcp_src=1), table=TABLE_SEEN,
                       cookie=COOKIE_SEEN)
    rb.flows_read(1, [ours, learned])
    assert rb.groups_read(1, []).flows == {ours.key: ours}


def test_broken_pins_and_forgotten_counting_rules():
    g = nx.path_graph([1, 2, 3])
    assert not sync.pinned_paths_broken({"a": (1, 2, 3)}, g)
    assert sync.pinned_paths_broken({"a": (1, 2, 4)}, g)
    g.remove_edge(2, 3)
    assert sync.pinned_paths_broken({"a": (1, 2, 3)}, g)
    key = FlowKey("10.0.0.1", "10.0.0.2", 6, 1, 2)
    counting = FlowRule(1, 20, five_tuple_match(key, 3), table=0, cookie=COOKIE_FLOW)
    other = FlowRule(1, 20, five_tuple_match(key, 4), table=0, cookie=COOKIE_FLOW)
    held = rules(counting, other)
    sync.forget_counting_rule(held, key, 3)
    assert list(held.flows.values()) == [other]


def test_while_recovering_a_rule_into_a_port_that_is_down_may_change_and_the_rest_only_grows():
    """A pinned hop into a link that failed during recovery is moved at once (it carries nothing); a rule into a
    live port keeps its place until recovery ends, whatever the partial plan says."""
    pin = FlowRule(7, 30, match(eth_type=0x0800, ipv4_src="10.0.0.1"), (("output", 3),))
    live_rule = FlowRule(7, 30, match(eth_type=0x0800, ipv4_src="10.0.0.2"), (("output", 4),))
    added = FlowRule(7, 30, match(eth_type=0x0800, ipv4_src="10.0.0.3"), (("output", 4),))
    moved = FlowRule(7, 30, pin.match, (("output", 4),))
    installed = {7: SwitchRules({pin.key: pin, live_rule.key: live_rule})}
    steps = [sync.Step(sync.Phase.OTHER, [(7, Change("add", added)), (7, Change("modify", moved))]),
             sync.Step(sync.Phase.DELETES, [(7, Change("delete", live_rule))])]
    before = {7: SwitchRules(dict(installed[7].flows))}
    assert [c for s in sync.additions_only(steps, before) for _, c in s.changes] == [Change("add", added)]
    sent = sync.additions_only(steps, installed, live_ports={7: {1, 2, 4}})  # port 3 is down
    assert [c for s in sent for _, c in s.changes] == [Change("add", added), Change("modify", moved)]
    assert installed[7].flows == {pin.key: moved, live_rule.key: live_rule, added.key: added}

