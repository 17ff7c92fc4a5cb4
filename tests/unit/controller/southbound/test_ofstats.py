"""controller.southbound.ofstats reads flow-stats replies exactly as Ryu's parser + the shell's field read-out do."""

import struct
from types import SimpleNamespace

import pytest

from controller.southbound import ofmsg, ofstats
from controller.southbound.framework import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser
from controller.state.flowkey import PROTO_TCP, PROTO_UDP, FlowKey, five_tuple_match, pair_key
from controller.state.monitor import MalformedStatsError, sample_from_stat
from tests.flowstats_bytes import counting_entry, replies, stats_entry

DPID = 1001
DP = SimpleNamespace(id=DPID, ofproto=ofproto_v1_3, ofproto_parser=ofproto_v1_3_parser)


def ryu_samples(raw):
    """The reply path through Ryu: its parser, then what app.py reads of each entry."""
    version, msg_type, msg_len, xid = struct.unpack_from("!BBHI", raw)
    msg = ofproto_parser.msg(DP, version, msg_type, msg_len, xid, raw)
    out = []
    for stat in msg.body:
        try:
            out.append(sample_from_stat(DPID, ofmsg.stats_fields(stat), stat.byte_count, stat.duration_sec,
                                        stat.duration_nsec))
        except MalformedStatsError:
            pass
    return msg.xid, bool(msg.flags & 1), out


def flows(n):
    return [FlowKey(f"10.{i >> 8 & 255}.{i & 255}.1", f"10.9.{i % 200}.{i % 7 + 1}", (PROTO_TCP, PROTO_UDP)[i % 2],
                    1024 + i, 5201 + i % 3) for i in range(n)]


def test_counting_rules_read_like_ryu_across_a_split_reply():
    entries = [counting_entry(k, 1 + i % 4, 10_000 * i + 7, 3.25 + i / 1000) for i, k in enumerate(flows(1500))]
    msgs = replies(entries, xid=42)
    assert len(msgs) > 1  # split into parts of at most 64 KiB, REPLY_MORE on all but the last
    total = 0
    for raw in msgs:
        ours = ofstats.parse_flow_stats_reply(DPID, raw)
        xid, more, theirs = ryu_samples(raw)
        assert (ours.xid, ours.more) == (xid, more)
        assert [(s.key, s.dpid, s.byte_count) for s in ours.samples] == [(s.key, s.dpid, s.byte_count) for s in theirs]
        assert [s.duration_s for s in ours.samples] == pytest.approx([s.duration_s for s in theirs], abs=1e-9)
        total += len(ours.samples)
    assert total == 1500
    assert [ofstats.parse_flow_stats_reply(DPID, m).more for m in msgs] == [True] * (len(msgs) - 1) + [False]


def test_entries_that_name_no_flow_are_skipped_as_the_shell_skips_them():
    from controller.southbound.framework import ofproto_v1_3_parser as p

    key = flows(1)[0]
    entries = [
        stats_entry({"eth_type": 0x0806}, 5, 1.0, [p.OFPInstructionActions(4, [p.OFPActionOutput(0xfffffffd, 128)])]),
        stats_entry({"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": ("10.0.0.0", "255.0.0.0"),
                     "ipv4_dst": "10.0.0.2", "tcp_src": 1, "tcp_dst": 2}, 5, 1.0),  # masked: not one flow
        stats_entry({"in_port": 3, "eth_type": 0x0800, "ip_proto": 6, "ipv4_src": key.src_ip}, 5, 1.0),
        counting_entry(key, 2, 999, 2.5),
        stats_entry({"eth_type": 0x0800, "ip_proto": 17, "ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.2",
                     "udp_src": 53, "udp_dst": 5353, "vlan_vid": 0x1005}, 7, 0.5),  # an extra field is ignored
    ]
    (raw,) = replies(entries, xid=7)
    ours = ofstats.parse_flow_stats_reply(DPID, raw)
    assert [s.key for s in ours.samples] == [key, FlowKey("10.0.0.1", "10.0.0.2", PROTO_UDP, 53, 5353)]
    assert ours.skipped == 3
    (unmasked,) = replies(entries[:1] + entries[2:], xid=7)
    _, _, theirs = ryu_samples(unmasked)
    assert [(s.key, s.byte_count) for s in ours.samples] == [(s.key, s.byte_count) for s in theirs]
    _, _, masked = ryu_samples(replies(entries[1:2], xid=7)[0])
    assert masked[0].key.src_ip == "('10.0.0.0', '255.0.0.0')"  # the Ryu path took a masked field for an IP


def test_bytes_that_are_not_a_flow_stats_reply_are_refused():
    (raw,) = replies([counting_entry(flows(1)[0], 1, 1, 1.0)], xid=1)
    with pytest.raises(ofstats.MalformedReplyError):
        ofstats.parse_flow_stats_reply(DPID, raw[:10])
    with pytest.raises(ofstats.MalformedReplyError, match="not an OpenFlow 1.3 flow-stats"):
        ofstats.parse_flow_stats_reply(DPID, raw[:1] + bytes([20]) + raw[2:])  # another message type
    with pytest.raises(ofstats.MalformedReplyError, match="length"):
        ofstats.parse_flow_stats_reply(DPID, raw[:16] + struct.pack("!H", 9) + raw[18:])
    with pytest.raises(ofstats.MalformedReplyError):
        ofstats.parse_flow_stats_reply(DPID, raw[:-8])  # shorter than its header says


def test_the_shell_reads_polls_from_the_bytes_and_read_backs_through_ryu():
    key = flows(1)[0]
    entries = [counting_entry(key, 2, 5000, 1.5), stats_entry({"eth_type": 0x0806}, 1, 1.0)]
    (raw,) = replies(entries, xid=9)
    version, msg_type, msg_len, xid = struct.unpack_from("!BBHI", raw)
    msg = ofproto_parser.msg(DP, version, msg_type, msg_len, xid, raw)
    assert all(isinstance(e, ofmsg.LazyFlowStats) for e in msg.body)  # Ryu parsed no entry yet
    assert ofmsg.poll_samples(DPID, msg) == ofstats.parse_flow_stats_reply(DPID, raw).samples
    full = [ofproto_v1_3_parser.OFPFlowStats.parser(raw, 16),
            ofproto_v1_3_parser.OFPFlowStats.parser(raw, 16 + len(entries[0]))]
    assert [ofmsg.rule_from_stats(DPID, e) for e in msg.body] == [ofmsg.rule_from_stats(DPID, e) for e in full]


def test_a_host_pairs_counting_rule_reads_as_its_pair_key_on_both_paths():
    """Where a table is tight a host pair is counted whole (no transport fields in the match): both parsers read
    it as the pair's key, and its match is the one the controller installs for that key."""
    pair = pair_key(flows(1)[0])
    (raw,) = replies([counting_entry(pair, 3, 12_345, 2.0)], xid=9)
    ours = ofstats.parse_flow_stats_reply(DPID, raw)
    _, _, theirs = ryu_samples(raw)
    assert [s.key for s in ours.samples] == [s.key for s in theirs] == [pair] and pair.is_pair
    assert dict(five_tuple_match(pair, 3)) == {"in_port": 3, "eth_type": 0x0800, "ipv4_src": pair.src_ip,
                                               "ipv4_dst": pair.dst_ip}


def v6_flows(n):
    """IPv6 5-tuples (and pair keys) between the emulation's addresses, as the controller writes them."""
    keys = [FlowKey(f"fd00::a00:{i % 16 + 1:x}", f"fd00::a00:{(i + 4) % 16 + 1:x}", (PROTO_TCP, PROTO_UDP)[i % 2],
                    40000 + i, 5201) for i in range(n)]
    return keys + [pair_key(k) for k in keys[:2]]


def test_ipv6_counting_rules_read_like_ryu_and_name_their_keys():
    keys = v6_flows(40) + flows(40)
    (raw,) = replies([counting_entry(k, 1 + i % 2, 1000 * i, 2.0) for i, k in enumerate(keys)], xid=7)
    ours = ofstats.parse_flow_stats_reply(DPID, raw)
    assert [s.key for s in ours.samples] == keys and not ours.skipped
    assert [(s.key, s.byte_count) for s in ours.samples] == [(s.key, s.byte_count) for s in ryu_samples(raw)[2]]


def test_an_ipv6_address_spelled_long_is_one_key_and_a_masked_or_narrow_one_none():
    key = v6_flows(1)[0]
    long_form = {"eth_type": 0x86DD, "in_port": 1, "ip_proto": 6, "ipv6_src": "fd00:0:0:0:0:0:a00:1",
                 "ipv6_dst": "FD00::0A00:0005", "tcp_src": key.src_port, "tcp_dst": key.dst_port}
    (raw,) = replies([stats_entry(long_form, 5, 1.0), stats_entry(dict(long_form, ipv6_src=("fd00::", "ffff::")),
                                                                   5, 1.0)], xid=8)
    reply = ofstats.parse_flow_stats_reply(DPID, raw)
    assert [s.key for s in reply.samples] == [key] and reply.skipped == 1
    tlv = b"".join(struct.pack("!HBB", 0x8000, field << 1, len(v)) + v for field, v in [
        (10, bytes([6])), (26, bytes(4)), (27, bytes(16)), (13, bytes(2)), (14, bytes(2))])
    assert ofstats.match_key(tlv) is None  # a forged 4-byte ipv6_src names no flow (and raises nothing)
