"""Fake OpenFlow 1.3 switches that consume the controller's real messages (in the spirit of Faucet's fakeoftable):
flow mods and group mods are serialised to bytes, read back here (``decode_flow_mod``, not with the controller's
own parser) and applied to a table of rule values; barrier, flow-stats and group-description requests are answered
with real Ryu reply objects (a barrier's after every reply queued before it, as OpenFlow orders them). Strict as
Open vSwitch is: a goto to the flow's own or a lower table, a flow forwarding to a group the switch lacks, a group
added that exists or modified that does not are refused with their OpenFlow errors, and deleting a group deletes
the flows that forward to it. Each is recorded in ``violations``; every test that made fake switches fails if one
has any (tests/unit/controller/conftest.py), so make-before-break order bugs surface.

``FakeSwitch`` has what Ryu's Datapath offers the app (``id``, ``ofproto``, ``ofproto_parser``, ``set_xid``,
``send_msg``), so ``controller.app.MlrouteApp`` runs against it unchanged; its ``table`` (a SwitchRules) can be
traced with ``tests.oftable.trace``.
"""

from __future__ import annotations

import itertools
import struct

from controller.cluster import roles
from controller.desired.rules import ETH_IPV4, ETH_IPV6, FlowRule, SwitchRules
from controller.southbound import ofmsg
from controller.southbound.framework import ofproto_v1_3, ofproto_v1_3_parser

OFP = ofproto_v1_3
PARSER = ofproto_v1_3_parser
_XIDS = itertools.count(1)


class KilledError(Exception):
    """The controller process died at this message: the switch keeps what it received before it."""


class MessageBudget:
    """How many flow and group modifications the controller gets to send before it dies (``None``: no limit);
    shared by the switches of one controller process."""

    def __init__(self, left: int | None = None):
        self.left = left

    def take(self) -> None:
        if self.left is not None:
            if self.left <= 0:
                raise KilledError
            self.left -= 1


def parse_group_mod(buf: bytes) -> tuple[int, int, list]:
    """(command, group_id, buckets) of a serialised OFPGroupMod (Ryu 4.34 has no parser for it)."""
    command, _type, group_id = struct.unpack_from("!HBxI", buf, OFP.OFP_HEADER_SIZE)
    offset, buckets = OFP.OFP_GROUP_MOD_SIZE, []
    while offset < len(buf):
        bucket = PARSER.OFPBucket.parser(buf, offset)
        buckets.append(bucket)
        offset += bucket.len
    return command, group_id, buckets


NICIRA = 0x00002320  # Open vSwitch's experimenter id
NXAST_RESUBMIT_TABLE, NXAST_LEARN = 14, 16
# a learn spec's ip_proto destination: OXM's header (class 0x8000, field 10, 1 byte) or NXM's (vendor 0, field 6)
IP_PROTO_HEADERS = (0x80001401, 0x00000C01)
# and its eth_type destination: OXM's (field 5, 2 bytes) or NXM's (vendor 0, field 3)
ETH_TYPE_HEADERS = (0x80000A02, 0x00000602)
# the address fields a learn spec copies: OXM's ipv4_src / ipv4_dst (fields 11, 12: 4 bytes) and ipv6_src /
# ipv6_dst (26, 27: 16 bytes), and NXM's (vendor 0, fields 7, 8; vendor 1, fields 19, 20)
LEARNED_ADDRESSES = {0x80001604: ETH_IPV4, 0x80001804: ETH_IPV4, 0x00000E04: ETH_IPV4, 0x00001004: ETH_IPV4,
                     0x80003410: ETH_IPV6, 0x80003610: ETH_IPV6, 0x00012610: ETH_IPV6, 0x00012810: ETH_IPV6}


def decode_flow_mod(dpid: int, buf: bytes) -> tuple[int, FlowRule]:
    """(command, rule) of a serialised OFPFlowMod, read from its bytes here rather than by the controller's own
    parser (southbound/ofmsg.py), so an error shared by how the controller compiles a rule and how it reads one
    back cannot cancel out: the fixed header and the instructions by their OpenFlow 1.3 layout, the OXM match
    by the framework's match parser, the Open vSwitch actions (resubmit, learn) by their Nicira layout."""
    (cookie, _mask, table, command, idle, _hard, priority, _buffer, _out_port, _out_group,
     _flags) = struct.unpack_from("!QQBBHHHIIIH", buf, OFP.OFP_HEADER_SIZE)
    ofmatch = PARSER.OFPMatch.parser(buf, OFP.OFP_FLOW_MOD_SIZE - OFP.OFP_MATCH_SIZE)
    offset = OFP.OFP_FLOW_MOD_SIZE - OFP.OFP_MATCH_SIZE + (ofmatch.length + 7) // 8 * 8
    actions: list[tuple] = []
    while offset < len(buf):
        kind, length = struct.unpack_from("!HH", buf, offset)
        if kind == OFP.OFPIT_GOTO_TABLE:
            actions.append(("goto", buf[offset + 4]))
        elif kind == OFP.OFPIT_APPLY_ACTIONS:
            actions += _actions(buf, offset + 8, offset + length)
        else:
            raise AssertionError(f"unexpected instruction type {kind}")
        offset += length
    fields = dict(ofmatch.items())
    return command, FlowRule(dpid, priority, tuple(sorted(fields.items())), tuple(actions), table=table,
                             cookie=cookie, idle_timeout=idle)


def _actions(buf: bytes, offset: int, end: int) -> list[tuple]:
    out: list[tuple] = []
    while offset < end:
        kind, length = struct.unpack_from("!HH", buf, offset)
        if kind == OFP.OFPAT_OUTPUT:
            port, max_len = struct.unpack_from("!IH", buf, offset + 4)
            out.append(("controller", max_len) if port == OFP.OFPP_CONTROLLER else ("output", port))
        elif kind == OFP.OFPAT_GROUP:
            out.append(("group", struct.unpack_from("!I", buf, offset + 4)[0]))
        elif kind == OFP.OFPAT_EXPERIMENTER:
            vendor, subtype = struct.unpack_from("!IH", buf, offset + 4)
            assert vendor == NICIRA, f"unexpected experimenter {vendor:#x}"
            if subtype == NXAST_RESUBMIT_TABLE:
                out.append(("resubmit", buf[offset + 12]))
            elif subtype == NXAST_LEARN:
                out.append(_learn(buf, offset, offset + length))
            else:
                raise AssertionError(f"unexpected Nicira action {subtype}")
        else:
            raise AssertionError(f"unexpected action type {kind}")
        offset += length
    return out


def _learn(buf: bytes, start: int, end: int) -> tuple:
    """("learn_seen", ip_proto, hard_timeout, eth_type) of a Nicira learn action: its ip_proto and eth_type are
    the immediate values of the match specs whose destinations are those fields, and the addresses it copies
    must be of that eth_type's family."""
    hard = struct.unpack_from("!H", buf, start + 12)[0]
    offset, proto, eth_type, copied = start + 32, None, None, set()
    while offset + 2 <= end:
        header = struct.unpack_from("!H", buf, offset)[0]
        if header == 0:  # the padding after the last spec
            break
        immediate, n_bits = header >> 13 & 1, header & 0x3FF
        offset += 2
        if immediate:
            width = (n_bits + 15) // 16 * 2
            value = int.from_bytes(buf[offset:offset + width], "big")
            offset += width
        else:
            offset += 6  # the source field's header and offset
        dst = struct.unpack_from("!I", buf, offset)[0]
        offset += 6  # the destination field's header and offset
        if immediate and dst in IP_PROTO_HEADERS:
            proto = value
        elif immediate and dst in ETH_TYPE_HEADERS:
            eth_type = value
        elif not immediate and dst in LEARNED_ADDRESSES:
            copied.add(LEARNED_ADDRESSES[dst])
    assert proto is not None and eth_type is not None, "a learn action without an ip_proto or an eth_type"
    assert copied == {eth_type}, f"a learn action of eth_type {eth_type:#x} copying addresses of {copied}"
    return ("learn_seen", proto, hard, eth_type)


class Roles:
    """One switch's controller roles over its connections (OpenFlow 1.3 §6.3.6): a FakeSwitch per controller
    shares it (and its table) to stand for one switch connected to a cluster."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.of: dict[int, int] = {}  # id(connection) -> role (absent: EQUAL)

    def request(self, conn, role: int, generation: int) -> bool:
        """False when the request is STALE (an older generation than the switch has seen)."""
        if role in (OFP.OFPCR_ROLE_MASTER, OFP.OFPCR_ROLE_SLAVE):
            if self.generation is not None and roles.distance(generation, self.generation) < 0:
                return False
            self.generation = generation
        if role == OFP.OFPCR_ROLE_MASTER:
            self.of = {c: OFP.OFPCR_ROLE_SLAVE if r == OFP.OFPCR_ROLE_MASTER else r for c, r in self.of.items()}
        if role != OFP.OFPCR_ROLE_NOCHANGE:
            self.of[id(conn)] = role
        return True

    def role(self, conn) -> int:
        return self.of.get(id(conn), OFP.OFPCR_ROLE_EQUAL)


class FakeSwitch:
    ofproto = OFP
    ofproto_parser = PARSER

    made: list[FakeSwitch] = []  # every switch a test made (tests/unit/controller/conftest.py checks them)

    def __init__(self, dpid: int, deliver=None):
        FakeSwitch.made.append(self)
        self.id = dpid
        self.table = SwitchRules()  # what the switch holds, as rule values parsed from the bytes it received
        self.deliver = deliver  # callable(ryu event class name, reply message): the app's handler
        self.replies: list = []  # queued (name, msg) replies other than barriers, delivered by ``pump``
        self.flow_mods = 0  # flow and group modifications received
        self.packet_outs: list = []
        self.connected = True
        self.desc = (b"Nicira, Inc.", b"Open vSwitch")  # manufacturer, hardware (flowcopy.unsupported)
        self.budget = MessageBudget()  # a controller killed mid-sync: its later modifications never arrive
        self.table_limit: dict[int, int] = {}  # table id -> flow entries it takes (a small hardware table)
        self.errors_sent = 0
        self.reports_limit = True  # table features tell table_limit (else: 1,000,000, and TABLE_FULL past it)
        self.no_groups = False  # reports no group types (a switch without SELECT groups)
        self.violations: list[str] = []  # what Open vSwitch refuses or undoes (see the module docstring)
        self.refused_as_slave = 0  # writes refused because this connection is SLAVE
        self.roles = Roles()  # shared by the FakeSwitches that are one switch's connections to a cluster
        self.received: list[str] = []  # the class name of every message received, in order
        self.answers_barriers = True  # False: barrier requests go unanswered (a hung or overloaded switch)
        self.before_barrier = None  # called as a barrier request arrives, before it is answered (a wipe between)

    def set_xid(self, msg) -> None:
        msg.set_xid(next(_XIDS))

    def send_msg(self, msg) -> None:
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()
        buf = bytes(msg.buf)
        self.received.append(type(msg).__name__)
        if self._refused_as_slave(msg) or self._role_request(msg):
            return
        if isinstance(msg, PARSER.OFPFlowMod | PARSER.OFPGroupMod):
            self.budget.take()
        if isinstance(msg, PARSER.OFPFlowMod):
            self._flow_mod(msg, *decode_flow_mod(self.id, buf))
        elif isinstance(msg, PARSER.OFPGroupMod):
            self._group_mod(msg, *parse_group_mod(buf))
        elif isinstance(msg, PARSER.OFPBarrierRequest):
            self._barrier(msg)
        elif isinstance(msg, PARSER.OFPFlowStatsRequest):
            self._queue("EventOFPFlowStatsReply", PARSER.OFPFlowStatsReply(self), msg.xid, self._flow_stats(msg))
        elif isinstance(msg, PARSER.OFPGroupDescStatsRequest):
            body = [PARSER.OFPGroupDescStats(OFP.OFPGT_SELECT, g.group_id, self._buckets(g.ports))
                    for g in self.table.groups.values()]
            self._queue("EventOFPGroupDescStatsReply", PARSER.OFPGroupDescStatsReply(self), msg.xid, body)
        elif isinstance(msg, PARSER.OFPDescStatsRequest):
            reply = PARSER.OFPDescStatsReply(self)
            reply.xid, reply.flags = msg.xid, 0
            reply.body = PARSER.OFPDescStats(*self.desc, b"3.1.0", b"None", b"None")
            self.replies.append(("EventOFPDescStatsReply", reply))
        elif isinstance(msg, PARSER.OFPTableFeaturesStatsRequest):
            body = [PARSER.OFPTableFeaturesStats(table_id=t, name=b"t", metadata_match=0, metadata_write=0, config=0,
                                                 max_entries=self.table_limit.get(t, 1_000_000) if self.reports_limit
                                                 else 1_000_000, properties=[])
                    for t in range(3)]
            self._queue("EventOFPTableFeaturesStatsReply", PARSER.OFPTableFeaturesStatsReply(self), msg.xid, body)
        elif isinstance(msg, PARSER.OFPTableStatsRequest):
            counts = {t: 0 for t in range(3)}
            for rule in self.table.flows.values():
                counts[rule.table] = counts.get(rule.table, 0) + 1
            body = [PARSER.OFPTableStats(t, n, 0, 0) for t, n in sorted(counts.items())]
            self._queue("EventOFPTableStatsReply", PARSER.OFPTableStatsReply(self), msg.xid, body)
        elif isinstance(msg, PARSER.OFPGroupFeaturesStatsRequest):
            reply = PARSER.OFPGroupFeaturesStatsReply(self)
            types = 0 if self.no_groups else 0b1111
            reply.xid, reply.flags = msg.xid, 0
            reply.body = PARSER.OFPGroupFeaturesStats(types, 0, [0 if self.no_groups else 4096] * 4, [0] * 4)
            self.replies.append(("EventOFPGroupFeaturesStatsReply", reply))
        elif isinstance(msg, PARSER.OFPPacketOut):
            self.packet_outs.append(msg)
        else:
            raise AssertionError(f"unexpected message {type(msg).__name__}")

    def _barrier(self, msg) -> None:
        """Answered at once (the app may be waiting for it), after every reply queued before it."""
        if self.before_barrier is not None:
            self.before_barrier()
        if not self.answers_barriers:
            return
        self.pump()  # what came before is answered first (an error names its change before the barrier)
        reply = PARSER.OFPBarrierReply(self)
        reply.xid = msg.xid
        self.deliver("EventOFPBarrierReply", reply)

    def _refused_as_slave(self, msg) -> bool:
        """A write on a SLAVE connection: BAD_REQUEST / IS_SLAVE, nothing applied (as Open vSwitch)."""
        if not isinstance(msg, PARSER.OFPFlowMod | PARSER.OFPGroupMod | PARSER.OFPPacketOut) \
                or self.roles.role(self) != OFP.OFPCR_ROLE_SLAVE:
            return False
        self.refused_as_slave += 1
        self._refuse(msg, OFP.OFPET_BAD_REQUEST, OFP.OFPBRC_IS_SLAVE)
        return True

    def _role_request(self, msg) -> bool:
        """A role request answered (a reply, or ROLE_REQUEST_FAILED / STALE); False for any other message."""
        if not isinstance(msg, PARSER.OFPRoleRequest):
            return False
        if not self.roles.request(self, msg.role, msg.generation_id):
            self._refuse(msg, OFP.OFPET_ROLE_REQUEST_FAILED, OFP.OFPRRFC_STALE)
            return True
        reply = PARSER.OFPRoleReply(self, role=self.roles.role(self), generation_id=self.roles.generation or 0)
        reply.xid = msg.xid
        self.replies.append(("EventOFPRoleReply", reply))
        return True

    def _queue(self, name, reply, xid, body) -> None:
        reply.xid, reply.body, reply.flags = xid, body, 0
        self.replies.append((name, reply))

    def pump(self) -> int:
        """Deliver queued replies; returns how many."""
        n = 0
        while self.replies:
            self.deliver(*self.replies.pop(0))
            n += 1
        return n

    def wipe(self, groups: bool = True) -> None:
        """An operator's ``del-flows`` and ``del-groups`` while connected: every entry goes, and those that asked
        for it (SEND_FLOW_REM: mlroute's counting rules, the ones with an idle timeout) are reported removed by a
        delete, as Open vSwitch reports them (queued, delivered by ``pump``). ``groups`` False: the flows only
        (``del-flows``; ``del-groups`` may follow a moment later)."""
        for rule in self.table.flows.values():
            if rule.idle_timeout:
                removed = PARSER.OFPFlowRemoved(
                    self, cookie=rule.cookie, priority=rule.priority, reason=OFP.OFPRR_DELETE, table_id=rule.table,
                    duration_sec=1, duration_nsec=0, idle_timeout=rule.idle_timeout, hard_timeout=0, packet_count=1,
                    byte_count=1, match=PARSER.OFPMatch(**dict(rule.match)))
                self.replies.append(("EventOFPFlowRemoved", removed))
        self.table = SwitchRules(groups={} if groups else self.table.groups)

    # -- the table ---------------------------------------------------------------------------------------------
    def _flow_mod(self, mod, command, rule) -> None:
        self.flow_mods += 1
        if command in (OFP.OFPFC_ADD, OFP.OFPFC_MODIFY_STRICT):
            refused = self._refusal(rule)
            if refused is not None:
                self.violations.append(f"switch {self.id}: error {refused} for {rule}")
                self._refuse(mod, *refused)
                return
            limit = self.table_limit.get(rule.table)
            in_table = sum(1 for r in self.table.flows.values() if r.table == rule.table)
            if limit is not None and rule.key not in self.table.flows and in_table >= limit:
                self._refuse(mod, OFP.OFPET_FLOW_MOD_FAILED, OFP.OFPFMFC_TABLE_FULL)
                return
            self.table.add_flow(rule)
        elif command == OFP.OFPFC_DELETE_STRICT:
            self.table.flows.pop(rule.key, None)
        elif command == OFP.OFPFC_DELETE:
            self.table.flows = {k: r for k, r in self.table.flows.items()
                                if (r.cookie & mod.cookie_mask) != (mod.cookie & mod.cookie_mask)}
        else:
            raise AssertionError(f"unexpected flow-mod command {command}")

    def _refusal(self, rule) -> tuple[int, int] | None:
        """What Open vSwitch answers a flow that jumps back (a goto to its own or a lower table) or forwards to a
        group it does not hold: (error type, code), or None for a flow it takes."""
        for kind, *arg in rule.actions:
            if kind == "goto" and arg[0] <= rule.table:
                return OFP.OFPET_BAD_INSTRUCTION, OFP.OFPBIC_BAD_TABLE_ID
            if kind == "group" and arg[0] not in self.table.groups:
                return OFP.OFPET_BAD_ACTION, OFP.OFPBAC_BAD_OUT_GROUP
        return None

    def _refuse(self, msg, type_, code) -> None:
        """An error reply naming ``msg`` by its xid, delivered with the other replies (as a switch does)."""
        error = PARSER.OFPErrorMsg(self, type_=type_, code=code, data=bytes(getattr(msg, "buf", b""))[:64])
        error.xid = msg.xid
        self.errors_sent += 1
        self.replies.append(("EventOFPErrorMsg", error))

    def _group_mod(self, msg, command, group_id, buckets) -> None:
        """As Open vSwitch: adding a group it holds is GROUP_EXISTS, modifying one it lacks UNKNOWN_GROUP;
        deleting a group deletes the flows that forward to it (OpenFlow 1.3 s. 6.5): recorded as a violation,
        the make-before-break order broken (the controller must have moved them first)."""
        self.flow_mods += 1
        if self.no_groups:  # a switch without groups: any group-mod is an error (the controller must not send one)
            self.violations.append(f"switch {self.id}: group-mod {command} to a switch without groups")
            self._refuse(msg, OFP.OFPET_GROUP_MOD_FAILED, OFP.OFPGMFC_BAD_TYPE)
            return
        if command == OFP.OFPGC_DELETE:
            gone = set(self.table.groups) if group_id == OFP.OFPG_ALL else {group_id} & set(self.table.groups)
            lost = [k for k, r in self.table.flows.items() if any(a[0] == "group" and a[1] in gone for a in r.actions)]
            for key in lost:
                del self.table.flows[key]
            if lost:
                self.violations.append(f"switch {self.id}: group {group_id} deleted under {len(lost)} flows")
            for g in gone:
                del self.table.groups[g]
            return
        exists = group_id in self.table.groups
        refused = {(OFP.OFPGC_ADD, True): OFP.OFPGMFC_GROUP_EXISTS,
                   (OFP.OFPGC_MODIFY, False): OFP.OFPGMFC_UNKNOWN_GROUP}.get((command, exists))
        if refused is not None:
            self.violations.append(f"switch {self.id}: group {group_id} command {command}: error code {refused}")
            self._refuse(msg, OFP.OFPET_GROUP_MOD_FAILED, refused)
            return
        desc = PARSER.OFPGroupDescStats(OFP.OFPGT_SELECT, group_id, buckets)
        self.table.add_group(ofmsg.group_from_desc(self.id, desc))

    def _buckets(self, ports) -> list:
        return [PARSER.OFPBucket(weight=1, watch_port=p, watch_group=OFP.OFPG_ANY,
                                 actions=[PARSER.OFPActionOutput(p)]) for p in ports]

    def _flow_stats(self, request) -> list:
        mask = request.cookie_mask
        return [PARSER.OFPFlowStats(table_id=r.table, duration_sec=1, duration_nsec=0, priority=r.priority,
                                    idle_timeout=r.idle_timeout, hard_timeout=0, flags=0, cookie=r.cookie,
                                    packet_count=0, byte_count=0, match=PARSER.OFPMatch(**dict(r.match)),
                                    instructions=ofmsg.instructions(PARSER, r.actions))
                for r in self.table.flows.values() if (r.cookie & mask) == (request.cookie & mask)]
