"""A small sFlow v5 encoder (XDR, big-endian) for the tests and the benchmark: datagrams of the shapes Open vSwitch
sends, built field by field so that a decoder test can compare every field it reads back."""

from __future__ import annotations

import ipaddress
import random
import socket
import struct


def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def u64(v: int) -> bytes:
    return struct.pack(">Q", v)


def opaque(data: bytes) -> bytes:
    """XDR variable-length opaque: length, bytes, zero padding to a multiple of 4."""
    return u32(len(data)) + data + b"\0" * (-len(data) & 3)


def record(tag: int, body: bytes) -> bytes:
    """A sample or record: data_format tag then its opaque body."""
    return u32(tag) + opaque(body)


def datagram(samples: list[bytes], agent: str = "10.0.0.1", sub_agent: int = 0, sequence: int = 1,
             uptime_ms: int = 1000, version: int = 5, count: int | None = None) -> bytes:
    ip = ipaddress.ip_address(agent)
    address = (u32(1) if ip.version == 4 else u32(2)) + ip.packed
    n = len(samples) if count is None else count
    return u32(version) + address + u32(sub_agent) + u32(sequence) + u32(uptime_ms) + u32(n) + b"".join(samples)


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def ethernet_frame(src_mac: str = "00:00:00:00:00:01", dst_mac: str = "00:00:00:00:00:02", src_ip: str = "10.0.0.1",
                   dst_ip: str = "10.0.0.2", proto: int = 6, src_port: int = 40000, dst_port: int = 5201,
                   payload: int = 1400, vlan: int | None = None, ihl: int = 5, frag_offset: int = 0,
                   ethertype: int = 0x0800) -> bytes:
    """An Ethernet/IPv4-or-IPv6/TCP-or-UDP frame (checksums zero: the decoder does not read them); IPv6 when the
    addresses are (give ``ethertype`` 0x86DD too)."""
    eth = mac_bytes(dst_mac) + mac_bytes(src_mac)
    if vlan is not None:
        eth += struct.pack(">HH", 0x8100, vlan)
    eth += struct.pack(">H", ethertype)
    l4 = (struct.pack(">HHIIBBHHH", src_port, dst_port, 1, 0, 0x50, 0x10, 65535, 0, 0) if proto == 6
          else struct.pack(">HHHH", src_port, dst_port, 8 + payload, 0))
    if ":" in src_ip:  # IPv6: the fixed header (no extension headers), the transport header after it
        ip = struct.pack(">IHBB16s16s", 6 << 28, len(l4) + payload, proto, 64,
                         socket.inet_pton(socket.AF_INET6, src_ip), socket.inet_pton(socket.AF_INET6, dst_ip))
        return eth + ip + l4 + b"\xab" * payload
    options = b"\0" * (4 * (ihl - 5))
    total = 4 * ihl + len(l4) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, total, 1, frag_offset & 0x1FFF, 64, proto, 0,
                     socket.inet_aton(src_ip), socket.inet_aton(dst_ip)) + options
    return eth + ip + l4 + b"\xab" * payload


def header_record(frame: bytes, header_len: int = 128, stripped: int = 4, protocol: int = 1) -> bytes:
    """Flow record 1 (sampled_header) of ``frame`` as Open vSwitch writes it: frame length counts the FCS."""
    head = frame[:header_len]
    return record(1, u32(protocol) + u32(len(frame) + stripped) + u32(stripped) + opaque(head))


def switch_record(src_vlan: int = 0, dst_vlan: int = 0) -> bytes:
    """Flow record 1001 (extended_switch), which Open vSwitch adds to every flow sample."""
    return record(1001, u32(src_vlan) + u32(0) + u32(dst_vlan) + u32(0))


def flow_sample(records: list[bytes], sequence: int = 1, source_type: int = 0, source_index: int = 1,
                sampling_rate: int = 64, sample_pool: int = 640, drops: int = 0, input_value: int = 5,
                output_value: int = 6, input_format: int = 0, output_format: int = 0, expanded: bool = False,
                count: int | None = None) -> bytes:
    n = len(records) if count is None else count
    if expanded:
        body = (u32(sequence) + u32(source_type) + u32(source_index) + u32(sampling_rate) + u32(sample_pool)
                + u32(drops) + u32(input_format) + u32(input_value) + u32(output_format) + u32(output_value))
        return record(3, body + u32(n) + b"".join(records))
    body = (u32(sequence) + u32(source_type << 24 | source_index) + u32(sampling_rate) + u32(sample_pool)
            + u32(drops) + u32(input_format << 30 | input_value) + u32(output_format << 30 | output_value))
    return record(1, body + u32(n) + b"".join(records))


IF_COUNTER_FIELDS = ("if_index", "if_type", "if_speed", "if_direction", "if_status", "in_octets", "in_ucast_pkts",
                     "in_multicast_pkts", "in_broadcast_pkts", "in_discards", "in_errors", "in_unknown_protos",
                     "out_octets", "out_ucast_pkts", "out_multicast_pkts", "out_broadcast_pkts", "out_discards",
                     "out_errors", "promiscuous")
WIDE = {"if_speed", "in_octets", "out_octets"}  # unsigned hyper


def if_counters_record(**values: int) -> bytes:
    """Counter record 1 (if_counters); fields not given get distinct values (their position + 100)."""
    body = b""
    for i, name in enumerate(IF_COUNTER_FIELDS):
        v = values.get(name, 100 + i)
        body += u64(v) if name in WIDE else u32(v)
    return record(1, body)


def openflow_port_record(dpid: int, port: int) -> bytes:
    return record(1004, u64(dpid) + u32(port))


def port_name_record(name: str) -> bytes:
    return record(1005, opaque(name.encode()))


def ethernet_counters_record() -> bytes:
    """Counter record 2 (ethernet_counters, 13 words): Open vSwitch sends it; the decoder skips it."""
    return record(2, b"".join(u32(i) for i in range(13)))


def counter_sample(records: list[bytes], sequence: int = 1, source_type: int = 0, source_index: int = 5,
                   expanded: bool = False, count: int | None = None) -> bytes:
    n = len(records) if count is None else count
    if expanded:
        return record(4, u32(sequence) + u32(source_type) + u32(source_index) + u32(n) + b"".join(records))
    return record(2, u32(sequence) + u32(source_type << 24 | source_index) + u32(n) + b"".join(records))


def ovs_flow_datagram(n_samples: int = 7, sequence: int = 1, first_sample: int = 1, agent: str = "127.0.0.1",
                      sampling_rate: int = 64) -> bytes:
    """A datagram of the shape Open vSwitch sends under load: flow samples of 1,502-byte TCP frames, each with a
    128-byte header record and an extended switch record (7 of them fill a 1,400-byte datagram)."""
    samples = []
    for i in range(n_samples):
        frame = ethernet_frame(src_port=40000 + i % 4, payload=1448)
        samples.append(flow_sample([header_record(frame), switch_record()], sequence=first_sample + i,
                                   source_type=2, source_index=1000, sampling_rate=sampling_rate,
                                   sample_pool=(first_sample + i) * sampling_rate, input_value=7, output_value=9))
    return datagram(samples, agent=agent, sequence=sequence)


def mutate(rng: random.Random, good: bytes) -> bytes:
    """``good`` damaged one of five ways: truncated, bits flipped, a word replaced by a huge or random value,
    bytes appended, or replaced by random bytes (the fuzz tests' inputs)."""
    kind = rng.randrange(5)
    data = bytearray(good)
    if kind == 0:
        return bytes(data[:rng.randrange(len(data))])
    if kind == 1:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 2:  # a huge or random 32-bit word anywhere (counts and lengths included)
        pos = rng.randrange(0, len(data) - 3) & ~3
        data[pos:pos + 4] = struct.pack(">I", rng.choice([0, 1, 2**31, 2**32 - 1, rng.getrandbits(32)]))
        return bytes(data)
    if kind == 3:
        return bytes(data) + rng.randbytes(rng.randrange(64))
    return rng.randbytes(rng.randrange(200))
