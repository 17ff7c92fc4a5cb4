"""How the first packet of a new transport flow reaches the controller, once.

A new 5-tuple at a host port is copied to the controller (which then installs its counting rule) and forwarded
on ECMP meanwhile. With a plain OpenFlow 1.3 copy-and-forward rule (``te.flow_copy: controller``) every packet
of the flow goes up until the counting rule lands: a 100 KB TCP connection cost 5-30 packet-ins, because its
first round trips overtake the controller. Open vSwitch can mark the flow as seen in the data plane instead
(``te.flow_copy: learn``; ``auto``, the default, does so on every switch whose OpenFlow description says Open
vSwitch and copies with plain OpenFlow 1.3 elsewhere): the host-port rule resubmits to table 2, where a miss
*learns* an exact (in_port, 5-tuple) entry and copies the packet; the next packet of the flow meets the
learned entry and is not copied.

TCP segments with SYN set have a copy rule of their own (same actions). A datapath flow caches its actions, the
copy included, until Open vSwitch's revalidators notice the learned entry; without the split, the data segments
of a connection's first round trips shared the SYN's datapath flow and 5-12 of them went up. With it only SYN
segments use that cached flow. UDP has no such marker, so a fast UDP burst can still be copied a few times in its
first milliseconds; measured at 5 Mb/s: 40 iperf3 UDP tests (a TCP control connection and a UDP data flow each,
160 transport flows counting both directions) cost 161 new-flow packet-ins.

Learned entries expire after ``hold_s`` (a hard timeout of one poll period), so a flow the controller did not
count (past the ``te.new_flows_per_s`` budget) is offered again once per poll, and a flow resuming after its
counting rule idled out is copied again on its first packet. They carry ``COOKIE_SEEN``: the switch's own
state, never part of the desired rules, skipped by read-back.

With ``te.detection: sflow`` nothing is copied (``enabled`` false): elephants come from packet samples, so a
new flow costs no packet-in and no rule; host ports keep only their guards. With ``auto`` the same holds at the
switches whose sFlow export is heard (``sampled``, southbound/sflow/switch_detection.py), and only there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.desired.rules import (
    COOKIE_FLOW_MISS,
    ETH_IPV4,
    ETH_IPV6,
    PRIO_SEEN_MISS,
    PRIO_SEEN_SYN,
    TABLE_SEEN,
    FlowRule,
    match,
)
from controller.state.flowkey import L4_PREFIX, PROTO_TCP, PROTO_UDP

FLOW_MISS_BYTES = 128  # headers are all the controller needs to learn a 5-tuple
TCP_SYN = 0x002
MODES = ("auto", "learn", "controller")


def learned_fields(proto: int, eth_type: int = ETH_IPV4) -> tuple[tuple[str, int], ...]:
    """(OXM field, bits) a seen entry copies from the packet that made it: its in_port and 5-tuple (IPv4's or
    IPv6's addresses, by ``eth_type``)."""
    l4 = L4_PREFIX[proto]
    ip, bits = ("ipv6", 128) if eth_type == ETH_IPV6 else ("ipv4", 32)
    return (("in_port", 32), (f"{ip}_src", bits), (f"{ip}_dst", bits), (f"{l4}_src", 16), (f"{l4}_dst", 16))


def is_open_vswitch(mfr_desc: str, hw_desc: str) -> bool:
    """Does a switch's OpenFlow description say Open vSwitch (whose learn and resubmit actions we use)?"""
    return "open vswitch" in hw_desc.lower() or "nicira" in mfr_desc.lower()


@dataclass(frozen=True)
class NewFlowCopy:
    """The copy policy of the host-port rules that send new transport flows to the controller, per switch.

    ``mode`` is ``te.flow_copy``: ``learn`` (every switch marks seen flows), ``controller`` (none does) or
    ``auto`` (the switches in ``learning``: those whose description said Open vSwitch)."""

    mode: str = "controller"
    hold_s: int = 2  # how long a learned "seen" entry lasts (hard timeout)
    learning: frozenset[int] = frozenset()
    enabled: bool = True  # False: new flows are not copied at all (te.detection: sflow)
    sampled: frozenset[int] = frozenset()  # switches whose new flows are not copied (auto: on sFlow there)

    @classmethod
    def from_config(cls, tecfg: Mapping[str, Any]) -> NewFlowCopy:
        return cls(mode=tecfg["flow_copy"], hold_s=max(1, math.ceil(tecfg["poll_interval_s"])),
                   enabled=tecfg.get("detection", "flowstats") != "sflow")

    def copies(self, dpid: int) -> bool:
        """Whether new flows at ``dpid``'s host ports go to the controller at all."""
        return self.enabled and dpid not in self.sampled

    def learns(self, dpid: int) -> bool:
        return self.copies(dpid) and (self.mode == "learn" or (self.mode == "auto" and dpid in self.learning))

    def described(self, dpid: int, mfr_desc: str, hw_desc: str, learns: bool | None = None) -> NewFlowCopy:
        """The policy once a switch has said what it is (only ``auto`` changes): it learns if it is Open
        vSwitch, or if ``learns`` (its profile's flow_copy) says so."""
        if self.mode != "auto":
            return self
        ovs = is_open_vswitch(mfr_desc, hw_desc) if learns is None else learns
        learning = self.learning | {dpid} if ovs else self.learning - {dpid}
        return self if learning == self.learning else replace(self, learning=learning)

    def action(self, dpid: int) -> tuple:
        """The action that copies the packet up at ``dpid`` (in a rule that also forwards it)."""
        return ("resubmit", TABLE_SEEN) if self.learns(dpid) else ("controller", FLOW_MISS_BYTES)

    def seen_rules(self, dpid: int, eth_type: int = ETH_IPV4) -> list[FlowRule]:
        """The table-2 rules a learning switch needs for one IP family's flows (none for a plain copy): learn
        the 5-tuple, copy it up."""
        if not self.learns(dpid):
            return []
        kinds = [(PRIO_SEEN_SYN, PROTO_TCP, {"tcp_flags": (TCP_SYN, TCP_SYN)}), (PRIO_SEEN_MISS, PROTO_TCP, {}),
                 (PRIO_SEEN_MISS, PROTO_UDP, {})]
        return [FlowRule(dpid, prio, match(eth_type=eth_type, ip_proto=proto, **flags),
                         (("learn_seen", proto, self.hold_s, eth_type), ("controller", FLOW_MISS_BYTES)),
                         table=TABLE_SEEN, cookie=COOKIE_FLOW_MISS) for prio, proto, flags in kinds]


CONTROLLER_COPY = NewFlowCopy()


def unsupported(copy: NewFlowCopy, dpid: int, mfr_desc: str, hw_desc: str) -> str | None:
    """Why a switch cannot run ``copy`` (from its OpenFlow description), or None: with ``te.flow_copy: learn``
    forced, a switch without Open vSwitch's actions rejects the host-port rules (no new flow is ever counted;
    ``auto`` would have copied with plain OpenFlow 1.3 there)."""
    if copy.mode != "learn" or is_open_vswitch(mfr_desc, hw_desc):
        return None
    return (f"switch {dpid} ({mfr_desc.strip() or '?'} / {hw_desc.strip() or '?'}) is not Open vSwitch: "
            "te.flow_copy: learn needs its learn and resubmit actions; set te.flow_copy: auto or controller")
