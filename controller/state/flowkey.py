"""A transport flow's identity (the IPv4 or IPv6 5-tuple) and its one mapping to and from OpenFlow match fields.

Counting rules, pinned hops, flow-stats entries and flow-removed messages all name a flow by these fields; this
module is the only place that knows which OXM fields carry which part of the 5-tuple. IPv6 addresses are kept in
``ipaddress``'s compressed form (as the controller writes hosts), so one flow has one key however a switch or a
sampled header spelled it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806
ETH_IPV6 = 0x86DD
ETH_LLDP = 0x88CC

Match = tuple[tuple[str, Any], ...]  # a canonical match: sorted ((OXM field name, value), ...)


def match(**fields: Any) -> Match:
    """A canonical (hashable, order-free) match."""
    return tuple(sorted(fields.items()))


PROTO_TCP = 6
PROTO_UDP = 17
#: A host pair counted as a whole (one counting rule for all its transport flows, where a table is too tight
#: for one per 5-tuple): a FlowKey with this protocol and no ports names the pair's IP traffic.
PROTO_PAIR = 0
L4_PREFIX = {PROTO_TCP: "tcp", PROTO_UDP: "udp"}  # OXM field prefix of the transport ports

#: Every OXM field a counting rule's match can carry: what to read back from a flow-stats entry.
MATCH_FIELDS = ("in_port", "ip_proto", "ipv4_src", "ipv4_dst", "ipv6_src", "ipv6_dst", "tcp_src", "tcp_dst",
                "udp_src", "udp_dst")


def is_ipv6(ip: str) -> bool:
    """An IPv6 address (as the controller writes them: ``ipaddress``'s compressed form), not dotted IPv4."""
    return ":" in ip


def is_link_local(ip: str) -> bool:
    """An IPv6 link-local address (fe80::/10): its scope is one link, and a fabric of switches is many links, so
    it is never a host the fabric forwards to (a host talks across it from its global addresses)."""
    head, colon, _ = ip.partition(":")
    return bool(colon) and len(head) == 4 and head[:3].lower() in LINK_LOCAL_HEADS


LINK_LOCAL_HEADS = frozenset(f"fe{c}" for c in "89ab")  # fe80::/10: a first group fe80 .. febf


def ip_fields(src_ip: str, dst_ip: str) -> dict[str, Any]:
    """The match fields of IP traffic from ``src_ip`` to ``dst_ip`` (both of one family): its eth_type and the
    family's source and destination fields."""
    if is_ipv6(src_ip):
        return {"eth_type": ETH_IPV6, "ipv6_src": src_ip, "ipv6_dst": dst_ip}
    return {"eth_type": ETH_IPV4, "ipv4_src": src_ip, "ipv4_dst": dst_ip}


def canonical_ip(value: str) -> str:
    """An IPv4 or IPv6 address as the controller writes it (IPv6 compressed); ValueError if it is not one."""
    return ipaddress.ip_address(value).compressed


@dataclass(frozen=True, order=True, repr=False)
class FlowKey:
    """A transport flow: two iperf flows between the same hosts on different ports are two keys."""

    src_ip: str
    dst_ip: str
    proto: int
    src_port: int
    dst_port: int

    def __repr__(self) -> str:
        """The dataclass's repr, written out: ECMP's estimate hashes it for every elephant of a decision (10k:
        8 ms with the generated one, which guards against recursion that these fields cannot have)."""
        return (f"FlowKey(src_ip={self.src_ip!r}, dst_ip={self.dst_ip!r}, proto={self.proto!r}, "
                f"src_port={self.src_port!r}, dst_port={self.dst_port!r})")

    def as_dict(self) -> dict[str, Any]:
        return {"src_ip": self.src_ip, "dst_ip": self.dst_ip, "proto": self.proto,
                "src_port": self.src_port, "dst_port": self.dst_port}

    @property
    def is_pair(self) -> bool:
        """A host pair counted as a whole, not one transport flow (PROTO_PAIR)."""
        return self.proto == PROTO_PAIR

    def sort_key(self) -> tuple[str, str, int, int, int]:
        """The fields the ordering compares, as a plain tuple: sorting 10k keys by it compares in C (the
        dataclass's own comparisons are Python calls, 30 ms of event loop per 10k-key sort)."""
        return (self.src_ip, self.dst_ip, self.proto, self.src_port, self.dst_port)


def pair_key(key: FlowKey) -> FlowKey:
    """The key that counts ``key``'s host pair as a whole."""
    return FlowKey(key.src_ip, key.dst_ip, PROTO_PAIR, 0, 0)


def five_tuple_match(key: FlowKey, in_port: int | None = None) -> Match:
    """The exact match of ``key`` (and of its ingress port, for the counting rule); a pair key's match is the
    pair's IP traffic."""
    fields = ip_fields(key.src_ip, key.dst_ip)
    if not key.is_pair:
        l4 = L4_PREFIX[key.proto]
        fields.update({"ip_proto": key.proto, f"{l4}_src": key.src_port, f"{l4}_dst": key.dst_port})
    if in_port is not None:
        fields["in_port"] = in_port
    return match(**fields)


def key_from_fields(fields: Mapping[str, Any]) -> FlowKey:
    """The FlowKey of a match given as OXM field -> value (a pair key where it names no transport protocol);
    KeyError / ValueError / TypeError if it is not one."""
    if "ipv6_src" in fields:
        src, dst = canonical_ip(str(fields["ipv6_src"])), canonical_ip(str(fields["ipv6_dst"]))
    else:
        src, dst = str(fields["ipv4_src"]), str(fields["ipv4_dst"])
    if "ip_proto" not in fields:
        return FlowKey(src, dst, PROTO_PAIR, 0, 0)
    proto = int(fields["ip_proto"])
    l4 = L4_PREFIX[proto]
    return FlowKey(src, dst, proto, int(fields[f"{l4}_src"]), int(fields[f"{l4}_dst"]))


def present_fields(get: Callable[[str], Any]) -> dict[str, Any]:
    """The 5-tuple fields (and in_port) a match has, read through its ``get`` (Ryu's OFPMatch.get, dict.get)."""
    out = {}
    for name in MATCH_FIELDS:
        value = get(name)
        if value is not None:
            out[name] = value
    return out
