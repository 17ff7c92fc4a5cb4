"""The strict fake switch refuses what Open vSwitch refuses, so the controller tests that drive it would see an
order bug (a flow sent before its group, a group deleted under its flows) as a failure, not a silent fix."""

from controller.desired.rules import ETH_IPV4, Change, FlowRule, GroupRule, match
from controller.southbound import ofmsg
from tests.fakeswitch import OFP, FakeSwitch


def send(sw, op, rule):
    sw.send_msg(ofmsg.compile_change(sw, Change(op, rule)))


def errors(sw):
    return [(msg.type, msg.code) for name, msg in sw.replies if name == "EventOFPErrorMsg"]


def test_a_goto_backwards_and_a_missing_group_are_refused_with_their_errors():
    sw = FakeSwitch(1)
    send(sw, "add", FlowRule(1, 10, match(eth_type=ETH_IPV4), (("goto", 1),), table=1))
    send(sw, "add", FlowRule(1, 10, match(eth_type=ETH_IPV4, ipv4_dst="10.0.0.2"), (("group", 7),), table=1))
    assert errors(sw) == [(OFP.OFPET_BAD_INSTRUCTION, OFP.OFPBIC_BAD_TABLE_ID),
                          (OFP.OFPET_BAD_ACTION, OFP.OFPBAC_BAD_OUT_GROUP)]
    assert sw.table.flows == {} and len(sw.violations) == 2
    sw.violations.clear()


def test_groups_added_twice_modified_missing_or_deleted_under_their_flows():
    sw = FakeSwitch(1)
    group = GroupRule(1, 7, (1, 2))
    flow = FlowRule(1, 10, match(eth_type=ETH_IPV4, ipv4_dst="10.0.0.2"), (("group", 7),), table=1)
    send(sw, "add", group)
    send(sw, "add", flow)  # in order: taken
    assert errors(sw) == [] and sw.violations == [] and flow.key in sw.table.flows
    send(sw, "add", group)
    send(sw, "modify", GroupRule(1, 8, (1,)))
    assert errors(sw) == [(OFP.OFPET_GROUP_MOD_FAILED, OFP.OFPGMFC_GROUP_EXISTS),
                          (OFP.OFPET_GROUP_MOD_FAILED, OFP.OFPGMFC_UNKNOWN_GROUP)]
    send(sw, "delete", group)  # before the flow that forwards to it: Open vSwitch deletes that flow too
    assert sw.table.flows == {} and sw.table.groups == {} and len(sw.violations) == 3
    sw.violations.clear()


def test_flow_mods_are_read_from_their_bytes_without_the_controllers_parser():
    """What the controller compiles (southbound/ofmsg.py) and the fake switch's own reading of the bytes agree,
    rule by rule, over every kind of match and action the controller sends."""
    from controller.desired.rules import COOKIE_SEEN, TABLE_SEEN
    from tests.fakeswitch import decode_flow_mod

    rules = [
        FlowRule(1, 132, match(eth_type=ETH_IPV4, ipv4_dst="10.0.0.2"), (("output", 3),), table=1),
        FlowRule(1, 124, match(eth_type=ETH_IPV4, ipv4_dst=("10.0.0.0", "255.255.255.0")), (("group", 9),), table=1),
        FlowRule(1, 20, match(eth_type=ETH_IPV4, in_port=1, ip_proto=6, ipv4_src="10.0.0.1", ipv4_dst="10.0.0.5",
                              tcp_src=40000, tcp_dst=5201), (("output", 4),), table=0, cookie=0x6D6C0002,
                 idle_timeout=10),
        FlowRule(1, 5, match(eth_type=ETH_IPV4, in_port=2, ip_proto=17),
                 (("learn_seen", 17, 10, ETH_IPV4), ("resubmit", 2), ("goto", 1)), table=0),
        FlowRule(1, 1, match(eth_type=ETH_IPV4), (("controller", 128),), table=TABLE_SEEN, cookie=COOKIE_SEEN),
    ]
    sw = FakeSwitch(1)
    for rule in rules:
        msg = ofmsg.compile_change(sw, Change("add", rule))
        msg.serialize()
        assert decode_flow_mod(1, bytes(msg.buf)) == (OFP.OFPFC_ADD, rule)
