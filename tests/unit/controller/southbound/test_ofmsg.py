"""Rule values -> real OpenFlow 1.3 bytes -> parsed back: the switches end up holding exactly the plan, and
packets traced through what they hold go where the plan says."""

import struct

import pytest

from controller.decide import te
from controller.decide.packet_in import ArpReply
from controller.desired import sync
from controller.desired.rules import Change, FlowRule, match
from controller.southbound import ofmsg
from controller.southbound.framework import ofproto_parser
from controller.state.flowkey import FlowKey
from controller.state.monitor import MalformedStatsError
from controller.state.tiers import infer_tiers
from tests import topologies
from tests.decision_steps import engineer_step
from tests.fakeswitch import PARSER, FakeSwitch
from tests.oftable import trace

MBPS = 1e6


def planned_fabric():
    topo = topologies.fat_tree(4)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    keys = [FlowKey(f"10.0.0.{i + 1}", f"10.0.0.{(i + 4) % 16 + 1}", 6, 40000 + i, 5201) for i in range(8)]
    engineer = te.TrafficEngineer("mlroute")
    engineer_step(engineer, te.fabric_from_topology(topo, tiers, 10 * MBPS, 10 * MBPS), [(k, None) for k in keys])
    accounting = {k: (topo.hosts[k.src_ip].dpid, topo.hosts[k.src_ip].port) for k in keys}
    desired = sync.desired_state(topo, tiers, accounting, engineer.pinned, stagger=True, idle_timeout=10)
    return topo, keys, engineer, desired


def install(desired):
    switches = {d: FakeSwitch(d) for d in desired}
    for step in sync.plan_sync({}, desired, sorted(desired)):
        for dpid, change in step.changes:
            switches[dpid].send_msg(ofmsg.compile_change(switches[dpid], change))
    return {d: sw.table for d, sw in switches.items()}


def test_compiled_messages_parse_back_to_exactly_the_planned_rules():
    _, _, _, desired = planned_fabric()
    held = install(desired)
    for dpid, want in desired.items():
        assert held[dpid].flows == want.flows and held[dpid].groups == want.groups


@pytest.mark.parametrize("aligned", [False, True], ids=["sequential", "aligned"])
def test_a_dual_stack_plan_parses_back_exactly_and_ipv6_is_delivered_through_what_the_switches_hold(aligned):
    """IPv6 matches (destination prefixes (address, mask), solicitation target, guards' sources) as the switch
    reads them back: the same values the plan wrote (compressed IPv6 text), so an audit finds nothing to
    repair."""
    topo = topologies.dual_stack(topologies.fat_tree(4, aligned=aligned))
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    desired = sync.desired_state(topo, tiers, {}, {}, stagger=True, idle_timeout=10)
    held = install(desired)
    for dpid, want in desired.items():
        assert held[dpid].flows == want.flows and held[dpid].groups == want.groups
    assert any(isinstance(dict(r.match).get("ipv6_dst"), tuple) for t in held.values() for r in t.flows.values())
    v6 = sorted((h for h in topo.hosts.values() if ":" in h.ip), key=lambda h: (h.dpid, h.port))
    src, dst = v6[0], v6[-1]
    pkt = {"eth_type": 0x86DD, "eth_src": src.mac, "ipv6_src": src.ip, "ipv6_dst": dst.ip, "ip_proto": 17}
    assert trace(held, topo, src.dpid, src.port, pkt).delivered == {(dst.dpid, dst.port)}
    forged = dict(pkt, ipv6_src=v6[8].ip)
    assert not trace(held, topo, src.dpid, src.port, forged).delivered  # the port's guard


def test_packets_follow_the_pinned_paths_through_the_parsed_tables():
    topo, keys, engineer, desired = planned_fabric()
    held = install(desired)
    for key in keys:
        src, dst = topo.hosts[key.src_ip], topo.hosts[key.dst_ip]
        pkt = {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip,
               "tcp_src": key.src_port, "tcp_dst": key.dst_port}
        t = trace(held, topo, src.dpid, src.port, pkt)
        assert t.delivered == {(dst.dpid, dst.port)} and tuple(t.paths[0]) == engineer.pinned[key]


def test_modify_and_delete_reach_the_table():
    sw = FakeSwitch(7)
    rule = FlowRule(7, 10, match(eth_type=0x0800, ipv4_dst="10.0.0.1"), (("output", 1),))
    moved = FlowRule(7, 10, rule.match, (("output", 2),))
    for change in (Change("add", rule), Change("modify", moved)):
        sw.send_msg(ofmsg.compile_change(sw, change))
    assert list(sw.table.flows.values()) == [moved]
    sw.send_msg(ofmsg.compile_change(sw, Change("delete", moved)))
    assert not sw.table.flows


def test_wipe_deletes_mlroute_rules_and_groups_only():
    _, _, _, desired = planned_fabric()
    dpid = next(d for d, r in desired.items() if r.groups)
    sw = FakeSwitch(dpid, deliver=lambda *a: None)
    for step in sync.plan_sync({}, desired, [dpid]):
        for _, change in step.changes:
            sw.send_msg(ofmsg.compile_change(sw, change))
    foreign = FlowRule(dpid, 1, match(eth_type=0x88CC), (("controller", 65535),), table=0, cookie=0)
    sw.send_msg(ofmsg.compile_change(sw, Change("add", foreign)))
    for message in ofmsg.wipe(sw):
        sw.send_msg(message)
    assert list(sw.table.flows.values()) == [foreign] and not sw.table.groups


def test_packet_in_decoding_and_arp_reply_frames():
    reply = ArpReply(1, 3, "10.0.0.2", "00:00:00:00:00:02", "10.0.0.1", "00:00:00:00:00:01")
    kind, pkt = ofmsg.decode_packet_in(1, 3, ofmsg.arp_reply_frame(reply))
    assert kind == "arp" and (pkt.src_ip, pkt.dst_ip, pkt.eth_src, pkt.arp_op) == ("10.0.0.2", "10.0.0.1",
                                                                                 "00:00:00:00:00:02", 2)
    assert ofmsg.decode_packet_in(1, 3, b"\x01" * 14)[0] == "other"
    stat = PARSER.OFPFlowStats(match=PARSER.OFPMatch(in_port=2, eth_type=0x0800, ip_proto=17, ipv4_src="10.0.0.1",
                                                     ipv4_dst="10.0.0.2", udp_src=1, udp_dst=2))
    assert ofmsg.stats_fields(stat) == {"in_port": 2, "ip_proto": 17, "ipv4_src": "10.0.0.1",
                                        "ipv4_dst": "10.0.0.2", "udp_src": 1, "udp_dst": 2}


def _multipart_reply(mp_type: int, body: bytes, xid: int = 9) -> bytes:
    return struct.pack("!BBHIHH4x", 4, 19, 16 + len(body), xid, mp_type, 0) + body


def _parse(buf: bytes):
    return ofproto_parser.msg(FakeSwitch(1), 4, 19, len(buf), 9, buf)


def test_table_stats_are_read_in_one_pass_from_the_reply_bytes():
    entries = b"".join(struct.pack("!B3xIQQ", t, n, 1000 + t, 7) for t, n in [(0, 18), (1, 33), (2, 4), (3, 0)])
    msg = _parse(_multipart_reply(3, entries))
    assert ofmsg.table_counts(msg.body) == {0: 18, 1: 33, 2: 4, 3: 0}
    assert ofmsg.table_counts([PARSER.OFPTableStats(1, 5, 0, 0)]) == {1: 5}  # a reply built in-process


def test_table_features_are_read_to_max_entries_and_their_properties_skipped():
    def entry(table_id: int, max_entries: int, props: bytes) -> bytes:
        fixed = struct.pack("!HB5x32sQQII", 64 + len(props), table_id, b"t%d" % table_id, 0, 0, 0, max_entries)
        return fixed + props
    prop = struct.pack("!HH", 0, 8) + struct.pack("!HH", 1, 0)  # OFPTFPT_INSTRUCTIONS with one instruction
    msg = _parse(_multipart_reply(12, entry(0, 512, prop) + entry(1, 100, b"") + entry(2, 0, prop * 3)))
    assert ofmsg.table_capacities(msg.body) == {0: 512, 1: 100, 2: 0}


def test_a_table_stats_body_that_is_no_whole_number_of_entries_is_refused():
    with pytest.raises(MalformedStatsError):
        ofmsg.TableCounts.parser(b"\x00" * 30, 0)
    with pytest.raises(MalformedStatsError):
        ofmsg.LazyTableFeatures.parser(b"\x00" * 64, 0)  # length 0 < the fixed part


def test_group_features_name_the_types_the_switch_has():
    body = PARSER.OFPGroupFeaturesStats(0b0101, 0, [1024, 7, 8, 0], [0] * 4)
    assert ofmsg.group_features(body) == (frozenset({"all", "indirect"}), {"all": 1024, "indirect": 8})
