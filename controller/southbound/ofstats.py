"""Flow-statistics replies (OpenFlow 1.3 multipart OFPMP_FLOW) read straight from their bytes into samples.

Ryu's parser builds an OFPFlowStats, an OFPMatch (one object per OXM field) and instruction objects per entry,
and the match is then read field by field: about 80 us per entry, so a 100k-entry poll cost seconds of the one
event-loop thread. The poll only needs each counting rule's 5-tuple and counters, so this module reads exactly
those from the reply body: a pure function over bytes, no Ryu. A parsed entry's match bytes are remembered
(bounded), since the same counting rules come back every poll.

Layout (OpenFlow 1.3.5, 7.3.5.2 and 7.2.2): ofp_header (8) + ofp_multipart_reply (type, flags, pad: 8), then
per entry ofp_flow_stats (48 bytes of fixed fields) + ofp_match (OXM TLVs, padded to 8) + instructions.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Any

from controller.state.flowkey import FlowKey, key_from_fields
from controller.state.monitor import FlowSample

OFP_VERSION = 4
OFPT_MULTIPART_REPLY = 19
OFPMP_FLOW = 1
OFPMPF_REPLY_MORE = 1
OFPMT_OXM = 1
OFPXMC_OPENFLOW_BASIC = 0x8000
HEADER = struct.Struct("!BBHIHH4x")  # ofp_header + ofp_multipart_reply
ENTRY = struct.Struct("!HBxII")  # length, table_id, pad, duration_sec, duration_nsec (then priority ...)
COUNTERS = struct.Struct("!QQ")  # packet_count, byte_count at offset 32 of an entry
MATCH_HEAD = struct.Struct("!HH")
ENTRY_FIXED = 48

# OXM basic field number -> (name, decoder) for the fields a counting rule carries
_IPV4 = lambda b: ".".join(map(str, b))  # noqa: E731
_IPV6 = lambda b: ipaddress.IPv6Address(b).compressed  # noqa: E731
_INT = lambda b: int.from_bytes(b, "big")  # noqa: E731
FIELDS = {0: ("in_port", _INT), 10: ("ip_proto", _INT), 11: ("ipv4_src", _IPV4), 12: ("ipv4_dst", _IPV4),
          13: ("tcp_src", _INT), 14: ("tcp_dst", _INT), 15: ("udp_src", _INT), 16: ("udp_dst", _INT),
          26: ("ipv6_src", _IPV6), 27: ("ipv6_dst", _IPV6)}
CACHE_LIMIT = 1 << 18


class MalformedReplyError(ValueError):
    """Bytes that are not a well-formed OpenFlow 1.3 flow-stats reply."""


@dataclass
class FlowStatsReply:
    xid: int
    more: bool  # OFPMPF_REPLY_MORE: further parts of the same reply follow
    samples: list[FlowSample] = field(default_factory=list)
    skipped: int = 0  # entries that name no transport flow (masked or missing 5-tuple fields)


_keys: dict[bytes, FlowKey | None] = {}  # match bytes -> FlowKey (or None: not a 5-tuple); bounded


def match_key(oxm: bytes) -> FlowKey | None:
    """The FlowKey named by an ofp_match's OXM TLVs (exact fields only), or None if they name none."""
    key = _keys.get(oxm)
    if key is not None or oxm in _keys:
        return key
    try:
        fields = _exact_fields(oxm)
        key = key_from_fields(fields) if fields is not None else None
    except (KeyError, TypeError, ValueError):  # (an address of the wrong width: ValueError)
        key = None
    if len(_keys) >= CACHE_LIMIT:
        _keys.clear()
    _keys[oxm] = key
    return key


def _exact_fields(oxm: bytes) -> dict[str, Any] | None:
    """The counting-rule fields among an ofp_match's OXM TLVs, decoded; None if one is masked or truncated."""
    fields, i, n = {}, 0, len(oxm)
    while i + 4 <= n:
        oxm_class, field_hm, length = struct.unpack_from("!HBB", oxm, i)
        value = oxm[i + 4:i + 4 + length]
        i += 4 + length
        if oxm_class != OFPXMC_OPENFLOW_BASIC or (field_hm >> 1) not in FIELDS:
            continue
        if field_hm & 1 or len(value) != length:  # masked (not one flow) or truncated
            return None
        name, decode = FIELDS[field_hm >> 1]
        fields[name] = decode(value)
    return fields


def parse_flow_stats_reply(dpid: int, data: bytes) -> FlowStatsReply:
    """One flow-stats reply message (header included) as samples; MalformedReplyError if the bytes are not one."""
    if len(data) < HEADER.size:
        raise MalformedReplyError(f"switch {dpid}: {len(data)} bytes is shorter than a multipart reply header")
    version, msg_type, msg_len, xid, mp_type, flags = HEADER.unpack_from(data)
    if (version, msg_type, mp_type) != (OFP_VERSION, OFPT_MULTIPART_REPLY, OFPMP_FLOW) or msg_len > len(data):
        raise MalformedReplyError(f"switch {dpid}: not an OpenFlow 1.3 flow-stats reply (version {version}, type "
                             f"{msg_type}, multipart type {mp_type}, length {msg_len} of {len(data)} bytes)")
    reply = FlowStatsReply(xid, bool(flags & OFPMPF_REPLY_MORE))
    samples = reply.samples
    offset = HEADER.size
    while offset < msg_len:
        if offset + ENTRY_FIXED + 4 > msg_len:
            raise MalformedReplyError(f"switch {dpid}: truncated flow-stats entry at byte {offset}")
        length, _table, sec, nsec = ENTRY.unpack_from(data, offset)
        if length < ENTRY_FIXED + 4 or offset + length > msg_len:
            raise MalformedReplyError(f"switch {dpid}: flow-stats entry length {length} at byte {offset}")
        _packets, byte_count = COUNTERS.unpack_from(data, offset + 32)
        match_type, match_len = MATCH_HEAD.unpack_from(data, offset + ENTRY_FIXED)
        key = None
        if match_type == OFPMT_OXM and 4 <= match_len <= length - ENTRY_FIXED:
            key = match_key(bytes(data[offset + ENTRY_FIXED + 4:offset + ENTRY_FIXED + match_len]))
        if key is None:
            reply.skipped += 1
        else:
            samples.append(FlowSample(key, dpid, byte_count, sec + nsec / 1e9))
        offset += length
    return reply
