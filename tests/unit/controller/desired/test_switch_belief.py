"""What a switch holds, second-hand until it says so: changes pending until a barrier after them is answered,
refusals, unanswered barriers and read-backs: the belief alone, then the app over fake switches."""

from controller.core.state import BARRIER_ANSWER_S
from controller.desired.rules import COOKIE_FLOW_MISS, Change, FlowRule, GroupRule, SwitchRules, apply_change, match
from controller.desired.switch_belief import SwitchBelief
from tests import topologies
from tests.clock import FakeClock
from tests.decision_steps import te_step
from tests.lab import STRIDE4, Lab, poll, stop_apps, tcp_packet

EDGE = 1000

A = FlowRule(1, 10, match(eth_type=0x800, ipv4_dst="10.0.0.1"), (("output", 1),), table=1)
B = FlowRule(1, 10, match(eth_type=0x800, ipv4_dst="10.0.0.2"), (("output", 2),), table=1)
C = FlowRule(1, 20, match(eth_type=0x800, ipv4_dst="10.0.0.3"), (("output", 3),), table=2)
G = GroupRule(1, 7, (3, 4))


def send(belief, dpid, *changes):
    """What the core does: the belief's held rules take the change, the change is recorded as sent."""
    for change in changes:
        apply_change(belief.held.setdefault(dpid, SwitchRules()), change)
        belief.sent(dpid, change)


def test_stale_switches_are_taken_once_by_the_sync_that_diffs_them_whole():
    belief = SwitchBelief()
    belief.mark_stale(1)
    belief.mark_stale(2, 1)
    assert belief.any_stale and belief.take_stale() == {1, 2}
    assert not belief.any_stale and belief.take_stale() == set()


def test_an_audit_answer_waits_for_the_next_sync_with_the_last_change_sent_when_it_was_asked():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", A))
    belief.audit_asked(1)
    send(belief, 1, Change("add", B))  # sent while the audit is out: not judged by it
    reported = SwitchRules({A.key: A})
    belief.audit_answered(1, reported)
    assert belief.audit_waiting(1)
    assert belief.take_audited() == [(1, reported, 1)]
    assert not belief.audit_waiting(1) and belief.take_audited() == []


def test_a_counting_rule_being_restored_stops_once_done_or_after_its_time():
    belief = SwitchBelief()
    belief.restoring(1, "flow-a", since=0.0)
    belief.restoring(1, "flow-b", since=5.0)
    assert belief.restores(1) and not belief.restores(2)
    assert belief.still_restoring(1, lambda k: k == "flow-a", now=6.0, restore_s=10.0) == {"flow-b"}
    assert belief.still_restoring(1, lambda k: False, now=15.5, restore_s=10.0) == set()
    assert not belief.restores(1)


def test_a_change_is_pending_until_a_barrier_sent_after_it_is_answered():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", G), Change("add", A), Change("add", B))
    assert belief.confirmed_table_counts(1) == {} and belief.confirmed_groups(1) == 0
    assert belief.unfenced() == [1]
    assert belief.fence(1, xid=50, now=0.0)
    assert belief.unfenced() == []
    send(belief, 1, Change("add", C))  # after the barrier: not covered by it
    assert belief.unfenced() == [1]
    assert belief.answered(1, 50) == 3
    assert belief.confirmed_table_counts(1) == {1: 2} and belief.confirmed_groups(1) == 1
    assert belief.pending(1) == [Change("add", C)]
    assert belief.confirmed_flows() == 2
    assert belief.answered(1, 50) == 0, "a reply answered twice (or a stranger's xid) confirms nothing"


def test_a_refused_change_leaves_the_pending_and_the_others_are_confirmed_by_the_barrier():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", A), Change("add", B))
    belief.fence(1, xid=9, now=0.0)
    refused = Change("add", B)
    belief.refused(1, refused)
    apply_change(belief.held[1], Change("delete", B))  # (the core undoes it in what is held)
    assert belief.pending(1) == [Change("add", A)]
    assert belief.answered(1, 9) == 1
    assert belief.confirmed_table_counts(1) == {1: 1}


def test_pending_deletes_and_modifies_count_what_the_switch_still_holds():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", A), Change("add", B))
    belief.fence(1, 1, 0.0)
    belief.answered(1, 1)
    send(belief, 1, Change("delete", A), Change("modify", B), Change("add", C), Change("delete", C))
    assert belief.confirmed_table_counts(1) == {1: 2}, "A still there, B still there, C never confirmed"
    assert belief.confirmed_flows() == 2


def test_a_rule_gone_from_held_while_its_add_is_pending_is_not_counted_twice():
    """A counting rule that idled out (flow removed) before the barrier after its add came back."""
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", A))
    del belief.held[1].flows[A.key]
    assert belief.confirmed_table_counts(1) == {} and belief.confirmed_flows() == 0


def test_changes_a_sync_planned_count_unconfirmed_until_sent_and_confirmed():
    """A sync believes its steps at once and the shell sends them after, paced and step by step: a scrape in
    between counts them pending, not installed."""
    belief = SwitchBelief()
    planned = [Change("add", A), Change("add", B)]
    for change in planned:
        apply_change(belief.held.setdefault(1, SwitchRules()), change)
    belief.planned(1, planned)
    assert belief.confirmed_flows() == 0 and belief.pending_total() == 2
    belief.sent(1, planned[0])
    assert belief.pending(1) == planned and belief.confirmed_flows() == 0
    belief.sent(1, planned[1])
    assert belief.fence(1, xid=9, now=0.0) and belief.answered(1, 9) == 2
    assert belief.confirmed_flows() == 2 and belief.pending_total() == 0


def test_an_unanswered_barrier_is_named_once_and_leaves_its_changes_pending():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", A))
    belief.fence(1, 5, now=100.0)
    assert belief.overdue(now=109.0, timeout_s=10.0) == []
    assert belief.overdue(now=110.0, timeout_s=10.0) == [1]
    assert belief.overdue(now=200.0, timeout_s=10.0) == [], "given up once, not named again"
    assert belief.timeouts == 1
    assert belief.pending(1) == [Change("add", A)] and belief.confirmed_flows() == 0
    assert belief.unfenced() == [1], "a later barrier may still confirm them"
    assert belief.answered(1, 5) == 0, "a reply after the barrier was given up confirms nothing"


def test_a_read_back_confirms_what_was_sent_before_it_was_asked_for():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    send(belief, 1, Change("add", A))
    mark = belief.mark(1)
    send(belief, 1, Change("add", B))  # sent after the audit's request: not judged by it
    belief.first_hand(1, mark)
    assert belief.pending(1) == [Change("add", B)]
    belief.first_hand(1)
    assert belief.pending(1) == [] and belief.pending_total() == 0


def test_a_switch_without_barriers_confirms_at_send_and_a_forgotten_switch_holds_nothing():
    belief = SwitchBelief()
    belief.held[1] = SwitchRules()
    apply_change(belief.held[1], Change("add", A))
    belief.sent(1, Change("add", A), confirmed=True)
    assert belief.pending(1) == [] and belief.fence(1, 3, 0.0) is False
    assert belief.confirmed_table_counts(1) == {1: 1}
    belief.forget(1)
    assert 1 not in belief.held and belief.confirmed_flows() == 0 and belief.unfenced() == []


# -- the app over fake switches: what REST reports installed is what the switch holds -----------------------------
def rest_installed(lab, dpid):
    """(flow entries, groups) ``GET /mlroute/switches`` reports installed at ``dpid``, and its pending changes."""
    view = next(v for v in lab.app.core.switches_json() if v["dpid"] == dpid)
    return (sum(t["mlroute_entries"] for t in view["tables"].values()), view["groups_installed"]), view["pending"]


def scraped(core, name):
    """A metric's value as a /metrics scrape reads it (the belief's gauges are counted then)."""
    return core.metrics.registry.get_sample_value(name)


def held(sw):
    return len(sw.table.flows), len(sw.table.groups)


def audit_round(lab):
    """What the resync loop does once: resync, barriers for what was sent, audits due; then the replies."""
    lab.app.resync()
    lab.app.start_audits()
    lab.pump()
    lab.app.resync()
    lab.pump()


def test_a_switch_that_never_answers_a_barrier_is_believed_to_hold_only_what_it_reports_when_read_back():
    lab = Lab(topologies.fat_tree(4))
    clock = FakeClock(1000.0)
    lab.app.core.clock = clock
    sw = lab.switches[EDGE]
    sw.answers_barriers = False
    lab.bring_up()
    lab.pump()
    installed, pending = rest_installed(lab, EDGE)
    assert held(sw)[0] > 0 and installed == (0, 0) and pending == sum(held(sw)), \
        "sent, applied, never confirmed: not reported installed"
    other = next(d for d in lab.switches if d != EDGE)
    assert rest_installed(lab, other) == (held(lab.switches[other]), 0), "the others confirmed theirs"
    core = lab.app.core
    clock.advance(BARRIER_ANSWER_S)
    audit_round(lab)  # the barrier given up: the switch is read back at once
    assert core.metrics.barrier_timeouts._value.get() == 1
    assert rest_installed(lab, EDGE) == (held(sw), 0), "what it reported is what is installed"
    assert scraped(core, "mlroute_rules_installed") == sum(len(s.table.flows) for s in lab.switches.values())
    assert scraped(core, "mlroute_rules_pending") == 0
    stop_apps()


def test_a_switch_refusing_one_change_of_a_batch_reports_the_rest_installed():
    lab = Lab(topologies.fat_tree(4))
    lab.app.core.clock = FakeClock(1000.0)
    sw = lab.switches[EDGE]
    sw.table_limit, sw.reports_limit = {0: 9}, False  # the table says 1,000,000 entries and refuses the tenth
    lab.bring_up()
    lab.pump()
    assert sw.errors_sent > 0
    assert rest_installed(lab, EDGE) == (held(sw), 0)
    assert scraped(lab.app.core, "mlroute_rules_installed") == sum(len(s.table.flows) for s in lab.switches.values())
    stop_apps()


def test_a_switch_wiped_between_its_changes_and_the_barrier_is_believed_wiped_once_its_tables_are_polled():
    lab = Lab(topologies.fat_tree(4))
    lab.app.core.clock = FakeClock(1000.0)
    sw = lab.switches[EDGE]

    def wipe_once():
        sw.wipe()
        sw.before_barrier = None

    sw.before_barrier = wipe_once
    lab.bring_up()
    lab.pump()
    assert held(sw) == (0, 0) and rest_installed(lab, EDGE)[0] != (0, 0), "the barrier's answer cannot tell"
    for s in lab.switches.values():  # the next poll's table stats: fewer entries than confirmed, read back now
        s.send_msg(s.ofproto_parser.OFPTableStatsRequest(s, 0))
    lab.pump()
    audit_round(lab)
    assert held(sw)[0] > 0 and rest_installed(lab, EDGE) == (held(sw), 0), "read back, repaired, confirmed"
    stop_apps()


def test_what_a_sync_planned_and_has_not_sent_yet_is_not_reported_installed():
    """The sync believes its steps when it plans them; the shell sends them after (paced, a barrier between
    steps). A scrape in between reports what the switches hold as installed, the rest pending."""
    lab = Lab(topologies.fat_tree(4))
    lab.bring_up()
    lab.pump()
    for key in STRIDE4:
        src = lab.ref.hosts[key.src_ip]
        lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)
    lab.app.resync()
    lab.pump()
    for seconds in (2, 4, 6):
        poll(lab, STRIDE4, seconds)
    assert te_step(lab.app.core, wait=True).applied
    core = lab.app.core
    steps = core.sync()  # planned and believed; the shell has sent none of it yet
    planned = sum(len(step.changes) for step in steps)
    assert planned > 0
    assert scraped(core, "mlroute_rules_installed") == sum(len(s.table.flows) for s in lab.switches.values())
    assert scraped(core, "mlroute_rules_pending") == planned
    stop_apps()
