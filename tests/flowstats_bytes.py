"""OpenFlow 1.3 flow-stats replies as a switch sends them (bytes), for the parser test and the benchmark.

Matches and instructions are serialised by Ryu's own encoders (what Open vSwitch puts on the wire is the same
OXM encoding); the ofp_flow_stats fixed fields and the multipart header are packed here.
"""

import struct

from controller.desired.rules import COOKIE_FLOW, PRIO_FLOW, TABLE_CLASSIFY
from controller.state.flowkey import five_tuple_match

MAX_MSG = 65535


def stats_entry(match_fields, byte_count, duration_s, instructions=None, priority=PRIO_FLOW, cookie=COOKIE_FLOW):
    """One ofp_flow_stats entry for a rule matching ``match_fields`` (OXM name -> value or (value, mask))."""
    from controller.southbound.framework import ofproto_v1_3_parser as p

    buf = bytearray()
    p.OFPMatch(**match_fields).serialize(buf, 0)
    inst = bytearray()
    for i in instructions if instructions is not None else [p.OFPInstructionGotoTable(1)]:
        i.serialize(inst, len(inst))
    body = bytes(buf) + bytes(inst)
    head = struct.pack("!HBxIIHHHH4xQQQ", 48 + len(body), TABLE_CLASSIFY, int(duration_s),
                       int(round(duration_s % 1 * 1e9)), priority, 10, 0, 1, cookie, byte_count // 1000, byte_count)
    return head + body


def counting_entry(key, in_port, byte_count, duration_s):
    return stats_entry(dict(five_tuple_match(key, in_port)), byte_count, duration_s)


def replies(entries, xid):
    """OFPMP_FLOW reply messages carrying ``entries`` (split so that no message exceeds 64 KiB)."""
    parts, part, size = [], [], 16
    for e in entries:
        if size + len(e) > MAX_MSG:
            parts.append(part)
            part, size = [], 16
        part.append(e)
        size += len(e)
    parts.append(part)
    msgs = []
    for i, part in enumerate(parts):
        body = b"".join(part)
        more = 1 if i < len(parts) - 1 else 0
        msgs.append(struct.pack("!BBHIHH4x", 4, 19, 16 + len(body), xid, 1, more) + body)
    return msgs
