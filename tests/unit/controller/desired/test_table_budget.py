"""The table budget: additions past a table's limit are held back, what matters most goes first; and the app
over a fake switch whose table features report a small table: no TABLE_FULL, ever."""

from controller.desired import table_budget
from controller.desired.rules import (
    COOKIE_BASE,
    COOKIE_ELEPHANT,
    COOKIE_FLOW,
    COOKIE_FLOW_MISS,
    PRIO_PAIR_COUNT,
    TABLE_CLASSIFY,
    Change,
    FlowRule,
    SwitchRules,
    match,
)
from controller.desired.sync import Phase, Step
from controller.state.flowkey import FlowKey, pair_key
from tests import topologies
from tests.decision_steps import te_step
from tests.lab import PARSER, Lab, stats_reply, stop_apps, tcp_packet


def rule(prio, cookie=COOKIE_BASE, table=TABLE_CLASSIFY, port=1):
    return FlowRule(1, prio, match(in_port=port), (), table=table, cookie=cookie)


def test_headroom_is_two_percent_and_at_least_one_entry():
    assert table_budget.limit(9) == 8 and table_budget.limit(512) == 501 and table_budget.limit(0) == 0


def test_forwarding_goes_in_before_pins_and_pins_before_counting_rules_whatever_the_phase():
    counting, pin, guard_allow, guard_drop = (rule(20, COOKIE_FLOW), rule(30, COOKIE_ELEPHANT), rule(3, port=2),
                                              rule(2, port=2))
    copy = rule(5, COOKIE_FLOW_MISS, port=3)
    steps = [Step(Phase.PINNED_HOPS, [(1, Change("add", pin))]),
             Step(Phase.OTHER, [(1, Change("add", counting)), (1, Change("add", copy)),
                                (1, Change("add", guard_allow)), (1, Change("add", guard_drop))])]
    installed = {1: SwitchRules()}
    installed[1].add_flow(rule(100, port=9))
    kept, held = table_budget.admit(steps, installed, {1: {TABLE_CLASSIFY: 4}})
    assert [c.rule for s in kept for _, c in s.changes] == [pin, guard_allow, guard_drop]
    assert {c.rule for _, c in held} == {counting, copy}
    kept, held = table_budget.admit(steps, installed, {1: {TABLE_CLASSIFY: 2}})
    assert [c.rule for s in kept for _, c in s.changes] == [guard_allow], "the allow before its drop rule"


def test_modifications_deletions_other_tables_and_unlimited_switches_pass():
    old = rule(10)
    steps = [Step(Phase.OTHER, [(1, Change("modify", old)), (1, Change("add", rule(10, table=1))),
                                (2, Change("add", rule(10)))]),
             Step(Phase.DELETES, [(1, Change("delete", rule(11)))])]
    installed = {1: SwitchRules({old.key: old}), 2: SwitchRules()}
    kept, held = table_budget.admit(steps, installed, {1: {TABLE_CLASSIFY: 0}})
    assert kept == steps and held == []


# -- the app over a switch that reports a small table ----------------------------------------------------------
EDGE = 1000


def test_a_switch_that_reports_a_small_table_is_never_sent_more_than_fits():
    lab = Lab(topologies.fat_tree(4))
    edge = lab.switches[EDGE]
    edge.table_limit = {0: 18}  # its table features say so; the switch would refuse entry 19 (it needs 21)
    try:
        lab.bring_up()
        lab.pump()
        lab.app.resync()
        core = lab.app.core
        in_table0 = sum(1 for r in edge.table.flows.values() if r.table == 0)
        assert edge.errors_sent == 0 and in_table0 <= table_budget.limit(18)
        assert core.installed[EDGE].flows == edge.table.flows  # what is believed is what it holds
        held = core.belief.over_budget[EDGE]
        assert held and all(c.rule.cookie in (COOKIE_FLOW, COOKIE_FLOW_MISS) for c in held.values()), \
            "guards and forwarding first: only new-flow copies wait"
        assert core.metrics.rules_over_budget._value.get() == len(held)
        for src in lab.ref.hosts:
            for dst in lab.ref.hosts:
                if src != dst:
                    want = lab.ref.hosts[dst]
                    assert lab.trace(src, dst).delivered == {(want.dpid, want.port)}, (src, dst)
        view = next(s for s in core.switches_json() if s["dpid"] == EDGE)
        assert view["over_budget"] == len(held) and view["limits"] == {"0": 17}
        # a new flow from one of its hosts: no room for its counting rule, so it stays on ECMP, counted as such
        key = FlowKey("10.0.0.1", "10.0.0.9", 6, 40001, 5201)
        src = lab.ref.hosts[key.src_ip]
        mods = edge.flow_mods
        lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)
        assert edge.flow_mods == mods and edge.errors_sent == 0
        assert core.metrics.flows_uncounted.labels("table_full")._value.get() == 1
        lab.app._send_actions(core.housekeeping().actions)  # every poll the held rules are tried: none fits
        lab.app.resync()
        lab.pump()
        assert edge.flow_mods == mods and edge.errors_sent == 0, "no resend loop"
    finally:
        stop_apps()


def pair_stat(pair, in_port, byte_count, seconds):
    """A flow-stats entry of a host pair's counting rule (no transport fields), as the switch reports it."""
    return PARSER.OFPFlowStats(table_id=0, duration_sec=seconds, duration_nsec=0, priority=PRIO_PAIR_COUNT,
                               idle_timeout=10, hard_timeout=0, flags=0, cookie=COOKIE_FLOW, packet_count=1,
                               byte_count=byte_count, match=PARSER.OFPMatch(in_port=in_port, eth_type=0x0800,
                                                                            ipv4_src=pair.src_ip,
                                                                            ipv4_dst=pair.dst_ip),
                               instructions=[])


def test_a_tight_ingress_table_counts_whole_host_pairs_and_pins_a_busy_one():
    """Issue 20: where a table is tight, count per host pair. The edge's table 0 has room for 23 entries and its
    forwarding, guards and copies take 18: fewer free than a quarter of the room, so each new flow is counted by
    its host pair (one entry for all of the pair's flows, below any 5-tuple's), and a pair at 10 Mb/s is an
    elephant the traffic engineer pins like any other. Before: one entry per 5-tuple until the table was
    full, then flows uncounted (an elephant arriving then was never seen)."""
    lab = Lab(topologies.fat_tree(4))
    edge = lab.switches[EDGE]
    edge.table_limit = {0: 24}
    try:
        lab.bring_up()
        lab.pump()
        lab.app.resync()
        core = lab.app.core
        src = lab.ref.hosts["10.0.0.1"]
        before = {k for k, r in edge.table.flows.items() if r.cookie == COOKIE_FLOW}
        flows = [FlowKey("10.0.0.1", "10.0.0.9", 6, 40000 + i, 5201) for i in range(3)]
        flows.append(FlowKey("10.0.0.1", "10.0.0.13", 6, 40010, 5201))
        for key in flows:
            lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)
        counting = [r for k, r in edge.table.flows.items() if r.cookie == COOKIE_FLOW and k not in before]
        assert sorted(dict(r.match)["ipv4_dst"] for r in counting) == ["10.0.0.13", "10.0.0.9"], counting
        assert all(r.priority == PRIO_PAIR_COUNT and "tcp_src" not in dict(r.match) for r in counting)
        assert core.metrics.flows_by_pair._value.get() == 2 and edge.errors_sent == 0
        pair = pair_key(flows[0])
        for seconds in (2, 4, 6):  # three polls: the pair to 10.0.0.9 at 10 Mb/s, the other one quiet
            lab.app.flow_stats_reply(stats_reply(edge, [pair_stat(pair, src.port, int(seconds * 1.25e6), seconds),
                                                        pair_stat(pair_key(flows[3]), src.port, 100, seconds)]))
        te_step(core, wait=True)
        lab.app.resync()
        assert pair in core.te.pinned, core.te.pinned
        path = core.te.pinned[pair]
        assert [e["proto"] for e in core.elephants_json()] == [0], "listed as a whole host pair"
        t = lab.trace("10.0.0.1", "10.0.0.9", ip_proto=6, tcp_src=40001, tcp_dst=5201)
        assert t.paths == [list(path)], (t.paths, path)
        assert core.installed[EDGE].flows == edge.table.flows and edge.errors_sent == 0
    finally:
        stop_apps()
