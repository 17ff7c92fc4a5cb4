"""OpenFlow errors (controller.southbound.openflow_errors) and what the controller does with a refused rule: the names
checked against the framework's own OpenFlow 1.3 constants, then a switch with a small table driven through the
app: what the controller believes the switch holds is what it holds, refusals are counted and held back."""

import logging

from controller.core.switches import REFUSED_HOLD_S
from controller.desired.rules import Change, FlowRule, match
from controller.southbound.framework import ofproto_v1_3 as ofp
from controller.southbound.openflow_errors import CODES, TYPES, SentChanges, names
from tests import topologies
from tests.clock import FakeClock
from tests.lab import Lab, stop_apps

CODE_PREFIX = {0: "OFPHFC", 1: "OFPBRC", 2: "OFPBAC", 3: "OFPBIC", 4: "OFPBMC", 5: "OFPFMFC", 6: "OFPGMFC",
               7: "OFPPMFC", 8: "OFPTMFC", 11: "OFPRRFC", 12: "OFPMMFC"}


def test_the_names_are_openflow_1_3s():
    for type_, name in TYPES.items():
        assert getattr(ofp, f"OFPET_{name}") == type_, name
    for type_, codes in CODES.items():
        for code, name in enumerate(codes):
            assert getattr(ofp, f"{CODE_PREFIX[type_]}_{name}") == code, (type_, name)
    assert names(5, 1) == ("FLOW_MOD_FAILED", "TABLE_FULL")
    assert names(6, 10) == ("GROUP_MOD_FAILED", "BAD_TYPE")
    assert names(99, 7) == ("99", "7") and names(5, 99) == ("FLOW_MOD_FAILED", "99")


def test_sent_changes_are_found_by_xid_and_bounded():
    sent = SentChanges(kept=3)
    changes = [Change("add", FlowRule(1, 10, match(in_port=p), ())) for p in range(5)]
    for xid, change in enumerate(changes):
        sent.record(1, xid, change)
    assert sent.pop(1, 0) is None and sent.pop(1, 4) is changes[4] and sent.pop(1, 4) is None
    sent.record(2, 9, changes[0])
    sent.forget(1)
    assert sent.pop(1, 3) is None and sent.pop(2, 9) is changes[0]


EDGE = 1000


def small_table_lab(limit, reports_limit=False):
    """A k=4 fat-tree whose first edge switch's table 0 takes ``limit`` entries (its table features say so, or
    say 1,000,000); up and synced on a fake clock."""
    lab = Lab(topologies.fat_tree(4))
    clock = FakeClock(1000.0)
    lab.app.core.clock = clock
    lab.switches[EDGE].table_limit = {0: limit}
    lab.switches[EDGE].reports_limit = reports_limit
    lab.bring_up()
    lab.pump()  # the error replies
    lab.app.resync()
    lab.pump()
    return lab, clock


def believed_is_held(lab):
    core = lab.app.core
    return all(core.installed[d].flows == sw.table.flows and core.installed[d].groups == sw.table.groups
               for d, sw in lab.switches.items())


def test_a_rule_a_full_table_refuses_is_not_believed_installed_counted_and_held_back(caplog):
    with caplog.at_level(logging.WARNING, logger="mlroute"):
        lab, clock = small_table_lab(limit=9)
    core, edge = lab.app.core, lab.switches[EDGE]
    refused = edge.errors_sent
    assert refused > 0 and believed_is_held(lab)  # before: the refused rules were believed installed
    assert core.metrics.openflow_errors.labels(str(EDGE), "FLOW_MOD_FAILED", "TABLE_FULL")._value.get() == refused
    assert core.metrics.rules_refused._value.get() == refused
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1 and "switch 1000 refused add" in lines[0] and "TABLE_FULL" in lines[0], lines
    mods = edge.flow_mods
    for _ in range(3):  # resyncs within the hold send none of them again
        lab.app.resync()
        lab.pump()
    assert edge.flow_mods == mods and edge.errors_sent == refused
    clock.advance(REFUSED_HOLD_S)
    lab.app._send_actions(core.housekeeping().actions)  # the hold is over: tried once more, refused once more
    lab.app.resync()
    lab.pump()
    assert edge.errors_sent == 2 * refused and believed_is_held(lab)
    stop_apps()


def test_once_the_table_has_room_the_held_back_rules_go_in():
    lab, clock = small_table_lab(limit=9)
    core, edge = lab.app.core, lab.switches[EDGE]
    assert edge.errors_sent > 0
    edge.table_limit = {}  # an operator freed the table
    clock.advance(REFUSED_HOLD_S)
    lab.app._send_actions(core.housekeeping().actions)
    lab.app.resync()
    lab.pump()
    assert not core.belief.refusals and believed_is_held(lab)
    assert core.installed[EDGE].flows == core.plan.desired[EDGE].flows
    for src in lab.ref.hosts:  # the edge's hosts reach everyone again
        for dst in lab.ref.hosts:
            if src != dst:
                want = lab.ref.hosts[dst]
                assert lab.trace(src, dst).delivered == {(want.dpid, want.port)}, (src, dst)
    stop_apps()


def test_a_group_added_that_the_switch_has_is_sent_again_as_a_modify_and_stays_believed():
    from controller import config
    from controller.core import ControllerCore
    from controller.desired.rules import GroupRule, SwitchRules

    core = ControllerCore(config.parse(""), FakeClock())
    group = GroupRule(EDGE, 7, (1, 2))
    core.installed[EDGE] = SwitchRules({}, {7: group})
    retry = core.openflow_error(EDGE, ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_GROUP_EXISTS, Change("add", group))
    assert retry == [Change("modify", group)] and core.installed[EDGE].groups == {7: group} and not core.belief.refusals
    retry = core.openflow_error(EDGE, ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_UNKNOWN_GROUP, Change("modify", group))
    assert retry == [Change("add", group)]
    assert core.openflow_error(EDGE, ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_OUT_OF_GROUPS, Change("add", group)) == []
    assert core.installed[EDGE].groups == {} and (EDGE, ("group", 7)) in core.belief.refusals
