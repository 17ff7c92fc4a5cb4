"""New transport flows reach the controller once: with ``learn`` the switch marks a copied 5-tuple as seen (the
tables parsed back from the real OpenFlow bytes, then traced as Open vSwitch runs them); with ``controller``
every packet before the counting rule goes up."""

import pytest

from controller.desired import sync
from controller.desired.flowcopy import CONTROLLER_COPY, TCP_SYN, NewFlowCopy
from controller.desired.rules import COOKIE_SEEN, PRIO_SEEN, TABLE_SEEN
from controller.southbound import ofmsg
from tests import topologies
from tests.fakeswitch import PARSER, FakeSwitch
from tests.oftable import trace
from tests.unit.controller.southbound.test_ofmsg import install

LEARN = NewFlowCopy(mode="learn", hold_s=2)


def tcp(src, dst, sport, flags=TCP_SYN):
    return {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": src.ip, "ipv4_dst": dst.ip, "eth_src": src.mac,
            "tcp_src": sport, "tcp_dst": 5201, "tcp_flags": flags}


def fabric(copy):
    topo = topologies.fat_tree(4)
    return topo, install(sync.desired_state(topo, None, {}, {}, stagger=True, idle_timeout=10, copy=copy))


def test_a_learning_switch_copies_a_new_flow_once_and_forwards_every_packet():
    topo, held = fabric(LEARN)
    src, dst = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    first = trace(held, topo, src.dpid, src.port, tcp(src, dst, 40000))
    data = trace(held, topo, src.dpid, src.port, tcp(src, dst, 40000, flags=0x010))  # ACK, no SYN
    other = trace(held, topo, src.dpid, src.port, tcp(src, dst, 40001, flags=0x010))  # a flow seen mid-way
    assert first.to_controller == [src.dpid] and data.to_controller == [] and other.to_controller == [src.dpid]
    for t in (first, data, other):
        assert t.delivered == {(dst.dpid, dst.port)}
    learned = [r for r in held[src.dpid].flows.values() if r.cookie == COOKIE_SEEN]
    assert len(learned) == 2 and all(r.table == TABLE_SEEN and r.priority == PRIO_SEEN for r in learned)


def test_a_plain_openflow_switch_copies_until_the_counting_rule_lands():
    topo, held = fabric(CONTROLLER_COPY)
    src, dst = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    for _ in range(2):
        t = trace(held, topo, src.dpid, src.port, tcp(src, dst, 40000))
        assert t.to_controller == [src.dpid] and t.delivered == {(dst.dpid, dst.port)}
    assert not any(r.table == TABLE_SEEN for rules in held.values() for r in rules.flows.values())


def test_the_learn_action_says_what_open_vswitch_must_learn():
    sw = FakeSwitch(1)
    rule = next(r for r in LEARN.seen_rules(1) if dict(r.match).get("ip_proto") == 17)
    mod = ofmsg.compile_change(sw, sync.Change("add", rule))
    learn = next(a for a in mod.instructions[0].actions if isinstance(a, PARSER.NXActionLearn))
    assert (learn.table_id, learn.priority, learn.cookie, learn.hard_timeout) == (TABLE_SEEN, PRIO_SEEN,
                                                                                 COOKIE_SEEN, 2)
    copied = {s.dst[0] for s in learn.specs if s.src == s.dst}
    assert copied == {"in_port", "ipv4_src", "ipv4_dst", "udp_src", "udp_dst"}
    sw.send_msg(mod)
    assert list(sw.table.flows.values()) == [rule]  # and it parses back to the same value


@pytest.mark.parametrize("poll, hold", [(2.0, 2), (2.5, 3), (0.5, 1)])
def test_a_seen_mark_lasts_one_poll_period(poll, hold):
    copy = NewFlowCopy.from_config({"flow_copy": "learn", "poll_interval_s": poll})
    assert copy.learns(1) and copy.hold_s == hold
    assert not NewFlowCopy.from_config({"flow_copy": "controller", "poll_interval_s": poll}).learns(1)


def test_auto_learns_on_the_switches_that_said_they_are_open_vswitch():
    auto = NewFlowCopy.from_config({"flow_copy": "auto", "poll_interval_s": 2})
    assert not auto.learns(1)  # not until it says what it is
    ovs = auto.described(1, "Nicira, Inc.", "Open vSwitch").described(2, "Brand X", "9000")
    assert ovs.learns(1) and not ovs.learns(2)
    assert ovs.described(1, "Nicira, Inc.", "Open vSwitch") is ovs  # nothing new: the same policy
    assert not ovs.described(1, "Brand X", "9000").learns(1)  # another device behind the same datapath id
    assert LEARN.described(2, "Brand X", "9000") is LEARN  # forced modes never change


def test_a_switch_described_mid_run_gets_its_copy_rules_replaced():
    topo = topologies.fat_tree(4)
    auto = NewFlowCopy(mode="auto")
    src, dst = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.16"]
    before = install(sync.desired_state(topo, None, {}, {}, stagger=True, idle_timeout=10, copy=auto))
    assert trace(before, topo, src.dpid, src.port, tcp(src, dst, 40000)).to_controller == [src.dpid]
    learning = auto.described(src.dpid, "Nicira, Inc.", "Open vSwitch")
    after = install(sync.desired_state(topo, None, {}, {}, stagger=True, idle_timeout=10, copy=learning))
    assert [r for r in after[src.dpid].flows.values() if r.table == TABLE_SEEN]
    assert not [r for d, rules in after.items() if d != src.dpid for r in rules.flows.values() if r.table == TABLE_SEEN]
    first = trace(after, topo, src.dpid, src.port, tcp(src, dst, 40000))
    again = trace(after, topo, src.dpid, src.port, tcp(src, dst, 40000, flags=0x010))
    assert first.to_controller == [src.dpid] and again.to_controller == []


def test_a_switch_on_sflow_copies_no_new_flow_and_the_others_still_do():
    """te.detection auto: the switches whose export is heard (``sampled``) have no copy rules, learned or not."""
    topo = topologies.fat_tree(4)
    src, other, dst = topo.hosts["10.0.0.1"], topo.hosts["10.0.0.5"], topo.hosts["10.0.0.16"]
    copy = NewFlowCopy(mode="learn", hold_s=2, sampled=frozenset({src.dpid}))
    assert not copy.copies(src.dpid) and not copy.learns(src.dpid) and copy.copies(other.dpid)
    held = install(sync.desired_state(topo, None, {}, {}, stagger=True, idle_timeout=10, copy=copy))
    assert trace(held, topo, src.dpid, src.port, tcp(src, dst, 40000)).to_controller == []
    assert not [r for r in held[src.dpid].flows.values() if r.table == TABLE_SEEN]
    assert trace(held, topo, other.dpid, other.port, tcp(other, dst, 40000)).to_controller == [other.dpid]


def test_a_learn_action_read_back_in_open_vswitchs_nxm_names_is_the_same_value():
    """Open vSwitch answers flow stats with NXM field names where one exists (NXM_OF_IP_PROTO, ...)."""
    specs = [PARSER.NXFlowSpecMatch(src=0x0800, dst=("eth_type_nxm", 0), n_bits=16),
             PARSER.NXFlowSpecMatch(src=6, dst=("ip_proto_nxm", 0), n_bits=8),
             PARSER.NXFlowSpecMatch(src=("in_port", 0), dst=("in_port", 0), n_bits=32),
             PARSER.NXFlowSpecMatch(src=("ipv4_src_nxm", 0), dst=("ipv4_src_nxm", 0), n_bits=32)]
    action = PARSER.NXActionLearn(table_id=TABLE_SEEN, specs=specs, hard_timeout=3, priority=PRIO_SEEN,
                                  cookie=COOKIE_SEEN)
    inst = PARSER.OFPInstructionActions(4, [action, PARSER.NXActionResubmitTable(table_id=TABLE_SEEN)])
    assert ofmsg.actions_of([inst]) == (("learn_seen", 6, 3, 0x0800), ("resubmit", TABLE_SEEN))
