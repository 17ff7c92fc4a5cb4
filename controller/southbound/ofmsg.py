"""OpenFlow 1.3 messages to and from rule values: the only module that knows how a value becomes bytes.

Builders take a datapath (anything with ``ofproto`` and ``ofproto_parser``, as Ryu's Datapath has) and return
the framework's message objects (Ryu or os-ken: controller.southbound.framework); readers turn its parsed replies and
packet-ins back into the core's values (``FlowRule``, ``GroupRule``, ``PacketIn``, ``FlowKey``). The tests
compile whole plans with these builders, serialise them, parse them back and run them through the fake table.
"""

from __future__ import annotations

import ipaddress
import logging
import struct
from typing import Any

from controller.decide.packet_in import ArpReply, PacketIn
from controller.desired.flowcopy import learned_fields
from controller.desired.rules import (
    COOKIE_BASE,
    COOKIE_SEEN,
    ETH_ARP,
    ETH_IPV4,
    ETH_IPV6,
    ETH_LLDP,
    ND_ADVERT,
    ND_SOLICIT,
    PRIO_SEEN,
    PROTO_ICMPV6,
    TABLE_SEEN,
    Change,
    FlowRule,
    GroupRule,
    match,
)
from controller.southbound import ofstats
from controller.southbound.framework import arp, ethernet, ipv4, packet
from controller.southbound.framework import ofproto_v1_3 as ofp
from controller.southbound.framework import ofproto_v1_3_parser as ofparser
from controller.state import capabilities
from controller.state.flowkey import L4_PREFIX, FlowKey, key_from_fields, present_fields
from controller.state.monitor import FlowSample, MalformedStatsError, sample_from_stat

#: mlroute's rules share the upper 16 bits of their cookies: read back and wiped by this prefix only.
COOKIE_PREFIX = COOKIE_BASE & 0xFFFF0000
COOKIE_PREFIX_MASK = 0xFFFF0000
COOKIE_EXACT = 0xFFFFFFFFFFFFFFFF  # cookie mask selecting one exact cookie
REPLY_MORE = ofp.OFPMPF_REPLY_MORE  # multipart flag: more parts of this reply follow
ETH_KIND = {ETH_ARP: "arp", ETH_IPV4: "ipv4", ETH_IPV6: "ipv6", ETH_LLDP: "lldp"}


# -- rule values -> messages ------------------------------------------------------------------------------------
def compile_change(dp, change: Change):
    """A rules.Change (plain values) as the OFPFlowMod / OFPGroupMod that applies it."""
    if isinstance(change.rule, GroupRule):
        return _group_mod(dp, change.op, change.rule)
    return _flow_mod(dp, change.op, change.rule)


def _group_mod(dp, op: str, rule: GroupRule):
    parser = dp.ofproto_parser
    command = {"add": ofp.OFPGC_ADD, "modify": ofp.OFPGC_MODIFY, "delete": ofp.OFPGC_DELETE}[op]
    buckets = [] if op == "delete" else [
        parser.OFPBucket(weight=1, watch_port=p, watch_group=ofp.OFPG_ANY, actions=[parser.OFPActionOutput(p)])
        for p in rule.ports]
    return parser.OFPGroupMod(dp, command, ofp.OFPGT_SELECT, rule.group_id, buckets)


def _flow_mod(dp, op: str, rule: FlowRule):
    parser = dp.ofproto_parser
    ofmatch = parser.OFPMatch(**dict(rule.match))
    if op == "delete":
        return parser.OFPFlowMod(dp, cookie=rule.cookie, table_id=rule.table, command=ofp.OFPFC_DELETE_STRICT,
                                 priority=rule.priority, match=ofmatch, out_port=ofp.OFPP_ANY,
                                 out_group=ofp.OFPG_ANY)
    command = ofp.OFPFC_ADD if op == "add" else ofp.OFPFC_MODIFY_STRICT
    flags = ofp.OFPFF_SEND_FLOW_REM if rule.idle_timeout else 0  # expiry must reach the controller
    return parser.OFPFlowMod(dp, cookie=rule.cookie, table_id=rule.table, command=command,
                             idle_timeout=rule.idle_timeout, priority=rule.priority, match=ofmatch,
                             instructions=instructions(parser, rule.actions), flags=flags)


def instructions(parser, actions: tuple) -> list:
    """A rule's action tuple as OpenFlow instructions (apply-actions first, then goto-table)."""
    applied, out = [], []
    for kind, *arg in actions:
        if kind == "output":
            applied.append(parser.OFPActionOutput(arg[0]))
        elif kind == "group":
            applied.append(parser.OFPActionGroup(arg[0]))
        elif kind == "controller":
            applied.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, arg[0]))
        elif kind == "goto":
            out.append(parser.OFPInstructionGotoTable(arg[0]))
        elif kind == "resubmit":
            applied.append(parser.NXActionResubmitTable(table_id=arg[0]))
        elif kind == "learn_seen":
            applied.append(learn_seen(parser, *arg))
        else:
            raise ValueError(f"unknown action {kind!r}")
    if applied:
        out.insert(0, parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, applied))
    return out


def learn_seen(parser, proto: int, hold_s: int, eth_type: int = ETH_IPV4):
    """Open vSwitch's learn action marking a transport flow as seen (flowcopy.py): an exact (in_port, 5-tuple)
    entry of ``eth_type``'s family in the seen table, no actions, gone after ``hold_s``."""
    specs = [parser.NXFlowSpecMatch(src=eth_type, dst=("eth_type", 0), n_bits=16),
             parser.NXFlowSpecMatch(src=proto, dst=("ip_proto", 0), n_bits=8)]
    specs += [parser.NXFlowSpecMatch(src=(name, 0), dst=(name, 0), n_bits=bits)
              for name, bits in learned_fields(proto, eth_type)]
    return parser.NXActionLearn(table_id=TABLE_SEEN, specs=specs, hard_timeout=hold_s, priority=PRIO_SEEN,
                                cookie=COOKIE_SEEN)


def _learned(action, field: str) -> int:
    """The immediate value a parsed ``learn_seen`` action sets ``field`` (ip_proto, eth_type) to."""
    for spec in action.specs:  # Open vSwitch answers with NXM names where one exists ("ip_proto_nxm")
        if isinstance(spec.dst, tuple) and spec.dst[0].removesuffix("_nxm") == field and isinstance(spec.src, int):
            return spec.src
    raise ValueError(f"learn action without an {field}")


def wipe(dp, groups: bool = True) -> list:
    """Delete every rule and group mlroute may have left on a switch (state unknown), then a barrier; the
    groups only where ECMP uses them (``groups``: a switch without groups gets no group-mod at all)."""
    parser = dp.ofproto_parser
    flows = parser.OFPFlowMod(dp, cookie=COOKIE_PREFIX, cookie_mask=COOKIE_PREFIX_MASK, table_id=ofp.OFPTT_ALL,
                              command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)
    delete_groups = [parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_SELECT, ofp.OFPG_ALL, [])] if groups else []
    return [flows, *delete_groups, parser.OFPBarrierRequest(dp)]


def flow_stats_request(dp, cookie: int = COOKIE_PREFIX, cookie_mask: int = COOKIE_PREFIX_MASK):
    """Flow stats of mlroute's rules (by default all of them; pass one cookie and COOKIE_EXACT for a kind)."""
    parser = dp.ofproto_parser
    return parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, cookie, cookie_mask,
                                      parser.OFPMatch())


def port_stats_request(dp):
    """Counters of every port of a switch (one multipart request; linkstats keeps the fabric links')."""
    return dp.ofproto_parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY)


def desc_request(dp):
    """The switch's description (manufacturer, hardware): says whether it is Open vSwitch (flowcopy.py)."""
    return dp.ofproto_parser.OFPDescStatsRequest(dp, 0)


def group_desc_request(dp):
    return dp.ofproto_parser.OFPGroupDescStatsRequest(dp, 0)


def table_features_request(dp):
    """What each table holds (``max_entries``). An empty body: a query (a body would reconfigure the tables)."""
    return dp.ofproto_parser.OFPTableFeaturesStatsRequest(dp, 0, [])


def group_features_request(dp):
    return dp.ofproto_parser.OFPGroupFeaturesStatsRequest(dp, 0)


def table_stats_request(dp):
    return dp.ofproto_parser.OFPTableStatsRequest(dp, 0)


def barrier_request(dp):
    return dp.ofproto_parser.OFPBarrierRequest(dp)


def role_request(dp, role: int, generation: int):
    """OFPT_ROLE_REQUEST with the cluster's generation (controller/cluster/roles.py): the switch fences whoever
    asks with an older one (a framework helper sends generation_id 0, which fences nobody)."""
    return dp.ofproto_parser.OFPRoleRequest(dp, role, generation)


def packet_out(dp, port: int, data: bytes):
    parser = dp.ofproto_parser
    return parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                               actions=[parser.OFPActionOutput(port)], data=data)


def arp_reply_frame(reply: ArpReply) -> bytes:
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst=reply.to_mac, src=reply.mac, ethertype=ETH_ARP))
    p.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=reply.mac, src_ip=reply.ip,
                           dst_mac=reply.to_mac, dst_ip=reply.to_ip))
    p.serialize()
    return p.data


# -- messages -> values -----------------------------------------------------------------------------------------
def actions_of(instruction_list: list) -> tuple:
    """Parsed OpenFlow instructions back as a rule's action tuple (the inverse of ``instructions``)."""
    out: list[tuple] = []
    for inst in instruction_list:
        if isinstance(inst, ofparser.OFPInstructionGotoTable):
            out.append(("goto", inst.table_id))
            continue
        for action in getattr(inst, "actions", []):
            if isinstance(action, ofparser.OFPActionGroup):
                out.append(("group", action.group_id))
            elif isinstance(action, ofparser.NXActionResubmitTable):
                out.append(("resubmit", action.table_id))
            elif isinstance(action, ofparser.NXActionLearn):
                out.append(("learn_seen", _learned(action, "ip_proto"), action.hard_timeout,
                            _learned(action, "eth_type")))
            elif action.port == ofp.OFPP_CONTROLLER:
                out.append(("controller", action.max_len))
            else:
                out.append(("output", action.port))
    return tuple(out)


def rule_from_stats(dpid: int, stat: Any) -> FlowRule:
    """One flow-stats entry (or a parsed OFPFlowMod) as the FlowRule it is."""
    return FlowRule(dpid, stat.priority, match(**dict(stat.match.items())), actions_of(stat.instructions),
                    table=stat.table_id, cookie=stat.cookie, idle_timeout=stat.idle_timeout)


def group_from_desc(dpid: int, desc: Any) -> GroupRule:
    """One group-description entry (or a parsed OFPGroupMod) as the GroupRule it is."""
    return GroupRule(dpid, desc.group_id, tuple(a.port for b in desc.buckets for a in b.actions))


def description(body: Any) -> tuple[str, str, str]:
    """(manufacturer, hardware, software) of a description reply, as text (Ryu leaves them bytes)."""
    text = [v.decode("utf-8", "replace").rstrip("\0") if isinstance(v, bytes) else str(v)
            for v in (body.mfr_desc, body.hw_desc, body.sw_desc)]
    return text[0], text[1], text[2]


def stats_fields(stat: Any) -> dict[str, Any]:
    """The 5-tuple fields (and in_port) of a flow-stats entry or flow-removed message."""
    return present_fields(stat.match.get)


def decode_packet_in(dpid: int, in_port: int, data: bytes) -> tuple[str, PacketIn | None]:
    """A packet-in's kind (arp / ipv4 / ipv6 / lldp / other) and, for ARP, IPv4 and IPv6, what the core needs of
    it. Raises on undecodable data (the shell logs and skips it)."""
    pkt = packet.Packet(data)
    eth = pkt.get_protocol(ethernet.ethernet)
    kind = ETH_KIND.get(eth.ethertype, "other") if eth is not None else "other"
    if kind == "arp":
        a = pkt.get_protocol(arp.arp)
        return kind, PacketIn(dpid, in_port, eth.src, eth.dst, eth.ethertype, arp_op=a.opcode, src_ip=a.src_ip,
                              dst_ip=a.dst_ip)
    if kind == "ipv4":
        ip = pkt.get_protocol(ipv4.ipv4)
        return kind, PacketIn(dpid, in_port, eth.src, eth.dst, eth.ethertype, src_ip=ip.src, dst_ip=ip.dst)
    if kind == "ipv6":
        return kind, _ipv6_packet_in(dpid, in_port, eth.src, eth.dst, data)
    return kind, None


IPV6_AT = 14  # an untagged frame's IPv6 header (the fabric's host ports carry no VLAN tags)


def _ipv6_packet_in(dpid: int, in_port: int, eth_src: str, eth_dst: str, data: bytes) -> PacketIn:
    """An IPv6 packet-in from its fixed header, and a neighbour solicitation's or advertisement's type and
    target (RFC 4861: they carry no extension headers); the unspecified source (duplicate-address detection)
    as ""."""
    src, dst, next_header = _ipv6_fixed_header(data, 0)
    nd_type, target = 0, ""
    icmp = IPV6_AT + 40
    if next_header == PROTO_ICMPV6 and len(data) >= icmp + 24 and data[icmp] in (ND_SOLICIT, ND_ADVERT):
        nd_type, target = data[icmp], ipaddress.IPv6Address(data[icmp + 8:icmp + 24]).compressed
    return PacketIn(dpid, in_port, eth_src, eth_dst, ETH_IPV6, src_ip="" if src == "::" else src, dst_ip=dst,
                    nd_type=nd_type, nd_target=target)


def _ipv6_fixed_header(data: bytes, after: int) -> tuple[str, str, int]:
    """An untagged frame's IPv6 source, destination (``ipaddress``'s compressed form) and next header;
    ValueError unless the header and ``after`` more bytes are there."""
    if len(data) < IPV6_AT + 40 + after or data[IPV6_AT] >> 4 != 6:
        raise ValueError("not an IPv6 header")
    return (ipaddress.IPv6Address(data[IPV6_AT + 8:IPV6_AT + 24]).compressed,
            ipaddress.IPv6Address(data[IPV6_AT + 24:IPV6_AT + 40]).compressed, data[IPV6_AT + 6])


def decode_flow_key(data: bytes) -> FlowKey:
    """The 5-tuple of a new-flow copy (TCP or UDP over IPv4 or IPv6); raises if the packet is not one."""
    if data[12:14] == ETH_IPV6.to_bytes(2, "big"):
        return _ipv6_flow_key(data)
    pkt = packet.Packet(data)
    ip = pkt.get_protocol(ipv4.ipv4)
    l4 = pkt.protocols[2]
    prefix = L4_PREFIX[ip.proto]
    return key_from_fields({"ip_proto": ip.proto, "ipv4_src": ip.src, "ipv4_dst": ip.dst,
                            f"{prefix}_src": l4.src_port, f"{prefix}_dst": l4.dst_port})


def _ipv6_flow_key(data: bytes) -> FlowKey:
    """An IPv6 new-flow copy's 5-tuple from its fixed header and the ports after it (the copy rules match
    ip_proto, which Open vSwitch reads past extension headers; a packet that has any is refused here, as its
    ports are not where the fixed header ends)."""
    src, dst, proto = _ipv6_fixed_header(data, 4)
    if proto not in L4_PREFIX:
        raise ValueError("not a TCP or UDP packet over IPv6 without extension headers")
    src_port, dst_port = struct.unpack_from("!HH", data, IPV6_AT + 40)
    return FlowKey(src, dst, proto, src_port, dst_port)


# -- flow-stats replies -----------------------------------------------------------------------------------------
LOG = logging.getLogger("mlroute")


class LazyFlowStats:
    """A flow-stats entry as Ryu's reply parser leaves it: its length read, the rest parsed by Ryu on first use.

    A poll's counting rules are read from the reply bytes by ``ofstats`` (Ryu's per-entry objects cost about
    80 us each: seconds per 100k-entry poll on the event-loop thread); a read-back of a reconnecting switch
    uses every field, and gets them from Ryu's own parser here.
    """

    __slots__ = ("buf", "offset", "length", "_parsed")

    @classmethod
    def parser(cls, buf, offset):
        entry = cls()
        entry.buf, entry.offset, entry._parsed = buf, offset, None
        (entry.length,) = struct.unpack_from("!H", buf, offset)
        return entry

    def __getattr__(self, name):  # only for what is not a slot: every OFPFlowStats field
        if self._parsed is None:
            self._parsed = ofparser.OFPFlowStats.parser(self.buf, self.offset)
        return getattr(self._parsed, name)


ofparser.OFPFlowStatsReply.cls_stats_body_cls = LazyFlowStats


class LazyTableFeatures:
    """A table-features entry read to its ``max_entries`` only: Open vSwitch describes 254 tables with every
    match field, instruction and action each (hundreds of kilobytes), of which the controller needs one number
    per table; Ryu's full parse of that costs tens of milliseconds per connecting switch."""

    __slots__ = ("length", "table_id", "max_entries")
    length: int
    table_id: int
    max_entries: int
    FIXED = struct.Struct("!HB5x32x8x8x4xI")  # ofp_table_features up to max_entries (OpenFlow 1.3.5 7.3.5.5)

    @classmethod
    def parser(cls, buf, offset):
        entry = cls()
        entry.length, entry.table_id, entry.max_entries = cls.FIXED.unpack_from(buf, offset)
        if entry.length < cls.FIXED.size:
            raise MalformedStatsError(f"table-features entry of {entry.length} bytes")
        return entry


class TableCounts:
    """A whole table-stats reply body as one entry: ``active_count`` of the tables mlroute uses, read in one
    pass over the 24-byte entries (a per-entry object for each of Open vSwitch's 254 tables, every poll and on
    every switch, would cost the event loop more than the rest of the poll)."""

    __slots__ = ("length", "counts")
    ENTRY = struct.Struct("!B3xI16x")
    length: int
    counts: dict[int, int]  # ofp_table_stats: table_id, pad, active_count, lookup and matched counts

    @classmethod
    def parser(cls, buf, offset):
        body = memoryview(buf)[offset:]
        if len(body) % cls.ENTRY.size:
            raise MalformedStatsError(f"table-stats body of {len(body)} bytes is no whole number of entries")
        entry = cls()
        entry.length = len(body)
        entry.counts = dict(cls.ENTRY.iter_unpack(body))
        return entry


ofparser.OFPTableFeaturesStatsReply.cls_stats_body_cls = LazyTableFeatures
ofparser.OFPTableStatsReply.cls_stats_body_cls = TableCounts


def table_capacities(entries: list) -> dict[int, int]:
    """Table id -> max_entries from a table-features reply's entries (lazy ones, or Ryu's own objects)."""
    return {int(e.table_id): int(e.max_entries) for e in entries}


def table_counts(entries: list) -> dict[int, int]:
    """Table id -> active_count from a table-stats reply's entries (TableCounts, or Ryu's OFPTableStats)."""
    counts: dict[int, int] = {}
    for entry in entries:
        if isinstance(entry, TableCounts):
            counts.update(entry.counts)
        else:
            counts[int(entry.table_id)] = int(entry.active_count)
    return counts


def group_features(body: Any) -> tuple[frozenset[str], dict[str, int]]:
    """(group types, max groups per type) from a group-features reply body."""
    return (capabilities.group_types_from_bitmap(body.types),
            capabilities.max_groups_by_type(body.types, body.max_groups))


def poll_samples(dpid: int, msg: Any) -> list[FlowSample]:
    """The counting-rule samples of one flow-stats reply part: from its bytes when it came off the wire,
    else (a reply built in-process) from its entries; entries that name no flow are logged and skipped."""
    if getattr(msg, "buf", None):
        reply = ofstats.parse_flow_stats_reply(dpid, msg.buf)
        if reply.skipped:
            LOG.warning("switch %s: %d flow-stats entries without a usable 5-tuple skipped", dpid, reply.skipped)
        return reply.samples
    samples = []
    for stat in msg.body:
        try:
            samples.append(sample_from_stat(dpid, stats_fields(stat), stat.byte_count, stat.duration_sec,
                                            stat.duration_nsec))
        except (MalformedStatsError, AttributeError) as exc:
            LOG.warning("skipping flow-stats entry: %s", exc)
    return samples

