import random
import struct

import pytest

from controller.southbound.sflow.decoder import (
    REASONS,
    CounterSample,
    FlowSample,
    SflowDecodeError,
    decode,
)
from tests import sflow_datagrams as enc


def one_flow(**kwargs):
    frame_args = kwargs.pop("frame", {})
    records = kwargs.pop("records", None)
    frame = enc.ethernet_frame(**frame_args)
    if records is None:
        records = [enc.header_record(frame), enc.switch_record()]
    return decode(enc.datagram([enc.flow_sample(records, **kwargs)])).flow_samples[0]


def test_datagram_header_fields():
    d = decode(enc.datagram([], agent="192.0.2.7", sub_agent=3, sequence=4242, uptime_ms=987654))
    assert (d.agent, d.sub_agent_id, d.sequence, d.uptime_ms) == ("192.0.2.7", 3, 4242, 987654)
    assert d.flow_samples == () and d.counter_samples == () and d.skipped == 0


def test_ipv6_agent_address():
    d = decode(enc.datagram([enc.counter_sample([])], agent="2001:db8::5", sub_agent=1))
    assert d.agent == "2001:db8::5" and d.sub_agent_id == 1 and len(d.counter_samples) == 1


@pytest.mark.parametrize("expanded", [False, True])
def test_flow_sample_fields(expanded):
    s = one_flow(sequence=77, source_type=2, source_index=1001, sampling_rate=256, sample_pool=123456, drops=9,
                 input_value=12, output_value=34, expanded=expanded)
    assert isinstance(s, FlowSample) and s.expanded is expanded
    assert (s.sequence, s.source_type, s.source_index, s.sampling_rate, s.sample_pool, s.drops) == (
        77, 2, 1001, 256, 123456, 9)
    assert (s.input_format, s.input_value, s.output_format, s.output_value) == (0, 12, 0, 34)
    assert (s.input_ifindex, s.output_ifindex) == (12, 34)


def test_expanded_sample_carries_full_32_bit_values():
    s = one_flow(expanded=True, source_index=0x12345678, input_value=0xFFFFFF00, output_value=0x40000001)
    assert s.source_index == 0x12345678 and s.input_ifindex == 0xFFFFFF00 and s.output_ifindex == 0x40000001


def test_interface_formats():
    flood = one_flow(output_format=2, output_value=7)
    assert (flood.output_format, flood.output_value, flood.output_ifindex) == (2, 7, None)
    dropped = one_flow(output_format=1, output_value=258)
    assert (dropped.output_format, dropped.output_ifindex) == (1, None)
    assert one_flow(input_value=0).input_ifindex is None  # unknown
    assert one_flow(output_value=0x3FFFFFFF).output_ifindex is None  # internal


def test_sampled_tcp_header():
    p = one_flow(frame=dict(src_mac="0a:00:00:00:00:01", dst_mac="0a:00:00:00:00:02", src_ip="10.0.1.2",
                            dst_ip="10.2.0.3", proto=6, src_port=40001, dst_port=5201, payload=1448)).packet
    assert (p.protocol, p.frame_length, p.stripped, len(p.header)) == (1, 14 + 20 + 20 + 1448 + 4, 4, 128)
    assert (p.src_mac, p.dst_mac, p.ethertype, p.vlan) == ("0a:00:00:00:00:01", "0a:00:00:00:00:02", 0x0800, None)
    assert (p.src_ip, p.dst_ip, p.ip_proto, p.src_port, p.dst_port) == ("10.0.1.2", "10.2.0.3", 6, 40001, 5201)


def test_sampled_udp_header_with_vlan_tag_and_ip_options():
    p = one_flow(frame=dict(proto=17, src_port=53, dst_port=9999, vlan=0x2064, ihl=7, payload=20)).packet
    assert (p.vlan, p.ethertype, p.ip_proto, p.src_port, p.dst_port) == (0x064, 0x0800, 17, 53, 9999)
    assert p.frame_length == 14 + 4 + 28 + 8 + 20 + 4


def test_header_without_ports_later_fragment_and_non_ip():
    frame = enc.ethernet_frame(payload=0)
    short = one_flow(records=[enc.header_record(frame, header_len=14 + 20 + 2)]).packet
    assert short.src_ip == "10.0.0.1" and short.src_port is None
    frag = one_flow(frame=dict(frag_offset=100)).packet
    assert frag.ip_proto == 6 and frag.src_port is None
    arp = one_flow(frame=dict(ethertype=0x0806)).packet
    assert arp.ethertype == 0x0806 and arp.src_ip is None and arp.src_mac == "00:00:00:00:00:01"
    other = one_flow(records=[enc.header_record(frame, protocol=11)]).packet
    assert other.protocol == 11 and other.src_mac is None and other.header == frame[:128]


def test_sampled_ipv6_headers_give_their_5_tuple_in_compressed_form():
    v6 = dict(ethertype=0x86DD, src_ip="fd00:0:0:0:0:0:a00:1", dst_ip="fd00::a00:10", src_port=40001, dst_port=5201)
    p = one_flow(frame=dict(v6, payload=1448)).packet
    assert (p.ethertype, p.src_ip, p.dst_ip, p.ip_proto, p.src_port, p.dst_port) == \
        (0x86DD, "fd00::a00:1", "fd00::a00:10", 6, 40001, 5201)
    assert p.frame_length == 14 + 40 + 20 + 1448 + 4
    udp = one_flow(frame=dict(v6, proto=17, vlan=7, payload=20)).packet
    assert (udp.vlan, udp.ip_proto, udp.src_port, udp.dst_port) == (7, 17, 40001, 5201)
    short = one_flow(records=[enc.header_record(enc.ethernet_frame(**v6), header_len=14 + 40 + 2)]).packet
    assert short.src_ip == "fd00::a00:1" and short.src_port is None  # cut before the ports
    hop_by_hop = one_flow(frame=dict(v6, proto=0)).packet  # an extension header: its number, no ports
    assert hop_by_hop.ip_proto == 0 and hop_by_hop.src_port is None
    cut = one_flow(records=[enc.header_record(enc.ethernet_frame(**v6), header_len=14 + 39)]).packet
    assert cut.ethertype == 0x86DD and cut.src_ip is None  # the fixed header itself cut


def test_sample_without_header_record_and_unknown_records_skipped():
    s = one_flow(records=[enc.switch_record(), enc.record(0xABCDE, b"xyz")])
    assert s.packet is None and s.sampling_rate == 64


@pytest.mark.parametrize("expanded", [False, True])
def test_counter_sample_fields(expanded):
    values = {name: 1000 + i for i, name in enumerate(enc.IF_COUNTER_FIELDS)}
    values.update(if_speed=10_000_000_000, in_octets=2**40 + 5, out_octets=2**63 + 7, if_status=3)
    records = [enc.if_counters_record(**values), enc.ethernet_counters_record(),
               enc.port_name_record("s1-eth2"), enc.openflow_port_record(0x1234_5678_9ABC, 2)]
    d = decode(enc.datagram([enc.counter_sample(records, sequence=55, source_type=0, source_index=17,
                                                expanded=expanded)]))
    c = d.counter_samples[0]
    assert isinstance(c, CounterSample) and c.expanded is expanded
    assert (c.sequence, c.source_type, c.source_index) == (55, 0, 17)
    assert {name: getattr(c.interface, name) for name in enc.IF_COUNTER_FIELDS} == values
    assert c.interface.admin_up and c.interface.oper_up
    assert c.openflow_port == (0x1234_5678_9ABC, 2) and c.port_name == "s1-eth2"


def test_oper_status_bits():
    c = decode(enc.datagram([enc.counter_sample([enc.if_counters_record(if_status=1)])])).counter_samples[0]
    assert c.interface.admin_up and not c.interface.oper_up


def test_mixed_datagram_and_unknown_sample_format():
    frame = enc.ethernet_frame()
    samples = [enc.flow_sample([enc.header_record(frame)], sequence=1),
               enc.record(0x1234 << 12 | 9, b"vendor sample!"),  # not a multiple of 4: padded
               enc.counter_sample([enc.if_counters_record()], sequence=2),
               enc.flow_sample([enc.header_record(frame)], sequence=3, expanded=True)]
    d = decode(enc.datagram(samples))
    assert [s.sequence for s in d.flow_samples] == [1, 3] and [s.sequence for s in d.counter_samples] == [2]
    assert d.skipped == 1


def reason(data):
    with pytest.raises(SflowDecodeError) as info:
        decode(data)
    assert info.value.reason in REASONS
    return info.value.reason


def test_bad_input_reasons():
    good = enc.ovs_flow_datagram(3)
    assert reason(b"") == "truncated"
    assert reason(good[:27]) == "truncated"
    assert reason(enc.datagram([], version=4)) == "version"
    assert reason(struct.pack(">II", 5, 9) + b"\0" * 40) == "address_type"
    assert reason(good[:-1]) in ("length", "truncated")
    assert reason(enc.datagram([], count=2**32 - 1)) == "sample_count"
    frame = enc.ethernet_frame()
    assert reason(enc.datagram([enc.flow_sample([enc.header_record(frame)], count=10**9)])) == "record_count"
    assert reason(enc.datagram([enc.counter_sample([], count=70000)])) == "record_count"
    assert reason(enc.datagram([enc.flow_sample([enc.header_record(frame)], sampling_rate=0)])) == "sampling_rate"
    past_end = enc.datagram([enc.u32(1) + enc.u32(5000) + b"\0" * 40])
    assert reason(past_end) == "length"
    bad_header = enc.record(1, enc.u32(1) + enc.u32(100) + enc.u32(4) + enc.u32(500) + b"\0" * 8)
    assert reason(enc.datagram([enc.flow_sample([bad_header])])) == "length"
    short_counters = enc.record(1, b"\0" * 40)
    assert reason(enc.datagram([enc.counter_sample([short_counters])])) == "truncated"


def test_fuzz_only_decode_errors_escape():
    rng = random.Random(20261202)
    frame = enc.ethernet_frame(vlan=5)
    seeds = [enc.ovs_flow_datagram(4),
             enc.datagram([enc.counter_sample([enc.if_counters_record(), enc.port_name_record("eth0"),
                                               enc.openflow_port_record(1, 1)], expanded=True),
                           enc.flow_sample([enc.header_record(frame), enc.switch_record()], expanded=True)],
                          agent="2001:db8::1")]
    decoded = failed = 0
    for _ in range(5000):
        data = enc.mutate(rng, rng.choice(seeds))
        try:
            decode(data)
            decoded += 1
        except SflowDecodeError as exc:
            assert exc.reason in REASONS
            failed += 1
    assert decoded > 100 and failed > 1000  # both paths exercised by the mutations
