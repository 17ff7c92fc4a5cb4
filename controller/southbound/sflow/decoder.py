"""sFlow version 5 datagrams (sflow.org, sflow_version_5.txt; XDR, big-endian) -> plain frozen dataclasses.

Why our own decoder: the only PyPI parser depends on ``xdrlib`` (gone in Python 3.13), and what the controller
needs is small: flow samples (compact and expanded) with their sampled packet header decoded to the IPv4 or IPv6
5-tuple (IPv6 addresses in ``ipaddress``'s compressed form, as the controller writes them), and counter samples
with the generic interface counters plus the two Open vSwitch records (OpenFlow port, port name) that tie an sFlow
ifIndex to a DPID and OpenFlow port. Every other sample or record format is skipped by its length. Datagrams
come from the network, so anything malformed (truncated, wrong version, lengths past the end, counts that the
remaining bytes cannot hold, sampling rate 0) raises ``SflowDecodeError`` and nothing else; its ``reason`` is a
short fixed string fit for a metric label. A count is checked against the bytes left before any loop runs, so a
forged count costs nothing.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from dataclasses import dataclass

VERSION = 5
ADDR_UNKNOWN, ADDR_IPV4, ADDR_IPV6 = 0, 1, 2

# data_format tags (enterprise << 12 | format), enterprise 0 only
SAMPLE_FLOW, SAMPLE_COUNTERS, SAMPLE_FLOW_EXPANDED, SAMPLE_COUNTERS_EXPANDED = 1, 2, 3, 4
FLOW_RECORD_HEADER = 1  # sampled_header
COUNTER_GENERIC = 1  # if_counters
COUNTER_OPENFLOW_PORT = 1004  # of_port: datapath_id, port_no (sFlow OpenFlow structures; Open vSwitch sends it)
COUNTER_PORT_NAME = 1005  # port_name: string<255> (Open vSwitch sends it)
HEADER_ETHERNET = 1  # header_protocol ETHERNET-ISO88023

# interface formats (compact: top 2 bits of the 32-bit value; expanded: a separate word)
IF_INDEX, IF_DISCARDED, IF_MULTIPLE = 0, 1, 2
IF_INTERNAL = 0x3FFFFFFF  # ifIndex value meaning "the switch itself" (locally originated or destined)

ETH_VLAN = (0x8100, 0x88A8)
ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
PROTO_TCP, PROTO_UDP = 6, 17

#: Every reason SflowDecodeError can carry (metric label values).
REASONS = ("truncated", "version", "address_type", "sample_count", "record_count", "length", "sampling_rate")

_U32 = struct.Struct(">I")
_U32X2 = struct.Struct(">II")
_HEAD_V4 = struct.Struct(">II4sIIII")  # version, address type, IPv4, sub-agent, sequence, uptime, samples
_FLOW = struct.Struct(">IIIIIIII")  # sequence, source, rate, pool, drops, input, output, records
_FLOW_X = struct.Struct(">IIIIIIIIIII")  # sequence, src type, src index, rate, pool, drops, in fmt/val, out fmt/val, n
_COUNTERS = struct.Struct(">III")  # sequence, source, records
_COUNTERS_X = struct.Struct(">IIII")  # sequence, source type, source index, records
_HEADER = struct.Struct(">IIII")  # protocol, frame length, stripped, header length
_IF_COUNTERS = struct.Struct(">IIQIIQIIIIIIQIIIIII")
_OF_PORT = struct.Struct(">QI")
_ETH = struct.Struct(">6s6sH")
_TCI_TYPE = struct.Struct(">HH")
_PORTS = struct.Struct(">HH")


class SflowDecodeError(Exception):
    """A datagram that is not valid sFlow v5; ``reason`` is one of REASONS, ``detail`` says where."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class SampledPacket:
    """The sampled packet header record, decoded as far as its bytes go (fields None where they stop or do
    not apply: a non-Ethernet header, a frame neither IPv4 nor IPv6, a later IPv4 fragment, an IPv6 extension
    header, a header cut before the ports)."""

    protocol: int  # header_protocol; only 1 (Ethernet) is decoded further
    frame_length: int  # the original frame's length, FCS included
    stripped: int  # bytes removed from the frame before sampling (Open vSwitch: the 4-byte FCS)
    header: bytes
    dst_mac: str | None = None
    src_mac: str | None = None
    vlan: int | None = None  # VLAN id of the first 802.1Q tag
    ethertype: int | None = None  # after the tag
    src_ip: str | None = None
    dst_ip: str | None = None
    ip_proto: int | None = None
    src_port: int | None = None
    dst_port: int | None = None


@dataclass(frozen=True, slots=True)
class FlowSample:
    """A flow sample (format 1) or expanded flow sample (format 3); interfaces as (format, value) pairs."""

    sequence: int
    source_type: int
    source_index: int
    sampling_rate: int
    sample_pool: int
    drops: int
    input_format: int
    input_value: int
    output_format: int
    output_value: int
    packet: SampledPacket | None  # None when the sample carries no raw packet header record
    expanded: bool = False

    @property
    def input_ifindex(self) -> int | None:
        return _ifindex(self.input_format, self.input_value)

    @property
    def output_ifindex(self) -> int | None:
        """The one output ifIndex; None when unknown, internal, discarded or sent to several interfaces."""
        return _ifindex(self.output_format, self.output_value)


def _ifindex(fmt: int, value: int) -> int | None:
    return value if fmt == IF_INDEX and value not in (0, IF_INTERNAL) else None


@dataclass(frozen=True, slots=True)
class InterfaceCounters:
    """The generic interface counters record (counter format 1, RFC 2233 names)."""

    if_index: int
    if_type: int
    if_speed: int  # bit/s
    if_direction: int  # 0 unknown, 1 full duplex, 2 half duplex, 3 in, 4 out
    if_status: int  # bit 0 ifAdminStatus up, bit 1 ifOperStatus up
    in_octets: int
    in_ucast_pkts: int
    in_multicast_pkts: int
    in_broadcast_pkts: int
    in_discards: int
    in_errors: int
    in_unknown_protos: int
    out_octets: int
    out_ucast_pkts: int
    out_multicast_pkts: int
    out_broadcast_pkts: int
    out_discards: int
    out_errors: int
    promiscuous: int

    @property
    def admin_up(self) -> bool:
        return bool(self.if_status & 1)

    @property
    def oper_up(self) -> bool:
        return bool(self.if_status & 2)


@dataclass(frozen=True, slots=True)
class CounterSample:
    """A counter sample (format 2) or expanded counter sample (format 4) with the records we decode."""

    sequence: int
    source_type: int
    source_index: int
    interface: InterfaceCounters | None
    openflow_port: tuple[int, int] | None = None  # (datapath id, OpenFlow port number), Open vSwitch's record
    port_name: str | None = None
    expanded: bool = False


@dataclass(frozen=True, slots=True)
class Datagram:
    agent: str  # agent address as text ("" when the agent sent address type 0, unknown)
    sub_agent_id: int
    sequence: int
    uptime_ms: int
    flow_samples: tuple[FlowSample, ...]
    counter_samples: tuple[CounterSample, ...]
    skipped: int = 0  # samples of formats not decoded here


def decode(data: bytes) -> Datagram:
    """The Datagram in ``data``; SflowDecodeError (only) when it is not a valid sFlow v5 datagram."""
    try:
        return _decode(data)
    except SflowDecodeError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as exc:  # a check missed below: still ours
        raise SflowDecodeError("truncated", repr(exc)) from None


def _decode(data: bytes) -> Datagram:
    end = len(data)
    if end < 8:
        raise SflowDecodeError("truncated", "datagram header")
    version, addr_type = _U32X2.unpack_from(data, 0)
    if version != VERSION:
        raise SflowDecodeError("version", str(version))
    if addr_type == ADDR_IPV4:
        if end < 28:
            raise SflowDecodeError("truncated", "datagram header")
        _, _, raw, sub_agent, sequence, uptime, count = _HEAD_V4.unpack_from(data, 0)
        agent = socket.inet_ntoa(raw)
        off = 28
    elif addr_type in (ADDR_IPV6, ADDR_UNKNOWN):
        width = 16 if addr_type == ADDR_IPV6 else 0
        off = 8 + width
        if end < off + 16:
            raise SflowDecodeError("truncated", "datagram header")
        agent = socket.inet_ntop(socket.AF_INET6, data[8:off]) if width else ""
        sub_agent, sequence, uptime, count = struct.unpack_from(">IIII", data, off)
        off += 16
    else:
        raise SflowDecodeError("address_type", str(addr_type))
    if count > (end - off) // 8:  # every sample takes at least its tag and length
        raise SflowDecodeError("sample_count", str(count))
    flows: list[FlowSample] = []
    counters: list[CounterSample] = []
    skipped = 0
    for _ in range(count):
        if off + 8 > end:
            raise SflowDecodeError("truncated", "sample header")
        tag, length = _U32X2.unpack_from(data, off)
        off += 8
        stop = off + length
        if stop > end:
            raise SflowDecodeError("length", f"sample of {length} bytes")
        if tag == SAMPLE_FLOW or tag == SAMPLE_FLOW_EXPANDED:
            flows.append(_flow_sample(data, off, stop, tag == SAMPLE_FLOW_EXPANDED))
        elif tag == SAMPLE_COUNTERS or tag == SAMPLE_COUNTERS_EXPANDED:
            counters.append(_counter_sample(data, off, stop, tag == SAMPLE_COUNTERS_EXPANDED))
        else:
            skipped += 1
        off = stop + (-length & 3)  # XDR opaque: padded to a multiple of 4
    return Datagram(agent, sub_agent, sequence, uptime, tuple(flows), tuple(counters), skipped)


def _flow_sample(data: bytes, off: int, stop: int, expanded: bool) -> FlowSample:
    if expanded:
        if off + 44 > stop:
            raise SflowDecodeError("truncated", "expanded flow sample")
        (seq, src_type, src_index, rate, pool, drops, in_fmt, in_val, out_fmt, out_val,
         n) = _FLOW_X.unpack_from(data, off)
        off += 44
    else:
        if off + 32 > stop:
            raise SflowDecodeError("truncated", "flow sample")
        seq, source, rate, pool, drops, inp, out, n = _FLOW.unpack_from(data, off)
        off += 32
        src_type, src_index = source >> 24, source & 0xFFFFFF
        in_fmt, in_val, out_fmt, out_val = inp >> 30, inp & 0x3FFFFFFF, out >> 30, out & 0x3FFFFFFF
    if rate == 0:
        raise SflowDecodeError("sampling_rate", "0")
    if n > (stop - off) // 8:
        raise SflowDecodeError("record_count", str(n))
    packet = None
    for _ in range(n):
        if off + 8 > stop:
            raise SflowDecodeError("truncated", "flow record header")
        tag, length = _U32X2.unpack_from(data, off)
        off += 8
        rec_stop = off + length
        if rec_stop > stop:
            raise SflowDecodeError("length", f"flow record of {length} bytes")
        if tag == FLOW_RECORD_HEADER and packet is None:
            packet = _sampled_header(data, off, rec_stop)
        off = rec_stop + (-length & 3)
    return FlowSample(seq, src_type, src_index, rate, pool, drops, in_fmt, in_val, out_fmt, out_val, packet,
                      expanded)


def _sampled_header(data: bytes, off: int, stop: int) -> SampledPacket:
    if off + 16 > stop:
        raise SflowDecodeError("truncated", "sampled header")
    protocol, frame_length, stripped, hlen = _HEADER.unpack_from(data, off)
    off += 16
    if off + hlen > stop:
        raise SflowDecodeError("length", f"sampled header of {hlen} bytes")
    header = data[off:off + hlen]
    if protocol != HEADER_ETHERNET or hlen < 14:
        return SampledPacket(protocol, frame_length, stripped, header)
    dst, src, ethertype = _ETH.unpack_from(header, 0)
    pos, vlan = 14, None
    if ethertype in ETH_VLAN and hlen >= 18:
        tci, ethertype = _TCI_TYPE.unpack_from(header, 14)
        vlan, pos = tci & 0x0FFF, 18
    dst_mac, src_mac = dst.hex(":"), src.hex(":")
    if ethertype == ETH_IPV4 and hlen >= pos + 20 and header[pos] >> 4 == 4:
        ihl = (header[pos] & 0x0F) * 4
        proto, l4 = header[pos + 9], pos + ihl
        src_ip, dst_ip = socket.inet_ntoa(header[pos + 12:pos + 16]), socket.inet_ntoa(header[pos + 16:pos + 20])
        transport = ihl >= 20 and not ((header[pos + 6] & 0x1F) or header[pos + 7])  # not a later fragment
    elif ethertype == ETH_IPV6 and hlen >= pos + 40 and header[pos] >> 4 == 6:
        proto, l4, transport = header[pos + 6], pos + 40, True  # (an extension header: its number, no ports)
        src_ip = ipaddress.IPv6Address(header[pos + 8:pos + 24]).compressed
        dst_ip = ipaddress.IPv6Address(header[pos + 24:pos + 40]).compressed
    else:
        return SampledPacket(protocol, frame_length, stripped, header, dst_mac, src_mac, vlan, ethertype)
    src_port = dst_port = None
    if proto in (PROTO_TCP, PROTO_UDP) and transport and hlen >= l4 + 4:
        src_port, dst_port = _PORTS.unpack_from(header, l4)
    return SampledPacket(protocol, frame_length, stripped, header, dst_mac, src_mac, vlan, ethertype, src_ip,
                         dst_ip, proto, src_port, dst_port)


def _counter_sample(data: bytes, off: int, stop: int, expanded: bool) -> CounterSample:
    if expanded:
        if off + 16 > stop:
            raise SflowDecodeError("truncated", "expanded counter sample")
        seq, src_type, src_index, n = _COUNTERS_X.unpack_from(data, off)
        off += 16
    else:
        if off + 12 > stop:
            raise SflowDecodeError("truncated", "counter sample")
        seq, source, n = _COUNTERS.unpack_from(data, off)
        off += 12
        src_type, src_index = source >> 24, source & 0xFFFFFF
    if n > (stop - off) // 8:
        raise SflowDecodeError("record_count", str(n))
    interface = of_port = name = None
    for _ in range(n):
        if off + 8 > stop:
            raise SflowDecodeError("truncated", "counter record header")
        tag, length = _U32X2.unpack_from(data, off)
        off += 8
        rec_stop = off + length
        if rec_stop > stop:
            raise SflowDecodeError("length", f"counter record of {length} bytes")
        if tag == COUNTER_GENERIC:
            if length < 88:
                raise SflowDecodeError("truncated", "generic interface counters")
            interface = InterfaceCounters(*_IF_COUNTERS.unpack_from(data, off))
        elif tag == COUNTER_OPENFLOW_PORT:
            if length < 12:
                raise SflowDecodeError("truncated", "OpenFlow port record")
            of_port = _OF_PORT.unpack_from(data, off)
        elif tag == COUNTER_PORT_NAME:
            if length < 4:
                raise SflowDecodeError("truncated", "port name record")
            (size,) = _U32.unpack_from(data, off)
            if size > length - 4:
                raise SflowDecodeError("length", f"port name of {size} bytes")
            name = data[off + 4:off + 4 + size].decode("utf-8", "replace")
        off = rec_stop + (-length & 3)
    return CounterSample(seq, src_type, src_index, interface, of_port, name, expanded)
